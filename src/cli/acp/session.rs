//! One ACP session: a repository and the flows its prompts became. A prompt runs this binary's
//! `run` as a child (as the MCP server does: one behaviour, one stream of events) and turns its
//! events into the protocol's updates as they come; a flow waiting for a person (`--approve`)
//! and the changes a succeeded flow made are put to the client as permission requests; a cancel
//! interrupts the child as Ctrl-C would, so the flow stays resumable, and the session's next
//! prompt offers to resume it.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::Notify;

use super::agent::Agent;
use super::connection::RpcError;
use super::updates;
use crate::cli::child_command::{self, InterruptOnDrop, as_json, feed, stdout_lines};
use ocflow_core::task::review;
use ocflow_core::task::state;
use ocflow_core::task::workspace::{FLOW_FILE, TaskDir};

/// A session's state.
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) repo: PathBuf,
    state: Mutex<State>,
    /// Woken by `session/cancel`.
    cancelled: Notify,
}

#[derive(Default)]
struct State {
    /// Flows started by this session's prompts (the first one's task id is the session's).
    flows: u32,
    /// The last flow's task id and directory.
    last: Option<(String, PathBuf)>,
    /// The child running a prompt's flow, if any.
    running: Option<u32>,
}

/// What a child's events told of its flow.
#[derive(Default)]
struct Followed {
    code: i32,
    task: Option<(String, PathBuf)>,
    finished: Option<Value>,
    approval: Option<Value>,
    paused: Option<Value>,
    error: Option<Value>,
    cancelled: bool,
}

/// What the session does next after a child ended.
enum Next {
    Run(Vec<OsString>),
    Stop(&'static str),
}

impl Session {
    pub(crate) fn new(id: String, repo: PathBuf) -> Session {
        Session {
            id,
            repo,
            state: Mutex::default(),
            cancelled: Notify::new(),
        }
    }

    /// A session loaded again: its flow is the task of its id.
    pub(crate) fn loaded(id: String, repo: PathBuf, task_dir: PathBuf) -> Session {
        let session = Session::new(id.clone(), repo);
        {
            let mut state = session.lock();
            state.flows = 1;
            state.last = Some((id, task_dir));
        }
        session
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `session/cancel`: interrupts the running flow (resumable); the prompt ends `cancelled`.
    pub(crate) fn cancel(&self) {
        if let Some(pid) = self.lock().running {
            child_command::interrupt(pid);
        }
        self.cancelled.notify_waiters();
    }

    /// The pid of the flow running now, for the end of the connection.
    pub(crate) fn running(&self) -> Option<u32> {
        self.lock().running
    }

    /// `session/prompt`: the prompt becomes a flow (or resumes the session's stopped one, when
    /// the person says so), shown as it runs; its changes are offered for applying.
    pub(crate) async fn prompt(&self, agent: &Agent, params: &Value) -> Result<Value, RpcError> {
        let task = updates::prompt_text(&params["prompt"]).map_err(RpcError::invalid)?;
        if self.lock().running.is_some() {
            return Err(RpcError::invalid(
                "a flow of this session is still running: wait for its end, or cancel it",
            ));
        }
        let mut args = match self.stopped_flow(agent).await {
            Some(id) => resume_args(&id),
            None => self.run_args(agent),
        };
        let mut input = Some(task);
        loop {
            let followed = self.follow(agent, args, input.take()).await?;
            if followed.cancelled {
                return Ok(json!({"stopReason": "cancelled"}));
            }
            match self.after(agent, &followed).await {
                Next::Run(next) => args = next,
                Next::Stop(reason) => return Ok(json!({"stopReason": reason})),
            }
        }
    }

    /// The arguments of a new flow for this session's next prompt.
    fn run_args(&self, agent: &Agent) -> Vec<OsString> {
        let id = {
            let mut state = self.lock();
            state.flows += 1;
            match state.flows {
                1 => self.id.clone(),
                n => format!("{}-{n}", self.id),
            }
        };
        let mut args: Vec<OsString> = vec!["run".into(), "--task-id".into(), id.into()];
        if !agent.approve.is_empty() {
            args.extend(["--approve".into(), agent.approve.join(",").into()]);
        }
        args.push("-".into());
        args
    }

    /// The session's last flow when it stopped before its end (interrupted, paused) and the
    /// person chose to resume it rather than start a new one.
    async fn stopped_flow(&self, agent: &Agent) -> Option<String> {
        let (id, dir) = self.lock().last.clone()?;
        let status = state::load_status(&TaskDir::at(dir)?).ok()?;
        let state = serde_json::to_value(status.state).ok()?;
        let state = state.as_str()?.to_string();
        if !matches!(state.as_str(), "interrupted" | "paused" | "running") {
            return None;
        }
        let call = json!({"toolCallId": format!("resume-{id}"), "kind": "other",
            "status": "pending",
            "title": format!("Task {id} stopped before its end ({state}): resume it?")});
        let options = json!([
            {"optionId": "resume", "name": format!("Resume task {id}"), "kind": "allow_once"},
            {"optionId": "new", "name": "Start a new flow for this prompt", "kind": "reject_once"},
        ]);
        (agent.permission(&self.id, call, options).await.as_deref() == Some("resume")).then_some(id)
    }

    /// Runs a child ocflow with `args` (and `input` on its stdin) to its end, showing its
    /// events; a cancel interrupts it and still reads it to its end (it records where it
    /// stopped).
    async fn follow(
        &self,
        agent: &Agent,
        args: Vec<OsString>,
        input: Option<String>,
    ) -> Result<Followed, RpcError> {
        let spawn = || {
            let (mut command, pipe) = child_command::json_child(
                &agent.program,
                &agent.forwarded,
                Some(&self.repo),
                args.clone(),
                input.is_some(),
                &agent.key,
            )?;
            let mut child = command.spawn()?;
            drop(pipe);
            feed(&mut child, input.clone());
            let lines = stdout_lines(&mut child)?;
            Ok::<_, std::io::Error>((child, lines))
        };
        let (mut child, mut lines) =
            spawn().map_err(|err| RpcError::internal(format!("could not run ocflow: {err}")))?;
        let pid = child.id();
        self.lock().running = pid;
        // A prompt whose request is dropped (the connection ended) interrupts its flow.
        let mut guard = InterruptOnDrop(pid);
        let mut followed = Followed::default();
        let mut flow = Value::Null;
        let mut statuses: HashMap<String, &'static str> = HashMap::new();
        loop {
            let line = tokio::select! {
                line = lines.next_line() => line,
                () = self.cancelled.notified(), if !followed.cancelled => {
                    followed.cancelled = true;
                    if let Some(pid) = pid {
                        child_command::interrupt(pid);
                    }
                    continue;
                }
            };
            let Ok(Some(line)) = line else { break };
            let event = as_json(line);
            match event["type"].as_str().unwrap_or_default() {
                "flow_started" | "flow_resumed" => {
                    let id = event["task_id"].as_str().unwrap_or_default().to_string();
                    let dir = PathBuf::from(event["task_dir"].as_str().unwrap_or_default());
                    flow = read_flow(&dir);
                    self.lock().last = Some((id.clone(), dir.clone()));
                    followed.task = Some((id, dir));
                    if !flow.is_null() {
                        self.show_plan(agent, &flow, &statuses).await;
                    }
                }
                "flow_planned" => {
                    if let Some((_, dir)) = &followed.task {
                        flow = read_flow(dir);
                    }
                    self.show_plan(agent, &flow, &statuses).await;
                }
                "step_started" => {
                    let id = event["step"].as_str().unwrap_or_default();
                    statuses.insert(id.to_string(), "in_progress");
                    let step = step_of(&flow, id).unwrap_or_else(
                        || json!({"id": id, "operation": event["operation"], "params": {}}),
                    );
                    agent
                        .conn
                        .update(&self.id, updates::step_started(&step, &self.repo))
                        .await;
                    self.show_plan(agent, &flow, &statuses).await;
                }
                "step_finished" => {
                    let id = event["step"].as_str().unwrap_or_default();
                    let done = if event["status"] == "succeeded" {
                        "completed"
                    } else {
                        "pending"
                    };
                    statuses.insert(id.to_string(), done);
                    agent
                        .conn
                        .update(&self.id, updates::step_finished(&event))
                        .await;
                    self.show_plan(agent, &flow, &statuses).await;
                }
                "warning" => {
                    let text = event["message"].as_str().unwrap_or_default();
                    agent
                        .conn
                        .update(
                            &self.id,
                            json!({"sessionUpdate": "agent_thought_chunk",
                                "content": {"type": "text", "text": text}}),
                        )
                        .await;
                }
                "approval_needed" => followed.approval = Some(event),
                "flow_paused" => followed.paused = Some(event),
                "flow_finished" => followed.finished = Some(event),
                "error" => followed.error = Some(event),
                _ => {}
            }
        }
        let status = child.wait().await;
        guard.0 = None;
        self.lock().running = None;
        followed.code = status.ok().and_then(|s| s.code()).unwrap_or(-1);
        Ok(followed)
    }

    async fn show_plan(&self, agent: &Agent, flow: &Value, statuses: &HashMap<String, &str>) {
        if flow["steps"].as_array().is_none_or(Vec::is_empty) {
            return;
        }
        let status_of = |id: &str| -> &'static str {
            match statuses.get(id).copied() {
                Some("completed") => "completed",
                Some("in_progress") => "in_progress",
                _ => "pending",
            }
        };
        agent
            .conn
            .update(&self.id, updates::plan(flow, status_of))
            .await;
    }

    /// What follows a child's end: the person's answer to a waiting flow, the changes offered
    /// for applying, or the end of the prompt with ocflow's words.
    async fn after(&self, agent: &Agent, followed: &Followed) -> Next {
        let id = followed
            .task
            .as_ref()
            .map(|(id, _)| id.clone())
            .unwrap_or_default();
        if let Some(approval) = &followed.approval
            && followed.code == 3
        {
            let subject = approval["subject"]
                .as_str()
                .unwrap_or("the flow's next step");
            let kind = if approval["kind"] == "plan" {
                "think"
            } else {
                "execute"
            };
            let call = json!({"toolCallId": format!("approve-{id}"), "kind": kind,
                "status": "pending", "title": format!("Approve {subject}?")});
            let options = json!([
                {"optionId": "approve", "name": "Approve", "kind": "allow_once"},
                {"optionId": "reject", "name": "Reject (the flow ends)", "kind": "reject_once"},
            ]);
            return match agent.permission(&self.id, call, options).await.as_deref() {
                Some("approve") => Next::Run(vec!["approve".into(), "--".into(), id.into()]),
                _ => {
                    let reject = ["reject", "--reason", "rejected in the editor", "--"];
                    let mut args: Vec<OsString> = reject.map(OsString::from).into();
                    args.push(id.clone().into());
                    let said = agent.call(&self.repo, args).await;
                    let text = format!("Task {id} was rejected; nothing was applied. {said}");
                    agent
                        .conn
                        .update(&self.id, updates::message(text.trim()))
                        .await;
                    Next::Stop("end_turn")
                }
            };
        }
        if let Some(paused) = &followed.paused {
            let text = format!(
                "Task {id} paused: {}. Prompt again to resume it (a higher budget may be needed: \
                 `ocflow resume {id}` takes one).",
                paused["message"].as_str().unwrap_or("a budget ran out")
            );
            agent.conn.update(&self.id, updates::message(&text)).await;
            return Next::Stop("end_turn");
        }
        let Some(finished) = &followed.finished else {
            let text = match &followed.error {
                Some(error) => format!(
                    "ocflow stopped (exit code {}): {}",
                    followed.code,
                    error["message"].as_str().unwrap_or_default()
                ),
                None => format!(
                    "ocflow stopped (exit code {}); what it said is in the agent's log.",
                    followed.code
                ),
            };
            agent.conn.update(&self.id, updates::message(&text)).await;
            return Next::Stop("end_turn");
        };
        agent
            .conn
            .update(&self.id, updates::message(&updates::ending(finished)))
            .await;
        if finished["state"] == "succeeded"
            && let Some((id, dir)) = &followed.task
        {
            self.offer_changes(agent, id, dir).await;
        }
        Next::Stop("end_turn")
    }

    /// Shows a succeeded flow's changes as diffs and asks whether to apply them: `ocflow apply`
    /// writes them when the person allows it; otherwise they stay in the workspace.
    async fn offer_changes(&self, agent: &Agent, id: &str, dir: &Path) {
        let diffs = match changes(dir, &self.repo) {
            Ok(diffs) if diffs.is_empty() => return,
            Ok(diffs) => diffs,
            Err(err) => {
                let text = format!("The changes of task {id} could not be read: {err}");
                agent.conn.update(&self.id, updates::message(&text)).await;
                return;
            }
        };
        let call_id = format!("apply-{id}");
        let title = format!("Apply the changes of task {id} to {}", self.repo.display());
        agent
            .conn
            .update(
                &self.id,
                json!({"sessionUpdate": "tool_call", "toolCallId": call_id, "title": title,
                    "kind": "edit", "status": "pending", "content": diffs}),
            )
            .await;
        let call = json!({"toolCallId": call_id, "title": title, "kind": "edit",
            "status": "pending"});
        let options = json!([
            {"optionId": "apply", "name": "Apply to the repository", "kind": "allow_once"},
            {"optionId": "keep", "name": "Keep them in the workspace", "kind": "reject_once"},
        ]);
        let (status, text) = match agent.permission(&self.id, call, options).await.as_deref() {
            Some("apply") => {
                let args = ["apply", "--", id].map(OsString::from);
                let (code, said) = agent.run_to_end(&self.repo, args).await;
                let status = if code == 0 { "completed" } else { "failed" };
                (status, said)
            }
            _ => (
                "completed",
                format!("Kept in the workspace: `ocflow apply {id}` writes them later."),
            ),
        };
        agent
            .conn
            .update(
                &self.id,
                json!({"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                    "status": status, "content": [updates::text_content(&text)]}),
            )
            .await;
    }

    /// `session/load`: the task of the session's id shown again — the task as the person's
    /// message, its plan, each step that ran with its status, and its end.
    pub(crate) async fn replay(&self, agent: &Agent) -> Result<(), RpcError> {
        let Some((id, dir)) = self.lock().last.clone() else {
            return Ok(());
        };
        let task = TaskDir::at(dir.clone())
            .ok_or_else(|| RpcError::invalid(format!("no task directory for {id}")))?;
        let status = state::load_status(&task).map_err(|err| RpcError::invalid(err.to_string()))?;
        let flow = read_flow(&dir);
        agent
            .conn
            .update(&self.id, updates::user_message(&status.task))
            .await;
        let mut statuses = HashMap::new();
        for step in &status.steps {
            let shown = serde_json::to_value(step.status).unwrap_or_default();
            let done = if shown == "succeeded" {
                "completed"
            } else {
                "pending"
            };
            statuses.insert(step.id.clone(), done);
            if shown == "pending" {
                continue;
            }
            let started = step_of(&flow, &step.id)
                .unwrap_or_else(|| json!({"id": step.id, "operation": "step", "params": {}}));
            agent
                .conn
                .update(&self.id, updates::step_started(&started, &self.repo))
                .await;
            let event = json!({"step": step.id, "status": shown,
                "message": step.message.clone().unwrap_or_default()});
            agent
                .conn
                .update(&self.id, updates::step_finished(&event))
                .await;
        }
        self.show_plan(agent, &flow, &statuses).await;
        let state = serde_json::to_value(status.state).unwrap_or_default();
        let mut text = format!("Task {id} {}", state.as_str().unwrap_or("unknown"));
        if let Some(message) = &status.message {
            text.push_str(&format!(": {message}"));
        }
        text.push('.');
        agent.conn.update(&self.id, updates::message(&text)).await;
        Ok(())
    }
}

/// `resume ID`'s arguments.
fn resume_args(id: &str) -> Vec<OsString> {
    ["resume", "--", id].map(OsString::from).into()
}

/// The task's `flow.json`, or null before there is one.
fn read_flow(dir: &Path) -> Value {
    std::fs::read_to_string(dir.join(FLOW_FILE))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null)
}

fn step_of(flow: &Value, id: &str) -> Option<Value> {
    flow["steps"]
        .as_array()?
        .iter()
        .find(|s| s["id"] == id)
        .cloned()
}

/// A flow's net changes as the protocol's diff content, each file's path in the repository.
fn changes(dir: &Path, repo: &Path) -> ocflow_model::error::Result<Vec<Value>> {
    let task = TaskDir::at(dir.to_path_buf()).ok_or_else(|| {
        ocflow_model::error::Error::internal(format!("{} names no task", dir.display()))
    })?;
    let _ = state::adopt_operations(&task);
    let status = state::load_status(&task)?;
    let flow = state::load_flow_of(&task, &status)?;
    let (changes, _) = review::changes_and_left_out(&task, &status, &flow)?;
    let text = |path: Option<&Path>| path.and_then(|p| std::fs::read_to_string(p).ok());
    Ok(changes
        .iter()
        .map(|change| {
            updates::diff(
                &repo.join(change.path.as_str()),
                text(change.old_file()).as_deref(),
                text(change.new_file()).as_deref(),
            )
        })
        .collect())
}

/// A session shared between the reading loop and its prompt.
pub(crate) type Shared = Arc<Session>;
