//! The executor's loop: walks the flow's dependency graph, starts every ready step (up to
//! `--jobs`) through the bridge off the async runtime, and keeps `flow_status.json` and the
//! journal true after every change. Its parts, under `executor/`: a step's preparation
//! (`preparing`), the views command steps run in (`views`) and their sandbox launcher
//! (`launcher`), a call's outcome checked (`settling`) and recorded (`recording`), what follows
//! a failure (`recovering`), the flow's end (`finishing`), a flow stopped early (`stopping`),
//! and one paused by its budget (`pausing`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::task::JoinSet;

use crate::engine::bridge::{Bridge, CallOutcome, HostLlm, StepLlm};
use crate::engine::dependencies::Dependencies;
use crate::engine::instructions;
use crate::engine::memory::Memory;
use crate::engine::recovery;
use crate::engine::sandbox::SandboxPlan;
use crate::engine::sandbox_probe::PendingSandbox;
use crate::engine::signals::Interrupt;
use crate::flow::graph::FlowGraph;
use crate::flow::operations;
use crate::flow::path_rules::PathRules;
use crate::flow::policy::CommandPolicy;
use crate::llm::budget::Budget;
use crate::llm::client::Llm;
use crate::task::copied_view::CopiedView;
use crate::task::events::Events;
use crate::task::layered_view::LayeredView;
use crate::task::state;
use crate::task::workspace::{self, TaskDir};
use ocflow_model::error::{Error, Result};
use ocflow_model::event::Event;
use ocflow_model::flow::{Flow, Step};
use ocflow_model::llm::{DEFAULT_PROFILE, LlmError, ModelSettings, Usage};
use ocflow_model::repo_path::RepoPath;
use ocflow_model::status::{self, FlowState, FlowStatus, StepError, StepState};
use ocflow_model::step_result::StepResult;
use ocflow_model::step_spec::Limits;

mod approving;
pub mod finishing;
mod hooking;
mod launcher;
pub(crate) mod pausing;
mod preparing;
mod recording;
mod recovering;
mod settling;
mod starting;
pub(crate) mod stopping;
mod view_slots;
mod views;
mod waiting_for_sandbox;

use settling::{Outputs, Settled};
use view_slots::ViewSlot;

/// How a flow ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowOutcome {
    Succeeded,
    Failed,
    Interrupted,
    /// A budget would have been exceeded: saved `paused`, resumable.
    Paused,
    /// A person must approve a recovery (`--approve risky`): saved as `waiting`.
    Waiting,
}

/// Everything a step run needs besides the flow's state.
pub struct Settings {
    /// The LLM for the library's `complete`, when one is configured.
    pub host_llm: Option<Arc<HostLlm>>,
    /// The LLM and model that write the final summary; without it the summary is built from
    /// the journal.
    pub summary_llm: Option<(Arc<Llm>, ModelSettings)>,
    /// Bounds of automatic retries and of recovery.
    pub recovery_limits: recovery::Limits,
    /// Steps run at the same time at most (`--jobs`).
    pub jobs: usize,
    /// How command steps are sandboxed; `None`: not at all.
    pub sandbox: Option<SandboxPlan>,
    /// The plan still probed: `sandbox` once the engine waited for it, before the first
    /// command step (`waiting_for_sandbox`); `None` when `sandbox` is known.
    pub pending_sandbox: Option<PendingSandbox>,
    /// What recovery needs; `None`: a failed step (after transient retries) fails the flow.
    pub recovery: Option<RecoverySettings>,
    pub limits: Limits,
    /// Repository paths no step may produce: the workspace, when it lies inside the repository.
    pub forbidden: Vec<RepoPath>,
    /// The repository's installed dependencies, which command steps see without copies
    /// (`engine::dependencies`).
    pub dependencies: Dependencies,
    /// The flow's budget (the same the LLM client reserves from), when it has one.
    pub budget: Option<Arc<Budget>>,
    /// The repository's failure memory: recalled before recovery, written after it; `None`
    /// with `--no-memory` or without a state directory.
    pub memory: Option<Arc<Memory>>,
    /// Whether a flow that needed recovery ends with the reflection's call (not with
    /// `--no-reflect`).
    pub reflect: bool,
    /// `--approve risky`: the user's policy, under which a recovery that replans, replaces
    /// steps or proposes a flagged command waits for a person; `None`: carried out at once.
    pub approve_risky: Option<CommandPolicy>,
    /// The user's lifecycle hooks (`engine::hooks`): before and after each step, before a
    /// command step's command, at the flow's end.
    pub hooks: crate::engine::hooks::Hooks,
}

/// The LLM side of recovery.
pub struct RecoverySettings {
    pub llm: Arc<Llm>,
    pub model: ModelSettings,
    /// The path rules new steps are validated with.
    pub rules: PathRules,
    /// What the commands of new steps may do.
    pub policy: CommandPolicy,
    /// Who may take the new steps.
    pub roles: crate::flow::roles::Roles,
}

/// What the loop does after a failed step.
enum Next {
    /// Run the next ready step (the failure was retried or recovered).
    Continue,
    /// End the flow.
    Stop,
    /// A signal arrived while waiting.
    Interrupted,
    /// A person must approve the recovery decided (`--approve risky`).
    Waiting,
}

/// Runs one flow to its end (or to the first failure, or an interrupt).
pub struct Executor {
    pub task: TaskDir,
    pub flow: Flow,
    /// `flow`'s dependencies, computed once per revision (`set_flow`).
    graph: Arc<FlowGraph>,
    /// Every step before this position of `flow.steps` has ended (succeeded or skipped): where
    /// `next_ready` starts looking. A hint set back to 0 whenever a step may have gone back to
    /// pending (a recovery, a new revision).
    ready_from: usize,
    pub status: FlowStatus,
    pub events: Events,
    bridge: Arc<Bridge>,
    settings: Settings,
    interrupt: Arc<Interrupt>,
    /// Views for command steps: one per command step running at the same time, reused.
    views: Vec<CopiedView>,
    /// Views made of layers, for the built-in commands under an overlay (`layered_view.rs`).
    layered: Vec<LayeredView>,
    free_views: Vec<ViewSlot>,
    /// The view each command step last ran in.
    view_of_step: HashMap<String, ViewSlot>,
    /// The results of steps that just failed, for the decision that follows (read once).
    failed_results: HashMap<String, StepResult>,
    /// Steps that run in a copied view, not one made of layers: the overlay refused to rename
    /// a directory for them.
    copy_views: HashSet<String>,
    /// Whether overlays work in the task's directory, once asked (`SandboxPlan::overlay_works_in`).
    overlay_works: Option<bool>,
    /// When the status was last written, and the journal's bytes then.
    checkpoint: Checkpoint,
    /// The LLM error that ended the flow: the model refused a call (a step's, recovery's, the
    /// summary's), or no retry could reach it. The caller tells its own caller, with the fix.
    llm_failure: Option<LlmError>,
    /// Whether recovery decided a strategy in this run (not one before a resume): the flow's
    /// end then reflects on it (`reflection`), once.
    recovered_in_this_run: bool,
}

/// When the status file is written again. The journal is the write-ahead log: a step started
/// or succeeded is appended there, and `state::load_status` replays those onto the status; the
/// status is rewritten at every other change (a failure, a recovery, the flow's end). A step
/// started or succeeded reaches the file too, within `STATUS_LAG`, because people and tools
/// (the seeds, OpenHands) read the file to know where a flow is: a small status is rewritten at
/// each such change, a larger one by time, just often enough to stay within `STATUS_LAG`, so that
/// a fast flow does not rewrite a 300 KB file at each of its 2000 changes (see `status_gap`).
#[derive(Debug)]
struct Checkpoint {
    /// When the status was last written.
    at: Instant,
    /// How long writing it took (the file system's flush: milliseconds on a quiet machine,
    /// hundreds under others' writes).
    took: Duration,
    /// How long after it was due that write started: the loop's own delay (a step's end
    /// handled, a flush of its own) on top of the timer's.
    late: Duration,
    /// Its size then.
    status_bytes: u64,
    /// Since when the journal holds a change the file does not.
    behind_since: Option<Instant>,
}

/// The longest the status file may lag the journal while steps run (issue 28 §3).
const STATUS_LAG: Duration = Duration::from_secs(1);
/// The least time between two writes of a large status: its bytes stay bounded.
const STATUS_MIN_GAP: Duration = Duration::from_millis(200);
/// What the gap leaves besides the measured delays, for a delay not seen before.
const STATUS_SLACK: Duration = Duration::from_millis(100);
/// A status this small is rewritten at each change, or once for the changes of a burst (steps
/// that end together and the steps they free): its bytes stay a few times the journal's.
const SMALL_STATUS_BYTES: u64 = 16 * 1024;
/// How long the changes after a small status's write wait to be written together: eight
/// parallel steps ending and eight starting cost one write instead of sixteen, each a flush of
/// the file system on the loop that starts the next steps (issue 28 §4).
const STATUS_BURST: Duration = Duration::from_millis(20);

/// How a step's thread ended: its call's outcome, settled there for a file step.
enum Ended {
    Called(CallOutcome),
    Settled(Result<Settled>),
}

/// A step that is running.
struct Running {
    step: Step,
    attempt: u32,
    started: Instant,
    tokens_before: Usage,
    view: Option<ViewSlot>,
}

impl Executor {
    pub fn new(
        task: TaskDir,
        flow: Flow,
        status: FlowStatus,
        events: Events,
        bridge: Arc<Bridge>,
        settings: Settings,
        interrupt: Arc<Interrupt>,
    ) -> Executor {
        Executor {
            task,
            graph: Arc::new(FlowGraph::new(&flow)),
            flow,
            ready_from: 0,
            status,
            events,
            bridge,
            settings,
            interrupt,
            views: Vec::new(),
            layered: Vec::new(),
            free_views: Vec::new(),
            view_of_step: HashMap::new(),
            failed_results: HashMap::new(),
            copy_views: HashSet::new(),
            overlay_works: None,
            checkpoint: Checkpoint {
                at: Instant::now(),
                took: Duration::ZERO,
                late: Duration::ZERO,
                status_bytes: 0,
                behind_since: None,
            },
            llm_failure: None,
            recovered_in_this_run: false,
        }
    }

    /// Why the flow ended when the model could not be used (see `llm_failure`): what the
    /// caller reports as the command's error, after `flow_finished`.
    pub fn llm_failure(&self) -> Option<&LlmError> {
        self.llm_failure.as_ref()
    }

    /// Runs every pending step whose dependencies succeeded, in flow order, until none is
    /// left, one fails, or an interrupt arrives. Leaves the state saved either way.
    pub async fn run(&mut self) -> Result<FlowOutcome> {
        self.status.move_to(FlowState::Running)?;
        self.save()?;
        // A recovery that a crash interrupted is finished first.
        if let Some(pending) = self.status.pending_recovery.clone() {
            match self.recover(&pending.step).await? {
                Next::Continue => {}
                Next::Stop => return self.finish_flow().await,
                Next::Interrupted => return self.interrupted(&[]),
                Next::Waiting => return Ok(FlowOutcome::Waiting),
            }
        }
        let mut heartbeat = tokio::time::interval_at(
            tokio::time::Instant::now() + crate::task::events::HEARTBEAT,
            crate::task::events::HEARTBEAT,
        );
        let mut running: JoinSet<Ended> = JoinSet::new();
        let mut in_flight: HashMap<tokio::task::Id, Running> = HashMap::new();
        let mut failures: Vec<Step> = Vec::new();
        loop {
            if self.interrupt.is_raised() {
                return self.interrupted_all(&in_flight);
            }
            self.announce_budget()?;
            // Once a budget is spent no step starts: those running finish, then the flow
            // pauses (`finish_flow`).
            let spent = self.budget_exceeded().is_some();
            // Start every ready step, up to --jobs at once; none while a failure waits for its
            // recovery decision.
            while failures.is_empty() && !spent && running.len() < self.settings.jobs.max(1) {
                let Some(step) = self.next_ready() else { break };
                // A step in a view (a command step) needs the sandbox's plan: waited for here,
                // so a probe that failed stops the flow before any command starts. A step that
                // takes only its files (an LLM step) starts without it.
                if operations::needs_sandbox(&step) {
                    self.wait_for_sandbox().await?;
                }
                let attempt = self.start(&step)?;
                // The user's hooks before the step (and its command): one that blocks fails
                // the step with its reason, which a recovery sees.
                if let Err(blocked) = self.hooks_before(&step) {
                    let error = StepError::new("hook", blocked.to_string());
                    self.finish_failed(&step, attempt, Instant::now(), error)?;
                    failures.push(step);
                    continue;
                }
                let prepared = match self.prepare(&step) {
                    Ok(prepared) => prepared,
                    Err(Error::Interrupted) => return Err(Error::Interrupted),
                    Err(err) => {
                        let error = if err.is_no_space() {
                            // `prepare` has set its view back already.
                            self.drop_command_writes(&step, None)?;
                            self.no_space_error(Some(&err))
                        } else {
                            StepError::new("engine", format!("{err}"))
                        };
                        self.finish_failed(&step, attempt, Instant::now(), error)?;
                        failures.push(step);
                        continue;
                    }
                };
                let bridge = self.bridge.clone();
                let host = self.step_llm(&step);
                let llm_config = host.as_ref().map_or_else(|| json!({}), StepLlm::config);
                let tokens_before = self.step_tokens_so_far(&step.id);
                let (instructions, log) = (prepared.instructions, prepared.log);
                // A file step is settled on its own thread (see `settling`); a command step
                // once its view is captured.
                let settle_here = prepared
                    .view
                    .is_none()
                    .then(|| (self.task.clone(), step.clone()));
                let handle = running.spawn_blocking(move || {
                    let outcome = bridge.execute(&instructions, &llm_config, &log, host);
                    match settle_here {
                        Some((task, step)) => Ended::Settled(settling::settle(
                            &task,
                            &step,
                            outcome,
                            Outputs::Written,
                        )),
                        None => Ended::Called(outcome),
                    }
                });
                in_flight.insert(
                    handle.id(),
                    Running {
                        step,
                        attempt,
                        started: Instant::now(),
                        tokens_before,
                        view: prepared.view,
                    },
                );
            }
            // A flow given with `--plan` starts its sandbox probe here, once its first steps
            // are on their way: their LLM calls leave the processors idle (the engine waits
            // for it before a command step, and at the end for the record).
            if let Some(pending) = &self.settings.pending_sandbox
                && self.has_command_steps()
            {
                pending.probe.begin();
            }
            if running.is_empty() {
                // Everything started has been recorded; now the failures, one at a time.
                if failures.is_empty() {
                    break;
                }
                let step = failures.remove(0);
                // An earlier recovery may have reset or dropped this step meanwhile.
                let still_failed = self.flow.step(&step.id).is_some()
                    && self
                        .status
                        .step(&step.id)
                        .is_some_and(|s| s.status == StepState::Failed);
                if !still_failed {
                    continue;
                }
                match self.after_failure(&step).await? {
                    Next::Continue => continue,
                    Next::Stop => break,
                    Next::Interrupted => return self.interrupted_all(&in_flight),
                    // Nothing runs while a failure is recovered: the flow stops here whole.
                    Next::Waiting => return Ok(FlowOutcome::Waiting),
                }
            }
            let interrupt = self.interrupt.clone();
            // Wakes the loop when the time budget runs out (then it waits no more on it).
            let budget = self.settings.budget.clone().filter(|_| !spent);
            let budget_stops = async {
                match &budget {
                    Some(budget) => budget.stopped().await,
                    None => std::future::pending().await,
                }
            };
            // Far off when nothing is owed: the branch below is then never taken.
            let status_due = self.status_due();
            let due = status_due
                .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
            let joined = tokio::select! {
                joined = running.join_next_with_id() => joined,
                () = interrupt.wait() => return self.interrupted_all(&in_flight),
                () = budget_stops => continue,
                () = tokio::time::sleep_until(due), if status_due.is_some() => {
                    self.save()?;
                    continue;
                }
                _ = heartbeat.tick() => {
                    let names = in_flight.values().map(|r| r.step.id.clone()).collect();
                    self.events.pulse().beat("running", names, self.status.tokens);
                    continue;
                }
            };
            let (id, ended) = match joined {
                Some(Ok((id, ended))) => (id, ended),
                Some(Err(err)) => (
                    err.id(),
                    Ended::Called(CallOutcome::Garbage {
                        message: format!("the step's thread failed: {err}"),
                    }),
                ),
                None => continue,
            };
            // A step that ended as ocflow is stopping (its command killed by the same signal)
            // ended for the stop, not on its own: it runs again on resume, as the steps still
            // running do, never recorded failed or finished.
            if crate::task::interrupt::raised() {
                return self.interrupted_all(&in_flight);
            }
            let Some(done) = in_flight.remove(&id) else {
                continue;
            };
            self.count_tokens(&done.step.id, done.tokens_before);
            let succeeded = self.record(&done, ended)?;
            if let Some(view) = done.view {
                self.free_views.push(view);
            }
            if !succeeded {
                failures.push(done.step);
            }
        }
        self.finish_flow().await
    }

    /// Tokens the LLM has counted for a step in this process.
    fn step_tokens_so_far(&self, step: &str) -> Usage {
        self.settings
            .host_llm
            .as_ref()
            .map(|host| host.llm.usage_for(step))
            .unwrap_or_default()
    }

    /// Adds what a step's attempt used to the step's and the flow's totals (saved with the
    /// step's outcome).
    fn count_tokens(&mut self, step: &str, before: Usage) {
        let used = self.step_tokens_so_far(step).since(&before);
        let mut profile = None;
        if let Some(entry) = self.status.step_mut(step) {
            entry.tokens.add(&used);
            profile = entry.profile.clone();
        }
        let profile = profile.unwrap_or_else(|| DEFAULT_PROFILE.to_string());
        self.status.count_tokens(&profile, &used);
    }

    /// The first pending step (in flow order) whose dependencies all succeeded. The steps
    /// before `ready_from` have all ended, so the search starts there, not at the flow's first
    /// step (on a chain, the search from the start grew with every step done).
    fn next_ready(&mut self) -> Option<Step> {
        let ended = |state: StepState| matches!(state, StepState::Succeeded | StepState::Skipped);
        let mut first_not_ended = None;
        let mut found = None;
        for (position, step) in self.flow.steps.iter().enumerate().skip(self.ready_from) {
            let state = self.status.step(&step.id).map(|s| s.status);
            if first_not_ended.is_none() && !state.is_some_and(ended) {
                first_not_ended = Some(position);
            }
            if state == Some(StepState::Pending)
                && step.depends_on.iter().all(|dep| {
                    self.status
                        .step(dep)
                        .is_some_and(|d| d.status == StepState::Succeeded)
                })
            {
                found = Some(step.clone());
                break;
            }
        }
        self.ready_from = first_not_ended.unwrap_or(self.flow.steps.len());
        found
    }

    /// Makes `flow` the one that runs (a recovery's revision): its graph is computed again and
    /// the search for ready steps starts over.
    pub(super) fn set_flow(&mut self, flow: Flow) {
        self.graph = Arc::new(FlowGraph::new(&flow));
        self.flow = flow;
        self.ready_from = 0;
    }

    /// The model a step asks through the library's `complete`: its role's, or the
    /// operations' one.
    /// The repository's instructions it is shown are those for the file it works on (a
    /// command step's: the root's), and a step recovery runs again is told why.
    fn step_llm(&self, step: &Step) -> Option<StepLlm> {
        let host = self.settings.host_llm.as_ref()?;
        let target = instructions::staged_paths(step).into_iter().next();
        let mut llm = host.for_step(step, target.as_ref());
        llm.feedback = self.status.step(&step.id).and_then(|s| s.feedback.clone());
        Some(llm)
    }

    /// Marks the step running and counts the attempt.
    fn start(&mut self, step: &Step) -> Result<u32> {
        // The step's model profile (its role's), for the record and its tokens; the model,
        // for a step that asks one.
        let step_llm = self.step_llm(step);
        let needs_llm = operations::step_needs_llm(&step.operation, &step.params);
        if let Some(used) = step_llm.as_ref().and_then(|l| l.conventions.as_ref())
            && needs_llm
        {
            self.status.use_instructions(&used.paths);
        }
        let settings = step_llm.map(|host| host.settings);
        let profile = settings.as_ref().map(|m| m.profile.clone());
        let model = settings.filter(|_| needs_llm).map(|m| m.model);
        let entry = self
            .status
            .step_mut(&step.id)
            .ok_or_else(|| missing_step(&self.task, &step.id))?;
        let attempt = entry.start(status::now())?;
        entry.profile = profile.clone();
        // Journaled; the file follows within `STATUS_LAG` (see `Checkpoint`).
        self.events.emit(Event::StepStarted {
            step: step.id.clone(),
            operation: step.operation.clone(),
            attempt,
            role: step.role.clone(),
            profile,
            model,
        })?;
        self.save_when_due()?;
        Ok(attempt)
    }

    /// Writes the status now (every change but a step started or succeeded).
    fn save(&mut self) -> Result<()> {
        if let Some(budget) = &self.settings.budget {
            self.status.budget = budget.usage();
        }
        let started = Instant::now();
        let late = self
            .status_due_at()
            .map_or(Duration::ZERO, |due| started.saturating_duration_since(due));
        let status_bytes = state::save_status(&self.task, &mut self.status)?;
        self.checkpoint = Checkpoint {
            at: Instant::now(),
            took: started.elapsed(),
            late,
            status_bytes,
            behind_since: None,
        };
        Ok(())
    }

    /// After a change only the journal holds (a step started or succeeded): writes the status
    /// now when its next write is due, else leaves it to the loop's timer.
    fn save_when_due(&mut self) -> Result<()> {
        self.checkpoint
            .behind_since
            .get_or_insert_with(Instant::now);
        if self.checkpoint.at.elapsed() >= self.status_gap() {
            self.save()?;
        }
        Ok(())
    }

    /// How long after a write the next one starts, so that it ends within `STATUS_LAG` of a
    /// change made right after the last: the lag less twice what the last write took and how
    /// late it started (a loaded machine's flushes and the loop's delays vary, and the gap
    /// follows them), and a little slack. No more often than that: each write is the whole
    /// file, so a long fast flow's bytes grow with how often it is written (issue 28 §2).
    fn status_gap(&self) -> Duration {
        if self.checkpoint.status_bytes <= SMALL_STATUS_BYTES {
            return STATUS_BURST;
        }
        let margin = (self.checkpoint.took + self.checkpoint.late) * 2 + STATUS_SLACK;
        STATUS_LAG.saturating_sub(margin).max(STATUS_MIN_GAP)
    }

    /// When the status file must be written to stay within `STATUS_LAG` of the journal, or
    /// `None` while it holds everything: a gap after the last write, and never before the first
    /// change it lacks (a change after a long quiet spell is written at once, and not late).
    fn status_due_at(&self) -> Option<Instant> {
        self.checkpoint
            .behind_since
            .map(|since| since.max(self.checkpoint.at + self.status_gap()))
    }

    fn status_due(&self) -> Option<tokio::time::Instant> {
        self.status_due_at().map(tokio::time::Instant::from_std)
    }
}

/// A step of the flow has no entry in the status: the task directory was edited by hand.
fn missing_step(task: &TaskDir, id: &str) -> Error {
    Error::BadStateFile {
        path: task.file(workspace::STATUS_FILE),
        problem: format!(
            "step {id} is in the flow but not in the status; the task directory was edited by hand"
        ),
    }
}
