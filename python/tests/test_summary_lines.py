"""Every supported runner's summary, as its recent versions print it, read into the right counts.

The cases live in ``fixtures/summary_lines.json``: one per runner version and shape of output
(pytest 7/8/9 with and without subtests, unittest, cargo, go, Jest, Vitest, Mocha, node
``--test``, tape).  A new runner version with a new summary gets a case there, not a test here.
"""

import json
from pathlib import Path

import pytest
from open_codex_lib.tests_report import parse_test_output

FIXTURES = Path(__file__).parent / "fixtures"
CASES = json.loads((FIXTURES / "summary_lines.json").read_text(encoding="utf-8"))["cases"]


def output_of(case: dict) -> str:
    if "file" in case:
        return (FIXTURES / "test_outputs" / case["file"]).read_text(encoding="utf-8")
    return case["output"]


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c['runner']}" for i, c in enumerate(CASES)])
def test_a_runners_summary_gives_its_counts(case):
    report = parse_test_output(output_of(case), 1)
    expected = dict(case["expected"])
    first_failure = expected.pop("first_failure", None)
    first_message = expected.pop("first_message", None)
    got = {key: report.get(key) for key in expected}
    assert got == expected, case["runner"]
    if "subtests" not in expected:
        assert "subtests" not in report, case["runner"]
    if first_failure is not None:
        assert report["failures"], case["runner"]
        assert report["failures"][0]["name"] == first_failure
    if first_message is not None:
        assert report["failures"][0]["message"] == first_message


def test_the_corpus_holds_every_supported_runner():
    frameworks = {case["expected"]["framework"] for case in CASES}
    assert frameworks >= {"pytest", "unittest", "cargo", "go", "jest", "vitest", "mocha"}
    assert frameworks >= {"node", "tap"}
    pytest_versions = {c["runner"].split()[1][0] for c in CASES if c["runner"].startswith("pytest")}
    assert pytest_versions >= {"7", "8", "9"}
