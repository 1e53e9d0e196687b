"""execute_shell_command: exit codes, timeouts, output caps, leftovers, env scrubbing, cancel."""

import json
import os
import threading
import time
from pathlib import Path

import pytest
from conftest import pid_alive
from open_codex_lib import cancel_all, execute_operation
from open_codex_lib.process import CappedBuffer, active_count, scrub_env


def shell(make_step, command, llm_config=None, limits=None, **params):
    files = make_step(
        "execute_shell_command",
        {"command": command, **params},
        limits=limits or {"timeout_seconds": 20, "max_output_bytes": 1048576},
    )
    result = execute_operation(files.path, llm_config or {})
    json.dumps(result)
    return result


def test_success_runs_in_work_dir_with_separate_streams(make_step):
    result = shell(make_step, "pwd; echo to-err >&2; cat")
    assert result["status"] == "success"
    assert result["exit_code"] == 0
    assert result["stdout"].splitlines()[0].endswith("/flow/_view")
    assert result["stderr"] == "to-err\n"
    assert result["timed_out"] is False and result["truncated"] is False
    assert result["command"] == "pwd; echo to-err >&2; cat"
    assert isinstance(result["duration_ms"], int)
    assert result["message"] == "command exited with code 0"


def test_nonzero_exit_is_failure(make_step):
    result = shell(make_step, "echo out; exit 2")
    assert result["status"] == "failure"
    assert result["exit_code"] == 2
    assert result["stdout"] == "out\n"
    assert result["message"] == "command exited with code 2"


def test_timeout_kills_the_process_group(make_step):
    started = time.monotonic()
    result = shell(make_step, "sleep 30 & echo $!; sleep 30", timeout_seconds=1)
    elapsed = time.monotonic() - started
    # Liveness only (the command sleeps 30 s): scripts/bench-responsiveness measures how soon
    # past its timeout a command ends.
    assert elapsed < 20
    assert result["status"] == "failure"
    assert result["timed_out"] is True
    assert result["exit_code"] is None
    assert result["message"] == "command timed out after 1 s and was killed with its process group"
    child = int(result["stdout"].split()[0])
    deadline = time.monotonic() + 2
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(child)


def test_background_leftover_does_not_hang_and_is_killed(make_step):
    started = time.monotonic()
    result = shell(make_step, "sleep 100 & echo $!; echo done")
    assert time.monotonic() - started < 50  # liveness: the leftover sleeps 100 s
    assert result["status"] == "success"
    pid_text, done = result["stdout"].split()
    assert done == "done"
    deadline = time.monotonic() + 2
    while pid_alive(int(pid_text)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(int(pid_text))


def test_large_output_is_capped_with_head_tail_and_marker(make_step):
    cap = 65536
    command = "head -c 3000000 /dev/zero | tr '\\0' 'a'; printf END; head -c 2000000 /dev/zero >&2"
    result = shell(make_step, command, limits={"timeout_seconds": 20, "max_output_bytes": cap})
    assert result["status"] == "success"
    assert result["truncated"] is True
    stdout = result["stdout"]
    marker = f"\n[... {3000003 - cap} bytes truncated ...]\n"
    assert marker in stdout
    head, tail = stdout.split(marker)
    assert head == "a" * (cap // 4)
    assert len(tail) == cap - cap // 4 and tail.endswith("aaaEND")
    assert f"[... {2000000 - cap} bytes truncated ...]" in result["stderr"]


def test_capped_buffer_keeps_everything_under_the_cap():
    buffer = CappedBuffer(8)
    for chunk in (b"ab", b"cd", b"efgh"):
        buffer.feed(chunk)
    assert buffer.text() == "abcdefgh" and not buffer.truncated
    buffer.feed(b"XY")
    assert buffer.truncated
    assert buffer.text() == "ab\n[... 2 bytes truncated ...]\nefghXY"


def test_env_is_scrubbed(make_step, monkeypatch):
    monkeypatch.setenv("FOO_API_KEY", "foo-secret-1")
    monkeypatch.setenv("MY_Token_file", "t")
    monkeypatch.setenv("INNOCENT_NAME", "sk-the-api-key")
    monkeypatch.setenv("OCFLOW_TEST_VISIBLE", "yes")
    result = shell(make_step, "env", llm_config={"api_key": "sk-the-api-key"})
    names = {line.split("=", 1)[0] for line in result["stdout"].splitlines() if "=" in line}
    assert "OCFLOW_TEST_VISIBLE" in names
    assert "FOO_API_KEY" not in names
    assert "MY_Token_file" not in names
    assert "INNOCENT_NAME" not in names
    assert os.environ["FOO_API_KEY"] == "foo-secret-1"  # the process env is untouched


def test_scrub_env_rules():
    env = scrub_env(
        "k123",
        {
            "PATH": "/bin",
            "DB_PASSWORD": "p",
            "aws_credentials": "c",
            "GH_SECRET_X": "s",
            "OTHER": "k123",
            "EMPTY": "",
        },
    )
    assert env == {"PATH": "/bin", "EMPTY": ""}
    assert scrub_env("", {"EMPTY": ""}) == {"EMPTY": ""}


def test_api_key_printed_by_command_is_redacted(make_step):
    result = shell(make_step, "echo the key is sk-abc123", llm_config={"api_key": "sk-abc123"})
    assert result["stdout"] == "the key is [REDACTED]\n"
    assert "sk-abc123" not in json.dumps(result)


def test_cancel_all_from_another_thread(make_step):
    files = make_step("execute_shell_command", {"command": "sleep 30 & echo $!; sleep 30"})
    holder = {}
    worker = threading.Thread(
        target=lambda: holder.update(result=execute_operation(files.path, {}))
    )
    started = time.monotonic()
    worker.start()
    deadline = time.monotonic() + 5
    while active_count() == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)  # let the shell start its background child
    cancel_all()
    worker.join(20)
    assert not worker.is_alive()
    assert time.monotonic() - started < 20  # liveness: the command sleeps 30 s
    result = holder["result"]
    assert result["status"] == "failure"
    assert result["cancelled"] is True and result["timed_out"] is False
    assert result["exit_code"] is None
    assert "cancelled" in result["message"]
    # The background child got SIGKILL with its group; the kernel may take a moment to end it.
    child = int(result["stdout"].split()[0])
    deadline = time.monotonic() + 2
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not pid_alive(child)
    assert active_count() == 0


def test_concurrent_commands_use_their_own_work_dirs(make_step, tmp_path):
    # Each command marks that it started and waits for the other's mark: both succeed only
    # when they run at once (one at a time, the first would wait alone and fail).
    marks = tmp_path / "marks"
    marks.mkdir()
    barrier = (
        f"touch {marks}/$$; n=0; while [ $(ls {marks} | wc -l) -lt 2 ]; do "
        "n=$((n + 1)); [ $n -gt 200 ] && exit 1; sleep 0.05; done; pwd"
    )
    first = make_step("execute_shell_command", {"command": barrier})
    other_view = tmp_path / "other_view"
    other_view.mkdir()
    second_path = tmp_path / "second.md"
    second_path.write_text(
        Path(first.path).read_text().replace('"../_view"', json.dumps(str(other_view)))
    )
    results = {}
    threads = [
        threading.Thread(target=lambda k=k, p=p: results.update({k: execute_operation(p, {})}))
        for k, p in (("first", first.path), ("second", str(second_path)))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results["first"]["status"] == "success", results["first"]
    assert results["second"]["status"] == "success", results["second"]
    assert results["first"]["stdout"].strip().endswith("/flow/_view")
    assert results["second"]["stdout"].strip() == str(other_view)
    assert os.getcwd() != str(other_view)


@pytest.mark.parametrize(
    "params, work_dir, expected",
    [
        ({}, "../_view", "missing parameter params.command"),
        ({"command": "  "}, "../_view", "params.command is empty"),
        ({"command": ["ls"]}, "../_view", "params.command must be a string, got list"),
        (
            {"command": "true", "timeout_seconds": -1},
            "../_view",
            "params.timeout_seconds must be a positive number",
        ),
        (
            {"command": "true"},
            "../missing_view",
            "does not exist: the repository view was not prepared",
        ),
        ({"command": "true"}, None, "the instructions give no work_dir"),
    ],
)
def test_shell_failures(make_step, params, work_dir, expected):
    files = make_step("execute_shell_command", params, work_dir=work_dir)
    result = execute_operation(files.path, {})
    assert result["status"] == "failure"
    assert expected in result["message"]


def test_descendant_escaping_the_group_cannot_hold_us(make_step, monkeypatch):
    from open_codex_lib import process

    monkeypatch.setattr(process, "DRAIN_GRACE_SECONDS", 0.5)
    started = time.monotonic()
    # setsid leaves our process group, so only the bounded drain wait saves us.
    result = shell(make_step, "setsid sh -c 'echo $$; exec sleep 30' & sleep 0.2; echo main")
    try:
        assert time.monotonic() - started < 20  # liveness: the escaped child sleeps 30 s
        assert result["status"] == "success"
        assert "main" in result["stdout"]
    finally:
        escaped = int(result["stdout"].split()[0])
        os.kill(escaped, 9)


def test_reference_values_reach_the_command_as_data_not_code(make_step):
    files = make_step(
        "execute_shell_command",
        {"command": 'printf "%s" ${OCFLOW_REF_1}'},
        work={},
        extra={"env": {"OCFLOW_REF_1": '"; touch pwned; echo "'}},
    )
    result = execute_operation(files.path, {})
    assert result["status"] == "success", result
    assert result["stdout"] == '";touch' + "pwned;echo" + '"'
    assert not (files.work_dir / "pwned").exists()


def test_commands_get_the_hosts_env_and_no_variable_of_the_librarys_own(make_step, monkeypatch):
    # The host sets every variable ocflow gives a command (engine/command_env.rs, which turns
    # bytecode caches off, among others); the library only removes secrets and adds the step's
    # env on top.
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    files = make_step(
        "execute_shell_command",
        {"command": 'printf "%s|%s" "$OCFLOW_STEP" "${PYTHONDONTWRITEBYTECODE-unset}"'},
        work={},
        extra={"env": {"OCFLOW_STEP": "step2"}},
    )
    result = execute_operation(files.path, {})
    assert result["stdout"] == "step2|unset"


def test_commands_start_through_the_hosts_launcher(make_step, tmp_path):
    launcher = tmp_path / "launcher.sh"
    launcher.write_text('#!/bin/sh\necho launched > "$LAUNCH_MARK"\nexec "$@"\n')
    launcher.chmod(0o755)
    mark = tmp_path / "mark"
    files = make_step(
        "execute_shell_command",
        {"command": "echo inside"},
        work={},
        extra={
            "sandbox": {"launcher": [str(launcher)]},
            "env": {"LAUNCH_MARK": str(mark)},
        },
    )
    result = execute_operation(files.path, {})
    assert result["status"] == "success", result
    assert (result["stdout"], result["sandbox"]) == ("inside\n", "landlock")
    assert mark.read_text() == "launched\n"


@pytest.mark.parametrize(
    ("layers", "said"),
    [
        ({"memory_mb": 256, "memory": "256 MiB per process (rlimit)"}, "256 MiB per process"),
        ({"memory_mb": 256, "memory": "256 MiB per step (cgroup)"}, "256 MiB per step"),
        ({"memory_mb": 256}, "may use 256 MiB:"),
    ],
)
def test_a_memory_failure_names_how_far_the_limit_reaches(make_step, layers, said):
    files = make_step(
        "execute_shell_command",
        {"command": "echo 'MemoryError' >&2; exit 1"},
        work={},
        extra={"sandbox": {"launcher": ["env"], "kind": "landlock", "layers": layers}},
    )
    result = execute_operation(files.path, {})
    assert result["status"] == "failure", result
    assert said in result["message"], result["message"]


@pytest.mark.parametrize(
    ("command", "reproduced", "said"),
    [
        ("python3 -c 'print(1 / 0)'", True, "shows the problem"),
        ("kill -SEGV $$", True, "shows the problem"),
        ("true", False, "does not show the problem"),
        ("no-such-program-here", False, "shows nothing"),
        ("sleep 5", False, "timed out"),
    ],
)
def test_reproduce_says_whether_the_command_shows_the_problem(make_step, command, reproduced, said):
    files = make_step(
        "reproduce",
        {"command": command},
        limits={"timeout_seconds": 1, "max_output_bytes": 1048576},
    )
    result = execute_operation(files.path, {})
    # It succeeds only when the command shows the problem; otherwise a recovery may replace it.
    assert result["status"] == ("success" if reproduced else "failure"), result
    assert result["reproduced"] is reproduced, result
    assert said in result["message"], result["message"]


@pytest.mark.parametrize(
    ("fallback", "reproduced", "command", "said"),
    [
        # The model's command shows nothing; the repository's tests fail now: they show it.
        ("exit 3", True, "exit 3", "the repository's tests `exit 3` fail now"),
        # Both pass: nothing shows the problem.
        ("true", False, "echo shown", "the repository's tests `true` show nothing either"),
        # Tests the shell cannot run show nothing either.
        ("no-such-test-runner-here", False, "echo shown", "show nothing either"),
        # A runner that ran no test (pytest's exit 5) shows no failing test.
        (
            "echo 'no tests ran in 0.01s'; exit 5",
            False,
            "echo shown",
            "show nothing either",
        ),
    ],
)
def test_reproduce_falls_back_to_the_repositorys_tests(
    make_step, fallback, reproduced, command, said
):
    files = make_step(
        "reproduce",
        {"command": "echo shown", "fallback_command": fallback},
        limits={"timeout_seconds": 5, "max_output_bytes": 1048576},
    )
    result = execute_operation(files.path, {})
    assert result["status"] == ("success" if reproduced else "failure"), result
    assert result["reproduced"] is reproduced, result
    # The command that showed the problem is the one the check after the change runs.
    assert result["command"] == command, result
    assert said in result["message"], result["message"]
    if reproduced:
        assert result["first_command"] == "echo shown", result
        assert "`echo shown` passes before any change" in result["message"], result["message"]


def test_a_fallback_is_not_run_when_the_models_command_shows_the_problem(make_step, tmp_path):
    marker = tmp_path / "ran"
    files = make_step(
        "reproduce",
        {"command": "exit 1", "fallback_command": f"touch {marker}; exit 1"},
        limits={"timeout_seconds": 5, "max_output_bytes": 1048576},
    )
    result = execute_operation(files.path, {})
    assert result["reproduced"] is True, result
    assert result["command"] == "exit 1", result
    assert not marker.exists()


@pytest.mark.parametrize(
    ("earlier", "ran"),
    [
        # The reproduction fell back to the repository's tests: the check runs them.
        ({"reproduced": True, "command": "echo from-the-reproduction"}, "from-the-reproduction"),
        # It showed nothing: the check runs its own command.
        ({"reproduced": False, "command": "echo nothing"}, "own"),
    ],
)
def test_run_tests_runs_the_command_its_reproduction_showed_the_problem_with(
    make_step, earlier_step, earlier, ran
):
    ref = earlier_step("reproduce", {"status": "success", "message": "m", **earlier})
    files = make_step(
        "run_tests",
        {"command": "echo own", "command_from_step": "reproduce"},
        steps={"reproduce": ref},
    )
    result = execute_operation(files.path, {})
    assert result["stdout"].strip() == ran, result
