"""syntax.check: valid files of every language pass, broken ones name the line, missing
grammars are reported with the pip command that installs them."""

import sys
import threading

import pytest
from open_codex_lib import syntax
from open_codex_lib.syntax import SyntaxCheck, check
from syntax_samples import VALID

LANGUAGES = {
    "Card.tsx": "tsx",
    "Cargo.toml": "toml",
    "Main.java": "java",
    "app.mjs": "javascript",
    "app.rb": "ruby",
    "ci.yml": "yaml",
    "component.jsx": "javascript",
    "deploy.sh": "bash",
    "deploy.yaml": "yaml",
    "index.php": "php",
    "lib.rs": "rust",
    "list.h": "c",
    "main.go": "go",
    "package.json": "json",
    "pyproject.toml": "toml",
    "service.ts": "typescript",
    "shapes.cpp": "cpp",
    "shapes.hpp": "cpp",
    "tsconfig.json": "json",
    "util.c": "c",
    "utils.py": "python",
    "widget.h": "cpp",
}


@pytest.fixture
def fresh_grammars(monkeypatch):
    """Forget the grammars and parsers loaded so far, as in a new process."""
    monkeypatch.setattr(syntax, "_LANGUAGES", {})
    monkeypatch.setattr(syntax, "_THREAD", threading.local())


def test_every_sample_is_named_with_its_language():
    assert sorted(VALID) == sorted(LANGUAGES)


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_files_of_every_language_pass(name):
    assert check(f"src/{name}", VALID[name]) == SyntaxCheck(LANGUAGES[name], True)


@pytest.mark.parametrize(
    ("path", "text", "language"),
    [
        ("a.cjs", "module.exports = { add: (a, b) => a + b };\n", "javascript"),
        ("a.mts", "export const x: number = 1;\n", "typescript"),
        ("a.cts", "export = function f(): void {};\n", "typescript"),
        ("a.cc", "int main() { return 0; }\n", "cpp"),
        ("a.cxx", "template <class T> T id(T x) { return x; }\n", "cpp"),
        ("a.hh", "class A { int x = 0; };\n", "cpp"),
        ("run.bash", 'for f in *; do echo "$f"; done\n', "bash"),
        ("a.yml", "- a\n- b: [1, 2]\n", "yaml"),
        ("settings.jsonc", '{"a": 1, // note\n}\n', "json"),
        ("stub.pyi", "def f(x: int) -> str: ...\n", "python"),
        ("UPPER.JS", "export default 1;\n", "javascript"),
    ],
)
def test_every_extension_has_its_language(path, text, language):
    assert check(path, text) == SyntaxCheck(language, True)


# path, broken content (a closing brace dropped, a paren left open, a stray token, a quote not
# closed, an indentation or comma wrong), the error reported.
BROKEN = [
    (
        "math.js",
        (
            "export function add(a, b) {\n  return a + b;\n}\n\nexport function divide(a, b) {\n"
            '  if (b === 0) {\n    throw new RangeError("division by zero");\n  return a / b;\n}\n'
        ),
        "line 9, column 2: missing `}` to close the `{` on line 5 (line 9: `}`)",
    ),
    (
        "math.js",
        "export function add(a, b) {\n  return Math.max((a + b, 0);\n}\n",
        "line 2, column 29: missing `)` (line 2: `return Math.max((a + b, 0);`)",
    ),
    (
        "math.mjs",
        "export function add(a, b) {\n  return a + b;\n}\n)\nexport const one = 1;\n",
        "line 4, column 1: unexpected `)` (line 4: `)`)",
    ),
    (
        "clamp.ts",
        (
            "export function clamp<T extends number>(value: T, min: T, max: T): number {\n"
            "  if (value < min) {\n    return min;\n  return Math.min(value, max);\n}\n"
        ),
        "line 5, column 2: missing `}` to close the `{` on line 1 (line 5: `}`)",
    ),
    (
        "Hello.tsx",
        "export function Hello({ name }: { name: string }) {\n  return <p>Hello {name}</p>;\n",
        (
            "line 2, column 30: missing `}` to close the `{` on line 1 "
            "(line 2: `return <p>Hello {name}</p>;`)"
        ),
    ),
    (
        "math.go",
        (
            "package math\n\nfunc Divide(a, b float64) (float64, error) {\n\tif b == 0 {\n"
            "\t\treturn 0, ErrZero\n\treturn a / b, nil\n}\n"
        ),
        "at the end of the file (after line 7): missing `}` to close the `{` on line 3",
    ),
    (
        "math.go",
        "package math\n\nfunc Add(a, b int) int {\n\treturn (a + b\n}\n",
        "line 4, column 15: missing `)` (line 4: `return (a + b`)",
    ),
    (
        "src/lib.rs",
        (
            "pub fn divide(a: f64, b: f64) -> Option<f64> {\n    if b == 0.0 {\n        return None;\n"
            "    Some(a / b)\n}\n"
        ),
        "at the end of the file (after line 5): the `{` on line 1 is never closed",
    ),
    (
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n}\n",
        "line 4, column 1: unexpected `}` (line 4: `}`)",
    ),
    (
        "Main.java",
        (
            "public class Main {\n    static int add(int a, int b) {\n        return a + b;\n\n"
            "    public static void main(String[] args) {\n        System.out.println(add(1, 2));\n"
            "    }\n}\n"
        ),
        "line 5, column 28: missing `;` (line 5: `public static void main(String[] args) {`)",
    ),
    (
        "add.c",
        "int add(int a, int b) {\n    return (a + b;\n}\n",
        "line 2, column 18: missing `)` (line 2: `return (a + b;`)",
    ),
    (
        "list.h",
        "struct list {\n    int len;\n\nint list_push(struct list *l);\n",
        "at the end of the file (after line 4): the `{` on line 1 is never closed",
    ),
    (
        "geo.cpp",
        "namespace geo {\nint add(int a, int b) {\n    return a + b;\n}\n",
        "line 4, column 2: missing `}` to close the `{` on line 1 (line 4: `}`)",
    ),
    (
        "cart.rb",
        "class Cart\n  def add(a, b)\n    a + b\nend\n",
        "at the end of the file (after line 4): the `class` on line 1 is never finished",
    ),
    (
        "add.php",
        "<?php\nfunction add($a, $b) {\n    return $a + $b;\n",
        "at the end of the file (after line 3): the `{` on line 2 is never closed",
    ),
    (
        "build.sh",
        "if [ -f x ]; then\n  echo yes\n",
        "at the end of the file (after line 2): missing `fi`",
    ),
    (
        "package.json",
        '{\n  "name": "x"\n  "version": "1.0.0"\n}\n',
        'line 3, column 3: expecting \',\' delimiter (line 3: `"version": "1.0.0"`)',
    ),
    (
        "package.json",
        '{\n  "name": "x,\n  "version": "1.0.0"\n}\n',
        (
            "line 2, column 14: invalid control character in a string (is a string not closed?) "
            '(line 2: `"name": "x,`)'
        ),
    ),
    (
        ".github/workflows/ci.yml",
        "jobs:\n  test:\n    runs-on: ubuntu-latest\n     steps: []\n",
        "line 4, column 11: unexpected `:` (line 4: `steps: []`)",
    ),
    (
        "ci.yaml",
        'name: "CI\non: push\n',
        'line 1, column 7: unexpected `"CI` (line 1: `name: "CI`)',
    ),
    (
        "Cargo.toml",
        '[package]\nname = "demo\nversion = "0.1.0"\n',
        "line 2, column 13: illegal character '\\n' (line 2: `name = \"demo`)",
    ),
    (
        "Cargo.toml",
        '[package]\nauthors = ["a" "b"]\n',
        'line 2, column 16: unclosed array (line 2: `authors = ["a" "b"]`)',
    ),
]


@pytest.mark.parametrize(("path", "text", "error"), BROKEN)
def test_broken_files_name_the_line(path, text, error):
    result = check(path, text)
    assert result.checked is True
    assert result.error == error
    assert not result.ok


def test_python_keeps_the_compile_error():
    assert check("a.py", "x = 1\ndef f(:\n") == SyntaxCheck(
        "python", True, "SyntaxError: invalid syntax (line 2: def f(:)"
    )


def test_unknown_extension_is_not_checked():
    assert check("lib/app.ex", "defmodule App do\n") == SyntaxCheck(
        None, False, reason="no grammar for .ex files"
    )
    assert check("Makefile", "all:\n") == SyntaxCheck(
        None, False, reason="no grammar for files without an extension (Makefile)"
    )
    assert check("notes.md", "# Notes\n").fields() == {
        "language": None,
        "checked": False,
        "reason": "no grammar for .md files",
    }


def test_fields_of_a_checked_file():
    assert check("a.js", "let a = 1;\n").fields() == {"language": "javascript", "checked": True}


def test_missing_grammar_is_not_checked_with_the_pip_command(monkeypatch, fresh_grammars):
    monkeypatch.setitem(sys.modules, "tree_sitter_go", None)  # import raises ImportError
    result = check("main.go", "this is not go {\n")
    assert result == SyntaxCheck(
        "go",
        False,
        reason="the tree-sitter grammar for Go is not installed (pip install tree-sitter-go)",
    )
    assert result.ok  # nothing holds the content back
    assert check("app.js", "let a = 1;\n") == SyntaxCheck("javascript", True)


def test_missing_tree_sitter_is_not_checked_with_the_pip_command(monkeypatch, fresh_grammars):
    monkeypatch.setitem(sys.modules, "tree_sitter", None)
    assert check("app.ts", "let a: = ;\n") == SyntaxCheck(
        "typescript",
        False,
        reason="tree-sitter, which parses TypeScript, is not installed "
        "(pip install tree-sitter tree-sitter-typescript)",
    )
    # Python, JSON and TOML need no tree-sitter.
    assert check("a.py", "x = 1\n") == SyntaxCheck("python", True)
    assert check("a.json", "[1, 2\n").error is not None
    assert check("a.toml", "a = 1\n") == SyntaxCheck("toml", True)


def test_grammar_that_does_not_load_is_not_checked(monkeypatch, fresh_grammars):
    import tree_sitter_rust

    def broken():
        raise ValueError("Incompatible Language version 99")

    monkeypatch.setattr(tree_sitter_rust, "language", broken)
    result = check("lib.rs", "fn main() {}\n")
    assert result.checked is False and result.ok
    assert result.reason == (
        "the tree-sitter grammar for Rust does not load (Incompatible Language version 99) "
        "(pip install --upgrade tree-sitter tree-sitter-rust)"
    )


def test_a_header_missing_one_grammar_is_not_checked(monkeypatch, fresh_grammars):
    monkeypatch.setitem(sys.modules, "tree_sitter_cpp", None)
    result = check("widget.h", VALID["widget.h"])
    assert result.checked is False and result.ok
    assert "pip install tree-sitter-cpp" in result.reason


def test_c_conditionals_that_split_braces_pass():
    header = (
        '#ifdef __cplusplus\nextern "C" {\n#endif\nint f(void);\n#ifdef __cplusplus\n}\n#endif\n'
    )
    assert check("f.h", header) == SyntaxCheck("c", True)
    both_branches = (
        "#if defined(WIDE)\nint scale(int a, int b) {\n#else\nint scale(int a) {\n#endif\n"
        "    return a;\n}\n"
    )
    assert check("scale.c", both_branches) == SyntaxCheck("c", True)
    assert check("scale.c", both_branches.replace("    return a;\n}\n", "")).error is not None


def test_jsonc_comments_and_trailing_commas_pass_but_not_errors():
    assert check("tsconfig.json", '{"a": [1, 2,], /* x */ "b": "//x",}\n').ok
    assert check("tsconfig.json", '{"a": [1,, 2]}\n').error == (
        'line 1, column 10: expecting value (line 1: `{"a": [1,, 2]}`)'
    )


def test_templated_data_files_are_not_held_to_the_format():
    result = check("templates/deploy.yaml", "{{- if .Values.on }}\nkind: Service\n{{- end }}\n")
    assert result.checked is False and result.ok
    assert result.reason.startswith("it holds template tags ({{ … }} or {% … %}), so it is not")
    assert "plain YAML (" in result.reason


def test_checks_from_many_threads_agree(fresh_grammars):
    results = {}

    def work(index):
        results[index] = [check(name, VALID[name]) for name in ("main.go", "lib.rs", "app.mjs")]
        results[index].append(check("math.go", BROKEN[5][1]))

    threads = [threading.Thread(target=work, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first = results[0]
    assert all(result == first for result in results.values())
    assert [result.ok for result in first] == [True, True, True, False]


BIG_FUNCTION = """\
export async function load{n}(file, {{ retries = 3, ...rest }} = {{}}) {{
  for (let attempt = 0; attempt < retries; attempt += 1) {{
    try {{
      const text = await readFile(`${{file}}.{n}`, "utf8");
      return JSON.parse(text)?.data?.[{n}] ?? rest;
    }} catch {{
      await new Promise((resolve) => setTimeout(resolve, 2 ** attempt * 10));
    }}
  }}
}}
"""


def five_thousand_lines(template: str) -> str:
    text = "".join(template.format(n=n) for n in range(500))
    assert len(text.splitlines()) == 5000
    return text


def test_a_five_thousand_line_file_is_checked_whole():
    """Its time (well under 100 ms) is measured by scripts/bench-responsiveness."""
    text = five_thousand_lines(BIG_FUNCTION)
    assert check("big.mjs", text) == SyntaxCheck("javascript", True)
    broken = text.replace("    } catch", "    catch", 1)  # a brace dropped in the first function
    assert broken != text
    found = check("big.mjs", broken)
    assert found.checked and found.error is not None, found
