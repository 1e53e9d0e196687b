"""run_tests: default command choice, real pytest runs, and parsing pytest / cargo output."""

import json
import shutil

import pytest
from open_codex_lib import execute_operation
from open_codex_lib.commands import default_test_command
from open_codex_lib.tests_report import parse_test_output

PROJECT = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "tests/test_calc.py": (
        "from calc import add\n\n"
        "def test_add():\n    assert add(1, 2) == 3\n\n"
        "def test_add_wrong():\n    assert add(1, 1) == 3\n"
    ),
    "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n",
}


def test_real_pytest_run_with_one_failure(make_step):
    files = make_step("run_tests", {}, work=PROJECT)
    result = execute_operation(files.path, {})
    json.dumps(result)
    assert result["status"] == "failure"
    assert result["command"] == "python3 -m pytest -q"
    assert result["exit_code"] == 1
    tests = result["tests"]
    assert tests["framework"] == "pytest"
    assert (tests["passed"], tests["failed"], tests["errors"], tests["skipped"]) == (
        1,
        1,
        0,
        0,
    )
    assert tests["failures"] == [
        {
            "name": "tests/test_calc.py::test_add_wrong",
            "error_type": "AssertionError",
            # pytest's E lines, whole, and where it failed (issue 40: the FAILED line is cut).
            "message": "assert 2 == 3\n+  where 2 = add(1, 1)\n(at tests/test_calc.py:7)",
        }
    ]
    assert result["message"] == (
        "tests failed: 1 passed, 1 failed, 0 errors, 0 skipped (exit code 1)"
    )


def test_real_pytest_run_with_colours_is_parsed(make_step):
    coloured = {**PROJECT, "pytest.ini": PROJECT["pytest.ini"].rstrip() + " --color=yes\n"}
    files = make_step("run_tests", {}, work=coloured)
    result = execute_operation(files.path, {})
    assert "\x1b[" in result["stdout"]  # pytest did colour its output
    assert result["status"] == "failure"
    tests = result["tests"]
    assert tests["framework"] == "pytest"
    assert (tests["passed"], tests["failed"], tests["errors"], tests["skipped"]) == (1, 1, 0, 0)
    assert tests["failures"] == [
        {
            "name": "tests/test_calc.py::test_add_wrong",
            "error_type": "AssertionError",
            # pytest's E lines, whole, and where it failed (issue 40: the FAILED line is cut).
            "message": "assert 2 == 3\n+  where 2 = add(1, 1)\n(at tests/test_calc.py:7)",
        }
    ]
    assert result["message"] == (
        "tests failed: 1 passed, 1 failed, 0 errors, 0 skipped (exit code 1)"
    )


def test_parse_coloured_cargo_output():
    report = parse_test_output(
        "test tests::bad ... \x1b[31mFAILED\x1b[0m\n"
        "test result: \x1b[31mFAILED\x1b[0m. 1 passed; 1 failed; 0 ignored; 0 measured; "
        "0 filtered out; finished in 0.00s\n"
    )
    assert (report["framework"], report["passed"], report["failed"]) == ("cargo", 1, 1)
    assert [failure["name"] for failure in report["failures"]] == ["tests::bad"]


def test_real_pytest_run_passing_with_explicit_command(make_step):
    files = make_step("run_tests", {"command": "python3 -m pytest -q -k 'not wrong'"}, work=PROJECT)
    result = execute_operation(files.path, {})
    assert result["status"] == "success"
    assert result["tests"]["passed"] == 1
    assert result["tests"]["failed"] == 0
    assert result["tests"]["failures"] == []
    assert result["message"].startswith("tests passed: 1 passed, 0 failed")


def run_pytest(make_step, command, work=PROJECT):
    result = execute_operation(make_step("run_tests", {"command": command}, work=work).path, {})
    json.dumps(result)
    return result


def test_real_pytest_run_of_a_missing_test_file_says_no_tests_were_collected(make_step):
    result = run_pytest(make_step, "python3 -m pytest -q tests/test_x.py")
    assert result["status"] == "failure" and result["exit_code"] == 4
    tests = result["tests"]
    assert tests["framework"] == "pytest" and tests["collected"] == 0
    assert tests["problem"] == (
        "no tests were collected: file or directory not found: tests/test_x.py"
    )
    assert result["message"] == (
        "no tests were collected: file or directory not found: tests/test_x.py (exit code 4)"
    )


def test_real_pytest_run_of_a_missing_test_name_says_which(make_step):
    result = run_pytest(make_step, "python3 -m pytest -q tests/test_calc.py::test_zzz")
    assert result["exit_code"] == 4
    problem = result["tests"]["problem"]
    assert problem.startswith("no tests were collected: not found: ")
    assert "tests/test_calc.py::test_zzz (no match in any of [<Module test_calc.py>])" in problem
    assert result["message"] == problem + " (exit code 4)"


def test_real_pytest_run_finding_no_tests_says_so(make_step):
    work = {**PROJECT, "empty/README.md": "nothing to test\n"}
    result = run_pytest(make_step, "python3 -m pytest -q empty", work)
    assert result["status"] == "failure" and result["exit_code"] == 5
    assert (result["tests"]["collected"], result["tests"]["problem"]) == (
        0,
        "no tests were collected",
    )
    assert result["message"] == "no tests were collected (exit code 5)"


def test_real_pytest_run_deselecting_every_test_says_so(make_step):
    result = run_pytest(make_step, "python3 -m pytest -q -k nothing_matches")
    assert result["exit_code"] == 5
    assert result["tests"]["collected"] == 2
    assert result["tests"]["problem"] == (
        "no tests were selected: all 2 collected tests were deselected (by -k, -m or a node id)"
    )


def test_real_pytest_usage_error_is_reported_as_such(make_step):
    result = run_pytest(make_step, "python3 -m pytest -q --no-such-option")
    assert result["exit_code"] == 4
    assert result["tests"]["framework"] == "pytest"
    assert result["tests"]["problem"] == (
        "pytest could not run: unrecognized arguments: --no-such-option"
    )
    assert result["message"] == result["tests"]["problem"] + " (exit code 4)"


def test_ordinary_runs_have_no_problem(make_step):
    result = run_pytest(make_step, "python3 -m pytest -q")
    assert result["tests"]["problem"] is None
    assert result["tests"]["collected"] is None  # pytest -q does not print it
    verbose = run_pytest(make_step, "python3 -m pytest")
    assert (verbose["tests"]["collected"], verbose["tests"]["problem"]) == (2, None)


def test_unrecognised_output(make_step):
    files = make_step("run_tests", {"command": "echo all good"}, work={})
    result = execute_operation(files.path, {})
    assert result["status"] == "success"
    assert result["tests"] == {
        "framework": None,
        "passed": None,
        "failed": None,
        "errors": None,
        "skipped": None,
        "collected": None,
        "problem": None,
        "failures": [],
    }
    assert "not recognised" in result["message"]


def test_no_test_command_found(make_step):
    result = execute_operation(make_step("run_tests", {}, work={"README.md": "x"}).path, {})
    assert result["status"] == "failure"
    assert result["message"].startswith("no test command found: give params.command")


def test_run_tests_timeout(make_step):
    files = make_step("run_tests", {"command": "sleep 10", "timeout_seconds": 0.3}, work={})
    result = execute_operation(files.path, {})
    assert result["status"] == "failure"
    assert result["timed_out"] is True
    assert result["message"] == (
        "test command timed out after 0.3 s and was killed with its process group"
    )


def test_default_command_detection(tmp_path):
    cases = {
        "pyfile": ({"pkg/foo_test.py": ""}, "pytest"),
        "pyproject": ({"pyproject.toml": "[tool.pytest.ini_options]\n"}, "pytest"),
        "setupcfg": ({"setup.cfg": "[tool:pytest]\n"}, "pytest"),
        "cargo": (
            {"Cargo.toml": "[package]\n", "pyproject.toml": "[project]\n"},
            "cargo",
        ),
        "hidden": ({"node_modules/x/test_a.py": "", "Cargo.toml": ""}, "cargo"),
    }
    for name, (tree, framework) in cases.items():
        root = tmp_path / name
        for rel, content in tree.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(content)
        command, found = default_test_command(str(root))
        assert found == framework, name
        assert command == {"pytest": "python3 -m pytest -q", "cargo": "cargo test"}[framework]


PYTEST_VERBOSE = """\
============================= test session starts ==============================
collected 5 items

test_a.py .FFEs                                                          [100%]

=========================== short test summary info ============================
FAILED test_a.py::test_bad - assert 1 == 2
FAILED test_a.py::test_val[a b] - ValueError: boom value
ERROR test_a.py::test_err - RuntimeError: fixture broke
ERROR tests/test_broken.py
==== 2 failed, 1 passed, 1 skipped, 3 warnings, 2 errors in 0.02s (0:00:00) ====
"""


def test_parse_pytest_summary_and_failures():
    report = parse_test_output(PYTEST_VERBOSE)
    assert report["framework"] == "pytest"
    assert (
        report["passed"],
        report["failed"],
        report["errors"],
        report["skipped"],
    ) == (1, 2, 2, 1)
    assert report["failures"] == [
        {
            "name": "test_a.py::test_bad",
            "error_type": "AssertionError",
            "message": "assert 1 == 2",
        },
        {
            "name": "test_a.py::test_val[a b]",
            "error_type": "ValueError",
            "message": "boom value",
        },
        {
            "name": "test_a.py::test_err",
            "error_type": "RuntimeError",
            "message": "fixture broke",
        },
        {"name": "tests/test_broken.py", "error_type": None, "message": ""},
    ]


def test_parse_pytest_no_tests():
    report = parse_test_output("\nno tests ran in 0.01s\n")
    assert report["framework"] == "pytest"
    assert report["passed"] == 0 and report["failures"] == []


CARGO_OUTPUT = """\
   Compiling ct v0.1.0 (/tmp/ct)
     Running unittests src/lib.rs (target/debug/deps/ct-c4066ebb79ee0019)

running 4 tests
test tests::boom ... FAILED
test tests::bad ... FAILED
test tests::ign ... ignored
test tests::ok ... ok

failures:

---- tests::boom stdout ----

thread 'tests::boom' (4162) panicked at src/lib.rs:9:25:
kaboom here
stack backtrace:
   0: __rustc::rust_begin_unwind
note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.

---- tests::bad stdout ----
thread 'tests::bad' panicked at src/lib.rs:8:24:
assertion `left == right` failed
  left: 1
 right: 2
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    tests::bad
    tests::boom

test result: FAILED. 1 passed; 2 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.15s

     Running tests/it.rs (target/debug/deps/it-1234)

running 3 tests
test old_style ... FAILED
test a ... ok
test b ... ok

failures:

---- old_style stdout ----
thread 'old_style' panicked at 'called `Option::unwrap()` on a `None` value', tests/it.rs:3:5

failures:
    old_style

test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

   Doc-tests ct

running 1 test
test src/lib.rs - f (line 1) ... ok

test result: ok. 1 passed; 0 failed; 2 ignored; 0 measured; 0 filtered out; finished in 0.01s

error: test failed, to rerun pass `--lib`
"""


def test_parse_cargo_output():
    report = parse_test_output(CARGO_OUTPUT)
    assert report["framework"] == "cargo"
    assert (
        report["passed"],
        report["failed"],
        report["errors"],
        report["skipped"],
    ) == (4, 3, 0, 3)
    assert report["failures"] == [
        {"name": "tests::boom", "error_type": "panic", "message": "kaboom here"},
        {
            "name": "tests::bad",
            "error_type": "panic",
            "message": "assertion `left == right` failed\n  left: 1\n right: 2",
        },
        {
            "name": "old_style",
            "error_type": "panic",
            "message": "called `Option::unwrap()` on a `None` value",
        },
    ]


def test_parse_cargo_output_counts_the_collected_tests():
    assert parse_test_output(CARGO_OUTPUT)["collected"] == 8  # 4 + 3 + 1 running
    assert parse_test_output(CARGO_OUTPUT)["problem"] is None


def test_parse_unittest_that_ran_no_test():
    tests = parse_test_output("\n" + "-" * 70 + "\nRan 0 tests in 0.000s\n\nNO TESTS RAN\n", 5)
    assert tests["framework"] == "unittest"
    assert (tests["collected"], tests["problem"]) == (0, "no tests were collected")


def test_parse_cargo_all_ok():
    report = parse_test_output(
        "running 5 tests\n.....\ntest result: ok. 5 passed; 0 failed; 1 ignored; 0 measured; "
        "0 filtered out; finished in 0.00s\n"
    )
    assert (
        report["framework"],
        report["passed"],
        report["failed"],
        report["skipped"],
    ) == ("cargo", 5, 0, 1)
    assert report["failures"] == []


UNITTEST_PROJECT = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "tests/__init__.py": "",
    "tests/test_calc.py": (
        "import unittest\n\nfrom calc import add\n\n\n"
        "class AddTest(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n\n"
        "    def test_add_wrong(self):\n        self.assertEqual(add(1, 1), 3)\n\n"
        "    def test_broken(self):\n        raise ValueError('boom')\n\n"
        "    @unittest.skip('later')\n    def test_later(self):\n        pass\n"
    ),
}


def test_real_unittest_run_is_counted(make_step):
    files = make_step(
        "run_tests",
        {"command": "python3 -m unittest discover -s tests -t ."},
        work=UNITTEST_PROJECT,
    )
    result = execute_operation(files.path, {})
    assert result["status"] == "failure"
    tests = result["tests"]
    assert tests["framework"] == "unittest"
    assert (tests["passed"], tests["failed"], tests["errors"], tests["skipped"]) == (
        1,
        1,
        1,
        1,
    )
    assert sorted(tests["failures"], key=lambda f: f["name"]) == [
        {
            "name": "tests.test_calc.AddTest.test_add_wrong",
            "error_type": "AssertionError",
            "message": "2 != 3",
        },
        {
            "name": "tests.test_calc.AddTest.test_broken",
            "error_type": "ValueError",
            "message": "boom",
        },
    ]


def test_parse_unittest_all_ok():
    tests = parse_test_output(
        "...\n----------------------------------------------------------------------\nRan 3 tests in 0.001s\n\nOK\n"
    )
    assert tests == {
        "framework": "unittest",
        "passed": 3,
        "failed": 0,
        "errors": 0,
        "skipped": 0,
        "collected": 3,
        "problem": None,
        "failures": [],
    }


def test_default_command_for_javascript_go_and_java(tmp_path):
    npm_test = json.dumps({"scripts": {"test": "node --test"}})
    placeholder = json.dumps({"scripts": {"test": 'echo "Error: no test specified" && exit 1'}})
    cases = {
        "npm": ({"package.json": npm_test}, "npm test"),
        "go": ({"go.mod": "module example.com/x\n"}, "go test ./..."),
        "maven": ({"pom.xml": "<project/>"}, "mvn -B -q test"),
        "gradle": ({"build.gradle": ""}, "gradle test"),
        "gradlew": ({"build.gradle.kts": "", "gradlew": "#!/bin/sh\n"}, "./gradlew test"),
        # npm's own placeholder script is no test command: go.mod decides.
        "placeholder": ({"package.json": placeholder, "go.mod": ""}, "go test ./..."),
        "broken json": ({"package.json": "{", "pom.xml": ""}, "mvn -B -q test"),
        # One order with what the planner is told (issue 25): a test script the project
        # declares comes before test files found, and build files in testing_commands' order.
        "declared first": ({"package.json": npm_test, "test_x.py": ""}, "npm test"),
        "go before cargo": ({"go.mod": "", "Cargo.toml": ""}, "go test ./..."),
    }
    for name, (tree, expected) in cases.items():
        root = tmp_path / name.replace(" ", "_")
        for rel, content in tree.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(content)
        assert default_test_command(str(root))[0] == expected, name


NODE_PROJECT = {
    "package.json": json.dumps(
        {"name": "calc", "version": "1.0.0", "scripts": {"test": "node --test"}}
    ),
    "math.js": "exports.add = (a, b) => a + b;\n",
    "math.test.js": (
        "const test = require('node:test');\n"
        "const assert = require('node:assert');\n"
        "const { add } = require('./math.js');\n\n"
        "test('adds', () => { assert.strictEqual(add(1, 2), 3); });\n"
        "test('adds wrongly', () => { assert.strictEqual(add(1, 1), 3); });\n"
    ),
}


@pytest.mark.skipif(shutil.which("npm") is None, reason="node and npm are not installed")
def test_real_npm_test_of_a_node_test_suite_names_the_failing_test(make_step):
    result = execute_operation(make_step("run_tests", {}, work=NODE_PROJECT).path, {})
    assert result["command"] == "npm test"
    assert result["status"] == "failure"
    tests = result["tests"]
    assert (tests["framework"], tests["passed"], tests["failed"]) == ("node", 1, 1)
    assert tests["failures"] == [
        {
            "name": "adds wrongly",
            "error_type": "AssertionError",
            "message": "Expected values to be strictly equal:\n\n2 !== 3",
        }
    ]
    assert result["message"] == (
        "tests failed: 1 passed, 1 failed, 0 errors, 0 skipped (exit code 1)"
    )


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_real_node_junit_report_is_read_when_the_output_says_nothing(make_step):
    command = (
        "mkdir -p reports && "
        "node --test --test-reporter=junit --test-reporter-destination=reports/junit.xml"
    )
    files = make_step("run_tests", {"command": command}, work=NODE_PROJECT)
    result = execute_operation(files.path, {})
    assert result["stdout"].strip() == ""
    tests = result["tests"]
    assert (tests["framework"], tests["passed"], tests["failed"]) == ("junit-xml", 1, 1)
    assert tests["report_files"] == ["reports/junit.xml"]
    assert [item["name"] for item in tests["failures"]] == ["adds wrongly"]
    assert tests["failures"][0]["error_type"] == "AssertionError"


def test_a_failing_command_that_is_no_test_runner_says_its_last_words(make_step):
    """A reproduction's check (`python3 -c` with an assert) fails with a traceback: the message
    gives its last line, the cause a recovery needs (a real 0.5B's recovery read "wrote no
    JUnit XML report" as the problem)."""
    command = (
        "python3 -c \"print('checking'); raise NameError(\\\"name 'python' is not defined\\\")\""
    )
    result = execute_operation(make_step("run_tests", {"command": command}).path, {})
    assert result["status"] == "failure"
    assert result["message"] == (
        "test command exited with code 1: NameError: name 'python' is not defined"
    ), result["message"]
