//! `ocflow status --follow`: shows a flow's status again each time `flow_status.json` is
//! replaced, until the flow stops. File-system notifications (notify) wake it; a periodic
//! look covers file systems that do not deliver them.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};

use crate::commands::{EXIT_FLOW_FAILED, EXIT_OK, print_stdout};
use crate::error::{Error, Result};
use crate::status::{FlowState, FlowStatus};
use crate::workspace::TaskDir;

/// Longest wait between two looks when no notification comes.
const POLL: Duration = Duration::from_secs(2);

pub fn follow(path: &Path, json: bool) -> Result<u8> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let (sender, changes) = mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.is_ok() {
            let _ = sender.send(());
        }
    })
    .map_err(|err| Error::Usage(format!("cannot watch {}: {err}", dir.display())))?;
    watcher
        .watch(dir, RecursiveMode::NonRecursive)
        .map_err(|err| Error::Usage(format!("cannot watch {}: {err}", dir.display())))?;
    let clear = !json && std::io::stdout().is_terminal();
    let mut last = String::new();
    loop {
        let status = FlowStatus::load(path)?;
        let text = if json { serde_json::to_string(&status).unwrap_or_default() + "\n" } else { status.render_table() };
        if text != last {
            print_stdout(&if clear { format!("\x1b[2J\x1b[H{text}") } else if json || last.is_empty() { text.clone() } else { format!("\n{text}") });
            last = text;
        }
        if status.state != FlowState::Running {
            return Ok(EXIT_OK);
        }
        // "running" with nobody holding the task's lock: the ocflow that ran it is gone.
        if let Some(task) = TaskDir::at(dir.to_path_buf())
            && task.lock().is_ok()
        {
            crate::events::say(&format!("ocflow: task {} is not running (its ocflow stopped); continue it with `ocflow resume {0}`", task.task_id));
            return Ok(EXIT_FLOW_FAILED);
        }
        // Any event in the task directory may be the status being replaced; coalesce bursts.
        let _ = changes.recv_timeout(POLL);
        while changes.try_recv().is_ok() {}
    }
}
