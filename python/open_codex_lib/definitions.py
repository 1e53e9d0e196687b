"""The top-level items of a source file — its definitions (functions, classes, types …, with
the methods of classes) and its other statements — read with the language's parser, so that
a code edit is judged by the code it keeps rather than by its line count, and an answer that
holds only some definitions (as small models give) can be spliced into the file.

Python is read with :mod:`ast`; the other languages with the tree-sitter grammars the syntax
checks load (:mod:`.syntax`). Comments and docstrings are not items: an answer may drop them.
Where no parser reads a text, :func:`read` gives ``None`` and the callers fall back to lines.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from . import syntax
from .code_blocks import is_python


@dataclass(frozen=True)
class Item:
    """One top-level item, or a member of a class-like one.

    ``key`` identifies it across two versions of a file: a definition by its kind and name
    (``function moving_average``), a statement by its kind and first name (``statement
    print``), so that a changed body or a changed argument is still the same item. ``start``
    and ``end`` are line indices (end excluded), leading decorators and comments included.
    """

    key: str
    name: str  # "" for a statement
    start: int
    end: int
    members: tuple[Item, ...] = field(default=())

    @property
    def is_definition(self) -> bool:
        return bool(self.name)

    @property
    def kind(self) -> str:
        return self.key.split(" ", 1)[0]


def read(rel: str, text: str) -> list[Item] | None:
    """The items of ``text`` as the language of ``rel``; ``None`` when no parser reads it."""
    if is_python(rel):
        return _read_python(text)
    return _read_tree_sitter(rel, text)


def dropped(original: list[Item], new: list[Item]) -> list[Item]:
    """The items of ``original`` that ``new`` no longer holds, members of kept classes
    included."""
    new_keys = {item.key: item for item in new}
    gone = []
    for item in original:
        kept = new_keys.get(item.key)
        if kept is None:
            gone.append(item)
            continue
        kept_members = {member.key for member in kept.members}
        gone.extend(m for m in item.members if m.key not in kept_members)
    return gone


def normalized(rel: str, text: str, without_docstrings: bool = False) -> str | None:
    """``text`` without its layout and comments (and, with ``without_docstrings``, a Python
    module's, class's or function's docstring), to tell whether two versions differ as code;
    ``None`` when no parser reads it."""
    if is_python(rel):
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return None
        if without_docstrings:
            _drop_docstrings(tree)
        return ast.dump(tree)
    parsed = syntax.parse(rel, text)
    if parsed is None:
        return None
    data = text.encode("utf-8")
    tokens: list[str] = []
    stack = [parsed.root_node]
    while stack:
        node = stack.pop()
        if "comment" in node.type:
            continue
        if node.child_count == 0:
            tokens.append(data[node.start_byte : node.end_byte].decode("utf-8", "replace"))
        stack.extend(reversed(node.children))
    return "\x00".join(tokens)


def _drop_docstrings(tree: ast.AST) -> None:
    """Removes the docstring of the module and of every class and function in ``tree``."""
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.walk(tree):
        body = getattr(node, "body", None) if isinstance(node, kinds) else None
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]


def splice(
    original: str, original_items: list[Item], answer: str, answer_items: list[Item]
) -> tuple[str, list[str]] | None:
    """``original`` with each definition of ``answer`` put in place of the one of the same name
    (a top-level one, else the one method of that name, re-indented), and the names replaced;
    ``None`` when a definition of the answer is not in ``original``."""
    lines = original.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    answer_lines = answer.splitlines(keepends=True)
    if answer_lines and not answer_lines[-1].endswith("\n"):
        answer_lines[-1] += "\n"
    by_key = {item.key: item for item in original_items}
    members: dict[str, list[Item]] = {}
    for item in original_items:
        for member in item.members:
            members.setdefault(member.name, []).append(member)
    replacements: list[tuple[int, int, list[str]]] = []
    names = []
    for item in answer_items:
        if not item.is_definition:
            continue
        new = answer_lines[item.start : item.end]
        target = by_key.get(item.key)
        if target is None:
            candidates = members.get(item.name, [])
            if len(candidates) != 1:
                return None
            target = candidates[0]
            new = _reindent(new, _indent(lines[target.start]))
        replacements.append((target.start, target.end, new))
        names.append(f"{_kind_word(item.kind)} {item.name}")
    if not replacements:
        return None
    replacements.sort()
    for (_, end, _), (start, _, _) in zip(replacements, replacements[1:]):
        if start < end:
            return None  # two answers for one definition
    for start, end, new in reversed(replacements):
        lines[start:end] = new
    text = "".join(lines)
    if not original.endswith("\n"):
        text = text.rstrip("\n")
    return text, names


def named_in(instructions: str, items: list[Item]) -> list[Item]:
    """The items whose name the instructions write as a whole word."""
    return [
        item
        for item in items
        if item.name and re.search(rf"(?<![\w.]){re.escape(item.name)}(?!\w)", instructions)
    ]


# --- Python --------------------------------------------------------------------------------

_PYTHON_DEFINITIONS = {
    ast.FunctionDef: "function",
    ast.AsyncFunctionDef: "function",
    ast.ClassDef: "class",
}


def _read_python(text: str) -> list[Item] | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    lines = text.splitlines()
    return [item for node in tree.body if (item := _python_item(node, lines)) is not None]


def _python_item(node: ast.stmt, lines: list[str]) -> Item | None:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return None  # a docstring, or a string standing as a comment
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
    start = _with_leading_comments(lines, start, ("#",))
    end = node.end_lineno or node.lineno
    kind = _PYTHON_DEFINITIONS.get(type(node))
    if kind is not None:
        name = node.name  # type: ignore[attr-defined]
        members: tuple[Item, ...] = ()
        if isinstance(node, ast.ClassDef):
            members = tuple(
                item
                for child in node.body
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
                and (item := _python_item(child, lines)) is not None
            )
        return Item(f"{kind} {name}", name, start, end, members)
    return Item(f"statement {_python_statement_key(node)}", "", start, end)


def _python_statement_key(node: ast.stmt) -> str:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return "import " + ",".join(alias.asname or alias.name for alias in node.names)
    if isinstance(node, ast.Assign):
        return "assign " + ",".join(ast.unparse(target) for target in node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return "assign " + ast.unparse(node.target)
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return "call " + ast.unparse(node.value.func)
    if isinstance(node, ast.If):
        return "if " + ast.unparse(node.test)
    if isinstance(node, ast.Expr):
        return "expression " + ast.unparse(node.value)[:60]
    return type(node).__name__.lower()


# --- tree-sitter ---------------------------------------------------------------------------

# Node types that define something named, in the grammars ocflow loads.
_DEFINITIONS = {
    "function_declaration": "function",
    "generator_function_declaration": "function",
    "function_definition": "function",
    "function_item": "function",
    "method_definition": "function",
    "method_declaration": "function",
    "constructor_declaration": "function",
    "method": "function",
    "singleton_method": "function",
    "class_declaration": "class",
    "abstract_class_declaration": "class",
    "class_definition": "class",
    "class_specifier": "class",
    "class": "class",
    "module": "class",
    "record_declaration": "class",
    "interface_declaration": "type",
    "type_alias_declaration": "type",
    "enum_declaration": "type",
    "struct_item": "type",
    "enum_item": "type",
    "union_item": "type",
    "trait_item": "type",
    "type_item": "type",
    "mod_item": "type",
    "impl_item": "impl",
    "type_declaration": "type",
    "const_item": "constant",
    "static_item": "constant",
    "macro_definition": "function",
}

# Where a class-like node keeps its members.
_BODY_FIELDS = ("body",)


def _read_tree_sitter(rel: str, text: str) -> list[Item] | None:
    parsed = syntax.parse(rel, text)
    if parsed is None or parsed.root_node.has_error:
        return None
    data = text.encode("utf-8")
    lines = text.splitlines()
    items = []
    for node in parsed.root_node.named_children:
        item = _node_item(node, data, lines)
        if item is not None:
            items.append(item)
    return items


def _node_item(node: Any, data: bytes, lines: list[str], member: bool = False) -> Item | None:
    if "comment" in node.type:
        return None
    start = _with_leading_comments(lines, node.start_point[0], ("//", "/*", "*", "#"))
    end = node.end_point[0] + 1
    inner = node
    if node.type in ("export_statement", "decorated_definition"):
        inner = node.child_by_field_name("declaration") or node.child_by_field_name("definition")
        if inner is None:
            inner = node
    kind = _DEFINITIONS.get(inner.type)
    name = _name(inner, data) if kind else None
    if kind is None and inner.type in ("lexical_declaration", "variable_declaration"):
        declarators = [c for c in inner.named_children if c.type == "variable_declarator"]
        if len(declarators) == 1:
            value = declarators[0].child_by_field_name("value")
            if value is not None and value.type in (
                "arrow_function",
                "function_expression",
                "function",
                "class",
            ):
                kind, name = "function", _text(declarators[0].child_by_field_name("name"), data)
    if kind and name:
        members: tuple[Item, ...] = ()
        if not member:
            body = next(
                (b for f in _BODY_FIELDS if (b := inner.child_by_field_name(f)) is not None),
                None,
            )
            if body is not None:
                members = tuple(
                    item
                    for child in body.named_children
                    if (item := _node_item(child, data, lines, member=True)) is not None
                    and item.is_definition
                )
        return Item(f"{kind} {name}", name, start, end, members)
    if member:
        return None
    first = _first_name(inner, data)
    return Item(f"statement {inner.type} {first}".rstrip(), "", start, end)


def _name(node: Any, data: bytes) -> str | None:
    if node.type == "impl_item":
        trait = node.child_by_field_name("trait")
        of = _text(node.child_by_field_name("type"), data)
        return f"{_text(trait, data)} for {of}" if trait is not None else of
    named = node.child_by_field_name("name")
    if named is not None:
        return _text(named, data)
    if node.type == "type_declaration":  # Go: type X struct {…}
        spec = next((c for c in node.named_children if c.type == "type_spec"), None)
        if spec is not None:
            return _text(spec.child_by_field_name("name"), data)
    declarator = node.child_by_field_name("declarator")  # C and C++ functions
    while declarator is not None:
        if declarator.type in ("identifier", "field_identifier", "qualified_identifier"):
            return _text(declarator, data)
        declarator = declarator.child_by_field_name("declarator")
    return None


def _first_name(node: Any, data: bytes) -> str:
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type in ("identifier", "property_identifier", "type_identifier"):
            return _text(current, data) or ""
        stack.extend(reversed(current.named_children))
    return ""


def _text(node: Any, data: bytes) -> str | None:
    if node is None:
        return None
    return data[node.start_byte : node.end_byte].decode("utf-8", "replace")


# --- lines ---------------------------------------------------------------------------------


def _with_leading_comments(lines: list[str], start: int, marks: tuple[str, ...]) -> int:
    """``start`` moved up over the comment lines directly above it."""
    while start > 0 and lines[start - 1].strip().startswith(marks):
        start -= 1
    return start


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _reindent(lines: list[str], indent: str) -> list[str]:
    """``lines`` moved so that the first is indented by ``indent``, the rest following it."""
    if not lines:
        return lines
    current = _indent(lines[0])
    moved = []
    for line in lines:
        if not line.strip():
            moved.append(line)
        elif line.startswith(current):
            moved.append(indent + line[len(current) :])
        else:
            moved.append(indent + line.lstrip())
    return moved


def _kind_word(kind: str) -> str:
    return {"impl": "impl", "type": "type", "constant": "constant"}.get(kind, kind)
