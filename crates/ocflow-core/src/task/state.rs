//! The task's saved files, read and written in one place, each with its format version:
//! `flow.json` and its revisions, `flow_status.json`, and each step's `result.json`. A file of
//! another version, or one that does not parse into its type, is refused with the reason —
//! never guessed at. Writes are atomic (see `workspace::write_atomic`).

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::flow::{declaration, operations, plugins};
use crate::task::journal;
use crate::task::workspace::{self, TaskDir};
use ocflow_model::error::{Error, Result};
use ocflow_model::event::{Event, Record};
use ocflow_model::flow::{FLOW_VERSION, Flow};
use ocflow_model::llm::DEFAULT_PROFILE;
use ocflow_model::status::{FlowStatus, STATUS_VERSION, StepState, now};
use ocflow_model::step_result::{RESULT_VERSION, StepResult};

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
pub fn load_flow(task: &TaskDir, revision: u32) -> Result<Flow> {
    load_flow_file(&current_flow_file(task, revision))
}

/// The flow of a task's status, or a clear refusal for a task that has none (its planning
/// failed, or was stopped, before a flow existed).
pub fn load_flow_of(task: &TaskDir, status: &FlowStatus) -> Result<Flow> {
    let file = current_flow_file(task, status.revision);
    if !file.exists() && status.steps.is_empty() {
        let why = match (&status.state, &status.message) {
            (ocflow_model::status::FlowState::Running, _) => {
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

/// Writes `flow.json`, and beside it the operations it was validated against
/// (`operations.json`), so the commands that read the task later know every operation it uses.
pub fn save_flow(task: &TaskDir, flow: &Flow) -> Result<()> {
    let catalogue = declaration::write_file(operations::all());
    workspace::write_atomic(&task.file(workspace::OPERATIONS_FILE), catalogue.as_bytes())?;
    workspace::write_json_atomic(&task.file(workspace::FLOW_FILE), flow)
}

/// Makes the operations of the task's saved catalogue known that are not known now (the
/// plugins it used), and says which. A task saved before catalogues were (no file) adds none;
/// a catalogue that does not read is an error naming the file.
pub fn adopt_operations(task: &TaskDir) -> Result<Vec<String>> {
    let path = task.file(workspace::OPERATIONS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => {
            return Err(Error::BadStateFile {
                path,
                problem: format!("cannot read it: {err}"),
            });
        }
    };
    plugins::adopt_saved(&text).map_err(|problem| Error::BadStateFile { path, problem })
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
pub fn current_flow_file(task: &TaskDir, revision: u32) -> PathBuf {
    let revision_file = task.file(&format!("flow.r{revision}.json"));
    if revision > 1 && revision_file.is_file() {
        revision_file
    } else {
        task.file(workspace::FLOW_FILE)
    }
}

/// Reads a task's `flow_status.json`, with what the journal recorded after it was written
/// replayed onto it (steps started and succeeded since): the exact state at any moment.
pub fn load_status(task: &TaskDir) -> Result<FlowStatus> {
    let mut status = load_status_file(&task.file(workspace::STATUS_FILE))?;
    let (records, _) =
        journal::read_from(&task.file(workspace::JOURNAL_FILE), status.journal_offset)?;
    replay(&mut status, &records);
    Ok(status)
}

/// Reads a status file, refusing versions and shapes this build does not know.
pub(crate) fn load_status_file(path: &Path) -> Result<FlowStatus> {
    load_versioned(path, "status", STATUS_VERSION, None)
}

/// Applies what the journal recorded after this status was written: steps started and
/// steps that succeeded (every other change writes the status at once). An event that does
/// not fit the state (a step unknown, a transition not allowed) is left alone.
pub(crate) fn replay(status: &mut FlowStatus, records: &[Record]) {
    if let Some(last) = records.last() {
        status.updated_at = last.ts.clone();
    }
    for record in records {
        match &record.event {
            Event::StepStarted { step, profile, .. } => {
                if let Some(entry) = status.step_mut(step)
                    && entry.status.may_become(StepState::Running)
                    && entry.start(record.ts.clone()).is_ok()
                {
                    entry.profile = profile.clone();
                }
            }
            Event::StepFinished {
                step,
                status: StepState::Succeeded,
                duration_ms,
                message,
                output_files,
                deleted_files,
                sequence: Some(sequence),
                tokens,
                ..
            } => {
                let Some(entry) = status.step_mut(step) else {
                    continue;
                };
                let outputs = (output_files.clone(), deleted_files.clone());
                let done = entry.status == StepState::Running
                    && entry
                        .succeed(
                            record.ts.clone(),
                            *duration_ms,
                            *sequence,
                            outputs,
                            message.clone(),
                        )
                        .is_ok();
                if !done {
                    continue;
                }
                let used = tokens.map(|t| t.since(&entry.tokens)).unwrap_or_default();
                if let Some(tokens) = tokens {
                    entry.tokens = *tokens;
                }
                let profile = entry
                    .profile
                    .clone()
                    .unwrap_or_else(|| DEFAULT_PROFILE.to_string());
                status.last_sequence = status.last_sequence.max(*sequence);
                status.count_tokens(&profile, &used);
            }
            _ => {}
        }
    }
}

/// Writes the status atomically and compactly, stamping `updated_at` and how much of the
/// journal it includes (all of it: `status` must hold every event journaled so far, as the
/// executor's own and a replayed one do). The file system is flushed first. Returns the size
/// written.
pub fn save_status(task: &TaskDir, status: &mut FlowStatus) -> Result<u64> {
    status.updated_at = now();
    // Everything the status refers to (steps' results and outputs, the journal up to its
    // offset) is on disk before it is: one flush of the file system per status write instead of
    // several fsyncs per step.
    workspace::sync_file_system(&task.root)?;
    // Read after the flush: a status never claims journal bytes that a power loss could take.
    status.journal_offset = journal::length(&task.file(workspace::JOURNAL_FILE))?;
    let bytes = serde_json::to_vec(status).map_err(|err| ocflow_model::error::Error::Io {
        context: "serialising the status".into(),
        source: err.into(),
    })?;
    workspace::write_atomic(&task.file(workspace::STATUS_FILE), &bytes)?;
    Ok(bytes.len() as u64)
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
    let mut bytes = serde_json::to_vec_pretty(result).map_err(|err| Error::Io {
        context: format!("serialising the result of {step}"),
        source: err.into(),
    })?;
    bytes.push(b'\n');
    workspace::write_replacing(&task.step_dir(step).join(workspace::RESULT_FILE), &bytes)
}

/// A succeeded step whose recorded outputs are gone from the task directory (deleted by hand,
/// a disk cleaner, a partial copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vanished {
    pub step: String,
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
pub fn vanished_outputs(task: &TaskDir, status: &FlowStatus, flow: &Flow) -> Vec<Vanished> {
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
pub fn require_intact(task: &TaskDir, status: &FlowStatus, flow: &Flow) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::journal::Journal;
    use ocflow_model::llm::Usage;

    fn started(step: &str) -> Event {
        Event::StepStarted {
            step: step.into(),
            operation: "write_file".into(),
            attempt: 1,
            role: None,
            profile: Some("small".into()),
            model: None,
        }
    }

    fn succeeded(step: &str, sequence: u64, tokens: u64) -> Event {
        Event::StepFinished {
            step: step.into(),
            operation: "write_file".into(),
            status: StepState::Succeeded,
            attempt: 1,
            duration_ms: 5,
            message: "wrote".into(),
            output_files: vec![format!("{step}.txt")],
            deleted_files: Vec::new(),
            sequence: Some(sequence),
            tokens: Some(Usage {
                total_tokens: tokens,
                calls: 1,
                ..Usage::default()
            }),
        }
    }

    /// The journal is the write-ahead log: steps started and succeeded after the status was
    /// written are replayed onto it, and a status written later includes them exactly once.
    #[test]
    fn load_status_replays_what_the_journal_holds_after_the_status() {
        let dir = tempfile::tempdir().unwrap();
        let task = TaskDir::new(dir.path(), "t");
        task.create().unwrap();
        let flow: Flow = serde_json::from_value(serde_json::json!({"version": 1, "task": "x",
        "steps": [
            {"id": "a", "operation": "write_file", "params": {}},
            {"id": "b", "operation": "write_file", "params": {}},
            {"id": "c", "operation": "write_file", "params": {}}
        ]}))
        .unwrap();
        let mut status = FlowStatus::new("t", &flow, dir.path());
        let mut journal = Journal::open(&task.file(workspace::JOURNAL_FILE)).unwrap();
        journal.append(&Record::now(now(), started("a"))).unwrap();
        let a = status.step_mut("a").unwrap();
        a.start(now()).unwrap();
        a.profile = Some("small".into());
        save_status(&task, &mut status).unwrap(); // includes a's start, as the engine's does
        for event in [
            succeeded("a", 1, 10),
            started("b"),
            succeeded("b", 2, 5),
            started("c"),
        ] {
            journal.append(&Record::now(now(), event)).unwrap();
        }
        let loaded = load_status(&task).unwrap();
        let states: Vec<StepState> = loaded.steps.iter().map(|s| s.status).collect();
        assert_eq!(
            states,
            [
                StepState::Succeeded,
                StepState::Succeeded,
                StepState::Running
            ]
        );
        assert_eq!(loaded.step("b").unwrap().sequence, Some(2));
        assert_eq!(loaded.step("b").unwrap().output_files, ["b.txt"]);
        assert_eq!(loaded.last_sequence, 2);
        assert_eq!(loaded.tokens.total_tokens, 15);
        assert_eq!(loaded.tokens_by_profile["small"].total_tokens, 15);
        // Written again, the replayed status includes the journal: nothing is applied twice.
        let mut again = loaded.clone();
        save_status(&task, &mut again).unwrap();
        let reloaded = load_status(&task).unwrap();
        assert_eq!(reloaded.step("c").unwrap().attempts, 1);
        assert_eq!(reloaded.tokens.total_tokens, 15);
        // The status file is compact JSON.
        let text = std::fs::read_to_string(task.file(workspace::STATUS_FILE)).unwrap();
        assert!(!text.contains("\n  "), "{text}");
    }
}
