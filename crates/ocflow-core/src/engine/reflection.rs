//! The reflection after a flow that needed recovery (seed 003's Reflector): one short LLM call
//! that says, in two sentences, the root cause of what failed and the fix that ended it. The
//! lesson goes into `summary.md` and into the failure memory beside the failures it explains,
//! so the next flow's prompts carry it.

use crate::llm::client::Llm;
use ocflow_model::flow::Flow;
use ocflow_model::llm::{ChatRequest, LlmError, Message, ModelSettings};
use ocflow_model::status::{FlowState, FlowStatus};

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

/// The reflection's prompt: the task, how the flow ended, and each recovered step's error and
/// strategies.
pub(crate) fn prompt(status: &FlowStatus, flow: &Flow) -> String {
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
            format!(
                "- step {} ({operation}), now {}: {}\n{}",
                s.id,
                s.status,
                first_line(error),
                tried.join("\n")
            )
        })
        .collect();
    let verdict = match status.state {
        FlowState::Succeeded => "succeeded",
        _ => "did not succeed",
    };
    PROMPT
        .trim()
        .replace("{{task}}", &status.task)
        .replace("{{verdict}}", verdict)
        .replace("{{failures}}", &failures.join("\n"))
}

/// Asks for the lesson: two sentences on one line, without control characters, bounded.
pub(crate) async fn reflect(
    status: &FlowStatus,
    flow: &Flow,
    llm: &Llm,
    settings: &ModelSettings,
) -> Result<String, ReflectionError> {
    let request = ChatRequest {
        purpose: "reflection".into(),
        settings: settings.clone(),
        messages: vec![Message::user(prompt(status, flow))],
        json: false,
        schema: None,
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
