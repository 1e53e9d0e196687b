//! Events: everything that happens in a flow, as typed records. Each one is appended to the
//! task's journal and shown to the caller, as a JSON line on stdout with `--json` or as a
//! progress line on stderr otherwise. `Events` is the one owner of both outputs.

use std::io::Write;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::task::journal::Journal;
use crate::model::status::{FlowState, StepState};

/// Something that happened, as written to `journal.jsonl` and to `--json` output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A new flow begins.
    FlowStarted {
        task_id: String,
        task: String,
        /// The task directory holding every file of this flow.
        task_dir: PathBuf,
        repo: PathBuf,
        /// The operation library and the Python running it.
        library: String,
    },
    /// The flow is known and validated: given as a file, or planned by the LLM.
    FlowPlanned {
        steps: usize,
        /// How many answers the planner needed (0 for a given flow).
        planner_answers: usize,
    },
    /// `ocflow resume` picks a flow up again.
    FlowResumed {
        task_id: String,
        task_dir: PathBuf,
        /// Steps still to run.
        pending: Vec<String>,
    },
    /// The repository was copied into the task's snapshot.
    SnapshotTaken {
        files: u64,
        bytes: u64,
        duration_ms: u64,
    },
    /// A step begins an attempt.
    StepStarted {
        step: String,
        operation: String,
        attempt: u32,
    },
    /// A step's attempt ended.
    StepFinished {
        step: String,
        operation: String,
        status: StepState,
        attempt: u32,
        duration_ms: u64,
        message: String,
        /// Repository-relative files the step created or changed.
        output_files: Vec<String>,
        /// Repository-relative files the step deleted.
        deleted_files: Vec<String>,
    },
    /// A transient failure is retried automatically after `delay_ms`.
    StepRetrying {
        step: String,
        retry: u32,
        delay_ms: u64,
    },
    /// The LLM chose a recovery strategy for a failed step.
    RecoveryDecided {
        step: String,
        strategy: String,
        reason: String,
        /// The flow revision it produced, if it changed the flow.
        revision: Option<u32>,
    },
    /// Recovery could not go on (a limit, the stuck rule, no valid answer); the flow fails.
    RecoveryStopped { step: String, reason: String },
    /// The flow ended (succeeded or failed).
    FlowFinished {
        task_id: String,
        state: FlowState,
        /// Every repository file the flow changed.
        changed_files: Vec<String>,
        summary: PathBuf,
    },
    /// Ctrl-C or SIGTERM stopped the flow; `ocflow resume` continues it.
    FlowInterrupted {
        task_id: String,
        running: Vec<String>,
    },
    /// `ocflow apply` wrote the flow's changes into the repository.
    ChangesApplied { task_id: String, files: Vec<String> },
}

/// One journal line: when, and what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// RFC 3339 time the event was recorded.
    pub ts: String,
    #[serde(flatten)]
    pub event: Event,
}

/// Where events go: the journal, and the caller's stdout (JSON lines) or stderr (progress).
pub struct Events {
    journal: Journal,
    json: bool,
}

impl Events {
    pub fn new(journal: Journal, json: bool) -> Events {
        Events { journal, json }
    }

    /// Records an event in the journal, then shows it.
    pub fn emit(&mut self, event: Event) -> Result<()> {
        let record = Record {
            ts: crate::model::status::now(),
            event,
        };
        self.journal.append(&record)?;
        show(&record, self.json);
        Ok(())
    }
}

/// Shows an event to the caller without journaling it (for commands outside a flow).
pub fn show(record: &Record, json: bool) {
    if json {
        if let Ok(line) = serde_json::to_string(record) {
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{line}");
            let _ = stdout.flush();
        }
    } else if let Some(line) = progress_line(&record.event) {
        say(&line);
    }
}

/// Writes a line for people to stderr. A closed stderr (`ocflow … 2>&1 | head -1`) must not
/// stop a flow, so write errors are ignored.
pub fn say(line: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{line}");
}

/// The human progress line for an event.
fn progress_line(event: &Event) -> Option<String> {
    Some(match event {
        Event::FlowStarted {
            task_id, task_dir, ..
        } => format!("ocflow: task {task_id}, files in {}", task_dir.display()),
        Event::FlowPlanned {
            steps,
            planner_answers: 0,
        } => format!("ocflow: flow of {steps} step(s)"),
        Event::FlowPlanned {
            steps,
            planner_answers,
        } => {
            format!("ocflow: planned {steps} step(s) ({planner_answers} answer(s) from the model)")
        }
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
        Event::StepStarted {
            step,
            operation,
            attempt,
        } => {
            let again = if *attempt > 1 {
                format!(" (attempt {attempt})")
            } else {
                String::new()
            };
            format!("  > {step} {operation}{again}")
        }
        Event::StepFinished {
            step,
            status,
            message,
            duration_ms,
            ..
        } => {
            format!(
                "  {} {step} {status} in {duration_ms} ms: {message}",
                if *status == StepState::Succeeded {
                    "ok"
                } else {
                    "!!"
                }
            )
        }
        Event::FlowFinished {
            task_id,
            state,
            changed_files,
            summary,
        } => format!(
            "ocflow: task {task_id} {state}; {} file(s) changed; summary: {}",
            changed_files.len(),
            summary.display()
        ),
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
            format!("  => recovery for {step}: {strategy}{revision}: {reason}")
        }
        Event::RecoveryStopped { step, reason } => {
            format!("  xx recovery for {step} stopped: {reason}")
        }
        Event::FlowInterrupted { task_id, .. } => {
            format!("ocflow: interrupted; state saved. Continue with `ocflow resume {task_id}`")
        }
        Event::ChangesApplied { files, .. } => {
            format!("ocflow: applied {} file(s) to the repository", files.len())
        }
    })
}
