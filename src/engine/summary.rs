//! The summary for people, `summary.md`: what ran, what failed and why, what changed. Written
//! from the status and the journal at the end of every flow.

use std::fmt::Write;

use crate::error::Result;
use crate::llm::client::Llm;
use crate::model::event::Event;
use crate::model::llm::{ChatRequest, LlmError, Message, ModelSettings};
use crate::model::status::{FlowState, FlowStatus, StepState};
use crate::task::journal;
use crate::task::review::{self, ChangeKind};
use crate::task::workspace::{self, TaskDir};

/// Builds `summary.md` from the journal and the final status.
pub(crate) fn from_journal(
    task: &TaskDir,
    status: &FlowStatus,
    flow: &crate::model::flow::Flow,
) -> Result<String> {
    let (records, _) = journal::read(&task.file(workspace::JOURNAL_FILE))?;
    let mut out = String::new();
    let verdict = match status.state {
        FlowState::Succeeded => "succeeded",
        FlowState::Failed => "failed",
        FlowState::Interrupted => "was interrupted",
        FlowState::Running => "is still running",
    };
    let _ = writeln!(
        out,
        "# {}\n",
        if status.task.is_empty() {
            &status.task_id
        } else {
            &status.task
        }
    );
    let _ = writeln!(out, "The flow `{}` {verdict}.\n", status.task_id);
    if let Some(message) = &status.message {
        let _ = writeln!(out, "{message}\n");
    }
    if let Some(sandbox) = &status.sandbox {
        let _ = writeln!(out, "Command steps' sandbox: {sandbox}.\n");
    }

    let _ = writeln!(out, "## Steps\n");
    for step in &status.steps {
        let attempts = if step.attempts > 1 {
            format!(", {} attempts", step.attempts)
        } else {
            String::new()
        };
        let message = step.message.as_deref().unwrap_or("");
        let _ = writeln!(
            out,
            "- `{}` {} — {}{attempts}{}",
            step.id,
            step.operation,
            step.status,
            if message.is_empty() {
                String::new()
            } else {
                format!(": {message}")
            }
        );
    }

    let failed: Vec<_> = status
        .steps
        .iter()
        .filter(|s| s.status == StepState::Failed)
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "\n## Why it failed\n");
        for step in failed {
            let error = step.error.as_ref();
            let _ = writeln!(
                out,
                "- `{}`: {}",
                step.id,
                error.map_or("unknown error", |e| e.message.as_str())
            );
            if let Some(file) = error.and_then(|e| e.traceback_file.as_deref()) {
                let _ = writeln!(out, "  (traceback in `{}/{file}`)", step.id);
            }
        }
        let blocked: Vec<&str> = status
            .steps
            .iter()
            .filter(|s| s.status == StepState::Pending)
            .map(|s| s.id.as_str())
            .collect();
        if !blocked.is_empty() {
            let _ = writeln!(
                out,
                "\nNot run: {}. Fix the cause, then `ocflow resume {} --retry-failed`.",
                blocked.join(", "),
                status.task_id
            );
        }
    }

    let _ = writeln!(out, "\n## Files changed\n");
    let changes = review::changes(task, status, flow)?;
    if changes.is_empty() {
        let _ = writeln!(out, "None.");
    }
    for change in &changes {
        let kind = match change.kind {
            ChangeKind::Added => "added",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
        };
        let _ = writeln!(out, "- `{}` ({kind})", change.path);
    }
    if !changes.is_empty() {
        let _ = writeln!(
            out,
            "\nReview with `ocflow diff {0}`, then `ocflow apply {0}`.",
            status.task_id
        );
    }

    let attempts: usize = records
        .iter()
        .filter(|r| matches!(r.event, Event::StepStarted { .. }))
        .count();
    let _ = writeln!(
        out,
        "\n## Timeline\n\n{} journal event(s), {attempts} step attempt(s), from {} to {}.",
        records.len(),
        status.created_at,
        status.updated_at
    );
    Ok(out)
}

const PROMPT: &str = include_str!("../../prompts/summary.md");

/// Why the model's summary is not used (the journal's is written instead).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SummaryError {
    #[error("{0}")]
    Llm(#[from] LlmError),
    #[error("the model's summary was empty or cut off")]
    Unusable,
    #[error("{0}")]
    State(#[from] crate::error::Error),
}

/// Asks the LLM for the summary (the seed's summarisation prompt) from the same facts as
/// `from_journal`: no times or ids, so the prompt of a flow is the same on every run.
pub(crate) async fn with_llm(
    task: &TaskDir,
    status: &FlowStatus,
    flow: &crate::model::flow::Flow,
    llm: &Llm,
    settings: &ModelSettings,
) -> Result<String, SummaryError> {
    let steps = status
        .steps
        .iter()
        .map(|s| {
            format!(
                "- {} ({}): {}{}",
                s.id,
                s.operation,
                s.status,
                s.message
                    .as_deref()
                    .map(|m| format!(" — {m}"))
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let changes = review::changes(task, status, flow)?;
    let files = if changes.is_empty() {
        "none".to_string()
    } else {
        changes
            .iter()
            .map(|c| format!("- {} ({:?})", c.path, c.kind).to_lowercase())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let verdict = match status.state {
        FlowState::Succeeded => "succeeded",
        _ => "did not succeed",
    };
    let prompt = PROMPT
        .trim()
        .replace("{{task}}", &status.task)
        .replace("{{verdict}}", verdict)
        .replace("{{steps}}", &steps)
        .replace("{{files}}", &files);
    let request = ChatRequest {
        purpose: "summary".into(),
        settings: settings.clone(),
        messages: vec![Message::user(prompt)],
        json: false,
    };
    let answer = llm.chat(&request).await?;
    if answer.is_truncated() || answer.content.trim().is_empty() {
        return Err(SummaryError::Unusable);
    }
    Ok(format!(
        "# {}\n\n{}\n\n---\n\n{}",
        if status.task.is_empty() {
            &status.task_id
        } else {
            &status.task
        },
        answer.content.trim(),
        from_journal(task, status, flow)?
            .split_once('\n')
            .map_or("", |(_, rest)| rest)
            .trim_start()
    ))
}
