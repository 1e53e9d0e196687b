"""The ``generate_summary`` operation: a short account of what the flow changed.

With ``params.message`` the summary is that message.  Otherwise it is built
from the result messages of earlier steps (``params.changes_from_step``, or
every earlier step the instructions list), and, when the host provides a
model, the model writes it from those facts.  Nothing is written to disk.
"""

from __future__ import annotations

from . import llm
from .instructions import Step
from .params import optional_str
from .results import StepError, success

SYSTEM_PROMPT = (
    "You summarise what an automated coding flow did to a repository. "
    "Answer with a short plain-text summary of at most five sentences, no Markdown."
)


def generate_summary(step: Step, llm_config: dict | None) -> dict:
    """Return ``summary`` from params.message, the model, or earlier step results."""
    message = optional_str(step.params, "message")
    if message is not None and message.strip():
        return success(step.operation, "summary taken from params.message", summary=message)

    source_step = optional_str(step.params, "changes_from_step")
    if source_step is not None and source_step not in step.steps:
        available = ", ".join(sorted(step.steps)) or "none"
        raise StepError(
            f"params.changes_from_step names {source_step!r}, which is not an earlier step "
            f"this step may read (available: {available})"
        )
    step_ids = [source_step] if source_step is not None else list(step.steps)
    facts = _step_facts(step, step_ids)

    complete = llm.get_complete(llm_config)
    if complete is not None:
        prompt = f"Task: {step.task or '(not given)'}\n\nStep results:\n{facts}"
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": prompt},
        ]
        summary = llm.ask(complete, messages, "generate_summary").strip()
        if not summary:
            raise StepError("the LLM returned an empty summary: retry the step")
        return success(step.operation, "summary written by the LLM", summary=summary)

    heading = step.task or "Summary"
    return success(
        step.operation,
        f"summary built from {len(step_ids)} earlier step result(s)",
        summary=f"{heading}\n{facts}",
    )


def _step_facts(step: Step, step_ids: list[str]) -> str:
    """One line per earlier step: its operation, status and message."""
    if not step_ids:
        return "- no earlier step results to summarise"
    lines = []
    for step_id in step_ids:
        result, problem = step.steps[step_id].load_result()
        if result is None:
            lines.append(f"- {step_id}: no result ({problem})")
            continue
        operation = result.get("operation") or "unknown operation"
        status = result.get("status") or "unknown status"
        lines.append(f"- {step_id} {operation} ({status}): {result.get('message', '')}")
    return "\n".join(lines)
