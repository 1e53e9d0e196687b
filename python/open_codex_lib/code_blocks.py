"""Finding the file content in a model's answer, and checking Python code.

Small models wrap code in prose ("Here is the updated file: ..."), use
```` ``` ```` or ``~~~`` fences with or without a language, sometimes add a
second short block (a usage example, a shell command), or forget the fence.
:func:`extract_code_block` copes with all of that:

1. Among the fenced blocks of the answer, a block whose language matches the
   file's extension (```` ```python ```` or ```` ```py ```` for ``.py``, ...)
   wins; when several match, or none does, the longest block is taken.  A
   chosen block that is never closed is refused: an answer that stops inside
   its code block may have stopped halfway through the file, and half a file
   often still compiles.
2. An answer without any fence is taken whole only if it does not look like
   prose: for a ``.py`` file it must compile, for ``.json`` it must parse,
   otherwise it must not open like a chatty reply ("Here is ...").
3. The content is returned ending with exactly one newline.

:func:`check_python` compiles Python source (nothing is executed) and returns
the problem, naming the line, for the model to fix.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

# Language names a model may put after the fence, per file extension.  The
# first one is what the prompts ask for.
LANGUAGES = {
    ".py": ("python", "py", "python3"),
    ".pyi": ("python", "py", "pyi"),
    ".js": ("javascript", "js", "jsx"),
    ".mjs": ("javascript", "js", "mjs"),
    ".jsx": ("jsx", "javascript", "js"),
    ".ts": ("typescript", "ts"),
    ".tsx": ("tsx", "typescript", "ts"),
    ".rs": ("rust", "rs"),
    ".go": ("go", "golang"),
    ".c": ("c",),
    ".h": ("c", "cpp", "h"),
    ".cc": ("cpp", "c++", "cc"),
    ".cpp": ("cpp", "c++"),
    ".hpp": ("cpp", "c++", "hpp"),
    ".java": ("java",),
    ".kt": ("kotlin", "kt"),
    ".cs": ("csharp", "cs", "c#"),
    ".rb": ("ruby", "rb"),
    ".php": ("php",),
    ".swift": ("swift",),
    ".sh": ("bash", "sh", "shell", "zsh"),
    ".bash": ("bash", "sh", "shell"),
    ".sql": ("sql",),
    ".html": ("html",),
    ".css": ("css",),
    ".json": ("json",),
    ".toml": ("toml",),
    ".yaml": ("yaml", "yml"),
    ".yml": ("yaml", "yml"),
    ".xml": ("xml",),
    ".md": ("markdown", "md"),
    ".rst": ("rst", "restructuredtext"),
    ".txt": ("text", "txt", "plaintext"),
}

# Files whose content is itself prose: only a chatty opening disqualifies an
# unfenced answer.
TEXT_EXTENSIONS = frozenset({".md", ".markdown", ".rst", ".txt", ""})

PYTHON_EXTENSIONS = frozenset({".py", ".pyi"})

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_CHATTY_OPENING = re.compile(
    r"^(here is|here's|here are|sure\b|certainly|of course|below is|below are|okay\b|"
    r"ok,|as requested|i have|i've|i will|i'll|i updated|i changed|the following)",
    re.IGNORECASE,
)


class CodeBlockError(ValueError):
    """The answer holds no usable file content; the message says why."""


@dataclass(frozen=True)
class Block:
    """One fenced block of an answer."""

    language: str  # first word of the info string, lower-cased ("" if none)
    content: str
    closed: bool


def extension(file_path: str) -> str:
    """The lower-cased extension of ``file_path`` with its dot ("" if none)."""
    return os.path.splitext(file_path)[1].lower()


def language_tag(file_path: str) -> str:
    """The language name to put after the fence for ``file_path`` ("" if unknown)."""
    ext = extension(file_path)
    if ext in LANGUAGES:
        return LANGUAGES[ext][0]
    return ext[1:]


def is_python(file_path: str) -> bool:
    """True for files that must compile as Python."""
    return extension(file_path) in PYTHON_EXTENSIONS


def fence_for(content: str) -> str:
    """A backtick fence longer than any backtick run inside ``content``."""
    longest = max((len(run) for run in re.findall(r"`+", content)), default=0)
    return "`" * max(3, longest + 1)


def find_blocks(text: str) -> list[Block]:
    """All fenced blocks of ``text``, in order.

    A block is closed by a line holding only a fence of the same character,
    at least as long as the opening one.  An indented opening fence (inside a
    list) removes that indentation from the block's lines.  A block never
    closed runs to the end of the text and is marked ``closed=False``.
    """
    lines = text.splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match or (match.group("fence")[0] == "`" and "`" in match.group("info")):
            i += 1  # not a fence, or inline code such as ```x```
            continue
        fence = match.group("fence")
        indent = len(match.group("indent"))
        info = match.group("info").strip()
        language = info.split()[0].lower() if info else ""
        body = []
        closed = False
        i += 1
        while i < len(lines):
            closing = _FENCE.match(lines[i])
            if (
                closing
                and closing.group("fence")[0] == fence[0]
                and len(closing.group("fence")) >= len(fence)
                and not closing.group("info").strip()
            ):
                closed = True
                break
            body.append(_dedent(lines[i], indent))
            i += 1
        blocks.append(Block(language, "\n".join(body), closed))
        i += 1
    return blocks


def _dedent(line: str, indent: int) -> str:
    """Remove up to ``indent`` leading whitespace characters from ``line``."""
    stripped = 0
    while stripped < indent and stripped < len(line) and line[stripped] in " \t":
        stripped += 1
    return line[stripped:]


def language_matches(language: str, file_path: str) -> bool:
    """True if a fence's language suits ``file_path``.

    Accepts the known names of the extension, the extension itself, and a
    file name given as info string (```` ```utils.py ````).
    """
    if not language:
        return False
    ext = extension(file_path)
    names = set(LANGUAGES.get(ext, ()))
    if ext:
        names.add(ext[1:])
        if language.endswith(ext):
            return True
    return language in names or language == os.path.basename(file_path).lower()


def extract_code_block(text: str, file_path: str) -> str:
    """Return the content for ``file_path`` found in the answer ``text``.

    Raises :class:`CodeBlockError` when there is no usable content.
    """
    blocks = [_language_on_its_own_line(b, file_path) for b in find_blocks(text)]
    if blocks:
        matching = [b for b in blocks if language_matches(b.language, file_path)]
        chosen = max(matching or blocks, key=lambda block: len(block.content))
        if not chosen.closed:
            raise CodeBlockError(
                "the code block is not closed: the answer stops before the closing fence "
                "line, so the file may be cut off; give the whole file and end the block "
                "with its closing fence line"
            )
        if not chosen.content.strip():
            raise CodeBlockError("the code block is empty: put the complete file content inside it")
        return _finish(chosen.content)
    if text.strip() and _bare_content_ok(text, file_path):
        return _finish(text)
    raise CodeBlockError(
        "no code block found: the answer must hold the file content inside a fenced "
        "code block (a line with ``` before the code and a line with ``` after it)"
    )


def _language_on_its_own_line(block: Block, file_path: str) -> Block:
    """A block whose fence has no language and whose first line is the file's language alone
    (```` ``` ```` then ``python``, as a real Qwen2.5-Coder-0.5B wrote it): that line is the
    fence's info string put a line too low, never the file's first line."""
    if block.language:
        return block
    first, _, rest = block.content.partition("\n")
    word = first.strip().lower()
    ext = extension(file_path)
    # Only a language's name: a file name (`a.txt` in files.txt) may be a real first line.
    if not word or (word not in LANGUAGES.get(ext, ()) and word != ext[1:]):
        return block
    return Block(word, rest, block.closed)


def _bare_content_ok(text: str, file_path: str) -> bool:
    """True if an answer without fences can be the file content itself."""
    ext = extension(file_path)
    if ext in PYTHON_EXTENSIONS:
        return check_python(text, file_path) is None
    if ext == ".json":
        try:
            json.loads(text)
        except ValueError:
            return False
        return True
    first = next(line.strip() for line in text.splitlines() if line.strip())
    if _CHATTY_OPENING.match(first):
        return False
    if ext in TEXT_EXTENSIONS:
        return True
    # An introduction sentence ending with a colon ("The new version is below:").
    return not (first.endswith(":") and len(first.split()) >= 4)


def _finish(content: str) -> str:
    """Drop blank lines at both ends; end with exactly one newline."""
    content = re.sub(r"\A(?:[ \t]*\n)+", "", content.replace("\r\n", "\n"))
    return content.rstrip() + "\n"


def check_python(source: str, file_path: str) -> str | None:
    """Compile ``source``; return None if it compiles, else the problem.

    The problem names the error, the line number and the line's text, e.g.
    ``SyntaxError: invalid syntax (line 3: def f(:)``.
    """
    try:
        compile(source, file_path, "exec", dont_inherit=True)
    except SyntaxError as exc:  # includes IndentationError and TabError
        problem = f"{type(exc).__name__}: {exc.msg} (line {exc.lineno}"
        line = (exc.text or "").strip()
        return problem + (f": {line})" if line else ")")
    except ValueError as exc:  # e.g. NUL characters
        return f"ValueError: {exc}"
    return None
