//! The task's saved files, read and written in one place, each with its format version:
//! `flow.json` and its revisions, `flow_status.json`, and each step's `result.json`. A file of
//! another version, or one that does not parse into its type, is refused with the reason —
//! never guessed at. Writes are atomic (see `workspace::write_atomic`).

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::model::flow::{FLOW_VERSION, Flow};
use crate::model::status::{FlowStatus, STATUS_VERSION, now};
use crate::model::step_result::{RESULT_VERSION, StepResult};
use crate::task::workspace::{self, TaskDir};

/// Reads a JSON file of type `T` written by ocflow, checking its `version`. `unversioned`: what a
/// file without one is taken to be (results written before versions existed), or `None` when
/// it must have one.
fn load_versioned<T: DeserializeOwned>(
    path: &Path,
    what: &str,
    version: u32,
    unversioned: Option<u32>,
) -> Result<T> {
    let bad = |problem: String| Error::BadStateFile {
        path: path.to_path_buf(),
        problem,
    };
    let bytes = std::fs::read(path).map_err(|err| bad(format!("cannot read it: {err}")))?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|err| {
        bad(format!(
            "not valid JSON ({err}); it was edited or damaged outside ocflow"
        ))
    })?;
    match value
        .get("version")
        .and_then(Value::as_u64)
        .map(|v| v as u32)
        .or(unversioned)
    {
        Some(v) if v == version => {}
        Some(v) => {
            return Err(bad(format!(
                "{what} format version {v} is not supported by this ocflow (it reads version \
                 {version}); use the ocflow that wrote it"
            )));
        }
        None => {
            return Err(bad(format!(
                "no `version` field; this is not a {what} file written by ocflow"
            )));
        }
    }
    serde_json::from_value(value).map_err(|err| {
        bad(format!(
            "unexpected content ({err}); it was edited or damaged outside ocflow"
        ))
    })
}

/// Reads a flow ocflow wrote (`flow.json` or a revision); it was validated then.
pub(crate) fn load_flow_file(path: &Path) -> Result<Flow> {
    load_versioned(path, "flow", FLOW_VERSION, None)
}

/// The flow of the status's revision.
pub(crate) fn load_flow(task: &TaskDir, revision: u32) -> Result<Flow> {
    load_flow_file(&current_flow_file(task, revision))
}

/// The flow of a task's status, or a clear refusal for a task that has none (its planning
/// failed, or was stopped, before a flow existed).
pub(crate) fn load_flow_of(task: &TaskDir, status: &FlowStatus) -> Result<Flow> {
    let file = current_flow_file(task, status.revision);
    if !file.exists() && status.steps.is_empty() {
        let why = match (&status.state, &status.message) {
            (crate::model::status::FlowState::Running, _) => {
                "it is being planned, or its planning was stopped".to_string()
            }
            (_, Some(message)) => message.clone(),
            (state, None) => format!("it {state} before a flow was planned"),
        };
        return Err(Error::Usage(format!(
            "task {} has no flow ({why}); nothing was changed. Start it again: `ocflow run \
             \"{}\"`",
            task.task_id,
            status.task.replace('"', "\\\"")
        )));
    }
    load_flow_file(&file)
}

/// Writes `flow.json`.
pub(crate) fn save_flow(task: &TaskDir, flow: &Flow) -> Result<()> {
    workspace::write_json_atomic(&task.file(workspace::FLOW_FILE), flow)
}

/// Saves the flow of a new revision as `flow.rN.json`, keeping the first as `flow.r1.json`.
pub(crate) fn save_revision(task: &TaskDir, flow: &Flow, revision: u32) -> Result<()> {
    let first = task.file("flow.r1.json");
    if !first.exists() {
        let current = std::fs::read(task.file(workspace::FLOW_FILE)).unwrap_or_default();
        workspace::write_atomic(&first, &current)?;
    }
    workspace::write_json_atomic(&task.file(&format!("flow.r{revision}.json")), flow)
}

/// The flow of the status's revision: `flow.rN.json` when it exists (a crash may have come
/// before `flow.json` was replaced), else `flow.json`.
pub(crate) fn current_flow_file(task: &TaskDir, revision: u32) -> PathBuf {
    let revision_file = task.file(&format!("flow.r{revision}.json"));
    if revision > 1 && revision_file.is_file() {
        revision_file
    } else {
        task.file(workspace::FLOW_FILE)
    }
}

/// Reads a task's `flow_status.json`.
pub(crate) fn load_status(task: &TaskDir) -> Result<FlowStatus> {
    load_status_file(&task.file(workspace::STATUS_FILE))
}

/// Reads a status file, refusing versions and shapes this build does not know.
pub(crate) fn load_status_file(path: &Path) -> Result<FlowStatus> {
    load_versioned(path, "status", STATUS_VERSION, None)
}

/// Writes the status atomically, stamping `updated_at`.
pub(crate) fn save_status(task: &TaskDir, status: &mut FlowStatus) -> Result<()> {
    status.updated_at = now();
    workspace::write_json_atomic(&task.file(workspace::STATUS_FILE), status)
}

/// A step's `result.json`, or `None` when the step has none (it never finished an attempt).
pub(crate) fn load_result(task: &TaskDir, step: &str) -> Result<Option<StepResult>> {
    let path = task.step_dir(step).join(workspace::RESULT_FILE);
    if !path.exists() {
        return Ok(None);
    }
    load_versioned(&path, "result", RESULT_VERSION, Some(RESULT_VERSION)).map(Some)
}

/// Writes a step's `result.json` (before the status that points at it).
pub(crate) fn save_result(task: &TaskDir, step: &str, result: &StepResult) -> Result<()> {
    workspace::write_json_atomic(&task.step_dir(step).join(workspace::RESULT_FILE), result)
}

/// A succeeded step whose recorded outputs are gone from the task directory (deleted by hand,
/// a disk cleaner, a partial copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Vanished {
    pub(crate) step: String,
    /// The missing files, or the step's `result.json` when its whole directory went.
    pub(crate) missing: Vec<String>,
}

impl std::fmt::Display for Vanished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "step {} ({} missing)",
            self.step,
            self.missing.join(", ")
        )
    }
}

/// The succeeded steps of `flow` whose recorded outputs are no longer in the task directory.
pub(crate) fn vanished_outputs(task: &TaskDir, status: &FlowStatus, flow: &Flow) -> Vec<Vanished> {
    let mut vanished = Vec::new();
    for step in status.succeeded() {
        if flow.step(&step.id).is_none() {
            continue;
        }
        let dir = task.step_dir(&step.id);
        let output = dir.join(workspace::OUTPUT_DIR);
        let mut missing: Vec<String> = step
            .output_files
            .iter()
            .filter(|file| std::fs::symlink_metadata(output.join(file)).is_err())
            .cloned()
            .collect();
        if !dir.join(workspace::RESULT_FILE).is_file() {
            missing.push(format!("{}/{}", step.id, workspace::RESULT_FILE));
        }
        if !missing.is_empty() {
            vanished.push(Vanished {
                step: step.id.clone(),
                missing,
            });
        }
    }
    vanished
}

/// Refuses to review or apply a task whose recorded outputs vanished.
pub(crate) fn require_intact(task: &TaskDir, status: &FlowStatus, flow: &Flow) -> Result<()> {
    let vanished = vanished_outputs(task, status, flow);
    if vanished.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = vanished.iter().map(ToString::to_string).collect();
    Err(Error::Usage(format!(
        "task {} is damaged: the recorded outputs of {} are gone from {}; nothing was written. \
         Run `ocflow resume {0}` to run those steps again, then review",
        task.task_id,
        list.join("; "),
        task.root.display()
    )))
}
