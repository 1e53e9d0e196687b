"""File operations: ``read_file``, ``write_file``, ``list_files`` and ``delete_file``.

Reads come from the step's input_dir (the files the host staged), writes go to
its output_dir, listings walk the work_dir (a full repository view).
``write_file`` with ``params.instructions`` lets the model write the file
(see :mod:`.code_edit`).  Nothing here deletes files: ``delete_file`` only
reports the deletion for the host to apply.  Every path parameter is checked
with :mod:`.paths`.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import fnmatch
import os

from . import code_edit
from .instructions import Step
from .params import optional_bool, optional_str, require_str
from .paths import (
    normalize_repo_path,
    output_target,
    require_work_dir,
    resolve_inside,
    staged_file,
)
from .results import StepError, success

LIST_LIMIT = 10000
SKIPPED_DIRS = frozenset({".git", ".ocflow"})
WRITE_SOURCES = ("content", "content_from_step", "instructions")


def read_file(step: Step, llm_config: dict | None) -> dict:
    """Return the content of a staged file, capped at ``limits.max_output_bytes``.

    Text (valid UTF-8) comes back as ``content``.  Other bytes would only
    survive as replacement characters, so they come back exactly, in
    ``content_base64``, and ``content`` is None: a later step then copies the
    real bytes or refuses, never writes different ones.
    """
    rel = normalize_repo_path(step.params.get("file_path"), "params.file_path")
    target = staged_file(step, rel)
    cap = step.limits.max_output_bytes
    size = os.path.getsize(target)
    with open(target, "rb") as handle:
        data = handle.read(cap + 1)
    truncated = len(data) > cap
    data = data[:cap]
    content = utf8_text(data, cut=truncated)
    fields = {"content": content}
    if content is None:
        fields.update(content_base64=base64.b64encode(data).decode("ascii"), encoding="base64")
    message = f"read {rel} ({size} bytes)"
    if content is None:
        message += ": not UTF-8 text, so content is null and the exact bytes are in content_base64"
    if truncated:
        message += f", content truncated to the first {cap} bytes"
    return success(
        step.operation,
        message,
        **fields,
        size=size,
        binary=content is None or b"\0" in data,
        truncated=truncated,
        file_path=rel,
    )


def utf8_text(data: bytes, cut: bool) -> str | None:
    """``data`` decoded as UTF-8, or None if it is not UTF-8.

    With ``cut`` (the bytes stop at the size cap, not at the file's end) a
    character cut in half at the very end is dropped rather than counted as
    invalid: the file may be text even though its prefix ends mid-character.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
    try:
        return decoder.decode(data, final=not cut)
    except UnicodeDecodeError:
        return None


def write_file(step: Step, llm_config: dict | None) -> dict:
    """Write a file under output_dir from literal content, an earlier step or the LLM.

    With ``params.instructions`` the model writes the file
    (:func:`.code_edit.generate_file`).
    """
    params = step.params
    rel = normalize_repo_path(params.get("file_path"), "params.file_path")
    given = [name for name in WRITE_SOURCES if params.get(name) is not None]
    if len(given) != 1:
        found = ", ".join(given) if given else "none"
        raise StepError(
            "write_file needs exactly one of params.content, params.content_from_step "
            f"or params.instructions (found: {found})"
        )
    source = given[0]
    if source == "content":
        data = require_str(params, "content", non_empty=False).encode("utf-8")
        origin = "params.content"
    elif source == "content_from_step":
        source_step = require_str(params, "content_from_step")
        data, origin = content_from_step(step, source_step, rel)
    else:
        instructions = require_str(params, "instructions")
        return code_edit.generate_file(step, llm_config, rel, instructions)

    problem = replaces_code(step, rel, data)
    if problem is not None:
        raise StepError(
            f"the {origin} would replace {rel}, and {problem}: to add to or change an existing "
            "file use modify_code with instructions; to replace it, give its whole new content"
        )
    target = output_target(step, rel)
    with open(target, "wb") as handle:
        handle.write(data)
    return success(
        step.operation,
        f"wrote {len(data)} bytes to {rel} from {origin}",
        output_files=[rel],
        bytes=len(data),
    )


def replaces_code(step: Step, rel: str, data: bytes) -> str | None:
    """Why ``data`` may not replace ``rel`` as the flow has it now, when the file exists: the
    same guards a model's rewrite faces (no definition left out, not most of the file gone,
    unless the task asks to remove). ``None`` for a new file, or a fit one."""
    try:
        existing = staged_file(step, rel)
    except StepError:
        return None
    try:
        with open(existing, encoding="utf-8") as handle:
            original = handle.read()
        content = data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return code_edit.replacement_problem(rel, original, content, step.task)


def content_from_step(step: Step, source_step: str, rel: str) -> tuple[bytes, str]:
    """Find the content an earlier step produced for ``rel``.

    Tried in order: the content of the step's result (``content_base64``,
    exact bytes, else the string ``content``), the file ``rel`` in its output
    dir, the only file in its output dir.  Returns the bytes and a description
    of where they came from.  A result whose content was cut at the size cap
    is refused: writing the prefix would silently shorten the file.
    """
    ref = step.steps.get(source_step)
    if ref is None:
        available = ", ".join(sorted(step.steps)) or "none"
        raise StepError(
            f"params.content_from_step names {source_step!r}, which is not an earlier step "
            f"this step may read (available: {available})"
        )
    result, problem = ref.load_result()
    if result is not None:
        data = result_content(result, source_step)
        if data is not None:
            return data, f"the result of {source_step}"

    looked = [f"a string 'content' in {ref.result} ({problem or 'it has none'})"]
    if ref.output_dir and os.path.isdir(ref.output_dir):
        candidate = resolve_inside(ref.output_dir, rel, f"output directory of {source_step}")
        if os.path.isfile(candidate):
            return _read_bytes(candidate), f"{rel} in the output of {source_step}"
        root = os.path.realpath(ref.output_dir)
        files, _ = walk_regular_files(root, root, limit=2)
        if len(files) == 1:
            only = files[0]
            return _read_bytes(os.path.join(root, only)), f"{only} in the output of {source_step}"
        looked.append(f"{rel} in {ref.output_dir} (absent)")
        looked.append(
            f"a single file in {ref.output_dir} (it holds {'none' if not files else 'several'})"
        )
    else:
        looked.append(f"its output directory {ref.output_dir or '(none given)'} (absent)")
    raise StepError(
        f"cannot take content from step {source_step}: looked for "
        + "; ".join(looked)
        + ". Give params.content, or make the step produce exactly that file"
    )


def result_content(result: dict, source_step: str) -> bytes | None:
    """The exact bytes a result carries as its content, or None if it carries none.

    ``content_base64`` (a non-UTF-8 read) wins over ``content``; a content
    marked ``truncated`` is refused, naming the file, the cap and the ways out.
    """
    encoded = result.get("content_base64")
    text = result.get("content")
    if isinstance(encoded, str):
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise StepError(
                f"cannot take content from step {source_step}: its content_base64 is not "
                f"valid base64 ({exc}): run that step again"
            ) from None
    elif isinstance(text, str):
        data = text.encode("utf-8")
    else:
        return None
    if result.get("truncated") is True:
        raise StepError(truncated_content_message(result, source_step, len(data)))
    return data


def truncated_content_message(result: dict, source_step: str, kept: int) -> str:
    """Why a cut content is refused, with the file, the sizes and what to do instead."""
    file_path = result.get("file_path")
    what = file_path if isinstance(file_path, str) else "its file"
    size = result.get("size")
    known = isinstance(size, int) and not isinstance(size, bool)
    sizes = f"{kept} bytes of {size}" if known else f"{kept} bytes"
    return (
        f"cannot take content from step {source_step}: its read of {what} was cut at "
        f"max_output_bytes ({sizes}), and writing that prefix would lose the rest: "
        "raise the cap (ocflow --max-output-bytes, or max_output_bytes in [limits])"
        + (f" above {size}" if known else "")
        + ", or copy the file with a command step (cp)"
    )


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def walk_regular_files(
    root: str,
    start: str,
    pattern: str = "*",
    recursive: bool = True,
    limit: int | None = None,
) -> tuple[list[str], bool]:
    """List regular files under ``start`` as sorted POSIX paths relative to ``root``.

    Symlinks (to files or directories) are neither listed nor followed;
    ``.git`` and ``.ocflow`` directories are skipped; ``pattern`` is matched
    (case-sensitively) against file names.  Stops after ``limit`` files and
    returns ``(files, truncated)``.
    """
    files = []
    pending = [start]
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError:
            continue
        subdirs = []
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if recursive and entry.name not in SKIPPED_DIRS:
                    subdirs.append(entry.path)
            elif entry.is_file(follow_symlinks=False) and fnmatch.fnmatchcase(entry.name, pattern):
                if limit is not None and len(files) >= limit:
                    return sorted(files), True
                files.append(os.path.relpath(entry.path, root).replace(os.sep, "/"))
        pending.extend(reversed(subdirs))
    return sorted(files), False


def list_files(step: Step, llm_config: dict | None) -> dict:
    """List regular files of the repository view, optionally filtered by name."""
    params = step.params
    rel = normalize_repo_path(params.get("path", "."), "params.path", allow_root=True)
    pattern = optional_str(params, "pattern", "*") or "*"
    recursive = optional_bool(params, "recursive", True)
    work_dir = require_work_dir(step)
    root = os.path.realpath(work_dir)
    start = resolve_inside(root, rel, "work directory")
    if not os.path.exists(start):
        raise StepError(f"directory not found: {rel} (the repository has no such directory)")
    if not os.path.isdir(start):
        raise StepError(f"{rel} is not a directory: give a directory path in params.path")
    files, truncated = walk_regular_files(root, start, pattern, recursive, LIST_LIMIT)
    message = f"found {len(files)} files matching {pattern!r} under {rel}"
    if truncated:
        message += f" (stopped at {LIST_LIMIT}; narrow params.path or params.pattern)"
    return success(step.operation, message, files=files, count=len(files), truncated=truncated)


def delete_file(step: Step, llm_config: dict | None) -> dict:
    """Report a staged file for deletion; the host applies it."""
    rel = normalize_repo_path(step.params.get("file_path"), "params.file_path")
    staged_file(step, rel)
    return success(
        step.operation,
        f"{rel} is marked for deletion (ocflow applies it)",
        deleted_files=[rel],
    )
