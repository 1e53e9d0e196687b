//! The hand-off to the executor: the repository copied into the task's snapshot (once: a
//! resumed flow keeps the copy it started from), then the executor made with everything the
//! flow needs.

use std::fs;
use std::sync::Arc;

use super::{Executor, Settings};
use crate::engine::bridge::Bridge;
use crate::engine::signals::Interrupt;
use crate::flow::path_rules::canonical_or_absolute;
use crate::task::events::Events;
use crate::task::workspace::TaskDir;
use crate::task::{snapshot, state};
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::event::Event;
use ocflow_model::flow::Flow;
use ocflow_model::status::{FlowState, FlowStatus, now};

impl Executor {
    /// The executor for `flow`, its repository (`status.repo`) copied into the task's snapshot
    /// first when the task has none. A copy that fails is recorded in the status (the flow
    /// failed, why, and how to go on; or interrupted by a signal) before it is returned.
    pub fn from_snapshot(
        task: TaskDir,
        flow: Flow,
        mut status: FlowStatus,
        mut events: Events,
        bridge: Arc<Bridge>,
        settings: Settings,
        interrupt: Arc<Interrupt>,
    ) -> Result<Executor> {
        if !task.snapshot().is_dir() {
            take_snapshot(&task, &mut events, &mut status)?;
        }
        Ok(Executor::new(
            task, flow, status, events, bridge, settings, interrupt,
        ))
    }
}

/// Copies the repository into the task's snapshot and says so.
fn take_snapshot(task: &TaskDir, events: &mut Events, status: &mut FlowStatus) -> Result<()> {
    let skip = [canonical_or_absolute(&task.workspace())];
    let stats = match snapshot::take_snapshot(&status.repo.clone(), task, &skip) {
        Ok(stats) => stats,
        // A signal while copying: the partial copy is gone, and `resume` takes it again.
        Err(Error::Interrupted) => {
            status.move_to(FlowState::Interrupted)?;
            state::save_status(task, status)?;
            return Err(Error::Interrupted);
        }
        Err(error) => {
            status.move_to(FlowState::Failed)?;
            status.finished_at = Some(now());
            status.message = Some(format!(
                "the repository could not be copied into the task (the partial copy was \
                 removed): {error:#}; free space in {}, then run `ocflow resume {}`",
                task.root.display(),
                task.task_id
            ));
            state::save_status(task, status)?;
            return Err(error);
        }
    };
    fs::create_dir_all(task.final_output())
        .io_context(|| format!("creating {}", task.final_output().display()))?;
    events.emit(Event::SnapshotTaken {
        files: stats.files,
        bytes: stats.bytes,
        duration_ms: stats.duration_ms,
    })
}
