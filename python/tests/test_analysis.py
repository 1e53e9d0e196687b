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
    assert prompt.rstrip().endswith('"message": "what is wrong and how to fix it"}]}')


def test_analyze_code_without_report_path_writes_only_step_report(make_step):
    files = analyze_step(make_step)
    llm = FakeLLM('{"findings": []}')
    result = execute_operation(files.path, {"complete": llm})
    assert result["status"] == "success"
    assert result["summary"] == "" and result["findings"] == []
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
