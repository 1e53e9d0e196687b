"""Reading the JavaScript test runners' output: node's built-in runner, Jest, Vitest and Mocha.

node ``--test`` prints TAP when its output is not a terminal (node 20) and the
spec reporter otherwise (or with ``--test-reporter=spec``, the default from node
23); both are read.  Names are the runner's own: a test inside a ``describe``
is ``suite > test`` for node and Vitest (``file > suite > test``), ``suite ›
test`` for Jest and ``suite test`` (Mocha's full title) for Mocha.
"""

from __future__ import annotations

import re

from .tests_fields import (
    count,
    error_from_block,
    error_line,
    failure,
    following,
    indentation,
    report,
    unquote,
)

# node --test, TAP reporter.
_TAP_VERSION = re.compile(r"^TAP version \d+$")
_TAP_COUNT = re.compile(r"^# (?P<key>tests|pass|fail|cancelled|skipped|todo) (?P<n>\d+)$")
_TAP_SUBTEST = re.compile(r"^(?P<indent>\s*)# Subtest: (?P<name>.*)$")
_TAP_POINT = re.compile(r"^(?P<indent>\s*)(?P<verdict>not ok|ok) \d+(?: - (?P<name>.*))?$")
_YAML_KEY = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z_]\w*): ?(?P<value>.*)$")
# Why node marks a test as failed when the failure is one of its subtests' (not its own).
_PARENT_FAILURES = frozenset({"subtestsFailed"})

# node --test, spec reporter: "✔ name (1.2ms)", "✖ name (1.2ms)", "﹣ name (0.1ms) # reason",
# "▶ suite", "ℹ tests 5".
_SPEC_COUNT = re.compile(r"^ℹ (?P<key>tests|pass|fail|cancelled|skipped|todo) (?P<n>\d+)$")
_SPEC_LINE = re.compile(
    r"^(?P<indent>\s*)(?P<mark>[✔✖﹣▶]) (?P<name>.*?)(?: \([\d.]+m?s\))?(?: # .*)?$"
)
_SPEC_FAILING_SECTION = re.compile(r"^✖ failing tests:$")
# The location and error node prints when a test file cannot even load (a syntax error).
_FILE_LOCATION = re.compile(r"^#?\s*(?P<where>\S+:\d+)$")

# Jest: "Tests:       2 failed, 1 skipped, 1 passed, 4 total", "  ● suite › name".
_JEST_TESTS = re.compile(r"^Tests:\s+(?P<counts>.*\d+ total)$")
_JEST_FAILURE = re.compile(r"^(?P<indent>\s*)● (?P<name>.+)$")
_JEST_FILE = re.compile(r"^(?:FAIL|PASS)\s+(?P<file>\S.*)$")
_JEST_SUITE_FAILED = "Test suite failed to run"

# Vitest: "      Tests  2 failed | 1 passed | 1 skipped (4)", " FAIL  file > suite > name".
_VITEST_FILES = re.compile(r"^Test Files\s+")
_VITEST_TESTS = re.compile(r"^Tests\s+(?P<counts>.+?)(?:\s+\((?P<total>\d+)\))?$")
_VITEST_FAILURE = re.compile(r"^FAIL\s+(?P<name>.+?)(?P<suite>\s+\[ .* \])?$")
_VITEST_SEPARATOR = re.compile(r"^⎯+")

# Mocha spec reporter: "  1 passing (5ms)", "  1 pending", "  2 failing", then
# "  1) suite\n       name:\n     AssertionError ...".
_MOCHA_PASSING = re.compile(r"^(?P<n>\d+) passing \([^)]*\)$")
_MOCHA_COUNT = re.compile(r"^(?P<n>\d+) (?P<key>pending|failing)$")
_MOCHA_FAILURE = re.compile(r"^(?P<indent>\s*)(?P<number>\d+)\) (?P<title>.*)$")
_MOCHA_EXCEPTION = re.compile(r"^\s*Exception during run: (?P<rest>.*)$")

_WORD_COUNT = re.compile(r"(?P<n>\d+) (?P<word>[a-z]+)")


def parse_node(lines: list[str]) -> dict | None:
    """node --test output: the TAP reporter's, or the spec reporter's."""
    return _parse_node_tap(lines) or _parse_node_spec(lines)


def _node_counts(counts: dict[str, int]) -> dict:
    return {
        "passed": counts.get("pass"),
        "failed": counts.get("fail"),
        "errors": counts.get("cancelled", 0) if counts else None,
        "skipped": counts.get("skipped", 0) + counts.get("todo", 0) if counts else None,
        "collected": counts.get("tests"),
    }


def _parse_node_tap(lines: list[str]) -> dict | None:
    # node opens every test with "# Subtest:"; TAP without it is another producer's (tape's),
    # read by :mod:`.tests_tap`.
    if not any(_TAP_SUBTEST.match(line) for line in lines):
        return None
    counts: dict[str, int] = {}
    tap = False
    for line in lines:
        if _TAP_VERSION.match(line.strip()):
            tap = True
        match = _TAP_COUNT.match(line)
        if match:
            counts[match["key"]] = int(match["n"])
    if not (tap or ("tests" in counts and "pass" in counts)):
        return None
    failures = []
    subtests: list[tuple[int, str]] = []
    for index, line in enumerate(lines):
        subtest = _TAP_SUBTEST.match(line)
        if subtest:
            depth = len(subtest["indent"])
            subtests = [entry for entry in subtests if entry[0] < depth]
            subtests.append((depth, subtest["name"]))
            continue
        point = _TAP_POINT.match(line)
        if not point:
            continue
        depth = len(point["indent"])
        name = re.sub(r" # (?:SKIP|TODO)\b.*$", "", point["name"] or "", flags=re.IGNORECASE)
        path = [entry[1] for entry in subtests if entry[0] < depth] + [name]
        subtests = [entry for entry in subtests if entry[0] < depth]
        if point["verdict"] == "ok":
            continue
        diagnostics = _tap_diagnostics(lines, index + 1, depth)
        if diagnostics.get("failureType") in _PARENT_FAILURES:
            continue
        error_type = diagnostics.get("name")
        if not error_type and diagnostics.get("code") == "ERR_ASSERTION":
            error_type = "AssertionError"
        message = diagnostics.get("error", "")
        if message == "test failed":
            error_type, message = _load_error(lines, error_type, message)
        failures.append(failure(" > ".join(path), error_type, message))
    if not counts:
        # Output cut short before the summary: count the failures found.
        counts = {"fail": len(failures)}
    return report("node", failures=failures, **_node_counts(counts))


def _tap_diagnostics(lines: list[str], start: int, depth: int) -> dict[str, str]:
    """The YAML block (``---`` ... ``...``) under a TAP test point, as plain strings."""
    if start >= len(lines) or lines[start].strip() != "---":
        return {}
    values: dict[str, str] = {}
    key_indent = indentation(lines[start])
    key = None
    block: list[str] = []
    for line in following(lines, start + 1):
        if line.strip() == "..." and indentation(line) == key_indent:
            break
        match = _YAML_KEY.match(line)
        if match and len(match["indent"]) == key_indent:
            if key is not None and block:
                values[key] = "\n".join(block).strip()
            key, block = match["key"], []
            value = match["value"].strip()
            if value in ("|", "|-", ">", ">-", "|+"):
                continue
            values[key] = unquote(value)
            key = None
        elif key is not None:
            block.append(line[key_indent + 2 :] if line.strip() else "")
    if key is not None and block:
        values[key] = "\n".join(block).strip()
    return values


def _load_error(lines: list[str], error_type: str | None, message: str) -> tuple[str | None, str]:
    """The error node printed for a test file that failed to load ("test failed" alone).

    node prints it (a ``SyntaxError`` and the place in the file) outside the
    report: as TAP comments or on stderr.
    """
    for index, line in enumerate(lines):
        text = line.strip().lstrip("#").strip()
        # Only lines at the margin: the tests' own errors are indented under them.
        found = error_line(text) if indentation(line) == 0 else None
        if not found or not found[1]:
            continue
        where = ""
        for earlier in reversed(lines[max(index - 4, 0) : index]):
            location = _FILE_LOCATION.match(earlier.strip())
            if location:
                where = f" ({location['where']})"
                break
            if earlier.strip().lstrip("#").strip():
                break
        return found[0], found[1] + where
    return error_type, message


def _parse_node_spec(lines: list[str]) -> dict | None:
    counts: dict[str, int] = {}
    for line in lines:
        match = _SPEC_COUNT.match(line.strip())
        if match:
            counts[match["key"]] = int(match["n"])
    if "tests" not in counts or "pass" not in counts:
        return None
    end = next(
        (i for i, line in enumerate(lines) if _SPEC_FAILING_SECTION.match(line.strip())),
        len(lines),
    )
    failures = []
    suites: list[tuple[int, str]] = []
    for index in range(end):
        match = _SPEC_LINE.match(lines[index])
        if not match:
            continue
        depth, mark, name = len(match["indent"]), match["mark"], match["name"]
        if suites and suites[-1][0] == depth and suites[-1][1] == name and mark != "▶":
            suites.pop()  # a suite's closing line: its failures are its tests'
            continue
        suites = [entry for entry in suites if entry[0] < depth]
        if mark == "▶":
            if not lines[index].rstrip().endswith("s)"):
                suites.append((depth, name))
            continue
        if mark != "✖":
            continue
        block = []
        for line in following(lines, index + 1, end):
            if line.strip() and indentation(line) <= depth:
                break
            block.append(line)
        error_type, message = error_from_block(block)
        message = unquote(message)
        if message == "test failed":
            error_type, message = _load_error(lines, error_type, message)
        path = [entry[1] for entry in suites] + [name]
        failures.append(failure(" > ".join(path), error_type, message))
    return report("node", failures=failures, **_node_counts(counts))


def parse_jest(lines: list[str]) -> dict | None:
    """Jest's summary and its ``●`` failure blocks."""
    summary = None
    for line in lines:
        match = _JEST_TESTS.match(line.strip())
        if match:
            summary = match["counts"]
    if summary is None:
        return None
    words = {word: int(n) for n, word in _WORD_COUNT.findall(summary)}
    failures = []
    file_failures = []  # test files that did not load
    seen = set()
    current_file = ""
    for index, line in enumerate(lines):
        file_line = _JEST_FILE.match(line.strip())
        if file_line and not line.startswith(" "):
            current_file = file_line["file"].strip()
            continue
        match = _JEST_FAILURE.match(line)
        if not match:
            continue
        depth, name = len(match["indent"]), match["name"].strip()
        block = []
        for later in following(lines, index + 1):
            if later.strip() and (indentation(later) <= depth or _JEST_FAILURE.match(later)):
                break
            block.append(later)
        whole_file = name == _JEST_SUITE_FAILED
        if whole_file:
            name = current_file or name
        if name in seen:
            continue
        seen.add(name)
        failures.append(failure(name, *error_from_block(block)))
        if whole_file:
            file_failures.append(failures[-1])
    return _summary_report("jest", words, words.get("total", 0), failures, file_failures)


def parse_vitest(lines: list[str]) -> dict | None:
    """Vitest's ``Tests`` summary and its ``FAIL  file > suite > test`` blocks."""
    stripped = [line.strip() for line in lines]
    if not any(_VITEST_FILES.match(line) for line in stripped):
        return None
    summary = None
    for line in stripped:
        match = _VITEST_TESTS.match(line)
        if match:
            summary = match
    if summary is None:
        return None
    words = {word: int(n) for n, word in _WORD_COUNT.findall(summary["counts"])}
    failures = []
    file_failures = []  # test files that did not load
    seen = set()
    for index, line in enumerate(stripped):
        match = _VITEST_FAILURE.match(line)
        if not match:
            continue
        name = match["name"].strip()
        block = []
        for later in following(lines, index + 1):
            if _VITEST_FAILURE.match(later.strip()) or _VITEST_SEPARATOR.match(later.strip()):
                break
            block.append(later)
        if name in seen:
            continue
        seen.add(name)
        failures.append(failure(name, *error_from_block(block)))
        if match["suite"]:
            file_failures.append(failures[-1])
    total = count(summary["total"])
    if total is None:  # "Tests  no tests"
        total = sum(words.values())
    return _summary_report("vitest", words, total, failures, file_failures)


def _summary_report(
    framework: str, words: dict, total: int, failures: list, file_failures: list
) -> dict:
    """Jest's and Vitest's report from their summary's counts: a test file that failed as a
    whole (it did not load) is an error, and the problem when no test ran."""
    return report(
        framework,
        passed=words.get("passed", 0),
        failed=words.get("failed", 0),
        errors=len(file_failures),
        skipped=words.get("skipped", 0) + words.get("todo", 0),
        collected=total,
        problem=_file_problem(file_failures[0]) if file_failures and not total else None,
        failures=failures,
    )


def _file_problem(item: dict) -> str:
    """Why no test ran: a test file that did not load, and its first error line."""
    error = item["message"].splitlines()[0] if item["message"] else ""
    if item["error_type"]:
        error = f"{item['error_type']}: {error}"
    return f"no tests ran: {item['name']} failed to run" + (f": {error}" if error else "")


def parse_mocha(lines: list[str]) -> dict | None:
    """Mocha's spec reporter: ``N passing (…)``, ``N failing`` and the numbered failures."""
    passing = None
    counts: dict[str, int] = {}
    failing_at = None
    for index, line in enumerate(lines):
        match = _MOCHA_PASSING.match(line.strip())
        if match:
            passing, counts, failing_at = int(match["n"]), {}, None
            continue
        match = _MOCHA_COUNT.match(line.strip())
        if match and passing is not None:
            counts[match["key"]] = int(match["n"])
            if match["key"] == "failing":
                failing_at = index + 1
    if passing is None:
        return _mocha_exception(lines)
    failures = []
    if failing_at is not None:
        failures = _mocha_failures(lines[failing_at:])
    failing, pending = counts.get("failing", 0), counts.get("pending", 0)
    return report(
        "mocha",
        passed=passing,
        failed=failing,
        errors=0,
        skipped=pending,
        collected=passing + failing + pending,
        failures=failures,
    )


def _mocha_failures(lines: list[str]) -> list[dict]:
    failures = []
    index = 0
    while index < len(lines):
        match = _MOCHA_FAILURE.match(lines[index])
        index += 1
        if not match:
            continue
        title = [match["title"].strip()]
        while not title[-1].endswith(":") and index < len(lines) and lines[index].strip():
            title.append(lines[index].strip())
            index += 1
        block = []
        while index < len(lines) and not _MOCHA_FAILURE.match(lines[index]):
            block.append(lines[index])
            index += 1
        name = " ".join(title).rstrip(":")
        failures.append(failure(name, *error_from_block(block)))
    return failures


def _mocha_exception(lines: list[str]) -> dict | None:
    """Mocha that stopped before running any test (a test file that does not load)."""
    for index, line in enumerate(lines):
        match = _MOCHA_EXCEPTION.match(line)
        if not match:
            continue
        rest = [match["rest"]] + lines[index + 1 : index + 12]
        error = _load_error(rest, None, match["rest"].strip())
        text = f"{error[0]}: {error[1]}" if error[0] else error[1]
        return report(
            "mocha",
            passed=0,
            failed=0,
            errors=0,
            skipped=0,
            collected=0,
            problem=f"mocha could not run: {text}",
            failures=[],
        )
    return None
