"""What ocflow's events say, for an agent: one line per event, and the flow's state folded
from them (every step's latest state, the end, the changed files). The event kinds and their
fields are ocflow's `docs/events.schema.json`; unknown kinds are shown by name, never dropped."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

# Lines longer than this are cut: a step message can quote a whole test log.
MAX_LINE = 400


class OcflowStep(BaseModel):
    """One step of a flow as its events left it."""

    id: str = Field(description="The step's id in the flow.")
    operation: str = Field(default="", description="Its operation (read_file, modify_code…).")
    status: str = Field(
        default="running",
        description="running, succeeded, failed, skipped, or retrying (a retry is due).",
    )
    attempt: int = Field(default=1, description="The attempt the status belongs to.")
    message: str = Field(default="", description="ocflow's one-line account of the attempt.")
    duration_ms: int | None = Field(default=None, description="How long the attempt took.")


class FlowView(BaseModel):
    """A flow's state folded from its events so far."""

    task_id: str | None = None
    task_dir: str | None = None
    state: str = "starting"
    reason: str | None = None
    steps: list[OcflowStep] = Field(default_factory=list)
    planned_steps: int | None = None
    changed_files: list[str] = Field(default_factory=list)
    summary_text: str = ""
    diff_file: str | None = None
    total_tokens: int = 0
    error: str | None = None
    # What a waiting flow asks a person (`approval_needed`).
    waiting_for: str | None = None


def _cut(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"


def describe_event(event: dict[str, Any]) -> str | None:
    """The line an agent reads for one event; None for a heartbeat (it only says "alive")."""
    kind = event.get("type", "?")
    step = event.get("step", "")
    if kind == "flow_started":
        return f"flow {event.get('task_id')} started (task directory {event.get('task_dir')})"
    if kind == "flow_resumed":
        return f"flow {event.get('task_id')} resumed, {event.get('pending')} step(s) pending"
    if kind == "flow_planned":
        return f"planned {event.get('steps')} step(s)"
    if kind == "snapshot_taken":
        return f"snapshot of the repository: {event.get('files')} file(s)"
    if kind == "step_started":
        return f"> {step} {event.get('operation', '')} started (attempt {event.get('attempt', 1)})"
    if kind == "step_finished":
        mark = "ok" if event.get("status") == "succeeded" else "!!"
        return _cut(
            f"{mark} {step} {event.get('status')} in {event.get('duration_ms', 0)} ms: "
            f"{event.get('message', '')}"
        )
    if kind == "step_retrying":
        return f"~ {step} retry {event.get('retry')} in {event.get('delay_ms')} ms"
    if kind == "recovery_decided":
        return _cut(f"recovery for {step}: {event.get('strategy')}: {event.get('reason', '')}")
    if kind == "recovery_stopped":
        return _cut(f"recovery stopped at {step}: {event.get('reason', '')}")
    if kind == "flow_finished":
        changed = ", ".join(event.get("changed_files") or []) or "none"
        reason = f" ({event['reason']})" if event.get("reason") else ""
        return _cut(f"flow finished: {event.get('state')}{reason}; changed files: {changed}")
    if kind == "flow_interrupted":
        return f"flow {event.get('task_id')} interrupted (ocflow resume continues it)"
    if kind == "warning":
        return _cut(f"warning: {event.get('message', '')}")
    if kind == "error":
        hint = f" (hint: {event['hint']})" if event.get("hint") else ""
        return _cut(f"error [{event.get('code')}]: {event.get('message', '')}{hint}")
    if kind == "approval_needed":
        return _cut(
            f"waiting for a person: {event.get('subject', '')} (ocflow_approve or ocflow_reject)"
        )
    if kind == "flow_paused":
        return _cut(f"paused: {event.get('message', '')}")
    if kind == "approval_answered":
        return _cut(f"answered: {event.get('answer', '')} {event.get('reason') or ''}")
    if kind == "changes_applied":
        return _cut(f"applied to the repository: {', '.join(event.get('files') or [])}")
    if kind == "heartbeat":
        return None
    if kind == "output":
        return _cut(f"output: {event.get('message', '')}")
    return _cut(f"{kind}")


def fold(events: list[dict[str, Any]]) -> FlowView:
    """The flow as its events leave it."""
    view = FlowView()
    steps: dict[str, OcflowStep] = {}
    for event in events:
        kind = event.get("type")
        if kind in ("flow_started", "flow_resumed"):
            view.task_id = event.get("task_id", view.task_id)
            view.task_dir = event.get("task_dir", view.task_dir)
            view.state = "planning" if kind == "flow_started" else "running"
        elif kind == "flow_planned":
            view.planned_steps = event.get("steps")
            view.state = "running"
        elif kind == "step_started":
            steps[event["step"]] = OcflowStep(
                id=event["step"],
                operation=event.get("operation", ""),
                attempt=event.get("attempt", 1),
            )
        elif kind == "step_finished":
            step = steps.setdefault(event["step"], OcflowStep(id=event["step"]))
            step.operation = event.get("operation", step.operation)
            step.status = event.get("status", "succeeded")
            step.attempt = event.get("attempt", step.attempt)
            step.message = _cut(event.get("message", ""))
            step.duration_ms = event.get("duration_ms")
        elif kind == "step_retrying" and event.get("step") in steps:
            steps[event["step"]].status = "retrying"
        elif kind == "flow_finished":
            view.state = event.get("state", "finished")
            view.reason = event.get("reason")
            view.changed_files = list(event.get("changed_files") or [])
            view.summary_text = event.get("summary_text", "")
            view.diff_file = event.get("diff")
            view.total_tokens = (event.get("tokens") or {}).get("total_tokens", 0)
        elif kind == "flow_interrupted":
            view.state = "interrupted"
        elif kind == "approval_needed":
            view.state = "waiting"
            view.waiting_for = event.get("subject")
        elif kind == "flow_paused":
            view.state = "paused"
            view.reason = event.get("message")
        elif kind == "heartbeat":
            view.total_tokens = (event.get("tokens") or {}).get("total_tokens", view.total_tokens)
        elif kind == "error":
            view.error = describe_event(event)
    view.steps = list(steps.values())
    return view
