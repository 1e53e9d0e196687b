//! The durable state of a flow: `flow_status.json`, replaced atomically after every change.
//! Resume trusts it; `ocflow status` renders it as a table or JSON.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::budget::{BudgetUse, PauseReason};
use crate::decision::{Decision, StrategyKind};
use crate::flow::Flow;
use crate::llm::{DEFAULT_PROFILE, Usage};

/// The status file format version this build writes and reads.
pub const STATUS_VERSION: u32 = 1;

/// The whole state of one flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowStatus {
    /// Format version; see `STATUS_VERSION`.
    pub version: u32,
    pub task_id: String,
    /// The task in the user's words.
    pub task: String,
    /// The canonical repository the flow reads.
    pub repo: PathBuf,
    /// Which revision of the flow is being executed: 1, then one more for each recovery
    /// decision that changed the flow (`flow.rN.json`).
    pub revision: u32,
    pub state: FlowState,
    /// RFC 3339 times.
    pub created_at: String,
    pub updated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// When `ocflow apply` last wrote the changes into the repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_at: Option<String>,
    /// Why the flow ended as it did, when a step's message does not say it (planning failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The last sequence number given to a succeeded step.
    #[serde(default)]
    pub last_sequence: u64,
    /// Strategies asked of the LLM in this flow.
    #[serde(default)]
    pub recovery_calls: u32,
    /// New revisions of the remaining flow made by `replan`.
    #[serde(default)]
    pub replans: u32,
    /// A recovery under way: set before the LLM is asked, holding the decision once made, and
    /// cleared when it has been carried out. A crash in between leaves it for `resume`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_recovery: Option<PendingRecovery>,
    /// What a `waiting` flow asks a person to approve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<crate::approval::PendingApproval>,
    /// What confines the flow's command steps, in words (the last run's, for `status`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// Tokens used by the whole flow: planning, every step, the summary.
    #[serde(default)]
    pub tokens: Usage,
    /// How much of the journal this status includes, in bytes: the events after it (steps
    /// started and succeeded since) are replayed onto it when it is read.
    #[serde(default)]
    pub journal_offset: u64,
    /// The same tokens by the model profile that used them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tokens_by_profile: BTreeMap<String, Usage>,
    /// Why the flow is paused, while it is (`FlowState::Paused`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<PauseReason>,
    /// The flow's budgets and what it spent against them, over all its runs.
    #[serde(default, skip_serializing_if = "BudgetUse::is_empty")]
    pub budget: BudgetUse,
    /// The failure memories this flow's prompts carried (planning and recovery), by their id
    /// in the user's memory (`ocflow memory show ID`), in the order first used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memories_used: Vec<i64>,
    /// The repository's own instruction files (`AGENTS.md`…) shown to the planner or a step,
    /// as repository paths, in the order first used (`flow::project_instructions`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instructions_used: Vec<String>,
    /// Each of the flow's deliverables as its end found it (`flow.json`'s `deliverables`):
    /// set when the flow finishes; absent before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deliverables: Vec<crate::deliverable::DeliverableCheck>,
    /// One entry per step, in flow order.
    pub steps: Vec<StepStatus>,
    /// Where each step sits in `steps`, so that preparing a step does not search every step
    /// for each of its ancestors (quadratic per step on a chain). Not persisted.
    #[serde(skip)]
    index: StepIndex,
}

/// Positions in `FlowStatus::steps` by step id: a cache, since `steps` is public and may be
/// changed anywhere. Each answer is checked against `steps` before it is trusted, and the whole
/// index is rebuilt when it does not hold; a step that is absent costs one such rebuild, the
/// linear search it replaces.
#[derive(Debug, Default)]
struct StepIndex(Mutex<HashMap<String, usize>>);

impl StepIndex {
    fn position(&self, steps: &[StepStatus], id: &str) -> Option<usize> {
        // A panic elsewhere while the lock was held leaves at worst a stale map, which the
        // check below catches: poisoning says nothing here.
        let mut positions = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        Self::lookup(&mut positions, steps, id)
    }

    fn position_mut(&mut self, steps: &[StepStatus], id: &str) -> Option<usize> {
        let positions = self.0.get_mut().unwrap_or_else(PoisonError::into_inner);
        Self::lookup(positions, steps, id)
    }

    fn lookup(
        positions: &mut HashMap<String, usize>,
        steps: &[StepStatus],
        id: &str,
    ) -> Option<usize> {
        let holds = |position: usize| steps.get(position).is_some_and(|s| s.id == id);
        if let Some(&position) = positions.get(id)
            && holds(position)
        {
            return Some(position);
        }
        positions.clear();
        for (position, step) in steps.iter().enumerate() {
            // The first of two steps with one id wins, as the search it replaces found it.
            positions.entry(step.id.clone()).or_insert(position);
        }
        positions.get(id).copied()
    }
}

impl Clone for StepIndex {
    /// A clone starts empty: it is filled on the first lookup.
    fn clone(&self) -> Self {
        StepIndex::default()
    }
}

impl PartialEq for StepIndex {
    /// A cache, never part of what a status says.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// Where a flow stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum FlowState {
    Running,
    Succeeded,
    Failed,
    /// Stopped by Ctrl-C or SIGTERM; `resume` continues.
    Interrupted,
    /// Every step succeeded, yet the task asked for a change and the flow changed no file and
    /// ran no command (exit 1): never reported as a success.
    NoChange,
    /// Stopped before a budget was exceeded (`FlowStatus::paused` says which; exit 3):
    /// `resume` with a higher limit continues where it stopped.
    Paused,
    /// A person must answer (`approval` in the status says what): `ocflow approve` or
    /// `ocflow reject` continues it (exit 3).
    Waiting,
}

/// Where a step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum StepState {
    Pending,
    Running,
    Succeeded,
    Failed,
    Skipped,
}

/// The state of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepStatus {
    pub id: String,
    pub operation: String,
    /// The role taking the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The model profile of its LLM calls (its role's), when a model is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    pub status: StepState,
    /// How many times the step has started.
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Order in which succeeded steps finished; later ones win when two change one file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
    /// Repository-relative files the step created or changed (kept in `<step>/output/`).
    /// Like every empty or zero field of a step, left out of the file: a long flow's status is
    /// rewritten while it runs, and its bytes should be the steps' facts (issue 28 §2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_files: Vec<String>,
    /// Repository-relative files the step deleted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deleted_files: Vec<String>,
    /// The last attempt's message, one sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Why the last attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StepError>,
    /// Tokens the step's LLM calls used, over all its attempts.
    #[serde(default, skip_serializing_if = "Usage::is_none")]
    pub tokens: Usage,
    /// Automatic retries after transient failures (no LLM asked).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub auto_retries: u32,
    /// The recovery strategies decided for this step, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recoveries: Vec<RecoveryRecord>,
    /// Why the step runs again, for its model: set when recovery runs an LLM step again after
    /// a failure (its own, or a test step's after it): the failing tests, their messages, the
    /// output's tail and the recovery's reason. Its next calls carry it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
}

/// A change of a step's state that `StepState::may_become` forbids: a fault in ocflow, never the
/// user's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("step {step} cannot go from {from} to {to}")]
pub struct IllegalTransition {
    pub step: String,
    pub from: StepState,
    pub to: StepState,
}

/// A change of the flow's state that `FlowState::may_become` forbids: a fault in ocflow, never
/// the user's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the flow cannot go from {from} to {to}")]
pub struct IllegalFlowTransition {
    pub from: FlowState,
    pub to: FlowState,
}

impl FlowState {
    /// What may follow what; every change of the flow's state goes through this one table
    /// (`FlowStatus::move_to`). A run or a resume may start the flow again from any state, and
    /// a stop may come in any state (a signal or an engine error while the end is written, a
    /// snapshot that fails before a resumed flow runs); only a running flow ends succeeded,
    /// with no change, or paused.
    pub fn may_become(self, next: FlowState) -> bool {
        use FlowState::*;
        matches!(
            (self, next),
            (_, Running | Failed | Interrupted)
                | (Running, Succeeded | NoChange | Paused | Waiting)
                // A succeeded flow waits for its apply's approval, and is succeeded again
                // once answered.
                | (Succeeded, Waiting)
                | (Waiting, Succeeded)
        )
    }
}

impl StepState {
    /// What may follow what; every change of a step's state goes through this one table.
    /// A step waits (pending), runs, and ends succeeded or failed; a failed step may be retried
    /// or skipped by recovery, a succeeded one run again when recovery modifies it or a step it
    /// depends on; a running one goes back to pending when ocflow stops under it.
    pub fn may_become(self, next: StepState) -> bool {
        use StepState::*;
        matches!(
            (self, next),
            (Pending, Running | Skipped | Pending)
                | (Running, Succeeded | Failed | Pending)
                | (Failed, Pending | Skipped)
                | (Succeeded, Pending)
                | (Skipped, Skipped)
        )
    }
}

impl StepStatus {
    fn become_(&mut self, next: StepState) -> Result<(), IllegalTransition> {
        if !self.status.may_become(next) {
            return Err(IllegalTransition {
                step: self.id.clone(),
                from: self.status,
                to: next,
            });
        }
        self.status = next;
        Ok(())
    }

    /// A new attempt starts; returns its number.
    pub fn start(&mut self, now: String) -> Result<u32, IllegalTransition> {
        self.become_(StepState::Running)?;
        self.attempts += 1;
        self.started_at = Some(now);
        self.finished_at = None;
        self.duration_ms = None;
        self.error = None;
        self.message = None;
        Ok(self.attempts)
    }

    /// The attempt succeeded with these outputs; `sequence` names this version of them.
    pub fn succeed(
        &mut self,
        now: String,
        duration_ms: u64,
        sequence: u64,
        outputs: (Vec<String>, Vec<String>),
        message: String,
    ) -> Result<(), IllegalTransition> {
        self.become_(StepState::Succeeded)?;
        self.finished_at = Some(now);
        self.duration_ms = Some(duration_ms);
        self.sequence = Some(sequence);
        (self.output_files, self.deleted_files) = outputs;
        self.message = Some(message);
        Ok(())
    }

    /// The attempt failed; it produced nothing.
    pub fn fail(
        &mut self,
        now: String,
        duration_ms: u64,
        error: StepError,
    ) -> Result<(), IllegalTransition> {
        self.become_(StepState::Failed)?;
        self.finished_at = Some(now);
        self.duration_ms = Some(duration_ms);
        self.output_files.clear();
        self.deleted_files.clear();
        self.message = Some(error.message.clone());
        self.error = Some(error);
        Ok(())
    }

    /// Back to pending, to run again: a running step whose ocflow stopped, or a failed one
    /// retried. The last error stays on record until the next attempt starts.
    pub fn requeue(&mut self, reason: Option<&str>) -> Result<(), IllegalTransition> {
        self.become_(StepState::Pending)?;
        if let Some(reason) = reason {
            self.message = Some(reason.to_string());
        }
        Ok(())
    }

    /// A transient failure retried automatically, without asking the LLM.
    pub fn retry_transient(&mut self) -> Result<u32, IllegalTransition> {
        self.requeue(None)?;
        self.auto_retries += 1;
        Ok(self.auto_retries)
    }

    /// Back to pending after a recovery decision; earlier outputs no longer count.
    pub fn reset(&mut self, reason: &str) -> Result<(), IllegalTransition> {
        self.become_(StepState::Pending)?;
        self.error = None;
        self.message = Some(reason.to_string());
        self.sequence = None;
        self.output_files.clear();
        self.deleted_files.clear();
        Ok(())
    }

    /// Skipped by a recovery decision (or because a step it needs was), saying why.
    pub fn skip(&mut self, reason: String) -> Result<(), IllegalTransition> {
        self.become_(StepState::Skipped)?;
        self.message = Some(reason);
        Ok(())
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A recovery in progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingRecovery {
    /// The failed step.
    pub step: String,
    /// The decision, once the LLM has given a valid one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
}

/// One strategy decided for a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecoveryRecord {
    pub strategy: StrategyKind,
    pub reason: String,
    /// Strategy and parameters: the same twice for one step is stuck.
    pub signature: String,
    /// The flow revision it produced, for `modify`, `alternative` and `replan`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u32>,
    pub at: String,
}

/// The kind of a step's error when the workspace's disk filled up.
pub const NO_SPACE_KIND: &str = "no_space";

/// The kind of a step's error when the model refused to serve its call (a refused key, a wrong
/// URL or model, no quota): the step did nothing wrong, and a plain `resume` runs it again once
/// the user fixed that.
pub const LLM_UNUSABLE_KIND: &str = "llm_unusable";

/// A failed attempt's error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepError {
    /// `failure` (the library reported it), `exception` (the library raised), `engine`
    /// (ocflow could not prepare or record the step), `no_space` (the workspace's disk
    /// filled up) or `llm_unusable` (the model refused its call): a plain `resume` runs a step
    /// of the last two again.
    pub kind: String,
    /// The exception's type, for `exception`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exception_type: Option<String>,
    pub message: String,
    /// The step-directory file holding the full traceback, for `exception`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceback_file: Option<String>,
}

impl StepError {
    /// An error of `kind` (`failure`, `bridge`, `engine`) with its message.
    pub fn new(kind: &str, message: String) -> StepError {
        StepError {
            kind: kind.to_string(),
            exception_type: None,
            message,
            traceback_file: None,
        }
    }
}

impl FlowStatus {
    /// Moves the flow to `next`, refusing a move its table (`FlowState::may_become`) forbids.
    pub fn move_to(&mut self, next: FlowState) -> Result<(), IllegalFlowTransition> {
        if !self.state.may_become(next) {
            return Err(IllegalFlowTransition {
                from: self.state,
                to: next,
            });
        }
        self.state = next;
        Ok(())
    }

    /// A pending entry for a step, as a new flow or a new revision adds it.
    pub fn pending_step(step: &crate::flow::Step) -> StepStatus {
        StepStatus {
            id: step.id.clone(),
            operation: step.operation.clone(),
            role: step.role.clone(),
            profile: None,
            status: StepState::Pending,
            attempts: 0,
            started_at: None,
            finished_at: None,
            duration_ms: None,
            sequence: None,
            output_files: Vec::new(),
            deleted_files: Vec::new(),
            message: None,
            error: None,
            tokens: Usage::default(),
            auto_retries: 0,
            recoveries: Vec::new(),
            feedback: None,
        }
    }

    /// The initial state of a new flow: every step pending.
    pub fn new(task_id: &str, flow: &Flow, repo: &Path) -> FlowStatus {
        let now = now();
        FlowStatus {
            version: STATUS_VERSION,
            task_id: task_id.to_string(),
            task: flow.task.clone(),
            repo: repo.to_path_buf(),
            revision: 1,
            state: FlowState::Running,
            created_at: now.clone(),
            updated_at: now,
            finished_at: None,
            applied_at: None,
            message: None,
            last_sequence: 0,
            recovery_calls: 0,
            replans: 0,
            pending_recovery: None,
            approval: None,
            sandbox: None,
            tokens: Usage::default(),
            journal_offset: 0,
            tokens_by_profile: BTreeMap::new(),
            paused: None,
            budget: BudgetUse::default(),
            memories_used: Vec::new(),
            instructions_used: Vec::new(),
            deliverables: Vec::new(),
            steps: flow.steps.iter().map(FlowStatus::pending_step).collect(),
            index: StepIndex::default(),
        }
    }

    /// Notes failure memories a prompt of this flow carried; each id is named once.
    pub fn use_memories(&mut self, ids: &[i64]) {
        for id in ids {
            if !self.memories_used.contains(id) {
                self.memories_used.push(*id);
            }
        }
    }

    /// Records instruction files as used, each once, in the order first used.
    pub fn use_instructions(&mut self, paths: &[String]) {
        for path in paths {
            if !self.instructions_used.contains(path) {
                self.instructions_used.push(path.clone());
            }
        }
    }

    /// Counts tokens a profile's model used for the flow.
    pub fn count_tokens(&mut self, profile: &str, used: &Usage) {
        self.tokens.add(used);
        if used.calls > 0 || used.total_tokens > 0 {
            self.tokens_by_profile
                .entry(profile.to_string())
                .or_default()
                .add(used);
        }
    }

    /// The tokens of each model profile, in words, when a profile besides the default one
    /// was used.
    pub fn profiles_used(&self) -> Option<String> {
        let profiles = &self.tokens_by_profile;
        if profiles.keys().all(|p| p == DEFAULT_PROFILE) {
            return None;
        }
        let each: Vec<String> = profiles
            .iter()
            .map(|(name, used)| format!("{name} {} in {} call(s)", used.total_tokens, used.calls))
            .collect();
        Some(each.join(", "))
    }

    /// The step with this id; found through the index, not by a search.
    pub fn step(&self, id: &str) -> Option<&StepStatus> {
        let position = self.index.position(&self.steps, id)?;
        self.steps.get(position)
    }

    pub fn step_mut(&mut self, id: &str) -> Option<&mut StepStatus> {
        let position = self.index.position_mut(&self.steps, id)?;
        self.steps.get_mut(position)
    }

    /// The steps that succeeded, in flow order.
    pub fn succeeded(&self) -> Vec<&StepStatus> {
        self.steps
            .iter()
            .filter(|s| s.status == StepState::Succeeded)
            .collect()
    }

    /// Why the flow did not succeed, in one line: the flow's own message (planning failed, a
    /// limit, an abort) or the first failed step's; `None` when it succeeded or still runs.
    pub fn failure_reason(&self) -> Option<String> {
        if matches!(self.state, FlowState::Succeeded | FlowState::Running) {
            return None;
        }
        self.message.clone().or_else(|| {
            self.steps
                .iter()
                .find(|s| s.status == StepState::Failed)
                .map(|step| {
                    let message = step.message.as_deref().unwrap_or("no message");
                    format!("step {} failed: {message}", step.id)
                })
        })
    }

    /// Never reused, even after recovery sets a step back to pending: a sequence number
    /// names one version of a step's outputs.
    pub fn next_sequence(&self) -> u64 {
        self.steps
            .iter()
            .filter_map(|s| s.sequence)
            .max()
            .unwrap_or(0)
            .max(self.last_sequence)
            + 1
    }
}

impl fmt::Display for FlowState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FlowState::Running => "running",
            FlowState::Succeeded => "succeeded",
            FlowState::Failed => "failed",
            FlowState::Interrupted => "interrupted",
            FlowState::NoChange => "no_change",
            FlowState::Paused => "paused",
            FlowState::Waiting => "waiting",
        })
    }
}

impl fmt::Display for StepState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StepState::Pending => "pending",
            StepState::Running => "running",
            StepState::Succeeded => "succeeded",
            StepState::Failed => "failed",
            StepState::Skipped => "skipped",
        })
    }
}

/// The current time, RFC 3339 in UTC with milliseconds.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_in(state: FlowState) -> FlowStatus {
        let flow = Flow {
            version: crate::flow::FLOW_VERSION,
            task: "t".into(),
            steps: Vec::new(),
            deliverables: None,
        };
        let mut status = FlowStatus::new("t1", &flow, Path::new("/repo"));
        status.state = state;
        status
    }

    const ALL: [FlowState; 7] = [
        FlowState::Running,
        FlowState::Succeeded,
        FlowState::Failed,
        FlowState::Interrupted,
        FlowState::NoChange,
        FlowState::Paused,
        FlowState::Waiting,
    ];

    #[test]
    fn the_flow_s_transitions_follow_its_table() {
        use FlowState::*;
        // A run or a resume may start from any state, and a stop (a signal, an engine error,
        // a snapshot that failed) may come in any; only a running flow ends by itself.
        for from in ALL {
            for to in [Running, Failed, Interrupted] {
                assert!(from.may_become(to), "{from} -> {to}");
            }
        }
        for to in [Succeeded, NoChange, Paused] {
            assert!(Running.may_become(to), "running -> {to}");
            for from in [Succeeded, Failed, Interrupted, NoChange, Paused] {
                assert!(!from.may_become(to), "{from} -> {to}");
            }
        }
    }

    /// A flow waits for a person only while it runs (a plan, a risky command) or once it
    /// succeeded (its apply); a waiting flow that is approved runs, or is succeeded again.
    #[test]
    fn only_a_running_or_succeeded_flow_waits_for_a_person() {
        use FlowState::*;
        for from in ALL {
            let may = matches!(from, Running | Succeeded);
            assert_eq!(from.may_become(Waiting), may, "{from} -> waiting");
        }
        assert!(Waiting.may_become(Running) && Waiting.may_become(Succeeded));
        assert!(!Waiting.may_become(NoChange));
    }

    #[test]
    fn an_illegal_move_of_the_flow_is_refused_and_changes_nothing() {
        let mut status = status_in(FlowState::Interrupted);
        let refused = status.move_to(FlowState::Succeeded);
        assert_eq!(
            refused,
            Err(IllegalFlowTransition {
                from: FlowState::Interrupted,
                to: FlowState::Succeeded
            })
        );
        assert_eq!(status.state, FlowState::Interrupted);
        assert_eq!(
            refused.unwrap_err().to_string(),
            "the flow cannot go from interrupted to succeeded"
        );
        let mut status = status_in(FlowState::Failed);
        assert_eq!(status.move_to(FlowState::Running), Ok(()));
        assert_eq!(status.state, FlowState::Running);
        assert_eq!(status.move_to(FlowState::NoChange), Ok(()));
        assert_eq!(status.state, FlowState::NoChange);
    }

    fn pending(id: &str) -> StepStatus {
        FlowStatus::pending_step(&crate::flow::Step {
            id: id.into(),
            operation: "read_file".into(),
            role: None,
            description: None,
            params: Default::default(),
            depends_on: Vec::new(),
            final_answer: false,
            profile: None,
            model: None,
        })
    }

    /// `steps` is public: whatever is done to it, `step` and `step_mut` find what a search
    /// through it would find, though they look steps up through an index.
    #[test]
    fn a_step_is_found_however_the_steps_were_changed() {
        let mut status = status_in(FlowState::Running);
        status.steps = ["a", "b", "c"].map(pending).to_vec();
        assert_eq!(status.step("b").map(|s| s.id.as_str()), Some("b"));
        status.steps.reverse();
        status.steps.remove(0);
        assert_eq!(status.step("c"), None);
        assert_eq!(status.step("a").map(|s| s.id.as_str()), Some("a"));
        status.steps.push(pending("d"));
        status.steps.insert(0, pending("e"));
        for id in ["a", "b", "d", "e"] {
            let found = status.steps.iter().position(|s| s.id == id);
            assert_eq!(
                status.steps.iter().position(|s| Some(s) == status.step(id)),
                found
            );
        }
        status.step_mut("d").unwrap().attempts = 3;
        assert_eq!(status.steps[3].attempts, 3);
        status.steps.clear();
        assert_eq!(status.step_mut("d"), None);
        let copy = status.clone();
        assert_eq!(copy, status);
    }
}
