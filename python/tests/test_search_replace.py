"""Search/replace blocks (issue 40 §7): parsing them, applying each where it matches exactly once,
and `edit_code` (and `modify_code` on a big file) editing with them through a fake LLM."""

import json

import pytest
from conftest import FakeLLM
from open_codex_lib import execute_operation
from open_codex_lib.code_edit import EDIT_FROM_LINES, too_big_to_rewrite
from open_codex_lib.search_replace import Block, BlockError, apply, parse

SOURCE = "def f():\n    return 1\n\n\ndef g():\n    return 1\n"


def block(search, replace):
    return f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def test_blocks_are_read_in_order_and_prose_around_them_is_ignored():
    answer = (
        "Here are the changes:\n```python\n"
        + block("def f():\n    return 1\n", "def f():\n    return 10\n")
        + "```\nand\n"
        + block("def g():\n", "def g():  # second\n")
    )
    assert parse(answer) == [
        Block("def f():\n    return 1\n", "def f():\n    return 10\n"),
        Block("def g():\n", "def g():  # second\n"),
    ]


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("def f():\n    return 10\n", "no `<<<<<<< SEARCH`"),
        ("<<<<<<< SEARCH\ndef f():\n", "block 1 has no `=======`"),
        ("<<<<<<< SEARCH\ndef f():\n=======\nx\n", "block 1 is not closed"),
        (block("", "x\n"), "block 1 has an empty SEARCH text"),
    ],
)
def test_an_answer_without_whole_blocks_says_what_is_missing(answer, says):
    with pytest.raises(BlockError, match=says):
        parse(answer)


def test_each_block_applies_where_it_matches_once_after_the_blocks_before_it():
    blocks = parse(
        block("def f():\n    return 1\n", "def f():\n    return 10\n")
        # Now `return 1` is in the file once: the first block changed the other.
        + block("    return 1\n", "    return 20\n")
    )
    assert apply(SOURCE, blocks) == "def f():\n    return 10\n\n\ndef g():\n    return 20\n"


def test_a_search_found_nowhere_or_twice_is_refused_with_what_to_do():
    with pytest.raises(BlockError, match=r"block 1's SEARCH text is in the file 2 times"):
        apply(SOURCE, parse(block("    return 1\n", "    return 2\n")))
    with pytest.raises(BlockError, match=r"block 2's SEARCH text is not in the file"):
        apply(
            SOURCE,
            parse(block("def f():\n", "def f(x):\n") + block("def h():\n", "def h(x):\n")),
        )


def test_trailing_white_space_the_model_dropped_still_matches_once():
    source = "a = 1   \nb = 2\n"
    assert apply(source, parse(block("a = 1\nb = 2\n", "a = 3\nb = 4\n"))) == "a = 3\nb = 4\n"


def test_a_replace_without_its_last_newline_keeps_the_next_line_apart():
    blocks = [Block("def f():\n    return 1\n", "def f():\n    return 10")]
    assert apply(SOURCE, blocks).startswith("def f():\n    return 10\n\n\ndef g():")


def big_file(lines):
    body = "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(lines // 4))
    return body


def run(files, llm, **config):
    result = execute_operation(files.path, {"complete": llm, **config})
    json.dumps(result)
    return result


def test_edit_code_changes_one_place_of_a_big_file_from_a_short_answer(make_step):
    original = big_file(2000)
    files = make_step(
        "edit_code",
        {"file_path": "big.py", "instructions": "make f7 return 70"},
        inputs={"big.py": original},
    )
    answer = block("def f7():\n    return 7\n", "def f7():\n    return 70\n")
    llm = FakeLLM(answer)
    result = run(files, llm)
    assert result["status"] == "success", result["message"]
    assert (files.output_dir / "big.py").read_text() == original.replace(
        "return 7\n", "return 70\n", 1
    )
    assert result["blocks"] == 1 and result["changed"] is True
    assert result["message"].startswith("edited big.py with 1 search/replace block(s)")
    # The whole file is shown; the answer asked for is blocks, a few lines.
    user = llm.calls[0]["messages"][1]["content"]
    assert "def f499():" in user and "search/replace blocks only" in user
    assert len(answer) < len(original) / 100


def test_edit_code_asks_again_with_the_blocks_problem_then_fails_writing_nothing(make_step):
    files = make_step(
        "edit_code",
        {"file_path": "src/a.py", "instructions": "make g return 2"},
        inputs={"src/a.py": SOURCE},
    )
    twice = block("    return 1\n", "    return 2\n")
    llm = FakeLLM(twice, block("def h():\n", "def h(): pass\n"))
    result = run(files, llm)
    assert result["status"] == "failure"
    assert "no usable search/replace blocks for src/a.py" in result["message"]
    assert "is in the file 2 times" in llm.last_user_message()
    assert not (files.output_dir / "src/a.py").exists()


def test_edit_code_blocks_that_break_the_syntax_are_asked_again(make_step):
    files = make_step(
        "edit_code",
        {"file_path": "src/a.py", "instructions": "make f return 10"},
        inputs={"src/a.py": SOURCE},
    )
    broken = block("    return 1\n\n\ndef g():\n", "    return (10\n\n\ndef g():\n")
    fixed = block("def f():\n    return 1\n", "def f():\n    return 10\n")
    llm = FakeLLM(broken, fixed)
    result = run(files, llm)
    assert result["status"] == "success", result["message"]
    assert "With your blocks, the code does not compile" in llm.last_user_message()
    assert (files.output_dir / "src/a.py").read_text().startswith("def f():\n    return 10\n")


def test_a_file_too_big_for_the_answer_budget_is_edited_with_blocks():
    # 3,500 characters are about 1,000 tokens: whole in a budget of 2,000, not of 1,000.
    text = "x = 1\n" * 583
    assert not too_big_to_rewrite(text, 2000)
    assert too_big_to_rewrite(text, 1000)
    # Without a budget, by its lines.
    assert not too_big_to_rewrite(text, None)
    assert too_big_to_rewrite("x = 1\n" * EDIT_FROM_LINES, None)


def test_modify_code_edits_a_file_its_answer_budget_cannot_hold_with_blocks(make_step):
    original = big_file(400)
    files = make_step(
        "modify_code",
        {"file_path": "big.py", "instructions": "make f3 return 30"},
        inputs={"big.py": original},
    )
    llm = FakeLLM(block("def f3():\n    return 3\n", "def f3():\n    return 30\n"))
    result = run(files, llm, max_tokens=1000)
    assert result["status"] == "success", result["message"]
    assert result["blocks"] == 1
    assert "search/replace blocks only" in llm.calls[0]["messages"][1]["content"]
    # A small file is still rewritten whole.
    small = make_step(
        "modify_code",
        {"file_path": "s.py", "instructions": "make f return 10"},
        inputs={"s.py": SOURCE},
    )
    llm = FakeLLM("```python\n" + SOURCE.replace("return 1\n", "return 10\n", 1) + "```\n")
    result = run(small, llm, max_tokens=1000)
    assert result["status"] == "success" and "blocks" not in result
