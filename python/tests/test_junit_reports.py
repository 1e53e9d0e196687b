"""JUnit XML reports: reading them, refusing unsafe ones, and run_tests using the fresh ones.

The XML fixtures were written by the real tools (see fixtures/test_outputs/README.md).
"""

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from open_codex_lib import execute_operation, tests_junit_xml
from open_codex_lib.tests_junit_xml import fresh_reports, parse_junit_xml, read_reports

FIXTURES = Path(__file__).parent / "fixtures" / "test_outputs"


def read_fixture(name: str) -> dict:
    return read_reports([str(FIXTURES / name)], str(FIXTURES))


def summary(report: dict) -> tuple:
    keys = ("framework", "passed", "failed", "errors", "skipped", "collected", "problem")
    return tuple(report[key] for key in keys)


JAVA_FAILURES = {
    "surefire_TEST-com.example.CalcTest.xml": [
        {
            "name": "com.example.CalcTest.throwsTypeError",
            "error_type": "java.lang.IllegalStateException",
            "message": "bad state",
        },
        {
            "name": "com.example.CalcTest.addsWrongly",
            "error_type": "org.opentest4j.AssertionFailedError",
            "message": "expected: <3> but was: <2>",
        },
    ],
    "gradle_TEST-com.example.CalcTest.xml": [
        {
            "name": "com.example.CalcTest.throwsTypeError",
            "error_type": "java.lang.IllegalStateException",
            "message": "bad state",
        },
        {
            "name": "com.example.CalcTest.addsWrongly",
            "error_type": "java.lang.AssertionError",
            "message": "expected:<3> but was:<2>",
        },
    ],
}


@pytest.mark.parametrize("name", sorted(JAVA_FAILURES))
def test_surefire_and_gradle_reports(name):
    report = read_fixture(name)
    errors = 1 if name.startswith("surefire") else 0  # surefire tells an error from a failure
    assert summary(report) == ("junit-xml", 1, 2 - errors, errors, 1, 4, None)
    assert report["failures"] == JAVA_FAILURES[name]
    assert report["report_files"] == [name]


def test_node_junit_reporter():
    report = read_fixture("node_junit.xml")
    assert summary(report) == ("junit-xml", 2, 2, 0, 1, 5, None)
    assert report["failures"] == [
        # node's reporter joins the message's lines; the class comes from the error's cause.
        {
            "name": "adds wrongly",
            "error_type": "AssertionError",
            "message": "Expected values to be strictly equal:2 !== 3",
        },
        {"name": "suite > nested fails", "error_type": "TypeError", "message": "bad type"},
    ]


@pytest.mark.parametrize(
    ("name", "wrong_name", "wrong_message"),
    [
        (
            "jest_junit.xml",
            "add adds wrongly",
            "expect(received).toBe(expected) // Object.is equality\n\nExpected: 3\nReceived: 2",
        ),
        (
            "vitest_junit.xml",
            "math.test.js > add > adds wrongly",
            "expected 2 to be 3 // Object.is equality",
        ),
        (
            "mocha_junit.xml",
            "add adds wrongly",
            "Expected values to be strictly equal:  2 !== 3",
        ),
    ],
)
def test_javascript_runner_reports(name, wrong_name, wrong_message):
    report = read_fixture(name)
    assert report["framework"] == "junit-xml"
    assert (report["passed"], report["failed"], report["errors"]) == (1, 2, 0)
    wrong = next(item for item in report["failures"] if item["name"] == wrong_name)
    assert wrong == {
        "name": wrong_name,
        "error_type": "AssertionError",
        "message": wrong_message,
    }
    thrown = next(item for item in report["failures"] if item["name"] != wrong_name)
    assert (thrown["error_type"], thrown["message"]) == ("TypeError", "bad type")


def test_reports_add_up():
    names = ["surefire_TEST-com.example.CalcTest.xml", "node_junit.xml"]
    report = read_reports([str(FIXTURES / name) for name in names], str(FIXTURES))
    assert summary(report) == ("junit-xml", 3, 3, 1, 2, 9, None)
    assert report["report_files"] == names


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<testsuite name="x"><testcase name="&lol3;"/></testsuite>
"""


def test_unsafe_and_foreign_xml_is_not_read(tmp_path):
    assert parse_junit_xml(BILLION_LAUGHS) is None
    assert parse_junit_xml(BILLION_LAUGHS.replace(b"DOCTYPE", b"doctype")) is None
    assert parse_junit_xml(b"<project><testsuite/></project>") is None  # not a report's root
    assert parse_junit_xml(b"<testsuite><testcase") is None  # cut short
    assert parse_junit_xml(b"\xff\xfe<testsuite") is None
    (tmp_path / "pom.xml").write_text("<project/>")
    assert read_reports([str(tmp_path / "pom.xml"), str(tmp_path / "missing.xml")]) is None


def test_deeply_nested_suites_are_refused():
    depth = 5000
    data = b"<testsuites>" + b"<testsuite>" * depth + b"</testsuite>" * depth + b"</testsuites>"
    assert parse_junit_xml(data) is None


def test_a_report_over_the_size_limit_is_skipped(tmp_path, monkeypatch):
    report = tmp_path / "TEST-big.xml"
    shutil.copy(FIXTURES / "surefire_TEST-com.example.CalcTest.xml", report)
    monkeypatch.setattr(tests_junit_xml, "REPORT_SIZE_LIMIT", report.stat().st_size - 1)
    assert read_reports([str(report)]) is None
    monkeypatch.setattr(tests_junit_xml, "REPORT_SIZE_LIMIT", report.stat().st_size)
    assert read_reports([str(report)])["collected"] == 4


def test_fresh_reports_are_found_in_build_folders_only_when_new(tmp_path):
    since = time.time()
    for rel in (
        "target/surefire-reports/TEST-a.xml",
        "build/test-results/test/TEST-b.xml",
        "node_modules/pkg/junit.xml",
        "old.xml",
        "notes.txt",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("<testsuite/>")
    os.utime(tmp_path / "old.xml", (since - 3600, since - 3600))
    os.symlink(tmp_path / "target/surefire-reports/TEST-a.xml", tmp_path / "link.xml")
    found = [os.path.relpath(path, tmp_path) for path in fresh_reports(str(tmp_path), since)]
    assert sorted(found) == [
        "build/test-results/test/TEST-b.xml",
        "target/surefire-reports/TEST-a.xml",
    ]


def run(make_step, command: str, work: dict, before=None) -> dict:
    files = make_step("run_tests", {"command": command}, work=work)
    if before is not None:
        before(files.work_dir)
    result = execute_operation(files.path, {})
    json.dumps(result)
    return result


SUREFIRE = (FIXTURES / "surefire_TEST-com.example.CalcTest.xml").read_text(encoding="utf-8")
GRADLE_XML = (FIXTURES / "gradle_TEST-com.example.CalcTest.xml").read_text(encoding="utf-8")
GRADLE_OUTPUT = (FIXTURES / "gradle.txt").read_text(encoding="utf-8")


def test_run_tests_reads_the_report_an_unrecognised_run_wrote(make_step):
    command = (
        "mkdir -p target/surefire-reports && "
        "cp report.txt target/surefire-reports/TEST-com.example.CalcTest.xml && "
        "echo 'some runner we do not know' && exit 1"
    )
    result = run(make_step, command, {"report.txt": SUREFIRE})
    tests = result["tests"]
    assert summary(tests) == ("junit-xml", 1, 1, 1, 1, 4, None)
    assert tests["failures"] == JAVA_FAILURES["surefire_TEST-com.example.CalcTest.xml"]
    assert tests["report_files"] == ["target/surefire-reports/TEST-com.example.CalcTest.xml"]
    assert (
        result["message"] == "tests failed: 1 passed, 1 failed, 1 errors, 1 skipped (exit code 1)"
    )


def test_run_tests_ignores_a_report_older_than_the_run(make_step):
    report = "target/surefire-reports/TEST-com.example.CalcTest.xml"

    def age(work_dir):
        old = time.time() - 3600
        os.utime(work_dir / report, (old, old))

    result = run(make_step, "echo done", {report: SUREFIRE}, before=age)
    assert result["tests"]["framework"] is None
    assert "report_files" not in result["tests"]
    assert result["message"] == (
        "test command exited with code 0 (its output was not recognised as any known test "
        "runner's, and it wrote no JUnit XML report)"
    )


def test_run_tests_takes_gradle_messages_from_its_report(make_step):
    # Gradle prints "java.lang.AssertionError at CalcTest.java:16"; the report has the message.
    command = (
        "mkdir -p build/test-results/test && "
        "cp report.txt build/test-results/test/TEST-com.example.CalcTest.xml && "
        "cat gradle.out && exit 1"
    )
    result = run(make_step, command, {"report.txt": GRADLE_XML, "gradle.out": GRADLE_OUTPUT})
    tests = result["tests"]
    assert summary(tests) == ("gradle", 1, 2, 0, 1, 4, None)
    assert tests["failures"] == JAVA_FAILURES["gradle_TEST-com.example.CalcTest.xml"]
    assert tests["report_files"] == ["build/test-results/test/TEST-com.example.CalcTest.xml"]


def test_run_tests_keeps_recognised_failures_when_a_report_exists(make_step):
    output = "--- FAIL: TestX (0.00s)\n    x_test.go:3: boom\nFAIL\nFAIL\tex.com/x\t0.01s\n"
    command = "cp report.txt TEST-x.xml && cat go.out && exit 1"
    result = run(make_step, command, {"report.txt": SUREFIRE, "go.out": output})
    tests = result["tests"]
    # The go output named its failure but not the passed count: the count comes from the report,
    # the failures stay go's.
    assert (tests["framework"], tests["passed"], tests["failed"]) == ("go", 1, 1)
    assert tests["failures"] == [
        {"name": "TestX", "error_type": None, "message": "x_test.go:3: boom"}
    ]
