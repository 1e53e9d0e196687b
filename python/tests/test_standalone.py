"""``python -m open_codex_lib`` with LLM operations: the openai adapter, run in-process.

A fake ``openai`` module is put in ``sys.modules`` (or ``None`` there to make
the import fail), so no package or network is needed.
"""

import json
import sys
import types
from types import SimpleNamespace

import pytest
from open_codex_lib.__main__ import ENV_NAMES, main
from open_codex_lib.standalone import wrap_error

NEW = "def f():\n    return 10\n"


class RateLimitError(Exception):
    """Named like the openai exception the adapter maps."""


def fake_openai(answers):
    """A module with ``OpenAI`` whose ``chat.completions.create`` pops ``answers``."""
    module = types.ModuleType("openai")
    module.clients = []

    class OpenAI:
        def __init__(self, **options):
            self.options = options
            self.requests = []
            self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))
            module.clients.append(self)

        def create(self, **request):
            self.requests.append(request)
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            message = SimpleNamespace(content=answer)
            return SimpleNamespace(
                choices=[SimpleNamespace(message=message, finish_reason="stop")],
                usage=SimpleNamespace(prompt_tokens=7, completion_tokens=3, total_tokens=10),
            )

    module.OpenAI = OpenAI
    return module


@pytest.fixture
def env(monkeypatch):
    """Clear every LLM variable; return a setter."""
    for names in ENV_NAMES.values():
        for name in names:
            monkeypatch.delenv(name, raising=False)

    def set_env(**values):
        for name, value in values.items():
            monkeypatch.setenv(name, value)

    return set_env


def run_main(files, tmp_path, capsys):
    result_file = tmp_path / "result.json"
    status = main([files.path, "--result-file", str(result_file)])
    out = capsys.readouterr()
    return status, json.loads(result_file.read_text()), out.out + out.err


def modify_step(make_step):
    return make_step(
        "modify_code",
        {"file_path": "a.py", "instructions": "return 10"},
        inputs={"a.py": "def f():\n    return 1\n"},
    )


def test_without_openai_the_message_says_how_to_install(
    make_step, tmp_path, capsys, monkeypatch, env
):
    monkeypatch.setitem(sys.modules, "openai", None)  # import openai raises ImportError
    env(OCFLOW_MODEL="devstral-small", OCFLOW_API_KEY="sk-standalone")
    files = modify_step(make_step)
    status, result, output = run_main(files, tmp_path, capsys)
    assert status == 1
    assert result["status"] == "failure"
    assert result["message"] == (
        "operation modify_code needs an LLM: install the openai package "
        "(pip install openai) or run the step from ocflow"
    )
    assert "sk-standalone" not in output
    assert list(files.output_dir.iterdir()) == []


def test_write_file_instructions_without_openai(make_step, tmp_path, capsys, monkeypatch, env):
    monkeypatch.setitem(sys.modules, "openai", None)
    files = make_step("write_file", {"file_path": "a.py", "instructions": "hello"})
    status, result, _ = run_main(files, tmp_path, capsys)
    assert status == 1
    assert result["message"].startswith(
        "operation write_file with params.instructions needs an LLM: install the openai package"
    )


def test_without_model_the_message_names_the_variables(
    make_step, tmp_path, capsys, monkeypatch, env
):
    monkeypatch.setitem(sys.modules, "openai", fake_openai([]))
    files = make_step("analyze_code", {"file_path": "a.py"}, inputs={"a.py": "x = 1\n"})
    status, result, _ = run_main(files, tmp_path, capsys)
    assert status == 1
    assert result["message"].startswith(
        "operation analyze_code needs an LLM: set OCFLOW_MODEL or LLM_MODEL"
    )


def test_summary_works_without_openai(make_step, tmp_path, capsys, monkeypatch, env):
    monkeypatch.setitem(sys.modules, "openai", None)
    status, result, _ = run_main(make_step("generate_summary", {}), tmp_path, capsys)
    assert status == 0
    assert result["summary"].startswith("Refactor utils.py\n")
    assert result["llm_calls"] == 0


def test_modify_code_through_the_openai_adapter(make_step, tmp_path, capsys, monkeypatch, env):
    module = fake_openai([f"Here you go:\n```python\n{NEW}```"])
    monkeypatch.setitem(sys.modules, "openai", module)
    env(LLM_MODEL="devstral-small", OCFLOW_BASE_URL="http://127.0.0.1:8080/v1")
    files = modify_step(make_step)
    status, result, _ = run_main(files, tmp_path, capsys)
    assert status == 0, result["message"]
    assert (files.output_dir / "a.py").read_text() == NEW
    assert result["llm_usage"] == {
        "prompt_tokens": 7,
        "completion_tokens": 3,
        "total_tokens": 10,
    }
    [client] = module.clients
    assert client.options == {
        "api_key": "not-needed",
        "base_url": "http://127.0.0.1:8080/v1",
        "timeout": 30,
    }
    [request] = client.requests
    assert request["model"] == "devstral-small"
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    assert "response_format" not in request


def test_analyze_code_asks_openai_for_json(make_step, tmp_path, capsys, monkeypatch, env):
    module = fake_openai(['{"summary": "ok", "findings": []}'])
    monkeypatch.setitem(sys.modules, "openai", module)
    env(OCFLOW_MODEL="m", OCFLOW_API_KEY="sk-json")
    files = make_step("analyze_code", {"file_path": "a.py"}, inputs={"a.py": "x = 1\n"})
    status, result, output = run_main(files, tmp_path, capsys)
    assert status == 0
    assert result["summary"] == "ok"
    [client] = module.clients
    assert client.options["api_key"] == "sk-json"
    assert client.requests[0]["response_format"] == {"type": "json_object"}
    assert "sk-json" not in output


def test_openai_errors_are_wrapped_with_kind(make_step, tmp_path, capsys, monkeypatch, env):
    module = fake_openai([RateLimitError("429 slow down, key sk-oops")])
    monkeypatch.setitem(sys.modules, "openai", module)
    env(OCFLOW_MODEL="m", OCFLOW_API_KEY="sk-oops")
    status, result, output = run_main(modify_step(make_step), tmp_path, capsys)
    assert status == 1
    assert result["llm_error"] == {
        "kind": "rate_limited",
        "transient": True,
        "message": "LLMCallError: RateLimitError: 429 slow down, key [REDACTED]",
    }
    assert "sk-oops" not in output


def test_wrap_error_uses_status_code_for_unknown_errors():
    class APIStatusError(Exception):
        status_code = 503

    wrapped = wrap_error(APIStatusError("unavailable"))
    assert (wrapped.kind, wrapped.transient) == ("server_error", True)
    plain = wrap_error(ValueError("bad"))
    assert (plain.kind, plain.transient, str(plain)) == (
        "error",
        False,
        "ValueError: bad",
    )


def test_execute_operation_with_the_seeds_llm_config(make_step, monkeypatch):
    """Seed 002: ``execute_operation(path, llm_config)`` with an endpoint, a key and a model
    calls the model when the library is used on its own."""
    from open_codex_lib import execute_operation

    module = fake_openai([f"Here you go:\n```python\n{NEW}```"])
    monkeypatch.setitem(sys.modules, "openai", module)
    files = modify_step(make_step)
    config = {"endpoint": "http://127.0.0.1:8080/v1", "key": "sk-seed", "model": "devstral"}
    result = execute_operation(files.path, config)
    assert result["status"] == "success", result["message"]
    assert (files.output_dir / "a.py").read_text() == NEW
    [client] = module.clients
    assert client.options["base_url"] == "http://127.0.0.1:8080/v1"
    assert client.options["api_key"] == "sk-seed"
    [request] = client.requests
    assert request["model"] == "devstral"
    assert "sk-seed" not in json.dumps(request["messages"])
    assert "sk-seed" not in json.dumps(result)


def test_execute_operation_says_what_the_llm_config_lacks(make_step, monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", fake_openai([]))
    files = modify_step(make_step)
    result = execute_operation_of(files, {"base_url": "http://127.0.0.1:8080/v1", "key": "k"})
    assert result["status"] == "failure"
    assert "needs an LLM: llm_config has an endpoint but no `model`" in result["message"]
    assert result["llm_calls"] == 0


def test_without_an_endpoint_the_library_never_builds_a_client(make_step, monkeypatch):
    """The host passes the model but no endpoint, and no ``complete`` when it has no LLM:
    the library must not reach a default endpoint (api.openai.com) on its own."""
    module = fake_openai([f"```python\n{NEW}```"])
    monkeypatch.setitem(sys.modules, "openai", module)
    files = modify_step(make_step)
    result = execute_operation_of(files, {"model": "m", "temperature": 0.2})
    assert result["status"] == "failure"
    assert module.clients == []


def execute_operation_of(files, llm_config):
    from open_codex_lib import execute_operation

    return execute_operation(files.path, llm_config)


def test_the_openai_adapter_sends_the_reask_temperature(make_step, monkeypatch):
    """The configured temperature for the first question, a warmer one for the re-ask."""
    module = fake_openai(["no code, sorry", f"```python\n{NEW}```"])
    monkeypatch.setitem(sys.modules, "openai", module)
    files = modify_step(make_step)
    config = {"endpoint": "http://127.0.0.1:8080/v1", "model": "m", "temperature": 0.2}
    result = execute_operation_of(files, config)
    assert result["status"] == "success", result["message"]
    [client] = module.clients
    assert [request["temperature"] for request in client.requests] == [0.2, 0.5]
    assert result["llm_temperatures"] == [None, 0.5]


def test_the_adapter_redacts_what_looks_like_a_key(make_step, tmp_path, capsys, monkeypatch, env):
    module = fake_openai([f"Here you go:\n```python\n{NEW}```"])
    monkeypatch.setitem(sys.modules, "openai", module)
    env(LLM_MODEL="devstral-small")
    files = make_step(
        "modify_code",
        {"file_path": "a.py", "instructions": "return 10"},
        inputs={"a.py": "TOKEN = 'ghp_abcdefghijklmnopqrstuvwx12'\ndef f():\n    return 1\n"},
    )
    status, result, _ = run_main(files, tmp_path, capsys)
    assert status == 0, result["message"]
    [request] = module.clients[0].requests
    sent = json.dumps(request["messages"])
    assert "ghp_abcdefghij" not in sent
    assert "[redacted: looks like a key]" in sent and "Note from ocflow" in sent
