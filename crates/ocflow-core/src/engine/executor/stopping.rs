//! A flow stopped before its end: by a signal (the running steps go back to pending, to run
//! again on resume) or by an error of the engine itself (the flow marked failed with the
//! reason, as far as the disk allows).

use std::collections::HashMap;

use super::view_slots::{UPPER_DIR, WORK_DIR};
use super::{Executor, FlowOutcome, Running};
use crate::task::events::Events;
use crate::task::state;
use crate::task::workspace::{self, TaskDir};
use ocflow_model::error::{Error, Result};
use ocflow_model::event::Event;
use ocflow_model::status::{FlowState, FlowStatus, StepState};

impl Executor {
    /// Ctrl-C or SIGTERM: the library kills its commands; every running step goes back to
    /// pending, to run again on resume.
    pub(super) fn interrupted_all(
        &mut self,
        in_flight: &HashMap<tokio::task::Id, Running>,
    ) -> Result<FlowOutcome> {
        if !in_flight.is_empty() {
            self.bridge.cancel_all();
        }
        // What a step's daemon left running goes too.
        crate::engine::orphans::end_all_steps(self.settings.sandbox.as_ref());
        let running: Vec<String> = in_flight.values().map(|r| r.step.id.clone()).collect();
        // What their LLM calls used so far still counts.
        for step in in_flight.values() {
            self.count_tokens(&step.step.id, step.tokens_before);
        }
        self.interrupted(&running)
    }

    /// A signal stopped a long phase (`Error::Interrupted` from staging, a capture,
    /// publishing, the diff): as `interrupted_all`, for every step still running — the one
    /// being recorded too. A step already recorded as succeeded stays so: `resume` rebuilds
    /// `final_output/` from the status.
    pub fn stopped_by_signal(&mut self) -> Result<FlowOutcome> {
        self.bridge.cancel_all();
        let running: Vec<String> = self
            .status
            .steps
            .iter()
            .filter(|s| s.status == StepState::Running)
            .map(|s| s.id.clone())
            .collect();
        self.status.finished_at = None;
        self.interrupted(&running)
    }

    /// Saves the state after an interrupt: the running step goes back to pending, to run again
    /// on resume.
    pub(super) fn interrupted(&mut self, running: &[String]) -> Result<FlowOutcome> {
        for id in running {
            if let Some(entry) = self.status.step_mut(id) {
                entry.requeue(Some("interrupted while running; it runs again on resume"))?;
            }
        }
        self.status.move_to(FlowState::Interrupted)?;
        self.save()?;
        self.events.emit(Event::FlowInterrupted {
            task_id: self.task.task_id.clone(),
            running: running.to_vec(),
        })?;
        Ok(FlowOutcome::Interrupted)
    }

    /// After an error that stopped the engine itself (disk full, permission denied): the
    /// running step and the flow are marked failed with the reason and a summary is written,
    /// as far as the disk still allows. Resume continues once the cause is fixed.
    pub fn abandon(&mut self, error: &Error) {
        // Steps running on other threads did nothing wrong: their commands are stopped and
        // they run again on resume.
        self.bridge.cancel_all();
        for step in self
            .status
            .steps
            .iter_mut()
            .filter(|s| s.status == StepState::Running)
        {
            // Running may always become pending; nothing to report on the way out.
            let _ = step.requeue(Some("stopped when ocflow failed; it runs again on resume"));
            // What its command wrote is of no use to the attempt on resume, and on a full disk
            // it is what keeps the status below from being saved.
            let dir = self.task.step_dir(&step.id);
            for written in [dir.join(UPPER_DIR), dir.join(WORK_DIR)] {
                if written.exists() {
                    ocflow_sandbox::exec::remove_overlay_dirs(&written);
                }
            }
        }
        self.status.message = Some(if error.is_no_space() {
            format!(
                "ocflow stopped: {} ({error}); free space there, then run `ocflow resume {}`",
                workspace::NO_SPACE,
                self.task.task_id
            )
        } else {
            format!("ocflow stopped: {error}")
        });
        // Any state may become failed: nothing to refuse on the way out.
        let _ = self.status.move_to(FlowState::Failed);
        let _ = self.save();
        if let Ok(summary) =
            crate::engine::summary::from_journal(&self.task, &self.status, &self.flow)
        {
            let _ = workspace::write_atomic(
                &self.task.file(workspace::SUMMARY_FILE),
                summary.as_bytes(),
            );
        }
    }
}

/// A flow interrupted while the model planned it (`engine::planning`): saved `interrupted`
/// with no steps; `resume` plans it again.
pub(crate) fn interrupt_planning(
    task: &TaskDir,
    mut status: FlowStatus,
    events: &mut Events,
) -> Result<()> {
    status.move_to(FlowState::Interrupted)?;
    status.message = Some(format!(
        "interrupted while planning; `ocflow resume {}` plans it again",
        task.task_id
    ));
    state::save_status(task, &mut status)?;
    events.emit(Event::FlowInterrupted {
        task_id: task.task_id.clone(),
        running: Vec::new(),
    })
}
