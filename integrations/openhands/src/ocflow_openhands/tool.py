"""ocflow as OpenHands tools: `ocflow_run`, `ocflow_status`, `ocflow_diff` and `ocflow_apply`,
each a `ToolDefinition` with a typed action and a typed observation, sharing one session that
drives the ocflow binary's `--json` stream. `OcflowToolSet` (registered as `ocflow`) makes the
four of them for a conversation.

The SDK runs a tool call to its end and turns the one observation it returns into one event
(`Agent._execute_action_event`); a tool cannot add events while it runs. So `ocflow_run`
returns when the flow ends or after a bounded wait with every step event so far, the flow
goes on in its own session, and `ocflow_status` waits for the next change and shows the events
since the last call. Every answer carries the elapsed time, so two polls are never identical
(the SDK's stuck detector stops a conversation on repeated identical observations)."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

from openhands.sdk.tool import (
    Action,
    Observation,
    ToolAnnotations,
    ToolDefinition,
    ToolExecutor,
    register_tool,
)
from pydantic import Field, SecretStr

from ocflow_openhands.flow_process import FlowProcess, parse_events, run_to_end
from ocflow_openhands.progress import FlowView, OcflowStep, describe_event, fold

if TYPE_CHECKING:
    from openhands.sdk.conversation import LocalConversation
    from openhands.sdk.conversation.state import ConversationState

# The secret (conversation secret, or inherited variable) that holds the key for ocflow.
API_KEY_VARIABLE = "LLM_API_KEY"
# Variables that outrank LLM_* in ocflow's precedence: removed when the tool sets LLM_*.
OUTRANKING = {
    "LLM_API_KEY": ("OCFLOW_API_KEY", "OPENAI_API_KEY", "OCFLOW_API_KEY_FILE"),
    "LLM_BASE_URL": ("OCFLOW_BASE_URL", "OPENAI_BASE_URL"),
    "LLM_MODEL": ("OCFLOW_MODEL",),
}
DEFAULT_RUN_WAIT_SECONDS = 120
MAX_WAIT_SECONDS = 600
DEFAULT_STATUS_WAIT_SECONDS = 30
# An observation keeps at most this many event lines (the newest) and this much diff text.
MAX_EVENT_LINES = 200
MAX_DIFF_CHARS = 30_000
SHORT_COMMAND_TIMEOUT = 300


# ---------------------------------------------------------------- actions


class OcflowRunAction(Action):
    """Plan a coding task into a flow with ocflow and run it on a repository."""

    task: str = Field(description="The coding task, in plain words, as complete as possible.")
    repo: str | None = Field(
        default=None,
        description="The repository (a git work tree). Default: the tool's repository, else "
        "the workspace.",
    )
    task_id: str | None = Field(
        default=None, description="An id for the flow (letters, digits, - and _); optional."
    )
    wait_seconds: int = Field(
        default=DEFAULT_RUN_WAIT_SECONDS,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description="How long to wait for the flow to end before answering with its progress "
        "so far (it keeps running; ocflow_status shows the rest).",
    )


class OcflowStatusAction(Action):
    """Show what a flow did since the last look, waiting for its next change."""

    task_id: str | None = Field(
        default=None, description="The flow's task id. Default: the latest flow started here."
    )
    repo: str | None = Field(default=None, description="The flow's repository, if not the default.")
    wait_seconds: int = Field(
        default=DEFAULT_STATUS_WAIT_SECONDS,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description="Wait up to this long for the flow's next change (a step starting or "
        "finishing, a recovery decision, the end) before answering.",
    )


class OcflowDiffAction(Action):
    """Show a finished flow's changes as a unified diff, for review before apply."""

    task_id: str | None = Field(
        default=None, description="The flow's task id. Default: the latest flow started here."
    )
    repo: str | None = Field(default=None, description="The flow's repository, if not the default.")
    stat: bool = Field(default=False, description="Only the changed files and line counts.")


class OcflowApplyAction(Action):
    """Write a flow's reviewed changes into the repository (needs the user's confirmation)."""

    task_id: str | None = Field(
        default=None, description="The flow's task id. Default: the latest flow started here."
    )
    repo: str | None = Field(default=None, description="The flow's repository, if not the default.")


class OcflowResumeAction(Action):
    """Continue a paused or interrupted flow where it stopped, with a higher budget if one
    stopped it."""

    task_id: str = Field(description="The flow's task id.")
    repo: str | None = Field(default=None, description="The flow's repository, if not the default.")
    max_tokens: int | None = Field(default=None, ge=1, description="The flow's new token budget.")
    max_cost: float | None = Field(default=None, gt=0, description="Its new budget in US dollars.")
    max_time: str | None = Field(
        default=None, description='Its new time budget across resumes ("90s", "5m", "1h30m").'
    )
    max_calls: int | None = Field(default=None, ge=1, description="Its new budget of model calls.")
    wait_seconds: int = Field(
        default=DEFAULT_RUN_WAIT_SECONDS,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description="How long to wait for the flow to end before answering with its progress.",
    )


class OcflowApproveAction(Action):
    """Say yes to what a waiting flow asks (its plan, a risky command, its apply): it goes on."""

    task_id: str = Field(description="The waiting flow's task id.")
    repo: str | None = Field(default=None, description="The flow's repository, if not the default.")
    wait_seconds: int = Field(
        default=DEFAULT_RUN_WAIT_SECONDS,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description="How long to wait for the flow to end before answering with its progress.",
    )


class OcflowRejectAction(Action):
    """Say no to what a waiting flow asks: it ends, and nothing is written."""

    task_id: str = Field(description="The waiting flow's task id.")
    reason: str = Field(description="Why, in the user's words (journaled with the flow).")
    repo: str | None = Field(default=None, description="The flow's repository, if not the default.")


# ---------------------------------------------------------------- observations


class OcflowFlowObservation(Observation):
    """A flow's progress: the step events since the last look and the flow's state."""

    task_id: str | None = Field(default=None, description="The flow's task id.")
    task_dir: str | None = Field(default=None, description="Where ocflow keeps the task.")
    state: str = Field(
        default="starting",
        description="starting, planning, running, succeeded, failed, no_change or interrupted.",
    )
    running: bool = Field(default=True, description="Whether the flow is still running.")
    elapsed_seconds: int = Field(default=0, description="Seconds since the flow started.")
    exit_code: int | None = Field(default=None, description="ocflow's exit code, once ended.")
    steps: list[OcflowStep] = Field(default_factory=list, description="Every step seen so far.")
    events: list[dict[str, Any]] = Field(
        default_factory=list,
        description="ocflow's own events (its --json lines) since the last look, heartbeats out.",
    )
    changed_files: list[str] = Field(default_factory=list, description="Files the flow changed.")
    summary: str = Field(default="", description="The flow's summary, once it has ended.")


class OcflowRunObservation(OcflowFlowObservation):
    """What `ocflow_run` saw: every event from the start to the end or to the wait's limit."""


class OcflowStatusObservation(OcflowFlowObservation):
    """What `ocflow_status` saw since the previous look at the same flow."""


class OcflowResumeObservation(OcflowFlowObservation):
    """What a resumed flow did."""


class OcflowApproveObservation(OcflowFlowObservation):
    """What an approved flow did once it went on."""


class OcflowRejectObservation(Observation):
    """How a rejection ended a waiting flow."""

    task_id: str | None = Field(default=None, description="The flow's task id.")
    exit_code: int = Field(default=0, description="ocflow reject's exit code.")


class OcflowDiffObservation(Observation):
    """A flow's changes as a unified diff."""

    task_id: str | None = Field(default=None, description="The flow's task id.")
    diff: str = Field(default="", description="The unified diff (or the --stat lines).")
    truncated: bool = Field(default=False, description="Whether the diff was cut.")


class OcflowApplyObservation(Observation):
    """What `ocflow_apply` wrote into the repository."""

    task_id: str | None = Field(default=None, description="The flow's task id.")
    applied_files: list[str] = Field(default_factory=list, description="Files written.")
    exit_code: int = Field(default=0, description="ocflow apply's exit code.")


# ---------------------------------------------------------------- the session


class OcflowSession:
    """What the four tools share in one conversation: how to start ocflow, and the flows this
    conversation started, with how far the agent has read each one."""

    def __init__(
        self,
        working_dir: str,
        ocflow_bin: str | None = None,
        repo: str | None = None,
        base_url: str | None = None,
        model: str | None = None,
        use_agent_llm: bool = True,
    ) -> None:
        self.working_dir = working_dir
        self.ocflow_bin = ocflow_bin
        self.repo = repo
        self.base_url = base_url
        self.model = model
        self.use_agent_llm = use_agent_llm
        self._lock = threading.Lock()
        self._flows: list[FlowProcess] = []
        # None: a flow found by its task id alone (the user's task index), named the same way.
        self._repo_of: dict[int, str | None] = {}
        self._seen: dict[int, int] = {}
        self._cancelled = threading.Event()
        # The keys a child may hold, to cut them out of any text an observation carries.
        self._keys: set[str] = set()

    # -- where and how ocflow runs

    def binary(self) -> str:
        candidate = self.ocflow_bin or os.environ.get("OCFLOW_BIN") or shutil.which("ocflow")
        if not candidate or not Path(candidate).is_file():
            raise OcflowUnavailable(
                "the ocflow binary was not found: install it on PATH, set OCFLOW_BIN, or give "
                "the ocflow tool its `ocflow_bin`"
            )
        return candidate

    def repository(self, requested: str | None) -> str:
        chosen = requested or self.repo or self.working_dir
        path = Path(chosen)
        if not path.is_absolute():
            path = Path(self.working_dir) / path
        return str(path)

    def child_environment(self, conversation: LocalConversation | None) -> dict[str, str]:
        """The environment of an ocflow child: this process's, as OpenHands' runtime gives a
        command (AI_AGENT=openhands, no colour), with the LLM settings for ocflow. The key
        travels only here: never on a command line, in a file or in an observation."""
        env = dict(os.environ)
        env["AI_AGENT"] = "openhands"
        env["NO_COLOR"] = "1"
        env["PAGER"] = "cat"
        base_url, model, key = self._llm_settings(conversation)
        for name, value in (
            ("LLM_BASE_URL", base_url),
            ("LLM_MODEL", model),
            (API_KEY_VARIABLE, key),
        ):
            if value:
                env[name] = value
                for stronger in OUTRANKING[name]:
                    env.pop(stronger, None)
        self._keys = {
            env[name] for name in (API_KEY_VARIABLE, *OUTRANKING[API_KEY_VARIABLE]) if env.get(name)
        }
        return env

    def _llm_settings(
        self, conversation: LocalConversation | None
    ) -> tuple[str | None, str | None, str | None]:
        base_url, model, key = self.base_url, self.model, None
        if conversation is not None:
            key = conversation.state.secret_registry.get_secret_value(API_KEY_VARIABLE)
            llm = getattr(conversation.agent, "llm", None)
            if self.use_agent_llm and llm is not None:
                base_url = base_url or llm.base_url
                model = model or llm.model
                if key is None and llm.api_key is not None:
                    raw = llm.api_key
                    key = raw.get_secret_value() if isinstance(raw, SecretStr) else raw
        return base_url, model, key

    def redact(self, text: str) -> str:
        for key in self._keys:
            text = text.replace(key, "<redacted>")
        return text

    # -- flows

    def start(self, action: OcflowRunAction, conversation: LocalConversation | None) -> FlowProcess:
        repo = self.repository(action.repo)
        argv = ["run", "--json", "--repo", repo]
        if action.task_id:
            argv += ["--task-id", action.task_id]
        argv += ["--", action.task]
        return self.follow(argv, repo, conversation)

    def go_on(
        self,
        command: list[str],
        task_id: str,
        repo: str | None,
        conversation: LocalConversation | None,
    ) -> FlowProcess:
        """`ocflow resume` or `ocflow approve` of a flow, followed as a run is: it goes on in
        that process. Without a repository named, ocflow finds the task by its id."""
        where = self.repo_for(task_id, repo)
        argv = [command[0], "--json", *(["--repo", where] if where else []), *command[1:], task_id]
        # Without a repository, its diff and apply find it by its id too (the working directory
        # is no repository: naming it would hide the task).
        return self.follow(argv, where, conversation)

    def repo_for(self, task_id: str | None, repo: str | None) -> str | None:
        """The repository to name for a task: the one asked for, the one this conversation ran
        it in, the tool's; else none (ocflow finds a task by its id in the user's index)."""
        if repo is not None:
            return self.repository(repo)
        flow = self.find(task_id)
        if flow is not None:
            return self.repo_of(flow)
        return self.repository(None) if self.repo else None

    def follow(
        self, argv: list[str], repo: str | None, conversation: LocalConversation | None
    ) -> FlowProcess:
        flow = FlowProcess(
            [self.binary(), *argv], self.child_environment(conversation), cwd=self.working_dir
        )
        with self._lock:
            self._flows.append(flow)
            self._repo_of[id(flow)] = repo
            self._seen[id(flow)] = 0
        return flow

    def find(self, task_id: str | None) -> FlowProcess | None:
        with self._lock:
            flows = list(self._flows)
        if task_id is None:
            return flows[-1] if flows else None
        for flow in reversed(flows):
            started = fold(flow.events()).task_id
            if started == task_id or (started or "").startswith(task_id):
                return flow
        return None

    def task_id_of(self, flow: FlowProcess) -> str | None:
        return fold(flow.events()).task_id

    def repo_of(self, flow: FlowProcess) -> str | None:
        return self._repo_of[id(flow)]

    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def begin_call(self) -> None:
        self._cancelled.clear()

    def interrupt_wait(self) -> None:
        self._cancelled.set()

    def seen(self, flow: FlowProcess) -> int:
        """How many of the flow's events the agent has been shown."""
        with self._lock:
            return self._seen.get(id(flow), 0)

    def observe[ObsT: OcflowFlowObservation](self, flow: FlowProcess, kind: type[ObsT]) -> ObsT:
        """The flow's state and the events the agent has not seen yet; marks them seen."""
        events = flow.events()
        with self._lock:
            since = self._seen.get(id(flow), 0)
            self._seen[id(flow)] = len(events)
        view = fold(events)
        exit_code = flow.exit_code
        running = exit_code is None
        state = view.state
        if not running and state in ("starting", "planning", "running"):
            # Ended without a flow_finished (invalid input, a crash, a signal).
            state = "interrupted" if exit_code == 130 else "failed"
        # Exit 3 is no failure: the flow waits for a person or for a budget, resumable.
        new_events = [e for e in events[since:] if e.get("type") != "heartbeat"]
        elapsed = int(flow.elapsed_seconds())
        text = render_flow(view, new_events, running, elapsed, exit_code, flow.stderr_tail())
        return kind.from_text(
            self.redact(text),
            is_error=not running and exit_code not in (0, 3),
            task_id=view.task_id,
            task_dir=view.task_dir,
            state=state,
            running=running,
            elapsed_seconds=elapsed,
            exit_code=exit_code,
            steps=view.steps,
            events=new_events[-MAX_EVENT_LINES:],
            changed_files=view.changed_files,
            summary=self.redact(view.summary_text),
        )

    def close(self) -> None:
        """The conversation ends: flows still running are interrupted as Ctrl-C would, as
        `ocflow mcp` does (`ocflow resume TASK_ID` continues them)."""
        with self._lock:
            flows = list(self._flows)
        for flow in flows:
            flow.interrupt()


class OcflowUnavailable(Exception):
    """ocflow cannot be started here (no binary); permanent until the setup changes."""


def render_flow(
    view: FlowView,
    new_events: list[dict[str, Any]],
    running: bool,
    elapsed: int,
    exit_code: int | None,
    stderr_tail: list[str],
) -> str:
    """The observation's text: a head line that always moves (elapsed time, steps done), the
    new events one a line, and the next call to make."""
    task = view.task_id or "(starting)"
    done = sum(1 for s in view.steps if s.status in ("succeeded", "failed", "skipped"))
    total = view.planned_steps if view.planned_steps is not None else "?"
    if running:
        active = [s.id for s in view.steps if s.status in ("running", "retrying")]
        head = f"ocflow task {task}: {view.state} for {elapsed} s; {done} of {total} step(s) done"
        if active:
            head += f"; running: {', '.join(active)}"
    else:
        head = (
            f"ocflow task {task}: {view.state} after {elapsed} s (exit code {exit_code}); "
            f"{done} of {total} step(s) done"
        )
    lines = [head]
    described = [d for d in (describe_event(e) for e in new_events) if d]
    if len(described) > MAX_EVENT_LINES:
        lines.append(f"  … {len(described) - MAX_EVENT_LINES} earlier event(s) left out")
        described = described[-MAX_EVENT_LINES:]
    if described:
        lines.append("events since the last look:")
        lines += [f"  {d}" for d in described]
    else:
        lines.append("no new event since the last look")
    if not running and view.summary_text:
        lines.append("summary:")
        lines += [f"  {line}" for line in view.summary_text.strip().splitlines()[:40]]
    if not running and exit_code not in (0,) and not view.error and stderr_tail:
        lines.append("ocflow said:")
        lines += [f"  {line}" for line in stderr_tail[-10:]]
    if running:
        lines.append(f"next: ocflow_status task_id={task} to wait for what comes next")
    elif view.state == "waiting":
        lines.append(f"the flow waits for a person: {view.waiting_for or 'an approval'}")
        lines.append(
            f"next: ask the user, then ocflow_approve task_id={task} (the flow goes on) or "
            f"ocflow_reject task_id={task} reason=... (it ends, nothing is written)"
        )
    elif view.state == "paused":
        lines.append(
            f"next: ocflow_resume task_id={task} with a higher budget (max_tokens, max_cost, "
            "max_time or max_calls) to go on from where it stopped; nothing is lost"
        )
    elif exit_code == 0 and view.changed_files:
        lines.append(
            f"next: ocflow_diff task_id={task} to review the changes, then ocflow_apply "
            f"task_id={task}"
        )
    elif exit_code == 130:
        lines.append("the flow was interrupted; `ocflow resume` in a terminal continues it")
    return "\n".join(lines)


# ---------------------------------------------------------------- executors


class _OcflowExecutor[ActionT, ObservationT](ToolExecutor[ActionT, ObservationT]):
    def __init__(self, session: OcflowSession) -> None:
        self.session = session

    def interrupt(self) -> None:
        # A conversation interrupt stops the wait, not the flow (it has its own session).
        self.session.interrupt_wait()

    def close(self) -> None:
        self.session.close()


class OcflowRunExecutor(_OcflowExecutor[OcflowRunAction, OcflowRunObservation]):
    def __call__(
        self, action: OcflowRunAction, conversation: LocalConversation | None = None
    ) -> OcflowRunObservation:
        self.session.begin_call()
        try:
            flow = self.session.start(action, conversation)
        except (OcflowUnavailable, OSError) as error:
            return OcflowRunObservation.from_text(str(error), is_error=True, running=False)
        flow.wait_for_end(action.wait_seconds, self.session.cancelled)
        return self.session.observe(flow, OcflowRunObservation)


class OcflowStatusExecutor(_OcflowExecutor[OcflowStatusAction, OcflowStatusObservation]):
    def __call__(
        self, action: OcflowStatusAction, conversation: LocalConversation | None = None
    ) -> OcflowStatusObservation:
        self.session.begin_call()
        flow = self.session.find(action.task_id)
        if flow is None:
            return self._from_disk(action, conversation)
        flow.wait_for_change(self.session.seen(flow), action.wait_seconds, self.session.cancelled)
        return self.session.observe(flow, OcflowStatusObservation)

    def _from_disk(
        self, action: OcflowStatusAction, conversation: LocalConversation | None
    ) -> OcflowStatusObservation:
        """A flow this conversation did not start (an earlier session, a terminal): what
        ocflow's `status --json` says of it, read again every 2 s up to `wait_seconds` while
        it runs and nothing changed, so a long poll waits as it does for a flow started here."""
        if not action.task_id:
            return OcflowStatusObservation.from_text(
                "no flow was started in this conversation; give a task_id",
                is_error=True,
                running=False,
            )
        repo = self.session.repo_for(action.task_id, action.repo)
        argv = [self.session.binary(), "status", "--json"]
        argv += ["--repo", repo] if repo else []
        argv.append(action.task_id)
        env = self.session.child_environment(conversation)
        started = time.monotonic()

        def look():
            code, stdout, stderr = run_to_end(argv, env, self.session.working_dir, 60)
            # The status document is the line without a `type`; events may come first.
            lines_out = parse_events(stdout)
            documents = [
                d for d in lines_out if "type" not in d and isinstance(d.get("steps"), list)
            ]
            return code, stderr, lines_out, documents[-1] if code == 0 and documents else None

        def shape(status):
            steps = status.get("steps") or []
            return status.get("state"), [(s.get("id"), s.get("status")) for s in steps]

        code, stderr, lines_out, status = look()
        first = shape(status) if status else None
        while (
            status is not None
            and status.get("state") == "running"
            and time.monotonic() - started < action.wait_seconds
            and not self.session.cancelled()
        ):
            time.sleep(2)
            code, stderr, lines_out, status = look()
            if status is None or shape(status) != first:
                break
        if status is None:
            lines = [d for d in (describe_event(e) for e in lines_out) if d]
            text = "\n".join(lines or stderr or [f"ocflow status exited {code}"])
            return OcflowStatusObservation.from_text(
                self.session.redact(text),
                is_error=True,
                task_id=action.task_id,
                state="unknown",
                running=False,
                exit_code=code,
            )
        steps = [
            OcflowStep(
                id=str(step.get("id", "?")),
                operation=str(step.get("operation", "")),
                status=str(step.get("status", "")),
                attempt=int(step.get("attempts") or 1),
                message=str(step.get("message", ""))[:400],
                duration_ms=step.get("duration_ms"),
            )
            for step in status["steps"]
        ]
        state = str(status.get("state", "unknown"))
        applied = "applied" if status.get("applied_at") else "not applied"
        task_id = status.get("task_id", action.task_id)
        looked = int(time.monotonic() - started)
        head = (
            f"ocflow task {task_id}: {state}, {applied} (from ocflow status: started elsewhere; "
            f"looked for {looked} s)"
        )
        lines = [head]
        lines += [f"  {s.id} {s.operation} {s.status}: {s.message}" for s in steps]
        if state == "running":
            lines.append(f"next: ocflow_status task_id={task_id} to wait for what comes next")
        elif state == "waiting":
            lines.append(
                f"next: ask the user, then ocflow_approve task_id={task_id} or ocflow_reject "
                f"task_id={task_id} reason=..."
            )
        elif state in ("paused", "interrupted"):
            lines.append(
                f"next: ocflow_resume task_id={task_id} (with a higher budget if one stopped it)"
            )
        return OcflowStatusObservation.from_text(
            self.session.redact("\n".join(lines)),
            task_id=status.get("task_id", action.task_id),
            state=state,
            running=state == "running",
            exit_code=None,
            steps=steps,
        )


class OcflowDiffExecutor(_OcflowExecutor[OcflowDiffAction, OcflowDiffObservation]):
    def __call__(
        self, action: OcflowDiffAction, conversation: LocalConversation | None = None
    ) -> OcflowDiffObservation:
        task_id, repo = _target(self.session, action.task_id, action.repo)
        if task_id is None:
            return OcflowDiffObservation.from_text("no flow to show; give a task_id", is_error=True)
        argv = [self.session.binary(), "diff", *(["--repo", repo] if repo else []), task_id]
        if action.stat:
            argv.append("--stat")
        code, stdout, stderr = run_to_end(
            argv,
            self.session.child_environment(conversation),
            self.session.working_dir,
            SHORT_COMMAND_TIMEOUT,
        )
        if code != 0:
            text = "\n".join(stderr) or stdout
            return OcflowDiffObservation.from_text(
                self.session.redact(f"ocflow diff exited {code}:\n{text}"),
                is_error=True,
                task_id=task_id,
            )
        diff = self.session.redact(stdout)
        truncated = len(diff) > MAX_DIFF_CHARS
        if truncated:
            diff = diff[:MAX_DIFF_CHARS]
        note = "\n[diff cut; ask for stat=true or read the files]" if truncated else ""
        return OcflowDiffObservation.from_text(
            (diff or "(no changes)") + note, task_id=task_id, diff=diff, truncated=truncated
        )


class OcflowApplyExecutor(_OcflowExecutor[OcflowApplyAction, OcflowApplyObservation]):
    def __call__(
        self, action: OcflowApplyAction, conversation: LocalConversation | None = None
    ) -> OcflowApplyObservation:
        task_id, repo = _target(self.session, action.task_id, action.repo)
        if task_id is None:
            return OcflowApplyObservation.from_text(
                "no flow to apply; give a task_id", is_error=True, exit_code=2
            )
        argv = [self.session.binary(), "apply", "--json", *(["--repo", repo] if repo else [])]
        argv.append(task_id)
        code, stdout, stderr = run_to_end(
            argv,
            self.session.child_environment(conversation),
            self.session.working_dir,
            SHORT_COMMAND_TIMEOUT,
        )
        events = parse_events(stdout)
        applied: list[str] = []
        for event in events:
            if event.get("type") == "changes_applied":
                applied += list(event.get("files") or [])
        lines = [d for d in (describe_event(e) for e in events) if d]
        if code != 0 and not any(e.get("type") == "error" for e in events):
            lines += stderr[-10:]
        head = f"ocflow apply {task_id}: exit code {code}"
        return OcflowApplyObservation.from_text(
            self.session.redact("\n".join([head, *lines])),
            is_error=code != 0,
            task_id=task_id,
            applied_files=applied,
            exit_code=code,
        )


class OcflowResumeExecutor(_OcflowExecutor[OcflowResumeAction, OcflowResumeObservation]):
    def __call__(
        self, action: OcflowResumeAction, conversation: LocalConversation | None = None
    ) -> OcflowResumeObservation:
        self.session.begin_call()
        budget: list[str] = []
        for flag, value in (
            ("--max-tokens", action.max_tokens),
            ("--max-cost", action.max_cost),
            ("--max-time", action.max_time),
            ("--max-calls", action.max_calls),
        ):
            if value is not None:
                budget += [flag, str(value)]
        try:
            flow = self.session.go_on(
                ["resume", *budget], action.task_id, action.repo, conversation
            )
        except (OcflowUnavailable, OSError) as error:
            return OcflowResumeObservation.from_text(str(error), is_error=True, running=False)
        flow.wait_for_end(action.wait_seconds, self.session.cancelled)
        return self.session.observe(flow, OcflowResumeObservation)


class OcflowApproveExecutor(_OcflowExecutor[OcflowApproveAction, OcflowApproveObservation]):
    def __call__(
        self, action: OcflowApproveAction, conversation: LocalConversation | None = None
    ) -> OcflowApproveObservation:
        self.session.begin_call()
        try:
            flow = self.session.go_on(["approve"], action.task_id, action.repo, conversation)
        except (OcflowUnavailable, OSError) as error:
            return OcflowApproveObservation.from_text(str(error), is_error=True, running=False)
        flow.wait_for_end(action.wait_seconds, self.session.cancelled)
        return self.session.observe(flow, OcflowApproveObservation)


class OcflowRejectExecutor(_OcflowExecutor[OcflowRejectAction, OcflowRejectObservation]):
    def __call__(
        self, action: OcflowRejectAction, conversation: LocalConversation | None = None
    ) -> OcflowRejectObservation:
        where = self.session.repo_for(action.task_id, action.repo)
        argv = [self.session.binary(), "reject", "--json"]
        argv += ["--repo", where] if where else []
        argv += [action.task_id, "--reason", action.reason]
        code, stdout, stderr = run_to_end(
            argv,
            self.session.child_environment(conversation),
            self.session.working_dir,
            SHORT_COMMAND_TIMEOUT,
        )
        lines = [d for d in (describe_event(e) for e in parse_events(stdout)) if d]
        if code != 0:
            lines += stderr[-10:]
        head = f"ocflow reject {action.task_id}: exit code {code}"
        if code == 0:
            head += "; the flow ended and nothing was written"
        return OcflowRejectObservation.from_text(
            self.session.redact("\n".join([head, *lines])),
            is_error=code != 0,
            task_id=action.task_id,
            exit_code=code,
        )


def _target(
    session: OcflowSession, task_id: str | None, repo: str | None
) -> tuple[str | None, str | None]:
    """The task id and repository a diff or apply is about: the named task, or the latest
    flow this conversation started, in the repository it ran on; no repository when none is
    known (ocflow finds the task by its id)."""
    flow = session.find(task_id)
    if flow is not None and repo is None:
        return session.task_id_of(flow) or task_id, session.repo_of(flow)
    return task_id, session.repo_for(task_id, repo)


# ---------------------------------------------------------------- tools


RUN_DESCRIPTION = """Plan a coding task into a flow of steps with ocflow and run it.

ocflow asks its LLM for a plan (read, modify code, write files, run tests…), runs each step in
its own directory, recovers from failed steps, and keeps every change aside: the repository is
not touched until ocflow_apply. The answer lists every step event (started, finished, retried,
recovered) and the flow's state. If the flow is still running when `wait_seconds` pass, the
answer says so: call ocflow_status to see the rest (the flow keeps running meanwhile)."""

STATUS_DESCRIPTION = """Show what an ocflow flow did since you last looked, waiting up to
`wait_seconds` for its next change (a step starting or finishing, a recovery decision, the
end). Call it until `running` is false."""

DIFF_DESCRIPTION = """Show an ocflow flow's changes as a unified diff (or `stat`: the files and
line counts). Review it, and show the user what will change, before ocflow_apply."""

APPLY_DESCRIPTION = """Write an ocflow flow's changes into the repository, all or nothing.
Review them with ocflow_diff first and tell the user what will change: this writes at once
(under the orchestrator preset the user confirms it first)."""

RESUME_DESCRIPTION = """Continue a flow that paused (exit code 3, state `paused`: a budget
stopped it) or was interrupted, from where it stopped: nothing runs twice. Give a higher budget
(max_tokens, max_cost, max_time, max_calls) when one stopped it. Answers as ocflow_run does."""

APPROVE_DESCRIPTION = """Say yes to what a waiting flow asks (exit code 3, state `waiting`: its
plan, a risky command, a recovery that replans, its apply). Ask the user first: this is their
decision. The flow goes on; answers as ocflow_run does."""

REJECT_DESCRIPTION = """Say no to what a waiting flow asks (state `waiting`), with the user's
reason: the flow ends and nothing is written. Ask the user first."""


def _annotations(title: str, read_only: bool) -> ToolAnnotations:
    return ToolAnnotations(
        title=title,
        readOnlyHint=read_only,
        destructiveHint=not read_only,
        idempotentHint=read_only,
        openWorldHint=True,
    )


def _one_tool(cls, description, action_type, observation_type, name, read_only, executor):
    """The one tool a `ToolDefinition` subclass makes, as the SDK's `create` returns it."""
    return [
        cls(
            description=description,
            action_type=action_type,
            observation_type=observation_type,
            annotations=_annotations(name, read_only=read_only),
            executor=executor,
        )
    ]


class OcflowRunTool(ToolDefinition[OcflowRunAction, OcflowRunObservation]):
    """`ocflow_run`: start a flow and follow it."""

    @classmethod
    def create(cls, session: OcflowSession) -> Sequence[Self]:
        return _one_tool(
            cls,
            RUN_DESCRIPTION,
            OcflowRunAction,
            OcflowRunObservation,
            "ocflow_run",
            False,
            OcflowRunExecutor(session),
        )


class OcflowStatusTool(ToolDefinition[OcflowStatusAction, OcflowStatusObservation]):
    """`ocflow_status`: the rest of a flow."""

    @classmethod
    def create(cls, session: OcflowSession) -> Sequence[Self]:
        return _one_tool(
            cls,
            STATUS_DESCRIPTION,
            OcflowStatusAction,
            OcflowStatusObservation,
            "ocflow_status",
            True,
            OcflowStatusExecutor(session),
        )


class OcflowDiffTool(ToolDefinition[OcflowDiffAction, OcflowDiffObservation]):
    """`ocflow_diff`: the changes to review."""

    @classmethod
    def create(cls, session: OcflowSession) -> Sequence[Self]:
        return _one_tool(
            cls,
            DIFF_DESCRIPTION,
            OcflowDiffAction,
            OcflowDiffObservation,
            "ocflow_diff",
            True,
            OcflowDiffExecutor(session),
        )


class OcflowApplyTool(ToolDefinition[OcflowApplyAction, OcflowApplyObservation]):
    """`ocflow_apply`: the review gate's far side; the orchestrator asks the user first."""

    @classmethod
    def create(cls, session: OcflowSession) -> Sequence[Self]:
        return _one_tool(
            cls,
            APPLY_DESCRIPTION,
            OcflowApplyAction,
            OcflowApplyObservation,
            "ocflow_apply",
            False,
            OcflowApplyExecutor(session),
        )


class OcflowResumeTool(ToolDefinition[OcflowResumeAction, OcflowResumeObservation]):
    """`ocflow_resume`: a paused or interrupted flow goes on."""

    @classmethod
    def create(cls, session: OcflowSession) -> Sequence[Self]:
        return _one_tool(
            cls,
            RESUME_DESCRIPTION,
            OcflowResumeAction,
            OcflowResumeObservation,
            "ocflow_resume",
            False,
            OcflowResumeExecutor(session),
        )


class OcflowApproveTool(ToolDefinition[OcflowApproveAction, OcflowApproveObservation]):
    """`ocflow_approve`: yes to a waiting flow."""

    @classmethod
    def create(cls, session: OcflowSession) -> Sequence[Self]:
        return _one_tool(
            cls,
            APPROVE_DESCRIPTION,
            OcflowApproveAction,
            OcflowApproveObservation,
            "ocflow_approve",
            False,
            OcflowApproveExecutor(session),
        )


class OcflowRejectTool(ToolDefinition[OcflowRejectAction, OcflowRejectObservation]):
    """`ocflow_reject`: no to a waiting flow."""

    @classmethod
    def create(cls, session: OcflowSession) -> Sequence[Self]:
        return _one_tool(
            cls,
            REJECT_DESCRIPTION,
            OcflowRejectAction,
            OcflowRejectObservation,
            "ocflow_reject",
            False,
            OcflowRejectExecutor(session),
        )


class OcflowToolSet(ToolDefinition[OcflowRunAction, OcflowRunObservation]):
    """The seven ocflow tools over one session; `Tool(name="ocflow", params={...})` in an agent.

    Parameters (all optional, all persisted with the agent, so never a key): `ocflow_bin`,
    `repo` (relative to the workspace, or absolute), `base_url` and `model` for ocflow's LLM
    (default: the agent's own), `use_agent_llm` (default true: the agent's LLM, key included,
    unless set here). The key comes, in order, from the conversation secret `LLM_API_KEY`, the
    agent's LLM, or this process's environment."""

    name: ClassVar[str] = "ocflow"

    @classmethod
    def create(
        cls,
        conv_state: ConversationState,
        ocflow_bin: str | None = None,
        repo: str | None = None,
        base_url: str | None = None,
        model: str | None = None,
        use_agent_llm: bool = True,
    ) -> list[ToolDefinition]:
        session = OcflowSession(
            working_dir=str(conv_state.workspace.working_dir),
            ocflow_bin=ocflow_bin,
            repo=repo,
            base_url=base_url,
            model=model,
            use_agent_llm=use_agent_llm,
        )
        tools: list[ToolDefinition] = []
        for tool_class in (
            OcflowRunTool,
            OcflowStatusTool,
            OcflowDiffTool,
            OcflowApplyTool,
            OcflowResumeTool,
            OcflowApproveTool,
            OcflowRejectTool,
        ):
            tools.extend(tool_class.create(session))
        return tools


register_tool(OcflowToolSet.name, OcflowToolSet)
