"""Shared fixtures: building a step directory with its instructions file.

The layout mirrors what ocflow writes::

    flow/_view/                      work_dir (full repository view)
    flow/step1/result.json, output/  an earlier step
    flow/step2/open_codex_instructions.md, input/, output/

:class:`FakeLLM` stands in for the host's ``complete`` callable.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parent.parent
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


@dataclass
class StepFiles:
    """Paths of one generated step."""

    path: str  # the instructions file
    step_dir: Path
    input_dir: Path
    output_dir: Path
    work_dir: Path
    flow_dir: Path


def instructions_markdown(block: dict) -> str:
    """Markdown like the host writes, with the step block in the middle."""
    return (
        "# Step step2: do something\n\n"
        "Some prose for humans. A plain json block is ignored:\n\n"
        '```json\n{"version": 99}\n```\n\n'
        "```json ocflow-step\n" + json.dumps(block, indent=2) + "\n```\n\nMore prose.\n"
    )


def write_tree(root: Path, files: dict) -> None:
    """Write ``{relative path: str or bytes}`` under ``root``."""
    for rel, content in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")


@pytest.fixture
def make_step(tmp_path):
    """Factory: ``make_step(operation, params, inputs=..., work=..., ...) -> StepFiles``."""

    def make(
        operation: str,
        params: dict | None = None,
        *,
        inputs: dict | None = None,
        work: dict | None = None,
        steps: dict | None = None,
        limits: dict | None = None,
        work_dir: str | None = "../_view",
        extra: dict | None = None,
    ) -> StepFiles:
        flow = tmp_path / "flow"
        step_dir = flow / "step2"
        input_dir = step_dir / "input"
        output_dir = step_dir / "output"
        view = flow / "_view"
        for directory in (input_dir, output_dir, view):
            directory.mkdir(parents=True, exist_ok=True)
        write_tree(input_dir, inputs or {})
        write_tree(view, work or {})
        block = {
            "version": 1,
            "task_id": "20261122-031500-refactor-utils",
            "task": "Refactor utils.py",
            "step_id": "step2",
            "operation": operation,
            "role": "developer",
            "params": params or {},
            "input_dir": "input",
            "output_dir": "output",
            "work_dir": work_dir,
            "input_files": sorted((inputs or {}).keys()),
            "steps": steps or {},
            "limits": limits or {"timeout_seconds": 30, "max_output_bytes": 1048576},
        }
        block.update(extra or {})
        path = step_dir / "open_codex_instructions.md"
        path.write_text(instructions_markdown(block), encoding="utf-8")
        return StepFiles(str(path), step_dir, input_dir, output_dir, view, flow)

    return make


@pytest.fixture
def earlier_step(tmp_path):
    """Factory: ``earlier_step(step_id, result=dict|None, outputs={...})`` -> steps entry."""

    def make(step_id: str, result: dict | None = None, outputs: dict | None = None) -> dict:
        step_dir = tmp_path / "flow" / step_id
        (step_dir / "output").mkdir(parents=True, exist_ok=True)
        write_tree(step_dir / "output", outputs or {})
        if result is not None:
            (step_dir / "result.json").write_text(json.dumps(result), encoding="utf-8")
        return {
            "result": f"../{step_id}/result.json",
            "output_dir": f"../{step_id}/output",
        }

    return make


def pid_alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except OSError:
        return True


class HostError(Exception):
    """An error like the host's ``complete`` raises: with ``kind`` and ``transient``."""

    def __init__(self, message, kind="rate_limited", transient=True):
        super().__init__(message)
        self.kind = kind
        self.transient = transient


class FakeLLM:
    """The host's ``complete(messages, purpose=None, json=False, temperature=None)``, scripted.

    Each scripted item is a string (the content, finish_reason "stop"), a
    full answer dict, or an exception to raise.  The last item repeats when
    the script runs out.  ``calls`` records ``{"messages", "purpose", "json",
    "temperature"}`` (``temperature`` None when the library sent none).
    """

    def __init__(self, *answers):
        self.answers = list(answers) or ["ok"]
        self.calls = []

    def __call__(self, messages, purpose=None, json=False, temperature=None):
        self.calls.append(
            {
                "messages": copy.deepcopy(messages),
                "purpose": purpose,
                "json": json,
                "temperature": temperature,
            }
        )
        item = self.answers[min(len(self.calls), len(self.answers)) - 1]
        if isinstance(item, Exception):
            raise item
        if isinstance(item, dict):
            return item
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        return {"content": item, "finish_reason": "stop", "usage": usage}

    def last_user_message(self, call=-1):
        """Content of the last user message of a call."""
        messages = self.calls[call]["messages"]
        return [m for m in messages if m["role"] == "user"][-1]["content"]
