//! The executor: walks the flow's dependency graph, prepares each step (staging, references,
//! instructions), runs it through the bridge off the async runtime, records the outcome, and
//! keeps `flow_status.json` and the journal true after every change. What happens after a
//! failure (retries, recovery decisions carried out) is in `executor/recovering.rs`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde_json::{Map, Value, json};
use tokio::sync::Notify;
use tokio::task::JoinSet;

use crate::engine::bridge::{Bridge, CallOutcome, HostLlm, StepLlm};
use crate::engine::dependencies::Dependencies;
use crate::engine::instructions::{self, DoneStep};
use crate::engine::recovery;
use crate::engine::sandbox::LauncherOverlay;
use crate::engine::sandbox::{SandboxPlan, StepScope};
use crate::flow::operations::{self, Access, ParamMeaning};
use crate::flow::path_rules::PathRules;
use crate::flow::policy::CommandPolicy;
use crate::flow::shell;
use crate::flow::task_intent;
use crate::llm::client::Llm;
use crate::task::events::Events;
use crate::task::layered_view::LayeredView;
use crate::task::staging::{self, Overlay, View};
use crate::task::state;
use crate::task::workspace::{self, TaskDir};
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::event::Event;
use ocflow_model::flow::{self, Flow, RefError, Step};
use ocflow_model::llm::{DEFAULT_PROFILE, ModelSettings, Usage};
use ocflow_model::repo_path::RepoPath;
use ocflow_model::status::{self, FlowState, FlowStatus, StepError, StepState};
use ocflow_model::step_result::{CallStatus, StepResult};
use ocflow_model::step_spec::{Limits, StepSpec};

mod recovering;
mod settling;

use settling::{Outputs, Settled};

/// How a flow ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowOutcome {
    Succeeded,
    Failed,
    Interrupted,
}

/// Why a flow whose steps only read ends `no_change`.
const NO_CHANGE: &str = "finished without doing anything the task asked: its steps only read \
                         files, and the task asks for a change";

/// Set once SIGINT (Ctrl-C), SIGTERM or SIGHUP arrives, however delivered.
#[derive(Default)]
pub struct Interrupt {
    raised: AtomicBool,
    notify: Notify,
}

impl Interrupt {
    /// Starts listening for SIGINT and SIGTERM.
    pub fn listen() -> Arc<Interrupt> {
        use tokio::signal::unix::{Signal, SignalKind, signal};
        let interrupt = Arc::new(Interrupt::default());
        // Registered now, not when the task below first runs: no signal is lost in between.
        let mut streams: Vec<Option<Signal>> = [
            SignalKind::interrupt(),
            SignalKind::terminate(),
            SignalKind::hangup(),
        ]
        .into_iter()
        .map(|kind| signal(kind).ok())
        .collect();
        async fn next(stream: &mut Option<Signal>) {
            match stream {
                Some(stream) => {
                    stream.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
        let listener = interrupt.clone();
        tokio::spawn(async move {
            let [int, term, hup] = streams.as_mut_slice() else {
                return;
            };
            tokio::select! {
                () = next(int) => {}
                () = next(term) => {}
                () = next(hup) => {}
            }
            listener.raised.store(true, Ordering::SeqCst);
            // The long loops of staging and publishing check this one.
            crate::task::interrupt::raise();
            listener.notify.notify_waiters();
        });
        interrupt
    }

    pub(crate) fn is_raised(&self) -> bool {
        self.raised.load(Ordering::SeqCst)
    }

    pub async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_raised() {
                return;
            }
            notified.await;
        }
    }
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
    /// What recovery needs; `None`: a failed step (after transient retries) fails the flow.
    pub recovery: Option<RecoverySettings>,
    pub limits: Limits,
    /// Repository paths no step may produce: the workspace, when it lies inside the repository.
    pub forbidden: Vec<RepoPath>,
    /// The repository's installed dependencies, which command steps see without copies
    /// (`engine::dependencies`).
    pub dependencies: Dependencies,
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
}

/// Runs one flow to its end (or to the first failure, or an interrupt).
pub struct Executor {
    pub task: TaskDir,
    pub flow: Flow,
    pub status: FlowStatus,
    pub events: Events,
    bridge: Arc<Bridge>,
    settings: Settings,
    interrupt: Arc<Interrupt>,
    /// Views for command steps: one per command step running at the same time, reused.
    views: Vec<View>,
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
}

/// When the status file is written again. The journal is the write-ahead log: a step started
/// or succeeded is appended there, and `state::load_status` replays those onto the status; the
/// status is rewritten at every other change (a failure, a recovery, the flow's end), and
/// otherwise once the journal has grown by twice the status's size since, so the bytes written
/// stay proportional to the events (a 1000-step flow no longer rewrites a 300 KB file 2000
/// times), or once `CHECKPOINT_EVERY` passed, so the file itself is never far behind.
#[derive(Debug)]
struct Checkpoint {
    at: Instant,
    journal_bytes: u64,
    status_bytes: u64,
}

/// The operations that touch their view only through commands (so only under an overlay):
/// those declared `commands_only`.
fn is_built_in_command(operation: &str) -> bool {
    operations::find(operation).is_some_and(|op| op.commands_only)
}

/// One of the views command steps run in: a copy of the repository (`views`), or one made of
/// layers (`layered`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ViewSlot {
    Copy(usize),
    Layered(usize),
}

/// A command step's overlay directories, in its step directory: what the command changed, and
/// the scratch space overlayfs needs beside it.
const UPPER_DIR: &str = "upper";
const WORK_DIR: &str = "work";
/// A command step's private directory, in its step directory: its caches' layers and its own
/// `/var/tmp` (`SandboxPlan::launcher`), gone with the step.
const PRIVATE_DIR: &str = "private";

/// The longest the status file lags the journal while steps run.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_secs(10);
/// The journal's growth that always warrants a checkpoint, however small the status.
const CHECKPOINT_MIN_BYTES: u64 = 64 * 1024;

/// A step made ready to run.
struct Prepared {
    instructions: PathBuf,
    log: PathBuf,
    /// The view it runs in, for command steps.
    view: Option<ViewSlot>,
}

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
            flow,
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
                journal_bytes: 0,
                status_bytes: 0,
            },
        }
    }

    /// Runs every pending step whose dependencies succeeded, in flow order, until none is
    /// left, one fails, or an interrupt arrives. Leaves the state saved either way.
    pub async fn run(&mut self) -> Result<FlowOutcome> {
        self.status.state = FlowState::Running;
        self.save()?;
        // A recovery that a crash interrupted is finished first.
        if let Some(pending) = self.status.pending_recovery.clone() {
            match self.recover(&pending.step).await? {
                Next::Continue => {}
                Next::Stop => return self.finish_flow().await,
                Next::Interrupted => return self.interrupted(&[]),
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
            // Start every ready step, up to --jobs at once; none while a failure waits for its
            // recovery decision.
            while failures.is_empty() && running.len() < self.settings.jobs.max(1) {
                let Some(step) = self.next_ready() else { break };
                let attempt = self.start(&step)?;
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
                }
            }
            let interrupt = self.interrupt.clone();
            let joined = tokio::select! {
                joined = running.join_next_with_id() => joined,
                () = interrupt.wait() => return self.interrupted_all(&in_flight),
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

    /// Ctrl-C or SIGTERM: the library kills its commands; every running step goes back to
    /// pending, to run again on resume.
    fn interrupted_all(
        &mut self,
        in_flight: &HashMap<tokio::task::Id, Running>,
    ) -> Result<FlowOutcome> {
        if !in_flight.is_empty() {
            self.bridge.cancel_all();
        }
        // What a step's daemon left running goes too.
        if let Some(plan) = &self.settings.sandbox {
            plan.cgroups.end_all_of_this_process();
        }
        let running: Vec<String> = in_flight.values().map(|r| r.step.id.clone()).collect();
        // What their LLM calls used so far still counts.
        for step in in_flight.values() {
            self.count_tokens(&step.step.id, step.tokens_before);
        }
        self.interrupted(&running)
    }

    /// A signal stopped a long phase (`Error::Interrupted` from staging, a capture,
    /// publishing, the diff): as `interrupted_all`, for every step still running — the one
    /// being recorded too. A step already recorded as succeeded stays so: `resume` rebuilds
    /// `final_output/` from the status.
    pub fn stopped_by_signal(&mut self) -> Result<FlowOutcome> {
        self.bridge.cancel_all();
        let running: Vec<String> = self
            .status
            .steps
            .iter()
            .filter(|s| s.status == StepState::Running)
            .map(|s| s.id.clone())
            .collect();
        self.status.finished_at = None;
        self.interrupted(&running)
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

    /// The first pending step (in flow order) whose dependencies all succeeded.
    fn next_ready(&self) -> Option<Step> {
        self.flow
            .steps
            .iter()
            .find(|step| {
                self.status
                    .step(&step.id)
                    .is_some_and(|s| s.status == StepState::Pending)
                    && step.depends_on.iter().all(|dep| {
                        self.status
                            .step(dep)
                            .is_some_and(|d| d.status == StepState::Succeeded)
                    })
            })
            .cloned()
    }

    /// The model a step asks through the library's `complete`: its role's, or the
    /// operations' one.
    fn step_llm(&self, step: &Step) -> Option<StepLlm> {
        let host = self.settings.host_llm.as_ref()?;
        Some(host.for_step(&step.id, step.role.as_deref()))
    }

    /// Marks the step running and counts the attempt.
    fn start(&mut self, step: &Step) -> Result<u32> {
        // The step's model profile (its role's), for the record and its tokens; the model,
        // for a step that asks one.
        let settings = self.step_llm(step).map(|host| host.settings);
        let profile = settings.as_ref().map(|m| m.profile.clone());
        let model = settings
            .filter(|_| operations::step_needs_llm(&step.operation, &step.params))
            .map(|m| m.model);
        let entry = self
            .status
            .step_mut(&step.id)
            .ok_or_else(|| missing_step(&self.task, &step.id))?;
        let attempt = entry.start(status::now())?;
        entry.profile = profile.clone();
        // Journaled, not saved: `load_status` replays it (see `Checkpoint`).
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

    /// Builds the step directory: staged inputs or a synced view, resolved references, and the
    /// instructions file.
    fn prepare(&mut self, step: &Step) -> Result<Prepared> {
        let mut view = None;
        let prepared = self.prepare_in(step, &mut view);
        if let (Err(_), Some(index)) = (&prepared, view) {
            self.free_views.push(index);
        }
        prepared
    }

    fn prepare_in(&mut self, step: &Step, view: &mut Option<ViewSlot>) -> Result<Prepared> {
        let spec = operations::find(&step.operation).ok_or_else(|| {
            Error::internal(format!(
                "step {} has the unknown operation {}",
                step.id, step.operation
            ))
        })?;
        let dir = self.task.step_dir(&step.id);
        let input_dir = dir.join(workspace::INPUT_DIR);
        let output_dir = dir.join(workspace::OUTPUT_DIR);
        // A step that runs again starts clean; its log keeps every attempt.
        for stale in [&input_dir, &output_dir] {
            staging::remove_tree(stale)?;
        }
        let _ = fs::remove_file(dir.join(workspace::RESULT_FILE));
        let _ = fs::remove_file(dir.join(workspace::TRACEBACK_FILE));
        // The library numbers its saved answers from 1 on every attempt.
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with("llm-answer-")
            {
                let _ = fs::remove_file(entry.path());
            }
        }
        for fresh in [&input_dir, &output_dir] {
            fs::create_dir_all(fresh).io_context(|| format!("creating {}", fresh.display()))?;
        }
        // A killed attempt's overlay directories go too, whatever this attempt uses: they must
        // never be taken for this one's changes.
        for stale in [UPPER_DIR, WORK_DIR, PRIVATE_DIR] {
            ocflow_sandbox::exec::remove_overlay_dirs(&dir.join(stale));
        }

        let ancestors = self.flow.ancestors(&step.id);
        let overlay = Overlay::from_status(&self.status, &self.flow, Some(&ancestors));
        let (params, mut env) = self.resolve_params(step)?;

        let (input_files, work_dir) = match spec.access {
            Access::Files => {
                let staged = staging::stage_inputs(
                    &self.task,
                    &overlay,
                    &instructions::staged_paths(step),
                    &input_dir,
                )?;
                (
                    staged.iter().map(|p| p.as_str().to_string()).collect(),
                    None,
                )
            }
            Access::View => {
                let layered = self.layered_view_for(step) && self.overlay_works_here()?;
                let slot = self.acquire_view(&ancestors, layered)?;
                *view = Some(slot);
                self.view_of_step.insert(step.id.clone(), slot);
                let dir = match slot {
                    ViewSlot::Copy(index) => {
                        if let Err(err) = self.views[index].sync(&self.task, &overlay) {
                            // Half-synced, the view's record no longer matches its files: set
                            // it back to the snapshot before anyone uses it again.
                            self.views[index] = View::open(&self.task, self.task.view(index))?;
                            return Err(err);
                        }
                        workspace::view_dir_name(index)
                    }
                    ViewSlot::Layered(index) => {
                        if let Err(err) = self.layered[index].prepare(&self.task, &overlay) {
                            // Half-synced, the view's record no longer matches its layer: set
                            // it back to the snapshot before anyone uses it again.
                            self.layered[index] =
                                LayeredView::open(&self.task, self.task.layers(index))?;
                            return Err(err);
                        }
                        format!(
                            "{}/{}",
                            workspace::layers_dir_name(index),
                            LayeredView::MOUNT_DIR
                        )
                    }
                };
                (Vec::new(), Some(format!("../{dir}")))
            }
        };
        let mut sandbox = None;
        if let (Some(_), Some(ViewSlot::Copy(index))) = (&work_dir, *view)
            && !self
                .settings
                .sandbox
                .as_ref()
                .is_some_and(SandboxPlan::mounts_dependencies)
        {
            // No mount can show the repository's dependencies here: the view gets copies
            // (the flow's start warned).
            self.settings
                .dependencies
                .copy_into(&self.task.view(index))?;
        }
        if let (Some(_), Some(slot)) = (&work_dir, *view) {
            // A command's own temporary directory, and git kept from finding the user's
            // repository above the view (the view has no .git of its own).
            let temp = dir.join("tmp");
            fs::create_dir_all(&temp).io_context(|| format!("creating {}", temp.display()))?;
            env.insert(
                "TMPDIR".into(),
                Value::String(temp.to_string_lossy().into_owned()),
            );
            env.insert(
                "GIT_CEILING_DIRECTORIES".into(),
                Value::String(self.task.root.to_string_lossy().into_owned()),
            );
            // Marks the command (and what it starts) as this task's, for `orphans::stop`.
            env.insert(
                crate::engine::orphans::MARKER.into(),
                Value::String(crate::engine::orphans::marker_value(&self.task)),
            );
            env.insert(
                crate::engine::orphans::STEP_MARKER.into(),
                Value::String(step.id.clone()),
            );
            // The caches' overlays have their upper layers in the task's directory: where the
            // kernel refuses overlays there (a container's root file system) or in a setgid
            // workspace, whose group the launcher's user namespace cannot map, the step gets
            // caches of its own, and results say so.
            let cache_overlays = self.settings.sandbox.as_ref().is_some_and(|p| p.overlay)
                && self.files_keep_their_group()
                && self.overlay_works_here()?;
            if let Some(plan) = &self.settings.sandbox {
                // The network is off unless the user allowed it, for every step or this one.
                let asked = step.params.get("network").and_then(Value::as_bool) == Some(true);
                // A view made of layers is mounted by the launcher; the command's changes land
                // in `upper/`.
                let (upper, work) = (dir.join(UPPER_DIR), dir.join(WORK_DIR));
                let (target, lower) = match slot {
                    ViewSlot::Copy(index) => (self.task.view(index), Vec::new()),
                    ViewSlot::Layered(index) => {
                        for fresh in [&upper, &work] {
                            // What a killed attempt wrote would show through in this one.
                            if fresh.exists() {
                                ocflow_sandbox::exec::remove_overlay_dirs(fresh);
                            }
                            fs::create_dir_all(fresh)
                                .io_context(|| format!("creating {}", fresh.display()))?;
                        }
                        let layered = &self.layered[index];
                        (layered.mount_point(), layered.lower_layers(&self.task))
                    }
                };
                let overlay = (!lower.is_empty()).then_some(LauncherOverlay {
                    lower: &lower,
                    upper: &upper,
                    work: &work,
                });
                let private = dir.join(PRIVATE_DIR);
                let network = plan.network || asked;
                if !network {
                    // npm and npx fetch a package that is not installed, retrying for over a
                    // minute when there is no network: offline, they fail at once, and the
                    // step's message says which package is missing.
                    env.entry("npm_config_offline")
                        .or_insert_with(|| Value::String("true".into()));
                }
                // Decided on the flow's plan, as the copies above are, not the caches' one.
                let dependencies = &self.settings.dependencies;
                let mounted = plan.mounts_dependencies().then_some(dependencies);
                let cache_plan;
                let plan = if cache_overlays {
                    plan
                } else {
                    cache_plan = crate::engine::sandbox::SandboxPlan {
                        overlay: false,
                        ..plan.clone()
                    };
                    &cache_plan
                };
                let cgroup = ocflow_sandbox::step_cgroup::name(&self.task.root, &step.id);
                let scope = StepScope {
                    private: &private,
                    cgroup: &cgroup,
                    dependencies: mounted,
                };
                let mut launcher = plan.launcher(&target, &[temp], network, overlay, scope)?;
                if !lower.is_empty() {
                    let relative = |path: &std::path::Path| match path.strip_prefix(&self.task.root)
                    {
                        Ok(inside) => format!("../{}", inside.display()),
                        Err(_) => path.display().to_string(),
                    };
                    launcher.view_layers = std::iter::once(UPPER_DIR.to_string())
                        .chain(lower.iter().map(|layer| relative(layer)))
                        .collect();
                }
                sandbox = Some(launcher);
            }
        }

        let steps = instructions::earlier_steps(&self.flow, step, spec);
        let spec_block = StepSpec {
            version: ocflow_model::step_spec::INSTRUCTIONS_VERSION,
            task_id: self.task.task_id.clone(),
            task: self.flow.task.clone(),
            step_id: step.id.clone(),
            operation: step.operation.clone(),
            role: step.role.clone(),
            params,
            input_dir: workspace::INPUT_DIR.into(),
            output_dir: workspace::OUTPUT_DIR.into(),
            work_dir,
            input_files,
            steps,
            limits: self.settings.limits.clone(),
            env,
            sandbox,
        };
        let done: Vec<DoneStep<'_>> = self
            .flow
            .steps
            .iter()
            .filter(|s| ancestors.contains(&s.id))
            .filter_map(|s| self.status.step(&s.id))
            .map(|s| DoneStep {
                id: &s.id,
                operation: &s.operation,
                message: s.message.as_deref().unwrap_or(""),
            })
            .collect();
        let text = instructions::render(&spec_block, step, &done);
        let instructions_path = dir.join(workspace::INSTRUCTIONS_FILE);
        fs::write(&instructions_path, text)
            .io_context(|| format!("writing {}", instructions_path.display()))?;
        let log = dir.join(workspace::STEP_LOG_FILE);
        let attempt = self.status.step(&step.id).map_or(1, |s| s.attempts);
        let header = format!("=== attempt {attempt}, {} ===\n", status::now());
        append(&log, header.as_bytes())?;
        Ok(Prepared {
            instructions: instructions_path,
            log,
            view: *view,
        })
    }

    /// The step's parameters with every `@{outputs.STEP.FIELD}` replaced by that field of the
    /// step's `result.json`; a missing field is an error naming the reference. In a command,
    /// a reference becomes `${OCFLOW_REF_n}` and its value goes into the returned environment:
    /// repository text reaches the shell as data, never as code.
    fn resolve_params(&self, step: &Step) -> Result<(Map<String, Value>, Map<String, Value>)> {
        let spec = operations::find(&step.operation);
        let mut params = step.params.clone();
        let mut env = Map::new();
        for (name, value) in params.iter_mut() {
            let Some(text) = value.as_str() else { continue };
            let is_command = spec
                .and_then(|s| s.param(name))
                .is_some_and(|p| p.meaning == ParamMeaning::Command);
            let resolved = flow::substitute_refs(text, |reference, at| {
                let value = self.reference_value(reference)?;
                if !is_command {
                    return Ok(value);
                }
                let variable = format!("OCFLOW_REF_{}", env.len() + 1);
                env.insert(variable.clone(), Value::String(value));
                // Inside single quotes the shell expands nothing: close them around it.
                // A quote left open to the end of its line is a here-document's apostrophe,
                // not a quote: the variable goes in as it is there.
                let rest_of_line = text[at..].lines().next().unwrap_or("");
                let closed =
                    rest_of_line[reference.text.len().min(rest_of_line.len())..].contains('\'');
                Ok(match shell::quote_at(text, at) {
                    shell::Quote::Single if closed => format!("'\"${{{variable}}}\"'"),
                    _ => format!("${{{variable}}}"),
                })
            })
            .map_err(|message| Error::Usage(format!("parameter `{name}`: {message}")))?;
            *value = Value::String(resolved);
        }
        Ok((params, env))
    }

    /// The text of a referenced result field.
    fn reference_value(&self, reference: &flow::OutputRef) -> Result<String, RefError> {
        let cannot =
            |why: String| RefError(format!("{} cannot be resolved: {why}", reference.text));
        let result = state::load_result(&self.task, &reference.step)
            .map_err(|err| cannot(err.to_string()))?
            .ok_or_else(|| cannot(format!("step {} has no result", reference.step)))?;
        // Content that is not text, or not whole, would arrive as other bytes: refused.
        if reference.fields.first().is_some_and(|f| f == "content") {
            if result.fields.contains_key("content_base64") {
                return Err(cannot(format!(
                    "step {} read a file that is not UTF-8 text ({} bytes), and a reference \
                     carries only text; copy it byte for byte with write_file's \
                     content_from_step",
                    reference.step,
                    result.fields.get("size").cloned().unwrap_or(Value::Null)
                )));
            }
            if result.fields.get("truncated") == Some(&Value::Bool(true)) {
                return Err(cannot(format!(
                    "step {} kept only the first part of the file (its content was cut at \
                     max_output_bytes); raise --max-output-bytes, or copy the file with a \
                     command",
                    reference.step
                )));
            }
        }
        let field = result.lookup(&reference.fields).ok_or_else(|| {
            // The first field on the path that is not there.
            let missing = (1..=reference.fields.len())
                .find(|len| result.lookup(&reference.fields[..*len]).is_none())
                .map_or("?", |len| reference.fields[len - 1].as_str());
            RefError(format!(
                "{} cannot be resolved: the result of step {} has no field `{missing}`",
                reference.text, reference.step
            ))
        })?;
        Ok(match field {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
    }

    /// Records how a step's call ended: status, journal, `final_output/`. A file step comes
    /// settled from its thread (its outputs and `result.json` saved); a command step's view is
    /// captured here first. Returns whether the step succeeded.
    fn record(&mut self, done: &Running, ended: Ended) -> Result<bool> {
        let step = &done.step;
        // A result kept from an earlier failed attempt no longer speaks for the step.
        self.failed_results.remove(&step.id);
        // Used up now, success or not: a view labels what it captured with it, and a label
        // must never name two different contents.
        let sequence = self.status.next_sequence();
        self.status.last_sequence = sequence;
        let mut out_of_memory = false;
        let settled = match ended {
            Ended::Settled(settled) => settled?,
            Ended::Called(outcome) => {
                out_of_memory = self.end_step_cgroup(step);
                // A command that filled the workspace's disk: nothing it wrote is kept (that
                // frees the disk, so the failure can be saved), and the step fails saying so.
                let captured = if workspace::disk_full(&self.task.root) {
                    Err(None)
                } else {
                    self.capture(step, sequence, done.view).map_err(Some)
                };
                let settled = captured.and_then(|outputs| {
                    settling::settle(&self.task, step, outcome, outputs).map_err(Some)
                });
                match settled {
                    Ok(settled) => settled,
                    Err(Some(error)) if !error.is_no_space() => return Err(error),
                    Err(cause) => {
                        self.drop_command_writes(step, done.view)?;
                        let error = self.no_space_error(cause.as_ref());
                        return self
                            .finish_failed(step, done.attempt, done.started, error)
                            .map(|()| false);
                    }
                }
            }
        };
        let result = match settled {
            Settled::Failed(error) => {
                return self
                    .finish_failed(step, done.attempt, done.started, error)
                    .map(|()| false);
            }
            Settled::Result(result) if result.status == CallStatus::Failure => {
                let mut text = if result.message.is_empty() {
                    "the step failed without a message".to_string()
                } else {
                    result.message.clone()
                };
                if out_of_memory && !text.contains("[sandbox] memory_mb") {
                    let limit = self.settings.sandbox.as_ref().map_or(0, |p| p.memory_mb);
                    text.push_str(&format!(
                        "; the kernel killed a process of the step for its memory: the step's \
                         processes may use {limit} MiB together, raise `[sandbox] memory_mb` if \
                         it needs more"
                    ));
                }
                self.failed_results.insert(step.id.clone(), *result);
                return self
                    .finish_failed(
                        step,
                        done.attempt,
                        done.started,
                        StepError::new("failure", text),
                    )
                    .map(|()| false);
            }
            Settled::Result(result) => *result,
        };
        let duration_ms = done.started.elapsed().as_millis() as u64;
        let StepResult {
            message,
            output_files,
            deleted_files,
            ..
        } = result;
        let entry = self
            .status
            .step_mut(&step.id)
            .ok_or_else(|| missing_step(&self.task, &step.id))?;
        let outputs = (output_files.clone(), deleted_files.clone());
        entry.succeed(
            status::now(),
            duration_ms,
            sequence,
            outputs,
            message.clone(),
        )?;
        let tokens = entry.tokens;
        // Journaled (the result's and the outputs' data are on disk already), not saved:
        // `load_status` replays it, and `resume` rebuilds `final_output/` should a crash come
        // before it is published.
        self.events.emit(Event::StepFinished {
            step: step.id.clone(),
            operation: step.operation.clone(),
            status: StepState::Succeeded,
            attempt: done.attempt,
            duration_ms,
            message,
            output_files: output_files.clone(),
            deleted_files: deleted_files.clone(),
            sequence: Some(sequence),
            tokens: Some(tokens),
        })?;
        staging::publish(&self.task, &step.id, &output_files, &deleted_files)?;
        self.save_when_due()?;
        Ok(true)
    }

    /// Kills whatever the step left in its cgroup (a daemon that cleared its environment and
    /// left its directory, which `orphans::stop_step` cannot tell) and removes the group.
    /// Returns whether the kernel killed one of its processes for the step's memory limit.
    fn end_step_cgroup(&self, step: &Step) -> bool {
        self.settings.sandbox.as_ref().is_some_and(|plan| {
            let name = ocflow_sandbox::step_cgroup::name(&self.task.root, &step.id);
            plan.cgroups.end(&name).out_of_memory
        })
    }

    /// A command step's changes, from its view: exactly the overlay's upper directory for a
    /// view made of layers, a stat walk for a copy. Captured even when the command failed, so
    /// the view can be set back.
    fn capture(&mut self, step: &Step, sequence: u64, view: Option<ViewSlot>) -> Result<Outputs> {
        // A file step comes here only when its thread failed: what it wrote is in `output/`.
        let Some(view) = view else {
            return Ok(Outputs::Written);
        };
        let dir = self.task.step_dir(&step.id);
        let output_dir = dir.join(workspace::OUTPUT_DIR);
        // Without a PID namespace to end with the step, what it left running is stopped here.
        if self
            .settings
            .sandbox
            .as_ref()
            .is_none_or(|p| p.bwrap.is_none())
        {
            crate::engine::orphans::stop_step(&self.task, &step.id);
        }
        let (upper, work) = (dir.join(UPPER_DIR), dir.join(WORK_DIR));
        let forbidden = &self.settings.forbidden;
        let captured = match view {
            ViewSlot::Layered(index) => Outputs::Captured {
                captured: self.layered[index].capture(
                    &self.task,
                    &step.id,
                    sequence,
                    &upper,
                    &output_dir,
                    forbidden,
                )?,
                view: "overlay",
            },
            ViewSlot::Copy(index) => Outputs::Captured {
                captured: self.views[index].capture(
                    &self.task,
                    &step.id,
                    sequence,
                    &output_dir,
                    forbidden,
                )?,
                view: "copy",
            },
        };
        for dir in [upper, work, dir.join(PRIVATE_DIR)] {
            if dir.exists() {
                ocflow_sandbox::exec::remove_overlay_dirs(&dir);
            }
        }
        Ok(captured)
    }

    /// Drops everything a command step wrote when its disk filled up — its overlay's upper
    /// directory, its temporary directory, what its capture put in `output/` — and sets its
    /// view back to the snapshot (a copied view is made again: the command wrote into it; a
    /// view made of layers may hold the capture's merge).
    fn drop_command_writes(&mut self, step: &Step, view: Option<ViewSlot>) -> Result<()> {
        let dir = self.task.step_dir(&step.id);
        crate::engine::orphans::stop_step(&self.task, &step.id);
        for written in [
            dir.join(UPPER_DIR),
            dir.join(WORK_DIR),
            dir.join("tmp"),
            dir.join(PRIVATE_DIR),
        ] {
            ocflow_sandbox::exec::remove_overlay_dirs(&written);
        }
        let output = dir.join(workspace::OUTPUT_DIR);
        staging::remove_tree(&output)?;
        fs::create_dir_all(&output).io_context(|| format!("creating {}", output.display()))?;
        match view {
            Some(ViewSlot::Copy(index)) => {
                self.views[index] = View::create(&self.task, self.task.view(index))?;
            }
            Some(ViewSlot::Layered(index)) => {
                self.layered[index] = LayeredView::open(&self.task, self.task.layers(index))?;
            }
            None => {}
        }
        Ok(())
    }

    /// The error of a step stopped by a full disk: the workspace's file system, what failed
    /// (`cause`, when it was an error rather than a full disk found after a command), and how
    /// to go on.
    fn no_space_error(&self, cause: Option<&Error>) -> StepError {
        let what = cause.map_or_else(
            || "the step's command filled it".to_string(),
            |error| format!("{error}"),
        );
        StepError::new(
            status::NO_SPACE_KIND,
            format!(
                "{} ({}): {what}; what the step wrote was dropped. Free space there, then run \
                 `ocflow resume {}`",
                workspace::NO_SPACE,
                self.task.root.display(),
                self.task.task_id
            ),
        )
    }

    fn finish_failed(
        &mut self,
        step: &Step,
        attempt: u32,
        started: Instant,
        error: StepError,
    ) -> Result<()> {
        let duration_ms = started.elapsed().as_millis() as u64;
        let message = error.message.clone();
        let entry = self
            .status
            .step_mut(&step.id)
            .ok_or_else(|| missing_step(&self.task, &step.id))?;
        entry.fail(status::now(), duration_ms, error)?;
        self.save()?;
        self.events.emit(Event::StepFinished {
            step: step.id.clone(),
            operation: step.operation.clone(),
            status: StepState::Failed,
            attempt,
            duration_ms,
            message,
            output_files: Vec::new(),
            deleted_files: Vec::new(),
            sequence: None,
            tokens: None,
        })
    }

    /// A free view, preferring the one where the step's nearest ancestor command ran: what
    /// that command left outside the tracked files (a `.venv`, `node_modules`, a build
    /// directory) is there, as it would be with `--jobs 1`.
    fn acquire_view(&mut self, ancestors: &BTreeSet<String>, layered: bool) -> Result<ViewSlot> {
        let order = self.flow.topological_order();
        let kind = |slot: &ViewSlot| matches!(slot, ViewSlot::Layered(_)) == layered;
        let preferred = order
            .iter()
            .rev()
            .filter(|id| ancestors.contains(**id))
            .filter_map(|id| self.view_of_step.get(*id))
            .find(|slot| kind(slot))
            .copied();
        if let Some(position) =
            preferred.and_then(|slot| self.free_views.iter().position(|free| *free == slot))
        {
            return Ok(self.free_views.remove(position));
        }
        if let Some(position) = self.free_views.iter().rposition(kind) {
            return Ok(self.free_views.remove(position));
        }
        if layered {
            let index = self.layered.len();
            self.layered
                .push(LayeredView::open(&self.task, self.task.layers(index))?);
            return Ok(ViewSlot::Layered(index));
        }
        let index = self.views.len();
        self.views
            .push(View::open(&self.task, self.task.view(index))?);
        Ok(ViewSlot::Copy(index))
    }

    /// Whether overlays work in the task's directory: probed there once, before the first view
    /// made of layers; when they do not, a warning says so and views are copies.
    fn overlay_works_here(&mut self) -> Result<bool> {
        if let Some(works) = self.overlay_works {
            return Ok(works);
        }
        let works = self
            .settings
            .sandbox
            .as_ref()
            .is_some_and(|plan| plan.overlay_works_in(&self.task.root));
        self.overlay_works = Some(works);
        if !works {
            self.events.emit(Event::Warning {
                message: format!(
                    "overlays do not work in the file system of {} (the temporary directory's \
                     took one): command steps run in copies of the repository",
                    self.task.root.display()
                ),
            })?;
        }
        Ok(works)
    }

    /// Whether `step` runs in a view made of layers: only the built-in commands (a plugin may
    /// write into its view from Python, between commands or beside them), only under the
    /// sandbox with overlays on, and only where the workspace's files keep the group they would
    /// have (a setgid workspace gives them one the overlay's user namespace cannot map, and
    /// copying a file up would fail).
    fn layered_view_for(&self, step: &Step) -> bool {
        self.settings
            .sandbox
            .as_ref()
            .is_some_and(|plan| plan.overlay)
            && is_built_in_command(&step.operation)
            && !self.copy_views.contains(&step.id)
            && self.files_keep_their_group()
    }

    /// Whether files made in the task's directory keep the group they would have, which the
    /// launcher's user namespace maps (not in a setgid workspace of another group).
    fn files_keep_their_group(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(&self.task.root).is_ok_and(|m| m.gid() == rustix::process::getegid().as_raw())
    }

    /// Saves the state after an interrupt: the running step goes back to pending, to run again
    /// on resume.
    fn interrupted(&mut self, running: &[String]) -> Result<FlowOutcome> {
        for id in running {
            if let Some(entry) = self.status.step_mut(id) {
                entry.requeue(Some("interrupted while running; it runs again on resume"))?;
            }
        }
        self.status.state = FlowState::Interrupted;
        self.save()?;
        self.events.emit(Event::FlowInterrupted {
            task_id: self.task.task_id.clone(),
            running: running.to_vec(),
        })?;
        Ok(FlowOutcome::Interrupted)
    }

    /// After an error that stopped the engine itself (disk full, permission denied): the
    /// running step and the flow are marked failed with the reason and a summary is written,
    /// as far as the disk still allows. Resume continues once the cause is fixed.
    pub fn abandon(&mut self, error: &Error) {
        // Steps running on other threads did nothing wrong: their commands are stopped and
        // they run again on resume.
        self.bridge.cancel_all();
        for step in self
            .status
            .steps
            .iter_mut()
            .filter(|s| s.status == StepState::Running)
        {
            // Running may always become pending; nothing to report on the way out.
            let _ = step.requeue(Some("stopped when ocflow failed; it runs again on resume"));
            // What its command wrote is of no use to the attempt on resume, and on a full disk
            // it is what keeps the status below from being saved.
            let dir = self.task.step_dir(&step.id);
            for written in [dir.join(UPPER_DIR), dir.join(WORK_DIR)] {
                if written.exists() {
                    ocflow_sandbox::exec::remove_overlay_dirs(&written);
                }
            }
        }
        self.status.message = Some(if error.is_no_space() {
            format!(
                "ocflow stopped: {} ({error}); free space there, then run `ocflow resume {}`",
                workspace::NO_SPACE,
                self.task.task_id
            )
        } else {
            format!("ocflow stopped: {error}")
        });
        self.status.state = FlowState::Failed;
        let _ = self.save();
        if let Ok(summary) =
            crate::engine::summary::from_journal(&self.task, &self.status, &self.flow)
        {
            let _ = workspace::write_atomic(
                &self.task.file(workspace::SUMMARY_FILE),
                summary.as_bytes(),
            );
        }
    }

    /// Ends the flow: succeeded when every step did, failed otherwise; writes the summary.
    /// The LLM writes the summary when there is one; if that call fails, the journal-based
    /// summary is written and the flow's result is unaffected.
    async fn finish_flow(&mut self) -> Result<FlowOutcome> {
        // A signal that came while the last step was recorded: not a finished flow.
        if self.interrupt.is_raised() {
            return self.stopped_by_signal();
        }
        // Succeeded, or skipped by a recovery decision; an abort or a failure fails the flow.
        let all_done = self.status.message.is_none()
            && self.flow.steps.iter().all(|step| {
                self.status
                    .step(&step.id)
                    .is_some_and(|s| matches!(s.status, StepState::Succeeded | StepState::Skipped))
            });
        // Every step done, yet nothing done that the task asked for: its own state, never a
        // success (a 0.5B model's plan for a fix read the file and stopped there).
        let acted = self.status.succeeded().iter().any(|step| {
            crate::flow::operations::find(&step.operation)
                .is_some_and(|op| op.runs_commands || !op.writes.is_empty())
        });
        let did_nothing = all_done && !acted && task_intent::asks_for_change(&self.flow.task);
        self.status.state = if did_nothing {
            self.status.message = Some(NO_CHANGE.to_string());
            FlowState::NoChange
        } else if all_done {
            FlowState::Succeeded
        } else {
            FlowState::Failed
        };
        self.status.finished_at = Some(status::now());
        // The summary's call goes out now and is answered while final_output/ is rebuilt, the
        // status saved and the diff written: it reads none of them (its facts are the status
        // and the steps' outputs).
        let summary_call = self.settings.summary_llm.clone().map(|(llm, settings)| {
            let before = llm.usage_for("summary");
            let (task, status, flow) = (self.task.clone(), self.status.clone(), self.flow.clone());
            let call = tokio::spawn(async move {
                crate::engine::summary::with_llm(&task, &status, &flow, &llm, &settings).await
            });
            (call, before)
        });
        // Steps finish in any order; final_output/ follows the flow's order, as the diff does.
        let ready = staging::rebuild_final_output(&self.task, &self.status, &self.flow)
            .and_then(|()| self.save())
            .and_then(|()| self.write_diff());
        if let (Err(_), Some((call, _))) = (&ready, &summary_call) {
            call.abort();
        }
        let (changed_files, diff) = ready?;
        let summary_path = self.task.file(workspace::SUMMARY_FILE);
        let mut summary = None;
        if let (Some((mut call, before)), Some((llm, settings))) =
            (summary_call, &self.settings.summary_llm)
        {
            let (pulse, tokens) = (self.events.pulse(), self.status.tokens);
            let writing = async {
                (&mut call).await.unwrap_or_else(|err| {
                    Err(crate::engine::summary::SummaryError::State(
                        Error::internal(format!("the summary's call failed: {err}")),
                    ))
                })
            };
            let beat = || pulse.beat("summarising", Vec::new(), tokens);
            // Ctrl-C while the model writes: its call is dropped, the journal's summary written.
            let interrupt = self.interrupt.clone();
            let written = tokio::select! {
                written = crate::task::events::beating(writing, beat) => Some(written),
                () = interrupt.wait() => None,
            };
            call.abort();
            match written {
                Some(Ok(written)) => summary = Some(written),
                Some(Err(reason)) => ocflow_model::output::say(&format!(
                    "ocflow: the LLM summary failed ({reason}); writing the summary from the \
                     journal"
                )),
                None => ocflow_model::output::say(
                    "ocflow: interrupted while the model wrote the summary; writing it from the \
                     journal",
                ),
            }
            self.status
                .count_tokens(&settings.profile, &llm.usage_for("summary").since(&before));
            self.save()?;
        }
        let (summary, contradicted_claims) = match summary {
            Some(written) => (written.text, written.contradicted),
            None => (
                crate::engine::summary::from_journal(&self.task, &self.status, &self.flow)?,
                Vec::new(),
            ),
        };
        workspace::write_atomic(&summary_path, summary.as_bytes())?;
        self.events.emit(Event::FlowFinished {
            task_id: self.task.task_id.clone(),
            state: self.status.state,
            reason: self.status.failure_reason(),
            changed_files,
            diff,
            summary: summary_path,
            summary_text: summary,
            tokens: self.status.tokens,
            contradicted_claims,
        })?;
        Ok(if all_done && !did_nothing {
            FlowOutcome::Succeeded
        } else {
            FlowOutcome::Failed
        })
    }

    /// Writes `changes.diff` (none without changes); returns the changed files and the diff.
    fn write_diff(&self) -> Result<(Vec<String>, Option<PathBuf>)> {
        let changes = crate::task::review::changes(&self.task, &self.status, &self.flow)?;
        let diff = if changes.is_empty() {
            None
        } else {
            let path = self.task.file(workspace::DIFF_FILE);
            let text = crate::task::review::unified_diff(&changes)?;
            workspace::write_atomic(&path, text.as_bytes())?;
            Some(path)
        };
        let changed_files = changes
            .into_iter()
            .map(|c| c.path.as_str().to_string())
            .collect();
        Ok((changed_files, diff))
    }

    /// Writes the status now (every change but a step started or succeeded).
    fn save(&mut self) -> Result<()> {
        let status_bytes = state::save_status(&self.task, &mut self.status)?;
        self.checkpoint = Checkpoint {
            at: Instant::now(),
            journal_bytes: self.events.journal_bytes(),
            status_bytes,
        };
        Ok(())
    }

    /// Writes the status when the journal has grown enough since, or enough time passed.
    fn save_when_due(&mut self) -> Result<()> {
        let grown = self
            .events
            .journal_bytes()
            .saturating_sub(self.checkpoint.journal_bytes);
        let enough = (2 * self.checkpoint.status_bytes).max(CHECKPOINT_MIN_BYTES);
        if grown >= enough || self.checkpoint.at.elapsed() >= CHECKPOINT_EVERY {
            self.save()?;
        }
        Ok(())
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

fn append(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut file| file.write_all(bytes))
        .io_context(|| format!("writing {}", path.display()))
}
