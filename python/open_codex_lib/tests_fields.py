"""The pieces every test-output reader shares: the report and failure records, error lines.

Each reader (:mod:`.tests_report`, :mod:`.tests_javascript`, :mod:`.tests_go`,
:mod:`.tests_java`, :mod:`.tests_junit_xml`) builds its ``tests`` field with
:func:`report` and :func:`failure`, so every runner gives the same keys.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

MESSAGE_LIMIT = 500

# "TypeError: bad type", "AssertionError [ERR_ASSERTION]: Expected ...",
# "org.opentest4j.AssertionFailedError: expected: <3> but was: <2>": a class whose name says it
# is an error, so that "Expected: 3" in an assertion's diff is never taken for one.
_ERROR_LINE = re.compile(
    r"^(?P<type>(?:[A-Za-z_$][\w$]*\.)*[A-Za-z_$]*(?:Error|Exception|Failure|Fault)[\w$]*)"
    r"(?: \[(?P<code>[^\]]+)\])?(?::(?: (?P<message>.*))?)?$"
)
# Where a message ends: a stack frame, a code frame ("  8 |   expect(...)", "    |   ^"),
# vitest's "❯ file:line" or jest's "at Object.<anonymous> (file:line)".
_MESSAGE_END = re.compile(r"^(?:at |❯ |>?\s*\d*\s*\|)")


def report(
    framework: str,
    *,
    passed: int | None,
    failed: int | None,
    errors: int | None,
    skipped: int | None,
    failures: list[dict],
    collected: int | None = None,
    problem: str | None = None,
) -> dict:
    """The ``tests`` field of a ``run_tests`` result; None where the output does not say."""
    return {
        "framework": framework,
        "passed": passed,
        "failed": failed,
        "errors": errors,
        "skipped": skipped,
        "collected": collected,
        "problem": problem,
        "failures": failures,
    }


def failure(name: str, error_type: str | None, message: str) -> dict:
    """One failing test; the message is trimmed and capped."""
    return {
        "name": name.strip(),
        "error_type": error_type or None,
        "message": message.strip()[:MESSAGE_LIMIT],
    }


def count(text: str | None) -> int | None:
    """``int(text)``, or None for a missing or malformed number."""
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def error_line(line: str) -> tuple[str, str] | None:
    """``(type, message)`` of a ``SomeError: message`` line, or None."""
    match = _ERROR_LINE.match(line.strip())
    if not match:
        return None
    return match["type"], match["message"] or ""


def error_from_block(lines: list[str]) -> tuple[str | None, str]:
    """The error type and message in the lines a runner prints under a failing test.

    The first ``SomeError: message`` line gives both, and the lines after it
    (an assertion's expected and actual values) join the message until a stack
    or code frame starts.  A block without such a line (Jest's ``expect(...)``
    failures) gives its first line, and is an AssertionError when it is an
    ``expect``/``assert`` call.
    """
    text = [line.strip() for line in lines]
    start, error_type, first = None, None, ""
    for index, line in enumerate(text):
        if _MESSAGE_END.match(line):
            break
        found = error_line(line)
        if found:
            start, (error_type, first) = index, found
            break
    if start is None:
        start = next((i for i, line in enumerate(text) if line), None)
        if start is None:
            return None, ""
        first = text[start]
    if error_type in (None, "Error") and first.startswith(("expect(", "assert")):
        error_type = "AssertionError"  # Jest's matchers, Node's assert without a class
    message = [first]
    for line in text[start + 1 :]:
        if _MESSAGE_END.match(line) or line.startswith("{"):
            break
        if line or message[-1]:
            message.append(line)
    return error_type, "\n".join(message).strip()[:MESSAGE_LIMIT]


def following(lines: list[str], start: int, end: int | None = None) -> Iterator[str]:
    """``lines[start:end]`` without copying them (readers look ahead from every failure)."""
    for index in range(start, len(lines) if end is None else min(end, len(lines))):
        yield lines[index]


def indentation(line: str) -> int:
    """How many spaces or tabs ``line`` starts with."""
    return len(line) - len(line.lstrip(" \t"))


def unquote(value: str) -> str:
    """A YAML or JavaScript scalar without its quotes: ``'it''s'`` -> ``it's``."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1].replace('\\"', '"')
    return value
