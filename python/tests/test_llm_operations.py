"""generate_summary, and what every LLM-backed operation shares (no model, host errors)."""

import json

import pytest
from conftest import FakeLLM, HostError
from open_codex_lib import execute_operation


def test_summary_from_message(make_step):
    llm = FakeLLM("The flow refactored utils.py.")
    result = execute_operation(
        make_step("generate_summary", {"message": "Did it."}).path, {"complete": llm}
    )
    assert result["status"] == "success"
    assert result["summary"] == "Did it."
    assert result["output_files"] == [] and result["deleted_files"] == []
    assert "llm_calls" not in result
    assert llm.calls == []


def test_summary_built_from_referenced_step(make_step, earlier_step):
    steps = {
        "step1": earlier_step(
            "step1",
            {
                "status": "success",
                "operation": "write_file",
                "message": "wrote 10 bytes to utils.py",
            },
        ),
        "step3": earlier_step(
            "step3",
            {"status": "failure", "operation": "run_tests", "message": "tests failed"},
        ),
    }
    files = make_step("generate_summary", {"changes_from_step": "step1"}, steps=steps)
    result = execute_operation(files.path, {})
    assert result["status"] == "success"
    assert result["summary"] == (
        "Refactor utils.py\n- step1 write_file (success): wrote 10 bytes to utils.py"
    )
    assert list(files.output_dir.iterdir()) == []


def test_summary_of_all_steps_notes_missing_results(make_step, earlier_step):
    steps = {
        "step1": earlier_step(
            "step1",
            {"status": "success", "operation": "write_file", "message": "wrote it"},
        ),
        "step3": earlier_step("step3", None),
    }
    result = execute_operation(make_step("generate_summary", {}, steps=steps).path, {})
    lines = result["summary"].splitlines()
    assert lines[1] == "- step1 write_file (success): wrote it"
    assert lines[2].startswith("- step3: no result (result file ")
    assert lines[2].endswith("does not exist)")


def test_summary_asks_llm_when_available(make_step, earlier_step):
    steps = {
        "step1": earlier_step(
            "step1",
            {
                "status": "success",
                "operation": "write_file",
                "message": "wrote utils.py",
                "output_files": ["utils.py"],
                "changes": {"utils.py": "+2 -1"},
            },
        )
    }
    llm = FakeLLM("  Refactored utils.py.  ")
    files = make_step("generate_summary", {}, steps=steps)
    result = execute_operation(files.path, {"complete": llm, "api_key": "sk-x"})
    assert result["status"] == "success"
    assert result["summary"] == "Refactored utils.py."
    assert result["llm_calls"] == 1
    assert result["llm_answers"] == ["llm-answer-1.md"]
    assert result["llm_usage"] == {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
    }
    assert (files.step_dir / "llm-answer-1.md").read_text() == "  Refactored utils.py.  "
    [call] = llm.calls
    assert call["purpose"] == "generate_summary" and call["json"] is False
    messages = call["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    prompt = messages[1]["content"]
    assert "Task of the flow: Refactor utils.py" in prompt
    assert "- step1 write_file (success): wrote utils.py" in prompt
    assert "  files written: utils.py" in prompt
    assert '  changes: {"utils.py": "+2 -1"}' in prompt
    assert "$" not in prompt  # every placeholder was filled


def test_summary_llm_error_is_failure_without_api_key(make_step):
    llm = FakeLLM(ConnectionError("401 for key sk-secret-key"))
    result = execute_operation(
        make_step("generate_summary", {}).path,
        {"complete": llm, "api_key": "sk-secret-key"},
    )
    assert result["status"] == "failure"
    assert result["message"].startswith(
        "the LLM request for generate_summary failed: ConnectionError"
    )
    assert result["llm_error"] == {
        "kind": "error",
        "transient": False,
        "message": "ConnectionError: 401 for key [REDACTED]",
    }
    assert result["llm_calls"] == 1 and result["llm_answers"] == []
    assert "sk-secret-key" not in json.dumps(result)
    assert "[REDACTED]" in result["message"]


def test_summary_truncated_answer_is_failure(make_step):
    llm = FakeLLM({"content": "The flow refac", "finish_reason": "length", "usage": None})
    files = make_step("generate_summary", {})
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "failure"
    assert "was truncated" in result["message"] and "max_tokens" in result["message"]
    assert "summary" not in result
    assert (files.step_dir / "llm-answer-1.md").read_text() == "The flow refac"
    assert result["llm_usage"]["total_tokens"] == 0


def test_host_error_kind_and_transient_reach_the_result(make_step):
    llm = FakeLLM(HostError("429 too many requests", kind="rate_limited", transient=True))
    result = execute_operation(make_step("generate_summary", {}).path, {"complete": llm})
    assert result["status"] == "failure"
    assert result["llm_error"] == {
        "kind": "rate_limited",
        "transient": True,
        "message": "HostError: 429 too many requests",
    }
    assert "kind rate_limited; the error is transient" in result["message"]


def test_summary_unknown_step(make_step):
    files = make_step("generate_summary", {"changes_from_step": "step7"})
    result = execute_operation(files.path, {})
    assert result["status"] == "failure"
    assert "'step7', which is not an earlier step" in result["message"]


@pytest.mark.parametrize("operation", ["modify_code", "refactor_function", "analyze_code"])
def test_llm_operations_need_llm(make_step, operation):
    params = {
        "file_path": "utils.py",
        "instructions": "rename f to g",
        "query": "what?",
    }
    result = execute_operation(make_step(operation, params).path, {"api_key": "k"})
    assert result["status"] == "failure"
    assert result["operation"] == operation
    assert result["message"] == (
        f"operation {operation} needs an LLM: run it from ocflow with an endpoint configured"
    )


@pytest.mark.parametrize("operation", ["modify_code", "refactor_function", "analyze_code"])
def test_missing_input_file_fails_without_calling_llm(make_step, operation):
    llm = FakeLLM("```python\nx = 1\n```")
    params = {"file_path": "utils.py", "instructions": "rename f to g"}
    files = make_step(operation, params)
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "failure"
    assert result["message"].startswith("file not found: utils.py")
    assert result["llm_calls"] == 0
    assert llm.calls == []
    assert list(files.output_dir.iterdir()) == []


def test_llm_operation_checks_params_first(make_step):
    result = execute_operation(make_step("modify_code", {"file_path": "../x"}).path, {})
    assert result["status"] == "failure"
    assert "contains a '..' component" in result["message"]
