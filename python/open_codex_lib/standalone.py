"""A ``complete`` callable for standalone runs (``python -m open_codex_lib FILE``).

Under ocflow the host passes ``llm_config["complete"]``.  Run alone, the
library builds one from the optional ``openai`` package
(``pip install openai``) with the base URL, model and API key read from the
environment by :mod:`.__main__`.  :func:`prepare_llm_config` is the only entry
point: it adds ``complete`` to the config when the step needs a model, or
returns the message explaining what to install or set.

The adapter has the host's contract: ``complete(messages, purpose=None,
json=False, temperature=None) -> {"content", "finish_reason", "usage"}``
(``temperature``, given for a re-ask, replaces the configured one); its errors are
:class:`LLMCallError` with ``kind`` and ``transient``.  The API key goes only
to the ``openai`` client, never into a message, and strings in the messages
that look like keys are redacted (:mod:`.redact`), as the host does.
"""

from __future__ import annotations

from typing import Any

from .instructions import Step
from .llm import get_complete, llm_use
from .redact import redact_messages

INSTALL_HINT = "install the openai package (pip install openai) or run the step from ocflow"
MODEL_HINT = (
    "set OCFLOW_MODEL or LLM_MODEL to the model name (and OCFLOW_BASE_URL, OPENAI_BASE_URL "
    "or LLM_BASE_URL for an OpenAI-compatible server)"
)
# Placeholder key for local OpenAI-compatible servers, which ignore it.
NO_KEY = "not-needed"

# openai exception class name -> (kind, transient)
ERROR_KINDS = {
    "RateLimitError": ("rate_limited", True),
    "APITimeoutError": ("timeout", True),
    "APIConnectionError": ("connection", True),
    "InternalServerError": ("server_error", True),
    "AuthenticationError": ("unauthorized", False),
    "PermissionDeniedError": ("forbidden", False),
    "NotFoundError": ("not_found", False),
    "BadRequestError": ("bad_request", False),
    "UnprocessableEntityError": ("bad_request", False),
    "ConflictError": ("conflict", True),
}


class StandaloneError(Exception):
    """No model can be used; the message says what to install or set."""


class LLMCallError(Exception):
    """A failed model call, with the host's ``kind`` and ``transient`` attributes."""

    def __init__(self, message: str, kind: str, transient: bool):
        super().__init__(message)
        self.kind = kind
        self.transient = transient


# Other names callers give the settings (seed 002: "endpoint, API key, and model").
SETTING_ALIASES = {
    "base_url": ("endpoint", "api_base", "base_url"),
    "api_key": ("key", "api_key"),
    "model": ("model_name", "model"),
}


def has_own_endpoint(llm_config: dict | None) -> bool:
    """Whether the caller gave an endpoint and no ``complete``: the library is used on its own.

    ocflow never passes an endpoint (it calls the model itself), so a host
    without a model never makes the library reach the network.
    """
    if not llm_config or get_complete(llm_config) is not None:
        return False
    return any(llm_config.get(name) for name in SETTING_ALIASES["base_url"])


def endpoint_config(llm_config: dict) -> dict:
    """``llm_config`` with ``base_url``, ``api_key`` and ``model`` under our names."""
    config = dict(llm_config)
    for setting, names in SETTING_ALIASES.items():
        if not config.get(setting):
            config[setting] = next((config[n] for n in names if config.get(n)), None)
    return config


def prepare_llm_config(step: Step, llm_config: dict) -> tuple[dict, str | None]:
    """``(config, None)`` ready for the step, or ``(config, failure message)``.

    When the step uses a model and ``llm_config`` has no ``complete``, one is
    built from the ``openai`` package.
    """
    what, required = llm_use(step)
    if what is None or get_complete(llm_config) is not None:
        return llm_config, None
    try:
        complete = openai_complete(llm_config, step.limits.timeout_seconds)
    except StandaloneError as exc:
        return llm_config, (f"operation {what} needs an LLM: {exc}" if required else None)
    return {**llm_config, "complete": complete}, None


def openai_complete(llm_config: dict, timeout: float | None = None):
    """A ``complete`` callable using ``openai.OpenAI`` (raises :class:`StandaloneError`)."""
    try:
        import openai
    except ImportError:
        raise StandaloneError(INSTALL_HINT) from None
    model = llm_config.get("model")
    if not model:
        raise StandaloneError(MODEL_HINT)
    options: dict[str, Any] = {"api_key": llm_config.get("api_key") or NO_KEY}
    if llm_config.get("base_url"):
        options["base_url"] = llm_config["base_url"]
    if timeout:
        options["timeout"] = timeout
    client = openai.OpenAI(**options)

    def complete(
        messages: list[dict],
        purpose: str | None = None,
        json: bool = False,
        temperature: float | None = None,
    ) -> dict:
        request: dict[str, Any] = {"model": model, "messages": redact_messages(messages)}
        for name in ("temperature", "max_tokens"):
            if llm_config.get(name) is not None:
                request[name] = llm_config[name]
        if temperature is not None:  # a re-ask, sent warmer than the configured temperature
            request["temperature"] = temperature
        if json:
            request["response_format"] = {"type": "json_object"}
        try:
            response = client.chat.completions.create(**request)
        except Exception as exc:  # noqa: BLE001 - the openai package raises many types
            raise wrap_error(exc) from None
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        return {
            "content": choice.message.content or "",
            "finish_reason": choice.finish_reason,
            "usage": {
                key: getattr(usage, key, 0) or 0
                for key in ("prompt_tokens", "completion_tokens", "total_tokens")
            },
        }

    return complete


def wrap_error(exc: Exception) -> LLMCallError:
    """An :class:`LLMCallError` for an exception of the ``openai`` client."""
    name = type(exc).__name__
    kind, transient = ERROR_KINDS.get(name, ("error", False))
    status = getattr(exc, "status_code", None)
    if name not in ERROR_KINDS and isinstance(status, int) and status >= 500:
        kind, transient = "server_error", True
    return LLMCallError(f"{name}: {exc}", kind, transient)
