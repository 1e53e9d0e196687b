"""Defensive checks of a step's ``params``.

The host validates parameters before writing the instructions file, but the
library checks again so a malformed value gives a clear failure result instead
of an exception deep inside an operation.
"""

from __future__ import annotations

from typing import Any

from .results import StepError


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def require_str(params: dict, name: str, non_empty: bool = True) -> str:
    """Return ``params[name]``, which must be a (non-empty) string."""
    if name not in params or params[name] is None:
        raise StepError(f"missing parameter params.{name}: add it to the step")
    value = params[name]
    if not isinstance(value, str):
        raise StepError(f"params.{name} must be a string, got {_type_name(value)}")
    if non_empty and not value.strip():
        raise StepError(f"params.{name} is empty: give a value")
    return value


def optional_str(params: dict, name: str, default: str | None = None) -> str | None:
    """Return ``params[name]`` if it is a string, ``default`` if absent or null."""
    value = params.get(name)
    if value is None:
        return default
    if not isinstance(value, str):
        raise StepError(f"params.{name} must be a string, got {_type_name(value)}")
    return value


def optional_bool(params: dict, name: str, default: bool) -> bool:
    """Return ``params[name]`` if it is a boolean, ``default`` if absent or null."""
    value = params.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise StepError(f"params.{name} must be true or false, got {_type_name(value)}")
    return value


def optional_positive_number(params: dict, name: str, default: float) -> float:
    """Return ``params[name]`` if it is a number > 0, ``default`` if absent or null."""
    value = params.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise StepError(f"params.{name} must be a positive number of seconds, got {value!r}")
    return value
