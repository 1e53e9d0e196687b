//! `ocflow batch TASKS.jsonl --out DIR`: runs a fleet of flows, each one a child process of
//! this binary (`ocflow run`, or `ocflow resume` of its task directory), M at once, on this
//! machine (`local.rs`) or as Ray tasks across a cluster (`ray.rs`). The driver checks every
//! line first (`tasks_file.rs`), caps the LLM requests in flight across the batch through a
//! proxy of its own holding the key (`llm_gate.rs`), shows progress (`display.rs`), and keeps
//! one result line per finished task plus a summary (`results.rs`): a second run with the same
//! `--out` skips the finished tasks and resumes the unfinished ones.

pub(crate) mod display;
pub(crate) mod llm_gate;
pub(crate) mod local;
pub(crate) mod ray;
pub(crate) mod results;
pub(crate) mod tasks_file;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use ocflow_core::llm::key::{ApiKey, KEY_FILE_VARIABLE};
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::event::{Event, Record};
use ocflow_model::exit::ExitCode;
use ocflow_model::llm::Usage;
use ocflow_model::output::print_stdout;
use ocflow_model::status::{FlowState, FlowStatus, now};

use crate::cli::args::{BatchArgs, Engine, GlobalArgs};
use crate::cli::batch::display::Reporter;
use crate::cli::batch::llm_gate::{Gate, Upstream};
use crate::cli::batch::results::{RunFigures, TaskResult};
use crate::cli::batch::tasks_file::{BatchTask, RepoSource};
use crate::cli::config::Config;

/// The environment variables that may hold the real key (the client's, and the key file's): no
/// flow inherits them (the driver gave its own up at start-up already; a wrapper may have set
/// them again).
fn key_variables() -> impl Iterator<Item = &'static str> {
    ocflow_core::llm::key::KEY_VARIABLES
        .iter()
        .copied()
        .chain([KEY_FILE_VARIABLE])
}
/// A request through the gate may take the flows' own time limit and this much more: the flow
/// gives up first, and says so, rather than the gate.
const GATE_TIMEOUT_MARGIN: std::time::Duration = std::time::Duration::from_secs(10);
/// The gate's limit when no default endpoint gave one (the LLM client's default, + margin).
const DEFAULT_GATE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(130);

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
    /// Each flow's budget flags, handed to its `run` and its `resume` alike.
    pub(crate) budget: Vec<OsString>,
    /// The per-batch token flows present to the gate instead of the key.
    pub(crate) token: Option<String>,
    pub(crate) reporter: Arc<Reporter>,
    /// `--json`: the flows' events go to stdout, tagged.
    pub(crate) json: bool,
}

impl FlowJob {
    /// The flow's command line without the binary: `ocflow run` of a new flow, or `ocflow
    /// resume` of an unfinished one. `with_gate`: whether the gate's URL goes in as
    /// `--base-url` (a Ray worker gets it in its environment instead).
    pub(crate) fn argv(&self, context: &Context, resume: bool, with_gate: bool) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec!["--json".into()];
        // A Ray worker puts its clone's path in place of a git URL.
        let repo: OsString = match &self.task.repo {
            RepoSource::Path(path) => path.into(),
            RepoSource::Git { url, .. } => url.into(),
        };
        argv.extend(["--repo".into(), repo]);
        argv.extend(["--workspace".into(), context.workspace.clone().into()]);
        argv.extend(context.forwarded.iter().cloned());
        if with_gate && let Some(url) = &self.gate_url {
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
            if let Some(plan) = &self.task.plan {
                argv.extend(["--plan".into(), plan.into()]);
            }
        }
        if let Some(jobs) = context.jobs {
            argv.extend(["--jobs".into(), jobs.to_string().into()]);
        }
        argv.extend(context.budget.iter().cloned());
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

/// The global flags a batch hands on to each of its flows; `--repo` and `--workspace` are
/// refused: each task names its repository, and the flows live in `--out`.
pub(crate) fn forwarded_flags(global: &GlobalArgs) -> Result<Vec<OsString>> {
    if global.repo.is_some() {
        return Err(Error::Usage(
            "ocflow batch takes each task's repository from TASKS.jsonl (\"repo\"); leave \
             --repo out"
                .into(),
        ));
    }
    if global.record.is_some() || global.replay.is_some() {
        return Err(Error::Usage(
            "ocflow batch cannot --record or --replay: its flows ask the LLM at once; record \
             one flow with `ocflow run --record`"
                .into(),
        ));
    }
    let mut flags: Vec<OsString> = Vec::new();
    if let Some(model) = &global.model {
        flags.extend(["--model".into(), model.into()]);
    }
    if let Some(module) = &global.codex_lib {
        flags.extend(["--codex-lib".into(), module.into()]);
    }
    if let Some(dir) = &global.python_dir {
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
        flags.extend(["--python-dir".into(), dir.into()]);
    }
    Ok(flags)
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

/// `ocflow batch`.
pub(crate) async fn batch(config: &Config, args: BatchArgs) -> Result<ExitCode> {
    let started = Instant::now();
    for (flag, value) in [
        ("--flows", args.flows),
        ("--jobs", args.jobs),
        ("--max-llm-requests", args.max_llm_requests),
    ] {
        if value == Some(0) {
            return Err(Error::Usage(format!(
                "{flag} 0 runs nothing; give a number of 1 or more"
            )));
        }
    }
    let tasks = tasks_file::read(&args.tasks, args.engine == Engine::Ray)
        .map_err(|err| Error::Usage(err.to_string()))?;
    // A task without a plan needs the LLM to plan it: say so now rather than fail each flow.
    if let Err(no_llm) = &config.llm {
        let unplanned: Vec<&str> = tasks
            .iter()
            .filter(|t| t.plan.is_none() && t.base_url.is_none())
            .map(|t| t.id.as_str())
            .collect();
        if !unplanned.is_empty() {
            return Err(Error::Usage(format!(
                "{no_llm}; the tasks without a \"plan\" need the LLM to plan them: {}",
                unplanned.join(", ")
            )));
        }
    }
    let out = std::path::absolute(&args.out).io_context(|| format!("{}", args.out.display()))?;
    let workspace = out.join("workspace");
    std::fs::create_dir_all(&workspace).map_err(|err| {
        Error::Usage(format!(
            "--out {}: cannot make {} there ({err}); give a directory the batch may write",
            args.out.display(),
            workspace.display()
        ))
    })?;
    let exe = std::env::current_exe().io_context(|| "finding this binary".to_string())?;
    let flows = args
        .flows
        .or(args.max_llm_requests)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from));
    let engine_name = match args.engine {
        Engine::Local => "local",
        Engine::Ray => "ray",
    };
    // The gate: one upstream for the default endpoint and one per other base URL of a task.
    let (gate, upstream_of) = start_gate(config, &tasks, &args).await?;
    let reporter = Reporter::new(config.json, tasks.len());
    let context = Context {
        out: out.clone(),
        workspace: workspace.clone(),
        exe,
        flows,
        jobs: args.jobs,
        forwarded: args.forwarded.clone(),
        budget: args.budget.to_argv(),
        token: gate.as_ref().map(|g| g.token().to_string()),
        reporter: reporter.clone(),
        json: config.json,
    };
    let mut known = results::load(&out);
    let mut jobs = Vec::new();
    let mut skipped = 0;
    let mut resumed = 0;
    for task in &tasks {
        if known.contains_key(&task.id) {
            skipped += 1;
            continue;
        }
        let task_dir = workspace.join(&task.id);
        let status = read_status(&task_dir);
        if let Some(status) = &status
            && finished(status.state)
        {
            // It finished as the last run was killed, before its line was written.
            let result = result_of(&context, task, &task_dir, None, 0)?;
            results::append(&out, &result).map_err(|err| Error::internal(err.to_string()))?;
            known.insert(result.id.clone(), result);
            skipped += 1;
            continue;
        }
        if status.is_none() && task_dir.exists() {
            // Killed before the flow began (no status yet): nothing ran, it starts again.
            std::fs::remove_dir_all(&task_dir)
                .io_context(|| format!("removing {}", task_dir.display()))?;
        }
        let resume = status.is_some();
        resumed += usize::from(resume);
        let gate_url = gate.as_ref().map(|gate| {
            let index = upstream_of(task.base_url.as_deref());
            gate.base_url(index)
        });
        jobs.push(FlowJob {
            task: task.clone(),
            resume,
            task_dir,
            gate_url,
        });
    }
    reporter.event(Event::BatchStarted {
        out: out.clone(),
        tasks: tasks.len(),
        skipped,
        resumed,
        flows,
        engine: engine_name.to_string(),
        max_llm_requests: args.max_llm_requests,
    });
    reporter.skipped(skipped);
    let outcome = match args.engine {
        Engine::Local => local::run(jobs, &context).await?,
        Engine::Ray => ray::run(jobs, &context, &args.ray_address, config).await?,
    };
    reporter.close();
    let finished_now = outcome.finished.len();
    for result in outcome.finished {
        known.insert(result.id.clone(), result);
    }
    let gate_stats = gate.as_ref().map(Gate::stats);
    let wall_ms = started.elapsed().as_millis() as u64;
    let summary = results::summary(
        &known,
        &RunFigures {
            wall_ms,
            finished_now,
            unfinished: outcome.unfinished,
            gate: gate_stats,
            engine: engine_name,
        },
    );
    let summary_path = out.join(results::SUMMARY_FILE);
    std::fs::write(&summary_path, &summary)
        .io_context(|| format!("writing {}", summary_path.display()))?;
    let mut applied_failures = 0;
    if args.apply && !outcome.interrupted {
        applied_failures = apply_succeeded(&context, &known, &tasks).await;
    }
    let succeeded = known.values().filter(|r| r.succeeded()).count();
    let failed = known.len() - succeeded;
    let mut tokens = Usage::default();
    for result in known.values() {
        tokens.add(&result.tokens);
    }
    reporter.event(Event::BatchFinished {
        succeeded,
        failed,
        unfinished: outcome.unfinished,
        tokens,
        wall_ms,
        summary: summary_path.clone(),
        max_llm_in_flight: gate_stats.map(|g| g.max_in_flight),
        mean_llm_in_flight: gate_stats.map(|g| g.mean_in_flight),
    });
    if !config.json {
        print_stdout(&summary);
    }
    Ok(if outcome.interrupted {
        ExitCode::Interrupted
    } else if failed > 0 || outcome.unfinished > outcome.paused || applied_failures > 0 {
        ExitCode::Failure
    } else if outcome.paused > 0 {
        // Only budgets stopped it: the same command with a higher budget goes on.
        ExitCode::Paused
    } else {
        ExitCode::Success
    })
}

/// Starts the LLM gate when an endpoint is configured; returns it with the upstream index of
/// a task's `base_url` (`None`: the default endpoint).
async fn start_gate(
    config: &Config,
    tasks: &[BatchTask],
    args: &BatchArgs,
) -> Result<(Option<Gate>, impl Fn(Option<&str>) -> usize + use<>)> {
    let default = config.llm.as_ref().ok().and_then(|llm| {
        let key_command = llm.key_command.clone();
        llm.endpoints
            .get(ocflow_model::llm::DEFAULT_PROFILE)
            .map(|e| (e.clone(), key_command))
    });
    let mut upstreams: Vec<Upstream> = Vec::new();
    if let Some((endpoint, key_command)) = &default {
        let mut key = endpoint.api_key.clone();
        if key.is_empty()
            && let Some(command) = key_command
        {
            // The flows get the token, so they cannot run the command: the driver does, once.
            key = ocflow_core::llm::key::from_command(command)?;
        }
        upstreams.push(Upstream {
            base_url: endpoint.base_url.clone(),
            key,
            timeout: endpoint.request_timeout + GATE_TIMEOUT_MARGIN,
        });
    }
    let mut others: Vec<String> = Vec::new();
    for task in tasks {
        if let Some(url) = &task.base_url
            && !others.contains(url)
            && upstreams.first().is_none_or(|u| &u.base_url != url)
        {
            others.push(url.clone());
        }
    }
    // The default endpoint, if any, is upstream 0. A task's own base URL gets no key: the
    // tasks file is data, and the key goes only to the endpoint the user configured it for.
    let offset = upstreams.len();
    let timeout = default.as_ref().map_or(DEFAULT_GATE_TIMEOUT, |(e, _)| {
        e.request_timeout + GATE_TIMEOUT_MARGIN
    });
    for url in &others {
        upstreams.push(Upstream {
            base_url: url.clone(),
            key: ApiKey::default(),
            timeout,
        });
    }
    let default_url = upstreams.first().map(|u| u.base_url.clone());
    let index_of = move |url: Option<&str>| match url {
        Some(url) if Some(url) != default_url.as_deref() => others
            .iter()
            .position(|o| o == url)
            .map_or(0, |i| i + offset),
        _ => 0,
    };
    if upstreams.is_empty() {
        return Ok((None, index_of));
    }
    let (bind, host) = match args.engine {
        Engine::Local => (IpAddr::from([127, 0, 0, 1]), "127.0.0.1".to_string()),
        Engine::Ray => (
            IpAddr::from([0, 0, 0, 0]),
            ray::reachable_host(&args.ray_address),
        ),
    };
    let gate = Gate::start(upstreams, args.max_llm_requests, bind, host)
        .await
        .map_err(|err| Error::internal(err.to_string()))?;
    Ok((Some(gate), index_of))
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

/// `--apply`: writes each succeeded flow into its repository with `ocflow apply` (all or
/// nothing, refusing a repository that changed since the flow read it); returns how many
/// were refused.
async fn apply_succeeded(
    context: &Context,
    results: &BTreeMap<String, TaskResult>,
    tasks: &[BatchTask],
) -> usize {
    let mut refused = 0;
    for task in tasks {
        let Some(result) = results.get(&task.id) else {
            continue;
        };
        // A cloned repository lives on a worker: its diff is left for review.
        if !result.succeeded() || !matches!(task.repo, RepoSource::Path(_)) {
            continue;
        }
        let RepoSource::Path(repo) = &task.repo else {
            continue;
        };
        let output = tokio::process::Command::new(&context.exe)
            .arg("--repo")
            .arg(repo)
            .arg("--workspace")
            .arg(&context.workspace)
            .args(context.json.then_some("--json"))
            .arg("apply")
            .arg(&result.task_dir)
            .stdin(std::process::Stdio::null())
            .output()
            .await;
        let ok = match output {
            Ok(output) => {
                context.reporter.passthrough(&task.id, &output.stdout);
                context
                    .reporter
                    .note(&String::from_utf8_lossy(&output.stderr));
                output.status.success()
            }
            Err(err) => {
                context
                    .reporter
                    .note(&format!("ocflow: batch: cannot apply {}: {err}", task.id));
                false
            }
        };
        refused += usize::from(!ok);
    }
    refused
}

/// A batch-level event, stamped now.
pub(crate) fn record(event: Event) -> Record {
    Record::now(now(), event)
}
