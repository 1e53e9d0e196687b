"""A map of the repository's definitions for the planner: each file with the first line of
each of its definitions (classes with their methods), the files most related to the task first,
cut to a budget of characters.

A task seldom names the file to change ("Cart.total() is wrong when a tax rate is set"): the
map lets a small model see where ``total`` and ``tax`` are defined without reading every file.
Relatedness is evidence from the repository, never a list of words: each name of the task (its
identifiers split into their words: ``test_total_with_tax`` gives ``test``, ``total``, ``with``,
``tax``) counts for a file whose path or definitions hold it, weighted by how rare it is among
the repository's files (a word every file holds tells nothing). Files are read with the
parsers of :mod:`.definitions` (Python's :mod:`ast`, tree-sitter for the others); a file no
parser reads is listed by its path alone.

The host calls :func:`render` when it writes the planner's first prompt.
"""

from __future__ import annotations

import math
import os
import re

from . import definitions

# Files larger than this are listed, not read: a generated or vendored file says little.
MAX_FILE_BYTES = 200_000
# At most this many files are parsed: those whose path or text holds the task's words first.
MAX_PARSED_FILES = 400
# A definition's line is cut to this many characters.
MAX_LINE = 100
# A file shows this many definitions at most: a big file does not crowd the others out.
MAX_ENTRIES = 20
# Words shorter than this say little of a place.
MIN_WORD = 3

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def words(text: str) -> set[str]:
    """The words of ``text``'s identifiers, lowercase: ``Cart.total()`` gives ``cart`` and
    ``total``, ``parseHTTPHeader`` ``parse``, ``http`` and ``header``; whole identifiers with
    an underscore or inner capital are kept too (``test_total_with_tax``)."""
    found: set[str] = set()
    for identifier in _IDENTIFIER.findall(text):
        lower = identifier.lower()
        if len(lower) >= MIN_WORD and (
            "_" in identifier.strip("_") or identifier[1:] != identifier[1:].lower()
        ):
            found.add(lower)
        for part in identifier.split("_"):
            for piece in _CAMEL.findall(part):
                if len(piece) >= MIN_WORD:
                    found.add(piece.lower())
    return found


def render(root: str, files: list[str], task: str, budget: int) -> str:
    """The map of ``files`` (paths relative to ``root``) for ``task``, at most ``budget``
    characters; empty when nothing fits or no file has a definition."""
    if budget <= 0 or not files:
        return ""
    wanted = words(task)
    texts = {rel: _read(root, rel) for rel in files}
    # Which files to parse: those the task's words reach (by path or text) first.
    reach = {rel: _reach(rel, texts[rel], wanted) for rel in files}
    parsed_order = sorted(files, key=lambda rel: (-reach[rel], rel))[:MAX_PARSED_FILES]
    entries = {rel: _entries(rel, texts[rel]) for rel in parsed_order}
    file_words = {
        rel: words(rel) | {w for line in entries.get(rel, []) for w in words(line)} for rel in files
    }
    frequency: dict[str, int] = {}
    for found in file_words.values():
        for word in found & wanted:
            frequency[word] = frequency.get(word, 0) + 1
    total = len(files)

    def score(rel: str) -> float:
        return sum(
            math.log((1 + total) / (1 + frequency[word])) for word in file_words[rel] & wanted
        )

    scores = {rel: score(rel) for rel in files}
    ranked = sorted(
        (rel for rel in files if entries.get(rel)),
        key=lambda rel: (-scores[rel], -reach[rel], rel),
    )
    out: list[str] = []
    used = 0
    for rel in ranked:
        shown = entries[rel][:MAX_ENTRIES]
        block = [f"{rel}:"] + [f"  {line}" for line in shown]
        if len(entries[rel]) > MAX_ENTRIES:
            block.append(f"  … and {len(entries[rel]) - MAX_ENTRIES} more definitions")
        text = "\n".join(block)
        if used + len(text) + 1 > budget:
            # A file whose whole block does not fit: its first lines, if they say something.
            room = budget - used - 1
            kept = []
            for line in block:
                if sum(len(k) + 1 for k in kept) + len(line) + 1 > room:
                    break
                kept.append(line)
            if len(kept) > 1:
                out.append("\n".join(kept + ["  …"]))
            break
        out.append(text)
        used += len(text) + 1
    return "\n".join(out)


def _read(root: str, rel: str) -> str | None:
    path = os.path.join(root, rel)
    try:
        if os.path.islink(path) or os.path.getsize(path) > MAX_FILE_BYTES:
            return None
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    if b"\0" in data[:4096]:
        return None
    return data.decode("utf-8", "replace")


def _reach(rel: str, text: str | None, wanted: set[str]) -> int:
    """How many of the task's words the file's path and text hold."""
    haystack = rel.lower() + "\n" + (text or "").lower()
    return sum(1 for word in wanted if word in haystack)


def _entries(rel: str, text: str | None) -> list[str]:
    """The first line of each definition of the file (members indented), or nothing."""
    if not text:
        return []
    try:
        items = definitions.read(rel, text)
    except (ValueError, RecursionError):  # one file the parser chokes on loses no map
        return []
    if not items:
        return []
    lines = text.splitlines()
    out: list[str] = []
    for item in items:
        if not item.is_definition:
            continue
        out.append(_first_line(lines, item))
        out.extend("  " + _first_line(lines, member) for member in item.members)
    return out


def _first_line(lines: list[str], item: definitions.Item) -> str:
    """The item's line that holds its name (past decorators and comments), cut short."""
    for line in lines[item.start : item.end]:
        if item.name in line:
            text = line.strip().rstrip("{:").rstrip()
            return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"
    return f"{item.kind} {item.name}"
