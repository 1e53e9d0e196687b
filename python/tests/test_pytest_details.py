"""pytest's failures in its own words (issue 40 §3): the FAILED line is cut at 80 columns and
shortens long values (`'a rather lon...uld have been'`); the failure's `E` lines hold them whole,
with where it failed. Read from a real pytest run."""

import subprocess
import sys

from open_codex_lib.tests_report import parse_pytest

TESTS = """
def test_total():
    assert "total 12" == "a rather long expected value that says exactly what the total should be"


class TestCart:
    def test_tax(self):
        rate = 0.2
        assert round(10 * (1 + rate), 2) == 12.5
"""


def test_a_real_failures_values_and_place_come_from_its_e_lines(tmp_path):
    (tmp_path / "test_cart.py").write_text(TESTS)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_cart.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "80"},
        check=False,
    )
    report = parse_pytest(run.stdout.splitlines(), run.returncode)
    assert report is not None, run.stdout
    total, tax = report["failures"]
    assert total["name"] == "test_cart.py::test_total"
    assert total["error_type"] == "AssertionError"
    assert "that says exactly what the total should be" in total["message"], total
    assert total["message"].endswith("(at test_cart.py:3)")
    assert tax["name"] == "test_cart.py::TestCart::test_tax"
    assert tax["message"].startswith("assert 12.0 == 12.5"), tax
    assert tax["message"].endswith("(at test_cart.py:9)")


def test_without_e_lines_the_failed_line_is_the_message():
    lines = ["FAILED t.py::test_a - ValueError: boom", "1 failed in 0.01s"]
    [failure] = parse_pytest(lines, 1)["failures"]
    assert failure == {"name": "t.py::test_a", "error_type": "ValueError", "message": "boom"}
