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
use ocflow_model::status::StepState;

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
    /// A prompt is being answered (its flow, a question to the person, an apply).
    busy: bool,
    /// `session/cancel` came during the prompt being answered: it ends `cancelled`.
    cancelled: bool,
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

/// The session's last flow, as a new prompt finds it.
enum Stopped {
    /// None, or one that ended: the prompt is a new flow.
    None,
    /// Stopped before its end, and the person chose to resume it.
    Resume(String),
    /// Waiting for the person's approval: asked again.
    Waiting(Box<Followed>),
    /// The person did not answer whether to resume it (the prompt was cancelled).
    Unanswered,
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
    /// Kept as a flag too: a cancel that comes while no one waits for the notification (an
    /// update being written, between two children) is seen at the next check.
    pub(crate) fn cancel(&self) {
        let pid = {
            let mut state = self.lock();
            state.cancelled = state.busy;
            state.running
        };
        if let Some(pid) = pid {
            child_command::interrupt(pid);
        }
        self.cancelled.notify_waiters();
    }

    fn is_cancelled(&self) -> bool {
        self.lock().cancelled
    }

    /// The pid of the flow running now, for the end of the connection.
    pub(crate) fn running(&self) -> Option<u32> {
        self.lock().running
    }

    /// Whether a prompt is being answered.
    pub(crate) fn busy(&self) -> bool {
        self.lock().busy
    }

    /// `session/prompt`: the prompt becomes a flow (or resumes the session's stopped one, when
    /// the person says so), shown as it runs; its changes are offered for applying.
    pub(crate) async fn prompt(&self, agent: &Agent, params: &Value) -> Result<Value, RpcError> {
        let task = updates::prompt_text(&params["prompt"]).map_err(RpcError::invalid)?;
        {
            let mut state = self.lock();
            if state.busy {
                return Err(RpcError::invalid(
                    "a prompt of this session is still being answered: wait for its end, or \
                     cancel it",
                ));
            }
            state.busy = true;
            state.cancelled = false;
        }
        let answered = self.answer(agent, task).await;
        let cancelled = {
            let mut state = self.lock();
            state.busy = false;
            std::mem::take(&mut state.cancelled)
        };
        let reason = answered?;
        Ok(json!({"stopReason": if cancelled { "cancelled" } else { reason }}))
    }

    /// The prompt's flow, from its start (or the stopped flow's resume) to its end; the stop
    /// reason.
    async fn answer(&self, agent: &Agent, task: String) -> Result<&'static str, RpcError> {
        let mut input = Some(task);
        let mut args = match self.stopped_flow(agent).await {
            Stopped::None => self.run_args(&agent.approve),
            Stopped::Resume(id) => {
                let text = format!(
                    "Resuming task {id}; this prompt's words are not a new task (prompt again \
                     for one)."
                );
                agent.conn.update(&self.id, updates::message(&text)).await;
                input = None;
                resume_args(&id)
            }
            Stopped::Waiting(followed) => match self.after(agent, &followed).await {
                Next::Run(next) => {
                    input = None;
                    next
                }
                Next::Stop(reason) => return Ok(reason),
            },
            Stopped::Unanswered => return Ok("cancelled"),
        };
        loop {
            if self.is_cancelled() {
                return Ok("cancelled");
            }
            let followed = self.follow(agent, args, input.take()).await?;
            if followed.cancelled {
                return Ok("cancelled");
            }
            match self.after(agent, &followed).await {
                Next::Run(next) => args = next,
                Next::Stop(reason) => return Ok(reason),
            }
        }
    }

    /// The arguments of a new flow for this session's next prompt: the session's id for its
    /// first, then `ID-2`, `ID-3`… (one not taken in the workspace).
    fn run_args(&self, approve: &[String]) -> Vec<OsString> {
        let id = {
            let mut state = self.lock();
            let workspace = state
                .last
                .as_ref()
                .and_then(|(_, dir)| dir.parent().map(Path::to_path_buf));
            loop {
                state.flows += 1;
                let id = match state.flows {
                    1 => self.id.clone(),
                    n => format!("{}-{n}", self.id),
                };
                if !workspace.as_ref().is_some_and(|w| w.join(&id).exists()) {
                    break id;
                }
            }
        };
        let mut args: Vec<OsString> = vec!["run".into(), "--task-id".into(), id.into()];
        args.extend(approve_flags(approve));
        args.push("-".into());
        args
    }

    /// The session's last flow when it stopped before its end: interrupted or paused (the
    /// person chooses to resume it or start anew), or waiting for their approval (asked
    /// again).
    async fn stopped_flow(&self, agent: &Agent) -> Stopped {
        let Some((id, dir)) = self.lock().last.clone() else {
            return Stopped::None;
        };
        let Some(status) = TaskDir::at(dir.clone()).and_then(|t| state::load_status(&t).ok())
        else {
            return Stopped::None;
        };
        let shown = serde_json::to_value(status.state).unwrap_or_default();
        let state = shown.as_str().unwrap_or_default().to_string();
        if state == "waiting" {
            let approval = status.approval.as_ref().map(|a| {
                let kind = serde_json::to_value(a.kind).unwrap_or_default();
                json!({"subject": a.subject, "kind": kind})
            });
            return Stopped::Waiting(Box::new(Followed {
                code: 3,
                task: Some((id, dir)),
                approval,
                ..Followed::default()
            }));
        }
        if !matches!(state.as_str(), "interrupted" | "paused" | "running") {
            return Stopped::None;
        }
        let call = json!({"toolCallId": format!("resume-{id}"), "kind": "other",
            "status": "pending",
            "title": format!("Task {id} stopped before its end ({state}): resume it?")});
        let options = json!([
            {"optionId": "resume", "name": format!("Resume task {id}"), "kind": "allow_once"},
            {"optionId": "new", "name": "Start a new flow for this prompt", "kind": "reject_once"},
        ]);
        match agent.permission(&self.id, call, options).await.as_deref() {
            Some("resume") => Stopped::Resume(id),
            Some(_) => Stopped::None,
            None => Stopped::Unanswered,
        }
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
        let already = {
            let mut state = self.lock();
            state.running = pid;
            state.cancelled
        };
        // Cancelled while it started: it is interrupted at once, as a running one is.
        if let (true, Some(pid)) = (already, pid) {
            child_command::interrupt(pid);
        }
        // A prompt whose request is dropped (the connection ended) interrupts its flow.
        let mut guard = InterruptOnDrop(pid);
        let mut followed = Followed::default();
        let mut flow = Value::Null;
        let mut statuses: HashMap<String, &'static str> = HashMap::new();
        let mut task_id = String::new();
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
            if !followed.cancelled && self.is_cancelled() {
                followed.cancelled = true;
                if let Some(pid) = pid {
                    child_command::interrupt(pid);
                }
            }
            let event = as_json(line);
            match event["type"].as_str().unwrap_or_default() {
                "flow_started" | "flow_resumed" => {
                    let id = event["task_id"].as_str().unwrap_or_default().to_string();
                    task_id.clone_from(&id);
                    let dir = PathBuf::from(event["task_dir"].as_str().unwrap_or_default());
                    flow = read_flow(&dir);
                    // A resumed flow's steps that already succeeded show as done.
                    if let Some(status) =
                        TaskDir::at(dir.clone()).and_then(|t| state::load_status(&t).ok())
                    {
                        for step in status
                            .steps
                            .iter()
                            .filter(|s| s.status == StepState::Succeeded)
                        {
                            statuses.insert(step.id.clone(), "completed");
                        }
                    }
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
                        .update(&self.id, updates::step_started(&task_id, &step, &self.repo))
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
                    let result = followed
                        .task
                        .as_ref()
                        .and_then(|(_, dir)| step_result(dir, id));
                    let update = updates::step_finished(&task_id, &event, result.as_ref());
                    agent.conn.update(&self.id, update).await;
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
        drop(lines);
        let status = child.wait().await;
        guard.0 = None;
        self.lock().running = None;
        followed.cancelled |= self.is_cancelled();
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
                None => {
                    let text =
                        format!("Task {id} still waits for your answer; prompt again to be asked.");
                    agent.conn.update(&self.id, updates::message(&text)).await;
                    Next::Stop("cancelled")
                }
                Some(_) => {
                    let reject = ["reject", "--reason", "rejected in the editor", "--"];
                    let mut args: Vec<OsString> = reject.map(OsString::from).into();
                    args.push(id.clone().into());
                    let (_, said) = agent.run_to_end(&self.repo, args).await;
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
                .update(&self.id, updates::step_started(&id, &started, &self.repo))
                .await;
            let event = json!({"step": step.id, "status": shown,
                "message": step.message.clone().unwrap_or_default()});
            agent
                .conn
                .update(
                    &self.id,
                    updates::step_finished(&id, &event, step_result(&dir, &step.id).as_ref()),
                )
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

/// `--approve LIST` for a new flow.
fn approve_flags(approve: &[String]) -> Vec<OsString> {
    if approve.is_empty() {
        return Vec::new();
    }
    vec!["--approve".into(), approve.join(",").into()]
}

/// `resume ID`'s arguments.
fn resume_args(id: &str) -> Vec<OsString> {
    ["resume", "--", id].map(OsString::from).into()
}

/// A step's `result.json`, when it has one.
fn step_result(dir: &Path, step: &str) -> Option<Value> {
    let text = std::fs::read_to_string(dir.join(step).join("result.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// The task's flow as it runs now (a recovery's revision, once there is one), else its
/// `flow.json`, or null before there is one.
fn read_flow(dir: &Path) -> Value {
    let current = TaskDir::at(dir.to_path_buf()).and_then(|task| {
        let status = state::load_status(&task).ok()?;
        serde_json::to_value(state::load_flow_of(&task, &status).ok()?).ok()
    });
    current
        .or_else(|| {
            std::fs::read_to_string(dir.join(FLOW_FILE))
                .ok()
                .and_then(|text| serde_json::from_str(&text).ok())
        })
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
