"""Reading ``go test`` output: plain (with or without ``-v``) and ``go test -json``.

A test with subtests that failed only because one of them did is not a
failure of its own: ``TestTable/zero`` is reported, ``TestTable`` is not.
Counts are of such leaves.  Plain output without ``-v`` lists only failures,
so its passed and skipped counts are None.  A package that does not compile
is a failure named after the package, with error type ``build failed`` and the
compiler's first errors as the message.
"""

from __future__ import annotations

import json
import re

from .tests_fields import MESSAGE_LIMIT, failure, report

# "--- FAIL: TestName (0.00s)", indented for subtests.
_RESULT = re.compile(r"^(?P<indent>\s*)--- (?P<verdict>FAIL|PASS|SKIP): (?P<name>\S+)(?: \(.*\))?$")
_RUN = re.compile(r"^=== (?:RUN|CONT|PAUSE|NAME)\s+(?P<name>\S+)$")
# The package lines: "ok  \tpkg\t0.01s", "FAIL\tpkg\t0.01s", "FAIL\tpkg [build failed]",
# "?   \tpkg\t[no test files]"; go always puts a tab before the package.
_PACKAGE = re.compile(r"^(?P<verdict>ok|FAIL|\?)\s*\t(?P<package>\S+)(?P<rest>.*)$")
_BUILD_FAILED = re.compile(r"\[(?:build|setup) failed\]")
# "# example.com/calc [example.com/calc.test]" heads the compiler's errors for a package.
_BUILD_HEADER = re.compile(r"^# (?P<package>\S+)")
_PANIC = re.compile(r"^\s*panic: (?P<message>.*?)(?: \[recovered\])?$")
_BUILD_ERRORS_SHOWN = 5


def parse_go_json(lines: list[str]) -> dict | None:
    """``go test -json``: one event per line; other lines (the compiler's errors) read as plain."""
    results: dict[tuple[str, str], str] = {}
    outputs: dict[tuple[str, str], list[str]] = {}
    # go >= 1.24 reports compiler errors as events too, keyed by the import path built.
    build_output: dict[str, list[str]] = {}
    builds: dict[str, list[str]] = {}
    plain: list[str] = []
    events = 0
    for line in lines:
        event = _event(line)
        if event is None:
            plain.append(line)
            continue
        events += 1
        action = event.get("Action")
        package = str(event.get("Package") or event.get("ImportPath") or "")
        test = str(event.get("Test") or "")
        text = event.get("Output")
        if action == "build-output" and isinstance(text, str):
            build_output.setdefault(package, []).append(text.rstrip("\n"))
        elif action == "output" and isinstance(text, str):
            outputs.setdefault((package, test), []).append(text.rstrip("\n"))
            if not test and _BUILD_FAILED.search(text):
                builds.setdefault(package, [])
        elif action in ("pass", "fail", "skip") and test:
            results[(package, test)] = action
        elif action == "fail" and event.get("FailedBuild"):
            built = str(event["FailedBuild"])
            errors = [text for text in build_output.get(built, []) if not text.startswith("# ")]
            builds[built.split(" ")[0]] = [text.strip() for text in errors if text.strip()]
    if not events:
        return None
    failures = []
    counts = {"pass": 0, "fail": 0, "skip": 0}
    parents = _parents(results, "fail")
    for (package, test), action in results.items():
        if (package, test) in parents[action == "fail"]:
            continue
        counts[action] += 1
        if action == "fail":
            error_type, message = _test_message(outputs.get((package, test), []))
            failures.append(failure(test, error_type, message))
    # go < 1.24 prints the compiler's errors as plain text on stderr.
    for package, errors in _build_failures(plain).items():
        if errors or package not in builds:
            builds[package] = errors
    for package, errors in builds.items():
        failures.append(_build_failure(package, errors))
    ran = sum(counts.values())
    return report(
        "go",
        passed=counts["pass"],
        failed=counts["fail"],
        errors=len(builds),
        skipped=counts["skip"],
        collected=ran,
        problem=_problem(builds, ran),
        failures=failures,
    )


def _event(line: str) -> dict | None:
    text = line.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    try:
        event = json.loads(text)
    except ValueError:
        return None
    return event if isinstance(event, dict) and isinstance(event.get("Action"), str) else None


def _parents(verdicts: dict[tuple[str, str], str], failed: str) -> tuple[set, set]:
    """The ``(package, test)`` that have subtests, and those that have a failed subtest.

    A passed or skipped parent is counted through its subtests, and a failed
    one is not a failure of its own when a subtest failed.
    """
    with_subtests: set = set()
    with_failed: set = set()
    for (package, test), verdict in verdicts.items():
        parts = test.split("/")
        for end in range(1, len(parts)):
            parent = (package, "/".join(parts[:end]))
            with_subtests.add(parent)
            if verdict == failed:
                with_failed.add(parent)
    return with_subtests, with_failed


def _test_message(output: list[str]) -> tuple[str | None, str]:
    """What a failing test printed (``file_test.go:12: message``), or its panic."""
    lines = []
    for line in output:
        panic = _PANIC.match(line)
        if panic:
            return "panic", panic["message"]
        if _RUN.match(line.strip()) or _RESULT.match(line):
            continue
        if line.strip():
            lines.append(line.strip())
    return None, "\n".join(lines)[:MESSAGE_LIMIT]


def parse_go(lines: list[str]) -> dict | None:
    """Plain ``go test`` output (``-v`` or not)."""
    if not any(_RESULT.match(line) or _PACKAGE.match(line) for line in lines):
        return None
    verbose = any(_RUN.match(line.strip()) for line in lines)
    verdicts: dict[str, str] = {}
    messages: dict[str, list[str]] = {}
    panics: dict[str, str] = {}
    current = None  # the test whose log lines follow
    for line in lines:
        run = _RUN.match(line.strip())
        result = _RESULT.match(line)
        if run:
            current = run["name"]
            continue
        if result:
            name = result["name"]
            verdicts[name] = result["verdict"]
            current = name if result["verdict"] == "FAIL" else None
            continue
        if _PACKAGE.match(line) or line.strip() in ("FAIL", "PASS"):
            current = None
            continue
        panic = _PANIC.match(line)
        if panic and current is not None:
            panics.setdefault(current, panic["message"])
            continue
        if current is not None and line.startswith((" ", "\t")) and line.strip():
            messages.setdefault(current, []).append(line.strip())
    failures = []
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    parents = _parents({("", name): verdict for name, verdict in verdicts.items()}, "FAIL")
    for name, verdict in verdicts.items():
        if ("", name) in parents[verdict == "FAIL"]:
            continue
        counts[verdict] += 1
        if verdict == "FAIL":
            if name in panics:
                failures.append(failure(name, "panic", panics[name]))
            else:
                failures.append(failure(name, None, "\n".join(messages.get(name, []))))
    builds = _build_failures(lines)
    for package, errors in builds.items():
        failures.append(_build_failure(package, errors))
    ran = sum(counts.values())
    return report(
        "go",
        passed=counts["PASS"] if verbose else None,
        failed=counts["FAIL"],
        errors=len(builds),
        skipped=counts["SKIP"] if verbose else None,
        collected=ran if verbose else None,
        problem=_problem(builds, ran) if not any(_ok(line) for line in lines) else None,
        failures=failures,
    )


def _ok(line: str) -> bool:
    match = _PACKAGE.match(line)
    return bool(match and match["verdict"] == "ok")


def _build_failures(lines: list[str]) -> dict[str, list[str]]:
    """``{package: compiler error lines}`` for each package that did not build."""
    errors: dict[str, list[str]] = {}
    failed = []
    header = None
    for line in lines:
        package = _PACKAGE.match(line)
        if package:
            header = None
            if package["verdict"] == "FAIL" and _BUILD_FAILED.search(package["rest"]):
                failed.append(package["package"])
            continue
        match = _BUILD_HEADER.match(line)
        if match:
            header = match["package"]
            continue
        if header is not None and line.strip():
            errors.setdefault(header, []).append(line.strip())
    return {package: errors.get(package, []) for package in failed}


def _build_failure(package: str, errors: list[str]) -> dict:
    return failure(package, "build failed", "\n".join(errors[:_BUILD_ERRORS_SHOWN]))


def _problem(builds: dict[str, list[str]], ran: int) -> str | None:
    """Why no test ran, when a package did not compile and no test result was seen."""
    if not builds or ran:
        return None
    package, errors = next(iter(builds.items()))
    first = f": {errors[0]}" if errors else ""
    return f"no tests ran: {package} did not build{first}"
