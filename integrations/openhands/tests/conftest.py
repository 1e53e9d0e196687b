"""Fixtures for the OpenHands integration's tests: the real ocflow binary built from this
repository, a temporary git repository, and the offline settings the SDK needs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Set before the SDK (and LiteLLM under it) is imported: no network but the fake's, no banner.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
sys.path.insert(0, str(Path(__file__).parent))

REPOSITORY = Path(__file__).resolve().parents[3]


def locate_ocflow() -> Path:
    """`OCFLOW_BIN`, else the debug build of this repository (CARGO_TARGET_DIR honoured)."""
    named = os.environ.get("OCFLOW_BIN")
    if named:
        return Path(named)
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPOSITORY / "target"))
    return target / "debug" / "ocflow"


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ocflow remembers tasks and warnings in the user's state directory: the test's own."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "user-state"))


@pytest.fixture(scope="session")
def ocflow_bin() -> str:
    path = locate_ocflow()
    if not path.is_file():
        # Never a skip: under CI a missing binary is a failure, with the way to fix it.
        pytest.fail(f"no ocflow binary at {path}: run `cargo build` first or set OCFLOW_BIN")
    return str(path)


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A small git repository below a workspace directory, as OpenHands lays them out
    (`<workspace>/project/<repo>`)."""
    repo = tmp_path / "workspace" / "project" / "greeter"
    repo.mkdir(parents=True)
    (repo / "README.md").write_text("# greeter\n\nSays hello.\n")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    for argv in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-qm", "init"]):
        subprocess.run(argv, cwd=repo, env=env, check=True)
    return repo
