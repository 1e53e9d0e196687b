"""modify_code, refactor_function and write_file with params.instructions, with a fake LLM."""

import json
import sys
import threading

import pytest
from conftest import FakeLLM, HostError
from open_codex_lib import code_edit, execute_operation
from open_codex_lib import reask as reask_module
from open_codex_lib.code_blocks import language_tag

ORIGINAL = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
NEW = "def f():\n    return 10\n\n\ndef g():\n    return 2\n"


def run(files, llm, **extra):
    result = execute_operation(files.path, {"complete": llm, **extra})
    json.dumps(result)  # every result must be JSON-serialisable
    return result


def modify_step(make_step, operation="modify_code", **params):
    params = {"file_path": "src/utils.py", "instructions": "make f return 10", **params}
    return make_step(operation, params, inputs={"src/utils.py": ORIGINAL})


def test_modify_code_fenced_answer_with_prose(make_step):
    files = modify_step(make_step)
    llm = FakeLLM(f"Sure, here is the file:\n\n```python\n{NEW}```\n\nf now returns 10.")
    result = run(files, llm)
    assert result["status"] == "success", result["message"]
    assert (files.output_dir / "src/utils.py").read_text() == NEW
    assert result["output_files"] == ["src/utils.py"]
    assert result["changed"] is True
    assert result["lines_before"] == 6 and result["lines_after"] == 6
    assert result["llm_calls"] == 1 and result["llm_answers"] == ["llm-answer-1.md"]
    assert (files.step_dir / "llm-answer-1.md").read_text().startswith("Sure, here is")
    assert result["message"] == "rewrote src/utils.py from the LLM answer (6 -> 6 lines)"
    [call] = llm.calls
    assert call["purpose"] == "modify_code" and call["json"] is False
    system, user = call["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    assert "```python\n" + ORIGINAL + "```" in user["content"]
    assert "make f return 10" in user["content"]
    assert user["content"].endswith("Write nothing after the code block.")
    assert "$" not in user["content"]
    assert "Change only the function" not in user["content"]


def test_a_code_step_is_shown_the_task_its_instructions_do_not_hold(make_step):
    # Issue 41: a small model's plan gives a code step one terse line; the user's words are
    # what the change is for. Shown above the instructions, unless the instructions hold them.
    files = modify_step(make_step)
    llm = FakeLLM(f"```python\n{NEW}```")
    assert run(files, llm)["status"] == "success"
    user = llm.calls[0]["messages"][1]["content"]
    shown = (
        "The task this change is part of (make only the change asked below):\nRefactor utils.py\n"
    )
    assert user.startswith(shown) and "Change to make:\nmake f return 10" in user
    files = modify_step(make_step, instructions="Refactor   utils.py: make f return 10")
    llm = FakeLLM(f"```python\n{NEW}```")
    assert run(files, llm)["status"] == "success"
    assert "The task this change is part of" not in llm.calls[0]["messages"][1]["content"]
    # A long task is cut: a small model's context holds the file too.
    assert code_edit.task_context("x" * 5000, "do y").endswith("x …\n\n")
    assert len(code_edit.task_context("x" * 5000, "do y")) < 2200


def test_modify_code_unfenced_code_that_compiles(make_step):
    files = modify_step(make_step)
    result = run(files, FakeLLM(NEW.rstrip("\n")))
    assert result["status"] == "success"
    assert (files.output_dir / "src/utils.py").read_text() == NEW


def test_modify_code_unchanged_answer_is_asked_again_then_fails(make_step):
    # Issue 24: an edit that changes nothing is not an edit (this test said "success,
    # unchanged" before).
    files = modify_step(make_step)
    llm = FakeLLM(f"```python\n{ORIGINAL}\n\n```", f"```python\n{ORIGINAL}\n```")
    result = run(files, llm)
    assert result["status"] == "failure"
    assert len(llm.calls) == 2
    assert "Your answer makes no change to src/utils.py" in llm.last_user_message(1)
    assert "make f return 10" in llm.last_user_message(1)
    assert "the model made no change" in result["message"]
    assert list(files.output_dir.iterdir()) == []


def test_modify_code_keeps_crlf_line_endings(make_step):
    files = make_step(
        "modify_code",
        {"file_path": "a.py", "instructions": "x"},
        inputs={"a.py": b"x = 1\r\ny = 2\r\n"},
    )
    result = run(files, FakeLLM("```python\nx = 1\ny = 3\n```"))
    assert result["changed"] is True
    assert (files.output_dir / "a.py").read_bytes() == b"x = 1\r\ny = 3\r\n"


def test_modify_code_reasks_once_with_the_syntax_error(make_step):
    files = modify_step(make_step)
    bad = "```python\ndef f(:\n    return 10\n```"
    llm = FakeLLM(bad, f"```python\n{NEW}```")
    result = run(files, llm)
    assert result["status"] == "success", result["message"]
    assert len(llm.calls) == 2 and result["llm_calls"] == 2
    assert result["message"].endswith("(after 2 requests)")
    retry = llm.calls[1]["messages"]
    assert [m["role"] for m in retry] == ["system", "user", "assistant", "user"]
    assert retry[2]["content"] == bad
    assert "SyntaxError: " in retry[3]["content"]
    assert "(line 1: def f(:)" in retry[3]["content"]
    assert (files.output_dir / "src/utils.py").read_text() == NEW
    assert result["llm_answers"] == ["llm-answer-1.md", "llm-answer-2.md"]


def test_modify_code_two_bad_answers_fail_and_write_nothing(make_step):
    files = modify_step(make_step)
    llm = FakeLLM("I cannot do that.", "```python\ndef f(:\n```", "```python\nx = 1\n```")
    result = run(files, llm)
    assert result["status"] == "failure"
    assert len(llm.calls) == 2
    assert "no code block found" in llm.last_user_message(1)
    assert "SyntaxError" in result["message"]
    assert "src/utils.py is left unchanged" in result["message"]
    assert "llm-answer-1.md, llm-answer-2.md" in result["message"]
    assert list(files.output_dir.iterdir()) == []
    assert (files.step_dir / "llm-answer-1.md").read_text() == "I cannot do that."
    assert (files.step_dir / "llm-answer-2.md").read_text() == "```python\ndef f(:\n```"
    assert result["llm_calls"] == 2 and "output_files" in result
    assert result["output_files"] == []


def test_modify_code_truncated_answer_is_not_used(make_step):
    files = modify_step(make_step)
    llm = FakeLLM(
        {
            "content": "```python\ndef f():\n    return 10\n",
            "finish_reason": "length",
            "usage": {
                "prompt_tokens": 100,
                "completion_tokens": 50,
                "total_tokens": 150,
            },
        }
    )
    result = run(files, llm)
    assert result["status"] == "failure"
    assert "truncated" in result["message"] and "max_tokens" in result["message"]
    assert "split the file" in result["message"]
    # Asked once more, shorter; the same cut-off answer again ends the asks.
    assert len(llm.calls) == 2
    assert "the model gave the same answer again" in result["message"]
    assert list(files.output_dir.iterdir()) == []
    assert (files.step_dir / "llm-answer-1.md").is_file()
    assert result["llm_usage"]["total_tokens"] == 300


def test_an_answer_cut_off_by_repetition_is_asked_again_shorter_and_warmer(make_step):
    # What a 0.5B model does (Exercism's nth-prime, eval45): the same lines until the limit.
    looping = "```python\ndef f():\n" + "    # keep going\n" * 400
    files = modify_step(make_step)
    llm = FakeLLM(
        {"content": looping, "finish_reason": "length", "usage": {"total_tokens": 2100}},
        f"```python\n{NEW}```",
    )
    result = run(files, llm, temperature=0.2)
    assert result["status"] == "success", result["message"]
    assert (files.output_dir / "src/utils.py").read_text() == NEW
    assert len(llm.calls) == 2
    assert [call["temperature"] for call in llm.calls] == [None, 0.5]
    reask = llm.calls[1]["messages"]
    # The repetition is left out of the second request, which says what went wrong.
    assert "keep going" not in json.dumps(reask)
    assert reask[-2] == {"role": "assistant", "content": reask_module.CUT_OFF_PLACEHOLDER}
    assert "cut off at the token limit" in reask[-1]["content"]
    assert "shorter" in reask[-1]["content"]
    # The first question is sent again as it was.
    assert reask[:-2] == llm.calls[0]["messages"]
    assert (files.step_dir / "llm-answer-1.md").read_text() == looping


def test_modify_code_transient_host_error(make_step):
    files = modify_step(make_step)
    result = run(files, FakeLLM(HostError("server busy", kind="gave_up", transient=True)))
    assert result["status"] == "failure"
    assert result["llm_error"]["transient"] is True
    assert result["llm_error"]["kind"] == "gave_up"
    assert "the LLM request for modify_code failed: HostError: server busy" in result["message"]
    assert result["llm_calls"] == 1
    assert list(files.output_dir.iterdir()) == []


def test_refactor_function_prompt_names_the_function(make_step):
    files = modify_step(make_step, "refactor_function", function_name="f")
    llm = FakeLLM(f"```python\n{NEW}```")
    result = run(files, llm)
    assert result["status"] == "success"
    assert result["operation"] == "refactor_function"
    assert llm.calls[0]["purpose"] == "refactor_function"
    prompt = llm.last_user_message()
    assert "Change only the function `f`. Copy every line outside `f` unchanged." in prompt


def test_refactor_unknown_function_fails_without_calling_llm(make_step):
    files = modify_step(make_step, "refactor_function", function_name="Missing.h")
    llm = FakeLLM(f"```python\n{NEW}```")
    result = run(files, llm)
    assert result["status"] == "failure"
    assert "'Missing.h' is not defined in src/utils.py" in result["message"]
    assert "(functions and classes in it: f, g)" in result["message"]
    assert llm.calls == []


def test_modify_code_refuses_binary_file(make_step):
    files = make_step(
        "modify_code",
        {"file_path": "a.bin", "instructions": "x"},
        inputs={"a.bin": b"\x00\xff"},
    )
    llm = FakeLLM("```\nx\n```")
    result = run(files, llm)
    assert result["status"] == "failure"
    assert "not a UTF-8 text file" in result["message"]
    assert llm.calls == []


def test_write_file_with_instructions_generates_python(make_step):
    files = make_step("write_file", {"file_path": "pkg/hello.py", "instructions": "print hello"})
    llm = FakeLLM("```python\nprint('hello')\n```")
    result = run(files, llm)
    assert result["status"] == "success", result["message"]
    assert (files.output_dir / "pkg/hello.py").read_text() == "print('hello')\n"
    assert result["output_files"] == ["pkg/hello.py"]
    assert result["bytes"] == len("print('hello')\n")
    assert result["llm_calls"] == 1
    assert result["message"] == "wrote 15 bytes to pkg/hello.py from the LLM answer"
    prompt = llm.last_user_message()
    assert "Write the file pkg/hello.py." in prompt and "print hello" in prompt
    assert "exists now" not in prompt
    assert llm.calls[0]["purpose"] == "write_file"


def test_write_file_with_instructions_shows_old_version_and_reasks(make_step):
    files = make_step(
        "write_file",
        {"file_path": "a.py", "instructions": "add g"},
        inputs={"a.py": "def f():\n    pass\n"},
    )
    # The good answer keeps f: one that drops it is refused (issue 24: a whole-file answer
    # may not leave out definitions the instructions do not name).
    good = "def f():\n    pass\n\n\ndef g():\n    pass\n"
    llm = FakeLLM("```python\ndef g(\n```", f"```python\n{good}```")
    result = run(files, llm)
    assert result["status"] == "success"
    assert "The file a.py exists now" in llm.last_user_message(0)
    assert "def f():\n    pass" in llm.last_user_message(0)
    assert "SyntaxError" in llm.last_user_message(1)
    assert (files.output_dir / "a.py").read_text() == good


def test_write_file_with_instructions_txt_needs_no_compile(make_step):
    files = make_step("write_file", {"file_path": "notes.txt", "instructions": "a note"})
    llm = FakeLLM("```text\ndef f(:  not python, and fine\n```")
    result = run(files, llm)
    assert result["status"] == "success"
    assert len(llm.calls) == 1
    assert (files.output_dir / "notes.txt").read_text() == "def f(:  not python, and fine\n"


def test_write_file_with_instructions_two_bad_answers(make_step):
    files = make_step("write_file", {"file_path": "a.py", "instructions": "x"})
    result = run(files, FakeLLM("no code here, sorry"))
    assert result["status"] == "failure"
    assert "no code block found" in result["message"]
    assert list(files.output_dir.iterdir()) == []
    assert result["llm_answers"] == ["llm-answer-1.md", "llm-answer-2.md"]


def test_api_key_never_saved_or_returned(make_step):
    files = modify_step(make_step)
    llm = FakeLLM(
        "key sk-top-secret leaked, no code",
        HostError("bad key sk-top-secret", "unauthorized", False),
    )
    result = run(files, llm, api_key="sk-top-secret")
    assert result["status"] == "failure"
    assert result["llm_error"] == {
        "kind": "unauthorized",
        "transient": False,
        "message": "HostError: bad key [REDACTED]",
    }
    assert "sk-top-secret" not in json.dumps(result)
    assert "sk-top-secret" not in (files.step_dir / "llm-answer-1.md").read_text()


# --- answers that would lose part of the file ----------------------------------

# A 37-line program; its first 9 lines compile on their own, like a half answer does.
PROGRAM = "".join(f"def step_{n}(value):\n    return value + {n}\n\n" for n in range(12)) + (
    "print(step_11(step_0(1)))\n"
)
PROGRAM_NEW = PROGRAM.replace("return value + 0", "return value + 100")
HALF = "".join(PROGRAM.splitlines(keepends=True)[:9])
# A whole-file answer that stopped halfway: not only definitions of the file (a new import
# first), so it is taken as the whole new file, not spliced into the old one.
HALF_FILE = "import sys\n\n" + HALF


def program_step(make_step, instructions="make step_0 add 100", operation="modify_code"):
    params = {"file_path": "app.py", "instructions": instructions}
    return make_step(operation, params, inputs={"app.py": PROGRAM})


def test_program_fixture_is_what_the_issue_describes():
    assert len(PROGRAM.splitlines()) == 37 and len(HALF.splitlines()) == 9
    assert compile(HALF, "half.py", "exec")


def test_modify_code_unclosed_fence_is_asked_again_even_when_the_half_compiles(make_step):
    files = program_step(make_step)
    half = f"```python\n{HALF}"  # no closing fence, finish_reason "stop"
    llm = FakeLLM(half, f"```python\n{PROGRAM_NEW}```")
    result = run(files, llm)
    assert result["status"] == "success", result["message"]
    assert len(llm.calls) == 2
    assert "the code block is not closed" in llm.last_user_message(1)
    assert (files.output_dir / "app.py").read_text() == PROGRAM_NEW


def test_modify_code_unclosed_fence_twice_fails_and_writes_nothing(make_step):
    files = program_step(make_step)
    result = run(files, FakeLLM(f"```python\n{HALF}"))
    assert result["status"] == "failure"
    assert result["llm_calls"] == 2
    assert "the code block is not closed" in result["message"]
    assert "app.py is left unchanged" in result["message"]
    assert list(files.output_dir.iterdir()) == []


def test_modify_code_unclosed_python_block_after_a_closed_shell_block_is_refused(make_step):
    files = program_step(make_step, operation="refactor_function")
    answer = f"Run it with:\n```bash\npython app.py\n```\nThe file:\n```python\n{HALF}"
    result = run(files, FakeLLM(answer))
    assert result["status"] == "failure"
    assert "the code block is not closed" in result["message"]
    assert list(files.output_dir.iterdir()) == []


def test_modify_code_ten_megabyte_answer_without_closing_fence_is_refused(make_step):
    files = modify_step(make_step)
    huge = "```python\n" + "x = 1\n" * (10 * 1024 * 1024 // 6)
    llm = FakeLLM(huge)
    result = run(files, llm)
    assert result["status"] == "failure"
    assert len(llm.calls) == 2
    assert "the answer is 10485766 bytes" in llm.last_user_message(1)
    assert "far more than src/utils.py" in result["message"]
    assert list(files.output_dir.iterdir()) == []


def test_modify_code_oversized_closed_answer_is_asked_again(make_step):
    files = modify_step(make_step)
    oversized = "```python\n" + NEW + "x = 1\n" * 40000 + "```"  # compiles, 240 KB
    llm = FakeLLM(oversized, f"```python\n{NEW}```")
    result = run(files, llm)
    assert result["status"] == "success", result["message"]
    problem = llm.last_user_message(1)
    assert "far more than src/utils.py (46 bytes) and the change could need" in problem
    assert (files.output_dir / "src/utils.py").read_text() == NEW


def test_modify_code_answer_dropping_most_of_the_file_is_asked_again(make_step):
    files = program_step(make_step)
    llm = FakeLLM(f"```python\n{HALF_FILE}```", f"```python\n{PROGRAM_NEW}```")
    result = run(files, llm)
    assert result["status"] == "success", result["message"]
    problem = llm.last_user_message(1)
    assert "app.py has 37 lines, your version has 10 (37 → 10 lines)" in problem
    assert "You must return the WHOLE file" in problem
    assert (files.output_dir / "app.py").read_text() == PROGRAM_NEW


def test_modify_code_answer_dropping_most_of_the_file_twice_fails(make_step):
    files = program_step(make_step)
    result = run(files, FakeLLM(f"```python\n{HALF_FILE}```"))
    assert result["status"] == "failure"
    assert "drops more than half of the file" in result["message"]
    assert (
        "the new app.py has 10 lines where it had 37 (37 → 10 lines; 7 non-blank lines where it "
        "had 25)" in result["message"]
    )
    assert list(files.output_dir.iterdir()) == []


def test_modify_code_may_shrink_the_file_when_asked_to_remove_code(make_step):
    for instructions in (
        "Remove every step except step_0 to step_2",
        "delete the unused functions",
        "Simplify this module",
        "rewrite it from scratch as one function",
        "Replace the whole file with a smaller version",
    ):
        files = program_step(make_step, instructions)
        llm = FakeLLM(f"```python\n{HALF}```")
        result = run(files, llm)
        assert result["status"] == "success", (instructions, result["message"])
        assert len(llm.calls) == 1


def test_everyday_instructions_do_not_excuse_dropping_most_of_the_file(make_step):
    for instructions in ("replace the print with logging", "only change step_0"):
        files = program_step(make_step, instructions)
        llm = FakeLLM(f"```python\n{HALF_FILE}```", f"```python\n{PROGRAM_NEW}```")
        result = run(files, llm)
        assert result["status"] == "success", (instructions, result["message"])
        assert "drops more than half of the file" in llm.last_user_message(1), instructions


def test_write_file_with_instructions_refuses_dropping_most_of_the_old_file(make_step):
    files = make_step(
        "write_file",
        {"file_path": "app.py", "instructions": "add a main guard"},
        inputs={"app.py": PROGRAM},
    )
    result = run(files, FakeLLM(f"```python\n{HALF_FILE}```"))
    assert result["status"] == "failure"
    assert "drops more than half of the file" in result["message"]
    assert list(files.output_dir.iterdir()) == []


# --- re-asks that change something ---------------------------------------------------

SAMPLE_UTILS = (
    "def calculate_metrics(values):\n"
    "    t = 0\n"
    "    for v in values:\n"
    "        t = t + v\n"
    "    m = t / len(values)\n"
    "    s = 0\n"
    "    for v in values:\n"
    "        s = s + (v - m) * (v - m)\n"
    '    return {"total": t, "mean": m, "variance": s / len(values)}\n'
)
# SmolLM2-135M's answers 1 and 2 in run f1-fix-smol, identical (small-models.md 5; the notes
# elide the middle of the function with "...", kept here as it is, a valid Python line).
F1_ANSWER = (
    "```python\n"
    "def calculate_metrics(values):\n"
    "    ...\n"
    '    return {"total": t, "mean": m, "variance": s / len(values}}\n'
    "```"
)


def fix_step(make_step):
    params = {
        "file_path": "utils.py",
        "instructions": "Fix calculate_metrics: it crashes with ZeroDivisionError on an empty list",
    }
    return make_step("modify_code", params, inputs={"utils.py": SAMPLE_UTILS})


def test_modify_code_same_answer_twice_ends_the_reasks(make_step):
    files = fix_step(make_step)
    llm = FakeLLM(F1_ANSWER, F1_ANSWER)
    result = run(files, llm, temperature=0.2)
    assert result["status"] == "failure"
    assert result["llm_calls"] == 2 and len(llm.calls) == 2
    assert result["repeated"] is True
    assert "the model gave the same answer again" in result["message"]
    assert "closing parenthesis '}' does not match opening parenthesis '('" in result["message"]
    assert "utils.py is left unchanged" in result["message"]
    assert list(files.output_dir.iterdir()) == []


def test_two_different_unusable_answers_are_not_a_repetition(make_step):
    files = modify_step(make_step)
    result = run(files, FakeLLM("I cannot do that.", "```python\ndef f(:\n```"))
    assert result["status"] == "failure"
    assert result["repeated"] is False
    assert "same answer" not in result["message"]


def test_the_first_repeated_answer_ends_the_reasks_even_when_more_are_allowed(
    make_step, monkeypatch
):
    from open_codex_lib import reask

    monkeypatch.setattr(reask, "MAX_ASKS", 3)
    files = fix_step(make_step)
    repeating = FakeLLM(F1_ANSWER)
    result = run(files, repeating)
    assert len(repeating.calls) == 2 and result["repeated"] is True
    files = fix_step(make_step)
    varying = FakeLLM("no code", F1_ANSWER, "```python\ndef f(:\n```")
    result = run(files, varying)
    assert len(varying.calls) == 3 and result["repeated"] is False


def test_modify_code_reask_is_sent_a_little_warmer(make_step):
    files = modify_step(make_step)
    llm = FakeLLM("```python\ndef f(:\n```", f"```python\n{NEW}```")
    result = run(files, llm, temperature=0.2)
    assert result["status"] == "success", result["message"]
    assert [call["temperature"] for call in llm.calls] == [None, 0.5]
    assert result["llm_temperatures"] == [None, 0.5]


def test_reask_temperatures_rise_and_stop_at_one(make_step, monkeypatch):
    from open_codex_lib import reask

    monkeypatch.setattr(reask, "MAX_ASKS", 3)
    for base, expected in (
        (0.2, [None, 0.5, 0.8]),
        (0.0, [None, 0.3, 0.6]),
        (0.9, [None, 1.0, 1.0]),
        (1.0, [None, None, None]),  # never sent colder than configured
        (None, [None, None, None]),  # no configured temperature: the host's own stays
    ):
        files = modify_step(make_step)
        llm = FakeLLM("no code 1", "no code 2", "no code 3")
        result = run(files, llm, temperature=base)
        assert [call["temperature"] for call in llm.calls] == expected, base
        assert result["llm_temperatures"] == expected, base


def test_host_complete_without_a_temperature_parameter_is_called_as_before(make_step):
    """ocflow's shim today: ``complete(messages, purpose=None, json=False)``."""
    fake = FakeLLM("```python\ndef f(:\n```", f"```python\n{NEW}```")

    def complete(messages, purpose=None, json=False):
        return fake(messages, purpose=purpose, json=json)

    result = run(modify_step(make_step), complete, temperature=0.2)
    assert result["status"] == "success", result["message"]
    assert result["llm_temperatures"] == [None, None]


def test_modify_code_reask_states_the_problem_in_plain_words(make_step):
    files = fix_step(make_step)
    llm = FakeLLM(F1_ANSWER, f"```python\n{SAMPLE_UTILS}```")
    run(files, llm)
    reask = llm.last_user_message(1)
    assert reask.startswith(
        "Your answer cannot be used. The problem:\nYour code does not compile: SyntaxError:"
    )
    assert "Fix that line, and give the whole file again." in reask


# --- the shrink guard says what changed ------------------------------------------------


def long_module(lines=426):
    """A module of ``lines`` lines: many small functions, ``dasherize`` last (like inflection)."""
    head = '"""Many small string helpers."""\n\nimport re\n\n\n'
    body = "".join(
        f'def helper_{n}(word):\n    """Helper {n}."""\n    return word + "{n}"\n\n\n'
        for n in range(83)
    )
    tail = 'def dasherize(word):\n    """Replace underscores with dashes."""\n'
    tail += '    return word.replace("_", "-")\n\n\nVERSION = "0.5.1"\n'
    module = head + body + tail
    assert len(module.splitlines()) == lines
    return module


# SmolLM2-135M's whole answer in run f4-rename-smol (small-models.md 5): it compiles, and was
# written over the 426 lines of inflection/__init__.py.
F4_ANSWER = '''```python
def kebabize(word: str) -> str:
    """
    Convert a word to camelCase.
    Example::
        >>> kebabize("I am a man")
        'I Am Man'
    """
    return re.sub(r"([A-Z]+)\\1_\\2", r'\\1[a-z][a-z]*', word)
```'''


def rename_step(make_step):
    params = {
        "file_path": "inflection/__init__.py",
        "instructions": "Rename the function dasherize to kebabize",
    }
    return make_step("modify_code", params, inputs={"inflection/__init__.py": long_module()})


def test_modify_code_f4_answer_over_a_426_line_module_is_never_written(make_step):
    files = rename_step(make_step)
    llm = FakeLLM(F4_ANSWER)
    result = run(files, llm)
    assert result["status"] == "failure"
    assert len(llm.calls) == 2
    assert "(426 → 8 lines" in result["message"]
    assert "drops more than half of the file" in result["message"]
    assert "inflection/__init__.py is left unchanged" in result["message"]
    assert list(files.output_dir.iterdir()) == []


def test_the_shrink_reask_gives_the_line_counts_and_asks_for_the_whole_file(make_step):
    files = rename_step(make_step)
    renamed = long_module().replace("def dasherize", "def kebabize")
    llm = FakeLLM(F4_ANSWER, f"```python\n{renamed}```")
    result = run(files, llm)
    assert result["status"] == "success", result["message"]
    reask = llm.last_user_message(1)
    assert "inflection/__init__.py has 426 lines, your version has 8 (426 → 8 lines)" in reask
    assert "You must return the WHOLE file" in reask
    assert (files.output_dir / "inflection/__init__.py").read_text() == renamed


# --- syntax checks of every language ---------------------------------------------------

MATH_JS = (
    "export function add(a, b) {\n  return a + b;\n}\n\n"
    "export function divide(a, b) {\n  return a / b;\n}\n"
)
MATH_JS_FIXED = MATH_JS.replace(
    "  return a / b;",
    '  if (b === 0) {\n    throw new RangeError("division by zero");\n  }\n  return a / b;',
)
CLAMP_TS = (
    "export function clamp<T extends number>(value: T, min: T, max: T): number {\n"
    "  return Math.min(value, max);\n}\n"
)
CLAMP_TS_FIXED = CLAMP_TS.replace(
    "  return Math.min", "  if (value < min) {\n    return min;\n  }\n  return Math.min"
)
DIVIDE_GO = (
    'package math\n\nimport "errors"\n\nvar ErrZero = errors.New("division by zero")\n\n'
    "func Divide(a, b float64) (float64, error) {\n\treturn a / b, nil\n}\n"
)
DIVIDE_GO_FIXED = DIVIDE_GO.replace(
    "\treturn a / b, nil", "\tif b == 0 {\n\t\treturn 0, ErrZero\n\t}\n\treturn a / b, nil"
)
DIVIDE_RS = "pub fn divide(a: f64, b: f64) -> Option<f64> {\n    Some(a / b)\n}\n"
DIVIDE_RS_FIXED = DIVIDE_RS.replace(
    "    Some(a / b)", "    if b == 0.0 {\n        return None;\n    }\n    Some(a / b)"
)

# file, language, its name, the file before, the fixed file, what the parser says of the fixed
# file with the closing brace of its new `if` dropped
REWRITES = [
    (
        "src/math.js",
        "javascript",
        "JavaScript",
        MATH_JS,
        MATH_JS_FIXED,
        "line 9, column 2: missing `}` to close the `{` on line 5 (line 9: `}`)",
    ),
    (
        "src/clamp.ts",
        "typescript",
        "TypeScript",
        CLAMP_TS,
        CLAMP_TS_FIXED,
        "line 5, column 2: missing `}` to close the `{` on line 1 (line 5: `}`)",
    ),
    (
        "math/divide.go",
        "go",
        "Go",
        DIVIDE_GO,
        DIVIDE_GO_FIXED,
        "at the end of the file (after line 11): missing `}` to close the `{` on line 7",
    ),
    (
        "src/lib.rs",
        "rust",
        "Rust",
        DIVIDE_RS,
        DIVIDE_RS_FIXED,
        "at the end of the file (after line 5): the `{` on line 1 is never closed",
    ),
]


def drop_brace_of_the_if(fixed: str) -> str:
    """The fixed file with the closing brace of its new ``if`` left out, as a model does."""
    lines = fixed.splitlines(keepends=True)
    closing = next(i for i, line in enumerate(lines) if line.strip() == "}" and line[0] in " \t")
    return "".join(lines[:closing] + lines[closing + 1 :])


class OutputWatchingLLM(FakeLLM):
    """A FakeLLM that notes, at each call, which files the step has written so far."""

    def __init__(self, output_dir, *answers):
        super().__init__(*answers)
        self.output_dir = output_dir
        self.written_before_call = []

    def __call__(self, messages, purpose=None, json=False, temperature=None):
        written = sorted(str(p.relative_to(self.output_dir)) for p in self.output_dir.rglob("*"))
        self.written_before_call.append([p for p in written if "." in p.rsplit("/", 1)[-1]])
        return super().__call__(messages, purpose=purpose, json=json, temperature=temperature)


@pytest.mark.parametrize(("rel", "language", "name", "before", "fixed", "error"), REWRITES)
def test_a_rewrite_that_drops_a_brace_is_reasked_and_never_written(
    make_step, rel, language, name, before, fixed, error
):
    files = make_step(
        "modify_code",
        {"file_path": rel, "instructions": "Guard against a zero divisor"},
        inputs={rel: before},
    )
    broken = drop_brace_of_the_if(fixed)
    fence = "```" + {"javascript": "js", "typescript": "ts"}.get(language, language)
    llm = OutputWatchingLLM(files.output_dir, f"{fence}\n{broken}```", f"{fence}\n{fixed}```")
    result = run(files, llm)
    assert result["status"] == "success", result["message"]
    assert llm.written_before_call == [[], []]  # the broken answer was never written
    assert llm.last_user_message(1) == (
        "Your answer cannot be used. The problem:\n"
        f"Your code does not parse as {name}: {error}. Fix that, and give the whole file again."
        f"\n\nAnswer again.\n\nAnswer format: the complete content of {rel} in ONE fenced code "
        f"block, exactly like this:\n\n```{language_tag(rel)}\n(the whole file)\n```\n\n"
        "Write nothing after the code block."
    )
    assert (files.output_dir / rel).read_text() == fixed
    assert result["output_files"] == [rel]
    assert result["syntax_check"] == {"language": language, "checked": True}
    assert result["message"] == (
        f"rewrote {rel} from the LLM answer ({len(before.splitlines())} -> "
        f"{len(fixed.splitlines())} lines) (after 2 requests)"
    )


@pytest.mark.parametrize(("rel", "language", "name", "before", "fixed", "error"), REWRITES)
def test_two_rewrites_that_do_not_parse_fail_the_step(
    make_step, rel, language, name, before, fixed, error
):
    files = make_step(
        "modify_code",
        {"file_path": rel, "instructions": "Guard against a zero divisor"},
        inputs={rel: before},
    )
    broken = drop_brace_of_the_if(fixed)
    result = run(files, FakeLLM(f"```\n{broken}```", f"```\n{broken}\n```\n"))
    assert result["status"] == "failure"
    assert result["llm_calls"] == 2 and result["repeated"] is False
    assert f"the code does not parse as {name}: {error}" in result["message"]
    assert f"{rel} is left unchanged" in result["message"]
    assert list(files.output_dir.iterdir()) == []


def test_the_issue_case_math_js_is_written_once_and_valid(make_step):
    files = make_step(
        "write_file",
        {"file_path": "math.js", "instructions": "make divide throw on division by zero"},
        inputs={"math.js": MATH_JS},
    )
    broken = drop_brace_of_the_if(MATH_JS_FIXED)
    llm = OutputWatchingLLM(
        files.output_dir,
        f"Here is the file:\n```javascript\n{broken}```",
        f"```javascript\n{MATH_JS_FIXED}```",
    )
    result = run(files, llm)
    assert result["status"] == "success", result["message"]
    assert llm.written_before_call == [[], []]
    assert "Your code does not parse as JavaScript: line 9, column 2" in llm.last_user_message(1)
    assert (files.output_dir / "math.js").read_text() == MATH_JS_FIXED
    assert result["syntax_check"] == {"language": "javascript", "checked": True}
    assert result["message"] == (
        f"wrote {len(MATH_JS_FIXED)} bytes to math.js from the LLM answer (after 2 requests)"
    )


def test_python_results_say_they_were_compiled(make_step):
    files = modify_step(make_step)
    result = run(files, FakeLLM(f"```python\n{NEW}```"))
    assert result["syntax_check"] == {"language": "python", "checked": True}


def test_an_unknown_extension_is_written_and_reported_not_checked(make_step):
    files = make_step("write_file", {"file_path": "lib/app.ex", "instructions": "a module"})
    content = "defmodule App do\n  def hello, do: :world\nend\n"
    result = run(files, FakeLLM(f"```elixir\n{content}```"))
    assert result["status"] == "success", result["message"]
    assert (files.output_dir / "lib/app.ex").read_text() == content
    assert result["syntax_check"] == {
        "language": None,
        "checked": False,
        "reason": "no grammar for .ex files",
    }
    assert result["message"] == (
        f"wrote {len(content)} bytes to lib/app.ex from the LLM answer "
        "(syntax not checked: no grammar for .ex files)"
    )


def test_prose_files_are_not_checked_and_say_nothing_of_it(make_step):
    files = make_step("write_file", {"file_path": "NOTES.md", "instructions": "notes"})
    result = run(files, FakeLLM("```markdown\n# Notes\n```"))
    assert result["syntax_check"]["checked"] is False
    assert result["message"] == "wrote 8 bytes to NOTES.md from the LLM answer"


def test_a_missing_grammar_writes_the_file_and_names_the_pip_command(make_step, monkeypatch):
    from open_codex_lib import syntax

    monkeypatch.setattr(syntax, "_LANGUAGES", {})
    monkeypatch.setattr(syntax, "_THREAD", threading.local())
    monkeypatch.setitem(sys.modules, "tree_sitter_go", None)
    files = make_step("write_file", {"file_path": "main.go", "instructions": "hello"})
    content = "package main\n\nfunc main() {\n"  # broken, but nothing can tell
    result = run(files, FakeLLM(f"```go\n{content}```"))
    assert result["status"] == "success", result["message"]
    assert (files.output_dir / "main.go").read_text() == content
    reason = "the tree-sitter grammar for Go is not installed (pip install tree-sitter-go)"
    assert result["syntax_check"] == {"language": "go", "checked": False, "reason": reason}
    assert result["message"].endswith(f"(syntax not checked: {reason})")


def test_a_file_the_grammar_could_not_read_before_is_not_refused_for_it(make_step):
    # TypeScript 4.7's variance annotations are newer than the grammar: the file never parsed.
    before = "export interface Box<in out T> {\n  value: T;\n}\n"
    after = before.replace("  value: T;", "  value: T;\n  label: string;")
    files = make_step(
        "modify_code",
        {"file_path": "box.ts", "instructions": "add a label"},
        inputs={"box.ts": before},
    )
    result = run(files, FakeLLM(f"```ts\n{after}```"))
    assert result["status"] == "success", result["message"]
    assert (files.output_dir / "box.ts").read_text() == after
    check = result["syntax_check"]
    assert check["language"] == "typescript" and check["checked"] is False
    assert check["reason"] == (
        "box.ts did not parse as TypeScript before the change either (line 1, column 25: "
        "unexpected `out` (line 1: `export interface Box<in out T> {`)), so its new version was "
        "not held to the TypeScript grammar"
    )
    assert "(syntax not checked: box.ts did not parse" in result["message"]


def test_a_broken_file_must_parse_once_rewritten_when_it_parsed_before(make_step):
    files = make_step(
        "modify_code",
        {"file_path": "src/math.js", "instructions": "add a multiply function"},
        inputs={"src/math.js": MATH_JS},
    )
    llm = FakeLLM("```js\nexport function multiply(a, b) {\n  return a * b;\n```", "no code")
    result = run(files, llm)
    assert result["status"] == "failure"
    assert "Your code does not parse as JavaScript: " in llm.last_user_message(1)
    assert list(files.output_dir.iterdir()) == []


def test_an_answer_that_changes_only_docstrings_and_comments_is_no_change(make_step):
    # Issue 37: a real Qwen2.5-Coder-0.5B "fixed" a bug by editing a docstring and adding
    # `# Change this line`, and the rewrite was accepted ("20 -> 18 lines").
    original = 'def gcd(a, b):\n    """Greatest common divisor."""\n    return gcd(a % b, b)\n'
    answer = (
        'def gcd(a, b):\n    """Return the greatest common divisor of a and b."""\n'
        "    return gcd(a % b, b)  # Change this line\n"
    )
    files = make_step(
        "modify_code",
        {"file_path": "gcd.py", "instructions": "fix the infinite recursion"},
        inputs={"gcd.py": original},
    )
    llm = FakeLLM(f"```python\n{answer}```", f"```python\n{answer}```")
    result = run(files, llm)
    assert result["status"] == "failure"
    assert "layout, comments and docstrings aside" in result["message"]
    assert "apart from comments and docstrings" in llm.last_user_message(1)
    assert list(files.output_dir.iterdir()) == []
    # Asked for documentation, a docstring is the change.
    files = make_step(
        "modify_code",
        {"file_path": "gcd.py", "instructions": "improve the docstring of gcd"},
        inputs={"gcd.py": original},
    )
    result = run(files, FakeLLM(f"```python\n{answer}```"))
    assert result["status"] == "success", result["message"]
