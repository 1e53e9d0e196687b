"""Entry point for the host: :func:`execute_operation` and the dispatch through the registry.

:func:`execute_operation` parses the instructions file, runs the named
operation and returns its result dict.  User errors (bad instructions, bad
parameters, missing files, unknown operations, failing commands) come back as
failure dicts; only genuine bugs raise.  The LLM-backed operations use only
what ``llm_config`` gives: the host's ``complete`` callable, or — for the
library used on its own, as seed 002 describes it — the endpoint, key and model
(``base_url``/``endpoint``, ``api_key``/``key``, ``model``), from which
:mod:`.standalone` builds a client with the ``openai`` package.  Their results
always carry ``llm_calls`` (0 when the step failed before asking the model).
The LLM API key is redacted from every string in the result before it is
returned.  Operations, built-in and plugin, are declared in :mod:`.registry`;
:data:`OPERATIONS` is a read-only view of their functions by name.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Callable, Optional

from . import llm, registry
from .instructions import InstructionsError, Step, parse_instructions
from .results import StepError, failure
from .standalone import endpoint_config, has_own_endpoint, prepare_llm_config

Operation = Callable[[Step, Optional[dict]], dict]


class OperationFunctions(Mapping):
    """Name -> function of every registered operation, read live from the registry."""

    def __getitem__(self, name: str) -> Operation:
        info = registry.find(name)
        if info is None:
            raise KeyError(name)
        return info.function

    def __iter__(self) -> Iterator[str]:
        return iter([info.name for info in registry.operations()])

    def __len__(self) -> int:
        return len(registry.operations())


OPERATIONS: Mapping[str, Operation] = OperationFunctions()


def execute_operation(instruction_file_path: str, llm_config: dict | None) -> dict:
    """Run the step described by an instructions file and return its result dict."""
    try:
        step = parse_instructions(instruction_file_path)
    except InstructionsError as exc:
        return failure(exc.operation, str(exc))
    if has_own_endpoint(llm_config):
        # Seed 002's signature: an endpoint, a key and a model, no host to call through.
        llm_config, problem = prepare_llm_config(step, endpoint_config(llm_config))
        if problem is not None and not llm_config.get("model"):
            problem = f"{problem.split(':')[0]}: llm_config has an endpoint but no `model`; add one"
        if problem is not None:
            return without_key(failure(step.operation, problem, llm_calls=0), llm_config)
    return run_step(step, llm_config)


def run_step(step: Step, llm_config: dict | None) -> dict:
    """Run an already parsed step: a built-in directly, a plugin with its params checked."""
    info = registry.find(step.operation)
    if info is None:
        known = ", ".join(sorted(OPERATIONS))
        result = failure(
            step.operation, f"unknown operation {step.operation!r}: use one of {known}"
        )
    else:
        if info.builtin:
            try:
                result = info.function(step, llm_config)
            except StepError as exc:
                result = failure(step.operation, str(exc), **exc.fields)
        else:
            result = registry.run_plugin(info, step, llm_config)
        if llm.llm_use(step)[0] is not None:
            result.setdefault("llm_calls", 0)  # e.g. failed before asking the model
    return without_key(result, llm_config)


def without_key(result: dict, llm_config: dict | None) -> dict:
    """``result`` with ``llm_config``'s API key, if any, redacted from every string."""
    api_key = (llm_config or {}).get("api_key")
    return redact(result, api_key) if isinstance(api_key, str) and api_key else result


def redact(value: Any, secret: str) -> Any:
    """Copy of ``value`` with ``secret`` replaced in every string it contains."""
    if isinstance(value, str):
        return value.replace(secret, "[REDACTED]")
    if isinstance(value, dict):
        return {key: redact(item, secret) for key, item in value.items()}
    if isinstance(value, list):
        return [redact(item, secret) for item in value]
    return value
