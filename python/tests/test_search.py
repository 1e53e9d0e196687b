"""search_code: the repository's text searched as git sees it, bounded, as file:line: text."""

import json

from open_codex_lib import execute_operation
from open_codex_lib.search import MAX_MATCHES


def run(files):
    result = execute_operation(files.path, {})
    json.dumps(result)
    return result


WORK = {
    ".gitignore": "dist/\n*.log\n",
    "billing/tax.py": "def with_tax(amount, rate):\n    return amount * rate\n",
    "billing/cart.py": "from billing.tax import with_tax\n\n\ndef total(items, rate):\n"
    "    return with_tax(sum(items), rate)\n",
    "billing/.gitignore": "generated_*.py\n",
    "billing/generated_tax.py": "with_tax = None\n",
    "dist/bundle.js": "function with_tax() {}\n",
    "debug.log": "with_tax called\n",
    "node_modules/x/index.js": "with_tax\n",
    ".git/COMMIT_EDITMSG": "with_tax\n",
    "image.png": "\0with_tax",
}


def test_matches_come_as_file_line_text_skipping_what_git_ignores(make_step):
    result = run(make_step("search_code", {"pattern": "with_tax("}, work=WORK))
    assert result["status"] == "success", result
    assert result["content"].splitlines() == [
        "billing/cart.py:5: return with_tax(sum(items), rate)",
        "billing/tax.py:1: def with_tax(amount, rate):",
    ]
    assert result["files"] == ["billing/cart.py", "billing/tax.py"]
    assert result["matches"][1] == {
        "file": "billing/tax.py",
        "line": 1,
        "text": "def with_tax(amount, rate):",
    }
    assert result["truncated"] is False
    assert "2 match(es)" in result["message"]


def test_a_regular_expression_and_a_directory_narrow_the_search(make_step):
    params = {"pattern": r"^def \w+", "regex": True, "path": "billing"}
    result = run(make_step("search_code", params, work=WORK))
    assert [m["file"] for m in result["matches"]] == ["billing/cart.py", "billing/tax.py"]
    # The root's .gitignore applies under billing/ too.
    logged = {**WORK, "billing/calls.log": "def with_tax\n"}
    result = run(make_step("search_code", {"pattern": "def", "path": "billing"}, work=logged))
    assert "billing/calls.log" not in result["files"]
    bad = run(make_step("search_code", {"pattern": "(", "regex": True}, work=WORK))
    assert bad["status"] == "failure"
    assert "not a valid regular expression" in bad["message"]
    assert "leave out params.regex" in bad["message"]


def test_the_result_stops_at_its_bound_and_says_so(make_step):
    many = {"big.py": "".join(f"x_{n} = {n}\n" for n in range(MAX_MATCHES + 50))}
    result = run(make_step("search_code", {"pattern": "x_"}, work=many))
    assert len(result["matches"]) == MAX_MATCHES
    assert result["truncated"] is True
    assert "narrow params.path or the pattern" in result["message"]
