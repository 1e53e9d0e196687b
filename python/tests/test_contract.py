"""The library against the step contract in docs/step-contract.md.

The document holds two machine-readable blocks: ``json step-contract:instructions`` (a
complete step block as the host writes it) and ``json step-contract:results`` (the result
fields). These tests parse both and run the library on them, so the document and the library
cannot drift apart silently.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import FakeLLM, HostError, instructions_markdown
from open_codex_lib import execute_operation, parse_instructions
from open_codex_lib.operations import OPERATIONS

CONTRACT = Path(__file__).resolve().parents[2] / "docs" / "step-contract.md"
BLOCK_PREFIX = "```json step-contract:"

# Every field the host's StepSpec serialises, in its order.
STEP_FIELDS = [
    "version",
    "task_id",
    "task",
    "step_id",
    "operation",
    "role",
    "params",
    "input_dir",
    "output_dir",
    "work_dir",
    "input_files",
    "steps",
    "limits",
    "env",
    "sandbox",
]

# What the earlier steps a, b and c of the instructions example returned.
EARLIER_RESULTS = {
    "a": {
        "status": "success",
        "operation": "modify_code",
        "message": "rewrote src/utils.py from the LLM answer (40 -> 32 lines)",
        "output_files": ["src/utils.py"],
        "deleted_files": [],
    },
    "b": {
        "status": "success",
        "operation": "delete_file",
        "message": "src/old_utils.py is marked for deletion (ocflow applies it)",
        "output_files": [],
        "deleted_files": ["src/old_utils.py"],
    },
    "c": {
        "status": "success",
        "operation": "run_tests",
        "message": "tests passed: 12 passed, 0 failed, 0 errors, 0 skipped (exit code 0)",
        "output_files": [],
        "deleted_files": [],
    },
}


def contract_blocks() -> dict[str, str]:
    """``{info suffix: body}`` of every ```` ```json step-contract:... ```` block."""
    lines = CONTRACT.read_text(encoding="utf-8").splitlines()
    blocks = {}
    for index, line in enumerate(lines):
        if not line.strip().startswith(BLOCK_PREFIX):
            continue
        name = line.strip()[len(BLOCK_PREFIX) :]
        assert name not in blocks, f"two '{BLOCK_PREFIX}{name}' blocks in {CONTRACT}"
        end = next(
            (i for i in range(index + 1, len(lines)) if lines[i].strip() == "```"),
            None,
        )
        assert end is not None, f"the '{BLOCK_PREFIX}{name}' block is never closed"
        blocks[name] = "\n".join(lines[index + 1 : end])
    return blocks


def contract_block(name: str):
    blocks = contract_blocks()
    assert name in blocks, f"{CONTRACT} has no '{BLOCK_PREFIX}{name}' block"
    return json.loads(blocks[name])


def test_contract_has_exactly_the_two_blocks():
    assert CONTRACT.is_file(), f"{CONTRACT} is missing"
    assert sorted(contract_blocks()) == ["instructions", "results"]


# --- the instructions example ------------------------------------------------------------


def example_task(tmp_path: Path) -> tuple[dict, Path, Path]:
    """The example written as the host would: ``(block, instructions file, task dir)``.

    The task directory holds the step directory (named after ``step_id``), the view and the
    directories and results of the earlier steps named in ``steps``.
    """
    block = contract_block("instructions")
    task_dir = tmp_path / block["task_id"]
    step_dir = task_dir / block["step_id"]
    for name in ("input_dir", "output_dir", "work_dir"):
        (step_dir / block[name]).mkdir(parents=True, exist_ok=True)
    for step_id, ref in block["steps"].items():
        (step_dir / ref["output_dir"]).mkdir(parents=True, exist_ok=True)
        result = EARLIER_RESULTS[step_id]
        (step_dir / ref["result"]).write_text(json.dumps(result), encoding="utf-8")
    path = step_dir / "open_codex_instructions.md"
    path.write_text(instructions_markdown(block), encoding="utf-8")
    return block, path, task_dir


def test_instructions_example_has_every_stepspec_field():
    block = contract_block("instructions")
    assert list(block) == STEP_FIELDS
    assert block["version"] == 1
    assert block["operation"] == "generate_summary"
    assert "changes_from_step" not in block["params"]
    assert list(block["steps"]) == ["a", "b", "c"]
    for step_id, ref in block["steps"].items():
        assert ref == {
            "result": f"../{step_id}/result.json",
            "output_dir": f"../{step_id}/output",
        }
    assert block["env"], "the example must show env"
    assert set(block["sandbox"]) == {"launcher", "kind"}


def test_parse_instructions_reads_every_field_of_the_example(tmp_path):
    block, path, task_dir = example_task(tmp_path)
    step_dir = path.parent
    step = parse_instructions(str(path))
    assert step.version == block["version"]
    assert step.task_id == block["task_id"]
    assert step.task == block["task"]
    assert step.step_id == block["step_id"]
    assert step.operation == block["operation"]
    assert step.role == block["role"]
    assert step.params == block["params"]
    # Relative directories are resolved against the instructions file's directory.
    assert step.base_dir == str(step_dir)
    assert step.input_dir == str(step_dir / block["input_dir"])
    assert step.output_dir == str(step_dir / block["output_dir"])
    assert step.work_dir == os.path.normpath(step_dir / block["work_dir"])
    assert step.work_dir == str(task_dir / "_view")
    assert step.input_files == block["input_files"]
    assert list(step.steps) == ["a", "b", "c"]
    for step_id in ("a", "b", "c"):
        ref = step.steps[step_id]
        assert ref.step_id == step_id
        assert ref.result == str(task_dir / step_id / "result.json")
        assert ref.output_dir == str(task_dir / step_id / "output")
        assert ref.load_result() == (EARLIER_RESULTS[step_id], None)
    assert step.limits.timeout_seconds == block["limits"]["timeout_seconds"]
    assert step.limits.max_output_bytes == block["limits"]["max_output_bytes"]
    assert step.env == block["env"]
    assert step.sandbox_launcher == block["sandbox"]["launcher"]
    assert step.sandbox_kind == block["sandbox"]["kind"]


def test_paths_do_not_depend_on_the_current_directory(tmp_path, monkeypatch):
    _, path, task_dir = example_task(tmp_path)
    monkeypatch.chdir(tmp_path)
    step = parse_instructions(str(path))
    assert step.steps["a"].result == str(task_dir / "a" / "result.json")


def test_generate_summary_without_model_summarises_every_step_in_order(tmp_path):
    block, path, _ = example_task(tmp_path)
    result = execute_operation(str(path), {})
    assert result["status"] == "success", result["message"]
    lines = result["summary"].splitlines()
    assert lines[0] == block["task"]
    assert lines[1:] == [
        f"- {step_id} {r['operation']} ({r['status']}): {r['message']}"
        for step_id, r in EARLIER_RESULTS.items()
    ]
    assert result["llm_calls"] == 0


def test_generate_summary_with_model_is_told_every_step(tmp_path):
    block, path, _ = example_task(tmp_path)
    llm = FakeLLM("The utilities were refactored, the old module deleted, the tests pass.")
    config = {"model": "m", "temperature": 0.2, "max_tokens": 4096, "complete": llm}
    result = execute_operation(str(path), config)
    assert result["status"] == "success", result["message"]
    assert result["summary"] == llm.answers[0]
    assert result["llm_calls"] == 1
    prompt = llm.last_user_message()
    positions = [prompt.index(f"- {step_id} ") for step_id in ("a", "b", "c")]
    assert positions == sorted(positions), "the steps are given in the order of `steps`"
    for step_id, earlier in EARLIER_RESULTS.items():
        assert earlier["message"] in prompt, f"step {step_id} is missing from the prompt"
    assert "src/utils.py" in prompt and "src/old_utils.py" in prompt
    assert block["task"] in prompt


def test_other_versions_are_refused_as_failures(tmp_path):
    block, path, _ = example_task(tmp_path)
    for version in (2, 0, "1", 1.0, True, None):
        block = {**block, "version": version}
        path.write_text(instructions_markdown(block), encoding="utf-8")
        result = execute_operation(str(path), {})
        assert result["status"] == "failure"
        assert result["operation"] == "generate_summary"
        assert "version" in result["message"]
        assert_common_fields(result)


# --- the result fields -------------------------------------------------------------------


def results_block() -> dict:
    return contract_block("results")


def assert_common_fields(result: dict) -> None:
    missing = [name for name in results_block()["common"] if name not in result]
    assert not missing, f"result lacks the common fields {missing}: {result}"
    assert result["status"] in ("success", "failure")
    assert isinstance(result["message"], str) and result["message"]
    assert isinstance(result["output_files"], list)
    assert isinstance(result["deleted_files"], list)
    json.dumps(result, allow_nan=False)  # JSON-like, as the host requires


def test_results_block_shape():
    block = results_block()
    assert set(block) == {"common", "host_adds", "operations"}
    assert block["common"] == ["status", "operation", "message", "output_files", "deleted_files"]
    assert block["host_adds"] == [
        "output_files",
        "deleted_files",
        "ignored_files",
        "view",
        "version",
    ]
    for operation, fields in block["operations"].items():
        assert isinstance(fields, list), operation
        assert len(set(fields)) == len(fields), f"{operation} lists a field twice"
        assert not set(fields) & set(block["common"]), f"{operation} repeats a common field"


def test_documented_operations_are_the_library_operations():
    assert sorted(results_block()["operations"]) == sorted(OPERATIONS)


PY_BEFORE = "def f():\n    return 1\n"
PY_AFTER = "```python\ndef f():\n    return 2\n```"

# operation -> a minimal successful step: params, staged inputs, view files, the model's
# answer (absent: the model must not be asked) and the expected output/deleted files.
CASES = {
    "read_file": {
        "params": {"file_path": "src/a.py"},
        "inputs": {"src/a.py": PY_BEFORE},
    },
    "write_file": {
        "params": {"file_path": "src/a.py", "content": PY_BEFORE},
        "output_files": ["src/a.py"],
    },
    "modify_code": {
        "params": {"file_path": "src/a.py", "instructions": "return 2"},
        "inputs": {"src/a.py": PY_BEFORE},
        "answer": PY_AFTER,
        "output_files": ["src/a.py"],
    },
    "edit_code": {
        "params": {"file_path": "src/a.py", "instructions": "return 2"},
        "inputs": {"src/a.py": PY_BEFORE},
        "answer": "<<<<<<< SEARCH\n    return 1\n=======\n    return 2\n>>>>>>> REPLACE\n",
        "output_files": ["src/a.py"],
    },
    "refactor_function": {
        "params": {"file_path": "src/a.py", "instructions": "return 2", "function_name": "f"},
        "inputs": {"src/a.py": PY_BEFORE},
        "answer": PY_AFTER,
        "output_files": ["src/a.py"],
    },
    "analyze_code": {
        "params": {"file_path": "src/a.py", "report_path": "docs/a.md"},
        "inputs": {"src/a.py": PY_BEFORE},
        "answer": '{"summary": "Returns 1.", "findings": []}',
        "output_files": ["docs/a.md"],
    },
    "execute_shell_command": {"params": {"command": "echo hi"}},
    "run_tests": {"params": {"command": "echo '1 passed in 0.01s'"}},
    "reproduce": {"params": {"command": "exit 1"}},
    "generate_summary": {"params": {"message": "Refactored utils.py."}},
    "ask_model": {
        "params": {"instructions": "Review a.py.", "file_path": "src/a.py"},
        "inputs": {"src/a.py": PY_BEFORE},
        "answer": "It returns 1.",
    },
    "list_files": {"params": {"path": "."}, "work": {"src/a.py": PY_BEFORE}},
    "search_code": {"params": {"pattern": "return"}, "work": {"src/a.py": PY_BEFORE}},
    "delete_file": {
        "params": {"file_path": "src/a.py"},
        "inputs": {"src/a.py": PY_BEFORE},
        "deleted_files": ["src/a.py"],
    },
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_successful_result_has_the_documented_fields(operation, make_step):
    documented = results_block()["operations"]
    assert operation in documented, f"{operation} is not documented in {CONTRACT}"
    assert operation in CASES, f"add a minimal successful {operation} step to CASES"
    case = CASES[operation]
    files = make_step(operation, case["params"], inputs=case.get("inputs"), work=case.get("work"))
    llm = FakeLLM(case.get("answer", "unexpected call"))
    config = {"model": "m", "temperature": 0.2, "max_tokens": 4096, "complete": llm}
    cwd, environ = os.getcwd(), dict(os.environ)

    result = execute_operation(files.path, config)

    assert os.getcwd() == cwd and dict(os.environ) == environ
    assert result["status"] == "success", result["message"]
    assert result["operation"] == operation
    assert_common_fields(result)
    missing = [name for name in documented[operation] if name not in result]
    assert not missing, f"successful {operation} result lacks documented fields {missing}"
    assert result["output_files"] == case.get("output_files", [])
    assert result["deleted_files"] == case.get("deleted_files", [])
    for rel in result["output_files"]:
        assert (files.output_dir / rel).is_file()
    if "answer" not in case:
        assert llm.calls == [], f"{operation} asked the model"
    else:
        assert result["llm_calls"] == len(llm.calls) >= 1


def test_failed_llm_call_gives_llm_error(make_step):
    files = make_step(
        "modify_code",
        {"file_path": "src/a.py", "instructions": "return 2"},
        inputs={"src/a.py": PY_BEFORE},
    )
    llm = FakeLLM(HostError("429 slow down", kind="rate_limited", transient=True))
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "failure"
    assert_common_fields(result)
    assert result["llm_calls"] == 1
    error = result["llm_error"]
    assert set(error) == {"kind", "transient", "message"}
    assert error["kind"] == "rate_limited" and error["transient"] is True
    assert "429 slow down" in error["message"]
    assert not (files.output_dir / "src/a.py").exists()


def test_user_errors_are_failure_dicts(make_step, tmp_path):
    cases = [
        make_step("no_such_operation"),
        make_step("read_file", {"file_path": "../etc/passwd"}),
        make_step("write_file", {"file_path": "a.py"}),
        # A NUL byte cannot reach a process: a reference value (e.g. a binary file's
        # content) or the command itself.
        make_step("execute_shell_command", {"command": "echo a\0b"}),
        make_step(
            "execute_shell_command",
            {"command": 'echo "${OCFLOW_REF_1}"'},
            extra={"env": {"OCFLOW_REF_1": "a\0b"}},
        ),
        make_step("run_tests", {"command": "true"}, extra={"env": {"A=B": "x"}}),
    ]
    for files in cases:
        result = execute_operation(files.path, {})
        assert result["status"] == "failure", result
        assert_common_fields(result)
    missing = execute_operation(str(tmp_path / "nowhere" / "open_codex_instructions.md"), {})
    assert missing["status"] == "failure" and missing["operation"] is None
    assert_common_fields(missing)


def test_a_file_step_writes_only_in_its_step_dir(make_step, tmp_path):
    """A step writes into output_dir (and its step dir); the view and inputs stay as they were."""
    files = make_step(
        "analyze_code",
        {"file_path": "src/a.py", "report_path": "docs/a.md"},
        inputs={"src/a.py": PY_BEFORE},
        work={"src/a.py": PY_BEFORE},
    )
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    llm = FakeLLM('{"summary": "ok", "findings": []}')
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "success", result["message"]
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    added = sorted(set(after) - set(before))
    step = files.step_dir.relative_to(tmp_path)
    assert added == sorted(
        [
            step / "llm-answer-1.md",
            step / "output" / "docs",
            step / "output" / "docs" / "a.md",
            step / "report.md",
        ]
    )
    assert result["report_file"] == str(files.step_dir / "report.md")
