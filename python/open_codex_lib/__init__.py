"""open_codex_lib: runs one ocflow step described by an ``open_codex_instructions.md`` file.

The ocflow host (Rust, through pyo3) calls:

* :func:`execute_operation` ``(instruction_file_path, llm_config) -> dict``:
  runs the step and returns its result dict; user errors come back as
  ``{"status": "failure", ...}``, never as exceptions.
* :func:`cancel_all` ``()``: kills every command this library is running in
  this process (on Ctrl-C / SIGTERM).
* :func:`parse_instructions` ``(path) -> Step``: reads the step block of an
  instructions file (raises :class:`InstructionsError`).

Several steps may run concurrently in threads of one process: the library
never changes the current directory or ``os.environ``.
"""

from .instructions import InstructionsError, Step, parse_instructions
from .operations import execute_operation
from .process import cancel_all

__version__ = "0.1.0"

__all__ = [
    "InstructionsError",
    "Step",
    "__version__",
    "cancel_all",
    "execute_operation",
    "parse_instructions",
]
