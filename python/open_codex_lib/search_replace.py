"""Search/replace blocks: the edit form for a file too big to be rewritten whole in one answer.

The model answers with one block per change, as Aider's "diff" edit format has them::

    <<<<<<< SEARCH
    lines copied exactly from the file
    =======
    the lines to put in their place
    >>>>>>> REPLACE

Each block applies to the file as the blocks before it left it, and its SEARCH text must be
found there exactly once: a text found nowhere, or in several places, is an unusable answer,
said in plain words so that the model can be asked again (:mod:`.reask`). A SEARCH text that
differs from the file only in trailing white space at line ends (models drop it) is still found,
once. The answer for a 2,000-line file is then a few dozen lines, where the whole file would not
fit a small model's answer budget.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SEARCH = "<<<<<<< SEARCH"
DIVIDER = "======="
REPLACE = ">>>>>>> REPLACE"

# A marker line: the marker alone, the number of its characters allowed to vary a little (models
# write six `<` or eight `=`), and nothing else on the line but white space.
_SEARCH_LINE = re.compile(r"^\s*<{5,9}\s*SEARCH\s*$")
_DIVIDER_LINE = re.compile(r"^\s*={5,9}\s*$")
_REPLACE_LINE = re.compile(r"^\s*>{5,9}\s*REPLACE\s*$")


@dataclass(frozen=True)
class Block:
    """One change: ``search`` as it stands in the file, ``replace`` what takes its place."""

    search: str
    replace: str


class BlockError(Exception):
    """Why an answer's blocks cannot be used, in words for the model and for people."""


def parse(answer: str) -> list[Block]:
    """The blocks of ``answer``, in order (text between them, fences included, is ignored).

    Raises :class:`BlockError` when there is none, or when a block is left open.
    """
    blocks: list[Block] = []
    lines = answer.splitlines(keepends=True)
    at = 0
    while at < len(lines):
        if not _SEARCH_LINE.match(lines[at]):
            at += 1
            continue
        number = len(blocks) + 1
        search, at = _until(lines, at + 1, _DIVIDER_LINE)
        if at >= len(lines):
            raise BlockError(f"block {number} has no `{DIVIDER}` line after its SEARCH text")
        replace, at = _until(lines, at + 1, _REPLACE_LINE)
        if at >= len(lines):
            raise BlockError(f"block {number} is not closed with a `{REPLACE}` line")
        if not search.strip():
            raise BlockError(
                f"block {number} has an empty SEARCH text: copy the lines to change from the file"
            )
        blocks.append(Block(search, replace))
        at += 1
    if not blocks:
        raise BlockError(
            f"the answer has no `{SEARCH}` … `{DIVIDER}` … `{REPLACE}` block: give one block per "
            "change"
        )
    return blocks


def _until(lines: list[str], start: int, end: re.Pattern) -> tuple[str, int]:
    """The text of ``lines`` from ``start`` up to the first line matching ``end``, and that
    line's index (``len(lines)`` when there is none)."""
    at = start
    while at < len(lines) and not end.match(lines[at]):
        at += 1
    return "".join(lines[start:at]), at


def apply(original: str, blocks: list[Block]) -> str:
    """``original`` with every block applied in order.

    Raises :class:`BlockError` naming the first block whose SEARCH text is not found exactly
    once in the file as the blocks before it left it.
    """
    text = original
    for number, block in enumerate(blocks, start=1):
        start, end = _find_once(text, block.search, number)
        replace = block.replace
        # The SEARCH text's last line ends the replaced span: so does the REPLACE text's.
        if text[start:end].endswith("\n") and replace and not replace.endswith("\n"):
            replace += "\n"
        text = text[:start] + replace + text[end:]
    return text


def _find_once(text: str, search: str, number: int) -> tuple[int, int]:
    """Where ``search`` stands in ``text``: exactly, else with trailing white space at line
    ends ignored; found once, or a :class:`BlockError` saying what to do."""
    spans = _exact(text, search) or _loose(text, search)
    if len(spans) == 1:
        return spans[0]
    first = search.strip().splitlines()[0].strip()
    if not spans:
        raise BlockError(
            f"block {number}'s SEARCH text is not in the file (it starts with {first!r}): copy "
            "the lines exactly as the file has them, or as the blocks before it left them"
        )
    raise BlockError(
        f"block {number}'s SEARCH text is in the file {len(spans)} times (it starts with "
        f"{first!r}): add lines around it until only one place matches"
    )


def _exact(text: str, search: str) -> list[tuple[int, int]]:
    """The spans of every exact occurrence of ``search`` in ``text``."""
    spans = []
    at = text.find(search)
    while at != -1:
        spans.append((at, at + len(search)))
        at = text.find(search, at + 1)
    return spans


def _loose(text: str, search: str) -> list[tuple[int, int]]:
    """The spans of whole lines of ``text`` equal to ``search``'s lines but for trailing white
    space."""
    wanted = [line.rstrip() for line in search.rstrip("\n").split("\n")]
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    spans = []
    for at in range(len(lines) - len(wanted) + 1):
        if all(lines[at + i].rstrip() == want for i, want in enumerate(wanted)):
            spans.append((starts[at], starts[at + len(wanted)]))
    return spans
