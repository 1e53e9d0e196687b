//! `ocflow wait`: waits for a flow to end — one started with `run --detach`, or any other —
//! and exits with its exit code, or with 124 when `--timeout` passes first (the flow goes on).
//! File-system notifications on the task directory wake it; a slow periodic look covers file
//! systems that deliver none.

use std::time::{Duration, Instant};

use crate::cli::args::WaitArgs;
use crate::cli::config::Config;
use crate::cli::detach::{EXIT_CODE_FILE, PID_FILE};
use crate::cli::follow::watch_files;
use crate::cli::tasks::find_task;
use ocflow_core::task::state;
use ocflow_core::task::workspace::{self, STATUS_FILE, TaskDir};
use ocflow_model::error::{Error, Result};
use ocflow_model::exit::ExitCode;
use ocflow_model::output::say;
use ocflow_model::status::FlowState;

/// Longest wait between two looks when no notification comes.
const POLL: Duration = Duration::from_secs(1);

pub(crate) fn wait(config: &Config, args: WaitArgs) -> Result<ExitCode> {
    let deadline = match args.timeout {
        Some(seconds) if seconds.is_finite() && seconds >= 0.0 => {
            Some(Instant::now() + Duration::from_secs_f64(seconds))
        }
        Some(seconds) => {
            return Err(Error::Usage(format!(
                "--timeout {seconds}: give a number of seconds, 0 or more"
            )));
        }
        None => None,
    };
    let task = match args.task.as_deref() {
        // A detached run that has not saved its status yet is waited for all the same.
        Some(id)
            if workspace::is_valid_task_id(id)
                && TaskDir::new(&config.workspace, id).file(PID_FILE).is_file() =>
        {
            TaskDir::new(&config.workspace, id)
        }
        arg => find_task(config, arg, false)?,
    };
    let (_watcher, changes) = watch_files(&task.root, &[STATUS_FILE, EXIT_CODE_FILE]);
    loop {
        if let Some(code) = ended(&task) {
            say(&format!(
                "ocflow: task {} ended (exit {}); `ocflow status {0}` shows it",
                task.task_id,
                code.code()
            ));
            return Ok(code);
        }
        let mut pause = POLL;
        if let Some(deadline) = deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                say(&format!(
                    "ocflow: task {} is still running; it goes on: `ocflow wait {0}` again, or \
                     `ocflow status {0}`",
                    task.task_id
                ));
                return Ok(ExitCode::TimedOut);
            }
            pause = pause.min(left);
        }
        if changes.recv_timeout(pause).is_ok() {
            while changes.try_recv().is_ok() {}
        }
    }
}

/// The flow's exit code once it has ended: the one a detached run left, else the one its saved
/// state implies; `None` while it runs (or a detached run is still starting).
fn ended(task: &TaskDir) -> Option<ExitCode> {
    if let Some(code) = std::fs::read_to_string(task.file(EXIT_CODE_FILE))
        .ok()
        .and_then(|text| text.trim().parse::<u8>().ok())
    {
        return Some(ExitCode::from_code(code));
    }
    // A detached run releases the task's lock a moment before it writes its code.
    if task.owner_alive() || detached_run_alive(task) {
        return None;
    }
    match state::load_status(task) {
        Ok(status) => Some(match status.state {
            FlowState::Succeeded => ExitCode::Success,
            FlowState::Failed | FlowState::NoChange => ExitCode::Failure,
            FlowState::Paused => ExitCode::Paused,
            FlowState::Waiting => ExitCode::Paused,
            // Saved as running, and nobody runs it: it was killed.
            FlowState::Interrupted | FlowState::Running => ExitCode::Interrupted,
        }),
        // Died before it saved anything.
        Err(_) => Some(ExitCode::Failure),
    }
}

/// Whether the process `run --detach` started for `task` is still alive (and no zombie).
fn detached_run_alive(task: &TaskDir) -> bool {
    let Some(pid) = std::fs::read_to_string(task.file(PID_FILE))
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok())
    else {
        return false;
    };
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // The state follows the command name's closing parenthesis.
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X')
    })
}
