"""Access to the language model the host provides, and the LLM-only operations.

The host passes ``llm_config["complete"]``, a callable
``complete(messages: list[dict(role, content)], purpose: str) -> dict``
returning ``{"content": str, "finish_reason": str}``.  Without it, operations
that need a model fail with a message telling how to run them.  The
code-changing operations (``modify_code``/``refactor_function``,
``analyze_code`` and ``write_file`` with ``params.instructions``) are not
provided by this version of the library yet; they report that plainly.

``llm_config["api_key"]`` is never written anywhere by this module.
"""

from __future__ import annotations

from typing import Callable

from .instructions import Step
from .params import optional_str, require_str
from .paths import normalize_repo_path
from .results import StepError, failure

CompleteFn = Callable[[list, str], dict]


def get_complete(llm_config: dict | None) -> CompleteFn | None:
    """The host's ``complete`` callable, or None when no model is configured."""
    complete = (llm_config or {}).get("complete")
    return complete if callable(complete) else None


def ask(complete: CompleteFn, messages: list[dict], purpose: str) -> str:
    """Call the model and return the text of its answer.

    A failing call or a malformed answer becomes a :class:`StepError`.
    """
    try:
        answer = complete(messages, purpose)
    except Exception as exc:  # the endpoint's errors are the user's to fix
        raise StepError(
            f"the LLM request for {purpose} failed: {type(exc).__name__}: {exc}"
        ) from None
    content = answer.get("content") if isinstance(answer, dict) else None
    if not isinstance(content, str):
        raise StepError(f"the LLM answer for {purpose} has no text content")
    return content


def unavailable(step: Step, llm_config: dict | None, what: str) -> dict:
    """Failure result for an LLM-backed operation that cannot run here."""
    if get_complete(llm_config) is None:
        return failure(
            step.operation,
            f"operation {what} needs an LLM: run it from ocflow with an endpoint configured",
        )
    return failure(
        step.operation,
        f"operation {what} is not supported by this version of open_codex_lib yet: "
        "write the change with write_file and params.content instead",
    )


def modify_code(step: Step, llm_config: dict | None) -> dict:
    """``modify_code`` / ``refactor_function``: change a file following instructions."""
    normalize_repo_path(step.params.get("file_path"), "params.file_path")
    require_str(step.params, "instructions")
    optional_str(step.params, "function_name")
    return unavailable(step, llm_config, step.operation)


def analyze_code(step: Step, llm_config: dict | None) -> dict:
    """``analyze_code``: answer a question about a file."""
    normalize_repo_path(step.params.get("file_path"), "params.file_path")
    optional_str(step.params, "query")
    return unavailable(step, llm_config, step.operation)
