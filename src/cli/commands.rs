//! The commands: each one resolves what it needs, does its work through the library's parts,
//! and returns the process exit code.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::engine::bridge::{self, Bridge, HostLlm};
use crate::cli::args::{
    ApplyArgs, Command, LimitArgs, PlanArgs, ResumeArgs, RunArgs, StatusArgs, TaskArg,
};
use crate::cli::config::{self, Config};
use crate::error::{Error, IoContext, Result};
use crate::task::events::{self, Event, Events};
use crate::engine::executor::{Executor, FlowOutcome, Interrupt, RecoverySettings, Settings};
use crate::model::flow::Flow;
use crate::task::journal::Journal;
use crate::llm::client::{Llm, LlmErrorKind};
use crate::flow::operations;
use crate::engine::orphans;
use crate::llm::planner::{PlanError, Planner};
use crate::model::repo_path::RepoPath;
use crate::task::review::{self, Applied};
use crate::task::staging;
use crate::model::status::{self, FlowState, FlowStatus, StepState};
use crate::flow::validate::{self, PathRules};
use crate::task::workspace::{self, TaskDir};

/// Exit codes of the contract.
pub const EXIT_OK: u8 = 0;
pub const EXIT_FLOW_FAILED: u8 = 1;
pub const EXIT_INTERRUPTED: u8 = 130;

/// Runs one command.
pub fn dispatch(config: &Config, command: Command) -> Result<u8> {
    match command {
        Command::Run(args) => with_runtime(|| run(config, args)),
        Command::Plan(args) => with_runtime(|| plan(config, args)),
        Command::Demo => with_runtime(|| crate::cli::demo::run(config)),
        Command::SandboxExec(_) => Err(Error::Usage(
            "sandbox-exec runs before configuration".into(),
        )),
        Command::Resume(args) => with_runtime(|| resume(config, args)),
        Command::Status(args) => status(config, args),
        Command::Diff(args) => diff(config, args),
        Command::Apply(args) => apply(config, args),
    }
}

/// Runs an async command on a fresh runtime. The runtime is not waited for on the way out: a
/// step interrupted by a signal may still be unwinding in its blocking thread.
fn with_runtime<F: Future<Output = Result<u8>>>(command: impl FnOnce() -> F) -> Result<u8> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .io_context(|| "starting the async runtime".to_string())?;
    let code = runtime.block_on(command());
    runtime.shutdown_background();
    code
}

pub async fn run(config: &Config, args: RunArgs) -> Result<u8> {
    let given = match (&args.plan, &args.task) {
        (Some(plan), _) => Some(read_flow(plan, args.task.as_deref(), &config.path_rules())?),
        (None, Some(_)) => None,
        (None, None) => return Err(Error::Usage("give a task, `ocflow run \"add input validation to api.py\"`, or a flow, `ocflow run --plan FLOW.json`".into())),
    };
    let llm = match &given {
        // A given flow needs the LLM only for its LLM operations; the summary falls back.
        Some(flow) => match (
            connect_llm(config)?,
            flow.steps
                .iter()
                .find(|s| operations::step_needs_llm(&s.operation, &s.params)),
        ) {
            (None, Some(step)) => {
                let missing = config
                    .require_llm()
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                return Err(Error::Usage(format!(
                    "step {} ({}) needs an LLM, and {missing}",
                    step.id, step.operation
                )));
            }
            (llm, _) => llm,
        },
        None => Some(require_connected_llm(config)?),
    };
    let bridge = load_bridge(config)?;
    let task_text = given.as_ref().map_or_else(
        || args.task.clone().unwrap_or_default(),
        |flow| flow.task.clone(),
    );
    let task_id = match &args.task_id {
        Some(id) if workspace::is_valid_task_id(id) => id.clone(),
        Some(id) => {
            return Err(Error::Usage(format!(
                "--task-id {id:?}: use letters, digits, `.`, `_` and `-`, starting with a letter or digit"
            )));
        }
        None => unused_task_id(&config.workspace, &task_text),
    };
    let interrupt = Interrupt::listen();
    let task = TaskDir::new(&config.workspace, &task_id);
    task.create()?;
    let _lock = task.lock()?;
    if config.default_workspace {
        exclude_from_git(&config.repo);
    }
    let mut events = Events::new(
        Journal::open(&task.file(workspace::JOURNAL_FILE))?,
        config.json,
    );
    events.emit(Event::FlowStarted {
        task_id: task_id.clone(),
        task: task_text.clone(),
        task_dir: task.root.clone(),
        repo: config.repo.clone(),
        library: bridge.description.clone(),
    })?;
    let (flow, answers) = match given {
        Some(flow) => (flow, 0),
        None => {
            let llm = llm
                .as_deref()
                .ok_or_else(|| Error::Usage("no LLM".into()))?;
            let llm_config = config.require_llm()?;
            let allow_destructive = args.limits.allow_destructive
                || config.file.recovery.allow_destructive == Some(true);
            let planner = Planner {
                llm,
                settings: &llm_config.planner,
                rules: &config.path_rules(),
                skip: &[config::canonical_or_absolute(&config.workspace)],
                allow_destructive,
            };
            match planner
                .plan(&task_text, &task.root.join(PLANNING_DIR))
                .await
            {
                Ok(flow) => (flow, count_answers(&task.root.join(PLANNING_DIR))),
                Err(error) => {
                    return planning_failed(
                        &task,
                        &task_text,
                        &config.repo,
                        llm,
                        &mut events,
                        error,
                    );
                }
            }
        }
    };
    workspace::write_json_atomic(&task.file(workspace::FLOW_FILE), &flow)?;
    let mut flow_status = FlowStatus::new(&task_id, &flow, &config.repo);
    if let Some(llm) = &llm {
        flow_status.tokens.add(&llm.usage_for("planner"));
    }
    flow_status.save(&task.file(workspace::STATUS_FILE))?;
    events.emit(Event::FlowPlanned {
        steps: flow.steps.len(),
        planner_answers: answers,
    })?;
    snapshot(&task, &config.repo, &config.workspace, &mut events)?;
    let settings = settings(config, &config.repo, &config.workspace, &args.limits, llm)?;
    let executor = Executor::new(task, flow, flow_status, events, bridge, settings, interrupt);
    execute(executor, args.apply).await
}

/// Where the planner's raw answers are kept in a task directory.
const PLANNING_DIR: &str = "planning";

fn count_answers(dir: &Path) -> usize {
    fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".md"))
            .count()
    })
}

/// Records a planning failure as a failed flow with no steps, and says why: exit 1, or exit 2
/// when the configuration is at fault (key, URL, model).
fn planning_failed(
    task: &TaskDir,
    task_text: &str,
    repo: &Path,
    llm: &Llm,
    events: &mut Events,
    error: PlanError,
) -> Result<u8> {
    let empty = Flow {
        version: crate::model::flow::FLOW_VERSION,
        task: task_text.to_string(),
        steps: Vec::new(),
    };
    let mut flow_status = FlowStatus::new(&task.task_id, &empty, repo);
    flow_status.tokens.add(&llm.usage_for("planner"));
    flow_status.state = FlowState::Failed;
    flow_status.message = Some(format!("planning failed: {error}"));
    flow_status.finished_at = Some(status::now());
    flow_status.save(&task.file(workspace::STATUS_FILE))?;
    let summary_path = task.file(workspace::SUMMARY_FILE);
    workspace::write_atomic(
        &summary_path,
        crate::engine::summary::from_journal(task, &flow_status, &empty)?.as_bytes(),
    )?;
    events.emit(Event::FlowFinished {
        task_id: task.task_id.clone(),
        state: FlowState::Failed,
        changed_files: Vec::new(),
        summary: summary_path,
    })?;
    events::say(&format!("ocflow: planning failed: {error}"));
    let configuration = matches!(&error, PlanError::Llm(e) if matches!(e.kind, LlmErrorKind::Unauthorized | LlmErrorKind::NotFound | LlmErrorKind::Redirected | LlmErrorKind::QuotaExceeded));
    Ok(if configuration { 2 } else { EXIT_FLOW_FAILED })
}

/// `ocflow plan TASK`: the validated flow on stdout; the answers kept under `_plans/`.
async fn plan(config: &Config, args: PlanArgs) -> Result<u8> {
    let llm = require_connected_llm(config)?;
    let llm_config = config.require_llm()?;
    let id = match &args.task_id {
        Some(id) if workspace::is_valid_task_id(id) => id.clone(),
        Some(id) => {
            return Err(Error::Usage(format!(
                "--task-id {id:?}: use letters, digits, `.`, `_` and `-`"
            )));
        }
        None => workspace::new_task_id(&args.task, chrono::Local::now()),
    };
    let answers = config.workspace.join("_plans").join(&id);
    let allow_destructive = config.file.recovery.allow_destructive == Some(true);
    let planner = Planner {
        llm: &llm,
        settings: &llm_config.planner,
        rules: &config.path_rules(),
        skip: &[config::canonical_or_absolute(&config.workspace)],
        allow_destructive,
    };
    match planner.plan(&args.task, &answers).await {
        Ok(flow) => {
            print_stdout(&(serde_json::to_string_pretty(&flow).unwrap_or_default() + "\n"));
            events::say(&format!(
                "ocflow: planned {} step(s); the model's answers are in {}",
                flow.steps.len(),
                answers.display()
            ));
            Ok(EXIT_OK)
        }
        Err(PlanError::Llm(error)) if !error.transient() => {
            Err(Error::Usage(format!("planning failed: {error}")))
        }
        Err(error) => {
            events::say(&format!("ocflow: planning failed: {error}"));
            Ok(EXIT_FLOW_FAILED)
        }
    }
}

/// The LLM client, or a usage error saying what to configure.
fn require_connected_llm(config: &Config) -> Result<Arc<Llm>> {
    connect_llm(config)?.ok_or_else(|| {
        Error::Usage(
            config
                .require_llm()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default(),
        )
    })
}

/// The LLM client, when one is configured (`None` otherwise).
fn connect_llm(config: &Config) -> Result<Option<Arc<Llm>>> {
    let Ok(llm) = &config.llm else {
        return Ok(None);
    };
    let client = match (&llm.replay, &llm.endpoint) {
        (Some(recording), _) => Llm::replay(recording),
        (None, Some(endpoint)) => Llm::connect(endpoint.clone(), llm.record.as_deref()),
        (None, None) => return Ok(None),
    };
    client.map(|c| Some(Arc::new(c))).map_err(Error::Usage)
}

async fn resume(config: &Config, args: ResumeArgs) -> Result<u8> {
    let task = find_task(config, args.task.as_deref(), true)?;
    let _lock = task.lock()?;
    let status_path = task.file(workspace::STATUS_FILE);
    let workspace_dir = task
        .root
        .parent()
        .map_or_else(|| config.workspace.clone(), Path::to_path_buf);
    // A crash right after flow.json was written leaves no status yet: every step is pending.
    let mut flow_status = match FlowStatus::load(&status_path) {
        Err(_) if !status_path.exists() && task.file(workspace::FLOW_FILE).is_file() => {
            let flow = read_flow(&task.file(workspace::FLOW_FILE), None, &config.path_rules())?;
            FlowStatus::new(&task.task_id, &flow, &config.repo)
        }
        loaded => loaded?,
    };
    let rules = PathRules {
        repo: flow_status.repo.clone(),
        forbidden: vec![flow_status.repo.join(".git"), workspace_dir.clone()],
    };
    let flow = read_flow(
        &crate::engine::recovery::current_flow_file(&task, flow_status.revision),
        None,
        &rules,
    )?;
    // Earlier revisions' steps stay in the status; every step of the flow must be there.
    if let Some(step) = flow
        .steps
        .iter()
        .find(|s| flow_status.step(&s.id).is_none())
    {
        return Err(Error::BadStateFile {
            path: status_path,
            problem: format!(
                "step {} of the flow is missing; flow.json or the status was edited by hand",
                step.id
            ),
        });
    }
    if flow_status.state == FlowState::Succeeded {
        events::say(&format!(
            "ocflow: task {} already succeeded; nothing to resume. Review it with `ocflow diff {0}`.",
            task.task_id
        ));
        return Ok(EXIT_OK);
    }
    // A recovery left pending needs the LLM settings (even to redo a decision already made);
    // without them the step is simply failed, and --retry-failed runs it again.
    let llm = connect_llm(config)?;
    if flow_status.pending_recovery.is_some() && (args.limits.no_recovery || llm.is_none()) {
        flow_status.pending_recovery = None;
    }
    let pending_recovery = flow_status
        .pending_recovery
        .as_ref()
        .map(|p| p.step.clone());
    let in_flow = |id: &str| flow.step(id).is_some();
    let failed: Vec<String> = flow_status
        .steps
        .iter()
        .filter(|s| {
            s.status == StepState::Failed
                && in_flow(&s.id)
                && Some(&s.id) != pending_recovery.as_ref()
        })
        .map(|s| s.id.clone())
        .collect();
    if !failed.is_empty() && !args.retry_failed {
        for step in flow_status
            .steps
            .iter()
            .filter(|s| s.status == StepState::Failed)
        {
            events::say(&format!(
                "ocflow: step {} failed: {}",
                step.id,
                step.message.as_deref().unwrap_or("no message")
            ));
        }
        events::say(&format!(
            "ocflow: not resuming over failed steps; fix the cause and run `ocflow resume {} --retry-failed`",
            task.task_id
        ));
        return Ok(EXIT_FLOW_FAILED);
    }
    let bridge = load_bridge(config)?;
    let interrupt = Interrupt::listen();
    let stopped = orphans::stop(&task);
    if stopped > 0 {
        events::say(&format!(
            "ocflow: stopped {stopped} command(s) left running in this task when ocflow was killed"
        ));
    }
    let settings = settings(
        config,
        &flow_status.repo.clone(),
        &workspace_dir,
        &args.limits,
        llm,
    )?;
    let limits = settings.recovery_limits;
    let calls = flow_status.recovery_calls;
    for step in &mut flow_status.steps {
        match step.status {
            StepState::Running => {
                step.status = StepState::Pending;
                step.message = Some("was running when ocflow stopped; it runs again".into());
            }
            // With an LLM, --retry-failed starts a new recovery round for the failed step;
            // without one, the step simply runs again.
            // A new round only where the caps leave room for one; otherwise the step just runs
            // again, as the user asked.
            StepState::Failed
                if failed.contains(&step.id)
                    && settings.recovery.is_some()
                    && flow_status.pending_recovery.is_none()
                    && step.attempts < limits.max_attempts_per_step
                    && calls < limits.max_recovery_calls =>
            {
                flow_status.pending_recovery = Some(crate::model::status::PendingRecovery {
                    step: step.id.clone(),
                    decision: None,
                });
            }
            StepState::Failed if failed.contains(&step.id) => step.status = StepState::Pending,
            _ => {}
        }
    }
    flow_status.message = None;
    flow_status.save(&status_path)?;
    let mut events = Events::new(
        Journal::open(&task.file(workspace::JOURNAL_FILE))?,
        config.json,
    );
    let pending = flow_status
        .steps
        .iter()
        .filter(|s| s.status == StepState::Pending)
        .map(|s| s.id.clone())
        .collect();
    events.emit(Event::FlowResumed {
        task_id: task.task_id.clone(),
        task_dir: task.root.clone(),
        pending,
    })?;
    let repo = flow_status.repo.clone();
    if !task.snapshot().is_dir() {
        snapshot(&task, &repo, &workspace_dir, &mut events)?;
    }
    staging::rebuild_final_output(&task, &flow_status, &flow)?;
    let executor = Executor::new(task, flow, flow_status, events, bridge, settings, interrupt);
    execute(executor, args.apply).await
}

/// Runs the executor and turns its outcome into an exit code, applying on success if asked.
async fn execute(mut executor: Executor, apply_after: bool) -> Result<u8> {
    let outcome = match executor.run().await {
        Ok(outcome) => outcome,
        Err(error) => {
            executor.abandon(&error);
            return Err(error);
        }
    };
    match outcome {
        FlowOutcome::Succeeded if apply_after => {
            let changes = review::changes(&executor.task, &executor.status, &executor.flow)?;
            let workspace_dir = executor
                .task
                .root
                .parent()
                .unwrap_or(&executor.task.root)
                .to_path_buf();
            let applied = review::apply(&executor.status.repo, &workspace_dir, &changes, false)?;
            record_applied(
                &mut executor.events,
                &mut executor.status,
                &executor.task,
                applied,
            )?;
            Ok(EXIT_OK)
        }
        FlowOutcome::Succeeded => Ok(EXIT_OK),
        FlowOutcome::Failed => Ok(EXIT_FLOW_FAILED),
        FlowOutcome::Interrupted => Ok(EXIT_INTERRUPTED),
    }
}

fn status(config: &Config, args: StatusArgs) -> Result<u8> {
    let task = find_task(config, args.task.as_deref(), false)?;
    let path = task.file(workspace::STATUS_FILE);
    if args.follow {
        return crate::cli::follow::follow(&path, config.json);
    }
    let flow_status = FlowStatus::load(&path)?;
    let text = if config.json {
        serde_json::to_string_pretty(&flow_status).unwrap_or_default() + "\n"
    } else {
        flow_status.render_table()
    };
    print_stdout(&text);
    Ok(EXIT_OK)
}

fn diff(config: &Config, args: TaskArg) -> Result<u8> {
    let task = find_task(config, args.task.as_deref(), false)?;
    let flow_status = FlowStatus::load(&task.file(workspace::STATUS_FILE))?;
    let changes = review::changes(&task, &flow_status, &current_flow(&task, &flow_status)?)?;
    if changes.is_empty() {
        events::say(&format!("ocflow: task {} changed no file", task.task_id));
    }
    print_stdout(&review::unified_diff(&changes)?);
    Ok(EXIT_OK)
}

fn apply(config: &Config, args: ApplyArgs) -> Result<u8> {
    let task = find_task(config, args.task.as_deref(), false)?;
    let _lock = task.lock()?;
    let mut flow_status = FlowStatus::load(&task.file(workspace::STATUS_FILE))?;
    if flow_status.state != FlowState::Succeeded {
        return Err(Error::Usage(format!(
            "task {} is {}, not succeeded; only a finished flow is applied. See `ocflow status {0}`, then resume it",
            task.task_id, flow_status.state
        )));
    }
    let changes = review::changes(&task, &flow_status, &current_flow(&task, &flow_status)?)?;
    let workspace_dir = task.root.parent().unwrap_or(&task.root).to_path_buf();
    let applied = review::apply(&flow_status.repo, &workspace_dir, &changes, args.force)?;
    let mut events = Events::new(
        Journal::open(&task.file(workspace::JOURNAL_FILE))?,
        config.json,
    );
    record_applied(&mut events, &mut flow_status, &task, applied)?;
    Ok(EXIT_OK)
}

fn record_applied(
    events: &mut Events,
    flow_status: &mut FlowStatus,
    task: &TaskDir,
    applied: Applied,
) -> Result<()> {
    match applied {
        Applied::Written(files) => {
            flow_status.applied_at = Some(status::now());
            flow_status.save(&task.file(workspace::STATUS_FILE))?;
            events.emit(Event::ChangesApplied {
                task_id: task.task_id.clone(),
                files,
            })
        }
        Applied::AlreadyApplied => {
            events::say(&format!(
                "ocflow: the repository already holds the changes of task {}",
                task.task_id
            ));
            Ok(())
        }
        Applied::Nothing => {
            events::say(&format!(
                "ocflow: task {} changed no file; nothing to apply",
                task.task_id
            ));
            Ok(())
        }
    }
}

/// The flow of a task as its status's revision has it.
pub fn current_flow(task: &TaskDir, flow_status: &FlowStatus) -> Result<Flow> {
    Flow::load(&crate::engine::recovery::current_flow_file(
        task,
        flow_status.revision,
    ))
}

/// Reads and validates a flow file, checking its size before reading it whole.
fn read_flow(path: &Path, default_task: Option<&str>, rules: &PathRules) -> Result<Flow> {
    let size = fs::metadata(path)
        .map_err(|err| Error::Usage(format!("cannot read the flow {}: {err}", path.display())))?
        .len();
    if size > validate::MAX_FLOW_BYTES as u64 {
        return Err(Error::InvalidFlow(vec![validate::Problem {
            step: None,
            rule: "limits",
            message: format!(
                "{} is {size} bytes; the limit is {}",
                path.display(),
                validate::MAX_FLOW_BYTES
            ),
        }]));
    }
    let text = fs::read_to_string(path)
        .map_err(|err| Error::Usage(format!("cannot read the flow {}: {err}", path.display())))?;
    validate::parse_flow(&text, default_task, rules).map_err(Error::InvalidFlow)
}

fn load_bridge(config: &Config) -> Result<Arc<Bridge>> {
    let python_dir = bridge::find_python_dir(config.python_dir.clone());
    Ok(Arc::new(Bridge::load(
        python_dir.as_deref(),
        &config.codex_lib,
    )?))
}

fn settings(
    config: &Config,
    repo: &Path,
    workspace_dir: &Path,
    limits: &LimitArgs,
    llm: Option<Arc<Llm>>,
) -> Result<Settings> {
    let models = config.llm.as_ref().ok();
    let operations = models.map(|m| m.operations.clone());
    Ok(Settings {
        llm_config: operations.as_ref().map_or_else(|| serde_json::json!({}), |m| serde_json::json!({"model": m.model, "temperature": m.temperature, "max_tokens": m.max_tokens})),
        host_llm: llm.clone().zip(operations).map(|(llm, settings)| Arc::new(HostLlm { llm, settings, runtime: tokio::runtime::Handle::current() })),
        summary_llm: llm.clone().zip(models.map(|m| m.planner.clone())),
        recovery_limits: config.recovery_limits(),
        jobs: config.jobs(limits),
        sandbox: config.sandbox(limits, repo, workspace_dir)?,
        recovery: llm.zip(models).filter(|_| !limits.no_recovery && config.file.recovery.enabled != Some(false)).map(|(llm, models)| RecoverySettings {
            llm,
            model: models.planner.clone(),
            rules: PathRules { repo: repo.to_path_buf(), forbidden: vec![repo.join(".git"), config::canonical_or_absolute(workspace_dir)] },
            allow_destructive: limits.allow_destructive || config.file.recovery.allow_destructive == Some(true),
        }),
        limits: config.limits(limits),
        // The workspace as a repository path, when it lies inside the repository.
        forbidden: RepoPath::from_walk(repo, &config::canonical_or_absolute(workspace_dir)).into_iter().collect(),
    })
}

fn snapshot(task: &TaskDir, repo: &Path, workspace_dir: &Path, events: &mut Events) -> Result<()> {
    let stats =
        staging::take_snapshot(repo, task, &[config::canonical_or_absolute(workspace_dir)])?;
    fs::create_dir_all(task.final_output())
        .io_context(|| format!("creating {}", task.final_output().display()))?;
    events.emit(Event::SnapshotTaken {
        files: stats.files,
        bytes: stats.bytes,
        duration_ms: stats.duration_ms,
    })
}

/// A task id not yet used in the workspace.
fn unused_task_id(workspace_dir: &Path, task: &str) -> String {
    let base = workspace::new_task_id(task, chrono::Local::now());
    let mut id = base.clone();
    let mut n = 2;
    while workspace_dir.join(&id).exists() {
        id = format!("{base}-{n}");
        n += 1;
    }
    id
}

/// Finds a task: a task directory path, a task id in the workspace, or the most recently
/// updated flow (only unfinished ones when `unfinished`).
fn find_task(config: &Config, arg: Option<&str>, unfinished: bool) -> Result<TaskDir> {
    if let Some(arg) = arg {
        let as_path = PathBuf::from(arg);
        if as_path.join(workspace::STATUS_FILE).is_file() {
            let root = as_path
                .canonicalize()
                .io_context(|| format!("resolving {arg}"))?;
            return TaskDir::at(root)
                .ok_or_else(|| Error::Usage(format!("{arg} is not a task directory")));
        }
        let task = TaskDir::new(&config.workspace, arg);
        let exists = task.file(workspace::STATUS_FILE).is_file()
            || task.file(workspace::FLOW_FILE).is_file();
        if workspace::is_valid_task_id(arg) && exists {
            return Ok(task);
        }
        return Err(Error::Usage(format!(
            "no task {arg:?} in the workspace {}; give a task id from there, a task directory, or --workspace",
            config.workspace.display()
        )));
    }
    let entries = fs::read_dir(&config.workspace).map_err(|_| {
        Error::Usage(format!(
            "no flows in {}: start one with `ocflow run`, or point --workspace at the right place",
            config.workspace.display()
        ))
    })?;
    let mut best: Option<(String, TaskDir)> = None;
    for entry in entries.flatten() {
        let Some(task) = TaskDir::at(entry.path()) else {
            continue;
        };
        let Ok(flow_status) = FlowStatus::load(&task.file(workspace::STATUS_FILE)) else {
            continue;
        };
        if unfinished && flow_status.state == FlowState::Succeeded {
            continue;
        }
        if best
            .as_ref()
            .is_none_or(|(time, _)| flow_status.updated_at > *time)
        {
            best = Some((flow_status.updated_at, task));
        }
    }
    best.map(|(_, task)| task).ok_or_else(|| {
        Error::Usage(format!(
            "no {}flow in {}; name one with a task id",
            if unfinished { "unfinished " } else { "" },
            config.workspace.display()
        ))
    })
}

/// Adds the default workspace to the repository's `.git/info/exclude`, so it never shows up
/// as untracked files.
fn exclude_from_git(repo: &Path) {
    let info = repo.join(".git").join("info");
    if !repo.join(".git").is_dir() {
        return;
    }
    let exclude = info.join("exclude");
    let current = fs::read_to_string(&exclude).unwrap_or_default();
    if current.lines().any(|line| line.trim() == "/.ocflow/") {
        return;
    }
    let mut text = current;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str("/.ocflow/\n");
    if let Err(err) = fs::create_dir_all(&info).and_then(|()| fs::write(&exclude, text)) {
        events::say(&format!(
            "ocflow: warning: could not add /.ocflow/ to {}: {err}",
            exclude.display()
        ));
    }
}

/// Writes command output (data, not progress) to stdout.
#[allow(clippy::print_stdout)]
pub fn print_stdout(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}
