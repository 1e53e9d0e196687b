//! The end of a run, for people: how it ended and in what time, with how many tokens; the
//! summary's first lines; a diff stat; and the exact next commands, with the task id. Printed
//! on stdout as plain text where colour does not belong, and not at all with `--json` (the
//! `flow_finished` event says it all there).

use crate::cli::words::seconds;
use ocflow_core::engine::{final_answer, summary};
use ocflow_core::task::disk;
use ocflow_core::task::failure_cause;
use ocflow_core::task::review::{self, ChangeKind};
use ocflow_core::task::workspace::{self, TaskDir};
use ocflow_model::budget::PauseReason;
use ocflow_model::error::Result;
use ocflow_model::flow::Flow;
use ocflow_model::output::{paint, print_stdout, printable, quoted_path, styles};
use ocflow_model::status::{FlowState, FlowStatus, LLM_UNUSABLE_KIND, NO_SPACE_KIND, StepState};

/// How many of the summary's lines are shown.
const SUMMARY_LINES: usize = 8;
/// How many of the answer's lines are shown (the whole is in `summary.md`).
const ANSWER_LINES: usize = 40;

/// Prints the end of a run; `fix`: what to change before going on, when the model could not
/// be used (said once, above the next commands).
pub(crate) fn show(
    task: &TaskDir,
    status: &FlowStatus,
    flow: &Flow,
    fix: Option<&str>,
) -> Result<()> {
    let mut out = String::from("\n");
    // A question's answer comes first, where the user looks: the step's own words, escaped.
    if let Some(answer) = final_answer::find(task, status, flow) {
        show_answer(&mut out, task, &answer);
    }
    show_headline(&mut out, task, status, flow);
    // Under the reason, each failed step's own words: a status line alone ("exited with code
    // 1") leaves a person to dig the cause out of result.json.
    show_causes(&mut out, task, status);
    show_summary(&mut out, task);
    // A signal after the flow finished (during its summary) leaves the stat out, not the end.
    let changes = match review::changes(task, status, flow) {
        Err(ocflow_model::error::Error::Interrupted) => Vec::new(),
        found => found?,
    };
    let stat = review::diff_stat(&changes)?;
    show_stat(&mut out, &stat);
    // Flows keep their snapshots and views until removed: a workspace that grew large says so.
    disk::record(task);
    let (bytes, tasks) = disk::workspace_usage(&task.workspace());
    if let Some(note) = large_workspace_note(bytes, tasks) {
        out.push_str(&format!("  {}\n", paint(&note, styles::NOTE)));
    }
    let next = next_commands(task, status, stat.is_empty());
    if let Some(fix) = fix {
        out.push_str(&format!("{} {fix}\n", paint("fix:", styles::BAD)));
    }
    out.push_str("next:\n");
    let width = next
        .iter()
        .map(|(c, _)| c.chars().count())
        .max()
        .unwrap_or(0);
    for (command, why) in next {
        out.push_str(&format!(
            "  {command:<width$}  {}\n",
            paint(why, styles::DIM)
        ));
    }
    print_stdout(&out);
    Ok(())
}

/// The flow's answer to a question, its first [`ANSWER_LINES`] lines.
fn show_answer(out: &mut String, task: &TaskDir, answer: &ocflow_model::event::FinalAnswer) {
    out.push_str(&paint(
        &format!("answer (step {}):\n", printable(&answer.step)),
        styles::NAME,
    ));
    let lines: Vec<&str> = answer.text.lines().collect();
    for line in lines.iter().take(ANSWER_LINES) {
        out.push_str(&format!("  {}\n", printable(line)));
    }
    if lines.len() > ANSWER_LINES {
        out.push_str(&paint(
            &format!(
                "  … the whole answer: {}\n",
                task.file(workspace::SUMMARY_FILE).display()
            ),
            styles::DIM,
        ));
    }
    out.push('\n');
}

/// How the flow ended, in what time and with how many tokens; why; its budget; and what done
/// means, each deliverable with its evidence: why it succeeded, or what is missing.
fn show_headline(out: &mut String, task: &TaskDir, status: &FlowStatus, flow: &Flow) {
    let took = took(status)
        .map(|ms| format!(" in {}", seconds(ms)))
        .unwrap_or_default();
    let tokens = match status.tokens.prompt_tokens + status.tokens.completion_tokens {
        0 => String::new(),
        n => format!(" · {n} tokens in {} call(s)", status.tokens.calls),
    };
    let steps = format!(" · {} step(s)", flow.steps.len());
    let headline = match status.state {
        FlowState::Succeeded => paint(&format!("✓ succeeded{took}"), styles::GOOD),
        FlowState::Interrupted => paint("■ interrupted", styles::NOTE),
        FlowState::Paused => paint("‖ paused", styles::NOTE),
        FlowState::NoChange => paint(&format!("✗ no change{took}"), styles::BAD),
        FlowState::Waiting => paint("⏸ waiting for approval", styles::NOTE),
        _ => paint(&format!("✗ failed{took}"), styles::BAD),
    };
    out.push_str(&format!(
        "{headline}{steps}{tokens} — task {}\n",
        paint(&task.task_id, styles::NAME)
    ));
    if let Some(reason) = status.failure_reason() {
        out.push_str(&format!("  {}\n", paint(&printable(&reason), styles::BAD)));
    }
    if !status.budget.is_empty() {
        out.push_str(&format!("  budget: {}\n", status.budget.describe()));
    }
    for check in &status.deliverables {
        let (mark, style) = if check.met {
            ("✓", styles::GOOD)
        } else {
            ("✗", styles::BAD)
        };
        out.push_str(&format!(
            "  {} {}\n",
            paint(mark, style),
            printable(&check.line())
        ));
    }
}

/// Each failed step's own words.
fn show_causes(out: &mut String, task: &TaskDir, status: &FlowStatus) {
    for step in status
        .steps
        .iter()
        .filter(|s| s.status == StepState::Failed)
    {
        if let Some(cause) = failure_cause::for_people(task, &step.id) {
            out.push_str(&format!(
                "  {}\n",
                paint(
                    &format!("why {} failed ({}):", step.id, cause.source),
                    styles::DIM
                )
            ));
            for line in cause.text.lines() {
                out.push_str(&format!("    {}\n", printable(line)));
            }
        }
    }
}

/// Of the summary, the model's words, labelled as its own (contradictions with the facts
/// already marked in them); the facts are in the lines above and below.
fn show_summary(out: &mut String, task: &TaskDir) {
    let summary = std::fs::read_to_string(task.file(workspace::SUMMARY_FILE)).unwrap_or_default();
    let lines: Vec<&str> = summary
        .split_once(summary::MODEL_SECTION)
        .map(|(_, words)| words)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    if !lines.is_empty() {
        out.push_str(&paint("  the model's summary:\n", styles::DIM));
    }
    for line in lines.iter().take(SUMMARY_LINES) {
        out.push_str(&format!("  {}\n", printable(line)));
    }
    if lines.len() > SUMMARY_LINES {
        out.push_str(&paint(
            &format!(
                "  … the whole summary: {}\n",
                task.file(workspace::SUMMARY_FILE).display()
            ),
            styles::DIM,
        ));
    }
}

/// The diff stat: how many files changed, lines added and removed, each file.
fn show_stat(out: &mut String, stat: &[review::FileStat]) {
    if !stat.is_empty() {
        let (added, removed) = stat
            .iter()
            .filter_map(|s| s.lines)
            .fold((0, 0), |(a, r), (x, y)| (a + x, r + y));
        out.push_str(&format!(
            "  {} file(s) changed, {} {}\n",
            stat.len(),
            paint(&format!("+{added}"), styles::ADDED),
            paint(&format!("-{removed}"), styles::REMOVED)
        ));
        for file in stat {
            let kind = match file.kind {
                ChangeKind::Added => "A",
                ChangeKind::Modified => "M",
                ChangeKind::Deleted => "D",
            };
            let lines = match file.lines {
                Some((a, r)) => format!(
                    "{} {}",
                    paint(&format!("+{a}"), styles::ADDED),
                    paint(&format!("-{r}"), styles::REMOVED)
                ),
                None => "binary".to_string(),
            };
            out.push_str(&format!(
                "    {kind} {}  {lines}\n",
                quoted_path(&file.path)
            ));
        }
    }
}

/// The exact next commands for a flow that ended as `status` says, with what each does. They
/// work from any directory: through the user's task index, or named in full.
fn next_commands(
    task: &TaskDir,
    status: &FlowStatus,
    unchanged: bool,
) -> Vec<(String, &'static str)> {
    let id = &format!(
        "{}{}",
        task.task_id,
        crate::cli::task_index::reach(task, &status.repo)
    );
    match status.state {
        FlowState::Succeeded if status.applied_at.is_some() => vec![(
            format!("ocflow undo {id}"),
            "put the files back as they were",
        )],
        FlowState::Succeeded if unchanged => {
            vec![(format!("ocflow status {id}"), "what each step did")]
        }
        FlowState::Succeeded => vec![
            (format!("ocflow diff {id}"), "review the changes"),
            (
                format!("ocflow apply {id}"),
                "write them into the repository",
            ),
        ],
        FlowState::Interrupted => {
            vec![(format!("ocflow resume {id}"), "continue where it stopped")]
        }
        FlowState::Paused => {
            let flag = match &status.paused {
                Some(PauseReason::Budget(exceeded)) => exceeded.budget.flag(),
                None => "--max-tokens",
            };
            vec![
                (format!("ocflow status {id}"), "what each step did"),
                (
                    format!("ocflow resume {id} {flag} …"),
                    "continue where it stopped, with a higher limit",
                ),
            ]
        }
        FlowState::Waiting => vec![
            (format!("ocflow approve {id}"), "say yes: it goes on"),
            (
                format!("ocflow reject {id} --reason TEXT"),
                "say no: it ends",
            ),
        ],
        // Nothing failed and nothing is left to run: a new plan must make the change.
        FlowState::NoChange => vec![
            (format!("ocflow status {id}"), "what each step did"),
            (
                "ocflow run \"TASK\"".to_string(),
                "plan again, naming the change to make",
            ),
        ],
        // Stopped by a model that refused the calls: a plain resume runs those steps again.
        FlowState::Failed if stopped_only_by(status, LLM_UNUSABLE_KIND) => vec![
            (format!("ocflow status {id}"), "what each step did"),
            (
                format!("ocflow resume {id}"),
                "run the steps again once the model answers",
            ),
        ],
        // Stopped by a full disk only: a plain resume runs those steps again.
        FlowState::Failed if stopped_only_by(status, NO_SPACE_KIND) => vec![
            (format!("ocflow status {id}"), "what each step did"),
            (
                format!("ocflow resume {id}"),
                "run the steps again once the disk has room",
            ),
        ],
        _ => vec![
            (format!("ocflow status {id}"), "what each step did"),
            (
                format!("ocflow resume {id} --retry-failed"),
                "run the failed step again once fixed",
            ),
        ],
    }
}

/// Above this much, the end of a run says the workspace is large, and how to free it.
const LARGE_WORKSPACE_BYTES: u64 = 2_000_000_000;

/// What the end of a run says of a workspace holding `bytes` in `tasks` tasks: nothing below
/// [`LARGE_WORKSPACE_BYTES`].
fn large_workspace_note(bytes: u64, tasks: usize) -> Option<String> {
    (bytes > LARGE_WORKSPACE_BYTES).then(|| {
        format!(
            "the workspace holds {} in {tasks} task(s): `ocflow list` shows each one's size, \
             `ocflow clean --dry-run` what can go",
            disk::describe(bytes)
        )
    })
}

/// The flow's time from its start to its end, in milliseconds.
fn took(status: &FlowStatus) -> Option<u64> {
    let parse = |t: &str| chrono::DateTime::parse_from_rfc3339(t).ok();
    let start = parse(&status.created_at)?;
    let end = parse(status.finished_at.as_deref()?)?;
    u64::try_from((end - start).num_milliseconds()).ok()
}

/// Whether every failed step failed for the same cause of `kind`, which a plain resume lifts
/// once fixed (a full disk, a model refusing its calls).
fn stopped_only_by(status: &FlowStatus, kind: &str) -> bool {
    let mut failed = status
        .steps
        .iter()
        .filter(|s| s.status == StepState::Failed)
        .peekable();
    failed.peek().is_some() && failed.all(|s| s.error.as_ref().is_some_and(|e| e.kind == kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_large_workspace_is_mentioned() {
        assert_eq!(large_workspace_note(LARGE_WORKSPACE_BYTES, 3), None);
        let note = large_workspace_note(2_500_000_000, 10).unwrap();
        assert!(
            note.starts_with("the workspace holds 2.5 GB in 10 task(s)"),
            "{note}"
        );
    }
}
