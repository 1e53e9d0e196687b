"""Checking repository-relative paths and keeping them inside a step's directories.

Paths that come from step parameters (``file_path``, ``path``) are
repository-relative POSIX paths.  :func:`normalize_repo_path` refuses absolute
paths, ``..`` components and empty paths; :func:`resolve_inside` joins such a
path to a directory (input_dir, output_dir, work_dir), resolves symlinks and
refuses the result unless it is still inside that directory, comparing path
components rather than string prefixes.  :func:`require_work_dir` checks that a
step that needs the full repository view has one.  :func:`staged_file` finds a
file the host staged in input_dir, :func:`output_target` prepares the place of
a file written to output_dir.
"""

from __future__ import annotations

import os

from .results import StepError


class PathError(StepError):
    """A path parameter is malformed or points outside its directory."""


def normalize_repo_path(value: object, field: str, allow_root: bool = False) -> str:
    """Check a repository-relative path parameter and return its normal form.

    ``"./src//a.py"`` becomes ``"src/a.py"``.  With ``allow_root`` the
    repository root itself (``"."``) is accepted and returned as ``"."``.
    """
    if value is None:
        raise PathError(f"missing parameter {field}: give a repository-relative path")
    if not isinstance(value, str):
        raise PathError(
            f"{field} must be a repository-relative path string, got {type(value).__name__}"
        )
    if not value.strip():
        raise PathError(f"{field} is empty: give a repository-relative path such as 'src/app.py'")
    if "\0" in value:
        raise PathError(f"{field} contains a NUL character: give a plain repository-relative path")
    if value.startswith("/"):
        raise PathError(
            f"{field} {value!r} is absolute: give a path relative to the repository root"
        )
    parts = [part for part in value.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise PathError(
            f"{field} {value!r} contains a '..' component: give a path inside the repository"
        )
    if not parts:
        if allow_root:
            return "."
        raise PathError(f"{field} {value!r} names the repository root, not a file")
    return "/".join(parts)


def is_within(root: str, path: str) -> bool:
    """True if absolute ``path`` is ``root`` or lies below it (component-wise)."""
    return os.path.commonpath([root, path]) == root


def resolve_inside(directory: str, rel_path: str, directory_name: str) -> str:
    """Return the real path of ``rel_path`` under ``directory``.

    ``rel_path`` must already be normalised by :func:`normalize_repo_path`.
    Symlinks are resolved; if the result leaves ``directory`` a
    :class:`PathError` is raised instead of following the link.
    """
    root = os.path.realpath(directory)
    target = os.path.realpath(os.path.join(root, rel_path))
    if not is_within(root, target):
        raise PathError(
            f"{rel_path} resolves to {target}, outside the {directory_name} {root} "
            "(a symlink points out of it): refusing to follow it"
        )
    return target


def require_work_dir(step) -> str:
    """The work_dir of ``step`` (a :class:`~.instructions.Step`), which must be given and exist."""
    if step.work_dir is None:
        raise StepError(
            f"operation {step.operation} runs in a full repository view but the "
            "instructions give no work_dir: regenerate the step with ocflow"
        )
    if not os.path.isdir(step.work_dir):
        raise StepError(
            f"work_dir {step.work_dir} does not exist: the repository view was not "
            "prepared; rerun the step from ocflow"
        )
    return step.work_dir


def staged_file(step, rel: str) -> str:
    """Real path of the regular file ``rel`` staged under the input_dir of ``step``."""
    target = resolve_inside(step.input_dir, rel, "input directory")
    if not os.path.exists(target):
        raise StepError(
            f"file not found: {rel} (the repository has no such file at this point of the flow)"
        )
    if not os.path.isfile(target):
        raise StepError(f"{rel} is not a regular file: give the path of a file")
    return target


def output_target(step, rel: str) -> str:
    """Real path where ``rel`` is written under the output_dir of ``step``.

    Creates output_dir and the parent directories of the file; refuses a
    path where a directory already exists.
    """
    os.makedirs(step.output_dir, exist_ok=True)
    target = resolve_inside(step.output_dir, rel, "output directory")
    if os.path.isdir(target):
        raise StepError(f"cannot write {rel}: a directory with that name exists in the output")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    return target
