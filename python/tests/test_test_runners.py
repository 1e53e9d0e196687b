"""Reading the output of node, Jest, Vitest, Mocha, go test, Maven and Gradle.

The fixtures under ``fixtures/test_outputs/`` were captured from the real tools
(``fixtures/test_outputs/README.md`` says which version made each); the same
small project ran in each: one passing, one failing assertion, one test that
throws, one skipped.  Formats that no tool here could produce are written
from the tool's documentation, and say so.
"""

import json
from pathlib import Path

import pytest
from open_codex_lib import tests_go, tests_java, tests_javascript, tests_report, tests_tap
from open_codex_lib.tests_report import parse_test_output

FIXTURES = Path(__file__).parent / "fixtures" / "test_outputs"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def counts(report: dict) -> tuple:
    keys = ("framework", "passed", "failed", "errors", "skipped", "collected", "problem")
    return tuple(report[key] for key in keys)


NODE_FAILURES = [
    {
        "name": "adds wrongly",
        "error_type": "AssertionError",
        "message": "Expected values to be strictly equal:\n\n2 !== 3",
    },
    {"name": "suite > nested fails", "error_type": "TypeError", "message": "bad type"},
]


@pytest.mark.parametrize("name", ["node_tap.txt", "node_spec.txt"])
def test_node_test_runner_both_reporters(name):
    report = parse_test_output(fixture(name), 1)
    assert counts(report) == ("node", 2, 2, 0, 1, 5, None)
    assert report["failures"] == NODE_FAILURES


@pytest.mark.parametrize("name", ["node_tap_syntax_error.txt", "node_spec_syntax_error.txt"])
def test_node_test_file_that_does_not_load_names_the_syntax_error(name):
    report = parse_test_output(fixture(name), 1)
    assert counts(report) == ("node", 0, 1, 0, 0, 1, None)
    assert report["failures"] == [
        {
            "name": "/tmp/fx/node/math.test.js",
            "error_type": "SyntaxError",
            "message": "Unexpected end of input (/tmp/fx/node/math.js:3)",
        }
    ]


JEST_FAILURES = [
    {
        "name": "add › adds wrongly",
        "error_type": "AssertionError",
        "message": "expect(received).toBe(expected) // Object.is equality\n\n"
        "Expected: 3\nReceived: 2",
    },
    {"name": "throws a type error", "error_type": "TypeError", "message": "bad type"},
]


@pytest.mark.parametrize("name", ["jest.txt", "jest_colour.txt"])
def test_jest(name):
    report = parse_test_output(fixture(name), 1)
    assert counts(report) == ("jest", 1, 2, 0, 1, 4, None)
    assert report["failures"] == JEST_FAILURES


def test_jest_suite_that_failed_to_run_gives_the_syntax_error():
    report = parse_test_output(fixture("jest_syntax_error.txt"), 1)
    problem = (
        "no tests ran: ./math.test.js failed to run: "
        "SyntaxError: /tmp/fx/js/jestp/math.js: Unexpected token (3:0)"
    )
    assert counts(report) == ("jest", 0, 0, 1, 0, 0, problem)
    assert report["failures"] == [
        {
            "name": "./math.test.js",
            "error_type": "SyntaxError",
            "message": "/tmp/fx/js/jestp/math.js: Unexpected token (3:0)",
        }
    ]


@pytest.mark.parametrize("name", ["vitest.txt", "vitest_colour.txt"])
def test_vitest(name):
    report = parse_test_output(fixture(name), 1)
    assert counts(report) == ("vitest", 1, 2, 0, 1, 4, None)
    assert report["failures"] == [
        {
            "name": "math.test.js > add > adds wrongly",
            "error_type": "AssertionError",
            "message": "expected 2 to be 3 // Object.is equality\n\n"
            "- Expected\n+ Received\n\n- 3\n+ 2",
        },
        {
            "name": "math.test.js > throws a type error",
            "error_type": "TypeError",
            "message": "bad type",
        },
    ]


def test_vitest_file_that_does_not_load():
    report = parse_test_output(fixture("vitest_syntax_error.txt"), 1)
    assert counts(report)[:6] == ("vitest", 0, 0, 1, 0, 0)
    assert report["problem"].startswith(
        "no tests ran: math.test.js failed to run: Error: Failed to parse source"
    )
    [item] = report["failures"]
    assert (item["name"], item["error_type"]) == ("math.test.js", "Error")
    assert "File: /tmp/fx/js/vitestp/math.js:1:0" in item["message"]


def test_mocha():
    report = parse_test_output(fixture("mocha.txt"), 2)
    assert counts(report) == ("mocha", 1, 2, 0, 1, 4, None)
    assert report["failures"] == [
        {"name": "throws a type error", "error_type": "TypeError", "message": "bad type"},
        {
            "name": "add adds wrongly",
            "error_type": "AssertionError",
            "message": "Expected values to be strictly equal:\n\n2 !== 3\n\n"
            "+ expected - actual\n\n-2\n+3",
        },
    ]


def test_mocha_that_could_not_load_a_test_file():
    report = parse_test_output(fixture("mocha_syntax_error.txt"), 1)
    problem = (
        "mocha could not run: SyntaxError: Unexpected end of input (/tmp/fx/js/mochap/math.js:3)"
    )
    assert counts(report) == ("mocha", 0, 0, 0, 0, 0, problem)


GO_FAILURES = [
    {
        "name": "TestAddWrong",
        "error_type": None,
        "message": "calc_test.go:13: Add(1, 1) = 2, want 3",
    },
    {"name": "TestTable/zero", "error_type": None, "message": "calc_test.go:24: zero plus zero"},
]


def test_go_plain_lists_only_failures():
    report = parse_test_output(fixture("go_plain.txt"), 1)
    assert counts(report) == ("go", None, 2, 0, None, None, None)
    assert report["failures"] == GO_FAILURES


@pytest.mark.parametrize("name", ["go_verbose.txt", "go_json.txt"])
def test_go_verbose_and_json_count_leaf_tests(name):
    report = parse_test_output(fixture(name), 1)
    # TestTable failed only through TestTable/zero: it is not a failure of its own.
    assert counts(report) == ("go", 3, 2, 0, 1, 6, None)
    assert report["failures"] == GO_FAILURES


@pytest.mark.parametrize("name", ["go_panic.txt", "go_json_panic.txt"])
def test_go_panic(name):
    report = parse_test_output(fixture(name), 1)
    assert report["failures"] == [
        {"name": "TestPanics", "error_type": "panic", "message": "assignment to entry in nil map"}
    ]


@pytest.mark.parametrize("name", ["go_build_failed.txt", "go_json_build_failed.txt"])
def test_go_package_that_does_not_build(name):
    report = parse_test_output(fixture(name), 2)
    assert (report["framework"], report["errors"]) == ("go", 1)
    assert report["failures"] == [
        {
            "name": "example.com/calc",
            "error_type": "build failed",
            "message": "./calc.go:4:1: syntax error: unexpected EOF, expecting }",
        }
    ]


def test_go_json_build_events_of_go_1_24():
    # Written from `go help test` / cmd/test2json (go 1.24): compiler errors arrive as
    # build-output events and the package's fail event names the build that failed.
    built = "example.com/calc [example.com/calc.test]"
    events = [
        {"ImportPath": built, "Action": "build-output", "Output": f"# {built}\n"},
        {
            "ImportPath": built,
            "Action": "build-output",
            "Output": "./calc.go:4:1: syntax error: unexpected EOF\n",
        },
        {"ImportPath": built, "Action": "build-fail"},
        {"Action": "start", "Package": "example.com/calc"},
        {
            "Action": "output",
            "Package": "example.com/calc",
            "Output": "FAIL\texample.com/calc [build failed]\n",
        },
        {"Action": "fail", "Package": "example.com/calc", "Elapsed": 0, "FailedBuild": built},
    ]
    output = "\n".join(json.dumps(event) for event in events)
    report = parse_test_output(output, 1)
    problem = (
        "no tests ran: example.com/calc did not build: ./calc.go:4:1: syntax error: unexpected EOF"
    )
    assert counts(report) == ("go", 0, 0, 1, 0, 0, problem)
    assert report["failures"] == [
        {
            "name": "example.com/calc",
            "error_type": "build failed",
            "message": "./calc.go:4:1: syntax error: unexpected EOF",
        }
    ]


MAVEN_FAILURES = [
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
]


@pytest.mark.parametrize("name", ["maven_junit5.txt", "maven_junit5_quiet.txt"])
def test_maven_surefire_junit5(name):
    report = parse_test_output(fixture(name), 1)
    assert counts(report) == ("maven", 1, 1, 1, 1, 4, None)
    assert report["failures"] == MAVEN_FAILURES


def test_maven_surefire_junit4():
    report = parse_test_output(fixture("maven_junit4.txt"), 1)
    assert counts(report) == ("maven", 1, 1, 1, 1, 4, None)
    assert report["failures"][1] == {
        "name": "com.example.CalcTest.addsWrongly",
        "error_type": "java.lang.AssertionError",
        "message": "expected:<3> but was:<2>",
    }


def test_maven_surefire_3_detail_lines():
    # Surefire 3.x (not packaged by Debian 12, so written from its documented output):
    # the detail head is "Class.method -- Time elapsed ..." and results keep "Class.method:line".
    output = (
        "[INFO] Running com.example.CalcTest\n"
        "[ERROR] Tests run: 2, Failures: 1, Errors: 0, Skipped: 0, Time elapsed: 0.05 s "
        "<<< FAILURE! -- in com.example.CalcTest\n"
        "[ERROR] com.example.CalcTest.addsWrongly -- Time elapsed: 0.006 s <<< FAILURE!\n"
        "org.opentest4j.AssertionFailedError: expected: <3> but was: <2>\n"
        "\tat com.example.CalcTest.addsWrongly(CalcTest.java:16)\n\n"
        "[INFO] Results:\n[ERROR] Failures: \n"
        "[ERROR]   CalcTest.addsWrongly:16 expected: <3> but was: <2>\n"
        "[ERROR] Tests run: 2, Failures: 1, Errors: 0, Skipped: 0\n"
    )
    report = parse_test_output(output, 1)
    assert counts(report) == ("maven", 1, 1, 0, 0, 2, None)
    assert report["failures"] == [MAVEN_FAILURES[1]]


def test_maven_results_section_alone():
    output = (
        "[ERROR] Failures: \n[ERROR]   CalcTest.addsWrongly:16 expected: <3> but was: <2>\n"
        "[ERROR] Tests run: 2, Failures: 1, Errors: 0, Skipped: 0\n"
    )
    assert parse_test_output(output, 1)["failures"] == [
        {
            "name": "CalcTest.addsWrongly",
            "error_type": "AssertionError",
            "message": "expected: <3> but was: <2>",
        }
    ]


@pytest.mark.parametrize(
    ("name", "framework", "error"),
    [
        (
            "maven_compile_error.txt",
            "maven",
            "/tmp/fx/mvnp/src/main/java/com/example/Calc.java:[5,21] ';' expected",
        ),
        (
            "gradle_compile_error.txt",
            "gradle",
            "/tmp/fx/gradlep/src/main/java/com/example/Calc.java:5: error: ';' expected",
        ),
    ],
)
def test_java_build_that_does_not_compile(name, framework, error):
    report = parse_test_output(fixture(name), 1)
    problem = f"no tests ran: compilation failed: {error}"
    assert counts(report) == (framework, None, None, None, None, 0, problem)


def test_gradle():
    report = parse_test_output(fixture("gradle.txt"), 1)
    assert counts(report) == ("gradle", 1, 2, 0, 1, 4, None)
    # Gradle's default (short) exception format has the class and the place, not the message:
    # run_tests takes the message from the XML report (test_run_tests).
    assert report["failures"] == [
        {
            "name": "com.example.CalcTest.throwsTypeError",
            "error_type": "java.lang.IllegalStateException",
            "message": "at CalcTest.java:26",
        },
        {
            "name": "com.example.CalcTest.addsWrongly",
            "error_type": "java.lang.AssertionError",
            "message": "at CalcTest.java:16",
        },
    ]


def test_gradle_full_exception_format_and_junit5_names():
    # Gradle 7+ with JUnit 5 and `exceptionFormat = 'full'` (Debian's Gradle is 4.4, so this is
    # written from Gradle's documented console output).
    output = (
        "> Task :test FAILED\n\n"
        "CalcTest > addsWrongly() FAILED\n"
        "    org.opentest4j.AssertionFailedError: expected: <3> but was: <2>\n"
        "        at app//CalcTest.addsWrongly(CalcTest.java:16)\n\n"
        "3 tests completed, 1 failed\n\nFAILURE: Build failed with an exception.\n"
    )
    report = parse_test_output(output, 1)
    assert counts(report) == ("gradle", 2, 1, 0, 0, 3, None)
    assert report["failures"] == [
        {
            "name": "CalcTest.addsWrongly()",
            "error_type": "org.opentest4j.AssertionFailedError",
            "message": "expected: <3> but was: <2>",
        }
    ]


# Each reader, and the outputs only it may recognise.
READERS = {
    "cargo": tests_report.parse_cargo,
    "pytest": lambda lines: tests_report.parse_pytest(lines, 1),
    "unittest": tests_report.parse_unittest,
    "go-json": tests_go.parse_go_json,
    "go": tests_go.parse_go,
    "maven": tests_java.parse_maven,
    "gradle": tests_java.parse_gradle,
    "jest": tests_javascript.parse_jest,
    "vitest": tests_javascript.parse_vitest,
    "mocha": tests_javascript.parse_mocha,
    "node": tests_javascript.parse_node,
    "tape": tests_tap.parse_tap,
}
PYTEST_OUTPUT = (
    "tests/test_calc.py .F                                                    [100%]\n"
    "=================================== FAILURES ===================================\n"
    "FAILED tests/test_calc.py::test_add_wrong - assert 2 == 3\n"
    "1 failed, 1 passed in 0.03s\n"
)
UNITTEST_OUTPUT = "..F\n" + "-" * 70 + "\nRan 3 tests in 0.001s\n\nFAILED (failures=1)\n"
CARGO_OUTPUT = (
    "running 1 test\ntest tests::ok ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; "
    "0 measured; 0 filtered out; finished in 0.00s\n"
)


def reader_of(name: str) -> set:
    if name == "go_json_build_failed.txt":
        return {"go-json", "go"}  # the compiler's plain lines (stderr) are mixed in
    if name.startswith("go_json"):
        return {"go-json"}
    return {name.split("_")[0].split(".")[0]}


@pytest.mark.parametrize("name", sorted(path.name for path in FIXTURES.glob("*.txt")))
def test_no_output_is_taken_for_another_runners(name):
    lines = tests_report.strip_ansi(fixture(name)).splitlines()
    recognised = {reader for reader, parse in READERS.items() if parse(lines)}
    assert recognised == reader_of(name)


@pytest.mark.parametrize(
    ("output", "reader"),
    [(PYTEST_OUTPUT, "pytest"), (UNITTEST_OUTPUT, "unittest"), (CARGO_OUTPUT, "cargo")],
)
def test_python_and_rust_outputs_are_taken_for_no_new_runner(output, reader):
    lines = output.splitlines()
    assert {name for name, parse in READERS.items() if parse(lines)} == {reader}
    assert parse_test_output(output, 1)["framework"] == reader


@pytest.mark.parametrize("name", sorted(path.name for path in FIXTURES.glob("*.txt")))
def test_windows_line_endings_read_the_same(name):
    text = fixture(name)
    assert parse_test_output(text.replace("\n", "\r\n"), 1) == parse_test_output(text, 1)


@pytest.mark.parametrize("name", sorted(path.name for path in FIXTURES.glob("*.txt")))
def test_cut_or_mangled_output_never_raises(name):
    lines = tests_report.strip_ansi(fixture(name)).splitlines()
    for end in range(len(lines) + 1):
        for variant in (lines[:end], lines[end:], [line[: len(line) // 2] for line in lines]):
            for parse in READERS.values():
                parse(variant)  # may or may not recognise it, but never raises


def test_tapes_values_of_several_lines_are_read_whole():
    # Real tape 5 output (`npm install tape`): a deepEqual's values come as YAML block scalars
    # (`expected: |-` then the value, indented), which were read as "expected |-, actual |-".
    report = parse_test_output(fixture("tape_block_scalars.txt"), 1)
    assert counts(report)[:3] == ("tap", 0, 2)
    deep, equal = report["failures"]
    assert deep["name"] == "parse > should be deeply equivalent"
    assert deep["message"] == (
        "expected { a: 'b', c: [ 1 ] }, actual { a: 'b', c: [ 1, 2, { d: 'long value that is "
        "really quite long indeed' } ] }; at Test.<anonymous> (/tmp/tapetest/t.js:3:5)"
    )
    assert equal["message"].startswith("expected total 13, actual total 12; at Test.<anonymous>")
