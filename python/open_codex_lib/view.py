"""The repository view a command step runs in, as the library reads it.

Usually the step's ``work_dir`` is the view. When ocflow shows the view to commands through an
overlay (``[sandbox] overlay = true``), ``work_dir`` is only the overlay's mount point, which
the command alone sees: the view is then the union of its layers (``sandbox.view_layers``, top
first: the directory the command's writes land in, then the read-only ones). The overlay's
rules (whiteouts, opaque directories, a file hiding a directory beneath) have one home, the
host's ``task/overlay_rules.rs``: this class asks the host (the ``ocflow_host`` module the
bridge puts in the embedded interpreter) what shows where, and keeps no copy of the rules.
"""

from __future__ import annotations

import os
from collections.abc import Iterator


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
        if self.layers:
            return _host().view_path(self.layers, relative)
        parts = [part for part in relative.split("/") if part and part != "."]
        found = os.path.join(self.work_dir, *parts)
        return found if os.path.lexists(found) else None

    def isfile(self, relative: str) -> bool:
        found = self.resolve(relative)
        return found is not None and os.path.isfile(found)

    def resolve(self, relative: str) -> str | None:
        """Like :meth:`path`, following a symlink there through the view (a relative target
        may lie in another layer); None for a dangling link or one leading out of the view."""
        if self.layers:
            return _host().view_resolve(self.layers, relative)
        return self.path(relative)

    def walk(self) -> Iterator[tuple[str, list[str], list[str]]]:
        """Like :func:`os.walk` (top-down, ``dirnames`` may be pruned in place), with paths
        relative to the view and symlinks never followed."""
        if not self.layers:
            for directory, dirnames, filenames in os.walk(self.work_dir):
                yield os.path.relpath(directory, self.work_dir), dirnames, filenames
            return
        yield from self._walk(".")

    def _walk(self, relative: str):
        dirnames, filenames = _host().view_listing(self.layers, relative)
        yield relative, dirnames, filenames
        for name in dirnames:
            yield from self._walk(name if relative == "." else f"{relative}/{name}")


def _host():
    """The host's functions: only ocflow passes layers, and it runs the library embedded."""
    try:
        import ocflow_host
    except ImportError as exc:
        raise RuntimeError(
            "a view made of layers is read through ocflow's host functions (ocflow_host), "
            "which exist only when ocflow runs the library"
        ) from exc
    return ocflow_host
