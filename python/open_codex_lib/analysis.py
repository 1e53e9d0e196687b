"""The ``analyze_code`` operation: the model reviews one file and answers in JSON.

The model gets the file with line numbers and is asked for ONE JSON object
``{"summary": str, "findings": [{"line": int|null, "severity":
"info"|"warning"|"error", "message": str}]}`` (the host is asked for JSON
mode).  :func:`parse_json_object` reads it leniently: the object may sit in
prose or in a ```` ```json ```` fence and may have trailing commas.
:func:`normalize_analysis` then fixes the fields (common severity words such as
"critical" or "low" -> one of the three, anything else -> "info", the model's
own word kept in ``severity_given``; missing summary -> "").  An answer whose
summary or a finding's message is the text of the prompt's example
(:func:`copied_example`, compared loosely against the prompt files) is no
analysis: small models copy the example.  Nor is an empty one (``{}``, or
neither a summary nor a finding).  An unusable answer is asked once
more with its problem (:mod:`.reask`).  If the model answers in prose twice,
its text is kept as the report (``structured: false``, the prose as summary,
no findings) rather than thrown away: a review in prose is still a review.
Otherwise the step fails and nothing is written.  The Markdown report is
written to ``<step dir>/report.md`` and, with ``params.report_path``, to the
output.
"""

from __future__ import annotations

import json
import os
import re

from . import llm, reask
from .code_blocks import fence_for, find_blocks
from .code_edit import read_text
from .instructions import Step
from .params import optional_str
from .paths import normalize_repo_path, output_target, staged_file
from .results import StepError, success

SEVERITIES = ("info", "warning", "error")
# Words models use for severity, by the level they mean. Scales with four or five levels
# (blocker/critical/major/minor/trivial, critical/high/medium/low) are folded so that anything
# that must be fixed is an error, anything worth fixing a warning, the rest info.
SEVERITY_WORDS = {
    "error": (
        "error", "err", "critical", "crit", "blocker", "fatal", "high", "major", "severe",
        "serious", "urgent", "bug",
    ),
    "warning": ("warning", "warn", "medium", "moderate", "minor", "caution", "important"),
    "info": (
        "info", "information", "informational", "low", "trivial", "note", "hint", "style",
        "suggestion", "nit", "nitpick", "tip", "optional", "cosmetic",
    ),
}  # fmt: skip
SEVERITY_OF = {word: level for level, words in SEVERITY_WORDS.items() for word in words}
DEFAULT_QUERY = (
    "What does this file do, and what problems (bugs, risks, unclear code) does it have?"
)
REPORT_FILE = "report.md"
PROSE_NOTE = "the model answered in prose; kept as the report, no structured findings"
MAX_OBJECT_STARTS = 50  # '{' positions tried when looking for the object in prose
# The prompts that show the model an example answer, and the free-text fields of that example.
EXAMPLE_PROMPTS = ("analyze_code_user", "fix_json")
_EXAMPLE_TEXT = re.compile(r'"(?:summary|message)"\s*:\s*"((?:[^"\\]|\\.)*)"')


class AnswerError(ValueError):
    """The answer holds no usable JSON object; the message says why."""


# The most of a command's output an answer is given as evidence (its end).
EVIDENCE_CHARS = 4000


def evidence_output(step: Step) -> tuple[str, str] | None:
    """``(command, output)`` of ``params.evidence_from_step``'s run (its output's end), or
    ``None`` without one."""
    source = optional_str(step.params, "evidence_from_step")
    if not source:
        return None
    ref = step.steps.get(source)
    result = ref.load_result()[0] if ref is not None else None
    if not isinstance(result, dict):
        return None
    output = "".join(
        text for text in (result.get("stdout"), result.get("stderr")) if isinstance(text, str)
    ).strip()
    if len(output) > EVIDENCE_CHARS:
        output = "…" + output[-EVIDENCE_CHARS:]
    command = result.get("command") if isinstance(result.get("command"), str) else ""
    return command, output


# The trailer the evidence step's command ends its output with (``flow::deliverables``), on a
# line of its own or glued to output that had no final newline.
_EXIT_TRAILER = re.compile(r"\(exit code -?\d+\)$")
# What a printed line says: names (any script), numbers (signs, exponents, hex, underscores),
# quoted strings.
_NUMBER = r"[-+]?(?:0[xX][0-9a-fA-F]+|\d[\d_]*(?:\.\d+)?(?:[eE][-+]?\d+)?)"
_PRINTED_WORD = re.compile(rf"'[^']*'|\"[^\"]*\"|{_NUMBER}|[^\W\d]\w*")
# Names shorter than this say little on their own ("is", "the", "a"): a length, not a list.
_SHORT = 4
# The most of the printed line a result keeps (it reaches the status and the deliverable's detail).
_PRINTED_CHARS = 200


def printed_value(output: str) -> str | None:
    """The last line the code printed (an exception's is its type and message), without the
    exit code's trailer; ``None`` when it printed nothing."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if lines:
        lines[-1] = _EXIT_TRAILER.sub("", lines[-1]).strip()
        if not lines[-1]:
            lines.pop()
    return lines[-1] if lines else None


def _number(word: str) -> float | None:
    try:
        return float(int(word, 16)) if word.lower().lstrip("+-").startswith("0x") else float(word)
    except ValueError:
        return None


def _words(text: str) -> tuple[set[str], set[float]]:
    """The names and strings of ``text`` (lower case, quotes off), and its numbers' values."""
    names, numbers = set(), set()
    for word in _PRINTED_WORD.findall(text):
        value = _number(word) if word[0] not in "'\"" else None
        if value is not None:
            numbers.add(value)
        else:
            names.add(word.strip("'\"").lower())
    names.discard("")
    return names, numbers


def states_printed(answer: str, printed: str, asked: str = "") -> bool | None:
    """Whether ``answer`` states what the code printed (``printed``, its last line): it holds the
    line itself, or one of its numbers (by value), or one of its names or strings of four
    characters or more that ``asked`` (the command and the question) does not already hold — a
    function's name the command calls says nothing about what it returned. ``None`` when the
    line has nothing to compare (``[]``, ``{}``): no judgement then."""
    whole = rf"(?<![\w.]){re.escape(printed.lower())}(?!\w|\.\d)"
    if re.search(whole, answer.lower()):
        return True
    names, numbers = _words(printed)
    asked_names, asked_numbers = _words(asked)
    names = {n for n in names - asked_names if len(n) >= _SHORT}
    numbers -= asked_numbers
    if not names and not numbers:
        return None
    answer_names, answer_numbers = _words(answer)
    return bool(names & answer_names) or bool(numbers & answer_numbers)


def evidence_text(step: Step) -> str:
    """What ``params.evidence_from_step``'s command printed, as the prompt gives it (empty
    without one): the code run on the repository, which the answer must agree with."""
    ran = evidence_output(step)
    if ran is None:
        return ""
    command, output = ran
    fence = fence_for(output)
    return (
        f"The command `{command}` was run at the repository's root on these files; it "
        f"printed:\n{fence}\n{output}\n{fence}\nYour answer must agree with what it "
        "printed: it is what the code does.\n\n"
    )


def analyze_code(step: Step, llm_config: dict | None) -> dict:
    """Review a staged file; return ``summary``, ``findings`` and the Markdown ``report``.

    Result fields: ``summary``, ``findings``, ``report``, ``report_file``
    (absolute path of ``report.md`` in the step directory), ``output_files``
    (``[report_path]`` when given) and the fields of
    :attr:`.llm.Conversation.fields`.
    """
    params = step.params
    rel = normalize_repo_path(params.get("file_path"), "params.file_path")
    query = optional_str(params, "query")
    query = query.strip() if query and query.strip() else None
    report_path = params.get("report_path")
    if report_path is not None:
        report_path = normalize_repo_path(report_path, "params.report_path")
    chat = llm.conversation(step, llm_config, step.operation)
    if chat is None:
        return llm.unavailable(step, step.operation)
    source = read_text(staged_file(step, rel), rel)

    numbered = number_lines(source)
    fence = fence_for(numbered)
    evidence = evidence_text(step)
    messages = [
        {"role": "system", "content": llm.render_prompt("analyze_code_system")},
        {
            "role": "user",
            "content": llm.render_prompt(
                "analyze_code_user",
                file_path=rel,
                fence=fence,
                numbered=numbered,
                query=query or DEFAULT_QUERY,
                evidence=evidence,
            ),
        },
    ]
    data, structured = ask_analysis(chat, messages, rel)
    agrees = None
    ran = evidence_output(step)
    printed = printed_value(ran[1]) if ran is not None else None
    if printed is not None:
        asked = f"{ran[0]}\n{query or ''}"
        agrees = states_printed(data["summary"], printed, asked)
        if agrees is False:
            # Asked once more with what was printed: the answer must state it. An unusable
            # second answer leaves the first, which does not.
            again = messages + [
                {"role": "assistant", "content": json.dumps(data)},
                {
                    "role": "user",
                    "content": f"Your answer does not state what the command printed (its last "
                    f"line: `{printed}`), which is what the code does. Answer again, in the same "
                    "JSON form, with a summary that states it.",
                },
            ]
            try:
                data, structured = ask_analysis(chat, again, rel)
            except StepError as error:
                # A failed call (or ocflow stopping) fails the step as any call's failure does.
                if "llm_error" in error.fields:
                    raise
            agrees = states_printed(data["summary"], printed, asked)
    report = render_report(rel, query, data["summary"], data["findings"], structured)
    secret = (llm_config or {}).get("api_key")
    shown = (printed or "")[:_PRINTED_CHARS]
    if isinstance(secret, str) and secret:
        report = report.replace(secret, "[REDACTED]")
        shown = shown.replace(secret, "[REDACTED]")
    report_file = os.path.join(step.base_dir, REPORT_FILE)
    with open(report_file, "w", encoding="utf-8") as handle:
        handle.write(report)
    output_files = []
    if report_path is not None:
        with open(output_target(step, report_path), "w", encoding="utf-8") as handle:
            handle.write(report)
        output_files.append(report_path)
    where = REPORT_FILE + (f" and {report_path}" if report_path else "")
    if structured:
        what = f"{len(data['findings'])} finding(s), report in {where}"
    else:
        what = f"{PROSE_NOTE} (report in {where})"
    return success(
        step.operation,
        f"analyzed {rel}: {what}",
        output_files=output_files,
        summary=data["summary"],
        findings=data["findings"],
        structured=structured,
        report=report,
        report_file=report_file,
        **({} if agrees is None else {"states_evidence": agrees, "evidence_printed": shown}),
        **chat.fields,
    )


def ask_analysis(chat: llm.Conversation, messages: list[dict], rel: str) -> tuple[dict, bool]:
    """Ask for the JSON analysis, once more if it is unusable: ``(analysis, structured)``.

    An answer is unusable when no analysis can be read from it, when the
    analysis is empty (``{}``, or no summary and no findings), or when it
    copies the prompt's example.  When the asks give none, the last non-empty
    answer holding no JSON analysis at all is kept as a prose analysis
    (``structured`` False): a review in prose is still a review (one cut off at
    the token limit is not one).  Otherwise
    the step fails, and nothing is written.
    """
    outcome = reask.ask_until_usable(
        chat,
        messages,
        lambda answer: judge_analysis(answer, rel),
        lambda problem: llm.render_prompt("fix_json", problem=problem.for_model()),
        json=True,
    )
    if outcome.usable:
        return outcome.value, True
    prose = next(
        (text.strip() for text in reversed(outcome.whole_answers()) if is_prose(text)), None
    )
    if prose is not None:
        return {"summary": prose, "findings": []}, False
    if not any(text.strip() for text in outcome.answers):
        what = "the answers are empty"
    else:
        what = outcome.reason()
    raise chat.fail(
        f"the LLM gave no usable analysis of {rel} in {chat.calls} attempts: {what} "
        f"({chat.saved()}): retry the step",
        repeated=outcome.repeated,
    )


def judge_analysis(text: str, rel: str) -> tuple[dict | None, reask.Problem | None]:
    """``(analysis, None)`` when ``text`` holds a usable analysis of ``rel``, else the problem."""
    try:
        data = parse_analysis(text)
    except AnswerError as exc:
        return None, reask.Problem(str(exc), f"Your answer is not the JSON object asked for: {exc}")
    if not data["summary"] and not data["findings"]:
        return None, reask.Problem(
            "the analysis is empty (no summary and no findings)",
            f"Your answer is empty: it has no summary and no findings. Write what you found in "
            f"THIS file, {rel}: a summary that answers the question, and one finding for each "
            "problem you see",
        )
    copied = copied_example(data)
    if copied is not None:
        return None, reask.Problem(
            f"the model copied the example's text from the prompt ({copied!r}) instead of "
            f"writing what it found in {rel}",
            f'You copied the example\'s text ("{copied}"); write what you found in THIS file, '
            f"{rel}: a summary that answers the question, and one finding for each problem you "
            "see, with its line number",
        )
    return data, None


def is_prose(text: str) -> bool:
    """True when ``text`` is not empty and holds no analysis in JSON (it may be a review)."""
    if not text.strip():
        return False
    try:
        parse_analysis(text)
    except AnswerError:
        return True
    return False


def copied_example(data: dict) -> str | None:
    """The summary or finding message of ``data`` that is one of the prompts' examples, if any.

    Small models copy the example of the answer format (SmolLM2-135M did, word
    for word): such an answer describes an analysis instead of giving one.
    """
    examples = example_texts()
    texts = [data["summary"]] + [finding["message"] for finding in data["findings"]]
    return next((text for text in texts if normalize_text(text) in examples), None)


def example_texts() -> set[str]:
    """The example texts ("summary", "message") of the analysis prompts, normalised.

    Read from the prompt files at every call, so that the check follows the
    prompts when their example changes.
    """
    texts = set()
    for name in EXAMPLE_PROMPTS:
        for raw in _EXAMPLE_TEXT.findall(llm.load_prompt(name)):
            texts.add(normalize_text(json.loads(f'"{raw}"')))
    texts.discard("")
    return texts


def normalize_text(text: str) -> str:
    """``text`` compared loosely: lower-case, one space between words, no ``<...>`` around it,
    no full stop at its end."""
    text = " ".join(text.split()).lower()
    if text.startswith("<") and text.endswith(">"):
        text = text[1:-1].strip()
    return text.rstrip(".").strip()


def number_lines(source: str) -> str:
    """``source`` with right-aligned line numbers: ``  7 | code``."""
    lines = source.splitlines() or [""]
    width = len(str(len(lines)))
    return "\n".join(f"{n:>{width}} | {line}" for n, line in enumerate(lines, 1))


def parse_analysis(text: str) -> dict:
    """The normalised analysis in the answer ``text`` (raises :class:`AnswerError`).

    ``{}`` is an analysis, an empty one (models answer it under JSON mode):
    the caller judges emptiness, with a plainer reason than a missing key.
    """
    data = parse_json_object(text)
    if data and "summary" not in data and "findings" not in data:
        keys = ", ".join(sorted(map(str, data))) or "none"
        raise AnswerError(
            f"the JSON object has no 'summary' and no 'findings' key (its keys: {keys})"
        )
    return normalize_analysis(data)


def parse_json_object(text: str) -> dict:
    """The JSON object in ``text``.

    Each candidate (the whole text, then each fenced block such as
    ```` ```json ````) is tried as it is and with trailing commas removed;
    only when none parses whole is the object looked for inside the prose
    (trailing commas removed), from its first ``{``.  Raises :class:`AnswerError` with the parse error.
    """
    candidates = [text] + [block.content for block in find_blocks(text)]
    variants = [v for c in candidates for v in (c, remove_trailing_commas(c))]
    first_error = None
    for variant in variants:
        try:
            value = json.loads(variant)
        except ValueError as exc:
            first_error = first_error or exc
            continue
        if isinstance(value, dict):
            return value
    for candidate in candidates:  # commas before } or ] are never valid JSON anyway
        value = _object_in_prose(remove_trailing_commas(candidate))
        if value is not None:
            return value
    if "{" not in text:
        raise AnswerError("the answer holds no JSON object (no '{' found)")
    raise AnswerError(f"the JSON in the answer is invalid: {first_error}")


def _object_in_prose(text: str) -> dict | None:
    """The first JSON object starting at one of the ``{`` of ``text``, if any."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    tries = 0
    while start != -1 and tries < MAX_OBJECT_STARTS:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
        tries += 1
    return None


def remove_trailing_commas(text: str) -> str:
    """``text`` without commas that directly precede ``}`` or ``]`` (outside strings)."""
    out = []
    in_string = False
    escaped = False
    i = 0
    while i < len(text):
        char = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == ",":
            j = i + 1
            while j < len(text) and text[j] in " \t\r\n":
                j += 1
            if j < len(text) and text[j] in "}]":
                i += 1
                continue
        out.append(char)
        i += 1
    return "".join(out)


def normalize_analysis(data: dict) -> dict:
    """``{"summary": str, "findings": [...]}`` with every field in its expected form.

    A finding given as a plain string becomes an "info" finding; findings
    without a message are dropped; ``line`` is a positive int or None.
    """
    summary = data.get("summary")
    if summary is None:
        summary = ""
    elif not isinstance(summary, str):
        summary = json.dumps(summary, ensure_ascii=False)
    raw = data.get("findings")
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        raw = []
    findings = []
    for item in raw:
        if isinstance(item, str):
            item = {"message": item}
        if not isinstance(item, dict):
            continue
        message = item.get("message")
        if not isinstance(message, str) or not message.strip():
            continue
        finding = {"line": _line_number(item.get("line"))}
        finding.update(_severity(item.get("severity")))
        finding["message"] = message.strip()
        findings.append(finding)
    return {"summary": summary.strip(), "findings": findings}


def _severity(given) -> dict:
    """``{"severity": level}``, plus ``severity_given`` when the model's word was another.

    The model's word is kept so that a mapping ("high" -> "error") or a fallback
    (an unknown word -> "info") can be seen and questioned.
    """
    if given is None or (isinstance(given, str) and not given.strip()):
        return {"severity": "info"}
    if not isinstance(given, str):
        given = json.dumps(given, ensure_ascii=False)
    word = given.strip()
    level = SEVERITY_OF.get(word.lower(), "info")
    if word.lower() == level:
        return {"severity": level}
    return {"severity": level, "severity_given": word}


def _line_number(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else None


def render_report(
    rel: str, query: str | None, summary: str, findings: list[dict], structured: bool = True
) -> str:
    """The Markdown report: title, question, summary and the findings list.

    A prose answer (``structured`` False) is the summary; the findings section
    then says there are none in structured form, not that the file has none.
    """
    lines = [f"# Analysis of {rel}", ""]
    if query:
        lines += [f"Question: {query}", ""]
    lines += ["## Summary", "", summary or "(no summary given)", "", "## Findings", ""]
    if not structured:
        lines.append("No structured findings: the model answered in prose (above).")
    elif not findings:
        lines.append("No findings.")
    for finding in findings:
        where = f" (line {finding['line']})" if finding["line"] is not None else ""
        lines.append(f"- **{finding['severity']}**{where}: {finding['message']}")
    return "\n".join(lines) + "\n"
