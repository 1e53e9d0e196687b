//! `ocflow run` and `ocflow plan`: plan a task with the LLM (or take a flow file), validate
//! it, create the task directory, snapshot the repository and run the flow.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use crate::cli::args::{PlanArgs, RunArgs};
use crate::cli::budget;
use crate::cli::config::Config;
use crate::cli::execute;
use crate::cli::gates::{self, Gate};
use crate::cli::launch::{self, connect_llm, require_llm};
use crate::cli::live;
use crate::cli::progress::Progress;
use ocflow_core::engine::bridge::Bridge;
use ocflow_core::engine::executor::{Executor, FlowOutcome};
use ocflow_core::engine::planning::{self, Planned, no_steps};
use ocflow_core::engine::signals::Interrupt;
use ocflow_core::flow::deliverables::Order;
use ocflow_core::flow::operations;
use ocflow_core::flow::path_rules::canonical_or_absolute;
use ocflow_core::flow::validate::MAX_TASK_BYTES;
use ocflow_core::llm::budget::Budget;
use ocflow_core::llm::client::Llm;
use ocflow_core::llm::planner::{PlanError, Planner, RepoMap};
use ocflow_core::llm::planner_prompt::MAP_BUDGET;
use ocflow_core::task::events::Events;
use ocflow_core::task::journal::Journal;
use ocflow_core::task::state;
use ocflow_core::task::workspace::{self, TaskDir};
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::event::Event;
use ocflow_model::exit::ExitCode;
use ocflow_model::flow::Flow;
use ocflow_model::output::{print_stdout, say};
use ocflow_model::status::FlowStatus;

/// `ocflow run`: plan (or read the flow), then run it; `connected`: the LLM client, when it
/// was made already (see `launch::connect_llm`).
pub(crate) async fn run(
    config: &Config,
    args: RunArgs,
    connected: Option<Result<Option<Arc<Llm>>>>,
) -> Result<ExitCode> {
    start(config, args, false, connected).await
}

/// `ocflow resume` of a task stopped before it had a flow: plans it again, in its own task
/// directory.
pub(crate) async fn plan_again(
    config: &Config,
    task_id: &str,
    task: &str,
    apply: bool,
    limits: crate::cli::args::LimitArgs,
) -> Result<ExitCode> {
    let args = RunArgs {
        task: Some(task.to_string()),
        task_file: None,
        plan: None,
        task_id: Some(task_id.to_string()),
        apply,
        detach: false,
        exit_code_file: None,
        limits,
    };
    start(config, args, true, None).await
}

/// Plans (or reads the flow) and runs it; `again`: the task directory exists already.
async fn start(
    config: &Config,
    mut args: RunArgs,
    again: bool,
    connected: Option<Result<Option<Arc<Llm>>>>,
) -> Result<ExitCode> {
    let connect = || connected.unwrap_or_else(|| connect_llm(config));
    args.task = read_task(args.task.take(), args.task_file.as_deref())?;
    let (given, notes) = given_flow(config, &args)?;
    let llm = match &given {
        Some(flow) => llm_for_given(config, flow, connect()?)?,
        None => Some(connect()?.ok_or_else(|| launch::no_llm(config))?),
    };
    // A planned flow needs the library's catalogue for its planner; a given one waits for the
    // library only to say which one runs it (`flow_started`), its task set up meanwhile.
    if given.is_none() {
        launch::load_bridge(config)?;
    }
    let task_text = match &given {
        Some(flow) => flow.task.clone(),
        None => args.task.clone().unwrap_or_default(),
    };
    let task_id = task_id_for(args.task_id.as_deref(), &config.workspace, &task_text)?;
    let interrupt = Interrupt::listen();
    let models = config.llm.as_ref().ok();
    let live = live::install(
        config.json,
        models
            .filter(|_| given.is_none())
            .map(|l| l.planner.model.clone()),
        models.map(|l| l.operations.model.clone()),
    );
    let task = TaskDir::new(&config.workspace, &task_id);
    // A run that makes the workspace takes it back if it cannot start (`library_for`).
    let new_workspace = !config.workspace.exists();
    let _lock = task.open_for_run(&config.repo, again)?;
    // Named by its id from any directory from now on (`ocflow status ID`, `wait`, `diff`…).
    crate::cli::task_index::remember(&task, &config.repo);
    if config.default_workspace {
        exclude_from_git(&config.repo);
    }
    let mut events = Events::new(
        Journal::open(&task.file(workspace::JOURNAL_FILE))?,
        Progress::with_live(config.json, live),
    );
    // The budget counts from here (planning included); planned again, the task carries over
    // what its first planning spent.
    let saved = if again {
        state::load_status(&task)
            .map(|s| s.budget)
            .unwrap_or_default()
    } else {
        Default::default()
    };
    let (budget, said) =
        budget::install(config.run.budget, &config.run.prices, saved, llm.as_deref());
    let starting = Starting {
        config,
        args: &args,
        task: &task,
        text: &task_text,
        again,
        new_workspace,
    };
    let bridge = starting.begin(given.as_ref())?;
    events.emit(Event::FlowStarted {
        task_id: task_id.clone(),
        task: task_text.clone(),
        task_dir: task.root.clone(),
        repo: config.repo.clone(),
        library: bridge.description.clone(),
    })?;
    for message in said {
        events.emit(Event::Warning { message })?;
    }
    let was_given = given.is_some();
    let planned = match (given, &llm) {
        (Some(flow), _) => Plan {
            flow,
            notes,
            answers: 0,
            remembered: Vec::new(),
            instructions: Vec::new(),
        },
        (None, Some(llm)) => {
            match plan_flow(config, llm, &task, &task_text, &mut events, &interrupt).await? {
                Ok(plan) => {
                    bridge.preload(plan.flow.operations());
                    plan
                }
                Err(code) => return Ok(code),
            }
        }
        (None, None) => return Err(Error::internal("planning without an LLM client")),
    };
    let ready = Ready {
        task,
        events,
        bridge,
        interrupt,
        llm,
        budget,
        given: was_given,
    };
    ready.run(config, planned, args.apply).await
}

/// The flow given with `--plan` (and what validation added to it, said once it runs), or
/// `None` for a task the model plans. Whether a task can be done is the model's to say (it may
/// refuse), never its words'.
fn given_flow(config: &Config, args: &RunArgs) -> Result<(Option<Flow>, Vec<String>)> {
    match (&args.plan, &args.task) {
        (Some(plan), _) => {
            let read = || {
                launch::read_flow(
                    plan,
                    args.task.as_deref(),
                    &config.rules,
                    &config.roles,
                    Order::Any,
                )
            };
            // Read while the library loads: a flow naming a plugin's operation waits for it.
            let (flow, added) = match read() {
                Err(_) if launch::loading() => {
                    launch::load_operations(config)?;
                    read()?
                }
                read => read?,
            };
            Ok((Some(flow), added))
        }
        (None, Some(_)) => Ok((None, Vec::new())),
        (None, None) => Err(Error::Usage(
            "give a task, `ocflow run \"add input validation to api.py\"`, or a flow, \
             `ocflow run --plan FLOW.json`"
                .into(),
        )),
    }
}

/// The LLM of a given flow: needed only by its LLM operations (the summary falls back), and
/// then every such step's profile, its role's or the operations', must have an endpoint.
fn llm_for_given(config: &Config, flow: &Flow, llm: Option<Arc<Llm>>) -> Result<Option<Arc<Llm>>> {
    let needing = || {
        flow.steps
            .iter()
            .filter(|s| operations::step_needs_llm(&s.operation, &s.params))
    };
    let missing_for = |step: &ocflow_model::flow::Step, missing: &dyn std::fmt::Display| {
        Error::Usage(format!(
            "step {} ({}) needs an LLM, and {missing}",
            step.id, step.operation
        ))
    };
    match &config.llm {
        Err(missing) => match (&llm, needing().next()) {
            (None, Some(step)) => Err(missing_for(step, missing)),
            _ => Ok(llm),
        },
        Ok(models) => {
            for step in needing() {
                let settings = step
                    .role
                    .as_ref()
                    .and_then(|role| models.roles.get(role))
                    .unwrap_or(&models.operations);
                if let Some(missing) = models.unavailable_for(settings) {
                    return Err(missing_for(step, &missing));
                }
            }
            Ok(llm)
        }
    }
}

/// What a new flow's start knows before its library is there.
struct Starting<'a> {
    config: &'a Config,
    args: &'a RunArgs,
    task: &'a TaskDir,
    text: &'a str,
    again: bool,
    new_workspace: bool,
}

impl Starting<'_> {
    /// Saves what `ocflow status` (and an MCP client polling) needs to find the task at once,
    /// while the planner still works, then waits for the library. A given flow is saved first:
    /// killed before its steps are in the status, the task is resumed from its flow, not
    /// planned again. Nothing is left of a run that could not start: the task it made goes,
    /// and the workspace too when it made it.
    fn begin(&self, given: Option<&Flow>) -> Result<Arc<Bridge>> {
        if let Some(flow) = given {
            state::save_flow(self.task, flow)?;
        }
        let mut starting =
            FlowStatus::new(&self.task.task_id, &no_steps(self.text), &self.config.repo);
        starting.message = Some(match given {
            Some(_) => "starting".into(),
            None => "planning the flow with the LLM".into(),
        });
        state::save_status(self.task, &mut starting)?;
        library_for(self.config, self.args, given).inspect_err(|_| {
            if !self.again {
                let _ = std::fs::remove_dir_all(&self.task.root);
            }
            if self.new_workspace {
                workspace::remove_new_workspace(&self.config.workspace);
            }
        })
    }
}

/// A flow to run, and what its planning used.
struct Plan {
    flow: Flow,
    /// What validation added to the flow as written (implied dependencies).
    notes: Vec<String>,
    /// The planner's answers (0 for a given flow).
    answers: usize,
    /// The failure memories and instruction files the planner's prompt carried.
    remembered: Vec<i64>,
    instructions: Vec<String>,
}

/// Plans the task with the model (`engine::planning`), the failure memory recalled for its
/// prompt; `Err(code)`: the flow ended before it had a plan, recorded in the task.
async fn plan_flow(
    config: &Config,
    llm: &Llm,
    task: &TaskDir,
    task_text: &str,
    events: &mut Events,
    interrupt: &Interrupt,
) -> Result<std::result::Result<Plan, ExitCode>> {
    let mut planner = planner(config, llm)?;
    let instructions = planner
        .conventions
        .as_ref()
        .map(|used| used.paths.clone())
        .unwrap_or_default();
    let mut remembered = Vec::new();
    // Past failures on this repository like this task, and what ended them.
    match launch::memory(config).map(|memory| memory.for_planning(task_text)) {
        Some(Ok(recalled)) => {
            planner.past_experience = recalled.text;
            remembered = recalled.ids;
        }
        Some(Err(error)) => events.emit(Event::Warning {
            message: format!("planning goes on without the failure memory: {error}"),
        })?,
        None => {}
    }
    match planning::plan(&planner, task, task_text, &config.repo, events, interrupt).await? {
        Planned::Flow {
            flow,
            notes,
            answers,
        } => Ok(Ok(Plan {
            flow: *flow,
            notes,
            answers,
            remembered,
            instructions,
        })),
        Planned::Ended {
            outcome: FlowOutcome::Failed,
            callers_fault: true,
        } => Ok(Err(ExitCode::Usage)),
        Planned::Ended { outcome, .. } => Ok(Err(execute::exit_code(outcome))),
    }
}

/// A started flow with its plan, ready for its gates and its executor.
struct Ready {
    task: TaskDir,
    events: Events,
    bridge: Arc<Bridge>,
    interrupt: Arc<Interrupt>,
    llm: Option<Arc<Llm>>,
    budget: Option<Arc<Budget>>,
    /// Given with `--plan` (saved before planning would have begun), not planned.
    given: bool,
}

impl Ready {
    /// Saves the flow and its status, asks the gates, and hands the flow to the executor.
    async fn run(mut self, config: &Config, plan: Plan, apply: bool) -> Result<ExitCode> {
        let Plan {
            flow,
            notes,
            answers,
            remembered,
            instructions,
        } = plan;
        let events = &mut self.events;
        for message in notes {
            events.emit(Event::Warning { message })?;
        }
        live::show_plan(&flow, config.json);
        if !self.given {
            state::save_flow(&self.task, &flow)?;
        }
        let mut flow_status = FlowStatus::new(&self.task.task_id, &flow, &config.repo);
        flow_status.use_memories(&remembered);
        flow_status.use_instructions(&instructions);
        let llm = self.llm;
        if let Some(llm) = &llm {
            flow_status.count_tokens(&llm.profile_for("planner"), &llm.usage_for("planner"));
        }
        // Recorded in the journal: how this endpoint takes the answers' JSON shape.
        let answer_form = llm
            .as_ref()
            .filter(|_| answers > 0)
            .and_then(|l| l.answer_form(&l.profile_for("planner")))
            .map(|f| f.name().to_string());
        // A flow the LLM planned meets its sandbox probe here (it ran while the model
        // planned): one that failed stops the command before any step runs, its message
        // naming the fix. The flow is saved, so `ocflow resume` runs it once that is fixed,
        // without planning it again. A flow given with `--plan` has had no such time: the
        // engine waits for the probe before its first command step, and its LLM steps start
        // beside the probe.
        let wait = if self.given {
            launch::SandboxWait::BeforeCommands
        } else {
            launch::SandboxWait::Now
        };
        let mut settings =
            launch::settings_waiting(config, &config.rules, &config.workspace, llm, wait)?;
        // Saved before any question: a flow that waits for `ocflow approve` keeps its limits
        // and what planning spent, which the resume takes up again.
        if let Some(budget) = &self.budget {
            flow_status.budget = budget.usage();
        }
        settings.budget = self.budget;
        launch::report_sandbox(config, &settings, &mut flow_status, events)?;
        state::save_status(&self.task, &mut flow_status)?;
        events.emit(Event::FlowPlanned {
            steps: flow.steps.len(),
            planner_answers: answers,
            answer_form,
            deliverables: flow.deliverables.as_ref().map(|d| d.describe()),
        })?;
        let task = &self.task;
        let flow = match gates::before_running(config, task, flow, &mut flow_status, events, apply)
            .await?
        {
            Gate::Go(flow) => flow,
            Gate::Stop(code) => return Ok(code),
        };
        let executor = Executor::from_snapshot(
            self.task,
            flow,
            flow_status,
            self.events,
            self.bridge,
            settings,
            self.interrupt,
        )?;
        execute::execute(executor, apply, config.approvals.apply, config.json).await
    }
}

/// The planner for the configured model, repository and policy. It is told how the
/// repository runs its tests by the library, which `run_tests` asks the same: a library that
/// fails to say is a warning, never a failed plan.
fn planner<'a>(config: &'a Config, llm: &'a Llm) -> Result<Planner<'a>> {
    let models = config.require_llm()?;
    if let Some(missing) = models.unavailable_for(&models.planner) {
        return Err(Error::Usage(format!(
            "planning needs an LLM, and {missing}"
        )));
    }
    let bridge = launch::load_bridge(config)?;
    // None for a library that cannot say (a `--codex-lib` module without find_test_commands).
    let test_commands = bridge
        .test_commands(&config.repo)
        .map(Option::unwrap_or_default);
    let test_commands = test_commands.unwrap_or_else(|err| {
        say(&format!(
            "ocflow: warning: the planner is not told how the tests run: {err:#}"
        ));
        Vec::new()
    });
    let skip = vec![canonical_or_absolute(&config.workspace)];
    // The map of the repository's definitions: a library that cannot make one is a warning,
    // and the planner still sees the files.
    let repo = config.repo.clone();
    let repo_map: RepoMap = Box::new(move |task, files| {
        bridge
            .repo_map(&repo, files, task, MAP_BUDGET)
            .unwrap_or_else(|err| {
                say(&format!(
                    "ocflow: warning: the planner is not shown the repository's definitions: \
                     {err:#}"
                ));
                None
            })
            .unwrap_or_default()
    });
    // The repository's instructions for agents, the root's: the planner sees the whole.
    let conventions = launch::project_instructions(&config.repo, &skip[0]).for_target(None);
    Ok(Planner {
        llm,
        settings: &models.planner,
        rules: &config.rules,
        skip,
        policy: config.proposal_policy(),
        roles: &config.roles,
        test_commands,
        past_experience: String::new(),
        conventions,
        repo_map: Some(repo_map),
    })
}

/// `ocflow plan TASK`: the validated flow on stdout; the answers kept under `_plans/`.
pub(crate) async fn plan(config: &Config, args: PlanArgs) -> Result<ExitCode> {
    let task = read_task(args.task.clone(), args.task_file.as_deref())?
        .ok_or_else(|| Error::Usage("give a task, or --task-file FILE".into()))?;
    let llm = require_llm(config)?;
    let id = match &args.task_id {
        Some(id) if workspace::is_valid_task_id(id) => id.clone(),
        Some(id) => {
            return Err(Error::Usage(format!(
                "--task-id {id:?}: use letters, digits, `.`, `_` and `-`"
            )));
        }
        None => workspace::new_task_id(&task),
    };
    let answers = config.workspace.join("_plans").join(&id);
    match planner(config, &llm)?.plan(&task, &answers).await {
        Ok((flow, notes)) => {
            for note in notes {
                say(&format!("ocflow: {note}"));
            }
            // For people, indented; with --json, one line like every other JSON output.
            let text = if config.json {
                serde_json::to_string(&flow)
            } else {
                serde_json::to_string_pretty(&flow)
            };
            print_stdout(&(text.unwrap_or_default() + "\n"));
            say(&format!(
                "ocflow: planned {} step(s); the model's answers are in {}",
                flow.steps.len(),
                answers.display()
            ));
            Ok(ExitCode::Success)
        }
        // The endpoint's fault or the configuration's: exit 1 when it may pass, 2 when not.
        Err(PlanError::Llm(error)) => Err(Error::Llm(error)),
        Err(error @ (PlanError::Refused { .. } | PlanError::Unchecked { .. })) => {
            say(&format!("ocflow: {error}"));
            Ok(ExitCode::Usage)
        }
        Err(error) => {
            say(&format!("ocflow: planning failed: {error}"));
            Ok(ExitCode::Failure)
        }
    }
}

/// The library, waited for when it loads in the background; a given flow is checked again
/// when the library declares other operations than the ones it was read against, and its
/// operations' modules are imported while the flow starts, not by its first steps.
fn library_for(config: &Config, args: &RunArgs, given: Option<&Flow>) -> Result<Arc<Bridge>> {
    let bridge = launch::load_bridge(config)?;
    if let (Some(plan), Some(flow)) = (&args.plan, given) {
        if launch::validated_again() {
            launch::read_flow(
                plan,
                args.task.as_deref(),
                &config.rules,
                &config.roles,
                Order::Any,
            )?;
        }
        bridge.preload(flow.operations());
    }
    Ok(bridge)
}

/// The task's words: as given, from stdin (`-`), or from a file; an empty one, or one over
/// [`MAX_TASK_BYTES`], is refused.
pub(crate) fn read_task(task: Option<String>, file: Option<&Path>) -> Result<Option<String>> {
    let (text, source) = match (task, file) {
        (Some(dash), None) if dash == "-" => {
            let text = read_bounded(std::io::stdin().lock(), "stdin")
                .io_context(|| "reading the task from stdin".into())?;
            (text, "stdin".to_string())
        }
        (_, Some(path)) => {
            let source = format!("--task-file {}", path.display());
            let text = fs::File::open(path)
                .and_then(|file| read_bounded(file, &source))
                .map_err(|err| Error::Usage(format!("{source}: {err}")))?;
            (text, source)
        }
        (Some(task), None) => {
            check_task_size(task.len(), "the command line")?;
            return Ok(Some(task));
        }
        (None, None) => return Ok(None),
    };
    check_task_size(text.len(), &source)?;
    let text = text.trim();
    if text.is_empty() {
        return Err(Error::Usage(format!(
            "the task from {source} is empty; write what to do, e.g. `echo \"fix the failing \
             test\" | ocflow run -`"
        )));
    }
    Ok(Some(text.to_string()))
}

/// Reads at most one byte past [`MAX_TASK_BYTES`]: enough to tell that a task is too long without
/// holding a 52 MB one in memory.
fn read_bounded(reader: impl std::io::Read, source: &str) -> std::io::Result<String> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut reader.take(MAX_TASK_BYTES as u64 + 1), &mut bytes)?;
    String::from_utf8(bytes).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("the task from {source} is not UTF-8 text"),
        )
    })
}

/// Refuses a task over [`MAX_TASK_BYTES`], saying where a long specification belongs.
fn check_task_size(len: usize, source: &str) -> Result<()> {
    if len <= MAX_TASK_BYTES {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "the task from {source} is over the 1 MiB limit for a task (the same limit holds for \
         the command line, stdin and --task-file); put a long specification in a file in the \
         repository and give a short task that names it, e.g. `ocflow run \"implement what \
         docs/spec.md describes\"`"
    )))
}

/// The id a new task gets: `--task-id` when given (checked), else a fresh one from its words.
pub(crate) fn task_id_for(given: Option<&str>, workspace_dir: &Path, task: &str) -> Result<String> {
    match given {
        Some(id) if workspace::is_valid_task_id(id) => Ok(id.to_string()),
        Some(id) => Err(Error::Usage(format!(
            "--task-id {id:?}: use letters, digits, `.`, `_` and `-`, starting with a letter or \
             digit"
        ))),
        None => Ok(unused_task_id(workspace_dir, task)),
    }
}

/// A task id not yet used in the workspace.
fn unused_task_id(workspace_dir: &Path, task: &str) -> String {
    // 32³ suffixes per word: a few tries find a free one; a crowded word gets a longer id.
    for _ in 0..20 {
        let id = workspace::new_task_id(task);
        if !workspace_dir.join(&id).exists() && !is_prefix_of_a_task(workspace_dir, &id) {
            return id;
        }
    }
    let base = workspace::new_task_id(task);
    let mut id = base.clone();
    let mut n = 2;
    while workspace_dir.join(&id).exists() {
        id = format!("{base}-{n}");
        n += 1;
    }
    id
}

/// Whether `id` is the beginning of another task's id (it could not then name itself alone).
fn is_prefix_of_a_task(workspace_dir: &Path, id: &str) -> bool {
    fs::read_dir(workspace_dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(id)))
    })
}

/// Adds the default workspace to the repository's `.git/info/exclude`, so it never shows up
/// as untracked files.
fn exclude_from_git(repo: &Path) {
    let Some(info) = git_common_dir(repo).map(|dir| dir.join("info")) else {
        return;
    };
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
        say(&format!(
            "ocflow: warning: could not add /.ocflow/ to {}: {err}",
            exclude.display()
        ));
    }
}

/// The git directory whose `info/exclude` the work tree `repo` reads: `.git` itself, or for a
/// linked worktree (`.git` a file, `gitdir: …`) the repository's common directory, which its
/// worktrees share (`commondir` in the worktree's own git directory).
fn git_common_dir(repo: &Path) -> Option<std::path::PathBuf> {
    let dot_git = repo.join(".git");
    if dot_git.is_dir() {
        return Some(dot_git);
    }
    let pointer = fs::read_to_string(&dot_git).ok()?;
    let own = repo.join(pointer.strip_prefix("gitdir:")?.trim());
    match fs::read_to_string(own.join("commondir")) {
        Ok(common) => Some(own.join(common.trim())),
        Err(_) => Some(own),
    }
}
