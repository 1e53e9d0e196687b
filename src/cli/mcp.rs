//! `ocflow mcp`: ocflow as an MCP server over stdio (the official Rust SDK, `rmcp`), for agents
//! that call tools rather than commands. Each tool runs this same binary with `--json` and hands
//! back the JSON lines it printed, so the server and the command line cannot drift apart: one
//! behaviour, one stream, one set of exit codes.
//!
//! An MCP call times out (OpenHands: after 300 s), and a flow can take an hour, so
//! `ocflow_run` starts the flow in the background and returns as soon as it has a task id;
//! `ocflow_status` is polled until the flow finishes. The key reaches each child through a pipe
//! (`key::hand_over`), never an environment. When the session ends (the client closes stdin),
//! flows still running are interrupted as Ctrl-C would: recorded, and resumable.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{BufReader, Lines};
use tokio::process::{Child, ChildStdout};
use tokio::sync::Notify;

use crate::cli::args::{BudgetArgs, GlobalArgs};
use crate::cli::child_command::{self, Global, InterruptOnDrop, as_json, feed, stdout_lines};
use crate::cli::mcp_status::{self, Started};
use crate::cli::mcp_stdio;
use ocflow_core::llm::key::ApiKey;
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::exit::ExitCode;
use ocflow_model::output::say;

/// What the server tells the client's model about itself.
const INSTRUCTIONS: &str = "ocflow plans a coding task with an LLM, runs it as a flow of steps \
    in a workspace (the repository is only read), and hands back a diff to review and apply. \
    Call ocflow_run with the task; it returns a task_id at once. Then call ocflow_status with \
    that task_id and wait_seconds 30 until `running` is false: each call answers at the flow's \
    next change (or after wait_seconds); `finished` then holds the outcome and the summary. \
    Review with ocflow_diff, then write the changes with ocflow_apply. A flow in state \
    `waiting` asks a person (ocflow_run's `approve`): answer it with ocflow_approve.";

/// The longest an `ocflow_status` call waits for a change (an MCP call times out: OpenHands
/// gives it 300 s).
const MAX_WAIT_SECONDS: u64 = 60;

/// How long a session's end waits for interrupted flows to record their state.
const STOP_GRACE: Duration = Duration::from_secs(20);

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct PlanParams {
    /// The task, in words.
    task: String,
    /// The repository's path [default: the server's --repo, or the git repository holding its
    /// directory].
    repo: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct RunParams {
    /// The task, in words (planned by the LLM). Give this or `plan`.
    task: Option<String>,
    /// The path of a flow file to run instead of planning (a JSON flow, as ocflow_plan prints).
    plan: Option<String>,
    /// The repository's path [default: the server's --repo, or the git repository holding its
    /// directory].
    repo: Option<String>,
    /// The flow's budget: `max_tokens`, `max_cost` (US dollars), `max_time`; the flow pauses
    /// (state `paused`) before a call would exceed one.
    #[serde(flatten)]
    budget: BudgetArgs,
    /// What a person must approve before the flow goes on: `plan` (before any step runs),
    /// `risky` (a command the policy flags, a recovery that replans), `apply` (before the
    /// changes are written). The flow then waits (state `waiting`) for ocflow_approve.
    #[serde(default)]
    approve: Vec<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct ApproveParams {
    /// The task id of the waiting flow.
    task_id: String,
    /// The repository's path, when the flow was started with one.
    repo: Option<String>,
    /// Yes (the flow goes on) or no (it ends; an apply is not written) [default: true].
    #[serde(default = "yes")]
    approve: bool,
    /// Why, for a no: kept in the journal and the status.
    reason: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct StatusParams {
    /// The task id ocflow_run returned (or the task directory) [default: the latest flow].
    task_id: Option<String>,
    /// The repository's path, when the flow was started with one.
    repo: Option<String>,
    /// Wait up to this many seconds (at most 60) for the flow's next change (a step started
    /// or finished, a recovery decision, the end) before answering [default: 0, at once].
    #[serde(default)]
    wait_seconds: u64,
    /// Every step in full, instead of the compact answer [default: false].
    #[serde(default)]
    detail: bool,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct TaskParams {
    /// The task id ocflow_run returned (or the task directory) [default: the latest flow].
    task_id: Option<String>,
    /// The repository's path, when the flow was started with one.
    repo: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct ApplyParams {
    /// The task id ocflow_run returned (or the task directory).
    task_id: String,
    /// The repository's path, when the flow was started with one.
    repo: Option<String>,
    /// Overwrite files that changed in the repository since the flow read them.
    #[serde(default)]
    force: bool,
}

/// The MCP server.
#[derive(Clone)]
struct Server {
    /// The binary to run for each tool: this one.
    program: PathBuf,
    /// Global flags the server was started with, passed on to every child.
    forwarded: Vec<OsString>,
    /// The server's `--repo`, used when a call names none.
    repo: Option<PathBuf>,
    key: ApiKey,
    started: Arc<Mutex<HashMap<String, Started>>>,
    /// Per task, the [`mcp_status::fingerprint`] of the last status answered: a waiting call
    /// answers at once when the flow moved on since.
    answered: Arc<Mutex<HashMap<String, String>>>,
    /// Woken when a flow this server started ends (its process exits).
    ended: Arc<Notify>,
    tool_router: ToolRouter<Server>,
}

/// `ocflow mcp`: serves until the client closes the connection.
pub(crate) fn serve(global: &GlobalArgs, key: ApiKey) -> Result<ExitCode> {
    let program = std::env::current_exe().io_context(|| "finding ocflow's own binary".into())?;
    let server = Server {
        program,
        forwarded: forwarded_flags(global),
        repo: global.repo.clone(),
        key,
        started: Arc::default(),
        answered: Arc::default(),
        ended: Arc::default(),
        tool_router: Server::tool_router(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .io_context(|| "starting the async runtime".into())?;
    let code = runtime.block_on(async {
        let (stdio, answered) = mcp_stdio::stdio();
        let service =
            server.clone().serve(stdio).await.map_err(|err| {
                Error::Usage(format!("MCP: the client's handshake failed: {err}"))
            })?;
        let _ = service.waiting().await;
        server.stop_flows().await;
        // rmcp's last answers, still on their way to stdout.
        let _ = tokio::time::timeout(Duration::from_secs(5), answered).await;
        Ok(ExitCode::Success)
    });
    runtime.shutdown_background();
    code
}

/// The global flags a child needs to see what the server sees (`--repo` is per call).
fn forwarded_flags(global: &GlobalArgs) -> Vec<OsString> {
    use Global::*;
    let all = [
        Workspace, CodexLib, PythonDir, BaseUrl, Model, Record, Replay,
    ];
    child_command::global_flags(global, &all)
}

#[tool_router]
impl Server {
    #[tool(
        description = "Plan a coding task with the LLM and return the validated flow (JSON) \
        without running it. Takes one LLM call, with retries."
    )]
    async fn ocflow_plan(&self, Parameters(params): Parameters<PlanParams>) -> CallToolResult {
        let args = ["plan", "-"].map(OsString::from);
        self.call(params.repo, args, Some(params.task), true).await
    }

    #[tool(
        description = "Start a flow for a coding task in the background and return its \
        task_id at once (the repository is only read; nothing is written to it until \
        ocflow_apply). Call ocflow_status with the task_id and wait_seconds 30 until `running` \
        is false."
    )]
    async fn ocflow_run(&self, Parameters(params): Parameters<RunParams>) -> CallToolResult {
        let mut args = vec![OsString::from("run")];
        if params.task.is_none() && params.plan.is_none() {
            return failure(json!({"type": "error", "code": "usage", "message":
                "give `task` (words) or `plan` (a flow file's path)"}));
        }
        if let Some(plan) = params.plan {
            args.extend([OsString::from("--plan"), OsString::from(plan)]);
        }
        args.extend(child_command::budget_flags(&params.budget));
        if !params.approve.is_empty() {
            args.extend([OsString::from("--approve"), params.approve.join(",").into()]);
        }
        if params.task.is_some() {
            args.push(OsString::from("-"));
        }
        self.start(params.repo, args, params.task).await
    }

    #[tool(
        description = "Answer a flow waiting for a person (state `waiting`, after ocflow_run \
        with `approve`): approve true runs a waiting plan or step on in the background (poll \
        ocflow_status again) or writes a waiting apply; approve false ends the flow, with \
        `reason` kept in its journal."
    )]
    async fn ocflow_approve(
        &self,
        Parameters(params): Parameters<ApproveParams>,
    ) -> CallToolResult {
        let id = OsString::from(&params.task_id);
        if !params.approve {
            let mut args = vec![OsString::from("reject"), OsString::from("--via-mcp")];
            if let Some(reason) = params.reason {
                args.extend([OsString::from("--reason"), OsString::from(reason)]);
            }
            args.extend([OsString::from("--"), id]);
            return self.call(params.repo, args, None, false).await;
        }
        let status = match self
            .status(params.repo.clone(), Some(&params.task_id))
            .await
        {
            Ok(status) => status,
            Err(answer) => return answer,
        };
        let args = ["approve", "--via-mcp", "--"]
            .map(OsString::from)
            .into_iter()
            .chain([id]);
        // An approved apply is short, and never killed halfway; a plan or a step runs on.
        if status["approval"]["kind"] == "apply" {
            return self.call(params.repo, args, None, false).await;
        }
        self.start(params.repo, args, None).await
    }

    #[tool(
        description = "A flow's state, compact: its steps counted, the running and failed ones \
        in a line each, tokens, elapsed time and the call to make next; for a flow this server \
        started, whether it still runs and, once it ended, how (`finished`, `error`). With \
        wait_seconds (at most 60) it answers at the flow's next change instead of at once. \
        `detail` gives every step."
    )]
    async fn ocflow_status(&self, Parameters(params): Parameters<StatusParams>) -> CallToolResult {
        let wait = Duration::from_secs(params.wait_seconds.min(MAX_WAIT_SECONDS));
        let deadline = tokio::time::Instant::now() + wait;
        let task = params.task_id.as_deref();
        let mut status = match self.status(params.repo.clone(), task).await {
            Ok(status) => status,
            Err(answer) => return answer,
        };
        let id = status["task_id"].as_str().unwrap_or_default().to_string();
        let seen = self.answered().get(&id).cloned();
        // A flow that moved on since the last answer is answered at once; one that did not is
        // waited on, to its next change.
        if !wait.is_zero()
            && self.runs(&id, &status)
            && seen.as_deref() == Some(mcp_status::fingerprint(&status).as_str())
        {
            self.wait_for_change(params.repo.clone(), &id, &status, deadline)
                .await;
            status = match self.status(params.repo.clone(), Some(&id)).await {
                Ok(status) => status,
                Err(answer) => return answer,
            };
        }
        self.settle(&id, &status).await;
        // The flow's process ended after the status was read (its `finished` is known): read it
        // again, so the answer's state is the final one, saved before the process exits, and
        // not the one seen a moment before beside it.
        if mcp_status::runs(&status) && self.lock().get(&id).is_some_and(|s| !s.running) {
            match self.status(params.repo.clone(), Some(&id)).await {
                Ok(fresh) => status = fresh,
                Err(answer) => return answer,
            }
        }
        self.answered()
            .insert(id.clone(), mcp_status::fingerprint(&status));
        let started = self.lock();
        let started = started.get(&id);
        CallToolResult::structured(if params.detail {
            mcp_status::detail(status, started)
        } else {
            mcp_status::compact(&status, started, chrono::Utc::now())
        })
    }

    #[tool(description = "The flow's changes: the files by kind and the unified diff.")]
    async fn ocflow_diff(&self, Parameters(params): Parameters<TaskParams>) -> CallToolResult {
        let mut args = vec![OsString::from("diff")];
        if let Some(task_id) = params.task_id {
            args.extend([OsString::from("--"), OsString::from(task_id)]);
        }
        self.call(params.repo, args, None, true).await
    }

    #[tool(
        description = "Write a succeeded flow's changes into the repository. Refuses files \
        changed in the repository since the flow read them, unless `force`."
    )]
    async fn ocflow_apply(&self, Parameters(params): Parameters<ApplyParams>) -> CallToolResult {
        let mut args = vec![OsString::from("apply")];
        if params.force {
            args.push(OsString::from("--force"));
        }
        args.extend([OsString::from("--"), OsString::from(params.task_id)]);
        // An apply is never killed halfway, even if the client gives up on the call.
        self.call(params.repo, args, None, false).await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ocflow", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

impl Server {
    /// `ocflow status --json [ID]`: the status, or the tool's answer when there is none.
    async fn status(
        &self,
        repo: Option<String>,
        task_id: Option<&str>,
    ) -> std::result::Result<Value, CallToolResult> {
        let mut args = vec![OsString::from("status")];
        if let Some(task_id) = task_id {
            args.extend([OsString::from("--"), OsString::from(task_id)]);
        }
        match self.output(repo, args, None, true).await {
            Ok((0, lines)) if lines.first().is_some_and(Value::is_object) => {
                Ok(lines.into_iter().next().unwrap_or_default())
            }
            Ok((code, lines)) => Err(failure(json!({"exit_code": code, "output": lines}))),
            Err(err) => Err(failure(spawn_error(&err))),
        }
    }

    /// Whether the flow still runs: for one this server started, until its process exits.
    fn runs(&self, id: &str, status: &Value) -> bool {
        match self.lock().get(id) {
            Some(started) => started.running,
            None => mcp_status::runs(status),
        }
    }

    /// Waits until the flow's [`mcp_status::fingerprint`] differs from `status`'s, the flow's
    /// process ends, or `deadline`. `ocflow status --follow` does the watching (file-system
    /// notifications on the journal and the status file): it prints the status at each change.
    async fn wait_for_change(
        &self,
        repo: Option<String>,
        id: &str,
        status: &Value,
        deadline: tokio::time::Instant,
    ) {
        let before = mcp_status::fingerprint(status);
        let args = ["status", "--follow", "--", id].map(OsString::from);
        let following = async {
            let (mut command, pipe) = self.command(repo, args, false)?;
            command.kill_on_drop(true);
            let mut child = command.spawn()?;
            drop(pipe);
            let lines = stdout_lines(&mut child)?;
            Ok::<_, std::io::Error>((child, lines))
        };
        let Ok((_child, mut lines)) = following.await else {
            // Nothing to watch with: the deadline still bounds the wait.
            tokio::time::sleep_until(deadline).await;
            return;
        };
        let ended = self.ended.notified();
        tokio::pin!(ended);
        ended.as_mut().enable();
        loop {
            if !self.lock().get(id).is_none_or(|started| started.running) {
                return;
            }
            tokio::select! {
                line = lines.next_line() => match line {
                    Ok(Some(line)) if unchanged(&line, &before) => {}
                    // A change, or the follower stopped (the flow ended, or its ocflow died).
                    _ => return,
                },
                () = &mut ended => return,
                () = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    /// A flow this server started whose status says it ended is still writing its last
    /// events: waits a moment for its process to exit, so the answer holds `finished`.
    async fn settle(&self, id: &str, status: &Value) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !mcp_status::runs(status)
            && self.lock().get(id).is_some_and(|started| started.running)
            && tokio::time::Instant::now() < deadline
        {
            let _ = tokio::time::timeout(Duration::from_millis(200), self.ended.notified()).await;
        }
    }

    fn answered(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.answered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Started>> {
        self.started
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// This binary with the forwarded flags, `--json`, the call's repository and `args`; the
    /// key handed over through a pipe. Its stdin is not the session's (that is the protocol):
    /// it is `input`, or nothing.
    fn command(
        &self,
        repo: Option<String>,
        args: impl IntoIterator<Item = OsString>,
        input: bool,
    ) -> std::io::Result<(tokio::process::Command, Option<std::os::fd::OwnedFd>)> {
        let repo = repo.map(PathBuf::from).or_else(|| self.repo.clone());
        child_command::json_child(
            &self.program,
            &self.forwarded,
            repo.as_deref(),
            args,
            input,
            &self.key,
        )
    }

    /// Runs a short command to its end; its JSON lines are the result. `input`: its stdin (a
    /// task: a command line holds at most 128 KiB an argument). `killable`: whether a cancelled
    /// call may kill it.
    async fn call(
        &self,
        repo: Option<String>,
        args: impl IntoIterator<Item = OsString>,
        input: Option<String>,
        killable: bool,
    ) -> CallToolResult {
        match self.output(repo, args, input, killable).await {
            Ok((0, lines)) => CallToolResult::structured(json!({"exit_code": 0, "output": lines})),
            Ok((code, lines)) => failure(json!({"exit_code": code, "output": lines})),
            Err(err) => failure(spawn_error(&err)),
        }
    }

    /// The exit code and the JSON lines of a short command.
    async fn output(
        &self,
        repo: Option<String>,
        args: impl IntoIterator<Item = OsString>,
        input: Option<String>,
        killable: bool,
    ) -> std::io::Result<(i32, Vec<Value>)> {
        let (mut command, pipe) = self.command(repo, args, input.is_some())?;
        // A cancelled call (the client gave up) does not leave a reading command running.
        command.kill_on_drop(killable);
        let mut child = command.spawn()?;
        drop(pipe);
        feed(&mut child, input);
        let mut lines = stdout_lines(&mut child)?;
        let mut values = Vec::new();
        while let Some(line) = lines.next_line().await? {
            values.push(as_json(line));
        }
        let status = child.wait().await?;
        Ok((status.code().unwrap_or(-1), values))
    }

    /// Starts a flow; answers once it has a task id (`flow_started`), or with the error that
    /// stopped it first. The rest of its stream is read in the background.
    async fn start(
        &self,
        repo: Option<String>,
        args: impl IntoIterator<Item = OsString>,
        input: Option<String>,
    ) -> CallToolResult {
        let started = async {
            let (mut command, pipe) = self.command(repo, args, input.is_some())?;
            let mut child = command.spawn()?;
            drop(pipe);
            feed(&mut child, input);
            let lines = stdout_lines(&mut child)?;
            Ok::<_, std::io::Error>((child, lines))
        };
        let (mut child, mut lines) = match started.await {
            Ok(started) => started,
            Err(err) => return failure(spawn_error(&err)),
        };
        // A call cancelled before the flow is recorded must not leave it running untracked.
        let mut guard = InterruptOnDrop(child.id());
        let mut before = Vec::new();
        loop {
            match lines.next_line().await {
                Ok(Some(line)) => {
                    let event = as_json(line);
                    // A flow approved with ocflow_approve goes on as a resumed one.
                    if event["type"] == "flow_started" || event["type"] == "flow_resumed" {
                        let id = event["task_id"].as_str().unwrap_or_default().to_string();
                        self.lock().insert(
                            id.clone(),
                            Started {
                                pid: child.id(),
                                running: true,
                                last_event: Some(event.clone()),
                                ..Started::default()
                            },
                        );
                        guard.0 = None;
                        tokio::spawn(self.clone().follow(id, child, lines));
                        return CallToolResult::structured(json!({
                            "task_id": event["task_id"],
                            "task_dir": event["task_dir"],
                            "repo": event["repo"],
                            "running": true,
                            "next": "call ocflow_status with this task_id and wait_seconds 30 \
                                until running is false",
                        }));
                    }
                    before.push(event);
                }
                // It ended before starting a flow: a start-up error, in its own events.
                Ok(None) | Err(_) => {
                    let code = child.wait().await.ok().and_then(|s| s.code()).unwrap_or(-1);
                    guard.0 = None;
                    return failure(json!({"exit_code": code, "output": before}));
                }
            }
        }
    }

    /// Reads a started flow's events to their end, then its exit code.
    async fn follow(self, id: String, mut child: Child, mut lines: Lines<BufReader<ChildStdout>>) {
        while let Ok(Some(line)) = lines.next_line().await {
            let event = as_json(line);
            if let Some(started) = self.lock().get_mut(&id) {
                match event["type"].as_str() {
                    Some("flow_finished") => started.finished = Some(event.clone()),
                    Some("error") => started.error = Some(event.clone()),
                    Some("heartbeat") => {
                        started.stage = event["stage"].as_str().map(str::to_string);
                    }
                    _ => {}
                }
                started.last_event = Some(event);
            }
        }
        let code = child.wait().await.ok().and_then(|s| s.code());
        if let Some(started) = self.lock().get_mut(&id) {
            started.running = false;
            started.exit_code = Some(code.unwrap_or(-1));
        }
        self.ended.notify_waiters();
    }

    /// Interrupts the flows still running (as Ctrl-C does: recorded, resumable) and gives them
    /// a moment to say so.
    async fn stop_flows(&self) {
        let running: Vec<(String, u32)> = self
            .lock()
            .iter()
            .filter(|(_, s)| s.running)
            .filter_map(|(id, s)| s.pid.map(|pid| (id.clone(), pid)))
            .collect();
        for (id, pid) in &running {
            say(&format!(
                "ocflow mcp: the session ended; interrupting task {id} (resume it with `ocflow \
                 resume {id}`)"
            ));
            child_command::interrupt(*pid);
        }
        let deadline = tokio::time::Instant::now() + STOP_GRACE;
        while tokio::time::Instant::now() < deadline && self.lock().values().any(|s| s.running) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Whether a status line from `status --follow` shows the flow as `before` did.
fn unchanged(line: &str, before: &str) -> bool {
    serde_json::from_str::<Value>(line)
        .is_ok_and(|status| mcp_status::fingerprint(&status) == before)
}

fn failure(value: Value) -> CallToolResult {
    CallToolResult::structured_error(value)
}

fn spawn_error(err: &std::io::Error) -> Value {
    json!({"type": "error", "code": "io", "message": format!("could not run ocflow: {err}")})
}
