"""The registry of operations: built-in schemas, the decorator, plugin loading and running."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import PYTHON_DIR, FakeLLM
from open_codex_lib import execute_operation, registry
from open_codex_lib.operations import OPERATIONS
from open_codex_lib.registry import Param, RegistryError, load_plugins, operation

BUILTIN_ORDER = [
    "read_file",
    "write_file",
    "modify_code",
    "edit_code",
    "refactor_function",
    "analyze_code",
    "execute_shell_command",
    "run_tests",
    "reproduce",
    "generate_summary",
    "ask_model",
    "list_files",
    "search_code",
    "delete_file",
]
OPERATION_KEYS = [
    "name",
    "doc",
    "builtin",
    "source",
    "params",
    "exactly_one_of",
    "writes",
    "runs_commands",
    "needs_llm",
]

COUNT_PLUGIN = """
from open_codex_lib.registry import Param, StepError, operation, staged_file, success


@operation(
    doc="count the lines of a file",
    params=[Param("file_path", "path", required=True, doc="file relative to the repository root")],
)
def count_lines(step, llm_config):
    with open(staged_file(step, step.params["file_path"]), encoding="utf-8") as handle:
        lines = sum(1 for _ in handle)
    return success(step.operation, f"{lines} lines", lines=lines)


@operation(
    doc="repeat a word",
    params=[
        Param("word", "string", required=True),
        Param("times", "integer"),
        Param("loud", "boolean"),
        Param("folder", "directory"),
    ],
)
def repeat(step, llm_config):
    if step.params["word"] == "nope":
        raise StepError("the word nope is refused: pick another", hint="x")
    if step.params["word"] == "crash":
        raise ValueError("bad\\nthing")
    text = " ".join([step.params["word"]] * step.params.get("times", 1))
    return success(step.operation, text, folder=step.params.get("folder"))
"""


@pytest.fixture(autouse=True)
def clean_registry():
    """Each test starts and ends with the built-ins only."""
    registry.reset_plugins()
    yield
    registry.reset_plugins()


def write_plugins(folder: Path, files: dict[str, str]) -> Path:
    """Write ``{relative path: source}`` under ``folder`` and return it."""
    for rel, source in files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(source), encoding="utf-8")
    return folder


def names() -> list[str]:
    return [info.name for info in registry.operations()]


def run(make_step, operation_name, params, **kwargs):
    """Run a step of ``operation_name`` through ``execute_operation``: ``(result, files)``."""
    files = make_step(operation_name, params, **kwargs)
    return execute_operation(files.path, None), files


# --- Built-ins ---------------------------------------------------------------------------------


def test_builtin_catalogue_shape_and_order():
    data = json.loads(registry.catalogue())
    assert list(data) == ["operations", "problems"]
    assert data["problems"] == []
    assert [op["name"] for op in data["operations"]] == BUILTIN_ORDER
    for op in data["operations"]:
        assert list(op) == OPERATION_KEYS
        assert op["builtin"] is True
        assert op["source"] == "open_codex_lib"
        for param in op["params"]:
            assert list(param) == ["name", "type", "required", "doc"]
    by_name = {op["name"]: op for op in data["operations"]}
    assert by_name["write_file"]["exactly_one_of"] == [
        "content",
        "content_from_step",
        "instructions",
    ]
    assert by_name["write_file"]["params"][2] == {
        "name": "content_from_step",
        "type": "step",
        "required": False,
        "doc": "id of an earlier step whose content to write",
    }
    assert by_name["analyze_code"]["writes"] == ["report_path"]
    assert by_name["list_files"]["params"][0]["type"] == "directory"
    runs = [op["name"] for op in data["operations"] if op["runs_commands"]]
    assert runs == ["execute_shell_command", "run_tests", "reproduce"]
    llm = [op["name"] for op in data["operations"] if op["needs_llm"]]
    assert llm == ["modify_code", "edit_code", "refactor_function", "analyze_code", "ask_model"]
    assert by_name["run_tests"]["params"][1] == {
        "name": "timeout_seconds",
        "type": "integer",
        "required": False,
        "doc": "kill the command (and its children) after this many seconds",
    }


OPERATIONS_FILE = Path(registry.__file__).with_name("operations.json")
PYPROJECT = Path(PYTHON_DIR) / "pyproject.toml"


def test_builtins_are_the_operations_file():
    """The registry's built-ins are operations.json's entries, field for field, in its order:
    the one declaration the ocflow host compiles in too."""
    declared = json.loads(OPERATIONS_FILE.read_text(encoding="utf-8"))["operations"]
    catalogue = json.loads(registry.catalogue())["operations"]
    assert [op["name"] for op in declared] == BUILTIN_ORDER
    for entry, listed in zip(declared, catalogue):
        for key in ("name", "doc", "exactly_one_of", "writes", "runs_commands", "needs_llm"):
            assert listed[key] == entry[key], (entry["name"], key)
        params = [{k: p[k] for k in ("name", "type", "required", "doc")} for p in entry["params"]]
        assert listed["params"] == params
        module, function = entry["implementation"].split(":")
        assert registry.find(entry["name"]).function.__module__ == f"open_codex_lib.{module}"
        assert registry.find(entry["name"]).function.__name__ == function


def test_operations_file_is_package_data():
    """``pip install ./python`` installs operations.json beside the modules that read it."""
    text = PYPROJECT.read_text(encoding="utf-8")
    package_data = text[text.index("[tool.setuptools.package-data]") :].splitlines()[1]
    assert '"operations.json"' in package_data


def test_a_bad_builtin_declaration_is_refused_by_name():
    with pytest.raises(RegistryError, match="built-in operation 'x': implementation 'files'"):
        registry._builtins([{"name": "x", "doc": "y", "implementation": "files"}])
    with pytest.raises(RegistryError, match="writes names 'nope'"):
        registry._builtins(
            [{"name": "x", "doc": "y", "implementation": "files:read_file", "writes": ["nope"]}]
        )


@pytest.mark.parametrize(
    ("operation", "params", "use"),
    [
        ("modify_code", {"instructions": "x"}, ("modify_code", True)),
        ("write_file", {"instructions": "x"}, ("write_file with params.instructions", True)),
        ("write_file", {"content": "x"}, (None, False)),
        ("generate_summary", {}, ("generate_summary", False)),
        ("generate_summary", {"message": "done"}, (None, False)),
        ("read_file", {}, (None, False)),
        ("no_such_operation", {}, (None, False)),
    ],
)
def test_llm_use_follows_the_declaration(operation, params, use):
    from types import SimpleNamespace

    from open_codex_lib.llm import llm_use

    assert llm_use(SimpleNamespace(operation=operation, params=params)) == use


def test_operations_view_follows_the_registry(tmp_path):
    assert list(OPERATIONS) == BUILTIN_ORDER
    assert OPERATIONS["refactor_function"] is OPERATIONS["modify_code"]
    write_plugins(tmp_path, {"count.py": COUNT_PLUGIN})
    assert load_plugins([str(tmp_path)], entry_points=False) == []
    assert list(OPERATIONS) == BUILTIN_ORDER + ["count_lines", "repeat"]
    assert len(OPERATIONS) == 16
    registry.reset_plugins()
    assert "count_lines" not in OPERATIONS


# --- The decorator ----------------------------------------------------------------------------


def noop(step, llm_config):
    """Do nothing at all.

    More text.
    """
    return {}


@pytest.mark.parametrize(
    ("declaration", "complaint"),
    [
        ({"name": "Count"}, "operation name 'Count' is not valid"),
        ({"name": "1count"}, "is not valid"),
        ({"name": "c" * 65}, "at most 64 characters"),
        ({"name": "ok", "doc": " "}, "has no doc"),
        ({"params": [Param("a", "string"), Param("a", "integer")]}, "parameter 'a' twice"),
        ({"params": [Param("Bad-Name", "string")]}, "parameter name 'Bad-Name' is not valid"),
        ({"params": [{"name": "a", "type": "string"}]}, "is not a Param"),
        ({"params": [Param("a", "path")], "writes": ["b"]}, "writes names 'b', which is not"),
        ({"params": [Param("a", "string")], "writes": ["a"]}, "only 'path' parameters"),
        ({"params": [Param("a", "string")], "exactly_one_of": ["a", "c"]}, "names 'c'"),
        ({"params": [Param("a", "string", required=True)], "exactly_one_of": ["a"]}, "both"),
        ({"name": "read_file"}, "is a built-in operation and plugins cannot replace it"),
    ],
)
def test_decorator_refuses_bad_declarations(declaration, complaint):
    with pytest.raises(RegistryError, match=re.escape(complaint)):
        operation(**{"doc": "a doc", **declaration})(noop)
    assert names() == BUILTIN_ORDER
    assert registry.find("read_file").builtin


def test_param_refuses_an_unknown_type_naming_the_allowed_ones():
    with pytest.raises(ValueError, match="use one of string, integer, boolean, path, directory"):
        Param("a", "file")


def test_decorator_defaults_and_refuses_a_second_plugin_of_the_same_name():
    assert operation(params=[Param("a", "string")])(noop) is noop
    info = registry.find("noop")
    assert info.doc == "Do nothing at all."
    assert info.params == (Param("a", "string"),)
    assert info.builtin is False
    assert info.source == __file__
    with pytest.raises(RegistryError, match="'noop' is already registered by .*test_registry"):
        operation(doc="again")(noop)


# --- Loading plugin folders -------------------------------------------------------------------


def test_plugin_folder_files_and_packages_are_loaded_in_order(tmp_path):
    folder = write_plugins(
        tmp_path / "plugins",
        {
            "count.py": COUNT_PLUGIN,
            "zpkg/__init__.py": "from .impl import zed\n",
            "zpkg/impl.py": """
                from open_codex_lib import Param, operation

                @operation(doc="the last one", params=[Param("n", "integer")], name="a_zed")
                def zed(step, llm_config):
                    return {}
                """,
            "_private.py": "raise RuntimeError('never imported')\n",
            ".hidden.py": "raise RuntimeError('never imported')\n",
            "notes.txt": "not a plugin\n",
            "empty_dir/readme.md": "not a package\n",
        },
    )
    assert load_plugins(folder, entry_points=False) == []
    data = json.loads(registry.catalogue())
    assert [op["name"] for op in data["operations"]] == BUILTIN_ORDER + [
        "a_zed",
        "count_lines",
        "repeat",
    ]
    count = data["operations"][-2]
    assert count == {
        "name": "count_lines",
        "doc": "count the lines of a file",
        "builtin": False,
        "source": str(folder / "count.py"),
        "params": [
            {
                "name": "file_path",
                "type": "path",
                "required": True,
                "doc": "file relative to the repository root",
            }
        ],
        "exactly_one_of": [],
        "writes": [],
        "runs_commands": False,
        "needs_llm": False,
    }
    assert data["operations"][-3]["source"] == str(folder / "zpkg")
    module = registry.find("count_lines").function.__module__
    assert re.fullmatch(r"ocflow_plugins\.[0-9a-f]{12}\.count", module)
    assert str(folder) not in sys.path


def test_broken_plugins_are_problems_and_the_rest_keeps_working(tmp_path, make_step):
    folder = write_plugins(
        tmp_path / "plugins",
        {
            "a_syntax.py": "def broken(:\n    pass\n",
            "b_import.py": "import ocflow_no_such_module_anywhere\n",
            "count.py": COUNT_PLUGIN,
            "d_half.py": """
                from open_codex_lib.registry import operation

                @operation(doc="registered, then the file fails")
                def half_done(step, llm_config):
                    return {}

                raise RuntimeError("boom\\nsecond line")
                """,
            "e_builtin.py": """
                from open_codex_lib.registry import operation

                @operation(doc="an impostor")
                def read_file(step, llm_config):
                    return {}
                """,
            "f_same.py": """
                from open_codex_lib.registry import operation

                @operation(doc="count again", name="count_lines")
                def other(step, llm_config):
                    return {}
                """,
            "g_exit.py": "import sys\nsys.exit(3)\n",
        },
    )
    folders = [str(folder), str(tmp_path / "missing"), str(folder / "count.py")]
    found = load_plugins(folders, entry_points=False)
    by_source = {problem["source"]: problem["message"] for problem in found}
    assert list(by_source) == [
        str(folder / name)
        for name in ("a_syntax.py", "b_import.py", "d_half.py", "e_builtin.py", "f_same.py")
    ] + [str(folder / "g_exit.py"), str(tmp_path / "missing"), str(folder / "count.py")]
    assert by_source[str(folder / "a_syntax.py")].startswith("SyntaxError: ")
    assert "line 1" in by_source[str(folder / "a_syntax.py")]
    assert by_source[str(folder / "b_import.py")].startswith(
        "ModuleNotFoundError: No module named 'ocflow_no_such_module_anywhere': install"
    )
    assert by_source[str(folder / "d_half.py")].startswith("RuntimeError: boom second line: ")
    assert by_source[str(folder / "e_builtin.py")] == (
        "RegistryError: operation 'read_file' is a built-in operation and plugins cannot "
        "replace it: give the plugin operation another name"
    )
    assert by_source[str(folder / "f_same.py")].startswith(
        f"RegistryError: operation 'count_lines' is already registered by {folder / 'count.py'}"
    )
    assert by_source[str(folder / "g_exit.py")].startswith("SystemExit: 3")
    assert by_source[str(tmp_path / "missing")].startswith("FileNotFoundError: plugin folder")
    assert by_source[str(folder / "count.py")].startswith("NotADirectoryError: ")
    assert all("\n" not in message for message in by_source.values())

    # All or nothing per file; built-ins untouched; the good plugin works.
    assert names() == BUILTIN_ORDER + ["count_lines", "repeat"]
    assert registry.find("read_file").builtin
    assert not any(name.endswith(".d_half") for name in sys.modules)
    assert json.loads(registry.catalogue())["problems"] == found
    result, _ = run(make_step, "count_lines", {"file_path": "a.txt"}, inputs={"a.txt": "1\n2\n"})
    assert (result["status"], result["lines"]) == ("success", 2)
    result, _ = run(make_step, "read_file", {"file_path": "a.txt"}, inputs={"a.txt": "hi"})
    assert result["content"] == "hi"


def test_loading_twice_registers_and_reports_once(tmp_path):
    folder = write_plugins(
        tmp_path, {"count.py": COUNT_PLUGIN, "bad.py": "import ocflow_no_such_module_anywhere\n"}
    )
    first = load_plugins([str(folder)], entry_points=False)
    second = load_plugins([str(folder) + "/"], entry_points=False)
    assert len(first) == 1
    assert second == first
    assert registry.problems() == first
    assert names() == BUILTIN_ORDER + ["count_lines", "repeat"]


# --- Running plugin operations ----------------------------------------------------------------


@pytest.fixture
def plugins(tmp_path):
    folder = write_plugins(tmp_path / "plugins", {"count.py": COUNT_PLUGIN})
    assert load_plugins([str(folder)], entry_points=False) == []
    return folder


@pytest.mark.parametrize(
    ("params", "complaint"),
    [
        (
            {"word": "a", "colour": "red"},
            (
                "params.colour is not a parameter of repeat: its parameters are "
                "word, times, loud, folder"
            ),
        ),
        ({}, "missing parameter params.word: add it to the step"),
        ({"word": None}, "missing parameter params.word"),
        ({"word": 3}, "params.word must be a string, got integer 3"),
        ({"word": "a", "times": True}, "params.times must be an integer, got boolean True"),
        ({"word": "a", "times": 2.0}, "params.times must be an integer, got number 2.0"),
        ({"word": "a", "times": "2"}, "params.times must be an integer, got string '2'"),
        ({"word": "a", "loud": 1}, "params.loud must be true or false (a boolean), got integer"),
        ({"word": "a", "folder": "/etc"}, "params.folder '/etc' is absolute"),
        ({"word": "a", "folder": "x/../.."}, "contains a '..' component"),
    ],
)
def test_plugin_params_are_checked_before_the_call(plugins, make_step, params, complaint):
    result, _ = run(make_step, "repeat", params)
    assert result["status"] == "failure"
    assert result["operation"] == "repeat"
    assert complaint in result["message"]


def test_plugin_params_several_problems_and_paths_normalised(plugins, make_step):
    result, _ = run(make_step, "repeat", {"times": "x", "other": 1})
    assert result["message"] == (
        "params.other is not a parameter of repeat: its parameters are word, times, loud, "
        "folder; missing parameter params.word: add it to the step; params.times must be an "
        "integer, got string 'x'"
    )
    result, _ = run(make_step, "repeat", {"word": "hi", "times": 2, "folder": "./src//lib/"})
    assert (result["status"], result["message"], result["folder"]) == (
        "success",
        "hi hi",
        "src/lib",
    )
    result, _ = run(make_step, "repeat", {"word": "hi", "folder": "."})
    assert result["folder"] == "."


def test_plugin_exactly_one_of_is_enforced(tmp_path, make_step):
    write_plugins(
        tmp_path,
        {
            "pick.py": """
                from open_codex_lib.registry import Param, operation, success

                @operation(
                    doc="one or the other",
                    params=[Param("a", "string"), Param("b", "step")],
                    exactly_one_of=["a", "b"],
                )
                def pick(step, llm_config):
                    return success(step.operation, "picked")
                """
        },
    )
    assert load_plugins([str(tmp_path)], entry_points=False) == []
    result, _ = run(make_step, "pick", {"a": "x", "b": "y"})
    assert result["message"] == "pick needs exactly one of params.a, params.b (found: a, b)"
    result, _ = run(make_step, "pick", {})
    assert result["message"].endswith("(found: none)")
    assert run(make_step, "pick", {"b": "step1"})[0]["status"] == "success"


def test_plugin_errors_become_failures(plugins, make_step):
    result, _ = run(make_step, "repeat", {"word": "nope"})
    assert result["status"] == "failure"
    assert result["message"] == "the word nope is refused: pick another"
    assert result["hint"] == "x"

    result, _ = run(make_step, "repeat", {"word": "crash"})
    assert result["status"] == "failure"
    assert result["message"] == (
        f"plugin operation repeat ({plugins / 'count.py'}) raised ValueError: bad thing"
    )
    assert "Traceback" in result["traceback"]
    assert 'raise ValueError("bad\\nthing")' in result["traceback"]
    assert result["output_files"] == [] and result["deleted_files"] == []


def test_a_long_traceback_is_cut(tmp_path, make_step):
    write_plugins(
        tmp_path,
        {
            "deep.py": """
                from open_codex_lib.registry import operation

                def down(n):
                    if n == 0:
                        raise RecursionError("too deep " + "x" * 5000)
                    return down(n - 1)

                @operation(doc="recurse and fail")
                def deep(step, llm_config):
                    return down(200)
                """
        },
    )
    assert load_plugins([str(tmp_path)], entry_points=False) == []
    result, _ = run(make_step, "deep", {})
    assert result["message"].startswith("plugin operation deep (")
    assert "RecursionError: too deep xxx" in result["message"]
    assert len(result["traceback"]) <= registry.TRACEBACK_LIMIT + 4
    assert result["traceback"].startswith("...\n")


@pytest.mark.parametrize(
    ("returned", "complaint"),
    [
        ("None", "returned NoneType, not a result dict"),
        ("{'status': 'ok', 'message': 'm'}", "returned status 'ok'"),
        ("{'status': 'success'}", "without a message string"),
        ("{'status': 'success', 'message': 'm', 'output_files': 'a'}", "output_files that is"),
        ("{'status': 'success', 'message': 'm', 'x': object()}", "is not JSON (TypeError"),
    ],
)
def test_a_malformed_plugin_result_is_a_failure(tmp_path, make_step, returned, complaint):
    write_plugins(
        tmp_path,
        {
            "odd.py": f"""
                from open_codex_lib.registry import operation

                @operation(doc="return something odd")
                def odd(step, llm_config):
                    return {returned}
                """
        },
    )
    assert load_plugins([str(tmp_path)], entry_points=False) == []
    result, _ = run(make_step, "odd", {})
    assert result["status"] == "failure"
    assert complaint in result["message"]
    assert result["message"].endswith("return open_codex_lib.registry.success(...) or failure(...)")


def docstring_example() -> str:
    """The plugin example of the registry's module docstring."""
    doc = registry.__doc__
    start = doc.index("    from open_codex_lib.registry import")
    return textwrap.dedent(doc[start : doc.index("\nLoading problems", start)])


def test_the_documented_example_runs_end_to_end(tmp_path, make_step):
    folder = write_plugins(tmp_path / "plugins", {"example.py": docstring_example()})
    assert load_plugins([str(folder)], entry_points=False) == []
    assert registry.find("shout").writes == ("file_path",)

    result, files = run(
        make_step, "count_lines", {"file_path": "src/a.py"}, inputs={"src/a.py": "a\nb\nc\n"}
    )
    assert result == {
        "status": "success",
        "operation": "count_lines",
        "message": "src/a.py has 3 lines",
        "output_files": [],
        "deleted_files": [],
        "lines": 3,
    }
    result, _ = run(make_step, "count_lines", {"file_path": "gone.py"})
    assert result["status"] == "failure"
    assert result["message"].startswith("file not found: gone.py")

    result, files = run(make_step, "shout", {"file_path": "out/loud.txt", "text": "hey"})
    assert result["status"] == "success"
    assert result["output_files"] == ["out/loud.txt"]
    assert (files.output_dir / "out" / "loud.txt").read_text() == "HEY"


def test_the_readme_shows_the_documented_example():
    assert docstring_example().strip() in (PYTHON_DIR / "README.md").read_text(encoding="utf-8")


def test_a_plugin_needing_an_llm_gets_the_hosts_complete(tmp_path, make_step):
    write_plugins(
        tmp_path,
        {
            "ask.py": """
                from open_codex_lib.registry import Param, operation, success

                @operation(doc="ask the model", params=[Param("q", "string")], needs_llm=True)
                def ask(step, llm_config):
                    answer = llm_config["complete"]([{"role": "user", "content": "hi"}])
                    return success(step.operation, answer["content"], llm_calls=1)
                """
        },
    )
    assert load_plugins([str(tmp_path)], entry_points=False) == []
    files = make_step("ask", {"q": "x"})
    result = execute_operation(files.path, {"complete": FakeLLM("hello"), "api_key": "sk-x"})
    assert (result["status"], result["message"], result["llm_calls"]) == ("success", "hello", 1)
    result = execute_operation(files.path, None)
    assert result["status"] == "failure"
    assert result["message"] == (
        "operation ask needs an LLM: run it from ocflow with an endpoint configured"
    )
    assert result["llm_calls"] == 0


# --- Entry points -----------------------------------------------------------------------------


def make_distribution(site: Path, dist: str, entry_points: str, modules: dict[str, str]) -> None:
    """A minimal installed distribution under ``site``: its dist-info and its modules."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[open_codex_lib.operations]\n" + textwrap.dedent(entry_points)
    )
    write_plugins(site, modules)


def test_entry_points_are_loaded(tmp_path, monkeypatch, make_step):
    site = tmp_path / "site"
    make_distribution(
        site,
        "ocflow-test-plugins",
        """
        ep_function = ocflow_test_ep_one:shout
        ep_module = ocflow_test_ep_two
        ep_broken = ocflow_test_ep_broken:thing
        ep_plain = ocflow_test_ep_plain:plain
        """,
        {
            "ocflow_test_ep_one.py": """
                from open_codex_lib.registry import operation, success

                @operation(doc="shout")
                def shout(step, llm_config):
                    return success(step.operation, "HEY")
                """,
            "ocflow_test_ep_two.py": """
                from open_codex_lib.registry import operation, success

                @operation(doc="whisper")
                def whisper(step, llm_config):
                    return success(step.operation, "hey")
                """,
            "ocflow_test_ep_broken.py": "import ocflow_no_such_module_anywhere\n",
            "ocflow_test_ep_plain.py": "def plain(step, llm_config):\n    return {}\n",
        },
    )
    monkeypatch.syspath_prepend(str(site))
    found = load_plugins([])
    assert found == [
        {
            "source": "entry point ep_broken (ocflow-test-plugins)",
            "message": "ModuleNotFoundError: No module named 'ocflow_no_such_module_anywhere': "
            "install what it imports for the Python ocflow uses, or remove the plugin",
        },
        {
            "source": "entry point ep_plain (ocflow-test-plugins)",
            "message": "RegistryError: ocflow_test_ep_plain:plain is not an operation: "
            "decorate it with @open_codex_lib.registry.operation",
        },
    ]
    assert names() == BUILTIN_ORDER + ["shout", "whisper"]
    assert registry.find("shout").source == "entry point ep_function (ocflow-test-plugins)"
    assert load_plugins([]) == found
    assert registry.problems() == found
    assert load_plugins([], entry_points=False) == []
    result, _ = run(make_step, "whisper", {})
    assert (result["status"], result["message"]) == ("success", "hey")

    registry.reset_plugins()
    assert "ocflow_test_ep_one" not in sys.modules
    assert load_plugins([], entry_points=False) == []
    assert names() == BUILTIN_ORDER
    assert len(load_plugins([])) == 2
    assert names() == BUILTIN_ORDER + ["shout", "whisper"]


# --- The command line -------------------------------------------------------------------------


def run_cli(*args):
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    return subprocess.run(
        [sys.executable, "-m", "open_codex_lib", *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd="/",
    )


def test_cli_catalogue_lists_plugins_and_problems(tmp_path):
    folder = write_plugins(tmp_path / "plugins", {"count.py": COUNT_PLUGIN})
    proc = run_cli("catalogue", "--plugins", str(folder))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [op["name"] for op in data["operations"]] == BUILTIN_ORDER + ["count_lines", "repeat"]
    assert data["problems"] == []

    write_plugins(folder, {"bad.py": "def broken(:\n"})
    proc = run_cli("catalogue", "--plugins", str(folder), str(tmp_path / "none"))
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert [p["source"] for p in data["problems"]] == [
        str(folder / "bad.py"),
        str(tmp_path / "none"),
    ]
    assert f"plugin problem: {folder / 'bad.py'}: SyntaxError: " in proc.stderr

    proc = run_cli("catalogue", "--no-entry-points")
    assert proc.returncode == 0
    assert [op["name"] for op in json.loads(proc.stdout)["operations"]] == BUILTIN_ORDER


def test_cli_runs_a_plugin_step(tmp_path, make_step):
    folder = write_plugins(tmp_path / "plugins", {"count.py": COUNT_PLUGIN})
    files = make_step("count_lines", {"file_path": "a.txt"}, inputs={"a.txt": "1\n"})
    proc = run_cli(files.path, "--plugins", str(folder), "--no-entry-points")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["lines"] == 1
    proc = run_cli(files.path)
    assert proc.returncode == 1
    assert "unknown operation 'count_lines'" in json.loads(proc.stdout)["message"]


def test_a_param_with_a_non_boolean_required_or_a_non_string_doc_is_refused():
    with pytest.raises(registry.RegistryError, match="required must be True or False"):
        Param("n", "string", required=1)
    with pytest.raises(registry.RegistryError, match="doc must be a string"):
        Param("n", "string", doc=None)


# --- Preloading --------------------------------------------------------------------------------


def test_preload_imports_the_modules_of_the_named_builtins_only():
    # A fresh interpreter: the test session has imported every module already.
    script = textwrap.dedent(
        """
        import sys
        import open_codex_lib
        from open_codex_lib import registry

        @registry.operation(doc="answers pong")
        def ping(step, llm_config):
            return {"status": "success"}

        ping.preload = lambda: print("a plugin's own attribute was called")

        lazy = ["open_codex_lib.code_edit", "open_codex_lib.commands", "open_codex_lib.files"]
        before = [name in sys.modules for name in lazy]
        # Unknown names and plugin operations are skipped, not errors.
        open_codex_lib.preload(["modify_code", "read_file", "no_such_operation", "ping"])
        print(before, [name in sys.modules for name in lazy])
        """
    )
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    proc = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[False, False, False] [True, False, True]"


def test_preload_leaves_a_failing_import_to_the_step(monkeypatch):
    info = registry.find("modify_code")
    assert info is not None and callable(info.function.preload)

    def broken(name, package=None):
        raise ImportError(f"no module {name}")

    monkeypatch.setattr(registry.importlib, "import_module", broken)
    registry.preload(["modify_code"])  # does not raise
    with pytest.raises(ImportError):
        info.function.preload()
