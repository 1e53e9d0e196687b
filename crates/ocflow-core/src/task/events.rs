//! Events: everything that happens in a flow, as typed records. Each one is appended to the
//! task's journal and shown to the caller, as a JSON line on stdout with `--json` or as a
//! progress line on stderr otherwise. `Events` is the one owner of both outputs.

use crate::task::journal::Journal;
use ocflow_model::error::Result;
use ocflow_model::event::{Event, Record};
use ocflow_model::llm::DEFAULT_PROFILE;
use ocflow_model::output::{paint, print_stdout, say, styles};
use ocflow_model::status::StepState;

/// How often a running flow says it is still working, at least.
pub(crate) const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(15);

/// Where events go: the journal, and the caller's stdout (JSON lines) or stderr (progress).
pub struct Events {
    journal: Journal,
    json: bool,
    started: std::time::Instant,
}

impl Events {
    pub fn new(journal: Journal, json: bool) -> Events {
        Events {
            journal,
            json,
            started: std::time::Instant::now(),
        }
    }

    /// Bytes this process appended to the journal so far.
    pub(crate) fn journal_bytes(&self) -> u64 {
        self.journal.appended()
    }

    /// Whether the caller reads JSON lines (`--json`).
    pub fn json(&self) -> bool {
        self.json
    }

    /// What heartbeats need: where to show them, and since when the flow runs.
    pub fn pulse(&self) -> Pulse {
        Pulse {
            json: self.json,
            started: self.started,
        }
    }

    /// Records an event in the journal, then shows it.
    pub fn emit(&mut self, event: Event) -> Result<()> {
        let record = Record::now(ocflow_model::status::now(), event);
        self.journal.append(&record)?;
        show(&record, self.json);
        Ok(())
    }
}

/// Says that a flow is still working, without journaling it: heartbeats are for the caller.
#[derive(Debug, Clone, Copy)]
pub struct Pulse {
    json: bool,
    started: std::time::Instant,
}

impl Pulse {
    pub fn beat(&self, stage: &str, running: Vec<String>, tokens: ocflow_model::llm::Usage) {
        let event = Event::Heartbeat {
            stage: stage.into(),
            running,
            elapsed_seconds: self.started.elapsed().as_secs(),
            tokens,
        };
        show(&Record::now(ocflow_model::status::now(), event), self.json);
    }
}

/// Awaits `future`, calling `beat` every `HEARTBEAT` until it is done: an LLM call or a step may
/// take minutes, and a caller must not take the silence for a hang.
pub async fn beating<T>(future: impl std::future::Future<Output = T>, mut beat: impl FnMut()) -> T {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT);
    tokio::pin!(future);
    loop {
        tokio::select! {
            value = &mut future => return value,
            _ = ticks.tick() => beat(),
        }
    }
}

/// Shows an event to the caller without journaling it (for commands outside a flow).
pub fn show(record: &Record, json: bool) {
    if json {
        if let Ok(line) = serde_json::to_string(record) {
            print_stdout(&format!("{line}\n"));
        }
    } else if ocflow_model::output::live().is_some_and(|live| live.show(&record.event)) {
        // Shown live.
    } else if let Some(line) = progress_line(&record.event) {
        say(&line);
    }
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
            ..
        } => format!("ocflow: flow of {steps} step(s)"),
        Event::FlowPlanned {
            steps,
            planner_answers,
            answer_form,
        } => {
            let form = answer_form
                .as_ref()
                .map(|f| format!(", asked as {f}"))
                .unwrap_or_default();
            format!(
                "ocflow: planned {steps} step(s) ({planner_answers} answer(s) from the model{form})"
            )
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
                ocflow_model::output::printable(message)
            )
        }
        Event::FlowFinished {
            task_id,
            state,
            changed_files,
            summary,
            ..
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
            let reason = ocflow_model::output::printable(reason);
            format!("  => recovery for {step}: {strategy}{revision}: {reason}")
        }
        Event::RecoveryStopped { step, reason } => {
            let reason = ocflow_model::output::printable_lines(reason);
            format!("  xx recovery for {step} stopped: {reason}")
        }
        Event::FlowInterrupted { task_id, .. } => {
            format!("ocflow: interrupted; state saved. Continue with `ocflow resume {task_id}`")
        }
        Event::Warning { message } => format!("ocflow: warning: {message}"),
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
        Event::ApplyRecovered { .. } => return None,
    })
}

/// A duration for people: `850 ms`, `12.4 s`, `3 min 5 s`.
pub fn seconds(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms} ms"),
        1000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {} s", ms / 60_000, ms % 60_000 / 1000),
    }
}

/// What a step's start says: `fix modify_code as coder (attempt 2)`.
pub fn started_label(step: &str, operation: &str, attempt: u32, role: Option<&str>) -> String {
    let by = role.map(|r| format!(" as {r}")).unwrap_or_default();
    let again = if attempt > 1 {
        format!(" (attempt {attempt})")
    } else {
        String::new()
    };
    format!("{step} {operation}{by}{again}")
}
