//! Runs a flow's executor to an exit code: its outcome, the apply it was asked for (after a
//! person's yes with `--approve apply`), the error that ended it, and the run's end at the
//! terminal. `run`, `resume` and `approve` end here.

use crate::cli::{apply, ending, gates};
use ocflow_core::engine::executor::{Executor, FlowOutcome};
use ocflow_core::task::review;
use ocflow_core::task::state;
use ocflow_model::error::{Error, Result};
use ocflow_model::event::Event;
use ocflow_model::exit::ExitCode;

/// Runs the executor and turns its outcome into an exit code, applying on success if asked.
pub(crate) async fn execute(
    mut executor: Executor,
    apply_after: bool,
    approve_apply: bool,
    json: bool,
) -> Result<ExitCode> {
    let outcome = match executor.run().await {
        Ok(outcome) => outcome,
        // A signal found a long phase (publishing, a capture, the diff): saved as interrupted.
        Err(Error::Interrupted) => executor.stopped_by_signal()?,
        Err(error) => {
            executor.abandon(&error);
            return Err(error.in_task(&executor.task.root));
        }
    };
    let code = finish(&mut executor, outcome, apply_after, approve_apply, json).await?;
    // A model that could not be used ended the flow: the caller learns it as the command's
    // error, with what to fix (as when planning fails), not only as a failed flow.
    let fix = match (outcome, executor.llm_failure()) {
        (FlowOutcome::Failed, Some(llm_error)) => {
            let error = Error::Llm(llm_error.clone());
            executor.events.show(Event::Error {
                code: error.code().into(),
                exit_code: code.code(),
                message: format!(
                    "{error}; once fixed, `ocflow resume {}` continues the flow",
                    executor.task.task_id
                ),
                hint: error.hint(),
            });
            error.hint()
        }
        _ => None,
    };
    if !json {
        ending::show(
            &executor.task,
            &executor.status,
            &executor.flow,
            fix.as_deref(),
        )?;
    }
    Ok(code)
}

/// The exit code of a flow's outcome, after applying it when asked and it succeeded.
/// With `approve_apply` (`--approve apply`), the changes are written only after a yes.
async fn finish(
    executor: &mut Executor,
    outcome: FlowOutcome,
    apply_after: bool,
    approve_apply: bool,
    json: bool,
) -> Result<ExitCode> {
    match outcome {
        FlowOutcome::Succeeded if apply_after => {
            let changes = review::changes(&executor.task, &executor.status, &executor.flow)?;
            if approve_apply && !changes.is_empty() {
                let asked = gates::apply_gate(
                    &executor.task,
                    &mut executor.status,
                    &executor.flow,
                    &mut executor.events,
                    changes.len(),
                    json,
                );
                if let Some(code) = asked.await? {
                    return Ok(code);
                }
            }
            let files: Vec<String> = changes.iter().map(|c| c.path.to_string()).collect();
            if let Err(blocked) = executor.hooks_before_apply(&files) {
                ocflow_model::output::say(&format!(
                    "ocflow: {blocked}; nothing was written (`ocflow apply {}` when it may)",
                    executor.task.task_id
                ));
                return Ok(ExitCode::Failure);
            }
            let applied = apply::apply_changes(
                &executor.task,
                &executor.status,
                &executor.flow,
                &changes,
                false,
                &ocflow_core::task::interrupt::raised,
            )?;
            apply::record_applied(
                &mut executor.events,
                &mut executor.status,
                &executor.task,
                applied,
            )?;
            Ok(ExitCode::Success)
        }
        // A recovery waits for a person (`--approve risky`): the yes that continues the flow
        // applies it at its end too, when this run was asked to.
        FlowOutcome::Waiting => {
            if let Some(pending) = executor.status.approval.as_mut() {
                pending.apply_after = apply_after;
                pending.approve_apply = approve_apply;
                state::save_status(&executor.task, &mut executor.status)?;
            }
            Ok(ExitCode::Paused)
        }
        other => Ok(exit_code(other)),
    }
}

/// The exit code of a flow that ended `outcome`: 0 succeeded, 1 failed, 3 paused or waiting for
/// a person, 130 interrupted.
pub(crate) fn exit_code(outcome: FlowOutcome) -> ExitCode {
    match outcome {
        FlowOutcome::Succeeded => ExitCode::Success,
        FlowOutcome::Failed => ExitCode::Failure,
        FlowOutcome::Interrupted => ExitCode::Interrupted,
        FlowOutcome::Paused | FlowOutcome::Waiting => ExitCode::Paused,
    }
}
