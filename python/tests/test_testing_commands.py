"""How a repository runs its tests: one guess, shared by the planner's prompt (through the
bridge) and ``run_tests`` without a command (issue 25: they used to disagree)."""

import json

import pytest
from open_codex_lib import find_test_commands
from open_codex_lib.commands import default_test_command

NPM_TEST = json.dumps({"scripts": {"test": "tape test/*.js"}})
PLACEHOLDER = json.dumps({"scripts": {"test": 'echo "Error: no test specified" && exit 1'}})

LAYOUTS = {
    # package.json + pytest.ini: the planner was told `npm test`, run_tests ran pytest.
    "npm and pytest": (
        {"package.json": NPM_TEST, "pytest.ini": "[pytest]\n"},
        ["npm test", "python3 -m pytest -q"],
    ),
    "pnpm": ({"package.json": NPM_TEST, "pnpm-lock.yaml": ""}, ["pnpm test"]),
    "yarn": ({"package.json": NPM_TEST, "yarn.lock": ""}, ["yarn test"]),
    "npm placeholder": ({"package.json": PLACEHOLDER, "go.mod": "module x\n"}, ["go test ./..."]),
    "maven wrapper": ({"pom.xml": "<project/>", "mvnw": "#!/bin/sh\n"}, ["./mvnw -B -q test"]),
    "gradle": ({"build.gradle.kts": ""}, ["gradle test"]),
    "cargo and pytest": (
        {"Cargo.toml": "[package]\n", "pyproject.toml": "[tool.pytest.ini_options]\n"},
        ["cargo test", "python3 -m pytest -q"],
    ),
    "pyproject without pytest": ({"pyproject.toml": "[project]\nname = 'x'\n"}, []),
    "tox": ({"tox.ini": "[testenv]\ncommands = pytest\n"}, ["python3 -m pytest -q"]),
    "makefile": ({"Makefile": "test:\n\t./run-tests\n"}, ["make test"]),
    "makefile and test files": (
        {"Makefile": "test:\n\t./run\n", "tests/test_a.py": ""},
        ["make test", "python3 -m pytest -q"],
    ),
    "makefile beside a build file": ({"Makefile": "test:\n", "go.mod": ""}, ["go test ./..."]),
    "test files only": ({"pkg/thing_test.py": ""}, ["python3 -m pytest -q"]),
    "hidden test files": ({"node_modules/x/test_a.py": ""}, []),
}


def build(root, files):
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(content)
    return str(root)


@pytest.mark.parametrize("name", LAYOUTS)
def test_the_commands_of_each_layout_and_run_tests_runs_the_first(tmp_path, name):
    files, expected = LAYOUTS[name]
    root = build(tmp_path, files)
    found = find_test_commands(root)
    assert [c["command"] for c in found] == expected
    assert all(c["found_in"] and c["framework"] for c in found)
    if expected:
        assert default_test_command(root)[0] == expected[0]
    else:
        with pytest.raises(Exception, match="no test command found: give params.command"):
            default_test_command(root)


def test_where_each_command_was_found_is_said(tmp_path):
    root = build(tmp_path, LAYOUTS["npm and pytest"][0])
    assert find_test_commands(root) == [
        {
            "command": "npm test",
            "framework": "npm",
            "found_in": "package.json's test script: tape test/*.js",
        },
        {"command": "python3 -m pytest -q", "framework": "pytest", "found_in": "pytest.ini"},
    ]


QS_SCRIPTS = {
    # qs 6.16.0's own scripts: `npm test` lints first and audits online after.
    "pretest": "npm run --silent readme && npm run --silent lint",
    "test": "npm run tests-only",
    "tests-only": "nyc tape 'test/**/*.js'",
    "posttest": "npx npm@'>=10.2' audit --production",
}


def test_a_test_script_that_runs_another_is_that_one_without_hooks(tmp_path):
    root = build(tmp_path, {"package.json": json.dumps({"scripts": QS_SCRIPTS})})
    [found] = find_test_commands(root)
    assert found["command"] == "npm run tests-only"
    assert "its script tests-only run itself, no hooks" in found["found_in"]
    hooked = {"pretest": "eslint .", "test": "tape test/*.js", "posttest": "npm audit"}
    root = build(tmp_path / "hooked", {"package.json": json.dumps({"scripts": hooked})})
    [found] = find_test_commands(root)
    assert found["command"] == "npm test --ignore-scripts"
    assert found["found_in"].endswith("(without its pretest and posttest)")


def test_the_projects_own_environment_runs_pytest_when_pytest_is_in_it(tmp_path):
    files = {"pyproject.toml": "[tool.pytest.ini_options]\n", "tests/test_a.py": ""}
    root = build(tmp_path, files)
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to("/usr/bin/python3")
    # An environment without pytest: the system's pytest, as before.
    assert find_test_commands(root)[0]["command"] == "python3 -m pytest -q"
    (venv / "lib" / "python3.12" / "site-packages" / "pytest").mkdir(parents=True)
    [found] = find_test_commands(root)
    assert found["command"] == ".venv/bin/python -m pytest -q"
    assert found["found_in"] == (
        "pyproject.toml, with pytest from the project's own environment .venv"
    )
    assert default_test_command(root)[0] == ".venv/bin/python -m pytest -q"
