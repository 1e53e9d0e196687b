"""Reading TAP, the Test Anything Protocol, as tape, tap and other TAP producers print it.

tape prints a ``# name`` comment for each test, then one ``ok N message`` or
``not ok N message`` line per assertion (a YAML block under a failing one with
``operator``, ``expected``, ``actual`` and ``at``), and at the end ``# tests
N``, ``# pass N`` and ``# fail N``.  A failure is named ``test > assertion``.
node ``--test``'s TAP (nested ``# Subtest:`` blocks) is read by
:mod:`.tests_javascript`, which knows its YAML fields.
"""

from __future__ import annotations

import re

from .tests_fields import failure, following, indentation, report, unquote

_VERSION = re.compile(r"^TAP version \d+$")
_PLAN = re.compile(r"^1\.\.(?P<n>\d+)(?:\s*#.*)?$")
# tape pads the counts: "# pass  150".
_COUNT = re.compile(r"^# (?P<key>tests|pass|fail|skip|todo)\s+(?P<n>\d+)$")
_POINT = re.compile(r"^(?P<verdict>not ok|ok)\b(?: (?P<number>\d+))?(?: -)?(?: (?P<name>.*))?$")
_DIRECTIVE = re.compile(r"\s+#\s*(?P<kind>SKIP|TODO)\b.*$", re.IGNORECASE)
_COMMENT = re.compile(r"^# (?P<text>.+)$")
_YAML_KEY = re.compile(r"^(?P<key>[A-Za-z_]\w*): ?(?P<value>.*)$")
_NODE_SUBTEST = re.compile(r"^\s*# Subtest: ")
# A YAML block scalar's indicator: `|`, `|-`, `>+`, `|2-`…
_BLOCK_SCALAR = re.compile(r"^[|>][0-9]?[+-]?[0-9]?$")
_MESSAGE_LIMIT = 500


def parse_tap(lines: list[str]) -> dict | None:
    """Counts from the ``# tests/pass/fail`` comments (or the test points), failures from
    ``not ok`` lines; None for output that is not TAP, or is node's."""
    if any(_NODE_SUBTEST.match(line) for line in lines):
        return None
    counts: dict[str, int] = {}
    for line in lines:
        match = _COUNT.match(line.strip())
        if match:
            counts[match["key"]] = int(match["n"])
    points = [(index, _POINT.match(line)) for index, line in enumerate(lines)]
    points = [(index, match) for index, match in points if match and match["number"]]
    versioned = any(_VERSION.match(line.strip()) for line in lines)
    planned = any(_PLAN.match(line.strip()) for line in lines)
    if not (versioned or ("tests" in counts and "pass" in counts) or (planned and points)):
        return None
    failures = []
    skipped = 0
    test = ""
    for index, line in enumerate(lines):
        comment = _COMMENT.match(line)
        if comment and not _COUNT.match(line.strip()) and comment["text"].strip() != "ok":
            test = comment["text"].strip()
            continue
        match = _POINT.match(line)
        if not match or not match["number"]:
            continue
        name = match["name"] or ""
        if _DIRECTIVE.search(name):
            skipped += 1
            continue
        if match["verdict"] == "ok":
            continue
        assertion = name.strip()
        full = f"{test} > {assertion}" if test and assertion else (assertion or test)
        error_type, message = _why(_diagnostics(lines, index + 1), assertion)
        failures.append(failure(full or f"test {match['number']}", error_type, message))
    passed = counts.get("pass")
    failed = counts.get("fail")
    if passed is None:
        passed = sum(1 for _, m in points if m["verdict"] == "ok") - skipped
    if failed is None:
        failed = len(failures) if "pass" not in counts else 0
    total = counts.get("tests", passed + failed + skipped)
    marked = "skip" in counts or "todo" in counts
    return report(
        "tap",
        passed=passed,
        failed=failed,
        errors=0,
        skipped=counts.get("skip", 0) + counts.get("todo", 0) if marked else skipped,
        collected=total,
        failures=failures,
    )


def _diagnostics(lines: list[str], start: int) -> dict[str, str]:
    """The YAML block (``---`` ... ``...``) under a test point, one level of keys, as text. A
    block scalar (``expected: |-`` then the value's lines, indented more: tape's form for a
    value of several lines) is read whole."""
    if start >= len(lines) or lines[start].strip() != "---":
        return {}
    margin = indentation(lines[start])
    values: dict[str, str] = {}
    block: tuple[str, int, bool, list[str]] | None = None  # key, its indent, folded, lines
    for line in following(lines, start + 1):
        if block is not None:
            key, indent, folded, kept = block
            if not line.strip() or indentation(line) > indent:
                kept.append(line)
                continue
            values[key] = _block_value(kept, folded)
            block = None
        if line.strip() == "..." and indentation(line) <= margin:
            break
        match = _YAML_KEY.match(line.strip())
        if not match or indentation(line) > margin + 2 or match["key"] in values:
            continue
        value = match["value"].strip()
        if _BLOCK_SCALAR.match(value):
            block = (match["key"], indentation(line), value.startswith(">"), [])
        else:
            values[match["key"]] = unquote(value)
    if block is not None:
        values[block[0]] = _block_value(block[3], block[2])
    return values


def _block_value(lines: list[str], folded: bool) -> str:
    """A YAML block scalar's lines as its value: dedented, joined with newlines (``|``) or
    spaces (``>``), trailing blank lines dropped."""
    while lines and not lines[-1].strip():
        lines.pop()
    shared = min((indentation(line) for line in lines if line.strip()), default=0)
    text = [line[shared:].rstrip() for line in lines]
    return (" " if folded else "\n").join(text)


def _why(diagnostics: dict[str, str], assertion: str) -> tuple[str | None, str]:
    """tape's ``operator``/``expected``/``actual``/``at`` as an error type and a message."""
    operator = diagnostics.get("operator")
    parts = []
    if "expected" in diagnostics or "actual" in diagnostics:
        parts.append(
            f"expected {diagnostics.get('expected', '?')}, actual {diagnostics.get('actual', '?')}"
        )
    if diagnostics.get("at"):
        parts.append(f"at {diagnostics['at']}")
    message = "; ".join(parts) or assertion
    if operator == "error":
        return "Error", message[:_MESSAGE_LIMIT]
    return ("AssertionError" if operator else None), message[:_MESSAGE_LIMIT]
