"""``python -m open_codex_lib`` run as a subprocess."""

import json
import os
import subprocess
import sys

from conftest import PYTHON_DIR
from open_codex_lib.__main__ import llm_config_from_env


def run_main(*args, env_extra=None):
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR), **(env_extra or {}))
    return subprocess.run(
        [sys.executable, "-m", "open_codex_lib", *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        cwd="/",
    )


def test_success_prints_result_and_writes_result_file(make_step, tmp_path):
    files = make_step("write_file", {"file_path": "a.txt", "content": "hi"})
    result_file = tmp_path / "result.json"
    proc = run_main(files.path, "--result-file", str(result_file))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "success"
    assert result["output_files"] == ["a.txt"]
    assert json.loads(result_file.read_text()) == result
    assert (files.output_dir / "a.txt").read_text() == "hi"


def test_failed_step_exits_1_and_api_key_stays_hidden(make_step):
    files = make_step("execute_shell_command", {"command": "echo $OCFLOW_API_KEY $X; exit 3"})
    proc = run_main(files.path, env_extra={"OCFLOW_API_KEY": "sk-main", "X": "sk-main"})
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["exit_code"] == 3
    assert result["stdout"] == "\n"
    assert "sk-main" not in proc.stdout + proc.stderr


def test_bad_file_exits_2(tmp_path):
    bad = tmp_path / "open_codex_instructions.md"
    bad.write_text("# no block here\n")
    proc = run_main(str(bad))
    assert proc.returncode == 2
    result = json.loads(proc.stdout)
    assert result["status"] == "failure"
    assert "no '```json ocflow-step' fenced block" in result["message"]
    missing = run_main(str(tmp_path / "missing.md"))
    assert missing.returncode == 2
    assert "instructions file not found" in json.loads(missing.stdout)["message"]


def test_llm_config_from_env_prefers_ocflow_names():
    config = llm_config_from_env(
        {
            "OPENAI_BASE_URL": "https://openai",
            "OCFLOW_BASE_URL": "http://local",
            "LLM_MODEL": "m",
            "OCFLOW_API_KEY": "",
            "LLM_API_KEY": "k",
        }
    )
    assert config == {"base_url": "http://local", "model": "m", "api_key": "k"}
