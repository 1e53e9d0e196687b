"""Redaction of what the library sends to a model when it runs on its own.

Under ocflow the host redacts every request in its one client (keys, and the
lines of the files git ignores).  Run alone (``python -m open_codex_lib``),
the library's own ``complete`` (:mod:`.standalone`) replaces strings that look
like keys with the same markers, from the same patterns
(``redaction.json``, which ocflow reads too), and adds the same note.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

_SHARED = json.loads((Path(__file__).parent / "redaction.json").read_text(encoding="utf-8"))
KEY_MARKER: str = _SHARED["key_marker"]
_SHAPES = [re.compile(pattern) for pattern in _SHARED["key_shapes"]]
_ASSIGNMENT = re.compile(_SHARED["key_assignment"])


def redact(text: str) -> tuple[str, int]:
    """``text`` with every string that looks like a key replaced, and how many were."""
    count = 0
    for shape in _SHAPES:
        text, found = shape.subn(KEY_MARKER, text)
        count += found

    def value(match: re.Match) -> str:
        nonlocal count
        # A reference to a variable (``$TOKEN``, ``${TOKEN}``) is not its value.
        if match.group(2).startswith("$"):
            return match.group(0)
        count += 1
        return match.group(1) + KEY_MARKER

    return _ASSIGNMENT.sub(value, text), count


def redact_messages(messages: list[dict]) -> list[dict]:
    """``messages`` redacted, with a note at the end of the last one when anything went."""
    redacted, total = [], 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            content, count = redact(content)
            total += count
            message = {**message, "content": content}
        redacted.append(message)
    if total and redacted and isinstance(redacted[-1].get("content"), str):
        note = (
            f"\n\n(Note from ocflow: before this request was sent, {total} string(s) that look "
            "like keys were replaced by `[redacted: …]` markers. Do not guess or ask for the "
            "values; a command that needs one reads it where it is.)"
        )
        redacted[-1] = {**redacted[-1], "content": redacted[-1]["content"] + note}
    return redacted
