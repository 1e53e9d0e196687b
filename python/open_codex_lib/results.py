"""Result dictionaries returned for every step, and the exception for user errors.

Every operation returns a plain, JSON-serialisable dict with at least ``status``
(``"success"`` or ``"failure"``), ``operation``, ``message`` (one human
sentence), ``output_files`` and ``deleted_files``.  Problems caused by the
step's input (bad parameter, missing file, path escaping its directory, ...)
are raised inside the library as :class:`StepError` and turned into a failure
dict at the top of the dispatch; they never reach the host as exceptions.
A :class:`StepError` may carry extra result fields (for example ``llm_calls``
and ``llm_error`` of an LLM-backed operation) that end up in that failure dict.
"""

from __future__ import annotations

from typing import Any


class StepError(Exception):
    """A problem with the step's input; becomes a ``"failure"`` result.

    The message must name the problem and, where possible, the fix.  ``fields``
    are added to the failure result.
    """

    def __init__(self, message: str, **fields: Any):
        super().__init__(message)
        self.fields = fields


def make_result(operation: str | None, status: str, message: str, **fields: Any) -> dict:
    """Build a result dict with the fields every result carries."""
    result = {
        "status": status,
        "operation": operation,
        "message": message,
        "output_files": [],
        "deleted_files": [],
    }
    result.update(fields)
    return result


def success(operation: str | None, message: str, **fields: Any) -> dict:
    """A ``"success"`` result."""
    return make_result(operation, "success", message, **fields)


def failure(operation: str | None, message: str, **fields: Any) -> dict:
    """A ``"failure"`` result."""
    return make_result(operation, "failure", message, **fields)
