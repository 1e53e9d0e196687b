//! The recovery prompt: what the model is shown of a failed step — the step, its error, the
//! tail of its log, its structured test failures, what the flow has done and what remains, the
//! strategies already tried — and the message that asks it to fix an answer.

use crate::engine::recovery::context::Context;
use crate::flow::operations;
use crate::task::failure_cause;
use ocflow_model::prompt_template;
use ocflow_model::status::StepState;

const PROMPT: &str = include_str!("../../../../../prompts/recovery.md");
/// Asks again after an answer that cannot be used; `{{problems}}` lists why.
pub(super) const FIX: &str = include_str!("../../../../../prompts/recovery_fix.md");

/// The recovery prompt: the failed step, its error and log tail, its structured test
/// failures, the steps done with their outputs, and the steps remaining.
pub(super) fn prompt(context: &Context<'_>, failed: &str) -> String {
    let step_dir = context.task.step_dir(failed);
    let entry = context.status.step(failed);
    let error = entry
        .and_then(|s| s.error.as_ref())
        .map_or("unknown", |e| e.message.as_str());
    let evidence = failure_cause::evidence(context.result, &step_dir, failure_cause::FOR_THE_MODEL);
    let failures = if evidence.test_failures.is_empty() {
        "(none reported)".to_string()
    } else {
        evidence
            .failures_within(failure_cause::FOR_THE_MODEL)
            .iter()
            .map(|line| format!("- {line}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let mut log: String = evidence
        .outputs
        .iter()
        .map(|(field, tail)| format!("{field}:\n{tail}\n"))
        .collect();
    if let Some(tail) = &evidence.log {
        log = tail.clone();
    }
    let done: Vec<String> = context
        .flow
        .steps
        .iter()
        .filter_map(|s| {
            context
                .status
                .step(&s.id)
                .filter(|st| st.status == StepState::Succeeded)
                .map(|st| (s, st))
        })
        .map(|(s, st)| {
            let outputs = if st.output_files.is_empty() {
                String::new()
            } else {
                format!("; changed {}", st.output_files.join(", "))
            };
            format!(
                "- {} ({}): {}{outputs}",
                s.id,
                s.operation,
                st.message.as_deref().unwrap_or("")
            )
        })
        .collect();
    let remaining: Vec<String> = context
        .flow
        .steps
        .iter()
        .filter(|s| {
            s.id != failed
                && context
                    .status
                    .step(&s.id)
                    .is_some_and(|st| st.status == StepState::Pending)
        })
        .map(|s| serde_json::to_string(s).unwrap_or_default())
        .collect();
    let tried: Vec<String> = entry
        .map(|s| {
            s.recoveries
                .iter()
                .map(|r| format!("- {}: {}", r.strategy, r.reason))
                .collect()
        })
        .unwrap_or_default();
    let failed_json = context
        .flow
        .step(failed)
        .and_then(|s| serde_json::to_string(s).ok())
        .unwrap_or_default();
    let log = if log.trim().is_empty() {
        "(empty)"
    } else {
        log.trim_end()
    };
    prompt_template::fill_with(
        PROMPT.trim(),
        &[
            ("task", &context.flow.task),
            ("failed_step", &failed_json),
            ("attempts", &entry.map_or(0, |s| s.attempts).to_string()),
            ("error", error),
            ("test_failures", &failures),
            ("log", log),
            ("done", &or_none(&done)),
            ("remaining", &or_none(&remaining)),
            ("tried", &or_none(&tried)),
            ("operations", operations::prompt_catalogue().trim_end()),
            (
                "past_experience",
                &crate::llm::planner::past_experience(context.past_experience),
            ),
        ],
    )
}

fn or_none(lines: &[String]) -> String {
    if lines.is_empty() {
        "(none)".into()
    } else {
        lines.join("\n")
    }
}
