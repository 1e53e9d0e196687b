//! The local engine: each flow is a child process of this binary, `--flows` of them at once.
//! A child gets PR_SET_PDEATHSIG(SIGTERM), so a batch killed outright (SIGKILL) still stops
//! its flows the resumable way; on Ctrl-C or SIGTERM the driver starts no more flows, hands
//! SIGINT to the running ones and waits until each has saved its state.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::status::FlowState;
use tokio::io::AsyncBufReadExt;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::cli::batch::flow_job::{
    self, Context, EngineOutcome, FlowJob, Placement, key_variables,
};
use crate::cli::batch::results;

/// The flows running now, by task id: their process ids, to hand a signal on.
type Running = Arc<Mutex<HashMap<String, u32>>>;

/// Runs `jobs`, `context.flows` at once; returns when every started flow has ended.
pub(crate) async fn run(jobs: Vec<FlowJob>, context: &Context) -> Result<EngineOutcome> {
    let running: Running = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch_signals(stop.clone(), running.clone())?;
    let slots = Arc::new(Semaphore::new(context.flows));
    let logs = context.out.join("logs");
    std::fs::create_dir_all(&logs).io_context(|| format!("creating {}", logs.display()))?;
    let mut set = JoinSet::new();
    let mut outcome = EngineOutcome::default();
    let context = Arc::new(context.clone());
    for job in jobs {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            break;
        };
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let running = running.clone();
        let shared = context.clone();
        let stop = stop.clone();
        set.spawn(async move {
            let context = shared;
            let _slot = slot;
            run_flow(job, &context, &running, &stop).await
        });
        // Collects what has ended meanwhile, so results are written as flows finish.
        while let Some(done) = set.try_join_next() {
            collect(done, &mut outcome, &context)?;
        }
    }
    while let Some(done) = set.join_next().await {
        collect(done, &mut outcome, &context)?;
    }
    watcher.abort();
    outcome.interrupted = stop.load(Ordering::SeqCst);
    Ok(outcome)
}

/// How one flow's process ended.
struct FlowEnd {
    job: FlowJob,
    exit_code: i32,
    duration_ms: u64,
}

fn collect(
    done: std::result::Result<Result<FlowEnd>, tokio::task::JoinError>,
    outcome: &mut EngineOutcome,
    context: &Context,
) -> Result<()> {
    let end = done.map_err(|err| Error::internal(format!("a flow's task failed: {err}")))??;
    let status = flow_job::read_status(&end.job.task_dir);
    // Stopped by a signal, or still marked running (killed): the next batch resumes it.
    let unfinished = end.exit_code == 130
        || status
            .as_ref()
            .is_some_and(|status| !flow_job::finished(status.state));
    if unfinished {
        outcome.unfinished += 1;
        outcome.paused += usize::from(
            status
                .as_ref()
                .is_some_and(|status| status.state == FlowState::Paused),
        );
        context.reporter.finished(&end.job.task.id, None);
        return Ok(());
    }
    let result = flow_job::result_of(
        context,
        &end.job.task,
        &end.job.task_dir,
        Some(end.exit_code),
        end.duration_ms,
    )?;
    results::append(&context.out, &result).map_err(|err| Error::internal(err.to_string()))?;
    context.reporter.finished(&end.job.task.id, Some(&result));
    outcome.finished.push(result);
    Ok(())
}

/// Runs one flow's process to its end, showing its events as they come.
async fn run_flow(
    job: FlowJob,
    context: &Context,
    running: &Running,
    stop: &AtomicBool,
) -> Result<FlowEnd> {
    let started = Instant::now();
    let id = job.task.id.clone();
    let log_path = context.out.join("logs").join(format!("{id}.log"));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .io_context(|| format!("opening {}", log_path.display()))?;
    let mut command = tokio::process::Command::new(&context.exe);
    command
        .args(job.argv(context, job.resume, Placement::Local))
        .stdin(if job.stdin_text(job.resume).is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(log);
    for name in key_variables() {
        command.env_remove(name);
    }
    for (name, value) in job.env(context) {
        command.env(name, value);
    }
    // A group of its own: a Ctrl-C at the terminal reaches the driver only, which hands it on
    // once to each flow (a second one would cut a flow's saving short).
    command.process_group(0);
    // SAFETY: prctl and getppid are async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        let parent = std::process::id() as libc::pid_t;
        command.pre_exec(move || {
            // A driver killed outright stops its flows as Ctrl-C would: resumably.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if libc::getppid() != parent {
                return Err(std::io::Error::other(
                    "the batch ended before the flow began",
                ));
            }
            Ok(())
        });
    }
    context.reporter.started(&id, job.resume);
    let mut child = command
        .spawn()
        .io_context(|| format!("starting {}", context.exe.display()))?;
    if let (Some(pid), Ok(mut running)) = (child.id(), running.lock()) {
        running.insert(id.clone(), pid);
        // A signal that came as it started found it not yet listed: it is told now.
        if stop.load(Ordering::SeqCst) {
            // SAFETY: kill(2) with the pid of the child just started, not yet waited for.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGINT);
            }
        }
    }
    // The task on its stdin, written beside the reading of its output (a flow that stops
    // reading early, refusing a task too big, leaves the write to fail alone).
    let feeding = match (child.stdin.take(), job.stdin_text(job.resume)) {
        (Some(mut stdin), Some(text)) => {
            let text = text.as_bytes().to_vec();
            Some(tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                let _ = stdin.write_all(&text).await;
                let _ = stdin.shutdown().await;
            }))
        }
        _ => None,
    };
    if let Some(stdout) = child.stdout.take() {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            context.reporter.flow_line(&id, &line);
        }
    }
    let status = child
        .wait()
        .await
        .io_context(|| format!("waiting for the flow {id}"))?;
    if let Some(feeding) = feeding {
        feeding.abort();
    }
    if let Ok(mut running) = running.lock() {
        running.remove(&id);
    }
    let exit_code = status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        128 + status.signal().unwrap_or(0)
    });
    Ok(FlowEnd {
        job,
        exit_code,
        duration_ms: started.elapsed().as_millis() as u64,
    })
}

/// On Ctrl-C or SIGTERM: no more flows start, and each running one is asked to stop (SIGINT),
/// which it does resumably.
fn watch_signals(stop: Arc<AtomicBool>, running: Running) -> Result<tokio::task::JoinHandle<()>> {
    let mut interrupt =
        signal(SignalKind::interrupt()).io_context(|| "watching for Ctrl-C".to_string())?;
    let mut terminate =
        signal(SignalKind::terminate()).io_context(|| "watching for SIGTERM".to_string())?;
    Ok(tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            let first = !stop.swap(true, Ordering::SeqCst);
            if !first {
                continue;
            }
            let pids: Vec<u32> = running
                .lock()
                .map(|r| r.values().copied().collect())
                .unwrap_or_default();
            for pid in pids {
                // SAFETY: kill(2) with a pid of a child this process started and still waits.
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGINT);
                }
            }
        }
    }))
}
