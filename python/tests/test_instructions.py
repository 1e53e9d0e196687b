"""Parsing the instructions file and the failures it produces."""

import os

import pytest
from open_codex_lib import InstructionsError, execute_operation, parse_instructions


def test_parses_block_and_resolves_dirs_against_file(make_step, earlier_step):
    ref = earlier_step("step1", {"status": "success", "content": "x"})
    files = make_step(
        "read_file",
        {"file_path": "a.py"},
        inputs={"a.py": "x"},
        steps={"step1": ref},
        limits={"timeout_seconds": 5, "max_output_bytes": 10},
    )
    step = parse_instructions(files.path)
    assert step.operation == "read_file"
    assert step.params == {"file_path": "a.py"}
    assert step.task == "Refactor utils.py"
    assert step.step_id == "step2"
    assert step.role == "developer"
    assert step.input_dir == str(files.input_dir)
    assert step.output_dir == str(files.output_dir)
    assert step.work_dir == str(files.work_dir)
    assert step.input_files == ["a.py"]
    assert step.steps["step1"].result == str(files.flow_dir / "step1" / "result.json")
    assert step.steps["step1"].output_dir == str(files.flow_dir / "step1" / "output")
    assert step.limits.timeout_seconds == 5
    assert step.limits.max_output_bytes == 10


def test_absolute_dirs_and_null_work_dir(make_step, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    files = make_step(
        "delete_file",
        {"file_path": "a"},
        work_dir=None,
        extra={"input_dir": str(elsewhere)},
    )
    step = parse_instructions(files.path)
    assert step.input_dir == str(elsewhere)
    assert step.work_dir is None


def test_missing_limits_use_defaults(make_step):
    files = make_step("list_files", extra={"limits": None})
    limits = parse_instructions(files.path).limits
    assert (limits.timeout_seconds, limits.max_output_bytes) == (300, 1024 * 1024)


def write_instructions(tmp_path, text):
    path = tmp_path / "open_codex_instructions.md"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            '# Step\n\n```json\n{"version": 1}\n```\n',
            "no '```json ocflow-step' fenced block",
        ),
        ('```json ocflow-step\n{"version": 1,}\n```\n', "not valid JSON"),
        ("```json ocflow-step\n[1, 2]\n```\n", "must hold a JSON object"),
        ('```json ocflow-step\n{"version": 1}\n', "never closed"),
        (
            "```json ocflow-step\n{}\n```\n```json ocflow-step\n{}\n```\n",
            "2 '```json ocflow-step' blocks",
        ),
        (
            '```json ocflow-step\n{"version": 2, "operation": "read_file"}\n```\n',
            "unsupported instructions version 2",
        ),
        (
            '```json ocflow-step\n{"version": 1, "operation": "read_file"}\n```\n',
            "field 'input_dir' must be a directory path string",
        ),
        (
            '```json ocflow-step\n{"version": 1, "input_dir": "i", "output_dir": "o"}\n```\n',
            "no 'operation' string",
        ),
    ],
)
def test_bad_instructions_raise_and_give_failure(tmp_path, text, expected):
    path = write_instructions(tmp_path, text)
    with pytest.raises(InstructionsError, match=None) as caught:
        parse_instructions(path)
    assert expected in str(caught.value)
    result = execute_operation(path, {})
    assert result["status"] == "failure"
    assert expected in result["message"]
    assert result["output_files"] == [] and result["deleted_files"] == []


def test_wrong_version_failure_still_names_operation(tmp_path):
    path = write_instructions(
        tmp_path,
        '```json ocflow-step\n{"version": "1", "operation": "list_files"}\n```\n',
    )
    result = execute_operation(path, {})
    assert result["operation"] == "list_files"
    assert "unsupported instructions version '1'" in result["message"]


def test_bad_limits_are_refused(make_step):
    files = make_step("list_files", limits={"timeout_seconds": 0, "max_output_bytes": 5})
    result = execute_operation(files.path, {})
    assert result["status"] == "failure"
    assert "limits.timeout_seconds must be a positive number" in result["message"]


def test_missing_instructions_file(tmp_path):
    missing = os.path.join(str(tmp_path), "nope.md")
    result = execute_operation(missing, {})
    assert result == {
        "status": "failure",
        "operation": None,
        "message": f"instructions file not found: {missing}",
        "output_files": [],
        "deleted_files": [],
    }


def test_unknown_operation(make_step):
    result = execute_operation(make_step("make_coffee").path, {})
    assert result["status"] == "failure"
    assert result["operation"] == "make_coffee"
    assert "unknown operation 'make_coffee': use one of" in result["message"]
    assert "read_file" in result["message"]


def test_view_layers_are_resolved_against_the_file_and_need_a_launcher(make_step):
    sandbox = {"launcher": ["launch"], "view_layers": ["upper", "../_layers/changes"]}
    files = make_step("run_tests", {}, extra={"sandbox": sandbox})
    step = parse_instructions(files.path)
    base = os.path.dirname(files.path)
    assert step.view_layers == [
        os.path.join(base, "upper"),
        os.path.normpath(os.path.join(base, "../_layers/changes")),
    ]
    files = make_step("run_tests", {}, extra={"sandbox": {"view_layers": ["upper"]}})
    assert parse_instructions(files.path).view_layers == []
    files = make_step("run_tests", {}, extra={"sandbox": {**sandbox, "view_layers": "upper"}})
    with pytest.raises(InstructionsError, match="view_layers"):
        parse_instructions(files.path)
