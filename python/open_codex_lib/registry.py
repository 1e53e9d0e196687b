"""The registry of operations (the ToolsRegistry): the built-ins and plugins, with their parameters.

Every operation a step may name is registered here with a declared schema: its parameters
(name, type, required, doc), which of them must be given exactly one at a time, the ``path``
parameters whose files it writes or deletes, and whether it runs commands or needs an LLM.
The ocflow host reads :func:`catalogue` at start-up (``python -m open_codex_lib catalogue``
prints it), and :func:`.operations.run_step` dispatches through the registry.

Plugin operations
-----------------
A plugin is a ``*.py`` file or a package directory (with ``__init__.py``) in a plugin folder
given to :func:`load_plugins`, or a module named by an entry point of the group
``open_codex_lib.operations`` in an installed distribution::

    # pyproject.toml of a distribution
    [project.entry-points."open_codex_lib.operations"]
    count_lines = "my_plugins.count:count_lines"

Each function decorated with :func:`operation` is registered when its module is imported.
It gets the parsed :class:`~.instructions.Step` and the host's ``llm_config`` and returns
a result dict made with :func:`success` or :func:`failure`; raising :class:`StepError`
fails the step with that message.  Before it is called, its parameters are checked
against the declaration (unknown, missing, wrong JSON type; ``path`` and ``directory``
values are normalised, no absolute paths, no ``..``), and with ``needs_llm`` the step
fails unless ``llm_config["complete"]`` is there; any other exception it raises becomes
a failure naming it.  A ``path`` parameter names a repository file that ocflow stages
into the step's ``input/`` (read it with :func:`staged_file`); files written with
:func:`output_target` and listed in ``output_files`` are what the step changes (declare
their parameters in ``writes``).  Built-in operations cannot be replaced, and two plugins
cannot register the same name::

    from open_codex_lib.registry import Param, operation, output_target, staged_file, success

    FILE = Param("file_path", "path", required=True, doc="file relative to the repository root")


    @operation(doc="count the lines of a file", params=[FILE])
    def count_lines(step, llm_config):
        rel = step.params["file_path"]
        with open(staged_file(step, rel), encoding="utf-8") as handle:
            lines = sum(1 for _ in handle)
        return success(step.operation, f"{rel} has {lines} lines", lines=lines)


    @operation(
        doc="write a text, upper-cased, to a file",
        params=[FILE, Param("text", "string", required=True, doc="the text to write")],
        writes=["file_path"],
    )
    def shout(step, llm_config):
        rel = step.params["file_path"]
        with open(output_target(step, rel), "w", encoding="utf-8") as handle:
            handle.write(step.params["text"].upper())
        return success(step.operation, f"wrote {rel}", output_files=[rel])

Loading problems (a missing folder, a plugin that does not import, a refused name) never
stop the built-ins or the other plugins: they are reported by :func:`load_plugins` and in
the catalogue's ``problems``.

A plugin declared with ``runs_commands=True`` works in a full view of the repository
(``step.work_dir``, every earlier change applied; what it changes there is captured) and runs
its commands with :func:`run_in_view`, which applies the step's sandbox, limits and scrubbed
environment::

    @operation(
        doc="run a linter over the repository",
        params=[Param("command", "command", required=True, doc="the linter command")],
        runs_commands=True,
    )
    def lint(step, llm_config):
        outcome = run_in_view(step, step.params["command"])
        if outcome.exit_code != 0:
            return failure(step.operation, f"the linter failed: {outcome.stderr[-500:]}")
        return success(step.operation, "the linter passed", stdout=outcome.stdout)
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import sys
import threading
import traceback
import types
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

from . import llm
from .instructions import Step
from .paths import PathError, normalize_repo_path, output_target, staged_file
from .results import StepError, failure, success

if TYPE_CHECKING:
    from .process import CommandOutcome

__all__ = [
    "ENTRY_POINT_GROUP",
    "PARAM_TYPES",
    "OperationInfo",
    "Param",
    "RegistryError",
    "StepError",
    "catalogue",
    "failure",
    "find",
    "load_plugins",
    "operation",
    "operations",
    "output_target",
    "problems",
    "register",
    "reset_plugins",
    "run_in_view",
    "run_plugin",
    "staged_file",
    "success",
]

# What each parameter type means; every type but integer and boolean is a JSON string.
PARAM_TYPES = {
    "string": "free text",
    "integer": "an integer",
    "boolean": "true or false",
    "path": "a repository-relative file path, staged into the step's input/",
    "directory": "a repository-relative directory",
    "step": "the id of an earlier step whose result the operation reads",
    "command": "a shell command",
}
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
MAX_NAME_LENGTH = 64
ENTRY_POINT_GROUP = "open_codex_lib.operations"
BUILTIN_SOURCE = "open_codex_lib"
PLUGIN_PACKAGE = "ocflow_plugins"
TRACEBACK_LIMIT = 4096

Operation = Callable[[Step, Optional[dict]], dict]


def run_in_view(step: Step, command: str, llm_config: dict | None = None) -> CommandOutcome:
    """Run ``command`` as a command step does: at the repository view (``work_dir``), in the
    step's sandbox, with its time and output limits and a scrubbed environment.

    For plugin operations declared with ``runs_commands=True`` (only those get a view);
    ``timeout_seconds`` among the step's parameters overrides the step's time limit.
    """
    from .commands import run_in_view as run  # here: see _lazy

    return run(step, command, llm_config)


class RegistryError(ValueError):
    """An operation cannot be registered: a bad declaration, or its name is taken."""


@dataclass(frozen=True)
class Param:
    """One declared parameter of an operation (``type`` is a key of :data:`PARAM_TYPES`)."""

    name: str
    type: str
    required: bool = False
    doc: str = ""

    def __post_init__(self):
        if self.type not in PARAM_TYPES:
            raise RegistryError(
                f"parameter {self.name!r} has type {self.type!r}: use one of "
                + ", ".join(PARAM_TYPES)
            )
        if not isinstance(self.required, bool):
            raise RegistryError(
                f"parameter {self.name!r}: required must be True or False, not {self.required!r}"
            )
        if not isinstance(self.doc, str):
            raise RegistryError(f"parameter {self.name!r}: doc must be a string")

    def to_json(self) -> dict:
        """The parameter as the catalogue lists it."""
        return {"name": self.name, "type": self.type, "required": self.required, "doc": self.doc}


@dataclass(frozen=True)
class OperationInfo:
    """A registered operation: its declaration, its function and where it comes from."""

    name: str
    doc: str
    params: tuple[Param, ...]
    exactly_one_of: tuple[str, ...]
    writes: tuple[str, ...]
    runs_commands: bool
    needs_llm: bool
    function: Operation
    builtin: bool
    # "open_codex_lib" for built-ins, else the plugin file or "entry point NAME (DIST)".
    source: str
    # The step needs a model when one of these parameters is given (write_file's instructions).
    needs_llm_with: tuple[str, ...] = ()
    # The step may use a model, and works without, unless one of these is given as text
    # (generate_summary's message).
    may_use_llm_without: tuple[str, ...] = ()

    def __post_init__(self):
        for name in ("params", "exactly_one_of", "writes", "needs_llm_with", "may_use_llm_without"):
            value = getattr(self, name)
            if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
                raise RegistryError(f"operation {self.name!r}: {name} must be a list")
            object.__setattr__(self, name, tuple(value))
        _validate(self)

    def param(self, name: str) -> Param | None:
        """The declared parameter ``name``, or None."""
        return next((param for param in self.params if param.name == name), None)

    def to_json(self) -> dict:
        """The operation as the catalogue lists it."""
        return {
            "name": self.name,
            "doc": self.doc,
            "builtin": self.builtin,
            "source": self.source,
            "params": [param.to_json() for param in self.params],
            "exactly_one_of": list(self.exactly_one_of),
            "writes": list(self.writes),
            "runs_commands": self.runs_commands,
            "needs_llm": self.needs_llm,
        }


def _validate(info: OperationInfo) -> None:
    """Raise :class:`RegistryError` saying what to fix if ``info`` is not a valid declaration."""
    name = info.name
    if not isinstance(name, str) or not NAME_PATTERN.match(name) or len(name) > MAX_NAME_LENGTH:
        raise RegistryError(
            f"operation name {name!r} is not valid: use lower-case letters, digits and _, "
            f"starting with a letter, at most {MAX_NAME_LENGTH} characters"
        )
    if not isinstance(info.doc, str) or not info.doc.strip():
        raise RegistryError(f"operation {name!r} has no doc: say in one line what it does")
    if not callable(info.function):
        raise RegistryError(f"operation {name!r}: its function is not callable")
    seen = set()
    for param in info.params:
        if not isinstance(param, Param):
            raise RegistryError(
                f"operation {name!r}: parameter {param!r} is not a Param: "
                "declare it as Param(name, type, required=..., doc=...)"
            )
        if (
            not isinstance(param.name, str)
            or not NAME_PATTERN.match(param.name)
            or len(param.name) > MAX_NAME_LENGTH
        ):
            raise RegistryError(
                f"operation {name!r}: parameter name {param.name!r} is not valid: use lower-case "
                f"letters, digits and _, starting with a letter, at most {MAX_NAME_LENGTH} "
                "characters"
            )
        if param.name in seen:
            raise RegistryError(f"operation {name!r} declares parameter {param.name!r} twice")
        seen.add(param.name)
    declared = ", ".join(sorted(seen)) or "none"
    for field_name in ("exactly_one_of", "writes", "needs_llm_with", "may_use_llm_without"):
        for param_name in getattr(info, field_name):
            if param_name not in seen:
                raise RegistryError(
                    f"operation {name!r}: {field_name} names {param_name!r}, which is not one of "
                    f"its parameters ({declared})"
                )
    for param_name in info.writes:
        param = info.param(param_name)
        if param.type != "path":
            raise RegistryError(
                f"operation {name!r}: writes names {param_name!r}, a {param.type!r} parameter: "
                "only 'path' parameters name files an operation writes"
            )
    for param_name in info.exactly_one_of:
        if info.param(param_name).required:
            raise RegistryError(
                f"operation {name!r}: {param_name!r} is both required and in exactly_one_of: "
                "make it optional or leave it out of exactly_one_of"
            )


@dataclass
class _Load:
    """One plugin file or entry point being imported, and what it registered so far."""

    source: str
    registered: list[str] = dataclasses.field(default_factory=list)


# Registration happens at start-up, but steps run in threads: the lock keeps the tables whole.
_lock = threading.RLock()
_operations: dict[str, OperationInfo] = {}
# Plugin files (by real path) and entry points already loaded: None, or their problem.
_loaded: dict[str, dict | None] = {}
# Modules to forget in reset_plugins, so a test can load the same plugin again.
_plugin_modules: set[str] = set()
_problems: list[dict] = []
_current: _Load | None = None


def register(info: OperationInfo) -> OperationInfo:
    """Add a plugin operation; raise :class:`RegistryError` if its name is taken."""
    with _lock:
        if info.builtin:
            raise RegistryError(
                f"operation {info.name!r} claims to be built-in: only open_codex_lib registers "
                "built-in operations"
            )
        existing = _operations.get(info.name)
        if existing is not None:
            if existing.builtin:
                raise RegistryError(
                    f"operation {info.name!r} is a built-in operation and plugins cannot "
                    "replace it: give the plugin operation another name"
                )
            raise RegistryError(
                f"operation {info.name!r} is already registered by {existing.source}: "
                "give one of them another name"
            )
        _operations[info.name] = info
        if _current is not None:
            _current.registered.append(info.name)
        return info


def operation(
    *,
    doc: str | None = None,
    params: Iterable[Param] = (),
    name: str | None = None,
    writes: Iterable[str] = (),
    exactly_one_of: Iterable[str] = (),
    runs_commands: bool = False,
    needs_llm: bool = False,
) -> Callable[[Operation], Operation]:
    """Decorator registering ``function(step, llm_config) -> dict`` as a plugin operation.

    ``name`` defaults to the function's name and ``doc`` to the first line of its
    docstring.  Returns the function unchanged.  Raises :class:`RegistryError` for a bad
    declaration or a name already taken.
    """

    def decorate(function: Operation) -> Operation:
        text = doc if doc is not None else (function.__doc__ or "").strip().split("\n")[0]
        with _lock:
            info = OperationInfo(
                name=name if name is not None else getattr(function, "__name__", ""),
                doc=text,
                params=params,
                exactly_one_of=exactly_one_of,
                writes=writes,
                runs_commands=bool(runs_commands),
                needs_llm=bool(needs_llm),
                function=function,
                builtin=False,
                source=_current.source if _current is not None else _source_of(function),
            )
            register(info)
        return function

    return decorate


def _source_of(function: Callable) -> str:
    """Where a function registered outside :func:`load_plugins` comes from."""
    module = sys.modules.get(getattr(function, "__module__", None) or "")
    return getattr(module, "__file__", None) or getattr(function, "__module__", None) or "?"


def find(name: str) -> OperationInfo | None:
    """The registered operation ``name``, or None."""
    return _operations.get(name)


def preload(names: Iterable[str]) -> None:
    """Imports now the modules of the built-in operations ``names``, which are otherwise
    imported at their first step. The host calls it while it sets up a flow's task, so the
    flow's first steps find them ready instead of waiting for one another's import. Unknown
    names are skipped, and a failing import is left for the step to report."""
    for name in names:
        info = find(name)
        load = getattr(info.function, "preload", None) if info and info.builtin else None
        if callable(load):
            try:
                load()
            except Exception:  # noqa: BLE001, S110 - the step's own import reports it
                pass


def operations() -> list[OperationInfo]:
    """Every registered operation: the built-ins in their documented order, then plugins by name."""
    with _lock:
        everything = list(_operations.values())
    builtins = [info for info in everything if info.builtin]
    return builtins + sorted((info for info in everything if not info.builtin), key=_name)


def _name(info: OperationInfo) -> str:
    return info.name


def problems() -> list[dict]:
    """Every problem :func:`load_plugins` reported so far in this process."""
    with _lock:
        return [dict(problem) for problem in _problems]


def catalogue() -> str:
    """The registry as JSON text: ``{"operations": [...], "problems": [...]}`` (see the README)."""
    data = {"operations": [info.to_json() for info in operations()], "problems": problems()}
    return json.dumps(data, indent=2, ensure_ascii=False)


# --- Loading plugins -------------------------------------------------------------------------


def load_plugins(folders: list[str], entry_points: bool = True) -> list[dict]:
    """Import the plugins of ``folders`` (then of the entry points), returning their problems.

    Every ``*.py`` file and package directory directly in each folder is imported, in sorted
    order, skipping names that start with ``_`` or ``.``.  A plugin that fails to import or
    registers a taken name is reported as ``{"source", "message"}`` and whatever it
    registered is removed again; the rest keep working.  Loading the same plugin twice in
    one process imports it once (its problem, if any, is returned again but recorded once).
    """
    if isinstance(folders, (str, os.PathLike)):
        folders = [folders]
    found: list[dict] = []
    with _lock:
        for folder in folders:
            found.extend(_load_folder(folder))
        if entry_points:
            for entry_point in _entry_points():
                found.extend(_load_entry_point(entry_point))
    return found


def _load_folder(folder: str) -> list[dict]:
    path = os.path.abspath(os.fspath(folder))
    if not os.path.exists(path):
        return [
            _record(
                path,
                f"FileNotFoundError: plugin folder {path} does not exist: create it or stop "
                "naming it as a plugin folder",
            )
        ]
    if not os.path.isdir(path):
        return [
            _record(
                path,
                f"NotADirectoryError: plugin folder {path} is not a directory: name the folder "
                "that holds the plugin files",
            )
        ]
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        return [_record(path, f"{type(exc).__name__}: cannot list plugin folder: {exc}")]
    found = []
    import hashlib

    folder_hash = hashlib.sha256(os.path.realpath(path).encode("utf-8")).hexdigest()[:12]
    for entry in names:
        if entry.startswith(("_", ".")):
            continue
        full = os.path.join(path, entry)
        if entry.endswith(".py") and os.path.isfile(full):
            stem, package = entry[: -len(".py")], False
        elif os.path.isfile(os.path.join(full, "__init__.py")):
            stem, package = entry, True
        else:
            continue
        problem = _load_file(full, stem, package, folder_hash)
        if problem is not None:
            found.append(problem)
    return found


def _load_file(path: str, stem: str, package: bool, folder_hash: str) -> dict | None:
    """Import one plugin file or package, all or nothing; return its problem, if any."""
    key = os.path.realpath(path)
    if key in _loaded:
        return _loaded[key]
    module_name = f"{PLUGIN_PACKAGE}.{folder_hash}.{_module_stem(stem)}"
    location = os.path.join(path, "__init__.py") if package else path

    def load() -> None:
        _ensure_parent_packages(folder_hash)
        spec = importlib.util.spec_from_file_location(
            module_name, location, submodule_search_locations=[path] if package else None
        )
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {location} as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        _plugin_modules.add(module_name)
        spec.loader.exec_module(module)

    problem = _guarded_load(path, load, [module_name])
    _loaded[key] = problem
    return problem


def _module_stem(stem: str) -> str:
    """``stem`` as one valid module name component, distinct for distinct stems."""
    clean = re.sub(r"\W", "_", stem)
    if clean == stem and clean.isidentifier():
        return clean
    import hashlib

    return f"_{clean}_{hashlib.sha256(stem.encode('utf-8')).hexdigest()[:6]}"


def _ensure_parent_packages(folder_hash: str) -> None:
    """Empty parent packages so ``ocflow_plugins.<hash>.<stem>`` is a proper dotted name."""
    for name in (PLUGIN_PACKAGE, f"{PLUGIN_PACKAGE}.{folder_hash}"):
        if name not in sys.modules:
            module = types.ModuleType(name, "plugin modules loaded by open_codex_lib.registry")
            module.__path__ = []
            sys.modules[name] = module
            _plugin_modules.add(name)


def _entry_points() -> list:
    """The entry points of :data:`ENTRY_POINT_GROUP`, sorted by name."""
    if not _declared_anywhere(ENTRY_POINT_GROUP):
        return []
    import importlib.metadata  # here: 15 ms to import, for every ocflow start otherwise

    found = importlib.metadata.entry_points()
    if hasattr(found, "select"):
        group = found.select(group=ENTRY_POINT_GROUP)
    else:  # Python 3.9: a dict of groups
        group = found.get(ENTRY_POINT_GROUP, [])
    return sorted(group, key=lambda entry_point: (entry_point.name, entry_point.value))


def _declared_anywhere(group: str) -> bool:
    """Whether any installed distribution on ``sys.path`` declares entry points of ``group``:
    a look at the ``entry_points.txt`` files, far cheaper than ``importlib.metadata``."""
    header = f"[{group}]"
    for base in sys.path:
        try:
            names = os.listdir(base or ".")
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(base, name, "entry_points.txt"), encoding="utf-8") as f:
                    if header in f.read():
                        return True
            except OSError:
                continue
    return False


def _load_entry_point(entry_point) -> list[dict]:
    dist = getattr(entry_point, "dist", None)
    dist_name = getattr(dist, "name", None) or "unknown distribution"
    source = f"entry point {entry_point.name} ({dist_name})"
    key = f"{source} = {entry_point.value}"
    if key in _loaded:
        problem = _loaded[key]
        return [] if problem is None else [problem]
    module_name = entry_point.value.split(":")[0].strip()
    already_imported = module_name in sys.modules

    def load() -> None:
        loaded = entry_point.load()
        if not already_imported:
            _plugin_modules.add(module_name)
        if _current is not None and _current.registered:
            return
        if isinstance(loaded, types.ModuleType):
            module = loaded.__name__
            if any(info.function.__module__ == module for info in _operations.values()):
                return
            raise RegistryError(
                f"module {module} registers no operation: decorate its functions with @operation"
            )
        if not any(info.function is loaded for info in _operations.values()):
            raise RegistryError(
                f"{entry_point.value} is not an operation: decorate it with "
                "@open_codex_lib.registry.operation"
            )

    problem = _guarded_load(source, load, [] if already_imported else [module_name])
    _loaded[key] = problem
    return [] if problem is None else [problem]


def _guarded_load(source: str, load: Callable[[], None], module_names: list[str]) -> dict | None:
    """Run ``load`` with registrations recorded under ``source``; undo them if it fails."""
    global _current
    previous, this = _current, _Load(source)
    _current = this
    try:
        load()
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a plugin must not stop the host
        for name in this.registered:
            _operations.pop(name, None)
        for module_name in module_names:
            _forget_module(module_name)
        return _record(source, _problem_message(exc))
    finally:
        _current = previous
    return None


def _forget_module(module_name: str) -> None:
    """Remove ``module_name`` and its submodules from ``sys.modules``."""
    for name in [n for n in sys.modules if n == module_name or n.startswith(module_name + ".")]:
        del sys.modules[name]


def _problem_message(exc: BaseException) -> str:
    """``"<ExceptionType>: <message>"`` on one line, with what to do where it is known."""
    text = one_line(exc)
    if isinstance(exc, RegistryError):
        return text
    if isinstance(exc, SyntaxError):
        return f"{text}: fix the syntax of the plugin"
    if isinstance(exc, ImportError):
        return f"{text}: install what it imports for the Python ocflow uses, or remove the plugin"
    return f"{text}: the plugin fails when imported; fix it or remove it"


def _record(source: str, message: str) -> dict:
    """Remember a problem once per process and return it."""
    problem = {"source": source, "message": message}
    if problem not in _problems:
        _problems.append(problem)
    return problem


def one_line(exc: BaseException) -> str:
    """``"<ExceptionType>: <message>"`` with the message's whitespace collapsed to one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def reset_plugins() -> None:
    """Forget every plugin operation, loaded plugin and problem (for tests only)."""
    global _current
    with _lock:
        for name in [name for name, info in _operations.items() if not info.builtin]:
            del _operations[name]
        _loaded.clear()
        _problems.clear()
        for module_name in sorted(_plugin_modules):
            _forget_module(module_name)
        _plugin_modules.clear()
        _current = None


# --- Running plugin operations ---------------------------------------------------------------

JSON_TYPE_NAMES = {
    type(None): "null",
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
}


def json_type(value: Any) -> str:
    """The JSON type name of a parsed JSON value."""
    return JSON_TYPE_NAMES.get(type(value), type(value).__name__)


def check_params(info: OperationInfo, params: dict) -> tuple[dict, list[str]]:
    """``(params with paths normalised, problems)`` of ``params`` against the declaration.

    A null value counts as absent, as for the built-ins.
    """
    problems = []
    known = ", ".join(param.name for param in info.params) or "none"
    for name in params:
        if info.param(name) is None:
            problems.append(
                f"params.{name} is not a parameter of {info.name}: its parameters are {known}"
            )
    checked = dict(params)
    for param in info.params:
        value = params.get(param.name)
        if value is None:
            if param.required:
                problems.append(
                    f"missing parameter params.{param.name}: add it to the step"
                    + (f" ({param.doc})" if param.doc else "")
                )
            continue
        problem = _type_problem(param, value)
        if problem is not None:
            problems.append(problem)
            continue
        if param.type in ("path", "directory"):
            try:
                field = f"params.{param.name}"
                checked[param.name] = normalize_repo_path(
                    value, field, allow_root=param.type == "directory"
                )
            except PathError as exc:
                problems.append(str(exc))
    if info.exactly_one_of:
        given = [name for name in info.exactly_one_of if params.get(name) is not None]
        if len(given) != 1:
            options = ", ".join(f"params.{name}" for name in info.exactly_one_of)
            problems.append(
                f"{info.name} needs exactly one of {options} (found: {', '.join(given) or 'none'})"
            )
    return checked, problems


def _type_problem(param: Param, value: Any) -> str | None:
    if param.type == "integer":
        fits = isinstance(value, int) and not isinstance(value, bool)
        expected = "an integer"
    elif param.type == "boolean":
        fits, expected = isinstance(value, bool), "true or false (a boolean)"
    else:
        fits = isinstance(value, str)
        expected = "a string" if param.type == "string" else f"a string ({PARAM_TYPES[param.type]})"
    if fits:
        return None
    return f"params.{param.name} must be {expected}, got {json_type(value)} {value!r}"


def run_plugin(info: OperationInfo, step: Step, llm_config: dict | None) -> dict:
    """Check ``step``'s params against ``info``, call the plugin, and vouch for its result.

    Always returns a result dict: bad parameters, a missing model (``needs_llm``), a
    :class:`StepError`, any other exception and a malformed return value all become
    failures.
    """
    params, problems = check_params(info, step.params)
    if problems:
        return failure(step.operation, "; ".join(problems))
    if info.needs_llm and llm.get_complete(llm_config) is None:
        return llm.unavailable(step, step.operation)
    try:
        result = info.function(dataclasses.replace(step, params=params), llm_config)
    except StepError as exc:
        return failure(step.operation, str(exc), **exc.fields)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a plugin bug must not stop the host
        trace = traceback.format_exc()
        if len(trace) > TRACEBACK_LIMIT:
            trace = "...\n" + trace[-TRACEBACK_LIMIT:]
        return failure(
            step.operation,
            f"plugin operation {info.name} ({info.source}) raised {one_line(exc)}",
            traceback=trace,
        )
    return _checked_result(info, step, result)


def _checked_result(info: OperationInfo, step: Step, result: Any) -> dict:
    """``result`` completed with the common fields, or a failure saying how it is malformed."""

    def malformed(why: str) -> dict:
        return failure(
            step.operation,
            f"plugin operation {info.name} ({info.source}) {why}: return "
            "open_codex_lib.registry.success(...) or failure(...)",
        )

    if not isinstance(result, dict):
        return malformed(f"returned {type(result).__name__}, not a result dict")
    if result.get("status") not in ("success", "failure"):
        return malformed(f"returned status {result.get('status')!r}")
    if not isinstance(result.get("message"), str):
        return malformed("returned a result without a message string")
    for field in ("output_files", "deleted_files"):
        value = result.setdefault(field, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            return malformed(f"returned {field} that is not a list of paths")
    result.setdefault("operation", step.operation)
    try:
        json.dumps(result)
    except (TypeError, ValueError) as exc:
        return malformed(f"returned a result that is not JSON ({one_line(exc)})")
    return result


# --- The built-in operations, declared in operations.json ------------------------------------

# The one declaration of the built-in operations, shipped with the package: this registry and
# the ocflow host (which compiles the same file in) both read it, so adding an operation is a
# change to that file and the function it names. Its entries have the catalogue's shape (what
# plugins declare) plus what only built-ins say: ``implementation`` ("module:function" of this
# package), ``reads``, the LLM conditions, ``commands_only``, ``runs_tests``, ``default_role``
# and ``goal``; the file's ``roles`` are the host's (see python/README.md, "The operations file").
OPERATIONS_FILE = "operations.json"


def _lazy(module: str, name: str) -> Operation:
    """The built-in ``name`` of ``module``, imported at its first call: ocflow imports this
    package at every start, and a flow uses few of the operations (the commands' module and
    its test-report parsers alone took a third of the import)."""

    def load() -> Operation:
        return getattr(importlib.import_module(f".{module}", __package__), name)

    def run(step: Step, llm_config: dict | None) -> dict:
        return load()(step, llm_config)

    run.__name__ = run.__qualname__ = name
    run.__module__ = f"{__package__}.{module}"
    run.preload = load  # type: ignore[attr-defined]
    return run


def declarations() -> list[dict]:
    """The built-in operations as :data:`OPERATIONS_FILE` declares them, in documented order."""
    from importlib import resources

    text = resources.files(__package__).joinpath(OPERATIONS_FILE).read_text(encoding="utf-8")
    return json.loads(text)["operations"]


def _builtins(entries: list[dict]) -> tuple[OperationInfo, ...]:
    """The registered form of the declared built-ins; a bad declaration raises
    :class:`RegistryError` naming the operation, as a plugin's would."""
    # One function per implementation: refactor_function runs modify_code's, as it always did.
    functions: dict[str, Operation] = {}
    built = []
    for entry in entries:
        name = entry.get("name", "?")
        implementation = entry.get("implementation", "")
        module, _, function = implementation.partition(":")
        if not module or not function:
            raise RegistryError(
                f"built-in operation {name!r}: implementation {implementation!r} is not "
                "'module:function'"
            )
        if implementation not in functions:
            functions[implementation] = _lazy(module, function)
        built.append(
            OperationInfo(
                name=name,
                doc=entry.get("doc", ""),
                params=[Param(**_param_fields(p)) for p in entry.get("params", [])],
                exactly_one_of=entry.get("exactly_one_of", []),
                writes=entry.get("writes", []),
                runs_commands=bool(entry.get("runs_commands", False)),
                needs_llm=bool(entry.get("needs_llm", False)),
                function=functions[implementation],
                builtin=True,
                source=BUILTIN_SOURCE,
                needs_llm_with=entry.get("needs_llm_with", []),
                may_use_llm_without=entry.get("may_use_llm_without", []),
            )
        )
    return tuple(built)


def _param_fields(param: dict) -> dict:
    """A declared parameter's fields that :class:`Param` holds (aliases are the host's)."""
    return {key: param[key] for key in ("name", "type", "required", "doc") if key in param}


BUILTINS = _builtins(declarations())

for _info in BUILTINS:
    _operations[_info.name] = _info
del _info
