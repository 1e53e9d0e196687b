"""Entry point for the host: the dispatch table and :func:`execute_operation`.

:func:`execute_operation` parses the instructions file, runs the named
operation and returns its result dict.  User errors (bad instructions, bad
parameters, missing files, unknown operations, failing commands) come back as
failure dicts; only genuine bugs raise.  The LLM-backed operations use only
what ``llm_config`` gives (its ``complete`` callable); nothing here builds a
model client.  Their results always carry ``llm_calls`` (0 when the step
failed before asking the model).  The LLM API key is redacted from
every string in the result before it is returned.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from . import analysis, code_edit, commands, files, llm, summary
from .instructions import InstructionsError, Step, parse_instructions
from .results import StepError, failure

Operation = Callable[[Step, Optional[dict]], dict]

OPERATIONS: dict[str, Operation] = {
    "read_file": files.read_file,
    "write_file": files.write_file,
    "list_files": files.list_files,
    "delete_file": files.delete_file,
    "execute_shell_command": commands.execute_shell_command,
    "run_tests": commands.run_tests,
    "generate_summary": summary.generate_summary,
    "modify_code": code_edit.modify_code,
    "refactor_function": code_edit.modify_code,
    "analyze_code": analysis.analyze_code,
}


def execute_operation(instruction_file_path: str, llm_config: dict | None) -> dict:
    """Run the step described by an instructions file and return its result dict."""
    try:
        step = parse_instructions(instruction_file_path)
    except InstructionsError as exc:
        return failure(exc.operation, str(exc))
    return run_step(step, llm_config)


def run_step(step: Step, llm_config: dict | None) -> dict:
    """Run an already parsed step."""
    operation = OPERATIONS.get(step.operation)
    if operation is None:
        known = ", ".join(sorted(OPERATIONS))
        result = failure(
            step.operation, f"unknown operation {step.operation!r}: use one of {known}"
        )
    else:
        try:
            result = operation(step, llm_config)
        except StepError as exc:
            result = failure(step.operation, str(exc), **exc.fields)
        if llm.llm_use(step)[0] is not None:
            result.setdefault("llm_calls", 0)  # e.g. failed before asking the model
    api_key = (llm_config or {}).get("api_key")
    if isinstance(api_key, str) and api_key:
        result = redact(result, api_key)
    return result


def redact(value: Any, secret: str) -> Any:
    """Copy of ``value`` with ``secret`` replaced in every string it contains."""
    if isinstance(value, str):
        return value.replace(secret, "[REDACTED]")
    if isinstance(value, dict):
        return {key: redact(item, secret) for key, item in value.items()}
    if isinstance(value, list):
        return [redact(item, secret) for item in value]
    return value
