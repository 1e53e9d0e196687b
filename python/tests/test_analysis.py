"""analyze_code with a fake LLM, and the lenient JSON reading behind it."""

import json

import pytest
from conftest import FakeLLM
from open_codex_lib import execute_operation
from open_codex_lib.analysis import (
    AnswerError,
    normalize_analysis,
    number_lines,
    parse_json_object,
    remove_trailing_commas,
)

SOURCE = "import os\n\ndef f(x):\n    return eval(x)\n"
ANSWER = """Here is my review:

```json
{
  "summary": "f evaluates its argument.",
  "findings": [
    {"line": 4, "severity": "ERROR", "message": "eval on input is unsafe",},
    {"line": null, "severity": "nit", "message": "no docstring"},
  ],
}
```
"""


def analyze_step(make_step, **params):
    params = {"file_path": "src/a.py", **params}
    return make_step("analyze_code", params, inputs={"src/a.py": SOURCE})


def test_analyze_code_fenced_json_with_trailing_commas(make_step):
    files = analyze_step(make_step, query="Is it safe?", report_path="docs/review.md")
    llm = FakeLLM(ANSWER)
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "success", result["message"]
    assert result["summary"] == "f evaluates its argument."
    assert result["findings"] == [
        {"line": 4, "severity": "error", "message": "eval on input is unsafe"},
        {"line": None, "severity": "info", "severity_given": "nit", "message": "no docstring"},
    ]
    assert result["output_files"] == ["docs/review.md"]
    report = (files.step_dir / "report.md").read_text()
    assert report == result["report"]
    assert (files.output_dir / "docs/review.md").read_text() == report
    assert report.startswith("# Analysis of src/a.py\n\nQuestion: Is it safe?\n")
    assert "## Summary\n\nf evaluates its argument.\n" in report
    assert "- **error** (line 4): eval on input is unsafe\n" in report
    assert "- **info**: no docstring\n" in report
    assert result["report_file"] == str(files.step_dir / "report.md")
    assert result["llm_calls"] == 1
    [call] = llm.calls
    assert call["json"] is True and call["purpose"] == "analyze_code"
    prompt = llm.last_user_message()
    assert "4 |     return eval(x)" in prompt
    assert "Question: Is it safe?" in prompt
    assert '"message": "<what is wrong and how to fix it>"}]}\n' in prompt
    assert prompt.endswith(
        "and 12 with the line number of the problem. Give one finding for each problem you see."
    )


def test_analyze_code_without_report_path_writes_only_step_report(make_step):
    files = analyze_step(make_step)
    llm = FakeLLM('{"summary": "f evaluates its argument.", "findings": []}')
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "success"
    assert result["summary"] == "f evaluates its argument." and result["findings"] == []
    assert result["output_files"] == []
    assert list(files.output_dir.iterdir()) == []
    assert "No findings." in (files.step_dir / "report.md").read_text()
    assert "Question:" not in result["report"]
    assert "what problems" in llm.last_user_message()  # the default question


def test_analyze_code_reasks_once_then_succeeds(make_step):
    files = analyze_step(make_step)
    llm = FakeLLM('{"summary": "oops", "findings": [', '{"summary": "fine"}')
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "success"
    assert result["summary"] == "fine" and result["llm_calls"] == 2
    retry = llm.calls[1]["messages"]
    assert [m["role"] for m in retry] == ["system", "user", "assistant", "user"]
    assert "the JSON in the answer is invalid" in retry[3]["content"]
    assert llm.calls[1]["json"] is True


def test_analyze_code_prose_twice_is_kept_as_the_report(make_step):
    files = analyze_step(make_step, report_path="review.md")
    prose = "The code is short.\n\nf calls eval on its argument (line 4): that runs any code."
    llm = FakeLLM("I think the code is fine.", f"  {prose}\n")
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "success", result["message"]
    assert len(llm.calls) == 2 and result["llm_calls"] == 2
    assert "no JSON object" in llm.last_user_message(1)  # asked again first, as before
    assert result["structured"] is False
    assert result["summary"] == prose and result["findings"] == []
    assert result["message"] == (
        "analyzed src/a.py: the model answered in prose; kept as the report, no structured "
        "findings (report in report.md and review.md)"
    )
    report = (files.step_dir / "report.md").read_text()
    assert report == result["report"] == (files.output_dir / "review.md").read_text()
    assert f"## Summary\n\n{prose}\n" in report
    assert "No structured findings: the model answered in prose (above)." in report
    assert result["output_files"] == ["review.md"]


def test_analyze_code_keeps_the_first_prose_when_the_second_answer_is_empty(make_step):
    files = analyze_step(make_step)
    llm = FakeLLM("f is unsafe: it calls eval.", "   ")
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "success", result["message"]
    assert result["structured"] is False
    assert result["summary"] == "f is unsafe: it calls eval."


def test_analyze_code_empty_answers_fail(make_step):
    files = analyze_step(make_step, report_path="review.md")
    llm = FakeLLM("", " \n\t ")
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "failure"
    assert len(llm.calls) == 2
    assert (
        "no usable analysis of src/a.py in 2 attempts: the answers are empty" in (result["message"])
    )
    assert "llm-answer-1.md, llm-answer-2.md" in result["message"]
    assert not (files.step_dir / "report.md").exists()
    assert list(files.output_dir.iterdir()) == []


def test_analyze_code_json_answer_is_structured(make_step):
    files = analyze_step(make_step)
    result = execute_operation(files.path, {"complete": FakeLLM('{"summary": "s"}')})
    assert result["status"] == "success"
    assert result["structured"] is True


def test_parse_json_object_in_prose_and_strings_kept():
    text = 'Result: {"summary": "a, b]", "findings": [],} Hope this helps {not json}'
    assert parse_json_object(text) == {"summary": "a, b]", "findings": []}
    assert remove_trailing_commas('{"a": ",}", "b": [1, 2 , ],}') == '{"a": ",}", "b": [1, 2  ]}'
    nested = 'My review: {"summary": "s", "findings": [{"line": 1, "message": "m",},],} Bye.'
    assert parse_json_object(nested) == {
        "summary": "s",
        "findings": [{"line": 1, "message": "m"}],
    }
    with pytest.raises(AnswerError, match="no JSON object"):
        parse_json_object("nothing here")
    with pytest.raises(AnswerError, match="the JSON in the answer is invalid"):
        parse_json_object("{summary: 'single quotes'}")


def test_normalize_analysis_fixes_fields():
    data = normalize_analysis(
        {
            "summary": None,
            "findings": [
                "plain string finding",
                {"line": "7", "severity": " Warning ", "message": " trim me "},
                {"line": 0, "severity": "critical", "message": "x"},
                {"line": 3, "severity": "error"},
                42,
            ],
        }
    )
    assert data == {
        "summary": "",
        "findings": [
            {"line": None, "severity": "info", "message": "plain string finding"},
            {"line": 7, "severity": "warning", "message": "trim me"},
            {"line": None, "severity": "error", "severity_given": "critical", "message": "x"},
        ],
    }


def test_normalize_analysis_maps_common_severity_words_and_keeps_the_given_one():
    given = {
        "critical": "error",
        "High": "error",
        "MAJOR": "error",
        "severe": "error",
        "blocker": "error",
        "medium": "warning",
        "moderate": "warning",
        "minor": "warning",
        "warn": "warning",
        "low": "info",
        "note": "info",
        "hint": "info",
        "style": "info",
        "suggestion": "info",
        "nit": "info",
        "whatever": "info",
    }
    raw = [{"severity": word, "message": f"m {word}"} for word in given]
    findings = normalize_analysis({"findings": raw})["findings"]
    assert [(f["severity_given"], f["severity"]) for f in findings] == list(given.items())


def test_normalize_analysis_adds_no_severity_given_for_the_three_known_words():
    raw = [
        {"severity": " Warning ", "message": "a"},
        {"severity": "ERROR", "message": "b"},
        {"message": "c"},
    ]
    findings = normalize_analysis({"findings": raw})["findings"]
    assert findings == [
        {"line": None, "severity": "warning", "message": "a"},
        {"line": None, "severity": "error", "message": "b"},
        {"line": None, "severity": "info", "message": "c"},
    ]


def test_number_lines():
    assert number_lines("a\n" * 10).splitlines()[0] == " 1 | a"
    assert number_lines("a\n" * 10).splitlines()[9] == "10 | a"
    assert json.dumps(number_lines("")) == '"1 | "'


# --- answers that copy the prompt's example (small models do) -------------------------

# SmolLM2-135M's whole answer in run f3-analyse-smol (/work/shared/notes/small-models.md, 6):
# the prompt's example, word for word but for one capital letter. It was written as ANALYSIS.md.
F3_ANSWER = (
    '{"summary": "two or three sentences that answer the question", "findings": [{"line": 12, '
    '"severity": "warning", "message": "What is wrong and how to fix it"}]}'
)
REAL_ANSWER = (
    '{"summary": "f runs its argument as Python code.", "findings": [{"line": 4, '
    '"severity": "error", "message": "eval runs any code; use ast.literal_eval."}]}'
)


def test_analyze_code_answer_copying_the_prompt_example_is_asked_again(make_step):
    files = analyze_step(make_step)
    llm = FakeLLM(F3_ANSWER, REAL_ANSWER)
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "success", result["message"]
    assert result["summary"] == "f runs its argument as Python code."
    assert len(llm.calls) == 2
    reask = llm.last_user_message(1)
    assert "You copied the example's text" in reask
    assert "write what you found in THIS file" in reask


def test_analyze_code_example_text_twice_fails_and_writes_nothing(make_step):
    files = analyze_step(make_step, report_path="ANALYSIS.md")
    llm = FakeLLM(F3_ANSWER)
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "failure"
    assert len(llm.calls) == 2
    assert "no usable analysis of src/a.py in 2 attempts" in result["message"]
    assert "copied the example's text" in result["message"]
    assert not (files.step_dir / "report.md").exists()
    assert list(files.output_dir.iterdir()) == []


def test_analyze_code_example_text_is_found_whatever_its_case_spacing_or_brackets(make_step):
    for summary in (
        "Two or three sentences  that answer\nthe question.",
        "<two or three sentences that answer the question>",
        "TWO OR THREE SENTENCES THAT ANSWER THE QUESTION",
    ):
        files = analyze_step(make_step)
        answer = json.dumps({"summary": summary, "findings": []})
        result = execute_operation(files.path, {"complete": FakeLLM(answer)})
        assert result["status"] == "failure", summary
        assert "copied the example's text" in result["message"], summary


def test_analyze_code_example_text_in_one_finding_is_enough_to_ask_again(make_step):
    files = analyze_step(make_step)
    copied = {
        "summary": "f evaluates its argument.",
        "findings": [
            {"line": 4, "severity": "error", "message": "<What is wrong and how to fix it>"}
        ],
    }
    llm = FakeLLM(json.dumps(copied), REAL_ANSWER)
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "success", result["message"]
    assert "You copied the example's text" in llm.last_user_message(1)
    assert result["findings"][0]["message"] == "eval runs any code; use ast.literal_eval."


def test_analyze_code_real_text_that_quotes_the_example_words_is_kept(make_step):
    files = analyze_step(make_step)
    answer = json.dumps(
        {
            "summary": "The docstring should say what is wrong and how to fix it.",
            "findings": [{"line": 4, "severity": "warning", "message": "Say what is wrong."}],
        }
    )
    llm = FakeLLM(answer)
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "success", result["message"]
    assert len(llm.calls) == 1


def test_analyze_code_prompt_example_is_made_of_angle_bracket_markers(make_step):
    files = analyze_step(make_step)
    llm = FakeLLM(REAL_ANSWER)
    execute_operation(files.path, {"complete": llm})
    prompt = llm.last_user_message()
    assert '"summary": "<' in prompt and '"message": "<' in prompt
    assert "Replace every <...> with your own words" in prompt


def test_analyze_code_example_check_follows_the_prompt_files(make_step, monkeypatch):
    """The example texts are read from the prompt files: change the example, the check follows."""
    from open_codex_lib import llm as llm_module

    load_prompt = llm_module.load_prompt

    def edited(name):
        text = load_prompt(name)
        if name in ("analyze_code_user", "fix_json"):
            text = text.replace("<two or three sentences that answer the question>", "<gist>")
        return text

    monkeypatch.setattr(llm_module, "load_prompt", edited)
    files = analyze_step(make_step)
    answer = json.dumps({"summary": "Gist.", "findings": []})
    result = execute_operation(files.path, {"complete": FakeLLM(answer)})
    assert result["status"] == "failure"
    assert "copied the example's text" in result["message"]


# --- empty analyses ------------------------------------------------------------------

# Gemma-3-270M's answer under json_object with a file in the prompt (g3-analyse, small-models.md 3).
EMPTY_OBJECT = "{}\n"


def test_analyze_code_empty_object_is_asked_again_then_fails_clearly(make_step):
    files = analyze_step(make_step, report_path="ANALYSIS.md")
    llm = FakeLLM(EMPTY_OBJECT)
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "failure"
    assert len(llm.calls) == 2
    assert "Your answer is empty: it has no summary and no findings" in llm.last_user_message(1)
    assert (
        "no usable analysis of src/a.py in 2 attempts: the analysis is empty" in (result["message"])
    )
    assert "no 'summary'" not in result["message"]  # not the parser's words
    assert not (files.step_dir / "report.md").exists()
    assert list(files.output_dir.iterdir()) == []


def test_analyze_code_empty_summary_and_no_findings_is_asked_again(make_step):
    files = analyze_step(make_step)
    llm = FakeLLM('{"summary": "", "findings": []}', REAL_ANSWER)
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "success", result["message"]
    assert result["summary"] == "f runs its argument as Python code."
    reask = llm.last_user_message(1)
    assert "Your answer is empty" in reask and "THIS file" in reask


def test_analyze_code_empty_analysis_twice_is_not_kept_as_prose(make_step):
    files = analyze_step(make_step)
    llm = FakeLLM("{}", '{"summary": "  ", "findings": [{"message": ""}]}')
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "failure"
    assert "the analysis is empty" in result["message"]


def test_analyze_code_cut_off_answers_are_never_kept_as_prose(make_step):
    # A small model's answer repeated to the token limit, twice: no analysis, whatever its words.
    files = analyze_step(make_step)
    looping = "The function f evaluates its argument. " * 300
    cut = {"content": looping, "finish_reason": "length", "usage": {"total_tokens": 2048}}
    llm = FakeLLM(cut, dict(cut, content=looping + "And"))
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "failure", result
    assert "truncated at the token limit" in result["message"]
    assert len(llm.calls) == 2


def test_analyze_code_findings_without_a_summary_are_an_analysis(make_step):
    files = analyze_step(make_step)
    answer = '{"findings": [{"line": 4, "severity": "error", "message": "eval is unsafe"}]}'
    result = execute_operation(files.path, {"complete": FakeLLM(answer)})
    assert result["status"] == "success", result["message"]
    assert result["summary"] == "" and len(result["findings"]) == 1


def test_analyze_code_same_copied_example_twice_says_the_model_repeated_itself(make_step):
    files = analyze_step(make_step)
    llm = FakeLLM(F3_ANSWER, F3_ANSWER)
    result = execute_operation(files.path, {"complete": llm, "temperature": 0.2})
    assert result["status"] == "failure"
    assert result["repeated"] is True
    assert "the model gave the same answer again" in result["message"]
    assert "copied the example's text" in result["message"]
    assert [call["temperature"] for call in llm.calls] == [None, 0.5]
    assert result["llm_temperatures"] == [None, 0.5]


def test_an_answer_states_what_the_code_printed_by_its_values_not_by_a_word_list():
    from open_codex_lib.analysis import printed_value, states_printed

    command = "python3 -c 'from stats import summarize; print(summarize([]))'"
    question = "What does summarize() return for an empty list?"
    asked = f"{command}\n{question}"
    # Outputs as the evidence step leaves them: the code's output, then the exit code.
    none = printed_value("None\n(exit code 0)\n")
    assert none == "None"
    assert states_printed("For an empty list it returns None.", none, asked) is True
    # The real Qwen2.5-Coder-0.5B's answer to it.
    wrong = "takes a list of values and returns a dictionary with the smallest, largest, and mean"
    assert states_printed(wrong, none, asked) is False
    # Output without a final newline: the trailer glued to it.
    assert printed_value("None(exit code 0)") == "None"
    assert states_printed("The code returns a dictionary", "None", asked) is False
    raised = printed_value(
        'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
        "ValueError: the list is empty\n(exit code 1)"
    )
    assert raised == "ValueError: the list is empty"
    assert states_printed("It raises ValueError when the list is empty.", raised, asked) is True
    # Short words and the question's own words say nothing.
    assert states_printed("It returns the mean of the list.", raised, asked) is False
    # The function's name comes from the command: not a statement of what it returned.
    assert states_printed("summarize returns a dict", "summarize([]) -> None", asked) is False
    record = "{'min': 1, 'max': 3, 'mean': 2.0}"
    assert states_printed("A dict: min 1, max 3 and mean 2.0.", record) is True
    assert states_printed("It returns 3.5", "3.5") is True
    assert states_printed("It returns 35", "3.5") is False
    assert states_printed("It returns 0.5", "0") is False
    for value in ["1e-05", "3.0e-5", "0x1f", "1_000", "-2", "café", "Ünïcode"]:
        assert states_printed(f"It returns {value}.", value) is True, value
    assert states_printed("It returns 0.00001.", "1e-05") is True
    assert states_printed("It returns true.", "True") is True
    assert states_printed("the string hello", "'hello'") is True
    # Nothing to compare: no judgement.
    assert states_printed("an empty list", "[]") is None
    assert printed_value("(exit code 0)") is None
