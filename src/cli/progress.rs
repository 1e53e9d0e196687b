//! Showing an event to the person or program that started a command, in one place: a JSON
//! line on stdout with `--json`; otherwise the live display's own way while one runs
//! (`cli/live.rs`), else a progress line on stderr. The engine emits events through
//! `ocflow_core::task::events::Events`, which journals each one and hands it to the
//! [`Progress`] the command passed in.

use std::sync::Arc;

use ocflow_core::task::events::EventSink;
use ocflow_model::approval::Answer;
use ocflow_model::event::{Event, Record};
use ocflow_model::llm::DEFAULT_PROFILE;
use ocflow_model::output::{paint, print_stdout, printable, printable_lines, say, styles};
use ocflow_model::status::StepState;

use crate::cli::live::Display;
use crate::cli::words::{seconds, started_label};

/// How a command shows its events: as JSON lines, or to people (through the live display when
/// one runs).
pub(crate) struct Progress {
    json: bool,
    live: Option<Arc<Display>>,
}

impl Progress {
    /// JSON lines with `--json`, else plain progress lines.
    pub(crate) fn plain(json: bool) -> Arc<Progress> {
        Arc::new(Progress { json, live: None })
    }

    /// Like [`Progress::plain`], through the live display when there is one.
    pub(crate) fn with_live(json: bool, live: Option<Arc<Display>>) -> Arc<Progress> {
        Arc::new(Progress { json, live })
    }
}

impl EventSink for Progress {
    fn show(&self, record: &Record) {
        if self.json {
            show_json(record);
        } else if self
            .live
            .as_ref()
            .is_some_and(|live| live.show(&record.event))
        {
            // Shown live.
        } else if let Some(line) = progress_line(&record.event) {
            say(&line);
        }
    }
}

/// Shows an event outside a flow (a warning before a command starts, the final error).
pub(crate) fn show(record: &Record, json: bool) {
    Progress { json, live: None }.show(record);
}

/// An event as one JSON line on stdout, as a headless caller reads it.
fn show_json(record: &Record) {
    if let Ok(line) = serde_json::to_string(record) {
        print_stdout(&format!("{line}\n"));
    }
}

/// An approval's answer as the progress line says it.
fn answer_word(answer: Answer) -> &'static str {
    match answer {
        Answer::Approved => "approved",
        Answer::Rejected => "rejected",
        Answer::Edited => "edited",
    }
}

/// The human progress line for an event.
fn progress_line(event: &Event) -> Option<String> {
    Some(match event {
        Event::FlowStarted {
            task_id, task_dir, ..
        } => format!("ocflow: task {task_id}, files in {}", task_dir.display()),
        Event::FlowPlanned { .. }
        | Event::ApprovalNeeded { .. }
        | Event::ApprovalAnswered { .. } => planning_line(event)?,
        Event::FlowResumed {
            task_id, pending, ..
        } => {
            format!(
                "ocflow: resuming {task_id}: {} step(s) to run",
                pending.len()
            )
        }
        Event::SnapshotTaken {
            files, duration_ms, ..
        } => {
            format!("ocflow: snapshot of the repository: {files} file(s) in {duration_ms} ms")
        }
        Event::StepStarted { .. }
        | Event::StepFinished { .. }
        | Event::StepRetrying { .. }
        | Event::RecoveryDecided { .. }
        | Event::RecoveryStopped { .. } => step_line(event)?,
        Event::FlowFinished {
            task_id,
            state,
            changed_files,
            summary,
            budget,
            ..
        } => {
            let budget = budget
                .map(|b| format!("; budget: {}", b.describe()))
                .unwrap_or_default();
            format!(
                "ocflow: task {task_id} {state}; {} file(s) changed; summary: {}{budget}",
                changed_files.len(),
                summary.display()
            )
        }
        Event::Budget { message, .. } => format!("ocflow: budget: {message}"),
        Event::FlowPaused { message, .. } => format!("ocflow: {}", printable(message)),
        Event::FlowInterrupted { task_id, .. } => {
            format!("ocflow: interrupted; state saved. Continue with `ocflow resume {task_id}`")
        }
        Event::Warning { message } => format!("ocflow: warning: {message}"),
        Event::HookBlocked {
            point,
            command,
            reason,
            step,
        } => format!(
            "ocflow: the {point} hook `{}`{} blocked it: {}",
            printable(command),
            step.as_ref()
                .map_or(String::new(), |s| format!(" (step {})", printable(s))),
            printable(reason)
        ),
        Event::Heartbeat {
            stage,
            running,
            elapsed_seconds,
            ..
        } if running.is_empty() => {
            format!("ocflow: still {stage} ({elapsed_seconds} s)")
        }
        Event::Heartbeat {
            stage,
            running,
            elapsed_seconds,
            ..
        } => {
            format!(
                "ocflow: still {stage}: {} ({elapsed_seconds} s)",
                running.join(", ")
            )
        }
        // Said by `main` itself, with the error's context chain.
        Event::Error { .. } => return None,
        Event::ChangesApplied { files, .. } => {
            format!("ocflow: applied {} file(s) to the repository", files.len())
        }
        Event::ChangesUndone { files, .. } => {
            format!("ocflow: put back {} file(s) in the repository", files.len())
        }
        // Said by the recovery itself, whatever the output mode.
        // `ocflow batch` says these its own way (`cli/batch/display.rs`).
        Event::ApplyRecovered { .. }
        | Event::BatchStarted { .. }
        | Event::BatchFinished { .. }
        | Event::EvalScored { .. }
        | Event::EvalFinished { .. } => {
            return None;
        }
    })
}

/// The line of the plan and of the questions asked about it.
fn planning_line(event: &Event) -> Option<String> {
    Some(match event {
        Event::FlowPlanned {
            steps,
            planner_answers,
            answer_form,
            deliverables,
        } => {
            let form = answer_form
                .as_ref()
                .map(|f| format!(", asked as {f}"))
                .unwrap_or_default();
            let planned = match planner_answers {
                0 => format!("ocflow: flow of {steps} step(s)"),
                n => {
                    format!("ocflow: planned {steps} step(s) ({n} answer(s) from the model{form})")
                }
            };
            // What done means, where the plan is shown: the model's words, escaped.
            match deliverables {
                Some(done) => format!("{planned}\nocflow: done when: {}", printable(done)),
                None => planned,
            }
        }
        Event::ApprovalNeeded {
            kind,
            step,
            approve,
            reject,
            ..
        } => {
            let of = step
                .as_ref()
                .map(|s| format!(" (step {})", printable(s)))
                .unwrap_or_default();
            format!(
                "ocflow: waiting for approval of {}{of}: `{approve}`, or `{reject}`",
                kind.what()
            )
        }
        Event::ApprovalAnswered {
            kind,
            answer,
            reason,
            ..
        } => {
            let why = reason
                .as_ref()
                .map(|r| format!(": {}", printable(r)))
                .unwrap_or_default();
            format!("ocflow: {kind} {}{why}", answer_word(*answer))
        }
        _ => return None,
    })
}

/// The line of a step's start, end, retry and recovery.
fn step_line(event: &Event) -> Option<String> {
    Some(match event {
        Event::StepStarted {
            step,
            operation,
            attempt,
            role,
            profile,
            ..
        } => {
            let on = match profile.as_deref() {
                Some(profile) if profile != DEFAULT_PROFILE => format!(" (profile {profile})"),
                _ => String::new(),
            };
            format!(
                "  > {}{on}",
                started_label(step, operation, *attempt, role.as_deref())
            )
        }
        Event::StepFinished {
            step,
            status,
            message,
            duration_ms,
            ..
        } => {
            let mark = if *status == StepState::Succeeded {
                paint("ok", styles::GOOD)
            } else {
                paint("!!", styles::BAD)
            };
            format!(
                "  {mark} {} {status} in {}: {}",
                paint(step, styles::NAME),
                seconds(*duration_ms),
                printable(message)
            )
        }
        Event::StepRetrying {
            step,
            retry,
            delay_ms,
        } => format!("  .. {step}: transient failure, retry {retry} in {delay_ms} ms"),
        Event::RecoveryDecided {
            step,
            strategy,
            reason,
            revision,
        } => {
            let revision = revision
                .map(|r| format!(" (flow revision {r})"))
                .unwrap_or_default();
            let reason = printable(reason);
            format!("  => recovery for {step}: {strategy}{revision}: {reason}")
        }
        Event::RecoveryStopped { step, reason } => {
            let reason = printable_lines(reason);
            format!("  xx recovery for {step} stopped: {reason}")
        }
        _ => return None,
    })
}
