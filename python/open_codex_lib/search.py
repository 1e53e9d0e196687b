"""``search_code``: find a text (or a regular expression) in the repository's files, as the flow
has them at the step, and give each match as ``file:line: text``.

What git ignores is not searched (each ``.gitignore`` of the view applies beneath its
directory, read with :mod:`pathspec`; without it every file is searched and the result says
so), nor ``.git``, ``.ocflow`` and the dependency and build directories, nor binary or large
files. The result is bounded: at most ``MAX_MATCHES`` matches, each line cut to ``MAX_LINE``
characters, and it says when it stopped, so a plan or a recovery can narrow ``path`` or the
pattern.
"""

from __future__ import annotations

import os
import re

from .files import utf8_text
from .instructions import Step
from .params import optional_bool, require_str
from .paths import normalize_repo_path, require_work_dir, resolve_inside
from .results import StepError, success

try:  # gitignore rules as git reads them
    import pathspec
except ImportError:  # pragma: no cover - a dependency of the library, see pyproject.toml
    pathspec = None

MAX_MATCHES = 100
MAX_LINE = 200
MAX_FILE_BYTES = 1_000_000
SKIPPED_DIRS = frozenset({".git", ".ocflow", "node_modules", ".venv", "__pycache__"})


def search_code(step: Step, llm_config: dict | None) -> dict:
    """The matches of ``params.pattern`` under ``params.path`` (default: the whole view)."""
    params = step.params
    pattern = require_str(params, "pattern")
    use_regex = optional_bool(params, "regex", False)
    rel = normalize_repo_path(params.get("path", "."), "params.path", allow_root=True)
    root = os.path.realpath(require_work_dir(step))
    start = resolve_inside(root, rel, "work directory")
    if not os.path.isdir(start):
        raise StepError(f"{rel} is not a directory of the repository: give one in params.path")
    try:
        matcher = re.compile(pattern if use_regex else re.escape(pattern))
    except re.error as exc:
        raise StepError(
            f"params.pattern is not a valid regular expression ({exc}): fix it, or leave out "
            "params.regex to search for the text as it is"
        ) from None
    matches, searched, cut = _search(root, start, matcher)
    lines = [f"{path}:{number}: {text}" for path, number, text in matches]
    files = sorted({path for path, _, _ in matches})
    message = f"{len(matches)} match(es) of {pattern!r} in {len(files)} of {searched} file(s)"
    if cut:
        message += f" (stopped at {MAX_MATCHES}: narrow params.path or the pattern)"
    if pathspec is None:
        message += "; .gitignore was not applied (the pathspec package is missing)"
    return success(
        step.operation,
        message,
        content="\n".join(lines),
        matches=[{"file": p, "line": n, "text": t} for p, n, t in matches],
        files=files,
        truncated=cut,
    )


def _search(root: str, start: str, matcher: re.Pattern) -> tuple[list, int, bool]:
    matches: list[tuple[str, int, str]] = []
    searched = 0
    ignores: dict[str, object] = {}
    # The rules of the directories above the one searched apply too.
    above = os.path.relpath(start, root).replace(os.sep, "/")
    parts = [] if above == "." else above.split("/")
    for depth in range(len(parts)):
        spec = _gitignore(os.path.join(root, *parts[:depth], ".gitignore"))
        if spec is not None:
            ignores["/".join(parts[:depth])] = spec
    for directory, dirnames, filenames in os.walk(start):
        relative_dir = os.path.relpath(directory, root).replace(os.sep, "/")
        relative_dir = "" if relative_dir == "." else relative_dir
        spec = _gitignore(os.path.join(directory, ".gitignore"))
        if spec is not None:
            ignores[relative_dir] = spec
        dirnames[:] = sorted(
            name
            for name in dirnames
            if name not in SKIPPED_DIRS
            and not os.path.islink(os.path.join(directory, name))
            and not _ignored(ignores, _join(relative_dir, name), is_dir=True)
        )
        for name in sorted(filenames):
            rel = _join(relative_dir, name)
            path = os.path.join(directory, name)
            if os.path.islink(path) or _ignored(ignores, rel, is_dir=False):
                continue
            text = _text(path)
            if text is None:
                continue
            searched += 1
            for number, line in enumerate(text.splitlines(), start=1):
                if matcher.search(line):
                    shown = line.strip()
                    if len(shown) > MAX_LINE:
                        shown = shown[: MAX_LINE - 1] + "…"
                    matches.append((rel, number, shown))
                    if len(matches) >= MAX_MATCHES:
                        return matches, searched, True
    return matches, searched, False


def _join(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name


def _gitignore(path: str):
    if pathspec is None or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return pathspec.GitIgnoreSpec.from_lines(handle.read().splitlines())
    except (OSError, ValueError):
        return None


def _ignored(ignores: dict, rel: str, is_dir: bool) -> bool:
    """Whether a ``.gitignore`` of a directory above ``rel`` ignores it (each applies to the
    paths beneath its directory, relative to it)."""
    for directory, spec in ignores.items():
        if directory and not rel.startswith(directory + "/"):
            continue
        inside = rel[len(directory) + 1 :] if directory else rel
        if spec.match_file(inside + "/" if is_dir else inside):
            return True
    return False


def _text(path: str) -> str | None:
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            return None
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    return utf8_text(data, cut=False)
