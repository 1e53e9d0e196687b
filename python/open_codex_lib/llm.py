"""Calling the language model the host provides, and the prompt files.

The host passes ``llm_config["complete"]``, a callable
``complete(messages, purpose=None, json=False) -> dict`` (optionally with a
``temperature=None`` keyword, see below) where ``messages`` is a list of
``{"role": "system"|"user"|"assistant", "content": str}``; it returns
``{"content": str, "finish_reason": str | None, "usage": {...token counts}}``
and raises on failure (host errors carry ``kind`` and ``transient``).  Without
it, operations that need a model fail with a message telling how to run them
(``python -m open_codex_lib`` builds one from the ``openai`` package, see
:mod:`.standalone`).

A :class:`Conversation` makes the calls of one step: it saves every answer in
the step directory as ``llm-answer-<n>.md``, counts the calls and tokens, turns
an exception into a failure carrying ``llm_error`` (so the host can decide to
retry), and refuses an answer cut off by the token limit
(``finish_reason == "length"``) with :class:`Truncated`, which the re-ask loop
(:mod:`.reask`) answers with one shorter try.

A re-ask is sent a little warmer than ``llm_config["temperature"]`` (the
temperature the host uses): a deterministic model asked again at the same
temperature tends to give the same answer again.  The ``temperature`` keyword
goes to ``complete`` only when it takes one (ocflow's shim may not); the
result's ``llm_temperatures`` says what each call was sent (None: nothing,
the host's own temperature).

Prompts are editable Markdown files in ``open_codex_lib/prompts/``;
:func:`render_prompt` fills their ``$name`` placeholders.
``llm_config["api_key"]`` is never written anywhere by this module.
"""

from __future__ import annotations

import inspect
import math
import os
from string import Template
from typing import Any, Callable

from .instructions import Step
from .results import StepError, failure

CompleteFn = Callable[..., dict]
USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
# Each re-ask is sent this much warmer than the configured temperature, up to MAX_TEMPERATURE.
REASK_WARMING = 0.3
MAX_TEMPERATURE = 1.0


def get_complete(llm_config: dict | None) -> CompleteFn | None:
    """The host's ``complete`` callable, or None when no model is configured."""
    complete = (llm_config or {}).get("complete")
    return complete if callable(complete) else None


def llm_use(step: Step) -> tuple[str | None, bool]:
    """``(what, required)``: how ``step`` uses the model, for messages, and whether it must.

    ``what`` is None for steps that never call a model.  It follows the operation's
    declaration: ``needs_llm`` always needs one; ``needs_llm_with`` needs one when one of
    those parameters is given (``write_file`` with ``params.instructions``);
    ``may_use_llm_without`` uses one when there is one, and works without, unless one of
    those is given as text (``generate_summary`` without ``params.message``).
    """
    from . import registry  # here: the registry imports the operations, which import this

    info = registry.find(step.operation)
    if info is None:
        return None, False
    params = step.params
    if info.needs_llm:
        return step.operation, True
    given = [name for name in info.needs_llm_with if params.get(name) is not None]
    if given:
        return f"{step.operation} with params.{given[0]}", True
    if info.may_use_llm_without and not any(
        isinstance(params.get(name), str) and params[name].strip()
        for name in info.may_use_llm_without
    ):
        return step.operation, False
    return None, False


def unavailable(step: Step, what: str) -> dict:
    """Failure result for an LLM-backed operation run without a model."""
    return failure(
        step.operation,
        f"operation {what} needs an LLM: run it from ocflow with an endpoint configured",
    )


def load_prompt(name: str) -> str:
    """The text of ``prompts/<name>.md`` (read at every call, so edits apply at once)."""
    # Imported here: importlib.resources (with zipfile) is 8 ms of every flow's start, and a
    # flow of file steps alone never reads a prompt.
    from importlib import resources

    resource = resources.files(__package__).joinpath("prompts").joinpath(f"{name}.md")
    return resource.read_text(encoding="utf-8")


def render_prompt(name: str, **values: str) -> str:
    """``prompts/<name>.md`` with its ``$name`` placeholders filled, trailing space removed."""
    return Template(load_prompt(name)).substitute(values).strip()


class Truncated(StepError):
    """An answer cut off at the token limit (``finish_reason == "length"``): never used.

    ``content`` is what came before the cut.  A small model cut off has mostly
    repeated itself to the limit; :func:`.reask.ask_until_usable` asks it once
    more, shorter, rather than failing the step at once.
    """

    def __init__(self, message: str, content: str, **fields: Any):
        super().__init__(message, **fields)
        self.content = content


class Conversation:
    """The model calls of one step.

    ``purpose`` is passed to the host with every call (the operation name).
    :attr:`fields` gives the result fields describing the calls:
    ``llm_calls``, ``llm_answers`` (answer file names in the step directory),
    ``llm_usage`` (summed token counts) and ``llm_temperatures`` (per call, the
    temperature passed to ``complete``, or None).
    """

    def __init__(
        self,
        step: Step,
        complete: CompleteFn,
        purpose: str,
        api_key: Any = None,
        temperature: float | None = None,
    ):
        self.step = step
        self.complete = complete
        self.purpose = purpose
        self.secret = api_key if isinstance(api_key, str) and api_key else None
        self.temperature = temperature  # the host's, from llm_config; None when unknown
        self.takes_temperature = accepts_temperature(complete)
        self.calls = 0
        self.answer_files: list[str] = []
        self.usage = {key: 0 for key in USAGE_KEYS}
        self.temperatures: list[float | None] = []

    @property
    def fields(self) -> dict:
        """Result fields describing the calls made so far."""
        return {
            "llm_calls": self.calls,
            "llm_answers": list(self.answer_files),
            "llm_usage": dict(self.usage),
            "llm_temperatures": list(self.temperatures),
        }

    def reask_temperature(self, reask: int) -> float | None:
        """The temperature for re-ask number ``reask`` (0: the first question), or None.

        None leaves the host's temperature: for the first question, when the
        configured temperature is unknown, or when warming it would not raise it
        (it is already at :data:`MAX_TEMPERATURE` or above).
        """
        if reask <= 0 or self.temperature is None:
            return None
        warmer = round(min(MAX_TEMPERATURE, self.temperature + REASK_WARMING * reask), 2)
        return warmer if warmer > self.temperature else None

    def saved(self) -> str:
        """Where the answers are, for messages: ``llm-answer-1.md, ... in <step dir>``."""
        if not self.answer_files:
            return "no answer was saved"
        names = ", ".join(self.answer_files)
        return f"answers saved in {names} in {self.step.base_dir}"

    def fail(self, message: str, **fields: Any) -> StepError:
        """A :class:`StepError` carrying :attr:`fields` and ``fields``."""
        return StepError(message, **self.fields, **fields)

    def cut_off(self, message: str, content: str) -> Truncated:
        """A :class:`Truncated` carrying :attr:`fields` and the cut-off ``content``."""
        return Truncated(message, content, **self.fields)

    def ask(self, messages: list[dict], json: bool = False, reask: int = 0) -> str:
        """Send ``messages``; return the answer's text.

        ``reask`` counts the re-asks before this call; a re-ask is sent warmer
        (:meth:`reask_temperature`).  The answer is saved before anything else
        is done with it.  A failing call, a malformed answer or a truncated one
        raises :class:`StepError`.
        """
        self.calls += 1
        options: dict[str, Any] = {"purpose": self.purpose, "json": json}
        temperature = self.reask_temperature(reask) if self.takes_temperature else None
        if temperature is not None:
            options["temperature"] = temperature
        self.temperatures.append(temperature)
        try:
            answer = self.complete(messages, **options)
        except Exception as exc:  # noqa: BLE001 - any error of the host's callable is the step's
            raise self._call_error(exc) from None
        if not isinstance(answer, dict):
            raise self.fail(
                f"the LLM answer for {self.purpose} is not a dict but "
                f"{type(answer).__name__}: the host's complete callable is broken"
            )
        content = answer.get("content")
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise self.fail(f"the LLM answer for {self.purpose} has no text content")
        self._add_usage(answer.get("usage"))
        name = self._save(content)
        if answer.get("finish_reason") == "length":
            raise self.cut_off(
                f"the LLM answer for {self.purpose} was truncated at the token limit "
                f"(finish_reason 'length', saved in {name}), so it was not used: raise "
                "max_tokens for the model, or split the file or the task into smaller parts",
                content,
            )
        return content

    def _call_error(self, exc: Exception) -> StepError:
        kind = getattr(exc, "kind", None)
        kind = kind if isinstance(kind, str) and kind else "error"
        transient = getattr(exc, "transient", False) is True
        detail = f"{type(exc).__name__}: {exc}"
        advice = (
            "the error is transient, retrying the step later may work"
            if transient
            else "check the model endpoint and its settings"
        )
        return self.fail(
            f"the LLM request for {self.purpose} failed: {detail} (kind {kind}; {advice})",
            llm_error={"kind": kind, "transient": transient, "message": detail},
        )

    def _add_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for key in USAGE_KEYS:
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                self.usage[key] += value

    def _save(self, content: str) -> str:
        name = f"llm-answer-{self.calls}.md"
        text = content.replace(self.secret, "[REDACTED]") if self.secret else content
        try:
            with open(os.path.join(self.step.base_dir, name), "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            raise self.fail(
                f"cannot save the LLM answer as {name} in {self.step.base_dir}: {exc}"
            ) from None
        self.answer_files.append(name)
        return name


def conversation(step: Step, llm_config: dict | None, purpose: str) -> Conversation | None:
    """A :class:`Conversation` with the host's model, or None without one."""
    complete = get_complete(llm_config)
    if complete is None:
        return None
    config = llm_config or {}
    temperature = configured_temperature(config.get("temperature"))
    return Conversation(step, complete, purpose, config.get("api_key"), temperature)


def configured_temperature(value: Any) -> float | None:
    """``llm_config["temperature"]`` when it is a usable number, else None (unknown)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def accepts_temperature(complete: CompleteFn) -> bool:
    """Whether ``complete`` takes a ``temperature`` keyword (hosts written before it do not)."""
    try:
        parameters = inspect.signature(complete).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        parameter.name == "temperature" or parameter.kind is parameter.VAR_KEYWORD
        for parameter in parameters
    )
