//! The reflection after a flow that needed recovery (seed 003's Reflector): one short LLM call
//! that says, in two sentences, the root cause of what failed and the fix that ended it. The
//! lesson goes into `summary.md` and into the failure memory beside the failures it explains,
//! so the next flow's prompts carry it.

use std::collections::BTreeMap;

use crate::llm::client::Llm;
use ocflow_model::flow::Flow;
use ocflow_model::llm::{ChatRequest, LlmError, Message, ModelSettings};
use ocflow_model::prompt_template;
use ocflow_model::status::{FlowState, FlowStatus, StepState};

const PROMPT: &str = include_str!("../../../../prompts/reflection.md");
/// The lesson's characters at most: two sentences.
const MAX_LESSON_CHARS: usize = 500;

/// Why there is no lesson.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReflectionError {
    /// The call failed after the client's retries.
    #[error("{0}")]
    Llm(#[from] LlmError),
    /// The answer was empty or cut off.
    #[error("the model's reflection was empty or cut off")]
    Unusable,
}

/// Whether the flow needed recovery: some step had a strategy decided for it.
pub(crate) fn needed(status: &FlowStatus) -> bool {
    status.steps.iter().any(|s| !s.recoveries.is_empty())
}

/// The reflection's prompt: the task, how the flow ended, and each recovered step's error
/// (its remembered error lines, in `errors` by step, when the memory kept them; else its
/// last message) and strategies.
pub(crate) fn prompt(
    status: &FlowStatus,
    flow: &Flow,
    errors: &BTreeMap<String, Vec<String>>,
) -> String {
    let failures: Vec<String> = status
        .steps
        .iter()
        .filter(|s| !s.recoveries.is_empty())
        .map(|s| {
            let error = s
                .error
                .as_ref()
                .map(|e| e.message.as_str())
                .or(s.message.as_deref())
                .unwrap_or("failed");
            let tried: Vec<String> = s
                .recoveries
                .iter()
                .map(|r| format!("  - {}: {}", r.strategy, r.reason))
                .collect();
            let operation = flow
                .step(&s.id)
                .map_or(s.operation.as_str(), |step| step.operation.as_str());
            let said = match errors.get(&s.id) {
                Some(lines) if !lines.is_empty() => {
                    let lines: Vec<String> = lines.iter().map(|l| format!("  | {l}")).collect();
                    format!("failed with\n{}", lines.join("\n"))
                }
                _ if s.status == StepState::Succeeded => "failed first".to_string(),
                _ => first_line(error).to_string(),
            };
            format!(
                "- step {} ({operation}), now {}: {said}\n{}",
                s.id,
                s.status,
                tried.join("\n")
            )
        })
        .collect();
    let verdict = match status.state {
        FlowState::Succeeded => "succeeded",
        _ => "did not succeed",
    };
    prompt_template::fill_with(
        PROMPT.trim(),
        &[
            ("task", &status.task),
            ("verdict", verdict),
            ("failures", &failures.join("\n")),
        ],
    )
}

/// Asks for the lesson: two sentences on one line, without control characters, bounded.
pub(crate) async fn reflect(
    status: &FlowStatus,
    flow: &Flow,
    errors: &BTreeMap<String, Vec<String>>,
    llm: &Llm,
    settings: &ModelSettings,
) -> Result<String, ReflectionError> {
    let request = ChatRequest {
        purpose: "reflection".into(),
        settings: settings.clone(),
        messages: vec![Message::user(prompt(status, flow, errors))],
        json: false,
        schema: None,
        optional: false,
    };
    let answer = llm.chat(&request).await?;
    if answer.is_truncated() {
        return Err(ReflectionError::Unusable);
    }
    let lesson = lesson_of(&answer.content);
    if lesson.is_empty() {
        return Err(ReflectionError::Unusable);
    }
    Ok(lesson)
}

/// The answer as one plain line: blanks and control characters (an escape sequence could
/// drive a terminal that shows it) made single spaces, bounded.
fn lesson_of(answer: &str) -> String {
    let plain: String = answer
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let line = plain.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::engine::failure_fingerprint::bounded(&line, MAX_LESSON_CHARS)
}

fn first_line(text: &str) -> &str {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_shows_each_recovered_steps_error_lines_and_strategies() {
        let flow: Flow = serde_json::from_value(serde_json::json!({"version": 1,
        "task": "halve", "steps": [
            {"id": "test", "operation": "run_tests", "params": {"command": "pytest"}},
            {"id": "doc", "operation": "read_file", "params": {"file_path": "a"}}
        ]}))
        .unwrap();
        let mut status = FlowStatus::new("t", &flow, std::path::Path::new("/r"));
        status.steps[0].status = StepState::Succeeded;
        status.steps[0]
            .recoveries
            .push(ocflow_model::status::RecoveryRecord {
                strategy: ocflow_model::decision::StrategyKind::Modify,
                reason: "halve returns a float".into(),
                signature: String::new(),
                revision: Some(2),
                at: String::new(),
            });
        assert!(needed(&status));
        let errors = BTreeMap::from([(
            "test".to_string(),
            vec!["E AssertionError: assert N == N".to_string()],
        )]);
        let text = prompt(&status, &flow, &errors);
        assert!(
            text.contains(
                "- step test (run_tests), now succeeded: failed with\n  | E AssertionError: \
                 assert N == N\n  - modify: halve returns a float"
            ),
            "{text}"
        );
        assert!(
            !text.contains("step doc"),
            "a step that never failed is not shown"
        );
        assert!(prompt(&status, &flow, &BTreeMap::new()).contains("now succeeded: failed first"));
    }

    #[test]
    fn a_lesson_is_one_plain_bounded_line() {
        assert_eq!(
            lesson_of("Root cause: `/` divides.\n\n\x1b[2JFix: use `//`.  "),
            "Root cause: `/` divides. [2JFix: use `//`."
        );
        assert_eq!(
            lesson_of(&"a ".repeat(600)).chars().count(),
            MAX_LESSON_CHARS
        );
        assert_eq!(lesson_of(" \n "), "");
    }
}
