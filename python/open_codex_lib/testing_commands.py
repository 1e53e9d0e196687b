"""How a repository runs its tests, read from its own build files: the one guess ocflow makes.

:func:`find_test_commands` lists every way the repository's top-level build files
name, the most specific first: ``package.json``'s ``test`` script (run by
pnpm or yarn when their lock file is there), ``go.mod``, ``pom.xml``
(``./mvnw`` when present), ``build.gradle`` (``./gradlew`` when present),
``Cargo.toml``, pytest's configuration (``pytest.ini``, ``tox.ini``,
``pyproject.toml``, ``setup.cfg``, ``conftest.py``), a ``Makefile``'s ``test``
target when none of those names a way, and last, without pytest's
configuration, Python test files found anywhere.  The planner is shown the whole list (ocflow asks the library
through its bridge), and a ``run_tests`` step without a command runs the first:
one implementation, so the two never disagree.
"""

from __future__ import annotations

import json

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

    script = _npm_test_script(view)
    if script is not None:
        runner = (
            "pnpm"
            if view.isfile("pnpm-lock.yaml")
            else "yarn"
            if view.isfile("yarn.lock")
            else "npm"
        )
        add(f"{runner} test", "npm", f"package.json's test script: {script}")
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
    if config is not None:
        add(PYTEST_COMMAND, "pytest", config)
    if not found and _has_make_test_target(view):
        add(MAKE_COMMAND, "make", "the Makefile's test target")
    if config is None and _has_python_tests(view):
        add(PYTEST_COMMAND, "pytest", "Python test files (test_*.py, *_test.py)")
    return found


def _read(view: View, name: str) -> str | None:
    path = view.resolve(name)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(_MAX_READ + 1)[:_MAX_READ]
    except OSError:
        return None


def _npm_test_script(view: View) -> str | None:
    """``package.json``'s ``test`` script, unless it is missing, empty or npm's placeholder."""
    try:
        package = json.loads(_read(view, "package.json") or "")
    except ValueError:
        return None
    scripts = package.get("scripts") if isinstance(package, dict) else None
    test = scripts.get("test") if isinstance(scripts, dict) else None
    if not isinstance(test, str) or not test.strip() or _NPM_PLACEHOLDER in test:
        return None
    return test.strip()


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
