//! `ocflow status` for people: the flow's state and one line per step.

use crate::model::status::{FlowStatus, StepState};

/// The status as a table: one line per step.
pub(crate) fn render(status: &FlowStatus) -> String {
    let mut out = format!(
        "task {}  [{}]  revision {}\n{}\nrepository {}\ntokens {} (prompt {}, completion {}) in {} \
         LLM call(s)\n\n",
        status.task_id,
        status.state,
        status.revision,
        status.task,
        status.repo.display(),
        status.tokens.total_tokens,
        status.tokens.prompt_tokens,
        status.tokens.completion_tokens,
        status.tokens.calls
    );
    if let Some(sandbox) = &status.sandbox {
        out.push_str(&format!("sandbox {sandbox}\n\n"));
    }
    let running: Vec<&str> = status
        .steps
        .iter()
        .filter(|s| s.status == StepState::Running)
        .map(|s| s.id.as_str())
        .collect();
    if !running.is_empty() {
        out.push_str(&format!(
            "running now ({} at once): {}\n\n",
            running.len(),
            running.join(", ")
        ));
    }
    let width = status
        .steps
        .iter()
        .map(|s| s.id.len())
        .max()
        .unwrap_or(4)
        .max(4);
    out.push_str(&format!(
        "{:<width$}  {:<22}  {:<9}  {:>8}  {:>9}  {:>7}  {}\n",
        "STEP", "OPERATION", "STATUS", "ATTEMPTS", "TIME", "TOKENS", "MESSAGE"
    ));
    for step in &status.steps {
        let time = step
            .duration_ms
            .map(|ms| format!("{:.2}s", ms as f64 / 1000.0))
            .unwrap_or_else(|| "-".into());
        let message = step
            .error
            .as_ref()
            .map(|e| e.message.as_str())
            .or(step.message.as_deref())
            .unwrap_or("");
        let message: String = message
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(80)
            .collect();
        let tokens = if step.tokens.is_zero() {
            "-".to_string()
        } else {
            step.tokens.total_tokens.to_string()
        };
        out.push_str(&format!(
            "{:<width$}  {:<22}  {:<9}  {:>8}  {:>9}  {:>7}  {}\n",
            step.id,
            step.operation,
            step.status.to_string(),
            step.attempts,
            time,
            tokens,
            message
        ));
    }
    out
}
