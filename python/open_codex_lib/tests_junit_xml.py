"""Reading JUnit XML reports: the format most test runners can write besides their own output.

Surefire writes ``target/surefire-reports/TEST-*.xml``, Gradle
``build/test-results/test/*.xml``; jest-junit, Vitest, mocha-junit-reporter,
``node --test --test-reporter=junit`` and ``pytest --junitxml`` write the same
format.  :func:`fresh_reports` finds the reports a test command just wrote in
its work_dir; :func:`read_reports` turns them into a ``tests`` field with
framework ``junit-xml``; :func:`complete_report` lets them fill what a
runner's printed output left out.

A report is read only when it is a regular file of at most
:data:`REPORT_SIZE_LIMIT` bytes without a DOCTYPE or entity declaration: a
repository could ship an XML bomb.
"""

from __future__ import annotations

import os
import re
import stat
from xml.etree import ElementTree

from .tests_fields import error_from_block, error_line, failure, report

REPORT_SIZE_LIMIT = 5 * 1024 * 1024
_REPORTS_READ = 100
_TOTAL_SIZE_LIMIT = 50 * 1024 * 1024
# Where a report's root element must start: other XML files (configuration, data) are skipped
# before they are parsed.
_ROOT_WITHIN = 64 * 1024
_SEARCH_LIMIT = 20000
# Report folders are build output (target/, build/), so only these are left out of the search.
_NOT_SEARCHED = frozenset(
    {".git", ".ocflow", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".gradle"}
)
# Filesystem timestamps come from a coarse clock that can lag the one time.time() reads by a
# tick (a few milliseconds), so a report written just after the start can look older than it.
_CLOCK_SLACK_SECONDS = 0.1
_UNSAFE = re.compile(rb"<!(?:DOCTYPE|ENTITY)", re.IGNORECASE)
# node's junit reporter puts its own failure kind in "type"; the error's class is in the text.
_NODE_FAILURE_TYPES = frozenset(
    {
        "testCodeFailure",
        "hookFailure",
        "subtestsFailed",
        "cancelledByParent",
        "parentAlreadyFinished",
        "uncaughtException",
        "unhandledRejection",
        "testTimeoutFailure",
    }
)
_NODE_CAUSE = re.compile(r"^\s*cause: (?P<line>.*)$", re.MULTILINE)
_SOURCE_FILE = re.compile(r"(?:/|\.(?:[cm]?[jt]sx?|py|go|rb|rs|php)$)")
# A bare location ("at CalcTest.java:16") is all Gradle prints of a failure by default.
_LOCATION_ONLY = re.compile(r"^at \S+:\d+$")


def fresh_reports(work_dir: str, since: float) -> list[str]:
    """JUnit XML files under ``work_dir`` modified at or after ``since`` (a ``time.time()``).

    The search is bounded, skips dependency and VCS folders and never follows symlinks.
    """
    found = []
    seen = 0
    for directory, dirnames, filenames in os.walk(work_dir):
        dirnames[:] = sorted(d for d in dirnames if d not in _NOT_SEARCHED)
        for name in sorted(filenames):
            if not name.lower().endswith(".xml"):
                continue
            path = os.path.join(directory, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_mtime >= since - _CLOCK_SLACK_SECONDS:
                found.append(path)
                if len(found) >= _REPORTS_READ:
                    return found
        seen += len(filenames) + len(dirnames)
        if seen > _SEARCH_LIMIT:
            break
    return found


def read_reports(paths: list[str], root: str | None = None) -> dict | None:
    """One ``tests`` field for every JUnit report among ``paths``; None if none is one.

    ``report_files`` lists the reports read, relative to ``root`` when given.
    """
    cases: list[dict] = []
    read = []
    budget = _TOTAL_SIZE_LIMIT
    for path in paths:
        data = _read_file(path, min(REPORT_SIZE_LIMIT, budget))
        if data is None:
            continue
        budget -= len(data)
        found = parse_junit_xml(data)
        if found is None:
            continue
        cases.extend(found)
        read.append(os.path.relpath(path, root) if root else path)
    if not read:
        return None
    outcomes = [case["outcome"] for case in cases]
    result = report(
        "junit-xml",
        passed=outcomes.count("passed"),
        failed=outcomes.count("failed"),
        errors=outcomes.count("errors"),
        skipped=outcomes.count("skipped"),
        collected=len(cases),
        problem="no tests were collected" if not cases else None,
        failures=[case["failure"] for case in cases if case["failure"] is not None],
    )
    result["report_files"] = read
    return result


def parse_junit_xml(data: bytes) -> list[dict] | None:
    """The test cases of one report: ``{"outcome", "failure"}`` each; None if not a report."""
    if b"<testsuite" not in data[:_ROOT_WITHIN] or _UNSAFE.search(data):
        return None
    try:
        root = ElementTree.fromstring(data)
    except (ElementTree.ParseError, ValueError):
        return None
    if _tag(root) not in ("testsuites", "testsuite"):
        return None
    cases: list[dict] = []
    suites = [root.get("name", "")] if _tag(root) == "testsuite" else []
    try:
        _collect(root, suites, cases)
    except RecursionError:  # suites nested thousands deep: no runner writes that
        return None
    return cases


def complete_report(printed: dict, reports: dict | None) -> dict:
    """The report read from the output, completed from the JUnit reports where it falls short.

    Output that was not recognised gives way to the reports; recognised output
    keeps its framework and takes from the reports only the counts it left
    unknown, the failures it did not name, and the messages it left empty or
    bare (Gradle prints ``at CalcTest.java:16``).
    """
    if reports is None:
        return printed
    if printed["framework"] is None:
        return reports
    completed = dict(printed)
    for key in ("passed", "failed", "errors", "skipped", "collected"):
        if completed[key] is None:
            completed[key] = reports[key]
    if not completed["failures"]:
        completed["failures"] = reports["failures"]
    else:
        messages = {item["name"]: item for item in reports["failures"]}
        failures = []
        for item in completed["failures"]:
            better = messages.get(item["name"])
            if better is not None and lacks_message(item) and better["message"]:
                item = {**item, "message": better["message"]}
                item["error_type"] = item["error_type"] or better["error_type"]
            failures.append(item)
        completed["failures"] = failures
    completed["report_files"] = reports["report_files"]
    return completed


def lacks_message(item: dict) -> bool:
    """Whether a failure read from the output has no message, or only where it failed."""
    return not item["message"] or bool(_LOCATION_ONLY.match(item["message"]))


def _read_file(path: str, limit: int) -> bytes | None:
    """The bytes of the regular file at ``path`` (never through a symlink); None if larger
    than ``limit``."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError:
        return None
    try:
        with os.fdopen(descriptor, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                return None
            data = file.read(limit + 1)
    except OSError:
        return None
    return data if len(data) <= limit else None


def _tag(element: ElementTree.Element) -> str:
    tag = element.tag if isinstance(element.tag, str) else ""
    return tag.rsplit("}", 1)[-1]


def _collect(element: ElementTree.Element, suites: list[str], cases: list[dict]) -> None:
    for child in element:
        tag = _tag(child)
        if tag == "testsuite":
            _collect(child, suites + [child.get("name", "")], cases)
        elif tag == "testcase":
            cases.append(_case(child, suites))


def _case(case: ElementTree.Element, suites: list[str]) -> dict:
    name = _case_name(case.get("name", ""), case.get("classname", ""), suites)
    outcome, problem = "passed", None
    for child in case:
        tag = _tag(child)
        if tag in ("failure", "error"):
            outcome, problem = ("failed" if tag == "failure" else "errors"), child
            break
        if tag == "skipped":
            outcome = "skipped"
    if problem is None:
        return {"outcome": outcome, "failure": None}
    return {"outcome": outcome, "failure": failure(name, *_problem_text(problem))}


def _case_name(name: str, classname: str, suites: list[str]) -> str:
    """The name a person would give the test, from how each runner fills the two attributes."""
    name, classname = name.strip(), classname.strip()
    if not classname or name.startswith(classname) or name.endswith(classname):
        return name  # jest-junit and mocha-junit-reporter put the full title in name
    if _SOURCE_FILE.search(classname):
        return f"{classname} > {name}"  # Vitest: the file
    if "." in classname or (suites and classname == suites[-1]):
        return f"{classname}.{name}"  # Surefire, Gradle, pytest: the class
    inner = [suite for suite in suites if suite]
    return " > ".join(inner + [name])  # node: "test", the suites nest


def _problem_text(element: ElementTree.Element) -> tuple[str | None, str]:
    declared_type = (element.get("type") or "").strip()
    declared_message = (element.get("message") or "").strip()
    text = element.text or ""
    found_type, found_message = error_from_block(text.splitlines())
    if declared_type in _NODE_FAILURE_TYPES:
        cause = _NODE_CAUSE.search(text)
        cause_error = error_line(cause["line"]) if cause else None
        declared_type = cause_error[0] if cause_error else ""
    error_type = declared_type or found_type
    message = declared_message or found_message
    if error_type and message.startswith(error_type + ": "):
        message = message[len(error_type) + 2 :]  # Gradle repeats the class in the message
    return error_type, message
