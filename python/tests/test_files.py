"""read_file, write_file (incl. content_from_step), list_files, delete_file and path safety."""

import base64
import json
import os

import pytest
from open_codex_lib import execute_operation


def run(files, llm_config=None):
    result = execute_operation(files.path, llm_config or {})
    json.dumps(result)  # every result must be JSON-serialisable
    return result


# --- read_file ---------------------------------------------------------------


def test_read_file(make_step):
    files = make_step(
        "read_file",
        {"file_path": "./src//utils.py"},
        inputs={"src/utils.py": "def f():\n    return 'é'\n"},
    )
    result = run(files)
    assert result["status"] == "success"
    assert result["content"] == "def f():\n    return 'é'\n"
    assert result["size"] == len("def f():\n    return 'é'\n".encode())
    assert result["binary"] is False
    assert result["truncated"] is False
    assert result["output_files"] == [] and result["deleted_files"] == []


def test_read_file_truncates_at_cap_without_splitting_a_character(make_step):
    files = make_step(
        "read_file",
        {"file_path": "big.txt"},
        inputs={"big.txt": "aé" * 10},
        limits={"timeout_seconds": 5, "max_output_bytes": 5},
    )
    result = run(files)
    assert result["status"] == "success"
    assert result["truncated"] is True
    assert result["size"] == 30
    assert result["content"] == "aéa"  # 5 bytes would cut the second 'é' in half
    assert "truncated to the first 5 bytes" in result["message"]


def test_read_binary_file(make_step):
    files = make_step("read_file", {"file_path": "blob.bin"}, inputs={"blob.bin": b"\x00\xff\x01"})
    result = run(files)
    assert result["status"] == "success"
    assert result["binary"] is True
    assert result["size"] == 3
    assert result["content"] is None
    assert result["encoding"] == "base64"
    assert base64.b64decode(result["content_base64"]) == b"\x00\xff\x01"


def non_utf8_bytes(size):
    """``size`` bytes that are not UTF-8 from the first byte on: every value, 0xff first."""
    every = bytes(range(255, -1, -1))
    return every * (size // 256) + every[: size % 256]


def test_read_non_utf8_file_gives_its_exact_bytes_in_base64_and_no_text(make_step):
    blob = non_utf8_bytes(3000)
    files = make_step("read_file", {"file_path": "blob.bin"}, inputs={"blob.bin": blob})
    result = run(files)
    assert result["status"] == "success"
    assert result["content"] is None  # never replacement characters posing as the content
    assert base64.b64decode(result["content_base64"], validate=True) == blob
    assert result["encoding"] == "base64"
    assert (result["size"], result["binary"], result["truncated"]) == (3000, True, False)
    assert result["message"] == (
        "read blob.bin (3000 bytes): not UTF-8 text, so content is null and the exact "
        "bytes are in content_base64"
    )


def test_read_utf8_text_with_nul_stays_text(make_step):
    files = make_step("read_file", {"file_path": "a.dat"}, inputs={"a.dat": "a\0é\n"})
    result = run(files)
    assert result["status"] == "success"
    assert result["content"] == "a\0é\n" and result["binary"] is True
    assert "content_base64" not in result and "encoding" not in result


def test_read_truncated_non_utf8_file_gives_the_exact_bytes_read(make_step):
    blob = non_utf8_bytes(300)
    files = make_step(
        "read_file",
        {"file_path": "blob.bin"},
        inputs={"blob.bin": blob},
        limits={"timeout_seconds": 5, "max_output_bytes": 100},
    )
    result = run(files)
    assert result["status"] == "success"
    assert result["content"] is None and result["truncated"] is True
    assert base64.b64decode(result["content_base64"]) == blob[:100]


def test_read_missing_file(make_step):
    result = run(make_step("read_file", {"file_path": "nope.py"}))
    assert result["status"] == "failure"
    assert result["message"] == (
        "file not found: nope.py (the repository has no such file at this point of the flow)"
    )


def test_read_directory_is_refused(make_step):
    result = run(make_step("read_file", {"file_path": "src"}, inputs={"src/a.py": ""}))
    assert result["status"] == "failure"
    assert "src is not a regular file" in result["message"]


@pytest.mark.parametrize(
    "file_path, expected",
    [
        ("../x", "contains a '..' component"),
        ("a/../../x", "contains a '..' component"),
        ("/etc/passwd", "is absolute"),
        ("", "is empty"),
        (".", "names the repository root"),
        (42, "must be a repository-relative path string, got int"),
        (None, "missing parameter params.file_path"),
    ],
)
def test_bad_file_paths_are_refused(make_step, file_path, expected):
    for operation in ("read_file", "delete_file", "write_file"):
        files = make_step(operation, {"file_path": file_path, "content": "x"})
        result = run(files)
        assert result["status"] == "failure", operation
        assert expected in result["message"], operation
        assert result["output_files"] == []
    assert os.listdir(files.output_dir) == []


def test_symlink_in_input_dir_pointing_outside_is_refused(make_step, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    files = make_step("read_file", {"file_path": "link.txt"})
    os.symlink(secret, files.input_dir / "link.txt")
    result = run(files)
    assert result["status"] == "failure"
    assert "outside the input directory" in result["message"]
    assert "top secret" not in json.dumps(result)


def test_symlink_inside_input_dir_is_followed(make_step):
    files = make_step("read_file", {"file_path": "alias.txt"}, inputs={"real.txt": "hello"})
    os.symlink("real.txt", files.input_dir / "alias.txt")
    assert run(files)["content"] == "hello"


# --- write_file --------------------------------------------------------------


def test_write_file_creates_parent_dirs(make_step):
    files = make_step("write_file", {"file_path": "pkg/sub/new.py", "content": "x = 'é'\n"})
    result = run(files)
    assert result["status"] == "success"
    assert result["output_files"] == ["pkg/sub/new.py"]
    assert result["bytes"] == len("x = 'é'\n".encode())
    assert (files.output_dir / "pkg/sub/new.py").read_text(encoding="utf-8") == "x = 'é'\n"


def test_literal_content_that_drops_the_files_functions_is_refused(make_step):
    # Issue 37: a 0.5B plan for "add is_palindrome to strutils.py" was one write_file holding
    # only the new function; it replaced the file (272 -> 103 bytes, two functions lost).
    original = (
        "def reverse(text):\n    return text[::-1]\n\n\n"
        "def shout(text):\n    return text.upper() + '!'\n"
    )
    new = "def is_palindrome(text):\n    return text == text[::-1]\n"
    files = make_step(
        "write_file",
        {"file_path": "strutils.py", "content": new},
        inputs={"strutils.py": original},
    )
    result = run(files)
    assert result["status"] == "failure"
    assert "leaves out function reverse, function shout" in result["message"]
    assert "use modify_code" in result["message"]
    assert not (files.output_dir / "strutils.py").exists()
    # The whole file, with the new function: written.
    files = make_step(
        "write_file",
        {"file_path": "strutils.py", "content": original + "\n\n" + new},
        inputs={"strutils.py": original},
    )
    assert run(files)["status"] == "success"


def test_write_empty_content(make_step):
    files = make_step("write_file", {"file_path": "empty.txt", "content": ""})
    result = run(files)
    assert result["status"] == "success" and result["bytes"] == 0
    assert (files.output_dir / "empty.txt").read_bytes() == b""


@pytest.mark.parametrize(
    "params, expected",
    [
        (
            {"file_path": "a.py"},
            "needs exactly one of params.content, params.content_from_step",
        ),
        (
            {"file_path": "a.py", "content": "x", "content_from_step": "step1"},
            "found: content, content_from_step",
        ),
        (
            {"file_path": "a.py", "content": 5},
            "params.content must be a string, got int",
        ),
    ],
)
def test_write_file_bad_params(make_step, params, expected):
    files = make_step("write_file", params)
    result = run(files)
    assert result["status"] == "failure"
    assert expected in result["message"]
    assert os.listdir(files.output_dir) == []


def test_write_through_symlinked_dir_out_of_output_is_refused(make_step, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    files = make_step("write_file", {"file_path": "escape/evil.py", "content": "x"})
    os.symlink(outside, files.output_dir / "escape")
    result = run(files)
    assert result["status"] == "failure"
    assert "outside the output directory" in result["message"]
    assert list(outside.iterdir()) == []


def test_write_file_with_instructions_needs_llm(make_step):
    files = make_step("write_file", {"file_path": "a.py", "instructions": "write a hello world"})
    result = run(files)
    assert result["status"] == "failure"
    assert result["message"] == (
        "operation write_file with params.instructions needs an LLM: "
        "run it from ocflow with an endpoint configured"
    )


# --- content_from_step ---------------------------------------------------------


def test_content_from_step_result_content(make_step, earlier_step):
    ref = earlier_step(
        "step1",
        {"status": "success", "content": "from result\n"},
        outputs={"utils.py": "from file\n"},
    )
    files = make_step(
        "write_file",
        {"file_path": "utils.py", "content_from_step": "step1"},
        steps={"step1": ref},
    )
    result = run(files)
    assert result["status"] == "success"
    assert (files.output_dir / "utils.py").read_text() == "from result\n"
    assert "from the result of step1" in result["message"]


def test_content_from_step_matching_output_file(make_step, earlier_step):
    ref = earlier_step(
        "step1",
        {"status": "success", "message": "wrote"},
        outputs={"utils.py": b"matching\x00bytes", "other.py": "no"},
    )
    files = make_step(
        "write_file",
        {"file_path": "utils.py", "content_from_step": "step1"},
        steps={"step1": ref},
    )
    result = run(files)
    assert result["status"] == "success"
    assert (files.output_dir / "utils.py").read_bytes() == b"matching\x00bytes"
    assert result["bytes"] == 14


def test_content_from_step_single_output_file(make_step, earlier_step):
    ref = earlier_step("step1", None, outputs={"gen/draft.txt": "the only file"})
    files = make_step(
        "write_file",
        {"file_path": "final.txt", "content_from_step": "step1"},
        steps={"step1": ref},
    )
    result = run(files)
    assert result["status"] == "success"
    assert result["output_files"] == ["final.txt"]
    assert (files.output_dir / "final.txt").read_text() == "the only file"


def test_content_from_step_ambiguous(make_step, earlier_step):
    ref = earlier_step("step1", {"status": "success"}, outputs={"a.txt": "a", "b.txt": "b"})
    files = make_step(
        "write_file",
        {"file_path": "final.txt", "content_from_step": "step1"},
        steps={"step1": ref},
    )
    result = run(files)
    assert result["status"] == "failure"
    message = result["message"]
    assert message.startswith("cannot take content from step step1: looked for a string 'content'")
    assert "final.txt in" in message and "it holds several" in message
    assert os.listdir(files.output_dir) == []


def test_content_from_unknown_step(make_step, earlier_step):
    ref = earlier_step("step1", {"content": "x"})
    files = make_step(
        "write_file",
        {"file_path": "a", "content_from_step": "step9"},
        steps={"step1": ref},
    )
    result = run(files)
    assert result["status"] == "failure"
    assert (
        "'step9', which is not an earlier step this step may read (available: step1)"
        in result["message"]
    )


def read_then_write(make_step, earlier_step, data, limits=None):
    """Run ``read_file data.bin``, then ``write_file copy.bin`` with ``content_from_step``."""
    reader = make_step(
        "read_file", {"file_path": "data.bin"}, inputs={"data.bin": data}, limits=limits
    )
    read = run(reader)
    assert read["status"] == "success", read["message"]
    ref = earlier_step("step1", json.loads(json.dumps(read)))  # as result.json holds it
    writer = make_step(
        "write_file",
        {"file_path": "copy.bin", "content_from_step": "step1"},
        steps={"step1": ref},
    )
    return run(writer), writer


def test_content_from_step_copies_a_non_utf8_read_byte_for_byte(make_step, earlier_step):
    blob = non_utf8_bytes(3000)
    result, writer = read_then_write(make_step, earlier_step, blob)
    assert result["status"] == "success", result["message"]
    assert (writer.output_dir / "copy.bin").read_bytes() == blob
    assert result["bytes"] == 3000
    assert result["message"] == "wrote 3000 bytes to copy.bin from the result of step1"


def test_content_from_step_copies_a_text_read_byte_for_byte(make_step, earlier_step):
    text = "line é\r\n\ufeffsecond\tline\n".encode()
    result, writer = read_then_write(make_step, earlier_step, text)
    assert result["status"] == "success", result["message"]
    assert (writer.output_dir / "copy.bin").read_bytes() == text


def test_content_from_step_refuses_a_truncated_read(make_step, earlier_step):
    for data in (b"a" * 30, non_utf8_bytes(30)):
        limits = {"timeout_seconds": 5, "max_output_bytes": 10}
        result, writer = read_then_write(make_step, earlier_step, data, limits)
        assert result["status"] == "failure"
        assert result["message"] == (
            "cannot take content from step step1: its read of data.bin was cut at "
            "max_output_bytes (10 bytes of 30), and writing that prefix would lose the rest: "
            "raise the cap (ocflow --max-output-bytes, or max_output_bytes in [limits]) above "
            "30, or copy the file with a command step (cp)"
        )
        assert list(writer.output_dir.iterdir()) == []


def test_content_from_step_refuses_invalid_base64(make_step, earlier_step):
    ref = earlier_step("step1", {"status": "success", "content": None, "content_base64": "%%"})
    files = make_step(
        "write_file",
        {"file_path": "a.bin", "content_from_step": "step1"},
        steps={"step1": ref},
    )
    result = run(files)
    assert result["status"] == "failure"
    assert result["message"].startswith(
        "cannot take content from step step1: its content_base64 is not valid base64"
    )
    assert list(files.output_dir.iterdir()) == []


# --- list_files ----------------------------------------------------------------

WORK = {
    "README.md": "r",
    "src/a.py": "a",
    "src/b.txt": "b",
    "src/deep/c.py": "c",
    ".git/config": "g",
    ".ocflow/state.json": "{}",
    "sub/.git/HEAD": "h",
}


def test_list_files_recursive(make_step, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.py").write_text("x")
    files = make_step("list_files", {}, work=WORK)
    os.symlink(outside, files.work_dir / "linked")
    os.symlink("README.md", files.work_dir / "readme-link")
    result = run(files)
    assert result["status"] == "success"
    assert result["files"] == ["README.md", "src/a.py", "src/b.txt", "src/deep/c.py"]
    assert result["count"] == 4
    assert result["truncated"] is False


def test_list_files_pattern_and_path(make_step):
    result = run(make_step("list_files", {"path": "src", "pattern": "*.py"}, work=WORK))
    assert result["files"] == ["src/a.py", "src/deep/c.py"]


def test_list_files_not_recursive(make_step):
    result = run(make_step("list_files", {"path": "src", "recursive": False}, work=WORK))
    assert result["files"] == ["src/a.py", "src/b.txt"]


def test_list_files_caps_entries(make_step, monkeypatch):
    from open_codex_lib import files as files_module

    monkeypatch.setattr(files_module, "LIST_LIMIT", 2)
    result = run(make_step("list_files", {}, work=WORK))
    assert result["count"] == 2
    assert result["truncated"] is True
    assert "stopped at 2" in result["message"]


def test_list_files_failures(make_step):
    missing = run(make_step("list_files", {"path": "nope"}, work=WORK))
    assert missing["status"] == "failure"
    assert missing["message"] == "directory not found: nope (the repository has no such directory)"
    not_dir = run(make_step("list_files", {"path": "README.md"}, work=WORK))
    assert "README.md is not a directory" in not_dir["message"]
    escape = run(make_step("list_files", {"path": "../step2"}, work=WORK))
    assert "contains a '..' component" in escape["message"]
    bad_type = run(make_step("list_files", {"recursive": "yes"}, work=WORK))
    assert "params.recursive must be true or false" in bad_type["message"]
    no_view = run(make_step("list_files", {}, work_dir=None))
    assert "the instructions give no work_dir" in no_view["message"]


# --- delete_file -----------------------------------------------------------------


def test_delete_file_reports_without_deleting(make_step):
    files = make_step("delete_file", {"file_path": "old.py"}, inputs={"old.py": "x"})
    result = run(files)
    assert result["status"] == "success"
    assert result["deleted_files"] == ["old.py"]
    assert result["output_files"] == []
    assert (files.input_dir / "old.py").exists()


def test_delete_missing_file(make_step):
    result = run(make_step("delete_file", {"file_path": "old.py"}))
    assert result["status"] == "failure"
    assert result["deleted_files"] == []
    assert result["message"].startswith("file not found: old.py")
