//! The summary for people, `summary.md`: what ran, what failed and why, what changed. Written
//! from the status and the journal at the end of every flow.

use std::fmt::Write;

use crate::engine::failure_cause;
use crate::error::Result;
use crate::llm::client::Llm;
use crate::model::event::Event;
use crate::model::llm::{ChatRequest, DEFAULT_PROFILE, LlmError, Message, ModelSettings};
use crate::model::status::{FlowState, FlowStatus, StepState};
use crate::output::printable_lines;
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
    let _ = writeln!(out, "The flow `{}` {verdict}.\n", status.task_id);
    if let Some(message) = &status.message {
        let _ = writeln!(out, "{message}\n");
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
        schema: None,
    };
    let answer = llm.chat(&request).await?;
    if answer.is_truncated() || answer.content.trim().is_empty() {
        return Err(SummaryError::Unusable);
    }
    let changed: Vec<String> = changes
        .iter()
        .map(|c| c.path.as_str().to_string())
        .collect();
    let attempts: u32 = status.steps.iter().map(|s| s.attempts).sum();
    let prose = checked(answer.content.trim(), status.state, &changed, attempts);
    // The facts first, from the journal; the model's words after, labelled as its own.
    Ok(format!(
        "{}\n{MODEL_SECTION}\n\n{prose}\n",
        from_journal(task, status, flow)?.trim_end()
    ))
}

/// The heading of the model's part of a summary.
pub(crate) const MODEL_SECTION: &str = "## The model's summary (its words; the facts are above)";

/// The model's prose with every sentence that contradicts the facts marked: a success claimed
/// for a flow that did not succeed, a file said to be changed that the flow did not change, a
/// number of attempts that is not the flow's.
fn checked(prose: &str, state: FlowState, changed: &[String], attempts: u32) -> String {
    let mut out = String::new();
    for line in prose.lines() {
        let mut marked = String::new();
        for sentence in sentences(line) {
            match contradiction(sentence, state, changed, attempts) {
                Some(why) => {
                    marked.push_str(&format!("~~{}~~ *(not so: {why})* ", sentence.trim()))
                }
                None => marked.push_str(sentence),
            }
        }
        out.push_str(marked.trim_end());
        out.push('\n');
    }
    out.trim_end().to_string()
}

/// A line cut after each `. `, `! ` or `? `, keeping the separators.
fn sentences(line: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let bytes = line.as_bytes();
    for i in 0..bytes.len() {
        if matches!(bytes[i], b'.' | b'!' | b'?') && bytes.get(i + 1) == Some(&b' ') {
            parts.push(&line[start..=i + 1]);
            start = i + 2;
        }
    }
    parts.push(&line[start..]);
    parts
}

fn contradiction(
    sentence: &str,
    state: FlowState,
    changed: &[String],
    attempts: u32,
) -> Option<String> {
    let lower = sentence.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || matches!(c, '.' | '_' | '/' | '-')))
        .map(|w| w.trim_matches(|c: char| c == '.' || c == '-'))
        .filter(|w| !w.is_empty())
        .collect();
    let claims_success = ["succeeded", "successfully", "successful", "success"]
        .iter()
        .any(|w| words.contains(w));
    // "The read step succeeded but the tests failed" is true: only a sentence that claims
    // success and admits no failure is checked against the outcome.
    let admits_failure = [
        "fail", "failed", "fails", "failure", "error", "errors", "but", "not",
    ]
    .iter()
    .any(|w| words.contains(w));
    if state != FlowState::Succeeded && claims_success && !admits_failure {
        return Some(format!("the flow {}", verdict_word(state)));
    }
    let says_changed = [
        "created", "added", "changed", "modified", "updated", "wrote", "written", "deleted",
        "removed", "renamed",
    ]
    .iter()
    .any(|w| words.contains(w));
    if says_changed {
        for word in &words {
            let file = *word;
            let looks_like_file = file.rsplit_once('.').is_some_and(|(stem, ext)| {
                FILE_EXTENSIONS.contains(&ext)
                    && !stem.is_empty()
                    && (1..=5).contains(&ext.len())
                    && ext.chars().all(char::is_alphanumeric)
                    && !ext.chars().all(|c| c.is_ascii_digit())
            });
            let known = changed.iter().any(|c| {
                let c = c.to_lowercase();
                c == file || c.rsplit('/').next() == Some(file)
            });
            if looks_like_file && !known {
                return Some(format!("this flow did not change {file}"));
            }
        }
    }
    for pair in words.windows(2) {
        if pair[1].starts_with("attempt")
            && let Ok(n) = pair[0].parse::<u32>()
            && n != attempts
        {
            return Some(format!("its steps took {attempts} attempt(s) in all"));
        }
    }
    None
}

/// Extensions that make a word a file name in the model's prose (`e.g` is not one).
const FILE_EXTENSIONS: &[&str] = &[
    "py", "rs", "js", "ts", "tsx", "jsx", "go", "java", "kt", "c", "h", "cc", "cpp", "hpp", "cs",
    "rb", "php", "sh", "md", "txt", "rst", "json", "toml", "yaml", "yml", "ini", "cfg", "html",
    "css", "scss", "sql", "xml", "lock", "swift", "scala",
];

fn verdict_word(state: FlowState) -> &'static str {
    match state {
        FlowState::Succeeded => "succeeded",
        FlowState::Failed => "failed",
        FlowState::Interrupted => "was interrupted",
        FlowState::Running => "is still running",
        FlowState::NoChange => "finished without doing anything the task asked",
    }
}

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

    /// SmolLM2's real summaries (small-models.md §8), checked against the facts.
    #[test]
    fn claims_that_contradict_the_facts_are_marked() {
        let f1 = "The user was asked to fix the code in `utils.py`. It took 150 attempts to \
                  complete the task without any failures.";
        let marked = checked(f1, FlowState::Failed, &[], 3);
        assert!(marked.contains("~~It took 150 attempts"), "{marked}");
        assert!(
            marked.contains("its steps took 3 attempt(s) in all"),
            "{marked}"
        );
        let f4 = "The flow succeeded. Files changed: inflection/__init__.py (modified) and \
                  kebabize.py (created).";
        let marked = checked(f4, FlowState::Failed, &["inflection/__init__.py".into()], 2);
        assert!(
            marked.contains("~~The flow succeeded.~~ *(not so: the flow failed)*"),
            "{marked}"
        );
        assert!(
            marked.contains("this flow did not change kebabize.py"),
            "{marked}"
        );
        let true_for_a_failure = "The read step succeeded but the tests failed. Updated \
                                  parse(), e.g. for spaces.";
        assert_eq!(
            checked(true_for_a_failure, FlowState::Failed, &[], 2),
            true_for_a_failure
        );
        let honest = "Added a check for empty lists to `utils.py`. All 2 tests pass.";
        assert_eq!(
            checked(honest, FlowState::Succeeded, &["utils.py".into()], 2),
            honest
        );
    }
}
