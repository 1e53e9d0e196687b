//! Finding a task: a task directory given as a path, a task id (or a unique beginning of one)
//! in the workspace, or the most recently updated flow.

use std::fs;
use std::path::PathBuf;

use crate::cli::config::Config;
use crate::cli::progress;
use ocflow_core::task::state;
use ocflow_core::task::workspace::{self, TaskDir};
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::event::{Event, Record};
use ocflow_model::status::{FlowState, FlowStatus, now};

/// The task `arg` names, or the most recently updated flow (only unfinished ones when
/// `unfinished`).
pub(crate) fn find_task(config: &Config, arg: Option<&str>, unfinished: bool) -> Result<TaskDir> {
    if let Some(arg) = arg {
        let as_path = PathBuf::from(arg);
        if as_path.join(workspace::STATUS_FILE).is_file() {
            let root = as_path
                .canonicalize()
                .io_context(|| format!("resolving {arg}"))?;
            return TaskDir::at(root)
                .ok_or_else(|| Error::Usage(format!("{arg} is not a task directory")));
        }
        let task = TaskDir::new(&config.workspace, arg);
        let exists = task.file(workspace::STATUS_FILE).is_file()
            || task.file(workspace::FLOW_FILE).is_file();
        if workspace::is_valid_task_id(arg) && exists {
            return Ok(task);
        }
        // Any unique beginning of a task id names it.
        if workspace::is_valid_task_id(arg) {
            let mut matching: Vec<TaskDir> = task_dirs(config)
                .unwrap_or_default()
                .into_iter()
                .map(|(task, _)| task)
                .filter(|task| task.task_id.starts_with(arg))
                .collect();
            match matching.len() {
                1 => return Ok(matching.remove(0)),
                0 => {}
                _ => {
                    let mut ids: Vec<&str> = matching.iter().map(|t| t.task_id.as_str()).collect();
                    ids.sort_unstable();
                    return Err(Error::Usage(format!(
                        "{arg:?} begins several task ids: {}; give more of it",
                        ids.join(", ")
                    )));
                }
            }
        }
        return Err(Error::Usage(format!(
            "no task {arg:?} in the workspace {}; give a task id from there, a task directory, \
             or --workspace",
            config.workspace.display()
        )));
    }
    let mut best: Option<(String, TaskDir)> = None;
    for (task, flow_status) in task_dirs(config)? {
        if unfinished && flow_status.state == FlowState::Succeeded {
            continue;
        }
        if best
            .as_ref()
            .is_none_or(|(time, _)| flow_status.updated_at > *time)
        {
            best = Some((flow_status.updated_at, task));
        }
    }
    best.map(|(_, task)| task).ok_or_else(|| {
        Error::Usage(format!(
            "no {}flow in {}; name one with a task id",
            if unfinished { "unfinished " } else { "" },
            config.workspace.display()
        ))
    })
}

/// Makes the operations `task`'s flow used known, plugins included, from its saved catalogue,
/// without loading them. A catalogue that does not read is said and passed over: the task is
/// then read as it was before tasks kept one (an unknown plugin step counts as a file step).
/// Returns the operations only the saved catalogue knew.
pub(crate) fn know_operations_of(config: &Config, task: &TaskDir) -> Vec<String> {
    state::adopt_operations(task).unwrap_or_else(|err| {
        warn(config, format!("{err:#}"));
        Vec::new()
    })
}

/// Says a warning to people (stderr) and, with `--json`, to headless callers (an event).
pub(crate) fn warn(config: &Config, message: String) {
    let event = Event::Warning { message };
    progress::show(&Record::now(now(), event), config.json);
}

/// Every task of the workspace whose status can be read, with it.
pub(crate) fn task_dirs(config: &Config) -> Result<Vec<(TaskDir, FlowStatus)>> {
    let entries = fs::read_dir(&config.workspace).map_err(|_| {
        Error::Usage(format!(
            "no flows in {}: start one with `ocflow run`, or point --workspace at the right place",
            config.workspace.display()
        ))
    })?;
    Ok(entries
        .flatten()
        .filter_map(|entry| TaskDir::at(entry.path()))
        .filter_map(|task| state::load_status(&task).ok().map(|status| (task, status)))
        .collect())
}

/// The status as people and callers are shown it: a flow saved as `running` whose ocflow is
/// gone (nobody holds the task's lock) is interrupted, and `resume` continues it. Returns the
/// command that does, for such a flow. The saved file is not rewritten: reading must never race
/// a `resume` that is taking the task over.
pub(crate) fn as_shown(task: &TaskDir, mut status: FlowStatus) -> (FlowStatus, Option<String>) {
    if status.state != FlowState::Running || task.owner_alive() {
        return (status, None);
    }
    // Running may always become interrupted.
    let _ = status.move_to(FlowState::Interrupted);
    (status, Some(format!("ocflow resume {}", task.task_id)))
}
