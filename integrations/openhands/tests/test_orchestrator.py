"""The orchestrator agent and the ocflow tools with the real OpenHands SDK, the real ocflow binary
and a fake LLM over HTTP: the agent runs a flow on a git repository, sees its steps, and applies
after the user confirms (or writes nothing when they reject). ocflow is started the way
OpenHands' runtime starts a command where it can: AI_AGENT=openhands, the workspace as the
current directory, no TTY, and the key only in the child's environment."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLM, last_tool_result
from openhands.sdk import LLM
from openhands.sdk.conversation.state import ConversationExecutionStatus
from openhands.sdk.event import ObservationEvent, UserRejectObservation
from pydantic import SecretStr

from ocflow_openhands import (
    OcflowApplyObservation,
    OcflowDiffObservation,
    OcflowRunAction,
    OcflowRunObservation,
    OcflowStatusAction,
    OcflowStatusObservation,
    get_orchestrator_agent,
    start_orchestrator_conversation,
)

KEY = "sk-ocflow-test-5b1f0e7d9c2a"
HELLO = "def greet():\n    print('Hello, OpenHands Orchestrator!')\n"
TASK = "Create hello.py with a function greet() that prints 'Hello, OpenHands Orchestrator!'"
PLAN = {
    "version": 1,
    "task": TASK,
    "steps": [
        {"id": "read_readme", "operation": "read_file", "params": {"file_path": "README.md"}},
        {
            "id": "write_hello",
            "operation": "write_file",
            "params": {"file_path": "hello.py", "content": HELLO},
            "depends_on": ["read_readme"],
        },
        {
            "id": "run_hello",
            "operation": "execute_shell_command",
            "params": {"command": "python3 -c 'import hello; hello.greet()'"},
            "depends_on": ["write_hello"],
        },
    ],
}


def orchestrator_script(messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """The agent's side, as a model would play it: run, follow, review, apply, finish."""
    tool, text = last_tool_result(messages)
    if tool is None:
        arguments = {"task": TASK, "repo": "project/greeter", "task_id": "greet"}
        return "ocflow_run", arguments
    if tool in ("ocflow_run", "ocflow_status"):
        if "next: ocflow_status" in text:
            return "ocflow_status", {"task_id": "greet", "wait_seconds": 30}
        if "next: ocflow_diff" in text:
            return "ocflow_diff", {"task_id": "greet"}
        return "finish", {"message": f"The flow did not succeed:\n{text}"}
    if tool == "ocflow_diff":
        return "ocflow_apply", {"task_id": "greet"}
    if tool == "ocflow_apply" and "Action rejected" in text:
        return "finish", {"message": "You rejected the changes; nothing was written."}
    return "finish", {"message": f"Done:\n{text}"}


@pytest.fixture
def fake_llm():
    fake = FakeLLM(agent_script=orchestrator_script, plan=PLAN)
    yield fake
    fake.close()


@pytest.fixture
def recording_ocflow(ocflow_bin: str, tmp_path: Path) -> tuple[str, Path]:
    """A wrapper that records how each ocflow child was started (its directory, AI_AGENT,
    whether any standard stream is a TTY, its session, a hash of the key it received, its
    arguments), then runs the real binary."""
    record = tmp_path / "launches.log"
    wrapper = tmp_path / "ocflow-recorded"
    wrapper.write_text(
        "#!/bin/sh\n"
        "{\n"
        '  echo "launch cwd=$(pwd)"\n'
        '  echo "ai_agent=${AI_AGENT:-}"\n'
        "  if [ -t 0 ] || [ -t 1 ] || [ -t 2 ]; then echo tty=yes; else echo tty=no; fi\n"
        '  echo "session_leader=$([ "$(ps -o sid= -p $$ | tr -d " ")" = "$$" ] && echo yes)"\n'
        '  echo "key_sha=$(printf %s "${LLM_API_KEY:-}" | sha256sum | cut -d\' \' -f1)"\n'
        "  printf 'arg=%s\\n' \"$@\"\n"
        f"}} >> '{record}'\n"
        f"exec '{ocflow_bin}' \"$@\"\n"
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper), record


def make_conversation(fake: FakeLLM, ocflow: str, repo: Path):
    # A clean environment for ocflow's settings: only what the tool gives it may count.
    for name in ("OCFLOW_API_KEY", "OPENAI_API_KEY", "LLM_API_KEY", "OCFLOW_BASE_URL"):
        os.environ.pop(name, None)
    llm = LLM(
        model="openai/fake-orchestrator",
        base_url=fake.base_url,
        api_key=SecretStr(KEY),
        usage_id="orchestrator",
        num_retries=0,
    )
    agent = get_orchestrator_agent(llm, ocflow_bin=ocflow)
    workspace = repo.parent.parent
    return start_orchestrator_conversation(agent, workspace, visualizer=None)


def observations(conversation) -> list[Any]:
    return [e.observation for e in conversation.state.events if isinstance(e, ObservationEvent)]


def assert_key_nowhere(conversation, repo: Path) -> None:
    """The key is in no event of the conversation and no file of the repository or the task."""
    for event in conversation.state.events:
        assert KEY not in event.model_dump_json(), type(event).__name__
    for path in repo.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def assert_started_like_openhands(record: Path, workspace: Path) -> None:
    launches = record.read_text().split("launch ")[1:]
    assert launches, "ocflow was never started"
    key_sha = hashlib.sha256(KEY.encode()).hexdigest()
    for launch in launches:
        lines = launch.splitlines()
        assert lines[0] == f"cwd={workspace}"
        assert "ai_agent=openhands" in lines
        assert "tty=no" in lines
        assert "session_leader=yes" in lines
        assert f"key_sha={key_sha}" in lines
        assert not any(KEY in line for line in lines if line.startswith("arg="))


def test_agent_runs_a_flow_sees_its_steps_and_applies_after_confirmation(
    fake_llm: FakeLLM, recording_ocflow: tuple[str, Path], git_repo: Path
) -> None:
    ocflow, record = recording_ocflow
    conversation = make_conversation(fake_llm, ocflow, git_repo)
    conversation.send_message(TASK + " in the repository project/greeter.")
    conversation.run()

    # The review gate: the agent asked to apply, and the conversation waits for the user.
    status = conversation.state.execution_status
    assert status == ConversationExecutionStatus.WAITING_FOR_CONFIRMATION
    assert not (git_repo / "hello.py").exists()
    seen = observations(conversation)
    run = next(o for o in seen if isinstance(o, OcflowRunObservation))
    assert (run.task_id, run.state, run.running, run.exit_code) == ("greet", "succeeded", False, 0)
    assert [(s.id, s.operation, s.status) for s in run.steps] == [
        ("read_readme", "read_file", "succeeded"),
        ("write_hello", "write_file", "succeeded"),
        ("run_hello", "execute_shell_command", "succeeded"),
    ]
    step_events = [(e["type"], e.get("step")) for e in run.events if e["type"].startswith("step_")]
    assert step_events == [
        ("step_started", "read_readme"),
        ("step_finished", "read_readme"),
        ("step_started", "write_hello"),
        ("step_finished", "write_hello"),
        ("step_started", "run_hello"),
        ("step_finished", "run_hello"),
    ]
    assert "ok write_hello succeeded" in run.text
    assert run.changed_files == ["hello.py"]
    diff = next(o for o in seen if isinstance(o, OcflowDiffObservation))
    assert "+++ b/hello.py" in diff.diff and "+def greet():" in diff.diff

    # The user confirms: run() again executes the pending ocflow_apply.
    conversation.run()
    assert conversation.state.execution_status == ConversationExecutionStatus.FINISHED
    assert (git_repo / "hello.py").read_text() == HELLO
    applied = next(o for o in observations(conversation) if isinstance(o, OcflowApplyObservation))
    assert (applied.applied_files, applied.exit_code, applied.is_error) == (["hello.py"], 0, False)

    # ocflow's own calls (plan, summary) reached the fake with the agent's key, as a header.
    ocflow_calls = [r for r in fake_llm.requests if not r.from_agent]
    assert any(r.is_plan for r in ocflow_calls)
    assert all(r.header("Authorization") == f"Bearer {KEY}" for r in ocflow_calls)
    assert {r.body["model"] for r in ocflow_calls} == {"fake-orchestrator"}
    assert_key_nowhere(conversation, git_repo)
    assert_started_like_openhands(record, git_repo.parent.parent)
    conversation.close()


def test_rejected_apply_writes_nothing(
    fake_llm: FakeLLM, recording_ocflow: tuple[str, Path], git_repo: Path
) -> None:
    ocflow, _ = recording_ocflow
    conversation = make_conversation(fake_llm, ocflow, git_repo)
    conversation.send_message(TASK + " in the repository project/greeter.")
    conversation.run()
    status = conversation.state.execution_status
    assert status == ConversationExecutionStatus.WAITING_FOR_CONFIRMATION

    conversation.reject_pending_actions("Not now, I want to read it myself first.")
    conversation.run()

    assert conversation.state.execution_status == ConversationExecutionStatus.FINISHED
    assert not (git_repo / "hello.py").exists()
    events = conversation.state.events
    assert any(isinstance(e, UserRejectObservation) for e in events)
    assert not any(isinstance(o, OcflowApplyObservation) for o in observations(conversation))
    conversation.close()

    # The flow's changes are still there to apply later: another conversation's ocflow_status
    # finds the task (through ocflow status) succeeded and not applied.
    later = make_conversation(fake_llm, ocflow, git_repo)
    status = later.execute_tool(
        "ocflow_status", OcflowStatusAction(task_id="greet", repo="project/greeter")
    )
    assert isinstance(status, OcflowStatusObservation) and not status.is_error
    assert (status.state, status.running) == ("succeeded", False)
    assert [s.id for s in status.steps] == ["read_readme", "write_hello", "run_hello"]
    assert "succeeded, not applied" in status.text
    later.close()


def test_run_answers_at_its_wait_and_status_gives_each_event_once(
    fake_llm: FakeLLM, ocflow_bin: str, git_repo: Path
) -> None:
    conversation = make_conversation(fake_llm, ocflow_bin, git_repo)
    started = time.monotonic()
    first = conversation.execute_tool(
        "ocflow_run",
        OcflowRunAction(task=TASK, repo="project/greeter", task_id="greet", wait_seconds=0),
    )
    assert isinstance(first, OcflowRunObservation)
    assert first.running and first.exit_code is None
    assert "next: ocflow_status" in first.text

    answers = [first]
    while answers[-1].running:
        assert len(answers) < 30, "status never saw the flow end"
        answers.append(
            conversation.execute_tool("ocflow_status", OcflowStatusAction(wait_seconds=10))
        )
    assert all(isinstance(a, OcflowStatusObservation) for a in answers[1:])
    assert time.monotonic() - started < 30
    # Every answer is different (the SDK's stuck detector never fires), and every event
    # reaches the agent exactly once across them.
    texts = [a.text for a in answers]
    assert len(set(texts)) == len(texts)
    seen = [(e["type"], e.get("step"), e.get("ts")) for a in answers for e in a.events]
    assert len(seen) == len(set(seen))
    kinds = [kind for kind, _, _ in seen]
    # (a `warning` may come first: ocflow says it took the `openai/` prefix off the model)
    assert kinds.count("flow_started") == 1 and kinds[-1] == "flow_finished"
    assert kinds.count("step_finished") == 3
    last = answers[-1]
    assert (last.state, last.exit_code, last.changed_files) == ("succeeded", 0, ["hello.py"])
    conversation.close()


def test_a_flow_that_cannot_reach_its_llm_is_an_error_the_agent_reads(
    fake_llm: FakeLLM, ocflow_bin: str, git_repo: Path
) -> None:
    fake_llm.ocflow_error_status = 401
    conversation = make_conversation(fake_llm, ocflow_bin, git_repo)
    answer = conversation.execute_tool(
        "ocflow_run", OcflowRunAction(task=TASK, repo="project/greeter", wait_seconds=60)
    )
    assert isinstance(answer, OcflowRunObservation)
    assert answer.is_error and not answer.running
    assert answer.exit_code not in (0, None) and answer.state == "failed"
    # ocflow's reason reaches the agent (today as flow_finished's reason; issue 27 §1 adds an
    # `error` event with a code and a hint, which the observation shows as its own line).
    assert "HTTP 401" in answer.text, answer.text
    assert KEY not in answer.model_dump_json()
    assert not (git_repo / "hello.py").exists()
    conversation.close()
