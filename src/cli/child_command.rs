//! An ocflow command line for a child ocflow, built in one place from what this one parsed: the
//! global flags a child must see as its parent does (a call of the MCP server, a flow of `ocflow
//! batch`, local or on Ray), a flow's budget, and a detached run's own command line again; and
//! the child itself, spawned to speak JSON lines (the MCP server's tools, the ACP agent's flows).

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

use crate::cli::args::{BudgetArgs, GlobalArgs};
use ocflow_core::llm::key::{self, ApiKey};

/// A global flag handed on to a child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Global {
    Workspace,
    CodexLib,
    PythonDir,
    BaseUrl,
    Model,
    Record,
    Replay,
}

impl Global {
    /// The flag, and its value when the parent was given one. Paths are made absolute: a child
    /// may start in another directory.
    fn given(self, global: &GlobalArgs) -> (&'static str, Option<OsString>) {
        let path = |p: &Option<PathBuf>| {
            p.as_deref().map(|p| {
                std::path::absolute(p)
                    .unwrap_or_else(|_| p.to_path_buf())
                    .into()
            })
        };
        let text = |t: &Option<String>| t.as_ref().map(OsString::from);
        match self {
            Global::Workspace => ("--workspace", path(&global.workspace)),
            Global::CodexLib => ("--codex-lib", text(&global.codex_lib)),
            Global::PythonDir => ("--python-dir", path(&global.python_dir)),
            Global::BaseUrl => ("--base-url", text(&global.base_url)),
            Global::Model => ("--model", text(&global.model)),
            Global::Record => ("--record", path(&global.record)),
            Global::Replay => ("--replay", path(&global.replay)),
        }
    }
}

/// The `which` global flags this ocflow was given, again for a child.
pub(crate) fn global_flags(global: &GlobalArgs, which: &[Global]) -> Vec<OsString> {
    let mut flags = Vec::new();
    for flag in which {
        if let (name, Some(value)) = flag.given(global) {
            flags.extend([OsString::from(name), value]);
        }
    }
    flags
}

/// A flow's budget as flags (`run` and `resume` take the same).
pub(crate) fn budget_flags(budget: &BudgetArgs) -> Vec<OsString> {
    let mut argv: Vec<OsString> = Vec::new();
    if let Some(tokens) = budget.max_tokens {
        argv.extend(["--max-tokens".into(), tokens.to_string().into()]);
    }
    if let Some(usd) = budget.max_cost {
        argv.extend(["--max-cost".into(), usd.to_string().into()]);
    }
    if let Some(time) = budget.max_time {
        argv.extend([
            "--max-time".into(),
            format!("{}ms", time.as_millis()).into(),
        ]);
    }
    if let Some(calls) = budget.max_calls {
        argv.extend(["--max-calls".into(), calls.to_string().into()]);
    }
    argv
}

/// `ocflow run --detach`'s own command line for the run it starts: the same without
/// `--detach`, with the task id it chose (`task_id`, when none was given) and the file the run
/// writes its exit code to.
pub(crate) fn detached(task_id: Option<&str>, exit_code_file: &Path) -> Vec<OsString> {
    let mut argv: Vec<OsString> = std::env::args_os()
        .skip(1)
        .filter(|arg| arg != "--detach")
        .collect();
    if let Some(id) = task_id {
        argv.extend(["--task-id".into(), id.into()]);
    }
    argv.extend(["--exit-code-file".into(), exit_code_file.into()]);
    argv
}

/// This binary (`program`) as a child that speaks JSON lines: the `forwarded` global flags,
/// `--json`, `--repo` when given, then `args`; the key handed over through a pipe, never its
/// environment. Its stdin is `input`'s pipe, or nothing; its stderr is ours. Returns the parent's
/// copy of the key's pipe, to drop once the child is spawned.
pub(crate) fn json_child(
    program: &Path,
    forwarded: &[OsString],
    repo: Option<&Path>,
    args: impl IntoIterator<Item = OsString>,
    input: bool,
    key: &ApiKey,
) -> std::io::Result<(tokio::process::Command, Option<OwnedFd>)> {
    let mut command = tokio::process::Command::new(program);
    command.args(forwarded).arg("--json");
    if let Some(repo) = repo {
        command.arg("--repo").arg(repo);
    }
    command
        .args(args)
        .stdin(if input { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let pipe = key::hand_over(&mut command, key)?;
    Ok((command, pipe))
}

/// Interrupts a child ocflow as Ctrl-C does: it records where it stopped, resumable.
pub(crate) fn interrupt(pid: u32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
    }
}

/// Sends SIGINT to a started flow when dropped armed (the call that started it was cancelled):
/// it stops as Ctrl-C stops it, recorded and resumable.
pub(crate) struct InterruptOnDrop(pub(crate) Option<u32>);

impl Drop for InterruptOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            interrupt(pid);
        }
    }
}

/// Writes `input` to the child's stdin and closes it, beside the reading of its stdout (a child
/// that writes before it reads never waits on us). A child that stops reading early (a refused
/// task) closes the pipe: nothing to report, its own error says why.
pub(crate) fn feed(child: &mut Child, input: Option<String>) {
    if let (Some(mut stdin), Some(input)) = (child.stdin.take(), input) {
        tokio::spawn(async move {
            let _ = stdin.write_all(input.as_bytes()).await;
        });
    }
}

/// The child's stdout, a line at a time.
pub(crate) fn stdout_lines(child: &mut Child) -> std::io::Result<Lines<BufReader<ChildStdout>>> {
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("the child's stdout was not piped"))?;
    Ok(BufReader::new(stdout).lines())
}

/// A line as JSON; a line that is not JSON (which would be a bug) kept as text.
pub(crate) fn as_json(line: String) -> Value {
    serde_json::from_str(&line).unwrap_or(Value::String(line))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::Cli;
    use clap::Parser;

    fn parsed(line: &str) -> Cli {
        Cli::try_parse_from(std::iter::once("ocflow").chain(line.split_whitespace())).unwrap()
    }

    #[test]
    fn a_child_parses_the_flags_it_is_handed_as_its_parent_did() {
        let parent = parsed(
            "--workspace ws --model m --codex-lib lib.ops --base-url http://h/v1 run \
             --max-tokens 9 --max-cost 0.5 --max-time 90s --max-calls 4 fix",
        );
        let crate::cli::args::Command::Run(run) = &parent.command else {
            panic!("not a run");
        };
        let all = [
            Global::Workspace,
            Global::CodexLib,
            Global::Model,
            Global::BaseUrl,
        ];
        let mut argv: Vec<OsString> = vec!["ocflow".into()];
        argv.extend(global_flags(&parent.global, &all));
        argv.push("run".into());
        argv.extend(budget_flags(&run.limits.budget));
        argv.push("fix".into());
        let child = Cli::try_parse_from(argv).unwrap();
        assert_eq!(child.global.model, parent.global.model);
        assert_eq!(child.global.codex_lib, parent.global.codex_lib);
        assert_eq!(child.global.base_url, parent.global.base_url);
        let workspace = child.global.workspace.unwrap();
        assert!(
            workspace.is_absolute() && workspace.ends_with("ws"),
            "{workspace:?}"
        );
        let crate::cli::args::Command::Run(again) = &child.command else {
            panic!("not a run");
        };
        assert_eq!(again.limits.budget.max_tokens, Some(9));
        assert_eq!(again.limits.budget.max_cost, Some(0.5));
        assert_eq!(again.limits.budget.max_time, run.limits.budget.max_time);
        assert_eq!(again.limits.budget.max_calls, Some(4));
        // Only the flags asked for are handed on.
        let some = global_flags(&parent.global, &[Global::Model]);
        assert_eq!(some, ["--model", "m"].map(OsString::from));
    }
}
