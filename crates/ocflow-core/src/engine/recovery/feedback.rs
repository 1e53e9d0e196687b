//! What a code step is told when recovery runs it again: the coder sees the failing test.
//!
//! When a test step fails and recovery retries or modifies the step that wrote the code, that
//! step's next request carries the failing tests' names and assertion messages (as the runner's
//! report gave them, parsed by the library), the end of the test command's output (where the
//! traceback is), and the recovery's reason — not only "exit code 1". The text is kept on the
//! step's status (`StepStatus::feedback`), so a resumed flow tells it the same.

use crate::flow::operations;
use crate::task::failure_cause::{self, Tail};
use ocflow_model::flow::{Flow, Step};
use ocflow_model::step_result::StepResult;

/// How much of the output a coder is shown: the traceback's end, bounded.
const FOR_THE_CODER: Tail = Tail {
    lines: 40,
    bytes: 4000,
};
/// The most of the recovery's reason kept (a small model's paragraph can run on).
const MAX_REASON_BYTES: usize = 2000;

/// Whether `step` asks the model to write code: an LLM step that writes files.
pub(crate) fn writes_code(step: &Step) -> bool {
    operations::step_needs_llm(&step.operation, &step.params)
        && operations::find(&step.operation).is_some_and(|op| !op.writes.is_empty())
}

/// The step that wrote the code a failed test step checks: the nearest of its ancestors (the
/// latest in the flow) that writes code. `None` when the failed step is no test step or has
/// no such ancestor.
pub(crate) fn code_step_of(
    flow: &Flow,
    failed: &str,
    result: Option<&StepResult>,
) -> Option<String> {
    let step = flow.step(failed)?;
    let runs_tests = operations::find(&step.operation).is_some_and(|op| op.runs_tests)
        || result.is_some_and(|r| r.tests.as_ref().is_some_and(|t| !t.failures.is_empty()));
    if !runs_tests || writes_code(step) {
        return None;
    }
    let ancestors = flow.ancestors(failed);
    flow.steps
        .iter()
        .rev()
        .find(|s| ancestors.contains(&s.id) && writes_code(s))
        .map(|s| s.id.clone())
}

/// The text a code step's request starts with after step `failed` failed (`error`, its
/// `result`, its directory `step_dir`) and recovery decided `reason`.
pub(crate) fn text(
    failed: &str,
    error: &str,
    result: Option<&StepResult>,
    step_dir: &std::path::Path,
    reason: &str,
) -> String {
    let evidence = failure_cause::evidence(result, step_dir, FOR_THE_CODER);
    let mut text = format!(
        "## Why this runs again\nThe last attempt did not work: step `{failed}` failed: {error}\n"
    );
    if !evidence.test_failures.is_empty() {
        text.push_str("\nFailing tests (name — error type: message):\n");
        for failure in &evidence.failures_within(FOR_THE_CODER) {
            text.push_str(&format!("- {failure}\n"));
        }
    }
    let output: Vec<String> = evidence
        .outputs
        .iter()
        .map(|(field, tail)| format!("{field}:\n{tail}"))
        .chain(evidence.log.clone())
        .collect();
    if !output.is_empty() {
        let body = output.join("\n");
        let fence = "`".repeat(longest_backtick_run(&body).max(2) + 1);
        text.push_str(&format!(
            "\nThe end of its output:\n{fence}\n{body}\n{fence}\n"
        ));
    }
    let reason = reason.trim();
    if !reason.is_empty() {
        let cut: String = reason.chars().take(MAX_REASON_BYTES).collect();
        text.push_str(&format!(
            "\nWhat to change, as the error handler sees it: {cut}\n"
        ));
    }
    text.push_str("\nMake the change asked below so that these tests pass.");
    text
}

fn longest_backtick_run(text: &str) -> usize {
    text.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flow(steps: serde_json::Value) -> Flow {
        serde_json::from_value(json!({"version": 1, "task": "t", "steps": steps})).unwrap()
    }

    #[test]
    fn the_code_step_of_a_test_step_is_its_nearest_code_writing_ancestor() {
        let flow = flow(json!([
            {"id": "a", "operation": "modify_code",
             "params": {"file_path": "a.py", "instructions": "x"}},
            {"id": "b", "operation": "modify_code", "depends_on": ["a"],
             "params": {"file_path": "b.py", "instructions": "y"}},
            {"id": "w", "operation": "write_file", "depends_on": ["b"],
             "params": {"file_path": "c.txt", "content": "plain"}},
            {"id": "t", "operation": "run_tests", "depends_on": ["w"], "params": {}},
            {"id": "s", "operation": "execute_shell_command", "depends_on": ["b"],
             "params": {"command": "make"}}
        ]));
        assert_eq!(code_step_of(&flow, "t", None), Some("b".into()));
        // Not a test step (no test failures in its result), or itself the code step.
        assert_eq!(code_step_of(&flow, "s", None), None);
        assert_eq!(code_step_of(&flow, "b", None), None);
    }
}
