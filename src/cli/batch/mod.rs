//! `ocflow batch TASKS.jsonl --out DIR`: runs a fleet of flows, each one a child process of
//! this binary (`ocflow run`, or `ocflow resume` of its task directory), M at once, on this
//! machine (`local.rs`) or as Ray tasks across a cluster (`ray.rs`). The driver checks every
//! line first (`tasks_file.rs`), caps the LLM requests in flight across the batch through a
//! proxy of its own holding the key (`llm_gate.rs`), shows progress (`display.rs`), and keeps
//! one result line per finished task plus a summary (`results.rs`): a second run with the same
//! `--out` skips the finished tasks and resumes the unfinished ones.

pub(crate) mod display;
pub(crate) mod flow_job;
pub(crate) mod llm_gate;
pub(crate) mod local;
pub(crate) mod ray;
pub(crate) mod results;
pub(crate) mod tasks_file;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::IpAddr;
use std::time::Instant;

use ocflow_core::llm::key::ApiKey;
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::event::Event;
use ocflow_model::exit::ExitCode;
use ocflow_model::llm::Usage;
use ocflow_model::output::print_stdout;

use crate::cli::args::{BatchArgs, Engine, FleetArgs, GlobalArgs};
use crate::cli::batch::display::Reporter;
use crate::cli::batch::flow_job::{Context, FlowJob, finished, read_status, result_of};
use crate::cli::batch::llm_gate::{Gate, Upstream};
use crate::cli::batch::results::{RunFigures, TaskResult};
use crate::cli::batch::tasks_file::{BatchTask, RepoSource};
use crate::cli::child_command::{self, Global};
use crate::cli::config::Config;

/// A request through the gate may take the flows' own time limit and this much more: the flow
/// gives up first, and says so, rather than the gate.
const GATE_TIMEOUT_MARGIN: std::time::Duration = std::time::Duration::from_secs(10);
/// The gate's limit when no default endpoint gave one (the LLM client's default, + margin).
const DEFAULT_GATE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(130);

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
    // The gate stands for the endpoint (`--base-url` is each flow's gate), and the flows live
    // in `--out`.
    use Global::*;
    let flags = child_command::global_flags(global, &[Model, CodexLib, PythonDir]);
    Ok(flags)
}

/// `ocflow batch`.
pub(crate) async fn batch(config: &Config, args: BatchArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let tasks = checked_tasks(config, &args)?;
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
        .fleet
        .flows
        .or(args.fleet.max_llm_requests)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from));
    let engine_name = match args.fleet.engine {
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
        jobs: args.fleet.jobs,
        forwarded: args.forwarded.clone(),
        run_flags: run_flags(&args.fleet),
        token: gate.as_ref().map(|g| g.token().to_string()),
        reporter: reporter.clone(),
        json: config.json,
    };
    let mut known = results::load(&out);
    let Pending {
        jobs,
        skipped,
        resumed,
    } = pending(&context, &tasks, &mut known, |task| {
        let gate = gate.as_ref()?;
        Some(gate.base_url(upstream_of(task.base_url.as_deref())))
    })?;
    reporter.event(Event::BatchStarted {
        out: out.clone(),
        tasks: tasks.len(),
        skipped,
        resumed,
        flows,
        engine: engine_name.to_string(),
        max_llm_requests: args.fleet.max_llm_requests,
    });
    reporter.skipped(skipped);
    let outcome = match args.fleet.engine {
        Engine::Local => local::run(jobs, &context).await?,
        Engine::Ray => ray::run(jobs, &context, &args.fleet.ray_address, config).await?,
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
    if (args.apply || args.branches.is_some()) && !outcome.interrupted {
        applied_failures =
            apply_succeeded(&context, &known, &tasks, args.branches.as_deref()).await;
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

/// The flags each flow's `run` and `resume` get: its budget, and `--no-memory`.
pub(crate) fn run_flags(fleet: &FleetArgs) -> Vec<OsString> {
    let mut flags = child_command::budget_flags(&fleet.budget);
    if fleet.no_memory {
        flags.push("--no-memory".into());
    }
    flags
}

/// The batch's tasks, read from its file, refused before anything runs when a count flag is 0
/// or when tasks that need the LLM to plan them have none.
fn checked_tasks(config: &Config, args: &BatchArgs) -> Result<Vec<BatchTask>> {
    for (flag, value) in [
        ("--flows", args.fleet.flows),
        ("--jobs", args.fleet.jobs),
        ("--max-llm-requests", args.fleet.max_llm_requests),
    ] {
        if value == Some(0) {
            return Err(Error::Usage(format!(
                "{flag} 0 runs nothing; give a number of 1 or more"
            )));
        }
    }
    let tasks = tasks_file::read(&args.tasks, args.fleet.engine == Engine::Ray)
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
    Ok(tasks)
}

/// The flows a batch still has to run, and how many of its tasks were scored already or are
/// resumed.
struct Pending {
    jobs: Vec<FlowJob>,
    skipped: usize,
    resumed: usize,
}

/// The flows still to run: a task with a result is skipped; one that finished as the last run
/// was killed, before its line was written, gets its line now; one killed before its flow
/// began starts again; the others resume. `gate_url`: the LLM gate's URL for a task.
fn pending(
    context: &Context,
    tasks: &[BatchTask],
    known: &mut BTreeMap<String, results::TaskResult>,
    gate_url: impl Fn(&BatchTask) -> Option<String>,
) -> Result<Pending> {
    let (out, workspace) = (&context.out, &context.workspace);
    let mut jobs = Vec::new();
    let mut skipped = 0;
    let mut resumed = 0;
    for task in tasks {
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
            let result = result_of(context, task, &task_dir, None, 0)?;
            results::append(out, &result).map_err(|err| Error::internal(err.to_string()))?;
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
        let gate_url = gate_url(task);
        jobs.push(FlowJob {
            task: task.clone(),
            resume,
            task_dir,
            gate_url,
        });
    }
    Ok(Pending {
        jobs,
        skipped,
        resumed,
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
    let (bind, host) = match args.fleet.engine {
        Engine::Local => (IpAddr::from([127, 0, 0, 1]), "127.0.0.1".to_string()),
        Engine::Ray => (
            IpAddr::from([0, 0, 0, 0]),
            ray::reachable_host(&args.fleet.ray_address),
        ),
    };
    let gate = Gate::start(upstreams, args.fleet.max_llm_requests, bind, host)
        .await
        .map_err(|err| Error::internal(err.to_string()))?;
    Ok((Some(gate), index_of))
}

/// `--apply`: writes each succeeded flow into its repository with `ocflow apply` (all or
/// nothing, refusing a repository that changed since the flow read it); returns how many
/// were refused.
async fn apply_succeeded(
    context: &Context,
    results: &BTreeMap<String, TaskResult>,
    tasks: &[BatchTask],
    branches: Option<&str>,
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
            .args(branches.map(|prefix| format!("--branch={prefix}/{}", task.id)))
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
