"""Answers small models really give to a code edit (issue 24, Qwen2.5-Coder-0.5B and SmolLM2
served by llama.cpp), replayed word for word where the issue quotes them: a function-only
answer is spliced into the file, a placeholder never stands for code, the guard against lost
code holds at every size and is not switched off by a function's name, an edit that changes
nothing is no edit, and an answer that drops only a docstring is written."""

import json

from conftest import FakeLLM
from open_codex_lib import execute_operation
from open_codex_lib.code_edit import asks_removal, placeholder_line

MATHX = '''"""Small numeric helpers."""


def clamp(value, low, high):
    """Clamp value between low and high."""
    if value < low:
        return low
    if value > high:
        return high
    return value


def moving_average(values, window):
    """Return the list of averages of each run of `window` consecutive values."""
    if window <= 0:
        raise ValueError("window must be positive")
    result = []
    for i in range(len(values) - window):
        result.append(sum(values[i:i + window]) / window)
    return result
'''

# Qwen2.5-Coder-0.5B's whole answer to modify_code with function_name moving_average.
QWEN_MOVING_AVERAGE = '''```python
def moving_average(values, window):
    """Return the list of averages of each run of `window` consecutive values.

    moving_average([1, 2, 3, 4], 2) == [1.5, 2.5, 3.5]
     """
    if window <= 0:
        raise ValueError("window must be positive")
    result = []
    for i in range(len(values) - window + 1):
        chunk = values[i:i + window]
        result.append(sum(chunk) / window)
    return result
```'''

FIX = (
    "Fix moving_average in mathx.py: it drops the last window, e.g. moving_average([1, 2, 3, 4], "
    "2) must be [1.5, 2.5, 3.5]."
)


def run(files, llm):
    result = execute_operation(files.path, {"complete": llm})
    json.dumps(result)
    return result


def namespace(text):
    scope = {}
    exec(compile(text, "mathx.py", "exec"), scope)  # noqa: S102 - the test's own code
    return scope


def test_a_function_only_answer_is_spliced_into_the_file(make_step):
    files = make_step(
        "modify_code",
        {"file_path": "mathx.py", "instructions": FIX, "function_name": "moving_average"},
        inputs={"mathx.py": MATHX},
    )
    llm = FakeLLM(QWEN_MOVING_AVERAGE)
    result = run(files, llm)
    assert result["status"] == "success", result["message"]
    assert len(llm.calls) == 1
    assert "replaced function moving_average" in result["message"]
    written = (files.output_dir / "mathx.py").read_text()
    assert written.startswith('"""Small numeric helpers."""\n')
    assert "def clamp(value, low, high):" in written
    scope = namespace(written)
    assert scope["moving_average"]([1, 2, 3, 4], 2) == [1.5, 2.5, 3.5]
    assert scope["clamp"](5, 0, 3) == 3


def test_a_placeholder_answer_is_spliced_where_its_definitions_fit(make_step):
    geometry = (
        "import math\n\n\ndef area(r):\n    return math.pi * r * r\n\n\n"
        "def perimeter(r):\n    return 2 * math.pi * r\n\n\n"
        "def diameter(r):\n    return r\n"
    )
    # Qwen's answer: the fixed function, then a placeholder where perimeter() was.
    answer = (
        "```python\nimport math\n\n\ndef diameter(r):\n    return 2 * r\n\n"
        "# rest of the file unchanged\n```"
    )
    files = make_step(
        "modify_code",
        {"file_path": "geometry.py", "instructions": "diameter must return twice the radius"},
        inputs={"geometry.py": geometry},
    )
    result = run(files, FakeLLM(answer))
    assert result["status"] == "success", result["message"]
    written = (files.output_dir / "geometry.py").read_text()
    assert "rest of the file" not in written
    scope = namespace(written)
    assert scope["diameter"](3) == 6
    assert round(scope["perimeter"](1), 3) == 6.283
    assert "replaced function diameter" in result["message"]


def test_a_placeholder_that_cannot_be_spliced_is_asked_again_never_written(make_step):
    geometry = "def area(r):\n    return 3 * r * r\n\n\ndef perimeter(r):\n    return 6 * r\n"
    answer = "```python\nPI = 3.14159\n\n\ndef area(r):\n    return PI * r * r\n\n# ...\n```"
    files = make_step(
        "modify_code",
        {"file_path": "geometry.py", "instructions": "use a PI constant"},
        inputs={"geometry.py": geometry},
    )
    llm = FakeLLM(answer)
    result = run(files, llm)
    assert result["status"] == "failure"
    assert len(llm.calls) == 2
    assert "instead of the code it stands for" in llm.last_user_message(1)
    assert "placeholder" in result["message"]
    assert list(files.output_dir.iterdir()) == []


def test_placeholder_lines_are_known_and_real_comments_are_not():
    for line in (
        "# rest of the file unchanged",
        "    // ... existing code ...",
        "# (unchanged)",
        "# ...",
        "/* other functions */",
        "# Rest of the code remains the same",
    ):
        assert placeholder_line(f"x = 1\n{line}\n") == line.strip(), line
    for line in (
        "# returns the value unchanged when it is in range",
        "# the rest of this loop handles negatives",
        "print('rest of the file unchanged')",
    ):
        assert placeholder_line(f"x = 1\n{line}\n") is None, line


def test_function_names_and_bug_reports_do_not_switch_the_guard_off():
    for instructions in (
        FIX,
        "moving_average crashes on an empty list",
        "split_words must keep apostrophes",
        "make remove_user log the id",
        "make the error message clearer",
    ):
        assert not asks_removal(instructions), instructions
    for instructions in (
        "Remove the debug prints",
        "Fix the parser, then delete the unused helper",
        "Please simplify this module",
    ):
        assert asks_removal(instructions), instructions


def test_a_small_file_losing_a_function_is_refused(make_step):
    # SmolLM2 turned the 16-line file into 4 lines of wrong code, clamp gone.
    small = (
        "def clamp(value, low, high):\n    return max(low, min(value, high))\n\n\n"
        "def mean(values):\n    return sum(values) / len(values) - 1\n"
    )
    smol = (
        "```python\ndef mean(values):\n    total = sum(value)\n    return total / len(values)\n```"
    )
    fixed = small.replace(" - 1", "")
    files = make_step(
        "modify_code",
        {"file_path": "mathx.py", "instructions": "mean is off by one: fix it"},
        inputs={"mathx.py": small},
    )
    # A function-only answer is spliced (clamp stays); the same answer as a whole file with an
    # import is not only definitions, so it would drop clamp: refused.
    whole = (
        "```python\nimport math\n\n\ndef mean(values):\n    return sum(values) / len(values)\n```"
    )
    llm = FakeLLM(whole, f"```python\n{fixed}```")
    result = run(files, llm)
    assert result["status"] == "success", result["message"]
    assert "leaves out function clamp" in llm.last_user_message(1)
    assert (files.output_dir / "mathx.py").read_text() == fixed
    files = make_step(
        "modify_code",
        {"file_path": "mathx.py", "instructions": "mean is off by one: fix it"},
        inputs={"mathx.py": small},
    )
    result = run(files, FakeLLM(smol))
    assert result["status"] == "success", result["message"]
    assert "def clamp" in (files.output_dir / "mathx.py").read_text()


def test_a_bare_ok_never_replaces_a_small_file(make_step):
    files = make_step(
        "modify_code",
        {"file_path": "run.py", "instructions": "print the total"},
        inputs={"run.py": "values = [1, 2]\ntotal = sum(values)\nprint(values)\n"},
    )
    result = run(files, FakeLLM("OK"))
    assert result["status"] == "failure"
    assert "keeps 0 of the 3 top-level statements" in result["message"]
    assert list(files.output_dir.iterdir()) == []


PRICE_JS = """function applyDiscount(price, percent) {
  if (percent < 0 || percent > 100) {
    throw new Error("percent must be between 0 and 100");
  }
  return price - price * percent;
}

function total(items) {
  let sum = 0;
  for (const item of items) {
    sum += item.price * item.quantity;
  }
  return sum;
}

module.exports = { applyDiscount, total };
"""


def test_an_answer_that_changes_nothing_is_asked_again_then_fails(make_step):
    # Qwen gave back src/price.js with one line re-indented, the bug untouched.
    answer = "```javascript\n" + PRICE_JS.replace("  let sum = 0;", "    let sum = 0;") + "```"
    files = make_step(
        "modify_code",
        {"file_path": "src/price.js", "instructions": "applyDiscount must divide percent by 100"},
        inputs={"src/price.js": PRICE_JS},
    )
    llm = FakeLLM(answer)
    result = run(files, llm)
    assert result["status"] == "failure"
    assert len(llm.calls) == 2
    assert "Your answer makes no change to src/price.js" in llm.last_user_message(1)
    assert "the model made no change" in result["message"]
    assert list(files.output_dir.iterdir()) == []


def test_a_javascript_function_only_answer_is_spliced(make_step):
    answer = (
        "```javascript\nfunction applyDiscount(price, percent) {\n"
        "  if (percent < 0 || percent > 100) {\n"
        '    throw new Error("percent must be between 0 and 100");\n  }\n'
        "  return price - (price * percent) / 100;\n}\n```"
    )
    files = make_step(
        "modify_code",
        {"file_path": "src/price.js", "instructions": "applyDiscount must divide percent by 100"},
        inputs={"src/price.js": PRICE_JS},
    )
    result = run(files, FakeLLM(answer))
    assert result["status"] == "success", result["message"]
    written = (files.output_dir / "src/price.js").read_text()
    assert "(price * percent) / 100" in written
    assert "function total(items)" in written
    assert written.endswith("module.exports = { applyDiscount, total };\n")
    assert "replaced function applyDiscount" in result["message"]


def test_a_fix_that_drops_only_the_trailing_docstring_is_written(make_step):
    # The 40-program set: each file ends with a long docstring stating the problem; a right
    # fix without it was refused as "drops more than half of the file".
    problem = '"""\n' + "".join(f"Problem statement line {n}.\n" for n in range(18)) + '"""\n'
    program = (
        "def solve(values):\n    best = 0\n    for value in values:\n"
        "        best = max(best, value)\n    return best - 1\n\n\n"
        "if __name__ == '__main__':\n    print(solve([3, 1, 2]))\n\n\n" + problem
    )
    fixed = program.split('"""')[0].replace("best - 1", "best").rstrip("\n") + "\n"
    files = make_step(
        "modify_code",
        {"file_path": "solve.py", "instructions": "solve returns one less than the maximum"},
        inputs={"solve.py": program},
    )
    llm = FakeLLM(f"```python\n{fixed}```")
    result = run(files, llm)
    assert result["status"] == "success", result["message"]
    assert len(llm.calls) == 1
    assert (files.output_dir / "solve.py").read_text() == fixed
