//! The summary for people, `summary.md`: what ran, what failed and why, what changed. Written
//! from the status and the journal at the end of every flow.

use std::fmt::Write;

use crate::engine::summary_check::{self, Facts, StepFact, verdict_word};
use crate::llm::client::Llm;
use crate::task::failure_cause;
use crate::task::journal;
use crate::task::review::{self, ChangeKind};
use crate::task::workspace::{self, TaskDir};
use ocflow_model::error::Result;
use ocflow_model::event::{ContradictedClaim, Event};
use ocflow_model::llm::{ChatRequest, DEFAULT_PROFILE, LlmError, Message, ModelSettings};
use ocflow_model::output::printable_lines;
use ocflow_model::prompt_template;
use ocflow_model::status::{FlowState, FlowStatus, StepState};

/// Builds `summary.md` from the journal and the final status.
pub fn from_journal(
    task: &TaskDir,
    status: &FlowStatus,
    flow: &ocflow_model::flow::Flow,
) -> Result<String> {
    let changes = review::changes(task, status, flow)?;
    from_journal_with(task, status, flow, &changes)
}

/// `from_journal` with the flow's net `changes` already found: the end of a finished flow
/// writes it even after a signal (finding the changes again is the part a signal stops).
pub(crate) fn from_journal_with(
    task: &TaskDir,
    status: &FlowStatus,
    flow: &ocflow_model::flow::Flow,
    changes: &[review::Change],
) -> Result<String> {
    let (records, _) = journal::read(&task.file(workspace::JOURNAL_FILE))?;
    let mut out = String::new();
    let verdict = verdict_word(status.state);
    let _ = writeln!(
        out,
        "# {}\n",
        if status.task.is_empty() {
            &status.task_id
        } else {
            &status.task
        }
    );
    // The answer first, where the user looks: a flow asked a question ends with its answer.
    if let Some(answer) = crate::engine::final_answer::find(task, status, flow) {
        let _ = writeln!(
            out,
            "## Answer (step `{}`)\n\n{}\n",
            answer.step, answer.text
        );
    }
    let _ = writeln!(out, "The flow `{}` {verdict}.\n", status.task_id);
    if let Some(message) = &status.message {
        let _ = writeln!(out, "{message}\n");
    }
    if !status.deliverables.is_empty() {
        let _ = writeln!(
            out,
            "## What done means, as checked\n\n{}\n",
            deliverable_lines(status)
        );
    }
    if let Some(sandbox) = &status.sandbox {
        let _ = writeln!(out, "Command steps' sandbox: {sandbox}.\n");
    }
    if let Some(profiles) = status.profiles_used() {
        let _ = writeln!(out, "Tokens by model profile: {profiles}.\n");
    }

    let _ = writeln!(out, "## Steps\n");
    for step in &status.steps {
        let attempts = if step.attempts > 1 {
            format!(", {} attempts", step.attempts)
        } else {
            String::new()
        };
        let message = step.message.as_deref().unwrap_or("");
        let profile = step
            .profile
            .as_deref()
            .filter(|p| *p != DEFAULT_PROFILE)
            .map(|p| format!(", profile {p}"));
        let by = match (&step.role, profile) {
            (Some(role), profile) => format!(" ({role}{})", profile.unwrap_or_default()),
            (None, Some(profile)) => format!(" ({})", profile.trim_start_matches(", ")),
            (None, None) => String::new(),
        };
        let _ = writeln!(
            out,
            "- `{}` {}{by} — {}{attempts}{}",
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
            if let Some(cause) = failure_cause::for_people(task, &step.id) {
                let _ = writeln!(out, "\n  {}:\n", upper_first(cause.source));
                out.push_str(&fenced(&printable_lines(&cause.text), "  "));
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
    if changes.is_empty() {
        let _ = writeln!(out, "None.");
    }
    for change in changes {
        let kind = match change.kind {
            ChangeKind::Added => "added",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
        };
        let _ = writeln!(out, "- `{}` ({kind})", change.path);
    }
    if !changes.is_empty() && status.state == FlowState::Succeeded {
        let _ = writeln!(
            out,
            "\nReview with `ocflow diff {0}`, then `ocflow apply {0}`.",
            status.task_id
        );
    } else if !changes.is_empty() {
        // A plain `apply` of a flow that did not succeed is refused: name what works.
        let _ = writeln!(
            out,
            "\nThe flow did not succeed, so these changes are not applied as a whole. Review \
             them with `ocflow diff {0}`; a file whose steps succeeded can be applied alone with \
             `ocflow apply {0} --only PATH`.",
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

const PROMPT: &str = include_str!("../../../../prompts/summary.md");

/// Why the model's summary is not used (the journal's is written instead).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SummaryError {
    #[error("{0}")]
    Llm(#[from] LlmError),
    #[error("the model's summary was empty or cut off")]
    Unusable,
    #[error("{0}")]
    State(#[from] ocflow_model::error::Error),
}

/// The summary with the model's words, and the claims in them the journal contradicts.
#[derive(Debug)]
pub(crate) struct ModelSummary {
    pub(crate) text: String,
    pub(crate) contradicted: Vec<ContradictedClaim>,
}

/// Asks the LLM for the summary (the seed's summarisation prompt) from the same facts as
/// `from_journal`: no times or ids, so the prompt of a flow is the same on every run.
pub(crate) async fn with_llm(
    task: &TaskDir,
    status: &FlowStatus,
    flow: &ocflow_model::flow::Flow,
    llm: &Llm,
    settings: &ModelSettings,
) -> Result<ModelSummary, SummaryError> {
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
    let prompt = prompt_template::fill_with(
        PROMPT.trim(),
        &[
            ("task", &status.task),
            ("verdict", verdict),
            ("steps", &steps),
            ("files", &files),
            ("deliverables", &deliverable_lines(status)),
        ],
    );
    let request = ChatRequest {
        purpose: "summary".into(),
        settings: settings.clone(),
        messages: vec![Message::user(prompt)],
        json: false,
        schema: None,
        optional: false,
    };
    let answer = llm.chat(&request).await?;
    if answer.is_truncated() || answer.content.trim().is_empty() {
        return Err(SummaryError::Unusable);
    }
    let changed: Vec<String> = changes
        .iter()
        .map(|c| c.path.as_str().to_string())
        .collect();
    let steps: Vec<StepFact> = status.steps.iter().map(StepFact::of).collect();
    let facts = Facts {
        state: status.state,
        changed: &changed,
        steps: &steps,
    };
    let (prose, contradicted) = summary_check::checked(answer.content.trim(), &facts);
    // The facts first, from the journal; the model's words after, labelled as its own.
    Ok(ModelSummary {
        text: format!(
            "{}\n{MODEL_SECTION}\n\n{prose}\n",
            from_journal(task, status, flow)?.trim_end()
        ),
        contradicted,
    })
}

/// The flow's deliverables as its end found them, one `- ` line each ("none" without any).
fn deliverable_lines(status: &FlowStatus) -> String {
    if status.deliverables.is_empty() {
        return "none".into();
    }
    status
        .deliverables
        .iter()
        .map(|check| format!("- {}", check.line()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The heading of the model's part of a summary.
pub const MODEL_SECTION: &str = "## The model's summary (its words; the facts are above)";

/// `text` as a fenced block indented by `indent` (inside a list item), its fence longer than
/// any run of backticks in it: a command's output cannot close the block early.
fn fenced(text: &str, indent: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let mut out = format!("{indent}{fence}text\n");
    for line in text.lines() {
        out.push_str(&format!("{indent}{line}\n"));
    }
    out.push_str(&format!("{indent}{fence}\n"));
    out
}

/// `text` with its first letter in capitals.
fn upper_first(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_with_backticks_cannot_close_its_block() {
        let block = fenced("npm error ```\n`x`", "  ");
        assert_eq!(block, "  ````text\n  npm error ```\n  `x`\n  ````\n");
        assert_eq!(fenced("plain", ""), "```text\nplain\n```\n");
        assert_eq!(
            upper_first("the end of its stderr"),
            "The end of its stderr"
        );
    }
}
