//! One flow of a batch, whichever engine runs it (`local.rs`, `ray.rs`): the job, what every
//! flow shares, how the engines report their ends, and a flow's result read from its task
//! directory or from a Ray worker's answer.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ocflow_core::llm::key::KEY_FILE_VARIABLE;
use ocflow_model::error::{Error, Result};
use ocflow_model::llm::Usage;
use ocflow_model::status::{FlowState, FlowStatus};

use crate::cli::batch::display::Reporter;
use crate::cli::batch::results::{self, TaskResult};
use crate::cli::batch::tasks_file::{BatchTask, RepoSource};

/// The environment variables that may hold the real key (the client's, and the key file's): no
/// flow inherits them (the driver gave its own up at start-up already; a wrapper may have set
/// them again).
pub(crate) fn key_variables() -> impl Iterator<Item = &'static str> {
    ocflow_core::llm::key::KEY_VARIABLES
        .iter()
        .copied()
        .chain([KEY_FILE_VARIABLE])
}

/// One flow the batch runs now: its task, and whether it continues an earlier run's.
#[derive(Debug, Clone)]
pub(crate) struct FlowJob {
    pub(crate) task: BatchTask,
    /// The unfinished task directory an earlier run left: `ocflow resume` continues it.
    pub(crate) resume: bool,
    /// `DIR/workspace/ID`.
    pub(crate) task_dir: PathBuf,
    /// The gate's base URL for this task's endpoint, when the batch runs a gate.
    pub(crate) gate_url: Option<String>,
}

/// Where a flow's ocflow runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// A child process of this ocflow.
    Local,
    /// A Ray task, on any node of the cluster.
    Ray,
}

/// What every flow of the batch shares.
#[derive(Clone)]
pub(crate) struct Context {
    pub(crate) out: PathBuf,
    /// `DIR/workspace`, where the flows' task directories live.
    pub(crate) workspace: PathBuf,
    /// This binary: each flow runs it.
    pub(crate) exe: PathBuf,
    /// Flows at once.
    pub(crate) flows: usize,
    /// `--jobs`, handed to each flow.
    pub(crate) jobs: Option<usize>,
    /// Global flags handed to each flow (`--model`, `--codex-lib`, `--python-dir`).
    pub(crate) forwarded: Vec<OsString>,
    /// Each flow's budget flags and `--no-memory`, handed to its `run` and its `resume` alike.
    pub(crate) run_flags: Vec<OsString>,
    /// The per-batch token flows present to the gate instead of the key.
    pub(crate) token: Option<String>,
    pub(crate) reporter: Arc<Reporter>,
    /// `--json`: the flows' events go to stdout, tagged.
    pub(crate) json: bool,
}

impl FlowJob {
    /// The flow's command line without the binary: `ocflow run` of a new flow, or `ocflow
    /// resume` of an unfinished one. On this machine (`Placement::Local`) it names the
    /// repository, the workspace, the plan file and the gate's URL (as `--base-url`); on Ray
    /// they are fields of the request, put in by the runner as its node sees them (a clone and
    /// its workspace live on the node, the plan travels with the task), and the gate's URL is
    /// in the worker's environment.
    pub(crate) fn argv(
        &self,
        context: &Context,
        resume: bool,
        placement: Placement,
    ) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec!["--json".into()];
        let local = placement == Placement::Local;
        if local {
            let repo: OsString = match &self.task.repo {
                RepoSource::Path(path) => path.into(),
                RepoSource::Git { url, .. } => url.into(),
            };
            argv.extend(["--repo".into(), repo]);
            argv.extend(["--workspace".into(), context.workspace.clone().into()]);
        }
        argv.extend(context.forwarded.iter().cloned());
        if local && let Some(url) = &self.gate_url {
            argv.extend(["--base-url".into(), url.into()]);
        }
        if let Some(model) = &self.task.model {
            argv.extend(["--model".into(), model.into()]);
        }
        if resume {
            // By id in `--workspace`: a Ray worker's workspace may lie elsewhere.
            argv.extend(["resume".into(), self.task.id.clone().into()]);
        } else {
            argv.extend([
                "run".into(),
                "--task-id".into(),
                self.task.id.clone().into(),
            ]);
            if local && let Some(plan) = &self.task.plan {
                argv.extend(["--plan".into(), plan.into()]);
            }
        }
        if let Some(jobs) = context.jobs {
            argv.extend(["--jobs".into(), jobs.to_string().into()]);
        }
        argv.extend(context.run_flags.iter().cloned());
        if !resume {
            // The task comes on the flow's stdin (`stdin_text`): a task of any length passes
            // (one over 128 KiB as an argument stopped the whole batch with "Argument list too
            // long"), and a task over ocflow's own limit fails its flow alone.
            argv.push("-".into());
        }
        argv
    }

    /// What the flow reads on its stdin: the task, for a run (a resume reads nothing).
    pub(crate) fn stdin_text(&self, resume: bool) -> Option<&str> {
        (!resume).then_some(self.task.task.as_str())
    }

    /// The environment a flow gets on top of the driver's: the gate and its token as the
    /// endpoint and key (the real key never reaches a flow).
    pub(crate) fn env(&self, context: &Context) -> Vec<(String, String)> {
        let mut env = Vec::new();
        if let (Some(url), Some(token)) = (&self.gate_url, &context.token) {
            env.push(("OCFLOW_BASE_URL".to_string(), url.clone()));
            env.push(("OCFLOW_API_KEY".to_string(), token.clone()));
        }
        env
    }
}

/// How the flows ended, as the engines report it.
#[derive(Debug, Default)]
pub(crate) struct EngineOutcome {
    /// Tasks the batch finished in this run.
    pub(crate) finished: Vec<TaskResult>,
    /// Tasks left unfinished (a signal stopped them, or a budget): the next run resumes them.
    pub(crate) unfinished: usize,
    /// Of those, the flows a budget paused: a run with a higher budget resumes them.
    pub(crate) paused: usize,
    /// Whether the batch was interrupted (Ctrl-C, SIGTERM).
    pub(crate) interrupted: bool,
}

/// A flow's status file, if it has one that reads.
pub(crate) fn read_status(task_dir: &Path) -> Option<FlowStatus> {
    let text =
        std::fs::read_to_string(task_dir.join(ocflow_core::task::workspace::STATUS_FILE)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Whether a flow in this state is over (a running or interrupted one resumes).
pub(crate) fn finished(state: FlowState) -> bool {
    matches!(
        state,
        FlowState::Succeeded | FlowState::Failed | FlowState::NoChange
    )
}

/// The result of a flow whose process ended, from its task directory; `exit_code` `None`:
/// found finished by a later run. A flow that left no status failed before it began
/// (`fallback_reason` says why, from its error).
pub(crate) fn result_of(
    context: &Context,
    task: &BatchTask,
    task_dir: &Path,
    exit_code: Option<i32>,
    duration_ms: u64,
) -> Result<TaskResult> {
    let Some(status) = read_status(task_dir) else {
        return Ok(TaskResult {
            id: task.id.clone(),
            state: "failed".into(),
            task_dir: task_dir.to_path_buf(),
            exit_code: exit_code.unwrap_or(1),
            tokens: Usage::default(),
            duration_ms,
            files_changed: 0,
            diff: None,
            reason: Some(context.reporter.last_error(&task.id).unwrap_or_else(|| {
                format!(
                    "the flow ended (exit {}) before it began; see {}",
                    exit_code.unwrap_or(1),
                    context
                        .out
                        .join("logs")
                        .join(format!("{}.log", task.id))
                        .display()
                )
            })),
        });
    };
    let diff_text = std::fs::read_to_string(task_dir.join(ocflow_core::task::workspace::DIFF_FILE))
        .unwrap_or_default();
    result_from_status(
        context,
        task,
        task_dir,
        &status,
        &diff_text,
        exit_code,
        duration_ms,
    )
}

/// A result from a flow's status and diff, wherever they came from (its task directory, or a
/// Ray worker's answer).
pub(crate) fn result_from_status(
    context: &Context,
    task: &BatchTask,
    task_dir: &Path,
    status: &FlowStatus,
    diff_text: &str,
    exit_code: Option<i32>,
    duration_ms: u64,
) -> Result<TaskResult> {
    let diff = results::save_diff(&context.out, &task.id, diff_text)
        .map_err(|err| Error::internal(err.to_string()))?;
    let state = serde_json::to_value(status.state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "failed".into());
    Ok(TaskResult {
        id: task.id.clone(),
        state,
        task_dir: task_dir.to_path_buf(),
        exit_code: exit_code.unwrap_or(i32::from(status.state != FlowState::Succeeded)),
        tokens: status.tokens,
        duration_ms,
        files_changed: results::files_in_diff(diff_text),
        diff,
        reason: (status.state != FlowState::Succeeded).then(|| {
            status
                .message
                .clone()
                .unwrap_or_else(|| format!("the flow ended {:?}", status.state))
        }),
    })
}
