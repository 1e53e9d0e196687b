"""Parsing the ``open_codex_instructions.md`` file written by the ocflow host.

The file is Markdown meant for a human.  The machine-readable part is the one
fenced block whose info string is ``json ocflow-step``::

    ```json ocflow-step
    {"version": 1, "operation": "read_file", ...}
    ```

Only that block is parsed.  Relative directories in it (``input_dir``,
``output_dir``, ``work_dir`` and the paths under ``steps``) are resolved
against the directory that contains the instructions file, never against the
process's current directory.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from .results import StepError

SUPPORTED_VERSION = 1
FENCE_OPEN = "```json ocflow-step"
DEFAULT_TIMEOUT_SECONDS = 300
DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024


class InstructionsError(StepError):
    """The instructions file is missing, has no valid step block, or a bad field.

    ``operation`` holds the operation name when it could be read despite the
    error, so the failure result can still name it.
    """

    def __init__(self, message: str, operation: str | None = None):
        super().__init__(message)
        self.operation = operation


@dataclass(frozen=True)
class Limits:
    """Resource limits for the step."""

    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES


@dataclass(frozen=True)
class StepRef:
    """An earlier step this step may read: its result file and output directory."""

    step_id: str
    result: str
    output_dir: str | None

    def load_result(self) -> tuple[dict | None, str | None]:
        """Return ``(result_dict, None)``, or ``(None, why_not)`` if unreadable."""
        try:
            with open(self.result, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            return None, f"result file {self.result} does not exist"
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            return None, f"result file {self.result} is unreadable ({exc})"
        if not isinstance(data, dict):
            return None, f"result file {self.result} does not hold a JSON object"
        return data, None


@dataclass(frozen=True)
class Step:
    """One step, as described by the instructions file (all directories absolute)."""

    path: str
    base_dir: str
    version: int
    operation: str
    params: dict
    input_dir: str
    output_dir: str
    work_dir: str | None
    task_id: str = ""
    task: str = ""
    step_id: str = ""
    role: str | None = None
    input_files: list[str] = field(default_factory=list)
    steps: dict[str, StepRef] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    # Extra environment for commands: values of @{outputs...} references, passed as data
    # (OCFLOW_REF_n) so repository text never becomes shell code.
    env: dict[str, str] = field(default_factory=dict)
    # The host's sandbox launcher, put before every command (empty: no sandbox), and what it
    # enforces ("landlock", "landlock-partial").
    sandbox_launcher: list[str] = field(default_factory=list)
    sandbox_kind: str = "none"
    # What holds, layer by layer (namespaces, network, landlock, processes, memory_mb, memory,
    # udp, caches), as the host says; reported in command results.
    sandbox_layers: dict | None = None
    # When commands see the view through an overlay the host's launcher mounts on work_dir,
    # the directories it is made of, top first (see :mod:`.view`); else empty.
    view_layers: list[str] = field(default_factory=list)


def extract_step_block(text: str) -> str:
    """Return the body of the single ```` ```json ocflow-step ```` block in ``text``."""
    lines = text.splitlines()
    openings = [i for i, line in enumerate(lines) if line.strip() == FENCE_OPEN]
    if not openings:
        raise InstructionsError(
            f"the instructions file has no '{FENCE_OPEN}' fenced block: regenerate it with ocflow"
        )
    if len(openings) > 1:
        raise InstructionsError(
            f"the instructions file has {len(openings)} '{FENCE_OPEN}' blocks; "
            "exactly one is expected"
        )
    start = openings[0] + 1
    for end in range(start, len(lines)):
        if lines[end].strip() == "```":
            return "\n".join(lines[start:end])
    raise InstructionsError(
        f"the '{FENCE_OPEN}' block in the instructions file is never closed with ```"
    )


def parse_instructions(path: str) -> Step:
    """Read an instructions file and return the :class:`Step` it describes.

    ``path`` should be absolute (a relative one is taken relative to the
    current directory).  Raises :class:`InstructionsError` with a message
    saying what is wrong.
    """
    path = os.path.abspath(path)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise InstructionsError(f"instructions file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InstructionsError(f"cannot read instructions file {path}: {exc}") from None
    return parse_instructions_text(text, os.path.dirname(path), path)


def parse_instructions_text(text: str, base_dir: str, path: str = "") -> Step:
    """Parse the step block of instructions ``text``; relative dirs use ``base_dir``."""
    body = extract_step_block(text)
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise InstructionsError(
            f"the '{FENCE_OPEN}' block is not valid JSON ({exc}): regenerate it with ocflow"
        ) from None
    if not isinstance(data, dict):
        raise InstructionsError(f"the '{FENCE_OPEN}' block must hold a JSON object")
    return _step_from_dict(data, base_dir, path)


def _step_from_dict(data: dict, base_dir: str, path: str) -> Step:
    operation = data.get("operation")
    op_name = operation if isinstance(operation, str) else None

    def fail(message: str) -> InstructionsError:
        return InstructionsError(message, op_name)

    version = data.get("version")
    if type(version) is not int or version != SUPPORTED_VERSION:
        raise fail(
            f"unsupported instructions version {version!r}: this open_codex_lib reads "
            f"version {SUPPORTED_VERSION}; update open_codex_lib or ocflow so they match"
        )
    if not isinstance(operation, str) or not operation:
        raise fail("the step block has no 'operation' string")

    def text_field(name: str) -> str:
        value = data.get(name, "")
        if value is None:
            return ""
        if not isinstance(value, str):
            raise fail(f"field '{name}' must be a string, got {type(value).__name__}")
        return value

    def dir_field(name: str, required: bool) -> str | None:
        value = data.get(name)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value:
            raise fail(f"field '{name}' must be a directory path string, got {value!r}")
        return os.path.normpath(os.path.join(base_dir, value))

    params = data.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise fail(f"field 'params' must be a JSON object, got {type(params).__name__}")

    role = data.get("role")
    if role is not None and not isinstance(role, str):
        raise fail(f"field 'role' must be a string or null, got {type(role).__name__}")

    input_files = data.get("input_files") or []
    if not isinstance(input_files, list) or not all(isinstance(f, str) for f in input_files):
        raise fail("field 'input_files' must be a list of path strings")

    env = data.get("env") or {}
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise fail("field 'env' must be an object of strings")

    sandbox = data.get("sandbox") or {}
    launcher = sandbox.get("launcher") if isinstance(sandbox, dict) else None
    layers = sandbox.get("layers") if isinstance(sandbox, dict) else None
    if layers is not None and not isinstance(layers, dict):
        raise fail("field 'sandbox.layers' must be an object")
    if launcher is not None and (
        not isinstance(launcher, list) or not all(isinstance(a, str) for a in launcher)
    ):
        raise fail("field 'sandbox.launcher' must be a list of strings")
    view_layers = sandbox.get("view_layers") if isinstance(sandbox, dict) else None
    if view_layers is not None and (
        not isinstance(view_layers, list) or not all(isinstance(a, str) for a in view_layers)
    ):
        raise fail("field 'sandbox.view_layers' must be a list of path strings")

    return Step(
        path=path,
        base_dir=base_dir,
        version=version,
        operation=operation,
        params=params,
        input_dir=dir_field("input_dir", True),
        output_dir=dir_field("output_dir", True),
        work_dir=dir_field("work_dir", False),
        task_id=text_field("task_id"),
        task=text_field("task"),
        step_id=text_field("step_id"),
        role=role,
        input_files=list(input_files),
        steps=_parse_steps(data.get("steps"), base_dir, fail),
        limits=_parse_limits(data.get("limits"), fail),
        env=dict(env),
        sandbox_launcher=list(launcher or []),
        sandbox_kind=str(sandbox.get("kind", "landlock")) if launcher else "none",
        sandbox_layers=dict(layers) if launcher and layers else None,
        view_layers=[
            os.path.normpath(os.path.join(base_dir, layer))
            for layer in (view_layers or [] if launcher else [])
        ],
    )


def _parse_steps(value: Any, base_dir: str, fail) -> dict[str, StepRef]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail("field 'steps' must be an object mapping step ids to {result, output_dir}")
    refs = {}
    for step_id, entry in value.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("result"), str):
            raise fail(f"steps.{step_id} must be an object with a 'result' path string")
        output_dir = entry.get("output_dir")
        if output_dir is not None and not isinstance(output_dir, str):
            raise fail(f"steps.{step_id}.output_dir must be a path string or null")
        refs[step_id] = StepRef(
            step_id=step_id,
            result=os.path.normpath(os.path.join(base_dir, entry["result"])),
            output_dir=(
                os.path.normpath(os.path.join(base_dir, output_dir)) if output_dir else None
            ),
        )
    return refs


def _parse_limits(value: Any, fail) -> Limits:
    if value is None:
        return Limits()
    if not isinstance(value, dict):
        raise fail("field 'limits' must be an object")
    timeout = value.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)
    if timeout is None:
        timeout = DEFAULT_TIMEOUT_SECONDS
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise fail(f"limits.timeout_seconds must be a positive number, got {timeout!r}")
    max_bytes = value.get("max_output_bytes", DEFAULT_MAX_OUTPUT_BYTES)
    if max_bytes is None:
        max_bytes = DEFAULT_MAX_OUTPUT_BYTES
    if type(max_bytes) is not int or max_bytes <= 0:
        raise fail(f"limits.max_output_bytes must be a positive integer, got {max_bytes!r}")
    return Limits(timeout_seconds=timeout, max_output_bytes=max_bytes)
