//! Events: everything that happens in a flow, as typed records. Each is one line of
//! `journal.jsonl` and, with `--json`, one line on stdout.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::approval::{Answer, AnsweredBy, ApprovalKind};
use crate::budget::{BudgetKind, BudgetUse, PauseReason};
use crate::deliverable::DeliverableCheck;
use crate::llm::Usage;
use crate::status::{FlowState, StepState};

/// The event format version this build writes; readers skip lines of other versions.
pub const EVENT_VERSION: u32 = 1;

fn first_version() -> u32 {
    1
}

/// Something that happened, as written to `journal.jsonl` and to `--json` output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A new flow begins.
    FlowStarted {
        task_id: String,
        task: String,
        /// The task directory holding every file of this flow.
        task_dir: PathBuf,
        repo: PathBuf,
        /// The operation library and the Python running it.
        library: String,
    },
    /// The flow is known and validated: given as a file, or planned by the LLM.
    FlowPlanned {
        steps: usize,
        /// How many answers the planner needed (0 for a given flow).
        planner_answers: usize,
        /// How JSON answers are asked of this endpoint (`json_schema`, `json_object with a
        /// schema`, `json_object`, `plain text`), after it refused any better form.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer_form: Option<String>,
        /// What "done" means for the flow, in one line (`utils.py changed; `pytest` passes`),
        /// said to be inferred when the plan named none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deliverables: Option<String>,
    },
    /// `ocflow resume` picks a flow up again.
    FlowResumed {
        task_id: String,
        task_dir: PathBuf,
        /// Steps still to run.
        pending: Vec<String>,
    },
    /// The repository was copied into the task's snapshot.
    SnapshotTaken {
        files: u64,
        bytes: u64,
        duration_ms: u64,
    },
    /// A step begins an attempt.
    StepStarted {
        step: String,
        operation: String,
        attempt: u32,
        /// The role taking the step.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
        /// The step's model profile (its role's, when a model is configured), and the model
        /// it asks, for a step that asks one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// A step's attempt ended.
    StepFinished {
        step: String,
        operation: String,
        status: StepState,
        attempt: u32,
        duration_ms: u64,
        message: String,
        /// Repository-relative files the step created or changed.
        output_files: Vec<String>,
        /// Repository-relative files the step deleted.
        deleted_files: Vec<String>,
        /// For a succeeded step: the number naming this version of its outputs, and the
        /// tokens it used over all its attempts (what `resume` and `status` replay from the
        /// journal when the status file is older).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sequence: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<Usage>,
    },
    /// A transient failure is retried automatically after `delay_ms`.
    StepRetrying {
        step: String,
        retry: u32,
        delay_ms: u64,
    },
    /// The LLM chose a recovery strategy for a failed step.
    RecoveryDecided {
        step: String,
        strategy: String,
        reason: String,
        /// The flow revision it produced, if it changed the flow.
        revision: Option<u32>,
    },
    /// Recovery could not go on (a limit, the stuck rule, no valid answer); the flow fails.
    RecoveryStopped { step: String, reason: String },
    /// The flow ended (succeeded or failed).
    FlowFinished {
        task_id: String,
        state: FlowState,
        /// Why it did not succeed (the first failure, a limit, an abort); absent on success.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Every repository file the flow changed.
        changed_files: Vec<String>,
        /// The unified diff of `changed_files` against the repository, as it was when the flow
        /// ended (`ocflow diff` recomputes it); absent when nothing changed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<PathBuf>,
        /// Where the summary is, and what it says.
        summary: PathBuf,
        #[serde(default)]
        summary_text: String,
        /// Tokens the whole flow used.
        #[serde(default)]
        tokens: Usage,
        /// The sentences of the model's summary that the journal contradicts (struck through
        /// in the summary): tests said to pass that never ran, mail said to be sent, files said
        /// to be changed that the flow did not change, …; absent when there are none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        contradicted_claims: Vec<ContradictedClaim>,
        /// The flow's answer: the result of the step marked `final_answer` (seed 004's
        /// `isFinalAnswer`), else of its last `generate_summary` step; also at the top of the
        /// summary. Absent when there is neither.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        final_answer: Option<FinalAnswer>,
        /// Each deliverable of the flow (what "done" means) and whether it holds: the flow
        /// succeeded only if every one does. Absent for a flow that never had a plan.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        deliverables: Vec<DeliverableCheck>,
        /// The flow's budgets and what it spent against them; absent without a budget.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        budget: Option<BudgetUse>,
    },
    /// A budget reached 50 %, 80 % or 100 % (at 100 % the flow pauses before the call that
    /// would exceed it).
    Budget {
        budget: BudgetKind,
        /// 50, 80 or 100.
        percent: u8,
        /// Spent and the limit, in the budget's unit (tokens, US dollars, milliseconds).
        spent: f64,
        limit: f64,
        /// The same in words.
        message: String,
    },
    /// The flow paused (exit 3): a budget would have been exceeded. Steps that were stopped
    /// mid-call are pending again; `ocflow resume` (with a higher limit) continues.
    FlowPaused {
        task_id: String,
        reason: PauseReason,
        /// The reason and what to do, in words.
        message: String,
        /// Steps still to run.
        pending: Vec<String>,
        budget: BudgetUse,
    },
    /// The flow waits for a person (state `waiting`, exit 3): `approve` (`ocflow approve ID`,
    /// MCP `ocflow_approve`) continues it, `reject` (`ocflow reject ID --reason …`) ends it.
    ApprovalNeeded {
        task_id: String,
        kind: ApprovalKind,
        /// What to approve, in words.
        subject: String,
        /// The step it concerns, for a risky command or a recovery.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<String>,
        /// The commands that answer it.
        approve: String,
        reject: String,
    },
    /// A person answered an approval; journaled with who and why.
    ApprovalAnswered {
        kind: ApprovalKind,
        answer: Answer,
        by: AnsweredBy,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Ctrl-C or SIGTERM stopped the flow; `ocflow resume` continues it.
    FlowInterrupted {
        task_id: String,
        running: Vec<String>,
    },
    /// Still working: shown at least every 15 s while a flow runs (a caller that stops waiting
    /// after some silence — OpenHands' terminal, after 30 s — keeps waiting); not journaled.
    Heartbeat {
        /// `planning`, `running`, `recovering` or `summarising`.
        stage: String,
        /// The steps running now.
        running: Vec<String>,
        /// Seconds since this ocflow started working on the flow.
        elapsed_seconds: u64,
        /// Tokens used so far.
        tokens: Usage,
    },
    /// Something a person and a headless caller should know, though the flow goes on.
    Warning { message: String },
    /// The command stopped with an error (shown, with `--json`, as the last line on stdout).
    Error {
        /// What kind: `usage`, `invalid_flow`, `locked`, `drift`, `bad_state_file`, `bridge`,
        /// `llm`, `io`, `interrupted`, `internal`.
        code: String,
        /// The process's exit code.
        exit_code: u8,
        message: String,
        /// What to do about it, when there is more to say than the message.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hint: Option<String>,
    },
    /// `ocflow apply` wrote the flow's changes into the repository.
    ChangesApplied { task_id: String, files: Vec<String> },
    /// `ocflow undo` put back what the task's last apply replaced.
    ChangesUndone { task_id: String, files: Vec<String> },
    /// A later command found an apply or undo of the task cut short (a kill) and finished it.
    ApplyRecovered {
        task_id: String,
        outcome: Recovered,
        /// Files put back.
        files: Vec<String>,
        /// Files edited since, left as they are.
        left: Vec<String>,
    },
    /// `ocflow batch` begins; every flow's events follow, each tagged with its `task_id`.
    BatchStarted {
        /// The batch's output directory (`results.jsonl`, `summary.md`, the task directories).
        out: PathBuf,
        /// Tasks in the tasks file.
        tasks: usize,
        /// Tasks an earlier run finished, skipped now.
        skipped: usize,
        /// Unfinished flows of an earlier run, resumed now.
        resumed: usize,
        /// Flows at once at most.
        flows: usize,
        /// `local` or `ray`.
        engine: String,
        /// LLM requests in flight across the batch at most, when capped.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_llm_requests: Option<usize>,
    },
    /// `ocflow batch` ended: the totals over every task of the batch (`summary.md`).
    BatchFinished {
        succeeded: usize,
        failed: usize,
        /// Flows left unfinished (interrupted): running the batch again resumes them.
        unfinished: usize,
        /// Tokens of every finished flow.
        tokens: Usage,
        /// Wall time of this run of the batch.
        wall_ms: u64,
        /// The batch's summary file.
        summary: PathBuf,
        /// LLM requests in flight at once through the batch's gate: the most, and the mean.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_llm_in_flight: Option<usize>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mean_llm_in_flight: Option<f64>,
    },
    /// A hook of the user's (`[hooks]`) blocked its point: a step then fails with the reason,
    /// an apply writes nothing; at a flow's end it is only said.
    HookBlocked {
        /// `before_step`, `after_step`, `before_command`, `before_apply` or `flow_end`.
        point: String,
        command: String,
        /// The hook's stderr, or what stopped it.
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<String>,
    },
    /// `ocflow eval` judged one task by its check (a line of its `results.jsonl`, or of
    /// `baseline.jsonl` for the model alone).
    EvalScored {
        id: String,
        /// `ocflow` (the flow) or `baseline` (the model alone).
        by: String,
        solved: bool,
        /// The flow said it succeeded and the check fails (always false for the model alone).
        false_success: bool,
        /// Why the check could not judge it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        problem: Option<String>,
    },
    /// `ocflow eval` ended: the totals (`summary.md`).
    EvalFinished {
        tasks: usize,
        solved: usize,
        false_successes: usize,
        /// Solved by the model alone, when it was asked (`--baseline`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        baseline_solved: Option<usize>,
        summary: PathBuf,
    },
}

/// How a later command finished an apply or undo a kill cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Recovered {
    /// The repository is as it was before the apply.
    RolledBack,
    /// Every file was already in place: the apply counts as done.
    Completed,
    /// The undo was finished: the files are as they were before the apply.
    UndoFinished,
    /// `apply --commit` was cut short after its commit was made: recorded.
    Committed,
    /// `apply --commit` was cut short before its commit: the files stay applied and their
    /// index entries are as before it (nothing staged is left behind).
    CommitRolledBack,
}

/// A step's result given as the flow's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct FinalAnswer {
    /// The step whose result it is.
    pub step: String,
    /// Its text (bounded; the whole is in the step's `result.json`).
    pub text: String,
}

/// A claim of the model's summary and the fact of the journal that contradicts it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ContradictedClaim {
    /// The model's sentence, as it wrote it.
    pub claim: String,
    /// What the journal shows instead ("no step of this flow ran the tests or any command").
    pub fact: String,
}

/// One journal line: when, and what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Record {
    /// Format version of the line; see `EVENT_VERSION`. Lines written before versions existed
    /// have none and are version 1.
    #[serde(default = "first_version")]
    pub version: u32,
    /// RFC 3339 time the event was recorded.
    pub ts: String,
    #[serde(flatten)]
    pub event: Event,
}

impl Record {
    /// A record of `event` now, in this build's version.
    pub fn now(ts: String, event: Event) -> Record {
        Record {
            version: EVENT_VERSION,
            ts,
            event,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/events.schema.json` is generated from these types, so callers' schema and the
    /// stream cannot drift apart. To regenerate after changing an event:
    /// `OCFLOW_WRITE_SCHEMA=1 cargo test -p ocflow-model events_schema`.
    #[test]
    fn events_schema_file_is_generated_from_the_types() {
        let schema = schemars::schema_for!(Record);
        let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/events.schema.json");
        if std::env::var_os("OCFLOW_WRITE_SCHEMA").is_some() {
            std::fs::write(&path, &text).unwrap();
        }
        let written = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            written == text,
            "{} is not what the event types generate; regenerate it with \
             OCFLOW_WRITE_SCHEMA=1 cargo test -p ocflow-model events_schema",
            path.display()
        );
    }
}
