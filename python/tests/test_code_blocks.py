"""extract_code_block, find_blocks and check_python on answers small models really give."""

import pytest
from open_codex_lib.code_blocks import (
    CodeBlockError,
    check_python,
    extract_code_block,
    fence_for,
    find_blocks,
    language_tag,
)


def test_fenced_block_with_prose_around():
    answer = "Here is the updated file:\n\n```python\nx = 1\n```\n\nI renamed nothing.\n"
    assert extract_code_block(answer, "a.py") == "x = 1\n"


def test_matching_language_beats_longer_block():
    answer = (
        "Run it with:\n```bash\npip install something-long && python -m tool --verbose\n```\n"
        "The file:\n```py\nx = 1\n```\n"
    )
    assert extract_code_block(answer, "src/a.py") == "x = 1\n"


def test_longest_block_when_no_language_matches():
    answer = "```\nshort\n```\ntext\n```text\nthe longer block\nof two lines\n```\n"
    assert extract_code_block(answer, "src/a.rs") == "the longer block\nof two lines\n"


def test_longest_of_several_matching_blocks():
    answer = "```python\nf()\n```\n```python\ndef f():\n    return 1\n```\n"
    assert extract_code_block(answer, "a.py") == "def f():\n    return 1\n"


def test_file_name_as_fence_info_matches():
    answer = "```sh\necho hi\n```\n```utils.py\nimport os\n```\n"
    assert extract_code_block(answer, "pkg/utils.py") == "import os\n"


def test_tilde_fence_and_trailing_blank_lines():
    answer = "~~~python\n\ndef f():\n    pass\n\n\n~~~\n"
    assert extract_code_block(answer, "a.py") == "def f():\n    pass\n"


def test_longer_fence_keeps_inner_backticks():
    inner = "# Title\n\n```sh\nmake\n```\n"
    answer = f"````markdown\n{inner}````\n"
    assert extract_code_block(answer, "README.md") == inner


def test_indented_fence_in_a_list_is_dedented():
    answer = "1. Replace the file:\n   ```python\n   def f():\n       return 2\n   ```\n"
    assert extract_code_block(answer, "a.py") == "def f():\n    return 2\n"


def test_unclosed_fence_runs_to_the_end_and_is_refused():
    [block] = find_blocks("```python\nx = 1\ny = 2")
    assert (block.content, block.closed) == ("x = 1\ny = 2", False)
    with pytest.raises(CodeBlockError, match="the code block is not closed"):
        extract_code_block("```python\nx = 1\ny = 2", "a.py")


def test_unclosed_block_after_a_closed_one_is_taken_only_if_it_is_not_chosen():
    complete = "```python\nx = 1\n```\nRun it:\n```bash\npython a.py"
    assert extract_code_block(complete, "a.py") == "x = 1\n"
    cut = "Run it:\n```bash\npython a.py\n```\nThe file:\n```python\nx = 1"
    with pytest.raises(CodeBlockError, match="the code block is not closed"):
        extract_code_block(cut, "a.py")


def test_crlf_answer_is_normalised():
    assert extract_code_block("```js\r\nlet a = 1;\r\n```\r\n", "a.js") == "let a = 1;\n"


def test_no_fence_python_that_compiles_is_accepted():
    assert extract_code_block("import os\n\nprint(os.sep)\n\n\n", "a.py") == (
        "import os\n\nprint(os.sep)\n"
    )


def test_no_fence_prose_is_refused():
    with pytest.raises(CodeBlockError, match="no code block found"):
        extract_code_block("Sure! I changed the function to return 2.", "a.py")
    with pytest.raises(CodeBlockError, match="no code block found"):
        extract_code_block("Here is the new version of the file:\nfn main() {}", "a.rs")
    with pytest.raises(CodeBlockError, match="no code block found"):
        extract_code_block("The new version of the config is below:\nkey = 1", "a.toml")
    with pytest.raises(CodeBlockError, match="no code block found"):
        extract_code_block("   \n", "a.txt")


def test_no_fence_other_files():
    assert extract_code_block('{"a": 1}', "x.json") == '{"a": 1}\n'
    with pytest.raises(CodeBlockError):
        extract_code_block("The answer is {a: 1}", "x.json")
    assert extract_code_block("fn main() {}\n", "main.rs") == "fn main() {}\n"
    assert extract_code_block("This project does X.", "README.md") == "This project does X.\n"


def test_empty_block_is_refused():
    with pytest.raises(CodeBlockError, match="the code block is empty"):
        extract_code_block("```python\n\n```", "a.py")


def test_inline_triple_backticks_are_not_a_fence():
    assert find_blocks("use ```x``` here\n```\ny\n```") == find_blocks("```\ny\n```")
    [block] = find_blocks("use ```x``` here\n```\ny\n```")
    assert (block.language, block.content, block.closed) == ("", "y", True)


def test_check_python_names_the_line():
    problem = check_python("x = 1\ndef f(:\n    pass\n", "a.py")
    assert problem.startswith("SyntaxError: ")
    assert "(line 2: def f(:)" in problem
    assert check_python("def f():\nreturn 1\n", "a.py").startswith("IndentationError: ")
    assert check_python("x = 1\n", "a.py") is None


def test_language_tag_and_fence_for():
    assert language_tag("a/b.py") == "python"
    assert language_tag("x.weird") == "weird"
    assert language_tag("Makefile") == ""
    assert fence_for("no backticks") == "```"
    assert fence_for("has ```` four") == "`````"


@pytest.mark.parametrize(
    ("answer", "path", "expected"),
    [
        # A real Qwen2.5-Coder-0.5B's answer: the language on the line after a bare fence.
        ("```\npython\ndef f():\n    return 1\n```\n", "m.py", "def f():\n    return 1\n"),
        ("```\njs\nexport const a = 1;\n```\n", "a.js", "export const a = 1;\n"),
        # A first line that is code, or another language's name, stays.
        ("```\nprint(1)\n```\n", "m.py", "print(1)\n"),
        ("```\nrust\n```\n", "notes.txt", "rust\n"),
        ("```\na.txt\nb.txt\n```\n", "files.txt", "a.txt\nb.txt\n"),
    ],
)
def test_a_language_name_on_the_line_after_a_bare_fence_is_the_fences(answer, path, expected):
    assert extract_code_block(answer, path) == expected
