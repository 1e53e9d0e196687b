//! `ocflow status --follow`: shows a flow's status again each time `flow_status.json` is
//! replaced, until the flow stops. File-system notifications (notify) wake it; a periodic
//! look covers file systems that deliver none, and notices a flow whose ocflow has died.

use std::io::IsTerminal;
use std::sync::mpsc;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};

use crate::cli::status_table;
use ocflow_core::task::state;
use ocflow_core::task::workspace::{JOURNAL_FILE, STATUS_FILE, TaskDir};
use ocflow_model::error::Result;
use ocflow_model::exit::ExitCode;
use ocflow_model::output::{print_stdout, say};
use ocflow_model::status::FlowState;

/// Longest wait between two looks when no notification comes.
const POLL: Duration = Duration::from_secs(2);

/// Follows until the flow stops; the exit code is the flow's (0 succeeded, 1 failed,
/// 130 interrupted).
pub(crate) fn follow(task: &TaskDir, json: bool) -> Result<ExitCode> {
    let dir = task.root.clone();
    // Only the status being replaced, or the journal growing (steps started and succeeded are
    // journaled before the status is rewritten), matters: reading them must not wake us.
    let (_watcher, changes) = watch_files(&dir, &[STATUS_FILE, JOURNAL_FILE]);
    let clear = !json && std::io::stdout().is_terminal();
    let mut last = String::new();
    loop {
        let status = state::load_status(task)?;
        let text = if json {
            serde_json::to_string(&status).unwrap_or_default() + "\n"
        } else {
            status_table::render(&status)
        };
        if text != last {
            print_stdout(&if clear {
                format!("\x1b[2J\x1b[H{text}")
            } else if json || last.is_empty() {
                text.clone()
            } else {
                format!("\n{text}")
            });
            last = text;
        }
        match status.state {
            FlowState::Succeeded => return Ok(ExitCode::Success),
            FlowState::Failed | FlowState::NoChange => return Ok(ExitCode::Failure),
            FlowState::Interrupted => return Ok(ExitCode::Interrupted),
            FlowState::Paused => return Ok(ExitCode::Paused),
            FlowState::Waiting => return Ok(ExitCode::Paused),
            FlowState::Running => {}
        }
        if changes.recv_timeout(POLL).is_ok() {
            while changes.try_recv().is_ok() {}
            continue;
        }
        // Quiet for a while and "running": is anybody holding the task's lock?
        if !task.owner_alive() {
            say(&format!(
                "ocflow: task {} is not running (its ocflow stopped); continue it with `ocflow \
                 resume {0}`",
                task.task_id
            ));
            return Ok(ExitCode::Failure);
        }
    }
}

/// Watches `dir` for files named `names` being created or changed: a message on the receiver
/// for each. Without notifications (an inotify limit, say) there is no watcher, and the caller
/// still works by looking every so often. Keep the watcher alive while waiting.
pub(crate) fn watch_files(
    dir: &std::path::Path,
    names: &'static [&'static str],
) -> (Option<notify::RecommendedWatcher>, mpsc::Receiver<()>) {
    let (sender, changes) = mpsc::channel();
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && matches!(event.kind, EventKind::Create(_) | EventKind::Modify(_))
            && event.paths.iter().any(|p| {
                p.file_name()
                    .is_some_and(|n| names.iter().any(|name| n == *name))
            })
        {
            let _ = sender.send(());
        }
    });
    let watcher = watcher
        .ok()
        .and_then(|mut w| w.watch(dir, RecursiveMode::NonRecursive).ok().map(|()| w));
    (watcher, changes)
}
