"""LLM operations that write a file: ``modify_code``/``refactor_function`` and
``write_file`` with ``params.instructions``.

Both ask the model for the WHOLE content of the file in one fenced code block
(small models make far fewer broken edits that way than with diffs or
search/replace blocks).  The content is taken from the answer with
:func:`.code_blocks.extract_code_block`, and must parse as the file's language
(:func:`.syntax.check`: a Python file must compile; JavaScript, TypeScript,
Go, Java, Rust, C/C++, Ruby, PHP, Shell, JSON, YAML and TOML are parsed; the
result's ``syntax_check`` says how the file was checked, or why it was not).
An answer that holds only some definitions of the file (the function it was asked to
change), or that stands for the rest with a placeholder comment, is spliced into the file
(:func:`fit_into_original`, :mod:`.definitions`).  An answer that would lose part of the file
is unusable, even when it parses: a code block that is never closed (the answer stopped
halfway), an answer far larger than the file and the change could need, one that leaves out
definitions the instructions do not name or most of the file's statements, or (from 20 lines
on) most of its lines while the instructions ask to remove nothing.  An answer that is the
original as code changes nothing and is unusable too.  When the answer is unusable the model is
asked once more, told in plain words what was wrong (:mod:`.reask`: warmer, and not again when
it repeats itself); a second unusable answer fails the step and nothing is written.  An answer
cut off at the token limit is never used (see :mod:`.llm`).
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass

from . import definitions, llm, reask, search_replace, syntax
from .code_blocks import (
    TEXT_EXTENSIONS,
    CodeBlockError,
    extension,
    extract_code_block,
    fence_for,
    is_python,
    language_tag,
)
from .instructions import Step
from .params import optional_str, require_str
from .paths import normalize_repo_path, output_target, resolve_inside, staged_file
from .results import StepError, success

# `modify_code` asks for search/replace blocks instead of the whole file when the file would take
# more than WHOLE_FILE_SHARE of the answer's token budget (`max_tokens`, estimated at
# CHARS_PER_TOKEN characters a token: code is denser than prose), or, where the budget is not
# known, from EDIT_FROM_LINES lines on (about 10,000 tokens, more than a small model answers).
WHOLE_FILE_SHARE = 0.75
CHARS_PER_TOKEN = 3.5
EDIT_FROM_LINES = 1000

# An answer may be at most GROWTH times the old file and the instructions, plus SLACK bytes.
# The new file is the old one plus what the instructions ask for: even a change that touches
# every line ("add type hints and docstrings everywhere") stays well under 4x, and the instructions
# count too because they may hold text to paste in. SLACK (about 1500 lines of code) lets a tiny or
# new file grow into a real one. Beyond that the answer is repetition or garbage, not the file.
GROWTH = 4
SLACK = 64 * 1024
# A new version with fewer than KEEP_RATIO of the old non-blank lines drops most of the file,
# which is what an answer that stopped halfway looks like. Judged only from MIN_LINES non-blank
# lines on (a small file legitimately halves in one edit), and only when the instructions do
# not ask to take something out.
KEEP_RATIO = 0.5
MIN_LINES = 20
# Instructions that ask to take something out: a removal verb as a whole word, where an
# imperative stands (a sentence's start, or after "and", "then", "please" …) — not "it drops the
# last window" (a bug report), nor the "mov" of moving_average or the "split" of split_words.
_REMOVAL_VERBS = (
    r"(?:remove|delete|drop|strip|shorten|shrink|simplify|rewrite|trim|cut|reduce|condense|"
    r"minimi[sz]e|clean\s+up|prune|purge|eliminate|get\s+rid\s+of|dedup(?:licate)?|"
    r"consolidate|compact|merge|move|split|extract|truncate|empty|clear\s+out|inline|"
    r"replace\s+(?:it|everything|the\s+(?:whole\s+|entire\s+)?file)|"
    r"make\s+(?:it|the\s+file|this\s+file|the\s+module)\s+(?:shorter|smaller))"
)
_REMOVAL_WORDS = re.compile(
    rf"(?:^|[.;:!?\n(]\s*|\b(?:and|then|also|please|to|just|only)\s+){_REMOVAL_VERBS}\b",
    re.IGNORECASE,
)
# Instructions about comments or documentation: a change to those alone is then a change.
_DOCUMENTATION_WORDS = re.compile(r"\b(?:comment|docstring|document|doc\s*string)", re.IGNORECASE)
# A comment standing for code the model left out: "# rest of the file unchanged",
# "// ... existing code ...", "# (unchanged)" and their kin.
_COMMENT = re.compile(r"\s*(?:#|//|/\*+|\*|--|<!--)\s*(.*?)\s*(?:\*/|-->)?\s*$")
_PLACEHOLDER = re.compile(
    r"(?:the\s+)?rest\s+of\s+(?:the\s+)?(?:file|code|module|class|functions|methods)"
    r"|(?:all\s+)?(?:the\s+)?(?:existing|other|remaining|previous|original|unchanged)\s+"
    r"(?:code|functions?|methods?|definitions|content|lines|implementation|helpers)"
    r"|(?:unchanged|same\s+as\s+(?:before|above|the\s+original|original))$"
    r"|(?:code|functions?|everything\s+else)\s+(?:unchanged|stays\s+the\s+same)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class FileRequest:
    """What the model was asked to write, to judge whether an answer can be the whole file."""

    rel: str
    fence: str
    instructions: str
    original: str | None  # the current content; None for a new file


@dataclass(frozen=True)
class FileContent:
    """A usable answer: the new content of the file, and how its syntax was checked."""

    rel: str
    text: str
    syntax_check: syntax.SyntaxCheck
    spliced: tuple[str, ...] = ()  # the definitions put in place of the old ones, when spliced

    def note(self) -> str:
        """A note for the step's message when the syntax was not checked (none for prose
        files, which have no syntax to check)."""
        if self.syntax_check.checked or extension(self.rel) in TEXT_EXTENSIONS:
            return ""
        return f" (syntax not checked: {self.syntax_check.reason})"


def modify_code(step: Step, llm_config: dict | None) -> dict:
    """``modify_code`` / ``refactor_function``: rewrite a staged file following instructions.

    Result fields: ``output_files`` ``[file_path]``, ``changed``,
    ``lines_before``, ``lines_after``, ``syntax_check``
    (:meth:`.syntax.SyntaxCheck.fields`) and the fields of
    :attr:`.llm.Conversation.fields`.
    """
    params = step.params
    rel = normalize_repo_path(params.get("file_path"), "params.file_path")
    instructions = require_str(params, "instructions")
    function_name = optional_str(params, "function_name")
    if function_name is not None and not function_name.strip():
        function_name = None
    chat = llm.conversation(step, llm_config, step.operation)
    if chat is None:
        return llm.unavailable(step, step.operation)
    original = read_text(staged_file(step, rel), rel)
    if function_name and is_python(rel):
        check_function_exists(original, rel, function_name)
    if too_big_to_rewrite(original, (llm_config or {}).get("max_tokens")):
        return edit_with_blocks(step, chat, rel, instructions, original)

    fence = fence_for(original)
    focus = ""
    if function_name:
        focus = "\n" + llm.render_prompt("modify_code_focus", function_name=function_name) + "\n"
    messages = [
        {"role": "system", "content": llm.render_prompt("modify_code_system")},
        {
            "role": "user",
            "content": llm.render_prompt(
                "modify_code_user",
                file_path=rel,
                fence=fence,
                language=language_tag(rel),
                content=original.rstrip("\n"),
                instructions=instructions.strip(),
                focus=focus,
                task_context=task_context(step.task, instructions),
            ),
        },
    ]
    answer = obtain_file_content(chat, messages, FileRequest(rel, fence, instructions, original))
    new = answer.text
    if "\r\n" in original:
        new = new.replace("\n", "\r\n")
    target = output_target(step, rel)
    with open(target, "w", encoding="utf-8", newline="") as handle:
        handle.write(new)
    changed = new != original
    lines_before, lines_after = len(original.splitlines()), len(new.splitlines())
    what = f"rewrote {rel} from the LLM answer ({lines_before} -> {lines_after} lines)"
    if answer.spliced:
        what = (
            f"replaced {', '.join(answer.spliced)} in {rel}, the rest kept as it was "
            f"({lines_before} -> {lines_after} lines)"
        )
    return success(
        step.operation,
        what + answer.note() + retry_note(chat),
        output_files=[rel],
        changed=changed,
        lines_before=lines_before,
        lines_after=lines_after,
        syntax_check=answer.syntax_check.fields(),
        **chat.fields,
    )


#: The most of a flow's task a code step's prompt shows (a small model's context is small).
TASK_CONTEXT_CHARS = 2000


def task_context(task: str, instructions: str) -> str:
    """The flow's task, shown first (every code step of a flow shares it, so a server's prefix
    cache keeps it) when the step's instructions do not already hold it: a small model's plan
    often gives a code step one terse line ("implement the function"), and the user's words are
    what the change is for. Empty when there is nothing to add."""

    def words(text: str) -> str:
        return " ".join(text.split())

    if not task.strip() or words(task) in words(instructions):
        return ""
    shown = task.strip()
    if len(shown) > TASK_CONTEXT_CHARS:
        shown = shown[:TASK_CONTEXT_CHARS].rstrip() + " …"
    return f"The task this change is part of (make only the change asked below):\n{shown}\n\n"


def too_big_to_rewrite(original: str, max_tokens: object) -> bool:
    """Whether the whole of ``original`` would not fit the answer budget ``max_tokens`` (with
    room to spare); without a budget, whether it has :data:`EDIT_FROM_LINES` lines or more."""
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens > 0:
        return len(original) / CHARS_PER_TOKEN > WHOLE_FILE_SHARE * max_tokens
    return len(original.splitlines()) >= EDIT_FROM_LINES


def edit_code(step: Step, llm_config: dict | None) -> dict:
    """``edit_code``: change parts of a staged file with search/replace blocks
    (:mod:`.search_replace`), each found exactly once; the result parses as ``modify_code``'s
    does.  Result fields: those of :func:`modify_code`, and ``blocks``."""
    params = step.params
    rel = normalize_repo_path(params.get("file_path"), "params.file_path")
    instructions = require_str(params, "instructions")
    chat = llm.conversation(step, llm_config, step.operation)
    if chat is None:
        return llm.unavailable(step, step.operation)
    original = read_text(staged_file(step, rel), rel)
    return edit_with_blocks(step, chat, rel, instructions, original)


def edit_with_blocks(
    step: Step, chat: llm.Conversation, rel: str, instructions: str, original: str
) -> dict:
    """Asks for search/replace blocks for ``rel`` (asked again once when they cannot be used),
    applies them and writes the result."""
    fence = fence_for(original)
    messages = [
        {"role": "system", "content": llm.render_prompt("edit_code_system")},
        {
            "role": "user",
            "content": llm.render_prompt(
                "edit_code_user",
                file_path=rel,
                lines=str(len(original.splitlines())),
                fence=fence,
                language=language_tag(rel),
                content=original.rstrip("\n"),
                instructions=instructions.strip(),
                task_context=task_context(step.task, instructions),
            ),
        },
    ]
    request = FileRequest(rel, fence, instructions, original)
    outcome = reask.ask_until_usable(
        chat,
        messages,
        lambda answer: usable_edit(answer, request),
        lambda problem: llm.render_prompt("fix_edit", problem=problem.for_model(), file_path=rel),
    )
    if not outcome.usable:
        raise chat.fail(
            f"the LLM gave no usable search/replace blocks for {rel} in {chat.calls} attempts: "
            f"{outcome.reason()} ({chat.saved()}); {rel} is left unchanged: retry the step, or "
            "make the instructions simpler",
            repeated=outcome.repeated,
        )
    content, blocks = outcome.value
    new = content.text
    if "\r\n" in original:
        new = new.replace("\n", "\r\n")
    with open(output_target(step, rel), "w", encoding="utf-8", newline="") as handle:
        handle.write(new)
    lines_before, lines_after = len(original.splitlines()), len(new.splitlines())
    return success(
        step.operation,
        f"edited {rel} with {blocks} search/replace block(s) from the LLM answer "
        f"({lines_before} -> {lines_after} lines)" + content.note() + retry_note(chat),
        output_files=[rel],
        changed=new != original,
        lines_before=lines_before,
        lines_after=lines_after,
        blocks=blocks,
        syntax_check=content.syntax_check.fields(),
        **chat.fields,
    )


def usable_edit(
    answer: str, request: FileRequest
) -> tuple[tuple[FileContent, int] | None, reask.Problem | None]:
    """``((content, blocks), None)`` when ``answer``'s blocks apply to the file, each found once,
    and the result parses and keeps the file; else ``(None, problem)``."""
    original = request.original or ""
    try:
        blocks = search_replace.parse(answer)
        content = search_replace.apply(original.replace("\r\n", "\n"), blocks)
    except search_replace.BlockError as exc:
        return None, reask.Problem(str(exc))
    checked, problem = check_syntax(content, request)
    if problem is not None:
        # Said of blocks, not of a whole file to give again.
        return None, reask.Problem(
            problem.reason, f"With your blocks, {problem.reason}: correct the blocks"
        )
    for guard in (drops_most_lines, drops_code, makes_no_change):
        problem = guard(content, request)
        if problem is not None:
            return None, reask.Problem(problem.reason)
    return (FileContent(request.rel, content, checked), len(blocks)), None


def generate_file(step: Step, llm_config: dict | None, rel: str, instructions: str) -> dict:
    """``write_file`` with ``params.instructions``: the model writes a new ``rel``.

    A staged old version of the file, if any, is shown to the model.  Result
    fields: ``output_files`` ``[rel]``, ``bytes``, ``syntax_check`` and the fields of
    :attr:`.llm.Conversation.fields`.
    """
    chat = llm.conversation(step, llm_config, step.operation)
    if chat is None:
        return llm.unavailable(step, "write_file with params.instructions")
    old = None
    candidate = resolve_inside(step.input_dir, rel, "input directory")
    if os.path.isfile(candidate):
        old = read_text(candidate, rel)
    fence = fence_for(old or "")
    context = ""
    if old is not None:
        context = (
            "\n"
            + llm.render_prompt(
                "write_file_context",
                file_path=rel,
                fence=fence,
                language=language_tag(rel),
                content=old.rstrip("\n"),
            )
            + "\n"
        )
    messages = [
        {"role": "system", "content": llm.render_prompt("write_file_system")},
        {
            "role": "user",
            "content": llm.render_prompt(
                "write_file_user",
                file_path=rel,
                fence=fence,
                language=language_tag(rel),
                instructions=instructions.strip(),
                context=context,
            ),
        },
    ]
    answer = obtain_file_content(chat, messages, FileRequest(rel, fence, instructions, old))
    data = answer.text.encode("utf-8")
    with open(output_target(step, rel), "wb") as handle:
        handle.write(data)
    return success(
        step.operation,
        f"wrote {len(data)} bytes to {rel} from the LLM answer" + answer.note() + retry_note(chat),
        output_files=[rel],
        bytes=len(data),
        syntax_check=answer.syntax_check.fields(),
        **chat.fields,
    )


def obtain_file_content(
    chat: llm.Conversation, messages: list[dict], request: FileRequest
) -> FileContent:
    """Ask for the file; ask once more if the answer is unusable; return the content."""
    rel = request.rel
    outcome = reask.ask_until_usable(
        chat,
        messages,
        lambda answer: usable_content(answer, request),
        lambda problem: llm.render_prompt(
            "fix_code",
            problem=problem.for_model(),
            file_path=rel,
            fence=request.fence,
            language=language_tag(rel),
        ),
    )
    if outcome.usable:
        return outcome.value
    raise chat.fail(
        f"the LLM gave no usable content for {rel} in {chat.calls} attempts: {outcome.reason()} "
        f"({chat.saved()}); {rel} is left unchanged: retry the step, or make the "
        "instructions simpler",
        repeated=outcome.repeated,
    )


def usable_content(
    answer: str, request: FileRequest
) -> tuple[FileContent | None, reask.Problem | None]:
    """``(content, None)`` if ``answer`` holds the whole new file (or definitions to splice into
    it), else ``(None, problem)``."""
    rel = request.rel
    problem = oversized(answer, request)
    if problem is not None:
        return None, reask.Problem(problem)
    try:
        content = extract_code_block(answer, rel)
    except CodeBlockError as exc:
        return None, reask.Problem(str(exc))
    content, spliced, problem = fit_into_original(content, request)
    if problem is not None:
        return None, problem
    checked, problem = check_syntax(content, request)
    if problem is not None:
        return None, problem
    for guard in (drops_most_lines, drops_code, makes_no_change):
        problem = guard(content, request)
        if problem is not None:
            return None, problem
    return FileContent(rel, content, checked, tuple(spliced)), None


def asks_removal(instructions: str) -> bool:
    """Whether the instructions ask to take code out of the file."""
    return _REMOVAL_WORDS.search(instructions) is not None


def placeholder_line(content: str) -> str | None:
    """The first comment line that stands for left-out code, if any."""
    for line in content.splitlines():
        comment = _COMMENT.fullmatch(line)
        if comment is None:
            continue
        text = comment.group(1)
        body = text.strip(" .…()[]-:").strip()
        if len(body) > 60:
            continue
        if (not body and text.strip() in ("...", "…")) or (body and _PLACEHOLDER.match(body)):
            return line.strip()
    return None


def fit_into_original(
    content: str, request: FileRequest
) -> tuple[str, list[str], reask.Problem | None]:
    """An answer that holds only definitions of the file (the function it was asked to change,
    say), or that stands for the rest with a placeholder comment, spliced into the original:
    each definition replaces the one of the same name, everything else stays as it was. The
    spliced content with the names replaced, or the content as it is; or the problem when a
    placeholder stands for code that cannot be put back."""
    original = request.original
    if original is None:
        return content, [], None
    placeholder = placeholder_line(content)
    kept_lines = content
    if placeholder is not None:
        kept_lines = "\n".join(line for line in content.splitlines() if line.strip() != placeholder)
    rel = request.rel
    before = definitions.read(rel, original)
    after = definitions.read(rel, kept_lines)
    problem = None
    if placeholder is not None:
        problem = reask.Problem(
            f"the answer holds the placeholder `{placeholder}` where code of {rel} should be",
            f"Your answer holds the line `{placeholder}` instead of the code it stands for. "
            f"Never leave code out: give the WHOLE file {rel}, every line, with only the asked "
            "change made",
        )
    if before is None or after is None:
        return content, [], problem
    before_keys = {item.key for item in before}
    only_definitions = any(item.is_definition for item in after) and all(
        item.is_definition or item.key in before_keys for item in after
    )
    gone = definitions.dropped(before, after)
    if not only_definitions or not (gone or placeholder):
        return content, [], problem
    spliced = definitions.splice(original, before, kept_lines, after)
    if spliced is None:
        return content, [], problem
    # Definitions given back as they were, and instructions that ask to remove code: the
    # answer is the whole file with the rest removed, not a part to splice.
    if (
        placeholder is None
        and asks_removal(request.instructions)
        and definitions.normalized(rel, spliced[0]) == definitions.normalized(rel, original)
    ):
        return content, [], None
    return spliced[0], spliced[1], None


def check_syntax(
    content: str, request: FileRequest
) -> tuple[syntax.SyntaxCheck, reask.Problem | None]:
    """How ``content`` was checked, and the problem when it does not parse.

    A grammar may not know every construct a real file uses (a new language feature, C macros
    it cannot follow): when the file did not parse before the change either, the new version
    is not refused for the same reason, and the result says it was not checked.  Python's own
    compiler knows its language, so a Python file must always compile.
    """
    rel = request.rel
    checked = syntax.check(rel, content)
    if checked.ok:
        return checked, None
    if is_python(rel):
        error = checked.error
        return checked, reask.Problem(
            f"the code does not compile: {error}",
            f"Your code does not compile: {error}. Fix that line, and give the whole file again",
        )
    name = checked.language_name
    if request.original is not None:
        before = syntax.check(rel, request.original)
        if before.checked and not before.ok:
            return syntax.SyntaxCheck(
                checked.language,
                False,
                reason=f"{rel} did not parse as {name} before the change either "
                f"({before.error}), so its new version was not held to the {name} grammar",
            ), None
    return checked, reask.Problem(
        f"the code does not parse as {name}: {checked.error}",
        f"Your code does not parse as {name}: {checked.error}. Fix that, and give the whole "
        "file again",
    )


def oversized(answer: str, request: FileRequest) -> str | None:
    """The problem when ``answer`` is far larger than the file and the change could need."""
    size = len(answer.encode("utf-8"))
    before = len((request.original or "").encode("utf-8"))
    limit = GROWTH * (before + len(request.instructions.encode("utf-8"))) + SLACK
    if size <= limit:
        return None
    what = f"{request.rel} ({before} bytes)" if request.original is not None else request.rel
    return (
        f"the answer is {size} bytes, far more than {what} and the change could need (at most "
        f"{limit} bytes were expected): give the complete file once, nothing repeated"
    )


def drops_most_lines(content: str, request: FileRequest) -> reask.Problem | None:
    """The problem when the new version loses most of a sizeable file nobody asked to shorten.

    Both texts give the line counts (``426 → 8 lines``): they show at a glance
    that the answer is a fragment, and tell the model how much it left out.
    """
    if request.original is None or asks_removal(request.instructions):
        return None
    before = _non_blank_lines(request.original)
    after = _non_blank_lines(content)
    if before < MIN_LINES or after >= KEEP_RATIO * before:
        return None
    # Only comments and docstrings gone: every definition and statement is still there.
    old_items = definitions.read(request.rel, request.original)
    new_items = definitions.read(request.rel, content)
    if (
        old_items is not None
        and new_items is not None
        and not definitions.dropped(old_items, new_items)
    ):
        return None
    rel = request.rel
    lines_before, lines_after = len(request.original.splitlines()), len(content.splitlines())
    counts = f"{lines_before} → {lines_after} lines"
    return reask.Problem(
        f"the new {rel} has {lines_after} lines where it had {lines_before} ({counts}; {after} "
        f"non-blank lines where it had {before}): it drops more than half of the file, and the "
        "instructions do not ask to remove anything",
        f"Your answer drops more than half of the file: {rel} has {lines_before} lines, your "
        f"version has {lines_after} ({counts}). You must return the WHOLE file: every line of "
        f"{rel}, with only the asked change made, not only the part you changed",
    )


def drops_code(content: str, request: FileRequest) -> reask.Problem | None:
    """The problem when the new version leaves out definitions the instructions do not name,
    or most of the file's statements, at any size; judged by the language's parser, so
    comments and docstrings do not count."""
    if request.original is None or asks_removal(request.instructions):
        return None
    rel = request.rel
    before = definitions.read(rel, request.original)
    after = definitions.read(rel, content)
    if before is None or after is None:
        return None
    gone = definitions.dropped(before, after)
    named = definitions.named_in(request.instructions, gone)
    missing = [item for item in gone if item.is_definition and item not in named]
    if missing:
        listed = ", ".join(f"{item.kind} {item.name}" for item in missing)
        return reask.Problem(
            f"the new {rel} leaves out {listed}, which the instructions do not ask to remove",
            f"Your answer leaves out {listed} of {rel}. You must return the WHOLE file: every "
            "function and class in it, with only the asked change made",
        )
    kept = len(before) - len([item for item in gone if item in before])
    if len(before) >= 2 and 2 * kept < len(before):
        return reask.Problem(
            f"the new {rel} keeps {kept} of the {len(before)} top-level statements and "
            "definitions of the file, and the instructions do not ask to remove any",
            f"Your answer is not {rel} with the change made: it keeps {kept} of its "
            f"{len(before)} top-level statements. Give the WHOLE file, every line, with only "
            "the asked change made",
        )
    return None


def makes_no_change(content: str, request: FileRequest) -> reask.Problem | None:
    """The problem when the new version is the old one as code: layout, comments and
    docstrings aside (a small model's "fix" that edited a docstring and added ``# Change this
    line`` changed nothing), unless the instructions are about comments or documentation."""
    if request.original is None:
        return None
    rel = request.rel
    code_only = not asks_documentation(request.instructions)
    old = definitions.normalized(rel, request.original, without_docstrings=code_only)
    new = definitions.normalized(rel, content, without_docstrings=code_only)
    if old is None or new is None:
        old, new = "".join(request.original.split()), "".join(content.split())
    if old != new:
        return None
    instructions = request.instructions.strip()
    aside = "layout, comments and docstrings aside" if code_only else "layout aside"
    return reask.Problem(
        f"the model made no change: its answer is {rel} as it was ({aside})",
        f"Your answer makes no change to {rel}: apart from comments and docstrings it is the "
        f"file as it was. The instructions ask: {instructions}. Make that change in the code, "
        "and give the whole file",
    )


def asks_documentation(instructions: str) -> bool:
    """Whether the instructions are about comments or documentation, where a change to them
    alone is the change asked for."""
    return _DOCUMENTATION_WORDS.search(instructions) is not None


def replacement_problem(rel: str, original: str, content: str, description: str) -> str | None:
    """Why ``content`` cannot replace the existing file ``rel`` as given (by ``write_file``'s
    literal content, or another step's): it leaves out definitions or most of the file, which
    nothing asks to remove. The same guards as a model's rewrite; ``None`` when it may."""
    request = FileRequest(rel=rel, fence="```", instructions=description, original=original)
    for guard in (drops_code, drops_most_lines):
        problem = guard(content, request)
        if problem is not None:
            return problem.reason
    return None


def _non_blank_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def read_text(path: str, rel: str) -> str:
    """The UTF-8 text of ``path``; a binary or non-UTF-8 file is refused."""
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\0" in text:
        raise StepError(
            f"{rel} is not a UTF-8 text file: the LLM operations handle text files only"
        )
    return text


def check_function_exists(source: str, rel: str, function_name: str) -> None:
    """Fail early when a parsable Python file has no function or class ``function_name``.

    A dotted name (``Class.method``) is looked up by its last part.
    """
    try:
        tree = ast.parse(source, rel)
    except (SyntaxError, ValueError):
        return  # the model may be asked to fix the file; let it see it
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    names = sorted({node.name for node in ast.walk(tree) if isinstance(node, kinds)})
    if function_name.split(".")[-1] not in names:
        listed = ", ".join(names) if names else "none"
        raise StepError(
            f"params.function_name {function_name!r} is not defined in {rel} "
            f"(functions and classes in it: {listed}): give one of those names"
        )


def retry_note(chat: llm.Conversation) -> str:
    """A note for the message when the model had to be asked more than once."""
    return f" (after {chat.calls} requests)" if chat.calls > 1 else ""
