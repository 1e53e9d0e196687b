"""open_codex_lib: runs one ocflow step described by an ``open_codex_instructions.md`` file.

The ocflow host (Rust, through pyo3) calls:

* :func:`execute_operation` ``(instruction_file_path, llm_config) -> dict``:
  runs the step and returns its result dict; user errors come back as
  ``{"status": "failure", ...}``, never as exceptions.
* :func:`cancel_all` ``()``: kills every command this library is running in
  this process (on Ctrl-C / SIGTERM).
* :func:`parse_instructions` ``(path) -> Step``: reads the step block of an
  instructions file (raises :class:`InstructionsError`).
* :func:`load_plugins` ``(folders, entry_points=True) -> list[dict]`` and
  :func:`catalogue` ``() -> str``: loads plugin operations and lists every
  operation with its parameters as JSON (:mod:`.registry`).
* :func:`preload` ``(names)``: imports the modules of the named built-in
  operations now (each is imported at its first step otherwise).

Plugin authors use :func:`operation` and :class:`Param` (see :mod:`.registry`).

Several steps may run concurrently in threads of one process: the library
never changes the current directory or ``os.environ``.
"""

from .instructions import InstructionsError, Step, parse_instructions
from .operations import execute_operation
from .registry import Param, catalogue, load_plugins, operation, preload
from .repo_map import render as map_repository
from .testing_commands import find_test_commands

__version__ = "0.1.0"


def cancel_all() -> None:
    """SIGKILL the process group of every command running under this library (see
    :func:`.process.cancel_all`; that module is imported when a command first runs)."""
    from .process import cancel_all as cancel

    cancel()


__all__ = [
    "InstructionsError",
    "Param",
    "Step",
    "__version__",
    "cancel_all",
    "catalogue",
    "execute_operation",
    "find_test_commands",
    "load_plugins",
    "map_repository",
    "operation",
    "parse_instructions",
    "preload",
]
