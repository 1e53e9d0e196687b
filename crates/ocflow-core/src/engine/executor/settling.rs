//! What a step's call came to, checked and saved before the executor records it: the library's
//! result with the step's outputs, or the reason it failed without one. A file step is settled
//! on its own thread, as soon as its call returns, so that steps finishing together sync and
//! save their results in parallel rather than one after another in the executor's loop; a
//! command step is settled by the loop, after its view's changes are captured.

use std::collections::BTreeSet;
use std::fs;

use crate::engine::bridge::CallOutcome;
use crate::engine::instructions;
use crate::task::capture::{self, Captured};
use crate::task::outputs;
use crate::task::state;
use crate::task::workspace::{self, TaskDir};
use ocflow_model::error::{IoContext, Result};
use ocflow_model::flow::Step;
use ocflow_model::repo_path::RepoPath;
use ocflow_model::status::StepError;
use ocflow_model::step_result::{CallStatus, StepResult};

/// A finished call, checked.
#[derive(Debug)]
pub(super) enum Settled {
    /// The library's result, with the step's outputs, saved in `result.json`: a success (its
    /// outputs' data on disk first), or a failure the library reported.
    Result(Box<StepResult>),
    /// The call gave no usable result: the library raised, or returned something ocflow
    /// cannot read, or outputs a file step may not write.
    Failed(StepError),
}

/// What a step left in its `output/`: the files a command's view captured (`view`: which kind
/// of view), or, for a file step, whatever the library wrote there.
pub(super) enum Outputs {
    Captured {
        captured: Captured,
        view: &'static str,
    },
    Written,
}

/// Checks `outcome` and saves the step's result. I/O errors (a full disk) are errors of the
/// flow, not of the step.
pub(super) fn settle(
    task: &TaskDir,
    step: &Step,
    outcome: CallOutcome,
    outputs: Outputs,
) -> Result<Settled> {
    let dir = task.step_dir(&step.id);
    let value = match outcome {
        CallOutcome::Returned { result } => result,
        CallOutcome::Exception {
            r#type,
            message,
            traceback,
        } => {
            let file = dir.join(workspace::TRACEBACK_FILE);
            fs::write(&file, &traceback).io_context(|| format!("writing {}", file.display()))?;
            return Ok(Settled::Failed(StepError {
                kind: "exception".into(),
                message: format!("{type}: {message}", type = r#type),
                exception_type: Some(r#type),
                traceback_file: Some(workspace::TRACEBACK_FILE.into()),
            }));
        }
        CallOutcome::Garbage { message } => {
            return Ok(Settled::Failed(StepError::new("bridge", message)));
        }
    };
    let status = value.get("status").and_then(serde_json::Value::as_str);
    if !matches!(status, Some("success" | "failure")) {
        let text =
            format!("the library returned status {status:?}; expected \"success\" or \"failure\"");
        return Ok(Settled::Failed(StepError::new("bridge", text)));
    }
    let mut result: StepResult = match serde_json::from_value(value) {
        Ok(result) => result,
        Err(err) => {
            let text = format!("the library returned a result ocflow cannot read: {err}");
            return Ok(Settled::Failed(StepError::new("bridge", text)));
        }
    };
    let output_dir = dir.join(workspace::OUTPUT_DIR);
    let (output_files, deleted_files) = match outputs {
        Outputs::Captured { captured, view } => {
            result.view = Some(view.to_string());
            // Symlinks and special files a command made are never carried out of the view.
            result.ignored_files = captured.ignored;
            match captured.too_long {
                // A file no flow can carry fails the step, in either view, rather than vanish.
                Some(path) => {
                    result.status = CallStatus::Failure;
                    result.message = capture::too_long_message(&path);
                    (Vec::new(), Vec::new())
                }
                None => (captured.output_files, captured.deleted_files),
            }
        }
        Outputs::Written => match written_outputs(&output_dir, step, &result) {
            Ok(files) => files,
            Err(text) => return Ok(Settled::Failed(StepError::new("engine", text))),
        },
    };
    result.output_files = output_files;
    result.deleted_files = deleted_files;
    // The outputs' data and the result's are flushed before the step is said to have
    // succeeded: a journal line saying so never outlives them (a power loss leaves them whole or
    // missing). Flushed at once, on two threads: the device's cache flushes of the two merge,
    // and a chain of short steps waits for one flush a step instead of two (issue 28).
    std::thread::scope(|scope| {
        let outputs = (result.status == CallStatus::Success)
            .then(|| scope.spawn(|| workspace::sync_data(&output_dir, &result.output_files)));
        let saved = state::save_result(task, &step.id, &result);
        let synced = outputs.map_or(Ok(()), |thread| {
            thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
        saved.and(synced)
    })?;
    Ok(Settled::Result(Box::new(result)))
}

/// A file step's outputs: what it left in `output/`, and the deletions it reported, which must
/// be files the step names.
fn written_outputs(
    output_dir: &std::path::Path,
    step: &Step,
    result: &StepResult,
) -> Result<(Vec<String>, Vec<String>), String> {
    let outputs = outputs::list_outputs(output_dir).map_err(|problem| problem.0)?;
    let named: BTreeSet<RepoPath> = instructions::staged_paths(step).into_iter().collect();
    // A file step writes only the files it names, all checked by validation.
    if let Some(stray) = outputs.iter().find(|path| !named.contains(*path)) {
        return Err(format!(
            "the library wrote {stray}, which the step does not name; a file step may only \
             write the files in its parameters"
        ));
    }
    let mut deleted = Vec::new();
    for raw in &result.deleted_files {
        let path = RepoPath::parse(raw).map_err(|_| {
            format!("the library reported deleting {raw:?}, which is not a valid repository path")
        })?;
        if !named.contains(&path) {
            return Err(format!(
                "the library reported deleting {path}, which the step does not name"
            ));
        }
        deleted.push(path.as_str().to_string());
    }
    Ok((
        outputs.iter().map(|p| p.as_str().to_string()).collect(),
        deleted,
    ))
}
