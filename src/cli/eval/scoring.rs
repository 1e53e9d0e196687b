//! Scoring one flow: its changes applied to a fresh copy of the task's repository (never the
//! user's), the suite's check run there through the sandbox launcher (writes only in the copy,
//! no network, the step limits) with a time limit. Solved: the check passed. A flow that said
//! `succeeded` while its check fails is a false success.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ocflow_model::llm::Usage;
use serde::{Deserialize, Serialize};

use crate::cli::batch::results::TaskResult;
use crate::cli::eval::suite::{Check, Repo};
use ocflow_core::task::state;
use ocflow_core::task::workspace::TaskDir;

/// How much of the check's output a result keeps (its end).
const OUTPUT_TAIL: usize = 2000;

/// One scored task: a line of the eval's `results.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Scored {
    pub(crate) id: String,
    /// The check passed on the flow's changes.
    pub(crate) solved: bool,
    /// The flow said `succeeded` and the check fails.
    pub(crate) false_success: bool,
    /// How the flow ended (`succeeded`, `failed`, `no_change`).
    pub(crate) state: String,
    /// The check's exit code; none when it did not run or was stopped.
    pub(crate) check_exit: Option<i32>,
    #[serde(default)]
    pub(crate) timed_out: bool,
    pub(crate) tokens: Usage,
    pub(crate) duration_ms: u64,
    pub(crate) files_changed: usize,
    /// Recovery strategies the flow carried out, the coder's try (shown the failing tests)
    /// among them: a task solved with none was solved before any recovery (its plan, run as
    /// planned), as the model alone is at its first try.
    #[serde(default)]
    pub(crate) recoveries: u32,
    /// Solved by the plan as it was made: solved, and no recovery was asked for.
    #[serde(default)]
    pub(crate) solved_before_recovery: bool,
    /// The end of the check's output (stdout and stderr).
    pub(crate) check_output: String,
    /// Why the check could not judge the flow (its changes did not apply, the copy failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) problem: Option<String>,
}

/// Scores the finished flow `result` by `check`, in `dir` (made afresh).
pub(crate) fn score(result: &TaskResult, check: &Check, dir: &Path, timeout: Duration) -> Scored {
    let mut scored = Scored {
        id: result.id.clone(),
        solved: false,
        false_success: false,
        state: result.state.clone(),
        check_exit: None,
        timed_out: false,
        tokens: result.tokens,
        duration_ms: result.duration_ms,
        files_changed: result.files_changed,
        recoveries: recoveries(&result.task_dir),
        solved_before_recovery: false,
        check_output: String::new(),
        problem: None,
    };
    let repo = dir.join("repo");
    let prepared = fresh_copy(&check.repo, &repo).and_then(|()| match &result.diff {
        Some(diff) => apply(diff, &repo),
        None => Ok(()),
    });
    if let Err(problem) = prepared {
        scored.problem = Some(problem);
        scored.false_success = result.succeeded();
        return scored;
    }
    match run_check(&check.command, &repo, dir, timeout) {
        Ok(run) => {
            scored.check_exit = run.code;
            scored.timed_out = run.timed_out;
            scored.check_output = tail(&run.output);
            scored.solved = run.code == Some(0);
        }
        Err(problem) => scored.problem = Some(problem),
    }
    scored.false_success = result.succeeded() && !scored.solved;
    scored.solved_before_recovery = scored.solved && scored.recoveries == 0;
    scored
}

/// How many recovery strategies the flow in `task_dir` carried out (its steps' recoveries,
/// whether the model or ocflow decided them; none when its status cannot be read, e.g. a flow
/// that never started).
fn recoveries(task_dir: &Path) -> u32 {
    TaskDir::at(task_dir.to_path_buf())
        .and_then(|task| state::load_status(&task).ok())
        .map_or(0, |status| {
            let carried_out: usize = status.steps.iter().map(|s| s.recoveries.len()).sum();
            u32::try_from(carried_out).unwrap_or(u32::MAX)
        })
}

/// A copy of the task's repository at `to`: a directory copied whole (its `.ocflow` left out),
/// or a git repository cloned at its revision.
pub(crate) fn fresh_copy(repo: &Repo, to: &Path) -> Result<(), String> {
    if to.exists() {
        std::fs::remove_dir_all(to)
            .map_err(|err| format!("cannot empty {}: {err}", to.display()))?;
    }
    std::fs::create_dir_all(to).map_err(|err| format!("cannot make {}: {err}", to.display()))?;
    match repo {
        Repo::Path(source) => {
            let mut from = source.clone().into_os_string();
            from.push("/.");
            run_quietly(
                Command::new("cp").arg("-a").arg(from).arg(to),
                "copy the repository",
            )?;
            let _ = std::fs::remove_dir_all(to.join(".ocflow"));
            Ok(())
        }
        Repo::Git { url, rev } => {
            run_quietly(
                Command::new("git").args(["clone", "-q", url]).arg(to),
                "clone the repository",
            )?;
            match rev {
                Some(rev) => run_quietly(
                    Command::new("git")
                        .args(["checkout", "-q", rev])
                        .current_dir(to),
                    "check out the revision",
                ),
                None => Ok(()),
            }
        }
    }
}

/// Applies the flow's unified diff to the copy.
fn apply(diff: &Path, repo: &Path) -> Result<(), String> {
    run_quietly(
        Command::new("git")
            .args(["apply", "--whitespace=nowarn", "-p1"])
            .arg(diff)
            .current_dir(repo),
        "apply the flow's changes to a fresh copy",
    )
}

fn run_quietly(command: &mut Command, what: &str) -> Result<(), String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|err| format!("cannot {what}: {err}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "cannot {what}: {}",
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}

/// How a check ran.
pub(crate) struct CheckRun {
    /// Its exit code; none when it was killed.
    pub(crate) code: Option<i32>,
    pub(crate) timed_out: bool,
    /// Its stdout and stderr, as written.
    pub(crate) output: String,
}

/// Runs `command` in `repo` through the sandbox launcher: it may write only in `repo` and its
/// own temporary directory (`dir/tmp`), without the network; killed, with everything it
/// started, after `timeout`.
pub(crate) fn run_check(
    command: &str,
    repo: &Path,
    dir: &Path,
    timeout: Duration,
) -> Result<CheckRun, String> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().map_err(|err| format!("cannot find ocflow: {err}"))?;
    let temp = dir.join("tmp");
    std::fs::create_dir_all(&temp)
        .map_err(|err| format!("cannot make {}: {err}", temp.display()))?;
    let log = dir.join("check.log");
    let file = std::fs::File::create(&log)
        .map_err(|err| format!("cannot write {}: {err}", log.display()))?;
    let err_file = file
        .try_clone()
        .map_err(|err| format!("cannot write {}: {err}", log.display()))?;
    // The device files programs write to (`/dev/null`…), never the host's shared temporary
    // directories.
    let devices = ocflow_core::engine::sandbox::default_writable()
        .into_iter()
        .filter(|p| p.starts_with("/dev") && !p.starts_with("/dev/shm"));
    let mut launcher = Command::new(exe);
    launcher.arg("sandbox-exec");
    for path in [repo.to_path_buf(), temp.clone()]
        .into_iter()
        .chain(devices)
    {
        launcher.args([OsArg::from("--write"), path.into()]);
    }
    let mut child = launcher
        .args(["--", "/bin/sh", "-c", command])
        .current_dir(repo)
        .env("TMPDIR", &temp)
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err_file)
        .process_group(0)
        .spawn()
        .map_err(|err| format!("cannot start the check: {err}"))?;
    let started = Instant::now();
    let (code, timed_out) = loop {
        match child.try_wait() {
            Ok(Some(status)) => break (status.code(), false),
            Ok(None) if started.elapsed() >= timeout => {
                // The whole group: a test runner's children too.
                let group = rustix::process::Pid::from_raw(child.id() as i32);
                if let Some(group) = group {
                    let _ =
                        rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
                }
                let _ = child.wait();
                break (None, true);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(err) => return Err(format!("cannot wait for the check: {err}")),
        }
    };
    let output = std::fs::read(&log).unwrap_or_default();
    Ok(CheckRun {
        code,
        timed_out,
        output: String::from_utf8_lossy(&output).into_owned(),
    })
}

type OsArg = std::ffi::OsString;

/// The end of `text`, at most `OUTPUT_TAIL` bytes, cut at a character boundary.
fn tail(text: &str) -> String {
    if text.len() <= OUTPUT_TAIL {
        return text.to_string();
    }
    let mut start = text.len() - OUTPUT_TAIL;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

/// Where the eval keeps a task's check: its copy, log and temporary directory.
pub(crate) fn check_dir(out: &Path, id: &str) -> PathBuf {
    out.join("checks").join(id)
}
