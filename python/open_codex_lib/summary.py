"""The ``generate_summary`` operation: a short account of what the flow changed.

With ``params.message`` the summary is that message.  Otherwise it is built
from the result messages of earlier steps (``params.changes_from_step``, or
every earlier step the instructions list), and, when the host provides a
model, the model writes it from those facts (the prompts are
``prompts/generate_summary_*.md``; the answer is saved as ``llm-answer-1.md``
in the step directory and a truncated answer fails the step).  Nothing else
is written to disk.
"""

from __future__ import annotations

import json

from . import llm
from .instructions import Step
from .params import optional_str
from .results import StepError, success

MAX_DETAIL_CHARS = 2000


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
    facts = step_facts(step, step_ids)

    chat = llm.conversation(step, llm_config, step.operation)
    if chat is not None:
        messages = [
            {"role": "system", "content": llm.render_prompt("generate_summary_system")},
            {
                "role": "user",
                "content": llm.render_prompt(
                    "generate_summary_user",
                    task=step.task or "(not given)",
                    facts=step_facts(step, step_ids, detailed=True),
                ),
            },
        ]
        summary = chat.ask(messages).strip()
        if not summary:
            raise chat.fail("the LLM returned an empty summary: retry the step")
        return success(step.operation, "summary written by the LLM", summary=summary, **chat.fields)

    heading = step.task or "Summary"
    return success(
        step.operation,
        f"summary built from {len(step_ids)} earlier step result(s)",
        summary=f"{heading}\n{facts}",
    )


def step_facts(step: Step, step_ids: list[str], detailed: bool = False) -> str:
    """One line per earlier step: its operation, status and message.

    ``detailed`` adds, for the model, the files the step wrote or deleted and
    its ``summary`` and ``changes`` fields when present.
    """
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
        if detailed:
            lines.extend(_details(result))
    return "\n".join(lines)


def _details(result: dict) -> list[str]:
    """Indented lines with the files, summary and changes of a step result."""
    lines = []
    for key, label in (
        ("output_files", "files written"),
        ("deleted_files", "files deleted"),
    ):
        names = result.get(key)
        if isinstance(names, list) and names:
            lines.append(f"  {label}: " + ", ".join(map(str, names)))
    for key in ("summary", "changes"):
        value = result.get(key)
        if value in (None, "", [], {}):
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if len(text) > MAX_DETAIL_CHARS:
            text = text[:MAX_DETAIL_CHARS] + " [...]"
        lines.append(f"  {key}: " + " ".join(text.split()))
    return lines
