"""ocflow's side of the Python bridge (embedded in the ocflow binary).

Loads the operation library, runs one step with everything the step prints routed into the
step's log (per thread, so concurrent steps keep their logs apart and ocflow's own stdout
stays clean), and turns the outcome into JSON: a result, an exception with its full
traceback, or a return value that is not a JSON-like dict.
"""

import gc
import importlib
import io
import json
import sys
import threading
import traceback

_local = threading.local()


class HostLLMError(Exception):
    """An LLM call made through ocflow failed; `transient` says whether retrying may help."""

    def __init__(self, kind, transient, message):
        super().__init__(message)
        self.kind = kind
        self.transient = transient


def _complete_from(complete_json):
    """`llm_config["complete"]` for the library, over ocflow's JSON-in, JSON-out callback."""

    def complete(messages, purpose=None, json=False, temperature=None, schema=None):
        call = {"messages": messages, "json": bool(json)}
        # A re-ask asks a little warmer; a schema constrains the answer where the endpoint can.
        if temperature is not None:
            call["temperature"] = float(temperature)
        if schema is not None:
            call["schema"] = schema
        reply = _json_loads(complete_json(_json_dumps(call)))
        error = reply.get("error")
        if error:
            raise HostLLMError(
                error.get("kind"),
                bool(error.get("transient")),
                error.get("message", "LLM call failed"),
            )
        return reply

    return complete


_json_loads = json.loads
_json_dumps = json.dumps


class _StepOutput(io.TextIOBase):
    """A stream that writes to the current thread's step log, or to `fallback` outside a step."""

    def __init__(self, fallback):
        self._fallback = fallback

    def _target(self):
        return getattr(_local, "log", None) or self._fallback

    def write(self, text):
        target = self._target()
        if target is not None:
            target.write(text)
        return len(text)

    def flush(self):
        target = self._target()
        if target is not None:
            target.flush()

    def writable(self):
        return True


def install():
    """Routes sys.stdout and sys.stderr through the per-step logs (once). SIGINT is left to
    ocflow by the interpreter's start (`interpreter.rs`): Python's handler would otherwise be
    chained to ocflow's and raise KeyboardInterrupt inside the next call into the library,
    cancel_all included, which then kills nothing."""
    if not isinstance(sys.stdout, _StepOutput):
        # Outside a step, stray prints go to stderr: stdout belongs to ocflow's --json events.
        sys.stdout = _StepOutput(sys.__stderr__)
        sys.stderr = _StepOutput(sys.__stderr__)


def describe():
    return f"Python {sys.version.split()[0]} at {sys.prefix}"


def load(module_name):
    # An import makes many objects and frees few: the collector would only walk them. What
    # the start made is then frozen, out of every later collection's walk.
    collecting = gc.isenabled()
    gc.disable()
    try:
        module = importlib.import_module(module_name)
    finally:
        if collecting:
            gc.enable()
    gc.freeze()
    if not callable(getattr(module, "execute_operation", None)):
        raise TypeError(
            f"module {module_name} ({getattr(module, '__file__', '?')}) has no callable execute_operation"
        )
    return module


def catalogue(module, folders_json, entry_points):
    """The library's operation catalogue (JSON text) once its plugins are loaded, or None for
    a library without a registry (a --codex-lib module of its own: its built-ins only)."""
    load_plugins = getattr(module, "load_plugins", None)
    describe_all = getattr(module, "catalogue", None)
    if not (callable(load_plugins) and callable(describe_all)):
        return None
    load_plugins(json.loads(folders_json), entry_points=bool(entry_points))
    text = describe_all()
    declarations = _declarations(module)
    if declarations is None:
        return text
    # The library's own declarations of its built-ins go with it: the host installs those,
    # not the ones it was built with, so the library it drives decides what its operations are.
    data = json.loads(text)
    data["declarations"] = declarations
    return json.dumps(data)


def _declarations(module):
    """The text of the library's `operations.json`, or None for a library that ships none."""
    if not hasattr(module, "__path__"):
        return None  # a plain module, not a package: nothing ships beside it
    try:
        from importlib import resources

        declared = resources.files(module.__name__).joinpath("operations.json")
        return declared.read_text(encoding="utf-8") if declared.is_file() else None
    except (TypeError, ValueError, OSError, ModuleNotFoundError):
        return None


def test_commands(module, repo):
    """How the repository at `repo` runs its tests (JSON text: the library's
    `find_test_commands`), or None for a library without that function."""
    find = getattr(module, "find_test_commands", None)
    if not callable(find):
        return None
    return json.dumps(find(repo))


def repo_map(module, repo, files_json, task, budget):
    """The library's map of the repository's definitions for the planner (`map_repository`),
    or None for a library without it."""
    render = getattr(module, "map_repository", None)
    if not callable(render):
        return None
    return render(repo, json.loads(files_json), task, budget)


def preload(module, names_json):
    """Imports the modules of the named operations, for a library that can (see its `preload`)."""
    load = getattr(module, "preload", None)
    if callable(load):
        load(json.loads(names_json))


def run_step(module, instruction_path, llm_config_json, log_path, host_functions):
    llm_config = json.loads(llm_config_json)
    if "complete_json" in host_functions:
        llm_config["complete"] = _complete_from(host_functions["complete_json"])
    with open(log_path, "a", encoding="utf-8", errors="replace") as log:
        _local.log = log
        try:
            result = module.execute_operation(instruction_path, llm_config)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt fail the step too
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            log.write(text)
            return json.dumps(
                {
                    "kind": "exception",
                    "type": type(exc).__name__,
                    "message": str(exc),
                    "traceback": text,
                }
            )
        finally:
            _local.log = None
            log.flush()
    if not isinstance(result, dict):
        return json.dumps(
            {
                "kind": "garbage",
                "message": f"execute_operation returned {type(result).__name__}, not a dict: {repr(result)[:300]}",
            }
        )
    try:
        return json.dumps({"kind": "returned", "result": result}, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return json.dumps(
            {
                "kind": "garbage",
                "message": f"execute_operation returned a dict that is not JSON-like ({exc}): {repr(result)[:300]}",
            }
        )


def cancel(module):
    cancel_all = getattr(module, "cancel_all", None)
    if callable(cancel_all):
        cancel_all()
