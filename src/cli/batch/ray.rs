//! The Ray engine: one Ray task per flow, scheduled by Ray across a cluster's nodes. The driver
//! runs the Python runner `ocflow_ray` (`python/ocflow_ray/`, a package apart from the operation
//! library) with the Python of `$VIRTUAL_ENV` (where
//! `pip install ray` went) or `python3`, writes the whole batch to its stdin as one JSON
//! object, and reads one JSON line per event and per finished flow from its stdout:
//!
//! - in: `{"address", "max_concurrent_flows", "max_retries", "ocflow", "flows": [{"id",
//!   "argv", "resume_argv", "repo": {"path"} | {"git", "rev"}, "workspace", "plan",
//!   "task_dir", "env"}]}` (the repository, workspace and plan are fields, never options the
//!   runner must find in `argv`);
//! - out: `{"id", "event"}`, `{"id", "result": {"exit_code", "attempts", "status", "summary",
//!   "diff", "task_dir"}}`, or `{"error", "fix"}` and exit 2 when Ray is missing.
//!
//! A Ray retry runs `resume_argv`, so a flow killed on a node continues where it stopped. The
//! status, summary and diff come back through Ray and are kept under `DIR/flows/ID/`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::status::FlowStatus;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::batch::flow_job::{
    self, Context, EngineOutcome, FlowJob, Placement, key_variables,
};
use crate::cli::batch::results;
use crate::cli::batch::tasks_file::RepoSource;
use crate::cli::config::Config;

/// How often Ray runs a flow again after its process or node died (each time as `resume`).
const MAX_RETRIES: u32 = 3;

/// One line of the runner's stdout.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RunnerLine {
    Result { id: String, result: Box<FlowResult> },
    Event { id: String, event: Value },
    Error { error: String, fix: Option<String> },
}

/// A flow's end, as a Ray worker reports it.
#[derive(Debug, Deserialize)]
struct FlowResult {
    exit_code: i32,
    #[serde(default)]
    attempts: u32,
    /// The task directory's `flow_status.json`, or null when the flow never began.
    #[serde(default)]
    status: Option<FlowStatus>,
    #[serde(default)]
    summary: String,
    #[serde(default)]
    diff: String,
    #[serde(default)]
    task_dir: Option<PathBuf>,
    /// The end of the flow's stderr when it did not succeed: why a flow that never began
    /// (a bad plan, a repository no node could clone) failed.
    #[serde(default)]
    stderr: Option<String>,
    /// The flow process's wall time on its worker, from its spawn to its end: what the local
    /// engine measures (a runner of an earlier ocflow gives none).
    #[serde(default)]
    duration_ms: Option<u64>,
}

/// The Python that runs the runner: the virtual environment's, where Ray was installed.
pub(crate) fn python() -> PathBuf {
    match std::env::var_os("VIRTUAL_ENV") {
        Some(venv) if !venv.is_empty() => Path::new(&venv).join("bin").join("python"),
        _ => PathBuf::from("python3"),
    }
}

/// The address Ray workers reach the driver's LLM gate at: `OCFLOW_BATCH_GATE_HOST`, else this
/// machine's address on the route to the Ray head, else its primary address.
pub(crate) fn reachable_host(ray_address: &str) -> String {
    if let Ok(host) = std::env::var("OCFLOW_BATCH_GATE_HOST")
        && !host.trim().is_empty()
    {
        return host;
    }
    let head = ray_address
        .strip_prefix("ray://")
        .unwrap_or(ray_address)
        .to_string();
    // Connecting a UDP socket sends nothing: it only picks the interface the route takes.
    let target = if head.contains(':') && head != "auto" {
        head
    } else {
        "10.255.255.255:1".to_string()
    };
    std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|socket| {
            socket.connect(&target)?;
            socket.local_addr()
        })
        .map(|addr| addr.ip().to_string())
        .unwrap_or_else(|_| "127.0.0.1".to_string())
}

/// Runs `jobs` on the Ray cluster at `address` through the runner.
pub(crate) async fn run(
    jobs: Vec<FlowJob>,
    context: &Context,
    address: &str,
    config: &Config,
) -> Result<EngineOutcome> {
    let mut outcome = EngineOutcome::default();
    if jobs.is_empty() {
        return Ok(outcome);
    }
    let request = request(&jobs, context, address);
    let by_id: HashMap<String, FlowJob> = jobs
        .into_iter()
        .map(|job| (job.task.id.clone(), job))
        .collect();
    let logs = context.out.join("logs");
    std::fs::create_dir_all(&logs).io_context(|| format!("creating {}", logs.display()))?;
    let log_path = logs.join("ray.log");
    let log = std::fs::File::create(&log_path)
        .io_context(|| format!("creating {}", log_path.display()))?;
    let python = python();
    let mut command = tokio::process::Command::new(&python);
    command
        .args(["-m", "ocflow_ray"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log)
        .process_group(0);
    for name in key_variables() {
        command.env_remove(name);
    }
    if let Some(dir) = ocflow_core::engine::bridge::find_python_dir(config.python_dir.clone()) {
        let mut path = dir.into_os_string();
        if let Some(old) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
            path.push(":");
            path.push(old);
        }
        command.env("PYTHONPATH", path);
    }
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|err| {
        Error::Usage(format!(
            "--engine ray: cannot start {} ({err}); install Ray into a virtual environment \
             (`python3 -m venv ~/ray-env && ~/ray-env/bin/pip install ray`) and set \
             VIRTUAL_ENV to it",
            python.display()
        ))
    })?;
    if let Some(mut stdin) = child.stdin.take() {
        let text = format!("{request}\n");
        stdin
            .write_all(text.as_bytes())
            .await
            .io_context(|| "writing the batch to the Ray runner".to_string())?;
        // Closing stdin tells the runner the request is whole.
        drop(stdin);
    }
    let runner_pid = child.id();
    let mut interrupt =
        signal(SignalKind::interrupt()).io_context(|| "watching for Ctrl-C".to_string())?;
    let mut terminate =
        signal(SignalKind::terminate()).io_context(|| "watching for SIGTERM".to_string())?;
    let mut runner_error: Option<String> = None;
    let mut reported: Vec<String> = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        loop {
            let line = tokio::select! {
                line = lines.next_line() => line,
                _ = interrupt.recv() => { outcome.interrupted = true; stop(runner_pid); continue; }
                _ = terminate.recv() => { outcome.interrupted = true; stop(runner_pid); continue; }
            };
            let Ok(Some(line)) = line else {
                break;
            };
            match serde_json::from_str::<RunnerLine>(&line) {
                Ok(RunnerLine::Event { id, event }) => {
                    if !reported.contains(&id) && by_id.contains_key(&id) {
                        reported.push(id.clone());
                        if let Some(job) = by_id.get(&id) {
                            context.reporter.started(&id, job.resume);
                        }
                    }
                    context.reporter.flow_line(&id, &event.to_string());
                }
                Ok(RunnerLine::Result { id, result }) => {
                    let Some(job) = by_id.get(&id) else {
                        continue;
                    };
                    finish(job, *result, context, &mut outcome)?;
                }
                Ok(RunnerLine::Error { error, fix }) => {
                    runner_error = Some(match fix {
                        Some(fix) => format!("{error}; {fix}"),
                        None => error,
                    });
                }
                Err(_) => context.reporter.note(&format!("ray: {line}")),
            }
        }
    }
    let status = child
        .wait()
        .await
        .io_context(|| "waiting for the Ray runner".to_string())?;
    if let Some(error) = runner_error {
        return Err(Error::Usage(format!("--engine ray: {error}")));
    }
    let ended = outcome.finished.len() + outcome.unfinished;
    if ended < by_id.len() {
        if !outcome.interrupted && !status.success() {
            // Its last words: a missing module or a cluster it could not join, say.
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(Error::Usage(format!(
                "--engine ray: the Ray runner ({} -m ocflow_ray) ended ({status}) \
                 with {} flow(s) unreported; its last lines (all in {}):\n{}\nCheck that \
                 $VIRTUAL_ENV holds ray and that a cluster runs at the --ray-address",
                python.display(),
                by_id.len() - ended,
                log_path.display(),
                ocflow_model::output::printable_lines(&tail.join("\n"))
            )));
        }
        outcome.unfinished += by_id.len() - ended;
    }
    Ok(outcome)
}

/// Asks the runner to stop its flows (it cancels the Ray tasks; each flow saves its state).
fn stop(pid: Option<u32>) {
    if let Some(pid) = pid {
        // SAFETY: kill(2) with the pid of the runner this process started and still waits.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGINT);
        }
    }
}

/// The batch as the runner reads it.
fn request(jobs: &[FlowJob], context: &Context, address: &str) -> Value {
    let strings = |argv: Vec<std::ffi::OsString>| -> Vec<String> {
        argv.into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    };
    let flows: Vec<Value> = jobs
        .iter()
        .map(|job| {
            let repo = match &job.task.repo {
                RepoSource::Path(path) => json!({"path": path}),
                RepoSource::Git { url, rev } => json!({"git": url, "rev": rev}),
            };
            let env: serde_json::Map<String, Value> = job
                .env(context)
                .into_iter()
                .map(|(name, value)| (name, Value::String(value)))
                .collect();
            json!({
                "id": job.task.id,
                "argv": strings(job.argv(context, false, Placement::Ray)),
                // What `argv`'s run reads on its stdin: the task (`resume_argv` reads none).
                "stdin": job.stdin_text(false),
                "resume_argv": strings(job.argv(context, true, Placement::Ray)),
                "workspace": context.workspace,
                "plan": job.task.plan,
                // Where a path flow lives (the driver sees it too): the runner relays its
                // journal and, on a retry, resumes it there. A cloned one lives on its node.
                "task_dir": matches!(job.task.repo, RepoSource::Path(_))
                    .then_some(&job.task_dir),
                "repo": repo,
                "env": env,
            })
        })
        .collect();
    json!({
        "address": address,
        "max_concurrent_flows": context.flows,
        "max_retries": MAX_RETRIES,
        "ocflow": context.exe,
        "flows": flows,
    })
}

/// Keeps what a worker sent back of a flow under `DIR/flows/ID/` and records its result.
fn finish(
    job: &FlowJob,
    result: FlowResult,
    context: &Context,
    outcome: &mut EngineOutcome,
) -> Result<()> {
    let id = &job.task.id;
    let kept = context.out.join("flows").join(id);
    std::fs::create_dir_all(&kept).io_context(|| format!("creating {}", kept.display()))?;
    if let Some(status) = &result.status {
        let text =
            serde_json::to_string_pretty(status).map_err(|err| Error::internal(err.to_string()))?;
        std::fs::write(kept.join("flow_status.json"), text)
            .io_context(|| format!("writing {}", kept.display()))?;
    }
    std::fs::write(kept.join("summary.md"), &result.summary)
        .io_context(|| format!("writing {}", kept.display()))?;
    let unfinished = result.exit_code == 130
        || result
            .status
            .as_ref()
            .is_some_and(|s| !flow_job::finished(s.state));
    if unfinished {
        outcome.unfinished += 1;
        outcome.paused += usize::from(
            result
                .status
                .as_ref()
                .is_some_and(|s| s.state == ocflow_model::status::FlowState::Paused),
        );
        context.reporter.finished(id, None);
        return Ok(());
    }
    // A flow on shared storage keeps its task directory; a cloned one only what came back.
    let task_dir = match (&job.task.repo, &result.task_dir) {
        (RepoSource::Path(_), Some(dir)) => dir.clone(),
        _ => kept.clone(),
    };
    let duration_ms = result
        .duration_ms
        .or_else(|| flow_time(result.status.as_ref()))
        .unwrap_or(0);
    let task_result = match &result.status {
        Some(status) => flow_job::result_from_status(
            context,
            &job.task,
            &task_dir,
            status,
            &result.diff,
            Some(result.exit_code),
            duration_ms,
        )?,
        None => results::TaskResult {
            id: id.clone(),
            state: "failed".into(),
            task_dir,
            exit_code: result.exit_code,
            tokens: Default::default(),
            duration_ms,
            files_changed: 0,
            diff: None,
            reason: Some(
                context
                    .reporter
                    .last_error(id)
                    .or_else(|| last_words(result.stderr.as_deref()))
                    .unwrap_or_else(|| {
                        format!(
                            "the flow ended (exit {}) before it began, after {} attempt(s)",
                            result.exit_code, result.attempts
                        )
                    }),
            ),
        },
    };
    results::append(&context.out, &task_result).map_err(|err| Error::internal(err.to_string()))?;
    context.reporter.finished(id, Some(&task_result));
    outcome.finished.push(task_result);
    Ok(())
}

/// The last line a flow's process (or the runner on its behalf) wrote to stderr that says
/// something: the reason a flow that never began gives.
fn last_words(stderr: Option<&str>) -> Option<String> {
    let line = stderr?
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())?;
    Some(ocflow_model::output::printable_lines(line))
}

/// A flow's time from its status (its creation to its end), for a runner that measured none.
fn flow_time(status: Option<&FlowStatus>) -> Option<u64> {
    let status = status?;
    let start = chrono::DateTime::parse_from_rfc3339(&status.created_at).ok()?;
    let end = chrono::DateTime::parse_from_rfc3339(status.finished_at.as_deref()?).ok()?;
    u64::try_from((end - start).num_milliseconds()).ok()
}
