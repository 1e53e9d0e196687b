//! `ocflow status` and `ocflow list` for people: tables that fit the terminal (comfy-table),
//! the long column wrapped rather than cut; piped, each row stays one line with the message's
//! first line in full (`--json` has every field).

use comfy_table::{CellAlignment, ColumnConstraint, ContentArrangement, Table, presets};

use crate::cli::words::seconds;
use ocflow_core::flow::ignore_rules;
use ocflow_model::llm::DEFAULT_PROFILE;
use ocflow_model::output::{paint, printable, printable_lines, styles};
use ocflow_model::repo_path::RepoPath;
use ocflow_model::status::{FlowState, FlowStatus, StepState, StepStatus};

/// A borderless table as wide as the terminal when stdout is one.
///
/// Only the last column wraps: the others are names and numbers, kept whole.
fn table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table.load_style(presets::NOTHING);
    table.set_header(header.to_vec());
    for column in table.column_iter_mut().take(header.len().saturating_sub(1)) {
        column.set_constraint(ColumnConstraint::ContentWidth);
    }
    let term = console::Term::stdout();
    if let Some((_, width)) = term.is_term().then(|| term.size_checked()).flatten() {
        table
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(width);
    }
    table
}

fn trim_rows(rendered: String) -> String {
    rendered
        .lines()
        .map(|line| line.trim_end().strip_prefix(' ').unwrap_or(line.trim_end()))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn painted_state(state: &str) -> String {
    match state {
        "succeeded" => paint(state, styles::GOOD),
        "failed" => paint(state, styles::BAD),
        "running" | "interrupted" => paint(state, styles::NOTE),
        _ => state.to_string(),
    }
}

/// A step's role, with its model profile when that is not the default one.
fn role_and_profile(step: &StepStatus) -> String {
    let role = step.role.as_deref().unwrap_or("-");
    match step.profile.as_deref() {
        Some(profile) if profile != DEFAULT_PROFILE => format!("{role} ({profile})"),
        _ => role.to_string(),
    }
}

/// The status: the flow's state, then one row per step.
pub(crate) fn render(status: &FlowStatus) -> String {
    let mut out = format!(
        "task {}  [{}]  revision {}\n{}\nrepository {}\ntokens {} (prompt {}{}, completion {}) in \
         {} LLM call(s)\n\n",
        status.task_id,
        painted_state(&status.state.to_string()),
        status.revision,
        printable_lines(&status.task),
        printable(&status.repo.display().to_string()),
        status.tokens.total_tokens,
        status.tokens.prompt_tokens,
        status.tokens.cached_note(),
        status.tokens.completion_tokens,
        status.tokens.calls
    );
    if let Some(profiles) = status.profiles_used() {
        out.push_str(&format!("tokens by model profile: {profiles}\n\n"));
    }
    if !status.budget.is_empty() {
        out.push_str(&format!("budget: {} spent\n", status.budget.describe()));
        if let Some(reason) = &status.paused {
            out.push_str(&format!("paused: {reason}\n"));
        }
        out.push('\n');
    }
    if let Some(sandbox) = &status.sandbox {
        out.push_str(&format!("sandbox {sandbox}\n\n"));
    }
    if !status.instructions_used.is_empty() {
        // Repository paths: the repository's own names, made printable.
        let paths: Vec<String> = status
            .instructions_used
            .iter()
            .map(|p| printable(p))
            .collect();
        out.push_str(&format!("instructions used {}\n\n", paths.join(", ")));
    }
    let running: Vec<&str> = status
        .steps
        .iter()
        .filter(|s| s.status == StepState::Running)
        .map(|s| s.id.as_str())
        .collect();
    // A flow shown interrupted (its ocflow is gone) has steps saved as running: none runs now.
    if !running.is_empty() && status.state == FlowState::Running {
        out.push_str(&format!(
            "running now ({} at once): {}\n\n",
            running.len(),
            running.join(", ")
        ));
    }
    let mut table = table(&[
        "STEP",
        "OPERATION",
        "ROLE",
        "STATUS",
        "ATTEMPTS",
        "TIME",
        "TOKENS",
        "MESSAGE",
    ]);
    let mut messages = Vec::new();
    for step in &status.steps {
        let time = step.duration_ms.map_or_else(|| "-".into(), seconds);
        let message = step
            .error
            .as_ref()
            .map(|e| e.message.as_str())
            .or(step.message.as_deref())
            .unwrap_or("");
        let tokens = match (step.tokens.is_zero(), step.tokens.cached_prompt_tokens) {
            (true, _) => "-".to_string(),
            (false, 0) => step.tokens.total_tokens.to_string(),
            (false, cached) => format!("{} ({cached} cached)", step.tokens.total_tokens),
        };
        let message = printable(message.lines().next().unwrap_or(""));
        table.add_row(vec![
            step.id.clone(),
            step.operation.clone(),
            role_and_profile(step),
            step.status.to_string(),
            step.attempts.to_string(),
            time,
            tokens,
            message.clone(),
        ]);
        messages.push(message);
    }
    for column in [4, 5, 6] {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    // On a narrow terminal the message would get a sliver: it goes on its own line instead.
    let fixed: u16 = table
        .column_max_content_widths()
        .iter()
        .take(6)
        .map(|w| w + 2)
        .sum();
    match table.width() {
        Some(width) if width < fixed + MIN_MESSAGE_WIDTH => {
            if let Some(column) = table.column_mut(7) {
                column.set_constraint(ColumnConstraint::Hidden);
            }
            let rendered = trim_rows(table.to_string());
            let mut lines = rendered.lines();
            if let Some(header) = lines.next() {
                out.push_str(&format!("{header}\n"));
            }
            for (row, message) in lines.zip(&messages) {
                out.push_str(&format!("{row}\n"));
                if !message.is_empty() {
                    out.push_str(&paint(&format!("    {message}\n"), styles::DIM));
                }
            }
        }
        _ => out.push_str(&trim_rows(table.to_string())),
    }
    out
}

/// The narrowest message column worth reading; narrower, messages go below their rows.
const MIN_MESSAGE_WIDTH: u16 = 30;

/// `ocflow list`: the workspace's tasks, newest first.
pub(crate) fn render_list(
    tasks: &[(FlowStatus, u64)],
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    let mut table = table(&["TASK", "STATE", "AGE", "FILES", "APPLIED", "SIZE", "WHAT"]);
    for (status, bytes) in tasks {
        let files: usize = {
            let mut all: Vec<&String> = status
                .steps
                .iter()
                .filter(|s| s.status == StepState::Succeeded)
                .flat_map(|s| s.output_files.iter().chain(&s.deleted_files))
                .collect();
            all.sort();
            all.dedup();
            // What git ignores (build output, caches) is no change of the flow's: the diff
            // leaves it out, and so does the count.
            let mut ignored_tops: std::collections::HashMap<&str, bool> = Default::default();
            all.into_iter()
                .filter(|path| {
                    let top = path.split('/').next().unwrap_or(path.as_str());
                    let top_ignored = *ignored_tops.entry(top).or_insert_with(|| {
                        RepoPath::parse(top)
                            .is_ok_and(|p| ignore_rules::ignored_by(&status.repo, &p).is_some())
                    });
                    !top_ignored
                        && !RepoPath::parse(path)
                            .is_ok_and(|p| ignore_rules::ignored_by(&status.repo, &p).is_some())
                })
                .count()
        };
        let applied = match (&status.applied_at, status.state) {
            (Some(_), _) => "yes",
            (None, FlowState::Succeeded) if files > 0 => "no",
            _ => "-",
        };
        table.add_row(vec![
            status.task_id.clone(),
            status.state.to_string(),
            // Since the run (its end, or its start while it runs), not the last status write.
            age(
                status.finished_at.as_ref().unwrap_or(&status.created_at),
                now,
            ),
            files.to_string(),
            applied.to_string(),
            ocflow_core::task::disk::describe(*bytes),
            printable(status.task.lines().next().unwrap_or("")),
        ]);
    }
    trim_rows(table.to_string())
}

/// How long ago an RFC 3339 time was: `40 s`, `12 min`, `3 h`, `5 d`.
fn age(time: &str, now: chrono::DateTime<chrono::Utc>) -> String {
    let Ok(then) = chrono::DateTime::parse_from_rfc3339(time) else {
        return "?".into();
    };
    let secs = (now - then.with_timezone(&chrono::Utc))
        .num_seconds()
        .max(0);
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min", secs / 60),
        3600..86_400 => format!("{} h", secs / 3600),
        _ => format!("{} d", secs / 86_400),
    }
}
