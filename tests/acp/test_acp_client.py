"""`ocflow acp` driven by a real ACP client: the official Python SDK (`agent-client-protocol`
on PyPI, which validates every message against the protocol's schema), against a fake
OpenAI-compatible server over real HTTP. A prompt becomes a flow shown as a plan and tool calls;
its changes come as diff content and are applied only when the permission is granted; a
rejected apply writes nothing; a cancel interrupts the flow resumably and the next prompt offers
to resume it; a session is loaded again by its task id."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import acp
import pytest
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

ROOT = Path(__file__).resolve().parents[2]
# A sentence of ocflow's planning system prompt (prompts/plan_system.md).
PLANNER_MARK = "You break a coding task into a short flow"
TASK = "Write NOTES.md saying that the tests pass."
PLAN = {
    "steps": [
        {
            "id": "notes",
            "operation": "write_file",
            "description": "write the notes",
            "params": {"file_path": "NOTES.md", "content": "The tests pass.\n"},
        }
    ]
}


def ocflow_binary() -> str:
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    binary = target / "debug" / "ocflow"
    if not binary.exists():
        subprocess.run(["cargo", "build", "--quiet", "--bin", "ocflow"], cwd=ROOT, check=True)
    return str(binary)


class FakeLlm(ThreadingHTTPServer):
    """Plans with PLAN; answers every other request with a sentence. `delay` holds the plan's
    answer back (seconds), so a cancel can arrive while the flow plans."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.delay = 0.0
        self.requests: list[dict] = []
        self.authorizations: list[str | None] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class Handler(BaseHTTPRequestHandler):
    server: FakeLlm

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # /v1/models
        self.reply({"object": "list", "data": [{"id": "m", "object": "model"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        self.server.authorizations.append(self.headers.get("Authorization"))
        planning = PLANNER_MARK in json.dumps(body.get("messages"))
        if planning and self.server.delay:
            threading.Event().wait(self.server.delay)
        text = json.dumps(PLAN) if planning else "Wrote NOTES.md."
        self.reply(
            {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        )

    def reply(self, value: dict) -> None:
        data = json.dumps(value).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass


class Editor(acp.Client):
    """The client's side: what the person would see, and their answers to permissions."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.updates: list = []
        self.asked: list = []

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.asked.append((tool_call, [o.option_id for o in options]))
        if not self.answers:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=self.answers.pop(0))
        )

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update)

    def of_kind(self, kind: str) -> list:
        return [u for u in self.updates if u.session_update == kind]


@pytest.fixture
def llm():
    server = FakeLlm()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("# demo\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(git + ["init", "-q"], cwd=repo, check=True)
    subprocess.run(git + ["add", "-A"], cwd=repo, check=True)
    subprocess.run(git + ["commit", "-qm", "start"], cwd=repo, check=True)
    return repo


KEY = "sk-acp-test-0123456789"


def environment(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    env["OCFLOW_API_KEY"] = KEY
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return env


async def session(editor, llm, repo, tmp_path, work, *flags):
    """Starts `ocflow acp` under the client, initializes, and runs `work(connection)`."""
    command = [ocflow_binary(), "--base-url", llm.url, "--model", "m", "acp", *flags]
    async with acp.spawn_agent_process(
        editor, *command, env=environment(tmp_path), cwd=str(repo)
    ) as (connection, _process):
        init = await connection.initialize(protocol_version=acp.PROTOCOL_VERSION)
        assert init.agent_capabilities.load_session is True
        return await asyncio.wait_for(work(connection), timeout=120)


def test_a_prompt_becomes_a_flow_whose_changes_are_applied_when_allowed(llm, repo, tmp_path):
    editor = Editor(["apply"])

    async def work(connection):
        new = await connection.new_session(cwd=str(repo), mcp_servers=[])
        answer = await connection.prompt(session_id=new.session_id, prompt=[acp.text_block(TASK)])
        return new.session_id, answer

    session_id, answer = asyncio.run(session(editor, llm, repo, tmp_path, work))
    assert answer.stop_reason == "end_turn"
    # The plan, its step as a tool call that completed, ocflow's words, the diff.
    plans = editor.of_kind("plan")
    assert plans and plans[-1].entries[0].content == "write the notes"
    assert plans[-1].entries[0].status == "completed"
    calls = editor.of_kind("tool_call")
    step = next(c for c in calls if c.tool_call_id == f"{session_id}/notes")
    assert step.kind == "edit" and step.status == "in_progress"
    assert step.locations[0].path == str(repo / "NOTES.md")
    done = [
        u for u in editor.of_kind("tool_call_update") if u.tool_call_id == f"{session_id}/notes"
    ]
    assert done[-1].status == "completed"
    messages = " ".join(m.content.text for m in editor.of_kind("agent_message_chunk"))
    assert f"Task {session_id} succeeded" in messages, messages
    changes = next(c for c in calls if c.tool_call_id == f"apply-{session_id}")
    diff = changes.content[0]
    assert diff.type == "diff" and diff.path == str(repo / "NOTES.md")
    assert diff.new_text == "The tests pass.\n" and diff.old_text is None
    # Asked once, for the apply; allowed, so written.
    assert [options for _, options in editor.asked] == [["apply", "keep"]]
    assert (repo / "NOTES.md").read_text() == "The tests pass.\n"
    applied = [u for u in editor.of_kind("tool_call_update") if u.tool_call_id.startswith("apply")]
    assert applied[-1].status == "completed"
    # The key reached the endpoint (through the pipe each flow is handed it by), and nothing
    # the client was shown.
    assert llm.authorizations and set(llm.authorizations) == {f"Bearer {KEY}"}
    assert KEY not in repr(editor.updates) + repr(editor.asked)


def test_changes_the_person_keeps_back_are_not_written(llm, repo, tmp_path):
    editor = Editor(["keep"])

    async def work(connection):
        new = await connection.new_session(cwd=str(repo), mcp_servers=[])
        return await connection.prompt(session_id=new.session_id, prompt=[acp.text_block(TASK)])

    answer = asyncio.run(session(editor, llm, repo, tmp_path, work))
    assert answer.stop_reason == "end_turn"
    assert not (repo / "NOTES.md").exists()
    kept = [u for u in editor.of_kind("tool_call_update") if u.tool_call_id.startswith("apply")]
    assert "ocflow apply" in kept[-1].content[0].content.text


def test_a_cancel_interrupts_the_flow_resumably_and_the_next_prompt_resumes_it(llm, repo, tmp_path):
    llm.delay = 4.0
    editor = Editor(["resume", "apply"])

    async def work(connection):
        new = await connection.new_session(cwd=str(repo), mcp_servers=[])
        prompt = asyncio.ensure_future(
            connection.prompt(session_id=new.session_id, prompt=[acp.text_block(TASK)])
        )
        # Cancel while the flow plans.
        while not llm.requests:
            await asyncio.sleep(0.1)
        await connection.cancel(session_id=new.session_id)
        first = await prompt
        llm.delay = 0.0
        second = await connection.prompt(
            session_id=new.session_id, prompt=[acp.text_block("go on")]
        )
        return new.session_id, first, second

    session_id, first, second = asyncio.run(session(editor, llm, repo, tmp_path, work))
    assert first.stop_reason == "cancelled"
    assert second.stop_reason == "end_turn"
    # Asked to resume the stopped flow (chosen), then for the apply.
    assert [options for _, options in editor.asked] == [["resume", "new"], ["apply", "keep"]]
    assert editor.asked[0][0].title.startswith(f"Task {session_id} stopped before its end")
    assert (repo / "NOTES.md").read_text() == "The tests pass.\n"


def test_a_session_is_loaded_again_by_its_task_id(llm, repo, tmp_path):
    first = Editor(["keep"])

    async def run(connection):
        new = await connection.new_session(cwd=str(repo), mcp_servers=[])
        await connection.prompt(session_id=new.session_id, prompt=[acp.text_block(TASK)])
        return new.session_id

    session_id = asyncio.run(session(first, llm, repo, tmp_path, run))
    again = Editor([])

    async def load(connection):
        await connection.load_session(cwd=str(repo), session_id=session_id, mcp_servers=[])

    asyncio.run(session(again, llm, repo, tmp_path, load))
    assert again.of_kind("user_message_chunk")[0].content.text == TASK
    assert again.of_kind("plan")[-1].entries[0].content == "write the notes"
    step = [u for u in again.of_kind("tool_call_update") if u.tool_call_id == f"{session_id}/notes"]
    assert step[-1].status == "completed"
    said = again.of_kind("agent_message_chunk")[-1].content.text
    assert said.startswith(f"Task {session_id} succeeded"), said


def test_a_bad_session_or_prompt_is_an_error_that_says_what_to_do(llm, repo, tmp_path):
    editor = Editor([])

    async def work(connection):
        errors = []
        for call in (
            connection.prompt(session_id="nope", prompt=[acp.text_block(TASK)]),
            connection.load_session(cwd=str(repo), session_id="no-such-task", mcp_servers=[]),
            connection.new_session(cwd="relative/path", mcp_servers=[]),
        ):
            with pytest.raises(acp.RequestError) as raised:
                await call
            errors.append(str(raised.value))
        return errors

    errors = asyncio.run(session(editor, llm, repo, tmp_path, work))
    assert "start one with session/new" in errors[0], errors
    assert "ocflow list --all" in errors[1], errors
    assert "give the repository's path" in errors[2], errors


@pytest.mark.parametrize("answer", ["approve", "reject"])
def test_approve_puts_the_plan_to_the_person_first(llm, repo, tmp_path, answer):
    editor = Editor([answer, "apply"])

    async def work(connection):
        new = await connection.new_session(cwd=str(repo), mcp_servers=[])
        return await connection.prompt(session_id=new.session_id, prompt=[acp.text_block(TASK)])

    result = asyncio.run(session(editor, llm, repo, tmp_path, work, "--approve", "plan"))
    assert result.stop_reason == "end_turn"
    call, options = editor.asked[0]
    assert options == ["approve", "reject"] and call.kind == "think", editor.asked
    if answer == "approve":
        # Approved, the flow ran on; its changes were then put to the person and applied.
        assert [o for _, o in editor.asked] == [["approve", "reject"], ["apply", "keep"]]
        assert (repo / "NOTES.md").read_text() == "The tests pass.\n"
    else:
        assert len(editor.asked) == 1
        assert not (repo / "NOTES.md").exists()
        said = editor.of_kind("agent_message_chunk")[-1].content.text
        assert "was rejected; nothing was applied" in said, said


def test_a_cancelled_approval_leaves_the_flow_waiting_and_the_next_prompt_asks_again(
    llm, repo, tmp_path
):
    editor = Editor([])  # no answer: the client cancels the question

    async def work(connection):
        new = await connection.new_session(cwd=str(repo), mcp_servers=[])
        first = await connection.prompt(session_id=new.session_id, prompt=[acp.text_block(TASK)])
        editor.answers = ["approve", "apply"]
        second = await connection.prompt(session_id=new.session_id, prompt=[acp.text_block("ok")])
        return first, second

    first, second = asyncio.run(session(editor, llm, repo, tmp_path, work, "--approve", "plan"))
    # Not a rejection: the flow still waits, and the next prompt puts the same question.
    assert first.stop_reason == "cancelled"
    assert second.stop_reason == "end_turn"
    asked = [options for _, options in editor.asked]
    assert asked == [["approve", "reject"], ["approve", "reject"], ["apply", "keep"]], asked
    assert (repo / "NOTES.md").read_text() == "The tests pass.\n"
