"""No dead ends for an agent (issue 42): a flow that waits for a person or pauses on a budget
reaches the tools as such (exit code 3 is no error), with the calls that go on —
ocflow_approve, ocflow_reject, ocflow_resume — and a task followed from a conversation that did
not start it waits as long polls do, found by its id alone. The real SDK's tool classes, the
real ocflow binary, the fake LLM over HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_llm import FakeLLM

from ocflow_openhands.tool import (
    OcflowApproveAction,
    OcflowApproveExecutor,
    OcflowRejectAction,
    OcflowRejectExecutor,
    OcflowResumeAction,
    OcflowResumeExecutor,
    OcflowRunAction,
    OcflowRunExecutor,
    OcflowSession,
    OcflowStatusAction,
    OcflowStatusExecutor,
)

TASK = "Write done.txt after a slow check"
PLAN = {
    "version": 1,
    "task": TASK,
    "steps": [
        {"id": "slow", "operation": "execute_shell_command", "params": {"command": "sleep 3"}},
        {
            "id": "write",
            "operation": "write_file",
            "params": {"file_path": "done.txt", "content": "done\n"},
            "depends_on": ["slow"],
        },
    ],
}


def never_called(messages):
    raise AssertionError("no agent here: the tools are called directly")


@pytest.fixture
def fake_llm():
    fake = FakeLLM(agent_script=never_called, plan=PLAN)
    yield fake
    fake.close()


def user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    config = tmp_path / "user-config" / "ocflow"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(text)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "user-config"))
    for name in ("OCFLOW_API_KEY", "OPENAI_API_KEY", "LLM_API_KEY", "OCFLOW_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def session(ocflow_bin: str, git_repo: Path, fake: FakeLLM, repo: bool = True) -> OcflowSession:
    return OcflowSession(
        working_dir=str(git_repo.parent.parent),
        ocflow_bin=ocflow_bin,
        repo=str(git_repo) if repo else None,
        base_url=fake.base_url,
        model="fake-ocflow",
        use_agent_llm=False,
    )


def test_a_waiting_flow_is_approved_or_rejected_through_the_tools(
    ocflow_bin, git_repo, fake_llm, tmp_path, monkeypatch
):
    user_config(tmp_path, monkeypatch, "[approve]\nplan = true\n")
    tools = session(ocflow_bin, git_repo, fake_llm)
    run = OcflowRunExecutor(tools)(OcflowRunAction(task=TASK, task_id="ask", wait_seconds=60))
    assert (run.state, run.exit_code, run.running, run.is_error) == ("waiting", 3, False, False)
    assert "next: ask the user, then ocflow_approve task_id=ask" in run.text, run.text
    approved = OcflowApproveExecutor(tools)(OcflowApproveAction(task_id="ask", wait_seconds=60))
    assert (approved.state, approved.exit_code) == ("succeeded", 0), approved.text
    assert approved.changed_files == ["done.txt"]

    second = OcflowRunExecutor(tools)(OcflowRunAction(task=TASK, task_id="no", wait_seconds=60))
    assert second.state == "waiting", second.text
    rejected = OcflowRejectExecutor(tools)(OcflowRejectAction(task_id="no", reason="not this week"))
    assert (rejected.exit_code, rejected.is_error) == (0, False), rejected.text
    assert "nothing was written" in rejected.text
    assert not (git_repo / "done.txt").exists()


def test_a_paused_flow_resumes_with_a_higher_budget_and_is_followed_from_elsewhere(
    ocflow_bin, git_repo, fake_llm, tmp_path, monkeypatch
):
    user_config(tmp_path, monkeypatch, '[budget]\nmax_time = "2s"\n')
    tools = session(ocflow_bin, git_repo, fake_llm)
    run = OcflowRunExecutor(tools)(OcflowRunAction(task=TASK, task_id="slow", wait_seconds=60))
    assert (run.state, run.exit_code, run.is_error) == ("paused", 3, False), run.text
    assert "next: ocflow_resume task_id=slow with a higher budget" in run.text

    # A new conversation (a session that started nothing), without a repository: the task is
    # found by its id, and a long poll on a flow that does not change waits its time.
    elsewhere = session(ocflow_bin, git_repo, fake_llm, repo=False)
    looked = OcflowStatusExecutor(elsewhere)(OcflowStatusAction(task_id="slow", wait_seconds=4))
    assert looked.state == "paused", looked.text
    assert "next: ocflow_resume task_id=slow" in looked.text

    resumed = OcflowResumeExecutor(elsewhere)(
        OcflowResumeAction(task_id="slow", max_time="5m", wait_seconds=60)
    )
    assert (resumed.state, resumed.exit_code) == ("succeeded", 0), resumed.text
    assert resumed.changed_files == ["done.txt"]


def test_the_preset_keeps_openhands_system_prompt_and_adds_its_own():
    """The orchestrator preset extends OpenHands' system prompt (the SDK warns against
    replacing it): the built-in text stays, and the orchestrator's follows it, exit code 3 and
    the new tools included."""
    from openhands.sdk import LLM

    from ocflow_openhands import ORCHESTRATOR_SYSTEM_PROMPT, get_orchestrator_agent

    llm = LLM(model="openai/fake", base_url="http://127.0.0.1:9", usage_id="t", num_retries=0)
    agent = get_orchestrator_agent(llm)
    assert agent.system_prompt is None
    built_in = agent.static_system_message
    assert len(built_in) > 5000, "OpenHands' own system prompt"
    assert ORCHESTRATOR_SYSTEM_PROMPT not in built_in
    assert agent.agent_context.system_message_suffix.endswith(ORCHESTRATOR_SYSTEM_PROMPT)
    assert "ocflow_resume" in ORCHESTRATOR_SYSTEM_PROMPT
    assert "ocflow_approve" in ORCHESTRATOR_SYSTEM_PROMPT


def approval_script(messages):
    """The agent's side across two conversations, as a model would play it: the first runs the
    flow, finds it waiting for the user's approval of its plan and asks them; the second (a
    fresh conversation, where the user approved) answers it, follows it, reviews and applies."""
    from fake_llm import last_tool_result, text_of

    tool, text = last_tool_result(messages)
    user = next(text_of(m.get("content")) for m in reversed(messages) if m["role"] == "user")
    if tool is None:
        if "I approve" in user:
            return "ocflow_approve", {"task_id": "ask", "wait_seconds": 60}
        return "ocflow_run", {"task": TASK, "repo": "project/greeter", "task_id": "ask"}
    if "next: ask the user" in text:
        return "finish", {"message": f"Task ask waits for your approval of its plan:\n{text}"}
    if "next: ocflow_status" in text:
        return "ocflow_status", {"task_id": "ask", "wait_seconds": 30}
    if "next: ocflow_diff" in text:
        return "ocflow_diff", {"task_id": "ask"}
    if tool == "ocflow_diff":
        return "ocflow_apply", {"task_id": "ask"}
    return "finish", {"message": f"Done:\n{text}"}


def test_an_approval_round_trip_through_two_agent_conversations(
    ocflow_bin, git_repo, tmp_path, monkeypatch
):
    """The whole round trip with the real SDK's agent loop: a flow waiting for the user ends the
    first conversation with the question (no error, no stuck agent); a fresh conversation,
    told the user approves, approves it by its id, follows it to its end and applies after the
    review gate's confirmation."""
    from openhands.sdk.conversation.state import ConversationExecutionStatus
    from test_orchestrator import make_conversation, observations

    from ocflow_openhands import OcflowApplyObservation

    user_config(tmp_path, monkeypatch, "[approve]\nplan = true\n")
    fake = FakeLLM(agent_script=approval_script, plan=PLAN)
    try:
        first = make_conversation(fake, ocflow_bin, git_repo)
        first.send_message(TASK + " in the repository project/greeter; show me the plan first.")
        first.run()
        assert first.state.execution_status == ConversationExecutionStatus.FINISHED
        finished = first.state.events[-1].model_dump_json()
        assert "waits for your approval of its plan" in finished, finished
        assert not (git_repo / "done.txt").exists()
        first.close()

        second = make_conversation(fake, ocflow_bin, git_repo)
        second.send_message("I approve the plan of task ask.")
        second.run()
        # The review gate holds the apply for the user's confirmation; run() again confirms.
        seen = [getattr(o, "text", "") for o in observations(second)]
        assert (
            second.state.execution_status == ConversationExecutionStatus.WAITING_FOR_CONFIRMATION
        ), seen
        assert not (git_repo / "done.txt").exists()
        second.run()
        assert second.state.execution_status == ConversationExecutionStatus.FINISHED
        seen = [getattr(o, "text", "") for o in observations(second)]
        assert (git_repo / "done.txt").is_file(), "\n---\n".join(seen)
        assert (git_repo / "done.txt").read_text() == "done\n"
        applied = [o for o in observations(second) if isinstance(o, OcflowApplyObservation)]
        assert applied and applied[-1].applied_files == ["done.txt"]
        second.close()
    finally:
        fake.close()
