"""How a repository runs its tests, read from its own build files: the one guess ocflow makes.

:func:`find_test_commands` lists every way the repository's top-level build files
name, the most specific first: ``package.json``'s ``test`` script (run by
pnpm or yarn when their lock file is there; when it only runs another script, that one, and
otherwise without npm's ``pretest``/``posttest`` hooks, which lint and audit rather than test),
``go.mod``, ``pom.xml``
(``./mvnw`` when present), ``build.gradle`` (``./gradlew`` when present),
``Cargo.toml``, pytest's configuration (``pytest.ini``, ``tox.ini``,
``pyproject.toml``, ``setup.cfg``, ``conftest.py``; with the project's own environment's
Python, ``.venv/bin/python -m pytest``, when pytest is installed there), a ``Makefile``'s ``test``
target when none of those names a way, and last, without pytest's
configuration, Python test files found anywhere.  The planner is shown the whole list (ocflow asks the library
through its bridge), and a ``run_tests`` step without a command runs the first:
one implementation, so the two never disagree.
"""

from __future__ import annotations

import glob
import json
import os
import re

from .view import View

PYTEST_COMMAND = "python3 -m pytest -q"
CARGO_COMMAND = "cargo test"
GO_COMMAND = "go test ./..."
# Batch mode: no colours or download progress bars in the captured output.
MAVEN_COMMAND = "mvn -B -q test"
MAVEN_WRAPPER_COMMAND = "./mvnw -B -q test"
GRADLE_COMMAND = "gradle test"
GRADLE_WRAPPER_COMMAND = "./gradlew test"
MAKE_COMMAND = "make test"
# A test script that only runs another: "npm run tests-only", "npm run --silent test:unit".
_NPM_RUN = re.compile(r"^(?:npm|pnpm|yarn) run(?: --silent| -s)? (?P<name>[\w:.-]+)$")
# What `npm init` writes as the test script: it only fails, so it is no test command.
_NPM_PLACEHOLDER = "no test specified"
# The most of a build file read: enough for any real one.
_MAX_READ = 1024 * 1024
# Directories not searched for test files.
_NOT_SEARCHED = frozenset(
    {".git", ".ocflow", ".venv", "venv", "node_modules", "target", "__pycache__", ".tox"}
)
_SEARCH_LIMIT = 20000
# pytest's configuration files, and what marks each as pytest's (None: being there is enough).
_PYTEST_CONFIG = (
    ("pytest.ini", None),
    ("tox.ini", "pytest"),
    ("pyproject.toml", "pytest"),
    ("setup.cfg", "pytest"),
    ("conftest.py", None),
)


def find_test_commands(work_dir: str | View) -> list[dict]:
    """Every test command the repository in ``work_dir`` (a directory or a
    :class:`~.view.View`) names, most specific first: ``{"command", "framework",
    "found_in"}`` each, ``found_in`` saying where it was read, for people and the planner."""
    view = work_dir if isinstance(work_dir, View) else View(work_dir)
    found: list[dict] = []

    def add(command: str, framework: str, found_in: str) -> None:
        found.append({"command": command, "framework": framework, "found_in": found_in})

    scripts = _npm_scripts(view)
    script = _npm_test_script(scripts)
    if script is not None:
        runner = (
            "pnpm"
            if view.isfile("pnpm-lock.yaml")
            else "yarn"
            if view.isfile("yarn.lock")
            else "npm"
        )
        command, said = _npm_command(runner, script, scripts)
        add(command, "npm", said)
    if view.isfile("go.mod"):
        add(GO_COMMAND, "go", "go.mod")
    if view.isfile("pom.xml"):
        add(MAVEN_WRAPPER_COMMAND if view.isfile("mvnw") else MAVEN_COMMAND, "maven", "pom.xml")
    gradle = next((n for n in ("build.gradle", "build.gradle.kts") if view.isfile(n)), None)
    if gradle is not None:
        command = GRADLE_WRAPPER_COMMAND if view.isfile("gradlew") else GRADLE_COMMAND
        add(command, "gradle", gradle)
    if view.isfile("Cargo.toml"):
        add(CARGO_COMMAND, "cargo", "Cargo.toml")
    config = _pytest_config(view)
    own = _own_pytest(view)
    pytest = f"{own}/bin/python -m pytest -q" if own else PYTEST_COMMAND
    with_own = f", with pytest from the project's own environment {own}" if own else ""
    if config is not None:
        add(pytest, "pytest", config + with_own)
    if not found and _has_make_test_target(view):
        add(MAKE_COMMAND, "make", "the Makefile's test target")
    if config is None and _has_python_tests(view):
        add(pytest, "pytest", "Python test files (test_*.py, *_test.py)" + with_own)
    return found


def _own_pytest(view: View) -> str | None:
    """The project's own Python environment (``.venv`` or ``venv``) when pytest is installed
    in it: its tests run with the project's dependencies, which the system Python lacks."""
    for env in (".venv", "venv"):
        python = view.path(f"{env}/bin/python")
        if python is None or not os.path.exists(python):
            continue
        lib = view.path(f"{env}/lib")
        if lib is None:
            continue
        for site in glob.glob(os.path.join(lib, "python*", "site-packages")):
            if os.path.isdir(os.path.join(site, "pytest")) or os.path.isdir(
                os.path.join(site, "_pytest")
            ):
                return env
    return None


def _read(view: View, name: str) -> str | None:
    path = view.resolve(name)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(_MAX_READ + 1)[:_MAX_READ]
    except OSError:
        return None


def _npm_scripts(view: View) -> dict:
    """``package.json``'s ``scripts`` (empty without one)."""
    try:
        package = json.loads(_read(view, "package.json") or "")
    except ValueError:
        return {}
    scripts = package.get("scripts") if isinstance(package, dict) else None
    return scripts if isinstance(scripts, dict) else {}


def _npm_test_script(scripts: dict) -> str | None:
    """The ``test`` script, unless it is missing, empty or npm's placeholder."""
    test = scripts.get("test")
    if not isinstance(test, str) or not test.strip() or _NPM_PLACEHOLDER in test:
        return None
    return test.strip()


def _npm_command(runner: str, script: str, scripts: dict) -> tuple[str, str]:
    """The command that runs the tests, and where it was found. A ``test`` script that only
    runs another script (``npm run tests-only``) is that script, run itself; one npm wraps in
    ``pretest``/``posttest`` hooks (a lint, an online audit: qs's) runs without them."""
    said = f"package.json's test script: {script}"
    delegated = _NPM_RUN.match(script)
    if delegated and isinstance(scripts.get(delegated["name"]), str):
        name = delegated["name"]
        return f"{runner} run {name}", f"{said} (its script {name} run itself, no hooks)"
    hooks = [hook for hook in ("pretest", "posttest") if scripts.get(hook)]
    if hooks and runner == "npm":
        return "npm test --ignore-scripts", f"{said} (without its {' and '.join(hooks)})"
    return f"{runner} test", said


def _pytest_config(view: View) -> str | None:
    """The first file that configures pytest, by name."""
    for name, marker in _PYTEST_CONFIG:
        if not view.isfile(name):
            continue
        if marker is None or marker in (_read(view, name) or ""):
            return name
    return None


def _has_make_test_target(view: View) -> bool:
    text = _read(view, "Makefile") or ""
    return any(line.startswith("test:") for line in text.splitlines())


def _has_python_tests(view: View) -> bool:
    """True if a ``test_*.py`` or ``*_test.py`` file is found (bounded search)."""
    seen = 0
    for _directory, dirnames, filenames in view.walk():
        dirnames[:] = [d for d in dirnames if d not in _NOT_SEARCHED]
        for name in filenames:
            if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
                return True
        seen += len(filenames) + len(dirnames)
        if seen > _SEARCH_LIMIT:
            return False
    return False
