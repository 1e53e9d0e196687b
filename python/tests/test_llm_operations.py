"""generate_summary and the operations that need the host's LLM."""

import json

import pytest

from open_codex_lib import execute_operation


class FakeLLM:
    """Records calls and answers like the host's ``complete`` callable."""

    def __init__(self, content="The flow refactored utils.py.", error=None):
        self.calls = []
        self.content = content
        self.error = error

    def __call__(self, messages, purpose):
        self.calls.append((messages, purpose))
        if self.error:
            raise self.error
        return {"content": self.content, "finish_reason": "stop"}


def test_summary_from_message(make_step):
    llm = FakeLLM()
    result = execute_operation(make_step("generate_summary", {"message": "Did it."}).path,
                               {"complete": llm})
    assert result["status"] == "success"
    assert result["summary"] == "Did it."
    assert result["output_files"] == [] and result["deleted_files"] == []
    assert llm.calls == []


def test_summary_built_from_referenced_step(make_step, earlier_step):
    steps = {
        "step1": earlier_step("step1", {"status": "success", "operation": "write_file",
                                        "message": "wrote 10 bytes to utils.py"}),
        "step3": earlier_step("step3", {"status": "failure", "operation": "run_tests",
                                        "message": "tests failed"}),
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
        "step1": earlier_step("step1", {"status": "success", "operation": "write_file",
                                        "message": "wrote it"}),
        "step3": earlier_step("step3", None),
    }
    result = execute_operation(make_step("generate_summary", {}, steps=steps).path, {})
    lines = result["summary"].splitlines()
    assert lines[1] == "- step1 write_file (success): wrote it"
    assert lines[2].startswith("- step3: no result (result file ")
    assert lines[2].endswith("does not exist)")


def test_summary_asks_llm_when_available(make_step, earlier_step):
    steps = {"step1": earlier_step("step1", {"status": "success", "operation": "write_file",
                                             "message": "wrote utils.py"})}
    llm = FakeLLM("  Refactored utils.py.  ")
    result = execute_operation(make_step("generate_summary", {}, steps=steps).path,
                               {"complete": llm, "api_key": "sk-x"})
    assert result["status"] == "success"
    assert result["summary"] == "Refactored utils.py."
    [(messages, purpose)] = llm.calls
    assert purpose == "generate_summary"
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "Task: Refactor utils.py" in messages[1]["content"]
    assert "wrote utils.py" in messages[1]["content"]


def test_summary_llm_error_is_failure_without_api_key(make_step):
    llm = FakeLLM(error=ConnectionError("401 for key sk-secret-key"))
    result = execute_operation(make_step("generate_summary", {}).path,
                               {"complete": llm, "api_key": "sk-secret-key"})
    assert result["status"] == "failure"
    assert result["message"].startswith(
        "the LLM request for generate_summary failed: ConnectionError"
    )
    assert "sk-secret-key" not in json.dumps(result)
    assert "[REDACTED]" in result["message"]


def test_summary_unknown_step(make_step):
    files = make_step("generate_summary", {"changes_from_step": "step7"})
    result = execute_operation(files.path, {})
    assert result["status"] == "failure"
    assert "'step7', which is not an earlier step" in result["message"]


@pytest.mark.parametrize("operation", ["modify_code", "refactor_function", "analyze_code"])
def test_llm_operations_need_llm(make_step, operation):
    params = {"file_path": "utils.py", "instructions": "rename f to g", "query": "what?"}
    result = execute_operation(make_step(operation, params).path, {"api_key": "k"})
    assert result["status"] == "failure"
    assert result["operation"] == operation
    assert result["message"] == (
        f"operation {operation} needs an LLM: run it from ocflow with an endpoint configured"
    )


def test_llm_operation_with_llm_reports_unsupported(make_step):
    llm = FakeLLM()
    params = {"file_path": "utils.py", "instructions": "rename f to g"}
    result = execute_operation(make_step("modify_code", params).path, {"complete": llm})
    assert result["status"] == "failure"
    assert "is not supported by this version of open_codex_lib yet" in result["message"]
    assert llm.calls == []


def test_llm_operation_checks_params_first(make_step):
    result = execute_operation(make_step("modify_code", {"file_path": "../x"}).path, {})
    assert result["status"] == "failure"
    assert "contains a '..' component" in result["message"]
