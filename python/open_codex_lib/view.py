"""The repository view a command step runs in, as the library reads it.

Usually the step's ``work_dir`` is the view. When ocflow shows the view to commands through an
overlay (``[sandbox] overlay = true``), ``work_dir`` is only the overlay's mount point, which
the command alone sees: the view is then the union of its layers (``sandbox.view_layers``, top
first: the directory the command's writes land in, then the read-only ones), read here as
overlayfs reads them. A whiteout (a character device 0/0) hides what lies beneath it, a file
hides a directory of a lower layer, and an opaque directory hides the lower layers' content.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

_OPAQUE = ("user.overlay.opaque", "trusted.overlay.opaque")


class View:
    """The view at ``work_dir``, or made of ``layers`` (top first) when given."""

    def __init__(self, work_dir: str, layers: list[str] | None = None):
        self.work_dir = work_dir
        self.layers = list(layers or [])

    @property
    def written(self) -> str:
        """The directory holding every file the command wrote (its overlay's upper directory),
        or the view itself."""
        return self.layers[0] if self.layers else self.work_dir

    def path(self, relative: str) -> str | None:
        """The file or directory showing at ``relative`` (``/``-separated), or None."""
        parts = [part for part in relative.split("/") if part and part != "."]
        if not self.layers:
            found = os.path.join(self.work_dir, *parts)
            return found if os.path.lexists(found) else None
        for layer in self.layers:
            current, sealed = layer, False
            for index, part in enumerate(parts):
                current = os.path.join(current, part)
                try:
                    info = os.lstat(current)
                except OSError:
                    if sealed:
                        return None
                    break
                if _is_whiteout(info):
                    return None
                if index == len(parts) - 1:
                    return current
                if not stat.S_ISDIR(info.st_mode):
                    return None
                sealed = sealed or _is_opaque(current)
            else:
                return layer
        return None

    def isfile(self, relative: str) -> bool:
        found = self.resolve(relative)
        return found is not None and os.path.isfile(found)

    def resolve(self, relative: str) -> str | None:
        """Like :meth:`path`, following a symlink there through the view (a relative target
        may lie in another layer); None for a dangling link or one leading out of the view."""
        for _ in range(40):
            found = self.path(relative)
            if found is None or not self.layers or not os.path.islink(found):
                return found
            target = os.readlink(found)
            if os.path.isabs(target):
                return None
            joined = os.path.normpath(os.path.join(os.path.dirname(relative), target))
            if joined == ".." or joined.startswith("../"):
                return None
            relative = joined
        return None

    def walk(self) -> Iterator[tuple[str, list[str], list[str]]]:
        """Like :func:`os.walk` (top-down, ``dirnames`` may be pruned in place), with paths
        relative to the view and symlinks never followed."""
        if not self.layers:
            for directory, dirnames, filenames in os.walk(self.work_dir):
                yield os.path.relpath(directory, self.work_dir), dirnames, filenames
            return
        yield from self._walk(".", list(self.layers))

    def _walk(self, relative: str, sources: list[str]):
        kinds: dict[str, str | None] = {}
        children: dict[str, list[str]] = {}
        sealed: set[str] = set()
        for source in sources:
            try:
                names = sorted(os.listdir(source))
            except OSError:
                continue
            for name in names:
                full = os.path.join(source, name)
                try:
                    info = os.lstat(full)
                except OSError:
                    continue
                kind = kinds.get(name, "")
                if kind == "dir" and stat.S_ISDIR(info.st_mode) and name not in sealed:
                    children[name].append(full)
                    sealed.update([name] if _is_opaque(full) else [])
                elif kind == "":
                    if _is_whiteout(info):
                        kinds[name] = None
                    elif stat.S_ISDIR(info.st_mode):
                        kinds[name], children[name] = "dir", [full]
                        sealed.update([name] if _is_opaque(full) else [])
                    else:
                        kinds[name] = "file"
                elif kind == "dir":
                    # A file or whiteout beneath a directory: hidden by it.
                    sealed.add(name)
        dirnames = sorted(name for name, kind in kinds.items() if kind == "dir")
        filenames = sorted(name for name, kind in kinds.items() if kind == "file")
        yield relative, dirnames, filenames
        for name in dirnames:
            below = name if relative == "." else f"{relative}/{name}"
            yield from self._walk(below, children[name])


def _is_whiteout(info: os.stat_result) -> bool:
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == 0


def _is_opaque(directory: str) -> bool:
    for name in _OPAQUE:
        try:
            if os.getxattr(directory, name, follow_symlinks=False)[:1] == b"y":
                return True
        except OSError:
            continue
    return False
