"""Reading test counts and failures out of a test run's output.

:func:`parse_test_output` returns the ``tests`` field of a ``run_tests``
result::

    {"framework": "pytest" | "unittest" | "cargo" | "go" | "jest" | "vitest" | "mocha"
                  | "node" | "tap" | "maven" | "gradle" | None,
     "passed": int | None, "failed": int | None, "errors": int | None,
     "skipped": int | None, "collected": int | None, "problem": str | None,
     "failures": [{"name": str, "error_type": str | None, "message": str}]}

pytest, unittest (``Ran N tests`` then ``OK`` or ``FAILED (failures=1)``) and
cargo are read here; go (:mod:`.tests_go`), the JavaScript runners
(:mod:`.tests_javascript`), TAP as tape prints it (:mod:`.tests_tap`) and Maven
and Gradle (:mod:`.tests_java`) in their own modules.  pytest 9's subtest counts
(``152 subtests passed``) go into ``subtests`` ({"passed", "failed", "skipped"}),
present only when the summary line has them.  A count is None where the output does not say it (``go test``
without ``-v`` lists only failures).  Output that matches none of these
formats gives ``framework`` None, null counts and no failures; ``run_tests``
then reads the JUnit XML reports the command wrote (:mod:`.tests_junit_xml`).

``collected`` is how many tests the runner collected, when its output says
(pytest prints it without ``-q``, and 0 when nothing ran; cargo and unittest
always).  ``problem`` says why no test ran, when none did: a run that
collected nothing is not "0 failed", and recovery must see the real cause
(pytest's own error line, e.g. ``file or directory not found: tests/x.py``,
or the compiler's first error when a Go package or a Java build did not compile).
"""

from __future__ import annotations

import re

from .tests_go import parse_go, parse_go_json
from .tests_java import parse_gradle, parse_maven
from .tests_javascript import parse_jest, parse_mocha, parse_node, parse_vitest
from .tests_tap import parse_tap

# Terminal escape sequences: CSI (colours, "\x1b[31m"), OSC ("\x1b]...BEL") and two-byte ones.
_ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")

# pytest: "1 failed, 3 passed, 1 skipped in 0.12s", possibly framed by "=".
# pytest 9 counts subtests apart: "2 failed, 138 passed, 5 skipped, 152 subtests passed in 9.21s".
_PYTEST_SUMMARY = re.compile(
    r"^=*\s*(?P<counts>(?:\d+ (?:subtests )?[a-z]+(?:, )?)+|no tests ran)"
    r"(?: in [\d.]+s(?: \([\d:.]+\))?)?\s*=*\s*$"
)
_PYTEST_COUNT = re.compile(r"(\d+) ((?:subtests )?[a-z]+)")
_PYTEST_COLLECTED = re.compile(r"^collected (\d+) items?\b")
# pytest's own errors: "ERROR: file or directory not found: x", "ERROR: not found: a.py::t",
# "ERROR: usage: ... pytest ..." followed by argparse's "...pytest: error: <what>".
_PYTEST_ERROR = re.compile(r"^ERROR: (?P<text>.+)$")
_PYTEST_ARGUMENT_ERROR = re.compile(r"^.*\bpytest: error: (?P<text>.+)$")
# Exit codes: 4 = usage error (a path or test not found, a bad option), 5 = no tests collected.
PYTEST_USAGE_ERROR = 4
_NOT_OUTCOMES = frozenset({"warning", "warnings", "deselected", "rerun"})
# A failed subtest (pytest 9) names itself by its message and parameters before the test:
# "SUBFAILED[my msg] (i=1) test_x.py::test_e - assert 1 == 0", "SUBFAILED(i=3) test_x.py::T::t".
_PYTEST_PROBLEM = re.compile(
    r"^(?P<kind>FAILED|ERROR|SUBFAILED(?P<subtest>(?:\[[^\]]*\])? ?(?:\([^)]*\))?)) "
    r"(?P<name>.+?)(?: - (?P<message>.*))?$"
)
_EXCEPTION_PREFIX = re.compile(r"^(?P<type>[A-Za-z_][\w.]*): (?P<message>.*)$")

# cargo/libtest
_CARGO_RESULT = re.compile(
    r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured"
)
_CARGO_RUNNING = re.compile(r"^running (\d+) tests?$")
_CARGO_FAILED_TEST = re.compile(r"^test (?P<name>.+?) \.\.\. FAILED$")
_CARGO_SECTION = re.compile(r"^---- (?P<name>.+) stdout ----$")
_CARGO_PANIC = re.compile(r"^thread '[^']*'(?: \(\d+\))? panicked at (?P<rest>.*)$")
_MESSAGE_LIMIT = 500

# unittest: "Ran 3 tests in 0.001s", then "OK (skipped=1)" or "FAILED (failures=1, errors=1)".
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s$")
_UNITTEST_VERDICT = re.compile(r"^(?P<verdict>OK|FAILED)(?: \((?P<details>[^)]*)\))?$")
_UNITTEST_PROBLEM = re.compile(r"^(?P<kind>FAIL|ERROR): (?P<name>\S+) \((?P<where>[^)]*)\)")


def parse_test_output(output: str, exit_code: int | None = None) -> dict:
    """Parse the output (stdout and stderr together) of a test run that exited with ``exit_code``.

    Colour codes are removed first: a project's ``addopts = --color=yes`` (or
    ``cargo test --color=always``, Vitest, Maven) splits every summary line with them.
    The readers are tried from the most particular format to the loosest, each
    keyed on lines no other runner prints, so that one runner's output is never
    taken for another's; any error while reading leaves the output unrecognised.
    """
    lines = strip_ansi(output).splitlines()
    try:
        report = _first_recognised(lines, exit_code)
    except Exception:  # noqa: BLE001 - odd output must never fail the step
        report = None
    report = report or _unrecognised()
    report.setdefault("collected", None)
    report.setdefault("problem", None)
    return report


def _first_recognised(lines: list[str], exit_code: int | None) -> dict | None:
    return (
        parse_cargo(lines)
        or parse_go_json(lines)
        or parse_pytest(lines, exit_code)
        or parse_unittest(lines)
        or parse_maven(lines)
        or parse_gradle(lines)
        or parse_go(lines)
        or parse_jest(lines)
        or parse_vitest(lines)
        or parse_mocha(lines)
        or parse_tap(lines)
        or parse_node(lines)
    )


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences."""
    return _ANSI_ESCAPE.sub("", text)


def _unrecognised() -> dict:
    return {
        "framework": None,
        "passed": None,
        "failed": None,
        "errors": None,
        "skipped": None,
        "failures": [],
    }


# A failure's section in pytest's FAILURES: "____ test_total ____", "____ TestC.test_m ____".
_PYTEST_SECTION = re.compile(r"^_{2,} (?P<name>\S.*?) _{2,}$")
# Where it failed, the section's last line: "tests/test_cart.py:2: AssertionError".
_PYTEST_WHERE = re.compile(r"^(?P<where>[^\s:][^\s]*:\d+): \w[\w.]*$")
# The most of a failure's `E` lines kept: the assertion and the diff of its values.
_MAX_E_LINES = 12
_MAX_E_CHARS = 2000


def _pytest_sections(lines: list[str]) -> dict[str, tuple[list[str], str | None]]:
    """Each failure section's ``E`` lines (the failing line's explanation: the assertion with
    its values, the diff of two strings) and where it failed, by the section's name."""
    sections: dict[str, tuple[list[str], str | None]] = {}
    current = None
    for line in lines:
        line = line.rstrip()
        header = _PYTEST_SECTION.match(line)
        if header:
            current = header["name"]
            sections[current] = ([], None)
            continue
        if current is None:
            continue
        if line.startswith("="):
            current = None
        elif line.startswith("E ") and line[1:].strip():
            sections[current][0].append(line[1:].strip())
        elif _PYTEST_WHERE.match(line):
            sections[current] = (sections[current][0], _PYTEST_WHERE.match(line)["where"])
    return sections


def _pytest_detail(name: str, sections: dict) -> tuple[str, str | None] | None:
    """The whole message of the failure ``name`` (``path::Class::test``) from its section's
    ``E`` lines, with where it failed; None without them. pytest's FAILED line is cut (at 80
    columns, and its values shortened to `'a rather lon...uld have been'`): they are not."""
    key = name.split("::", 1)[-1].replace("::", ".")
    e_lines, where = sections.get(key, ([], None))
    if not e_lines:
        return None
    error_type, message = _split_exception(e_lines[0])
    text = "\n".join([message, *e_lines[1:_MAX_E_LINES]])
    if len(text) > _MAX_E_CHARS:
        text = text[:_MAX_E_CHARS] + "[…]"
    if where:
        text += f"\n(at {where})"
    return error_type, text


def parse_pytest(lines: list[str], exit_code: int | None = None) -> dict | None:
    """Counts from pytest's last summary line, failures from FAILED/ERROR lines.

    Output without a summary line is still pytest's when it holds pytest's
    usage error or "file or directory not found" line.
    """
    summary = None
    for line in lines:
        match = _PYTEST_SUMMARY.match(line.strip())
        if match and (" in " in line or "no tests ran" in line):
            summary = match.group("counts")
    error = _pytest_error(lines)
    if summary is None and not (error and error[1]):
        return None
    words: dict[str, int] = {}
    for number, word in _PYTEST_COUNT.findall(summary or ""):
        words[word] = words.get(word, 0) + int(number)
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    for word, number in words.items():
        key = {"error": "errors", "errors": "errors"}.get(word, word)
        if key in counts:
            counts[key] += number
    subtests = {
        word.removeprefix("subtests "): n
        for word, n in words.items()
        if word.startswith("subtests ")
    }
    nothing_ran = sum(n for word, n in words.items() if word not in _NOT_OUTCOMES) == 0
    collected = _pytest_collected(lines)
    if collected is None and nothing_ran:
        collected = words.get("deselected", 0)
    problem = None
    if nothing_ran or exit_code == PYTEST_USAGE_ERROR:
        problem = _pytest_problem(error[0] if error else None, words.get("deselected", 0))

    failures = []
    seen = set()
    sections = _pytest_sections(lines)
    for line in lines:
        match = _PYTEST_PROBLEM.match(line.rstrip())
        if not match or (match["kind"], match["name"]) in seen:
            continue
        seen.add((match["kind"], match["name"]))
        error_type, message = _split_exception(match["message"] or "")
        detail = _pytest_detail(match["name"], sections) if not match["subtest"] else None
        if detail is not None:
            error_type, message = detail[0] or error_type, detail[1]
        name = match["name"]
        if match["subtest"]:
            name = f"{name} {match['subtest'].strip()}"
        failures.append({"name": name, "error_type": error_type, "message": message})
    report = {
        "framework": "pytest",
        **counts,
        "collected": collected,
        "problem": problem,
        "failures": failures,
    }
    if subtests:
        # Counted apart from the tests: a subtest is not a test of its own.
        report["subtests"] = {key: subtests.get(key, 0) for key in ("passed", "failed", "skipped")}
    return report


def _pytest_collected(lines: list[str]) -> int | None:
    """N of the ``collected N items`` line pytest prints without ``-q``."""
    for line in lines:
        match = _PYTEST_COLLECTED.match(line.strip())
        if match:
            return int(match.group(1))
    return None


def _pytest_error(lines: list[str]) -> tuple[str, bool] | None:
    """pytest's first own error, and whether it can only come from pytest.

    ``ERROR: usage: ...`` becomes argparse's reason (``unrecognized arguments:
    --x``); a following ``(no match in any of [...])`` line is kept.
    """
    for index, line in enumerate(lines):
        match = _PYTEST_ERROR.match(line.strip())
        if not match:
            continue
        text = match["text"].strip()
        if text.startswith("usage:") and "pytest" in text:
            for later in lines[index + 1 :]:
                argument = _PYTEST_ARGUMENT_ERROR.match(later.strip())
                if argument:
                    return argument["text"].strip(), True
            return "usage error", True
        following = lines[index + 1].strip() if index + 1 < len(lines) else ""
        if following.startswith("(") and following.endswith(")"):
            text += " " + following
        return text, text.startswith("file or directory not found:")
    return None


def _pytest_problem(error: str | None, deselected: int) -> str:
    """Why pytest ran no test, in one phrase."""
    if error is not None:
        if error.startswith(("file or directory not found:", "not found:")):
            return f"no tests were collected: {error}"
        return f"pytest could not run: {error}"
    if deselected:
        return (
            f"no tests were selected: all {deselected} collected tests were deselected "
            "(by -k, -m or a node id)"
        )
    return "no tests were collected"


def _split_exception(text: str) -> tuple[str | None, str]:
    """``"ValueError: boom"`` -> ("ValueError", "boom"); bare asserts are AssertionError."""
    match = _EXCEPTION_PREFIX.match(text)
    if match:
        return match["type"], match["message"]
    if text.startswith("assert"):
        return "AssertionError", text
    return None, text


def parse_cargo(lines: list[str]) -> dict | None:
    """Sum every ``test result:`` line; failures from the ``---- name stdout ----`` sections."""
    totals = None
    collected = 0
    for line in lines:
        running = _CARGO_RUNNING.match(line.strip())
        if running:
            collected += int(running.group(1))
        match = _CARGO_RESULT.match(line.strip())
        if match:
            passed, failed, ignored, _ = (int(group) for group in match.groups())
            totals = totals or {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
            totals["passed"] += passed
            totals["failed"] += failed
            totals["skipped"] += ignored
    if totals is None:
        return None

    messages = _cargo_panic_messages(lines)
    names = []
    for line in lines:
        match = _CARGO_FAILED_TEST.match(line.strip()) or _CARGO_SECTION.match(line.strip())
        if match and match["name"] not in names:
            names.append(match["name"])
    failures = [
        {"name": name, "error_type": "panic", "message": messages.get(name, "")} for name in names
    ]
    return {"framework": "cargo", **totals, "collected": collected, "failures": failures}


def _cargo_panic_messages(lines: list[str]) -> dict[str, str]:
    """Map test name -> panic message, read from the failure output sections."""
    messages = {}
    current = None
    collected: list[str] = []
    collecting = False

    def finish() -> None:
        if current is not None and collected:
            messages[current] = "\n".join(collected)[:_MESSAGE_LIMIT]

    for line in lines:
        section = _CARGO_SECTION.match(line.strip())
        if section:
            finish()
            current, collected, collecting = section["name"], [], False
            continue
        if current is None:
            continue
        panic = _CARGO_PANIC.match(line.strip())
        if panic and not collected:
            rest = panic["rest"]
            old_style = re.match(r"^'(?P<message>.*)', \S+$", rest)
            if old_style:  # Rust < 1.73: panicked at 'message', src/lib.rs:1:2
                collected.append(old_style["message"])
            else:  # panicked at src/lib.rs:1:2: then the message lines
                collecting = True
            continue
        if collecting:
            if not line.strip() or line.startswith(("stack backtrace:", "note:", "failures:")):
                collecting = False
            else:
                collected.append(line.rstrip())
        elif line.strip() == "failures:":
            finish()
            current, collected = None, []
    finish()
    return messages


def parse_unittest(lines: list[str]) -> dict | None:
    """Counts from ``Ran N tests`` and the verdict line; failures from ``FAIL:``/``ERROR:`` blocks."""
    ran = None
    details: dict[str, int] = {}
    for index, line in enumerate(lines):
        match = _UNITTEST_RAN.match(line.strip())
        if not match:
            continue
        ran = int(match.group(1))
        for later in lines[index + 1 :]:
            verdict = _UNITTEST_VERDICT.match(later.strip())
            if verdict:
                for part in (verdict["details"] or "").split(","):
                    key, _, value = part.strip().partition("=")
                    if value.isdigit():
                        details[key] = int(value)
                break
    if ran is None:
        return None
    failed, errors, skipped = (
        details.get("failures", 0),
        details.get("errors", 0),
        details.get("skipped", 0),
    )
    failures = []
    for index, line in enumerate(lines):
        match = _UNITTEST_PROBLEM.match(line.strip())
        if not match:
            continue
        error_type, message = None, ""
        for later in lines[index + 1 :]:
            if later.startswith(("=====", "FAIL:", "ERROR:")) or _UNITTEST_RAN.match(later.strip()):
                break
            exception = _EXCEPTION_PREFIX.match(later.strip())
            if exception and not later.startswith(" "):
                error_type, message = (
                    exception["type"],
                    exception["message"][:_MESSAGE_LIMIT],
                )
        failures.append(
            {
                "name": f"{match['where']}.{match['name']}"
                if "." not in match["where"]
                else match["where"],
                "error_type": error_type,
                "message": message,
            }
        )
    passed = max(ran - failed - errors - skipped - details.get("expected failures", 0), 0)
    return {
        "framework": "unittest",
        "passed": passed,
        "failed": failed,
        "errors": errors,
        "skipped": skipped,
        "collected": ran,
        "problem": "no tests were collected" if ran == 0 else None,
        "failures": failures,
    }
