//! A failed step says why wherever a person looks: the end of the run at the terminal,
//! `summary.md`'s "Why it failed" and the HTML report show the last lines of the failing
//! command's stderr, or the first failing test's message when the runner's output was read.

use std::path::PathBuf;

use serde_json::json;

use super::support::*;

#[test]
fn a_failed_step_shows_its_cause_at_the_terminal_in_the_summary_and_in_the_report() {
    let sandbox = Sandbox::new(&[]);
    // stderr's last line carries an escape sequence (a terminal title) and markup: neither
    // may reach the terminal or the page as such.
    let npm = "echo 'npm error code EAI_AGAIN tape' >&2; \
               printf 'npm error \\033]0;owned\\007<b>bold</b>\\n' >&2; exit 1";
    let pytest = "printf 'FAILED t.py::test_a - ValueError: the widths differ\\n\
                  1 failed, 2 passed in 0.10s\\n'; exit 1";
    let flow = json!([
        {"id": "npm", "operation": "run_tests", "params": {"command": npm}},
        {"id": "pytest", "operation": "run_tests", "params": {"command": pytest}},
        {"id": "shell", "operation": "execute_shell_command",
         "params": {"command": "echo 'fatal: EAI_AGAIN from the shell' >&2; exit 3"}}
    ]);
    let output = sandbox.run(&flow, "t");
    assert_exit(&output, 1);
    let terminal = stdout(&output);
    for cause in [
        "npm error code EAI_AGAIN tape",
        "t.py::test_a — ValueError: the widths differ",
        "fatal: EAI_AGAIN from the shell",
    ] {
        assert!(terminal.contains(cause), "{cause} not in:\n{terminal}");
    }
    assert!(
        !terminal.contains('\u{1b}') && !terminal.contains('\u{7}'),
        "{terminal:?}"
    );

    let summary = std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap();
    let (_, why) = summary.split_once("## Why it failed").expect(&summary);
    for cause in [
        "npm error code EAI_AGAIN tape",
        "t.py::test_a — ValueError: the widths differ",
        "fatal: EAI_AGAIN from the shell",
    ] {
        assert!(why.contains(cause), "{cause} not in:\n{summary}");
    }
    assert!(!summary.contains('\u{1b}'), "{summary:?}");

    let report = sandbox.ocflow().args(["report", "t"]).output().unwrap();
    assert_exit(&report, 0);
    let html = std::fs::read_to_string(PathBuf::from(stdout(&report).trim())).unwrap();
    let row = |id: &str| {
        let start = html.find(&format!("<tr data-step=\"{id}\"")).expect(id);
        html[start..start + html[start..].find("</tr>").unwrap()].to_string()
    };
    assert!(
        row("npm").contains("npm error code EAI_AGAIN tape"),
        "{}",
        row("npm")
    );
    assert!(
        row("npm").contains("&lt;b&gt;bold&lt;/b&gt;"),
        "{}",
        row("npm")
    );
    assert!(!html.contains("<b>bold</b>"));
    assert!(
        row("pytest").contains("t.py::test_a — ValueError: the widths differ"),
        "{}",
        row("pytest")
    );
    assert!(row("shell").contains("fatal: EAI_AGAIN from the shell"));
}

/// A real pytest run (issue 40 §2 of failures in the runner's words): the failing assertion's
/// values reach the end of the run whole (`COLUMNS=200`: pytest's short summary used to end
/// `AssertionErr...` at 80 columns), and its location is the repository's path, not one inside
/// the task's view.
#[test]
fn a_real_pytest_failure_is_shown_whole_at_the_repositorys_paths() {
    if std::process::Command::new("python3")
        .args(["-c", "import pytest"])
        .output()
        .is_ok_and(|o| !o.status.success())
    {
        return skip("pytest is not importable by python3");
    }
    let long = "a rather long expected value that says exactly what the total should have been";
    let test = format!("def test_total():\n    assert 'total 12' == '{long}'\n");
    let sandbox = Sandbox::new(&[("tests/test_cart.py", test.as_str())]);
    let flow = json!([{"id": "tests", "operation": "run_tests",
        "params": {"command": "python3 -m pytest -q -p no:cacheprovider tests/test_cart.py"}}]);
    let output = sandbox.run(&flow, "t");
    assert_exit(&output, 1);
    let terminal = stdout(&output);
    assert!(terminal.contains(long), "{terminal}");
    assert!(
        !terminal.contains("_view") && !terminal.contains("_layers"),
        "{terminal}"
    );
    let summary = std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap();
    assert!(
        summary.contains(long) && !summary.contains("_layers/view/"),
        "{summary}"
    );
}
