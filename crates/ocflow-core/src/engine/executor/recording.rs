//! Recording how a step's call ended: a command step's view captured, the outcome settled, the
//! status and the journal updated, the outputs published to `final_output/`; a failure recorded
//! with its reason (a full disk drops what the step wrote).

use super::settling::{self, Settled};
use super::{Ended, Executor, Running, missing_step};
use crate::engine::orphans;
use crate::task::outputs;
use crate::task::workspace;
use ocflow_model::error::{Error, Result};
use ocflow_model::event::Event;
use ocflow_model::flow::Step;
use ocflow_model::status::{self, StepError, StepState};
use ocflow_model::step_result::{CallStatus, StepResult};
use std::time::Instant;

impl Executor {
    /// Records how a step's call ended: status, journal, `final_output/`. A file step comes
    /// settled from its thread (its outputs and `result.json` saved); a command step's view is
    /// captured here first. Returns whether the step succeeded.
    pub(super) fn record(&mut self, done: &Running, ended: Ended) -> Result<bool> {
        let step = &done.step;
        // A result kept from an earlier failed attempt no longer speaks for the step.
        self.failed_results.remove(&step.id);
        // Used up now, success or not: a view labels what it captured with it, and a label
        // must never name two different contents.
        let sequence = self.status.next_sequence();
        self.status.last_sequence = sequence;
        let mut out_of_memory = false;
        let settled = match ended {
            Ended::Settled(settled) => settled?,
            Ended::Called(outcome) => {
                out_of_memory = orphans::end_step(
                    &self.task,
                    self.settings.sandbox.as_ref(),
                    &step.id,
                    done.view.is_some(),
                );
                // A command that filled the workspace's disk: nothing it wrote is kept (that
                // frees the disk, so the failure can be saved), and the step fails saying so.
                let captured = if workspace::disk_full(&self.task.root) {
                    Err(None)
                } else {
                    self.capture(step, sequence, done.view).map_err(Some)
                };
                let settled = captured.and_then(|outputs| {
                    settling::settle(&self.task, step, outcome, outputs).map_err(Some)
                });
                match settled {
                    Ok(settled) => settled,
                    Err(Some(error)) if !error.is_no_space() => return Err(error),
                    Err(cause) => {
                        self.drop_command_writes(step, done.view)?;
                        let error = self.no_space_error(cause.as_ref());
                        return self
                            .finish_failed(step, done.attempt, done.started, error)
                            .map(|()| false);
                    }
                }
            }
        };
        let result = match settled {
            Settled::Failed(error) => {
                return self
                    .finish_failed(step, done.attempt, done.started, error)
                    .map(|()| false);
            }
            Settled::Result(result)
                if result.status == CallStatus::Failure && Self::stopped_by_budget(&result) =>
            {
                // The budget refused its call: the step did nothing wrong, and runs again
                // (all of it) on resume.
                return self.requeue_for_budget(step).map(|()| false);
            }
            Settled::Result(result) if result.status == CallStatus::Failure => {
                let mut text = if result.message.is_empty() {
                    "the step failed without a message".to_string()
                } else {
                    result.message.clone()
                };
                if out_of_memory && !text.contains("[sandbox] memory_mb") {
                    let limit = self.settings.sandbox.as_ref().map_or(0, |p| p.memory_mb);
                    text.push_str(&format!(
                        "; the kernel killed a process of the step for its memory: the step's \
                         processes may use {limit} MiB together, raise `[sandbox] memory_mb` if \
                         it needs more"
                    ));
                }
                // A model that refused the call is no fault of the step: it runs again on a
                // plain resume, once the user fixed the key, the URL or the model.
                let refused = result
                    .llm_error
                    .as_ref()
                    .and_then(|failure| failure.llm_error())
                    .is_some_and(|error| error.model_unusable());
                let kind = if refused {
                    status::LLM_UNUSABLE_KIND
                } else {
                    "failure"
                };
                self.failed_results.insert(step.id.clone(), *result);
                return self
                    .finish_failed(step, done.attempt, done.started, StepError::new(kind, text))
                    .map(|()| false);
            }
            Settled::Result(result) => {
                // The user's hooks after a step that succeeded: one that blocks fails it.
                if let Err(blocked) = self.hooks_after(step, &result.message, &result.output_files)
                {
                    let error = StepError::new("hook", blocked.to_string());
                    return self
                        .finish_failed(step, done.attempt, done.started, error)
                        .map(|()| false);
                }
                *result
            }
        };
        let duration_ms = done.started.elapsed().as_millis() as u64;
        let StepResult {
            message,
            output_files,
            deleted_files,
            ..
        } = result;
        let entry = self
            .status
            .step_mut(&step.id)
            .ok_or_else(|| missing_step(&self.task, &step.id))?;
        let outputs = (output_files.clone(), deleted_files.clone());
        entry.succeed(
            status::now(),
            duration_ms,
            sequence,
            outputs,
            message.clone(),
        )?;
        let tokens = entry.tokens;
        // Journaled (the result's and the outputs' data are on disk already); the file follows:
        // `load_status` replays it, and `resume` rebuilds `final_output/` should a crash come
        // before it is published.
        self.events.emit(Event::StepFinished {
            step: step.id.clone(),
            operation: step.operation.clone(),
            status: StepState::Succeeded,
            attempt: done.attempt,
            duration_ms,
            message,
            output_files: output_files.clone(),
            deleted_files: deleted_files.clone(),
            sequence: Some(sequence),
            tokens: Some(tokens),
        })?;
        outputs::publish(&self.task, &step.id, &output_files, &deleted_files)?;
        self.save_when_due()?;
        Ok(true)
    }

    /// The error of a step stopped by a full disk: the workspace's file system, what failed
    /// (`cause`, when it was an error rather than a full disk found after a command), and how
    /// to go on.
    pub(super) fn no_space_error(&self, cause: Option<&Error>) -> StepError {
        let what = cause.map_or_else(
            || "the step's command filled it".to_string(),
            |error| format!("{error}"),
        );
        StepError::new(
            status::NO_SPACE_KIND,
            format!(
                "{} ({}): {what}; what the step wrote was dropped. Free space there, then run \
                 `ocflow resume {}`",
                workspace::NO_SPACE,
                self.task.root.display(),
                self.task.task_id
            ),
        )
    }

    pub(super) fn finish_failed(
        &mut self,
        step: &Step,
        attempt: u32,
        started: Instant,
        error: StepError,
    ) -> Result<()> {
        let duration_ms = started.elapsed().as_millis() as u64;
        let message = error.message.clone();
        let entry = self
            .status
            .step_mut(&step.id)
            .ok_or_else(|| missing_step(&self.task, &step.id))?;
        entry.fail(status::now(), duration_ms, error)?;
        self.save()?;
        self.events.emit(Event::StepFinished {
            step: step.id.clone(),
            operation: step.operation.clone(),
            status: StepState::Failed,
            attempt,
            duration_ms,
            message,
            output_files: Vec::new(),
            deleted_files: Vec::new(),
            sequence: None,
            tokens: None,
        })
    }
}
