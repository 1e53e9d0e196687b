"""Reading Maven Surefire and Gradle test output.

Failures are named ``package.Class.method`` where the output says the class
(Surefire's ``Running com.x.FooTest``, Gradle's ``com.x.FooTest > method
FAILED``), else ``Class.method`` from Surefire's results section.  A build that
stopped at compilation gives the compiler's first error as the ``problem``.
"""

from __future__ import annotations

import re

from .tests_fields import error_line, failure, following, report

# Surefire prefixes its lines with the log level: "[ERROR] Tests run: ...".
_LEVEL = re.compile(r"^\[(?:INFO|ERROR|WARNING|WARN|DEBUG)\]\s?")
_SUREFIRE_COUNTS = re.compile(
    r"^Tests run: (?P<run>\d+), Failures: (?P<failures>\d+), Errors: (?P<errors>\d+), "
    r"Skipped: (?P<skipped>\d+)(?P<rest>.*)$"
)
_SUREFIRE_RUNNING = re.compile(r"^Running (?P<class>[\w.$]+)$")
_SUREFIRE_IN = re.compile(r" - in (?P<class>[\w.$]+)$")
# The head of a failure's details, in the three forms Surefire has printed:
#   "addsWrongly(com.x.CalcTest)  Time elapsed: 0 s  <<< FAILURE!"        (JUnit 4)
#   "addsWrongly  Time elapsed: 0.006 s  <<< FAILURE!"                     (2.22, JUnit 5)
#   "com.x.CalcTest.addsWrongly -- Time elapsed: 0.006 s <<< FAILURE!"     (3.x)
_SUREFIRE_DETAIL = re.compile(
    r"^(?P<name>[^\s(]+)(?:\((?P<class>[\w.$]+)\))?\s+(?:-- )?Time elapsed: .*<<< "
    r"(?P<kind>FAILURE|ERROR)!$"
)
# The results section: "Failures: " then "  CalcTest.addsWrongly:16 expected: <3> but was: <2>".
_SUREFIRE_SECTION = re.compile(r"^(?P<kind>Failures|Errors):\s*$")
_SUREFIRE_ENTRY = re.compile(r"^\s+(?P<name>[\w.$]+?)(?::(?P<line>\d+))?(?: (?P<message>.*))?$")
_MAVEN_COMPILE_ERROR = re.compile(r"^COMPILATION ERROR")
_MAVEN_SOURCE_ERROR = re.compile(r"^(?P<error>\S+\.(?:java|kt|scala|groovy):\[\d+,\d+\] .*)$")

# Gradle: "4 tests completed, 2 failed, 1 skipped", "com.x.CalcTest > addsWrongly FAILED".
_GRADLE_SUMMARY = re.compile(
    r"^(?P<total>\d+) tests? completed(?:, (?P<failed>\d+) failed)?(?:, (?P<skipped>\d+) skipped)?$"
)
_GRADLE_FAILED = re.compile(r"^(?P<path>\S.*? > .+) FAILED$")
# Gradle's short exception format: "java.lang.AssertionError at CalcTest.java:16".
_GRADLE_SHORT = re.compile(r"^(?P<type>[\w.$]+) at (?P<where>\S+:\d+)$")
_GRADLE_COMPILE_ERROR = re.compile(r"^(?P<error>\S+\.(?:java|kt|scala|groovy):\d+: error: .*)$")
_GRADLE_COMPILE_FAILED = re.compile(r"^> Compilation failed")


def parse_maven(lines: list[str]) -> dict | None:
    """Surefire's ``Tests run:`` lines, failure details and results section."""
    text = [_LEVEL.sub("", line.rstrip()) for line in lines]
    totals = [0, 0, 0, 0]
    per_class = [0, 0, 0, 0]
    found = False
    for line in text:
        match = _SUREFIRE_COUNTS.match(line.strip())
        if not match:
            continue
        found = True
        numbers = [int(match[key]) for key in ("run", "failures", "errors", "skipped")]
        # A class's own line says how long it took; a module's total does not.
        target = per_class if "Time elapsed" in match["rest"] else totals
        for index, number in enumerate(numbers):
            target[index] += number
    if not found:
        return _maven_compile_problem(text)
    run, failed, errors, skipped = totals if any(totals) else per_class
    failures = _surefire_details(text) or _surefire_results(text)
    return report(
        "maven",
        passed=max(run - failed - errors - skipped, 0),
        failed=failed,
        errors=errors,
        skipped=skipped,
        collected=run,
        problem="no tests were run" if run == 0 else None,
        failures=failures,
    )


def _surefire_details(text: list[str]) -> list[dict]:
    failures = []
    seen = set()
    current_class = None
    for index, line in enumerate(text):
        stripped = line.strip()
        running = _SUREFIRE_RUNNING.match(stripped) or _SUREFIRE_IN.search(stripped)
        if running:
            current_class = running["class"]
        detail = _SUREFIRE_DETAIL.match(stripped)
        if not detail:
            continue
        name = detail["name"]
        if detail["class"]:
            name = f"{detail['class']}.{name}"
        elif current_class and "." not in name:
            name = f"{current_class}.{name}"
        error_type, message = None, ""
        for later in following(text, index + 1):
            if not later.strip():
                continue
            exception = error_line(later)
            if exception:
                error_type, message = exception
            else:
                message = later.strip()
            break
        if name not in seen:
            seen.add(name)
            failures.append(failure(name, error_type, message))
    return failures


def _surefire_results(text: list[str]) -> list[dict]:
    """Failures from the results section alone (``Class.method:line message``)."""
    failures = []
    section = None
    for line in text:
        heading = _SUREFIRE_SECTION.match(line.strip())
        if heading:
            section = heading["kind"]
            continue
        if section is None:
            continue
        entry = _SUREFIRE_ENTRY.match(line)
        if not entry or entry["name"].startswith("Run"):
            section = None if not line.startswith(" ") else section
            continue
        error_type = "AssertionError" if section == "Failures" else None
        failures.append(failure(entry["name"], error_type, entry["message"] or ""))
    return failures


def _maven_compile_problem(text: list[str]) -> dict | None:
    if not any(_MAVEN_COMPILE_ERROR.match(line.strip()) for line in text):
        return None
    errors = [m["error"] for m in map(_MAVEN_SOURCE_ERROR.match, text) if m]
    return _compilation_failed("maven", errors)


def parse_gradle(lines: list[str]) -> dict | None:
    """Gradle's ``N tests completed, N failed`` and its ``Class > test FAILED`` lines."""
    summary = None
    for line in lines:
        match = _GRADLE_SUMMARY.match(line.strip())
        if match:
            summary = match
    failures = []
    for index, line in enumerate(lines):
        match = _GRADLE_FAILED.match(line.rstrip())
        if not match:
            continue
        parts = [part.strip() for part in match["path"].split(" > ")]
        name = f"{parts[0]}.{parts[1]}" if len(parts) == 2 else " > ".join(parts)
        error_type, message = None, ""
        for later in following(lines, index + 1):
            if not later.strip():
                continue
            if not later.startswith((" ", "\t")):
                break
            short = _GRADLE_SHORT.match(later.strip())
            if short:
                error_type, message = short["type"], f"at {short['where']}"
            else:
                error_type, message = error_line(later) or (None, later.strip())
            break
        failures.append(failure(name, error_type, message))
    if summary is None and not failures:
        return _gradle_compile_problem(lines)
    total = int(summary["total"]) if summary else len(failures)
    failed = int(summary["failed"] or 0) if summary else len(failures)
    skipped = int(summary["skipped"] or 0) if summary else 0
    return report(
        "gradle",
        passed=max(total - failed - skipped, 0),
        failed=failed,
        errors=0,
        skipped=skipped,
        collected=total,
        failures=failures,
    )


def _gradle_compile_problem(lines: list[str]) -> dict | None:
    if not any(_GRADLE_COMPILE_FAILED.match(line.strip()) for line in lines):
        return None
    errors = [
        m["error"] for m in (_GRADLE_COMPILE_ERROR.match(line.strip()) for line in lines) if m
    ]
    return _compilation_failed("gradle", errors)


def _compilation_failed(framework: str, errors: list[str]) -> dict:
    """The report of a build that stopped before any test ran, with its first error."""
    first = f": {errors[0]}" if errors else ""
    return report(
        framework,
        passed=None,
        failed=None,
        errors=None,
        skipped=None,
        collected=0,
        problem=f"no tests ran: compilation failed{first}",
        failures=[],
    )
