//! What `ocflow report` shows, read from a task directory: the status, each step's definition
//! (from every revision of the flow, so steps a recovery dropped keep their edges), each attempt
//! from the journal, the summary and the diff. Anything missing — no flow because planning
//! failed, no journal, outputs gone — becomes a note on the page, never an error.

use std::collections::HashMap;

use crate::task::failure_cause::{self, Cause};
use crate::task::review::{self, ChangeKind};
use crate::task::workspace::{self, TaskDir};
use crate::task::{journal, state};
use ocflow_model::error::Result;
use ocflow_model::event::Event;
use ocflow_model::flow::{Flow, Step};
use ocflow_model::status::{FlowStatus, StepState, StepStatus};

/// The page's diff stops growing past this size: a browser chokes on tens of megabytes of
/// text, and `ocflow diff` gives the whole of it.
pub const MAX_DIFF_BYTES: usize = 2 * 1024 * 1024;

/// Everything the report shows about one task.
#[derive(Debug, Clone)]
pub struct ReportFacts {
    pub status: FlowStatus,
    /// Whether a flow exists (planning may have failed before making one).
    pub has_flow: bool,
    /// One per step of the status, in its order.
    pub steps: Vec<StepFacts>,
    /// Moments without a bar of their own: transient retries and recoveries that stopped.
    pub notes: Vec<TimedNote>,
    /// `summary.md`, when it was written.
    pub summary: Option<String>,
    pub changes: Changes,
}

/// One step: its state, where it sits in the graph, and its attempts.
#[derive(Debug, Clone)]
pub struct StepFacts {
    pub status: StepStatus,
    pub role: Option<String>,
    pub description: Option<String>,
    pub depends_on: Vec<String>,
    pub attempts: Vec<Attempt>,
    /// Why a failed step failed, in its own output (see `failure_cause`).
    pub cause: Option<Cause>,
}

/// One attempt of a step, as the journal recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub number: u32,
    /// RFC 3339.
    pub started_at: String,
    /// `None` while it runs, or when ocflow stopped under it.
    pub finished_at: Option<String>,
    /// How it ended (`succeeded` or `failed`); `None` when it did not end.
    pub outcome: Option<StepState>,
}

/// Something that happened to a step at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedNote {
    pub step: String,
    /// RFC 3339.
    pub at: String,
    pub text: String,
}

/// The flow's changes, or why the page has none.
#[derive(Debug, Clone)]
pub enum Changes {
    Files(Vec<FileDiff>),
    Unavailable(String),
}

/// One changed file and its unified diff (`None` past `MAX_DIFF_BYTES`).
#[derive(Debug, Clone)]
pub struct FileDiff {
    pub path: String,
    pub kind: ChangeKind,
    pub diff: Option<String>,
}

/// Reads what the report shows. Only an unreadable status is an error: without it there is
/// no task to show.
pub fn gather(task: &TaskDir) -> Result<ReportFacts> {
    let status = state::load_status(task)?;
    let (flow, definitions) = definitions(task, &status)?;
    let (records, _) = journal::read(&task.file(workspace::JOURNAL_FILE))?;
    let mut attempts = attempts_by_step(&records);
    let steps = status
        .steps
        .iter()
        .map(|step| {
            let definition = definitions.get(step.id.as_str());
            let mut attempts = attempts.remove(&step.id).unwrap_or_default();
            if attempts.is_empty() {
                attempts.extend(attempt_from_status(step));
            }
            StepFacts {
                status: step.clone(),
                role: definition.and_then(|d| d.role.clone()),
                description: definition.and_then(|d| d.description.clone()),
                depends_on: definition.map(|d| d.depends_on.clone()).unwrap_or_default(),
                attempts,
                cause: (step.status == StepState::Failed)
                    .then(|| failure_cause::for_people(task, &step.id))
                    .flatten(),
            }
        })
        .collect();
    let summary = std::fs::read_to_string(task.file(workspace::SUMMARY_FILE)).ok();
    let changes = match &flow {
        Some(flow) => changes(task, &status, flow),
        None => Changes::Unavailable("there is no flow, so nothing changed".into()),
    };
    Ok(ReportFacts {
        has_flow: flow.is_some(),
        notes: timed_notes(&records),
        status,
        steps,
        summary,
        changes,
    })
}

/// The current flow (`None` when planning made none) and every step ever defined, by id: a
/// step a recovery replaced is gone from the current flow but still has a state to show.
fn definitions(
    task: &TaskDir,
    status: &FlowStatus,
) -> Result<(Option<Flow>, HashMap<String, Step>)> {
    let mut by_id = HashMap::new();
    for revision in 1..status.revision {
        let file = task.file(&format!("flow.r{revision}.json"));
        if let Ok(flow) = state::load_flow_file(&file) {
            by_id.extend(flow.steps.into_iter().map(|s| (s.id.clone(), s)));
        }
    }
    if !state::current_flow_file(task, status.revision).is_file() {
        return Ok((None, by_id));
    }
    let flow = state::load_flow(task, status.revision)?;
    by_id.extend(flow.steps.iter().map(|s| (s.id.clone(), s.clone())));
    Ok((Some(flow), by_id))
}

/// Each step's attempts, in the order they started. A finish without its start (a journal
/// begun mid-way) is placed by its duration.
fn attempts_by_step(records: &[ocflow_model::event::Record]) -> HashMap<String, Vec<Attempt>> {
    let mut by_step: HashMap<String, Vec<Attempt>> = HashMap::new();
    for record in records {
        match &record.event {
            Event::StepStarted { step, attempt, .. } => {
                by_step.entry(step.clone()).or_default().push(Attempt {
                    number: *attempt,
                    started_at: record.ts.clone(),
                    finished_at: None,
                    outcome: None,
                });
            }
            Event::StepFinished {
                step,
                attempt,
                status,
                duration_ms,
                ..
            } => {
                let attempts = by_step.entry(step.clone()).or_default();
                let open = attempts
                    .iter_mut()
                    .rev()
                    .find(|a| a.number == *attempt && a.finished_at.is_none());
                match open {
                    Some(open) => {
                        open.finished_at = Some(record.ts.clone());
                        open.outcome = Some(*status);
                    }
                    None => attempts.push(Attempt {
                        number: *attempt,
                        started_at: earlier(&record.ts, *duration_ms),
                        finished_at: Some(record.ts.clone()),
                        outcome: Some(*status),
                    }),
                }
            }
            _ => {}
        }
    }
    by_step
}

/// The last attempt as the status keeps it, for a task whose journal is gone.
fn attempt_from_status(step: &StepStatus) -> Option<Attempt> {
    let started_at = step.started_at.clone()?;
    let ended = matches!(step.status, StepState::Succeeded | StepState::Failed);
    Some(Attempt {
        number: step.attempts.max(1),
        started_at,
        finished_at: step.finished_at.clone(),
        outcome: ended.then_some(step.status),
    })
}

/// `ts` minus `ms` milliseconds, RFC 3339 (`ts` itself when it does not parse).
fn earlier(ts: &str, ms: u64) -> String {
    let Ok(time) = chrono::DateTime::parse_from_rfc3339(ts) else {
        return ts.to_string();
    };
    // A corrupt journal's huge duration must not panic the page: the time stays as it is.
    let took = chrono::Duration::try_milliseconds(i64::try_from(ms).unwrap_or(i64::MAX));
    let before = took
        .and_then(|d| time.checked_sub_signed(d))
        .unwrap_or(time);
    before
        .with_timezone(&chrono::Utc)
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// What the journal says happened between attempts; the recovery decisions themselves are in
/// the status (`StepStatus::recoveries`).
fn timed_notes(records: &[ocflow_model::event::Record]) -> Vec<TimedNote> {
    let note = |step: &str, ts: &str, text: String| TimedNote {
        step: step.to_string(),
        at: ts.to_string(),
        text,
    };
    records
        .iter()
        .filter_map(|record| match &record.event {
            Event::StepRetrying {
                step,
                retry,
                delay_ms,
            } => Some(note(
                step,
                &record.ts,
                format!("transient failure, automatic retry {retry} after {delay_ms} ms"),
            )),
            Event::RecoveryStopped { step, reason } => Some(note(
                step,
                &record.ts,
                format!("recovery stopped: {reason}"),
            )),
            _ => None,
        })
        .collect()
}

/// The diff file by file, or why there is none: a damaged task is shown, not refused, since a
/// report is how one looks at what went wrong.
fn changes(task: &TaskDir, status: &FlowStatus, flow: &Flow) -> Changes {
    let vanished = state::vanished_outputs(task, status, flow);
    if !vanished.is_empty() {
        let list: Vec<String> = vanished.iter().map(ToString::to_string).collect();
        return Changes::Unavailable(format!(
            "the recorded outputs of {} are gone; `ocflow resume` runs those steps again",
            list.join("; ")
        ));
    }
    match file_diffs(task, status, flow) {
        Ok(files) => Changes::Files(files),
        Err(err) => Changes::Unavailable(format!("the diff could not be made: {err}")),
    }
}

fn file_diffs(task: &TaskDir, status: &FlowStatus, flow: &Flow) -> Result<Vec<FileDiff>> {
    let mut shown = 0;
    let mut files = Vec::new();
    for change in review::changes(task, status, flow)? {
        let diff = if shown < MAX_DIFF_BYTES {
            let text = review::unified_diff(std::slice::from_ref(&change))?;
            shown += text.len();
            Some(text)
        } else {
            None
        };
        files.push(FileDiff {
            path: change.path.as_str().to_string(),
            kind: change.kind,
            diff,
        });
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocflow_model::event::Record;

    fn record(ts: &str, event: Event) -> Record {
        Record::now(ts.to_string(), event)
    }

    fn started(step: &str, attempt: u32) -> Event {
        Event::StepStarted {
            step: step.into(),
            operation: "execute_shell_command".into(),
            attempt,
            role: None,
            profile: None,
            model: None,
        }
    }

    fn finished(step: &str, attempt: u32, status: StepState, duration_ms: u64) -> Event {
        Event::StepFinished {
            step: step.into(),
            operation: "execute_shell_command".into(),
            status,
            attempt,
            duration_ms,
            message: String::new(),
            output_files: Vec::new(),
            deleted_files: Vec::new(),
            sequence: None,
            tokens: None,
        }
    }

    #[test]
    fn attempts_pair_starts_with_finishes_and_place_an_orphan_finish_by_its_duration() {
        let records = [
            record("2025-01-01T00:00:00.000Z", started("a", 1)),
            record(
                "2025-01-01T00:00:01.000Z",
                finished("a", 1, StepState::Failed, 1000),
            ),
            record("2025-01-01T00:00:02.000Z", started("a", 2)),
            record(
                "2025-01-01T00:00:05.000Z",
                finished("b", 1, StepState::Succeeded, 1500),
            ),
        ];
        let by_step = attempts_by_step(&records);
        assert_eq!(
            by_step["a"],
            vec![
                Attempt {
                    number: 1,
                    started_at: "2025-01-01T00:00:00.000Z".into(),
                    finished_at: Some("2025-01-01T00:00:01.000Z".into()),
                    outcome: Some(StepState::Failed),
                },
                Attempt {
                    number: 2,
                    started_at: "2025-01-01T00:00:02.000Z".into(),
                    finished_at: None,
                    outcome: None,
                },
            ]
        );
        assert_eq!(by_step["b"][0].started_at, "2025-01-01T00:00:03.500Z");
    }
}
