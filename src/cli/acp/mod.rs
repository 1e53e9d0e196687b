//! `ocflow acp`: ocflow as an Agent Client Protocol agent on stdio, for editors (Zed,
//! JetBrains) and headless ACP clients. A session is a repository (the client's `cwd`); a prompt
//! becomes a flow, its plan the protocol's plan, its steps tool calls with their status and
//! message, its changes diff content that the person applies through a permission request;
//! `--approve` puts the plan and risky commands to the person the same way; a cancel interrupts
//! the flow resumably; `session/load` shows a task again by its id (a session's id is its first
//! flow's task id). Each flow is this same binary's `run`, as the MCP server runs it
//! (`child_command::json_child`): one behaviour, one stream of events, the key through a pipe.
//!
//! JSON-RPC by hand (`connection.rs`), not the `agent-client-protocol` crate: its schema crate
//! turns on serde_json's `preserve_order` for the whole build, which would change the order of
//! every JSON file and event ocflow writes (DESIGN.md §7, "ACP").

mod agent;
mod connection;
mod session;
mod updates;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::cli::args::{AcpArgs, GlobalArgs};
use crate::cli::child_command::{self, Global};
use crate::cli::mcp_stdio;
use crate::cli::task_index;
use agent::Agent;
use connection::{Connection, METHOD_NOT_FOUND, RpcError};
use ocflow_core::llm::key::ApiKey;
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::exit::ExitCode;
use ocflow_model::output::say;
use session::{Session, Shared};

/// The protocol version this agent speaks.
const PROTOCOL_VERSION: u64 = 1;

/// How long the end of the connection waits for interrupted flows to record their state.
const STOP_GRACE: Duration = Duration::from_secs(20);

/// The agent and its sessions.
struct Server {
    agent: Agent,
    sessions: Mutex<HashMap<String, Shared>>,
}

/// `ocflow acp`: serves until the client closes stdin; flows still running are interrupted
/// (resumable).
pub(crate) fn serve(global: &GlobalArgs, args: &AcpArgs, key: ApiKey) -> Result<ExitCode> {
    let program = std::env::current_exe().io_context(|| "finding ocflow's own binary".into())?;
    use Global::*;
    let forwarded = child_command::global_flags(
        global,
        &[
            Workspace, CodexLib, PythonDir, BaseUrl, Model, Record, Replay,
        ],
    );
    let approve = args.approve.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .io_context(|| "starting the async runtime".into())?;
    runtime.block_on(async {
        let (stdio, written) = mcp_stdio::stdio();
        let (input, output) = tokio::io::split(stdio);
        let server = Arc::new(Server {
            agent: Agent {
                conn: Arc::new(Connection::new(output)),
                program,
                forwarded,
                approve,
                key,
            },
            sessions: Mutex::default(),
        });
        let mut lines = BufReader::new(input).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            // The guard answered every line that is not JSON.
            if let Ok(message) = serde_json::from_str::<Value>(&line) {
                server.clone().receive(message);
            }
        }
        server.agent.conn.close();
        server.stop_flows().await;
        drop(server);
        let _ = tokio::time::timeout(Duration::from_secs(5), written).await;
    });
    runtime.shutdown_background();
    Ok(ExitCode::Success)
}

impl Server {
    /// One message from the client: a request (answered from a task of its own, so a long
    /// prompt never holds up a cancel), a notification, or the answer to our request.
    fn receive(self: Arc<Self>, message: Value) {
        let Some(method) = message["method"].as_str().map(str::to_string) else {
            self.agent.conn.answered(&message);
            return;
        };
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        match message.get("id").cloned() {
            Some(id) => {
                tokio::spawn(async move {
                    let result = self.handle(&method, &params).await;
                    self.agent.conn.respond(id, result).await;
                });
            }
            None if method == "session/cancel" => {
                if let Some(session) = self.session(params["sessionId"].as_str().unwrap_or("")) {
                    session.cancel();
                }
            }
            None => {}
        }
    }

    async fn handle(&self, method: &str, params: &Value) -> std::result::Result<Value, RpcError> {
        match method {
            "initialize" => Ok(json!({
                "protocolVersion": PROTOCOL_VERSION,
                "agentCapabilities": {
                    "loadSession": true,
                    "promptCapabilities": {"image": false, "audio": false,
                        "embeddedContext": true},
                },
                "authMethods": [],
                "agentInfo": {"name": "ocflow", "title": "ocflow",
                    "version": env!("CARGO_PKG_VERSION")},
            })),
            "authenticate" => Ok(json!({})),
            "session/new" => {
                let repo = repository(params)?;
                let id = new_session_id();
                self.sessions()
                    .insert(id.clone(), Arc::new(Session::new(id.clone(), repo)));
                Ok(json!({"sessionId": id}))
            }
            "session/load" => {
                let repo = repository(params)?;
                let id = params["sessionId"]
                    .as_str()
                    .ok_or_else(|| RpcError::invalid("`sessionId` is missing"))?;
                // The task's own repository: its resume and apply name it.
                let (dir, repo) = task_dir(id, &repo)?;
                let session = Arc::new(Session::loaded(id.to_string(), repo, dir));
                self.sessions().insert(id.to_string(), session.clone());
                session.replay(&self.agent).await?;
                Ok(json!({}))
            }
            "session/prompt" => {
                let id = params["sessionId"].as_str().unwrap_or_default();
                let session = self.session(id).ok_or_else(|| {
                    RpcError::invalid(format!(
                        "no session {id}: start one with session/new, or load it with \
                         session/load"
                    ))
                })?;
                session.prompt(&self.agent, params).await
            }
            other => Err(RpcError {
                code: METHOD_NOT_FOUND,
                message: format!("ocflow acp does not serve `{other}`"),
            }),
        }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Shared>> {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn session(&self, id: &str) -> Option<Shared> {
        self.sessions().get(id).cloned()
    }

    /// Interrupts the flows still running (as Ctrl-C does: recorded, resumable) and gives them
    /// a moment to say so.
    async fn stop_flows(&self) {
        let sessions: Vec<Shared> = self.sessions().values().cloned().collect();
        for session in &sessions {
            if session.busy() {
                say(&format!(
                    "ocflow acp: the client closed the connection; interrupting session {}'s \
                     flow (resume it with `ocflow resume`)",
                    session.id
                ));
                session.cancel();
            }
        }
        let deadline = tokio::time::Instant::now() + STOP_GRACE;
        while tokio::time::Instant::now() < deadline
            && sessions.iter().any(|s| s.running().is_some())
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The session's repository: the client's `cwd`, an absolute directory.
fn repository(params: &Value) -> std::result::Result<PathBuf, RpcError> {
    let cwd = params["cwd"]
        .as_str()
        .ok_or_else(|| RpcError::invalid("`cwd` is missing: give the repository's path"))?;
    let path = PathBuf::from(cwd);
    if !path.is_absolute() || !path.is_dir() {
        return Err(RpcError::invalid(format!(
            "`cwd` {cwd} is not an absolute path of a directory: give the repository's path"
        )));
    }
    Ok(path)
}

/// A fresh session id, which its first flow takes as its task id.
fn new_session_id() -> String {
    let now = chrono::Utc::now();
    let salt = (now.timestamp_subsec_nanos() ^ std::process::id()) & 0xffff;
    format!("acp-{}-{salt:04x}", now.format("%Y%m%d-%H%M%S"))
}

/// The directory of task `id` and its repository: the one in the client's repository, else
/// where the user's task index says.
fn task_dir(id: &str, repo: &Path) -> std::result::Result<(PathBuf, PathBuf), RpcError> {
    let known = task_index::entries();
    known
        .iter()
        .find(|e| e.task_id == id && e.repo == repo)
        .or_else(|| known.iter().find(|e| e.task_id == id))
        .map(|e| (e.task_dir.clone(), e.repo.clone()))
        .ok_or_else(|| {
            RpcError::invalid(format!(
                "no task {id} is known (`ocflow list --all` shows the tasks): load a session \
                 by the task id of a flow"
            ))
        })
}

/// For errors the session shows rather than answers.
impl From<Error> for RpcError {
    fn from(error: Error) -> RpcError {
        RpcError::internal(error.to_string())
    }
}
