//! The durable state of a flow: `flow_status.json`, replaced atomically after every change.
//! Resume trusts it; `ocflow status` renders it as a table or JSON.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::flow::Flow;
use crate::llm::client::Usage;
use crate::engine::recovery::{Decision, StrategyKind};
use crate::task::workspace;

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
    /// Which `flow.json` revision is being executed (1 until replanning exists).
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
    /// Tokens used by the whole flow: planning, every step, the summary.
    #[serde(default)]
    pub tokens: Usage,
    /// One entry per step, in flow order.
    pub steps: Vec<StepStatus>,
}

/// Where a flow stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowState {
    Running,
    Succeeded,
    Failed,
    /// Stopped by Ctrl-C or SIGTERM; `resume` continues.
    Interrupted,
}

/// Where a step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    #[serde(default)]
    pub output_files: Vec<String>,
    /// Repository-relative files the step deleted.
    #[serde(default)]
    pub deleted_files: Vec<String>,
    /// The last attempt's message, one sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Why the last attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StepError>,
    /// Tokens the step's LLM calls used, over all its attempts.
    #[serde(default)]
    pub tokens: Usage,
    /// Automatic retries after transient failures (no LLM asked).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub auto_retries: u32,
    /// The recovery strategies decided for this step, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recoveries: Vec<RecoveryRecord>,
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

/// A failed attempt's error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepError {
    /// `failure` (the library reported it), `exception` (the library raised), or `engine`
    /// (ocflow could not prepare or record the step).
    pub kind: String,
    /// The exception's type, for `exception`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exception_type: Option<String>,
    pub message: String,
    /// The step-directory file holding the full traceback, for `exception`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceback_file: Option<String>,
}

impl FlowStatus {
    /// A pending entry for a step, as a new flow or a new revision adds it.
    pub fn pending_step(step: &crate::model::flow::Step) -> StepStatus {
        StepStatus {
            id: step.id.clone(),
            operation: step.operation.clone(),
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
            tokens: Usage::default(),
            steps: flow.steps.iter().map(FlowStatus::pending_step).collect(),
        }
    }

    /// Reads a status file, refusing versions and shapes this build does not know.
    pub fn load(path: &Path) -> Result<FlowStatus> {
        let bytes = std::fs::read(path).map_err(|err| Error::BadStateFile {
            path: path.to_path_buf(),
            problem: format!("cannot read it: {err}"),
        })?;
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|err| Error::BadStateFile {
                path: path.to_path_buf(),
                problem: format!("not valid JSON ({err}); it was edited or damaged outside ocflow"),
            })?;
        match value.get("version").and_then(serde_json::Value::as_u64) {
            Some(v) if v == u64::from(STATUS_VERSION) => {}
            Some(v) => {
                return Err(Error::BadStateFile {
                    path: path.to_path_buf(),
                    problem: format!(
                        "status format version {v} is not supported by this ocflow (it reads version {STATUS_VERSION}); use the ocflow that wrote it"
                    ),
                });
            }
            None => {
                return Err(Error::BadStateFile {
                    path: path.to_path_buf(),
                    problem: "no `version` field; this is not a flow_status.json written by ocflow"
                        .into(),
                });
            }
        }
        serde_json::from_value(value).map_err(|err| Error::BadStateFile {
            path: path.to_path_buf(),
            problem: format!("unexpected content ({err}); it was edited or damaged outside ocflow"),
        })
    }

    /// Writes the status atomically, stamping `updated_at`.
    pub fn save(&mut self, path: &Path) -> Result<()> {
        self.updated_at = now();
        workspace::write_json_atomic(path, self)
    }

    pub fn step(&self, id: &str) -> Option<&StepStatus> {
        self.steps.iter().find(|s| s.id == id)
    }

    pub fn step_mut(&mut self, id: &str) -> Option<&mut StepStatus> {
        self.steps.iter_mut().find(|s| s.id == id)
    }

    /// The steps that succeeded, in flow order.
    pub fn succeeded(&self) -> Vec<&StepStatus> {
        self.steps
            .iter()
            .filter(|s| s.status == StepState::Succeeded)
            .collect()
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

    /// A table for people: one line per step.
    pub fn render_table(&self) -> String {
        let mut out = format!(
            "task {}  [{}]  revision {}\n{}\nrepository {}\ntokens {} (prompt {}, completion {}) in {} LLM call(s)\n\n",
            self.task_id,
            self.state,
            self.revision,
            self.task,
            self.repo.display(),
            self.tokens.total_tokens,
            self.tokens.prompt_tokens,
            self.tokens.completion_tokens,
            self.tokens.calls
        );
        let running: Vec<&str> = self
            .steps
            .iter()
            .filter(|s| s.status == StepState::Running)
            .map(|s| s.id.as_str())
            .collect();
        if !running.is_empty() {
            out.push_str(&format!(
                "running now ({} at once): {}\n\n",
                running.len(),
                running.join(", ")
            ));
        }
        let width = self
            .steps
            .iter()
            .map(|s| s.id.len())
            .max()
            .unwrap_or(4)
            .max(4);
        out.push_str(&format!(
            "{:<width$}  {:<22}  {:<9}  {:>8}  {:>9}  {:>7}  {}\n",
            "STEP", "OPERATION", "STATUS", "ATTEMPTS", "TIME", "TOKENS", "MESSAGE"
        ));
        for step in &self.steps {
            let time = step
                .duration_ms
                .map(|ms| format!("{:.2}s", ms as f64 / 1000.0))
                .unwrap_or_else(|| "-".into());
            let message = step
                .error
                .as_ref()
                .map(|e| e.message.as_str())
                .or(step.message.as_deref())
                .unwrap_or("");
            let message: String = message
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(80)
                .collect();
            let tokens = if step.tokens.is_zero() {
                "-".to_string()
            } else {
                step.tokens.total_tokens.to_string()
            };
            out.push_str(&format!(
                "{:<width$}  {:<22}  {:<9}  {:>8}  {:>9}  {:>7}  {}\n",
                step.id,
                step.operation,
                step.status.to_string(),
                step.attempts,
                time,
                tokens,
                message
            ));
        }
        out
    }
}

impl fmt::Display for FlowState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FlowState::Running => "running",
            FlowState::Succeeded => "succeeded",
            FlowState::Failed => "failed",
            FlowState::Interrupted => "interrupted",
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
