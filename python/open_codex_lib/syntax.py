"""Syntax checks of a file's new content before it is written, for the common languages.

Code is parsed with tree-sitter grammars (the ``tree-sitter`` package and one
``tree-sitter-<language>`` package per language), which find the first syntax error and its
line. Where Python holds an exact reader it is used instead: ``compile`` for Python (its
messages are the ones models know), ``json`` for JSON (read leniently: comments and trailing
commas, which many tools' JSON files hold, are allowed) and ``tomllib`` for TOML. Without the
package or the grammar, or for a file type with none, the content is "not checked", and
:class:`SyntaxCheck` says why and what to install.

A grammar is loaded once per process, a parser kept per thread: steps run in threads, and a
tree-sitter parser must not be shared between them.
"""

from __future__ import annotations

import importlib
import json
import re
import threading
from dataclasses import dataclass
from typing import Any

from .code_blocks import check_python, extension, is_python


@dataclass(frozen=True)
class Grammar:
    """Where the tree-sitter grammar of one language comes from."""

    name: str  # the language as people write it ("JavaScript")
    module: str  # the Python module of the grammar package
    function: str  # the module's function that returns the grammar
    package: str  # the PyPI package to install


GRAMMARS = {
    "javascript": Grammar(
        "JavaScript", "tree_sitter_javascript", "language", "tree-sitter-javascript"
    ),
    "typescript": Grammar(
        "TypeScript", "tree_sitter_typescript", "language_typescript", "tree-sitter-typescript"
    ),
    "tsx": Grammar("TSX", "tree_sitter_typescript", "language_tsx", "tree-sitter-typescript"),
    "go": Grammar("Go", "tree_sitter_go", "language", "tree-sitter-go"),
    "java": Grammar("Java", "tree_sitter_java", "language", "tree-sitter-java"),
    "rust": Grammar("Rust", "tree_sitter_rust", "language", "tree-sitter-rust"),
    "c": Grammar("C", "tree_sitter_c", "language", "tree-sitter-c"),
    "cpp": Grammar("C++", "tree_sitter_cpp", "language", "tree-sitter-cpp"),
    "ruby": Grammar("Ruby", "tree_sitter_ruby", "language", "tree-sitter-ruby"),
    "php": Grammar("PHP", "tree_sitter_php", "language_php", "tree-sitter-php"),
    "bash": Grammar("Shell", "tree_sitter_bash", "language", "tree-sitter-bash"),
    "yaml": Grammar("YAML", "tree_sitter_yaml", "language", "tree-sitter-yaml"),
}

# The languages a file may be written in, by extension: it passes when one of them reads it
# (a ``.h`` header is C or C++).
LANGUAGES_BY_EXTENSION = {
    ".js": ("javascript",),
    ".mjs": ("javascript",),
    ".cjs": ("javascript",),
    ".jsx": ("javascript",),
    ".ts": ("typescript",),
    ".mts": ("typescript",),
    ".cts": ("typescript",),
    ".tsx": ("tsx",),
    ".go": ("go",),
    ".java": ("java",),
    ".rs": ("rust",),
    ".c": ("c",),
    ".h": ("c", "cpp"),
    ".cc": ("cpp",),
    ".cpp": ("cpp",),
    ".cxx": ("cpp",),
    ".hpp": ("cpp",),
    ".hh": ("cpp",),
    ".rb": ("ruby",),
    ".php": ("php",),
    ".sh": ("bash",),
    ".bash": ("bash",),
    ".json": ("json",),
    ".jsonc": ("json",),
    ".yaml": ("yaml",),
    ".yml": ("yaml",),
    ".toml": ("toml",),
}

NAMES = {"python": "Python", "json": "JSON", "toml": "TOML"}

# Data files are often templates (Helm charts, Ansible, cookiecutter): one that holds template
# tags and does not parse as plain data is not held to the data format.
TEMPLATED = frozenset({"json", "yaml", "toml"})
TEMPLATE_TAGS = ("{{", "{%")

# C and C++ conditionals can open a brace in one branch and close it in another (`extern "C" {`
# under `#ifdef __cplusplus`), which a grammar reading every branch at once refuses.
PREPROCESSED = frozenset({"c", "cpp"})
_CONDITIONAL = re.compile(r"[ \t]*#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b")

CLOSERS = {"}": "{", ")": "(", "]": "["}


@dataclass(frozen=True)
class SyntaxCheck:
    """How a file's content was checked, and the first syntax error found.

    ``checked`` is false when nothing could judge the content; ``reason`` then says why (and
    what to install). ``error`` is the first error when the checked content does not parse:
    ``line N, column M: <what> (line N: `<the line>`)``; for Python, the compile error.
    """

    language: str | None  # "javascript", "python", ...; None when no checker fits the file
    checked: bool
    error: str | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        """True unless the content was checked and does not parse."""
        return self.error is None

    @property
    def language_name(self) -> str:
        """The language as people write it ("JavaScript"); "" when there is none."""
        if self.language in GRAMMARS:
            return GRAMMARS[self.language].name
        return NAMES.get(self.language or "", self.language or "")

    def fields(self) -> dict:
        """The ``syntax_check`` field of a step's result: ``language``, ``checked``, and
        ``reason`` when not checked."""
        fields: dict[str, Any] = {"language": self.language, "checked": self.checked}
        if not self.checked:
            fields["reason"] = self.reason
        return fields


class _Unavailable(Exception):
    """A grammar cannot be loaded; the message says why and what to install."""


def check(rel_path: str, text: str) -> SyntaxCheck:
    """Check that ``text`` parses as the language of ``rel_path`` (chosen by its extension)."""
    if is_python(rel_path):
        return SyntaxCheck("python", True, check_python(text, rel_path))
    languages = LANGUAGES_BY_EXTENSION.get(extension(rel_path), ())
    if not languages:
        return SyntaxCheck(None, False, reason=f"no grammar for {_file_kind(rel_path)}")
    result = _check_language(languages[0], text)
    for language in languages[1:]:
        if result.checked and result.ok:
            break
        result = _choose(result, _check_language(language, text))
    if not result.ok and result.language in TEMPLATED and any(tag in text for tag in TEMPLATE_TAGS):
        return SyntaxCheck(
            result.language,
            False,
            reason=f"it holds template tags ({{{{ … }}}} or {{% … %}}), so it is not plain "
            f"{result.language_name} ({result.error})",
        )
    return result


def availability() -> dict[str, str | None]:
    """Each grammar's language, with ``None`` when it loads here, else why not and what to
    install (``ocflow doctor`` shows it)."""
    found: dict[str, str | None] = {}
    for language, grammar in GRAMMARS.items():
        try:
            _language(language)
            found[grammar.name] = None
        except _Unavailable as exc:
            found[grammar.name] = str(exc)
    return found


def parse(rel_path: str, text: str) -> Any:
    """The tree-sitter tree of ``text`` in the language of ``rel_path``; ``None`` when no
    grammar fits the file or can be loaded (Python, JSON and TOML have none here)."""
    for language in LANGUAGES_BY_EXTENSION.get(extension(rel_path), ()):
        if language not in GRAMMARS:
            return None
        try:
            tree = _parser(language).parse(text.encode("utf-8"))
        except _Unavailable:
            return None
        if not tree.root_node.has_error:
            return tree
    return None


def _check_language(language: str, text: str) -> SyntaxCheck:
    if language == "json":
        return _check_json(text)
    if language == "toml":
        return _check_toml(text)
    try:
        parser = _parser(language)
    except _Unavailable as exc:
        return SyntaxCheck(language, False, reason=str(exc))
    try:
        error = _first_error(parser.parse(text.encode("utf-8")).root_node, text)
        if error is not None and language in PREPROCESSED and _CONDITIONAL.search(text):
            for variant in _without_conditionals(text):
                if not parser.parse(variant.encode("utf-8")).root_node.has_error:
                    return SyntaxCheck(language, True)
    except Exception as exc:  # noqa: BLE001 - a checker that breaks must not fail the step
        name = GRAMMARS[language].name
        return SyntaxCheck(language, False, reason=f"the {name} parser failed: {exc!r}")
    return SyntaxCheck(language, True, error)


def _choose(first: SyntaxCheck, second: SyntaxCheck) -> SyntaxCheck:
    """What two readings of a file say together: it passes when one reads it; when a grammar
    is missing it is not checked (the missing one might have read it); else the error of the
    grammar that read further."""
    for result in (first, second):
        if result.checked and result.ok:
            return result
    for result in (first, second):
        if not result.checked:
            return result
    return second if _position(second.error) > _position(first.error) else first


def _position(error: str | None) -> tuple[int, int]:
    match = re.match(r"line (\d+), column (\d+)", error or "")
    return (int(match.group(1)), int(match.group(2))) if match else (1 << 30, 0)


def _file_kind(rel_path: str) -> str:
    ext = extension(rel_path)
    if ext:
        return f"{ext} files"
    return f"files without an extension ({rel_path.rsplit('/', 1)[-1]})"


# --- Python's own readers ---------------------------------------------------------------


TOO_DEEP = "it nests too deeply for Python's json reader"


def _check_json(text: str) -> SyntaxCheck:
    """JSON, with the comments and trailing commas of JSONC files (tsconfig.json...) allowed."""
    try:
        json.loads(text)
        return SyntaxCheck("json", True)
    except ValueError:
        pass
    except RecursionError:
        return SyntaxCheck("json", False, reason=TOO_DEEP)
    try:
        json.loads(_without_jsonc(text))  # same length and lines: positions still fit
    except json.JSONDecodeError as exc:
        what = exc.msg[:1].lower() + exc.msg[1:]
        if what.startswith("invalid control character"):
            what = "invalid control character in a string (is a string not closed?)"
        return SyntaxCheck("json", True, _describe(text, exc.lineno - 1, exc.colno - 1, what))
    except ValueError as exc:
        return SyntaxCheck("json", True, str(exc))
    except RecursionError:
        return SyntaxCheck("json", False, reason=TOO_DEEP)
    return SyntaxCheck("json", True)


def _without_jsonc(text: str) -> str:
    """``text`` with comments and trailing commas outside strings replaced by spaces."""
    out = list(text)
    i, n = 0, len(text)
    comma = None  # index of the last comma not yet followed by a value
    while i < n:
        char = text[i]
        if char == '"':
            comma = None
            i += 1
            while i < n and text[i] not in '"\n':
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        if text.startswith("//", i) or text.startswith("/*", i):
            end = text.find("\n", i) if text[i + 1] == "/" else text.find("*/", i + 2) + 2
            end = n if end < i + 2 else end
            for j in range(i, end):
                out[j] = "\n" if text[j] == "\n" else " "
            i = end
            continue
        if char == ",":
            comma = i
        elif char in "}]" and comma is not None:
            out[comma] = " "
        if not char.isspace() and char != ",":
            comma = None
        i += 1
    return "".join(out)


def _check_toml(text: str) -> SyntaxCheck:
    try:
        tomllib = importlib.import_module("tomllib")
    except ImportError:
        return SyntaxCheck(
            "toml", False, reason="TOML is read with tomllib, which comes with Python 3.11"
        )
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = re.search(r" \(at line (\d+), column (\d+)\)$", message)
        if match:
            what = message[: match.start()]
            row, column = int(match.group(1)) - 1, int(match.group(2)) - 1
        else:
            what = re.sub(r" \(at end of document\)$", "", message)
            row, column = len(text.splitlines()), 0
        what = what[:1].lower() + what[1:]
        return SyntaxCheck("toml", True, _describe(text, row, column, what))
    return SyntaxCheck("toml", True)


# --- tree-sitter grammars and parsers, loaded once --------------------------------------

_LOCK = threading.Lock()
_LANGUAGES: dict[str, Any] = {}  # language -> tree_sitter.Language, or the _Unavailable
_THREAD = threading.local()  # .parsers: {language: tree_sitter.Parser} of this thread


def _language(language: str) -> Any:
    """The ``tree_sitter.Language`` of ``language``, loaded once per process."""
    with _LOCK:
        if language not in _LANGUAGES:
            try:
                _LANGUAGES[language] = _load(language)
            except _Unavailable as exc:
                _LANGUAGES[language] = exc
        loaded = _LANGUAGES[language]
    if isinstance(loaded, _Unavailable):
        raise loaded
    return loaded


def _load(language: str) -> Any:
    grammar = GRAMMARS[language]
    try:
        tree_sitter = importlib.import_module("tree_sitter")
    except ImportError:
        raise _Unavailable(
            f"tree-sitter, which parses {grammar.name}, is not installed "
            f"(pip install tree-sitter {grammar.package})"
        ) from None
    try:
        module = importlib.import_module(grammar.module)
    except ImportError:
        raise _Unavailable(
            f"the tree-sitter grammar for {grammar.name} is not installed "
            f"(pip install {grammar.package})"
        ) from None
    try:
        return tree_sitter.Language(getattr(module, grammar.function)())
    except Exception as exc:  # noqa: BLE001 - e.g. a grammar built for a newer tree-sitter
        raise _Unavailable(
            f"the tree-sitter grammar for {grammar.name} does not load ({exc}) "
            f"(pip install --upgrade tree-sitter {grammar.package})"
        ) from None


def _parser(language: str) -> Any:
    """This thread's parser for ``language``."""
    parsers = getattr(_THREAD, "parsers", None)
    if parsers is None:
        parsers = _THREAD.parsers = {}
    if language not in parsers:
        loaded = _language(language)
        parsers[language] = importlib.import_module("tree_sitter").Parser(loaded)
    return parsers[language]


def _without_conditionals(text: str) -> list[str]:
    """Two readings of C source a grammar can follow: every branch of each ``#if`` with the
    directive lines blanked, and only the first branch. Lines keep their numbers."""
    every, first = [], []
    skipping: list[bool] = []  # per open conditional: is this branch left out?
    continued = False
    for line in text.split("\n"):
        match = None if continued else _CONDITIONAL.match(line)
        if match is not None:
            word = match.group(1)
            if word.startswith("if"):
                skipping.append(False)
            elif word != "endif":
                if skipping:
                    skipping[-1] = True
            elif skipping:
                skipping.pop()
        directive = continued or match is not None
        continued = directive and line.rstrip().endswith("\\")
        every.append("" if directive else line)
        first.append("" if directive or any(skipping) else line)
    return ["\n".join(every), "\n".join(first)]


# --- the first error of a tree ----------------------------------------------------------


def _first_error(root: Any, text: str) -> str | None:
    """The first syntax error in the tree of ``text``, described, or None."""
    if not root.has_error:
        return None
    data = text.encode("utf-8")
    node = root
    while not node.is_missing:
        # The innermost error: tree-sitter wraps what it could not fit in ERROR nodes, and an
        # outer one may span half the file around the real problem.
        child = next((c for c in node.children if c.has_error), None)
        if child is None:
            break
        node = child
    if node.is_missing:
        point = node.start_point
        what = f"missing {_token_name(node)}" + _unclosed(node)
    elif not node.is_error:
        point, what = node.start_point, "syntax error"
    else:
        last = node.children[-1] if node.children else None
        if last is not None and last.child_count and not last.has_error:
            # The ERROR holds complete pieces the parser could not fit together: the problem
            # is the token after them.
            point, what = _after(root, node, data)
        else:
            point = node.start_point
            what = f"unexpected {_quote(_first_leaf(node), data)}"
    row, byte_column = point[0], point[1]
    lines = data.split(b"\n")
    line = lines[row] if row < len(lines) else b""
    return _describe(text, row, len(line[:byte_column].decode("utf-8", "replace")), what)


def _token_name(node: Any) -> str:
    return node.type.replace("_", " ") if node.is_named else f"`{node.type}`"


def _unclosed(missing: Any) -> str:
    """For a missing closing bracket, the line of the opening one it should close."""
    opener = CLOSERS.get(missing.type)
    parent = missing.parent
    if opener is None or parent is None:
        return ""
    openers = [c for c in parent.children if c.type == opener and c.end_byte <= missing.start_byte]
    if not openers or openers[-1].start_point[0] == missing.start_point[0]:
        return ""
    return f" to close the `{opener}` on line {openers[-1].start_point[0] + 1}"


def _after(root: Any, node: Any, data: bytes) -> tuple[Any, str]:
    """Where the token after ``node`` starts, and ``unexpected <that token>``."""
    token = _next_token(root, node.end_byte)
    if token is not None:
        return token.start_point, f"unexpected {_quote(token, data)}"
    # The tree may stop short of the text, where the parser gave up on the rest.
    rest = re.compile(rb"\s*(\S+)").match(data, node.end_byte)
    if rest is None:
        return (data.count(b"\n") + 1, 0), _unfinished(node, data)
    start = rest.start(1)
    row = data.count(b"\n", 0, start)
    column = start - (data.rfind(b"\n", 0, start) + 1)
    word = rest.group(1).decode("utf-8", "replace")
    return (row, column), f"unexpected `{_shorten(word, 40)}`"


def _unfinished(node: Any, data: bytes) -> str:
    """What the file ends inside of: the last bracket ``node`` leaves open, or its first token."""
    openers = set(CLOSERS.values())
    unclosed = []
    for child in node.children:
        if child.type in openers and not child.child_count:
            unclosed.append(child)
        elif child.type in CLOSERS and unclosed and unclosed[-1].type == CLOSERS[child.type]:
            unclosed.pop()
    if unclosed:
        opener = unclosed[-1]
        return f"the `{opener.type}` on line {opener.start_point[0] + 1} is never closed"
    first = _first_leaf(node)
    return f"the {_quote(first, data)} on line {first.start_point[0] + 1} is never finished"


def _next_token(root: Any, byte: int) -> Any:
    """The first non-empty leaf starting at or after ``byte``, or None."""
    node = root
    while node.child_count:
        child = next(
            (c for c in node.children if c.end_byte > byte and c.end_byte > c.start_byte), None
        )
        if child is None:
            return None
        node = child
    return node if node.start_byte >= byte else _next_token(root, node.end_byte)


def _first_leaf(node: Any) -> Any:
    while node.child_count:
        node = node.children[0]
    return node


def _quote(token: Any, data: bytes) -> str:
    """A token's text in backticks; a bare quote character is widened to its string."""
    parent = token.parent
    if (
        token.type in ('"', "'", "`")
        and parent is not None
        and parent.start_byte == token.start_byte
        and parent.end_point[0] == token.start_point[0]
    ):
        token = parent
    text = data[token.start_byte : token.end_byte].decode("utf-8", "replace")
    text = text.split("\n", 1)[0].strip()
    return f"`{_shorten(text, 40)}`" if text else "text"


def _describe(text: str, row: int, column: int, what: str) -> str:
    """``line N, column M: <what> (line N: `<the line>`)``, from a 0-based row and column, or
    ``at the end of the file (after line N): <what>``."""
    lines = text.split("\n")
    if row >= len(lines) or (row == len(lines) - 1 and not lines[row].strip()):
        return f"at the end of the file (after line {len(text.splitlines())}): {what}"
    line = lines[row].strip()
    where = f" (line {row + 1}: `{_shorten(line, 120)}`)" if line else ""
    return f"line {row + 1}, column {column + 1}: {what}{where}"


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
