//! The questions a flow asks a person while it runs (issue 31 §2): the plan shown and answered
//! at a terminal (yes / no / edit in `$EDITOR`), the risky commands, the apply; headless, the
//! flow is saved as `waiting` (an `approval_needed` event, exit 3) for `ocflow approve` /
//! `ocflow reject` (`approval`), which answer through `answered`, `reject` and
//! `approved_in_resume` here.

use std::io::IsTerminal;

use crate::cli::config::Config;
use crate::cli::launch;
use crate::cli::live;
use ocflow_core::flow::deliverables::Order;
use ocflow_core::task::events::Events;
use ocflow_core::task::state;
use ocflow_core::task::workspace::{self, TaskDir};
use ocflow_model::approval::{Answer, AnsweredBy, ApprovalKind, PendingApproval};
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::event::Event;
use ocflow_model::exit::ExitCode;
use ocflow_model::flow::Flow;
use ocflow_model::output::{printable, printable_lines, say};
use ocflow_model::status::{FlowState, FlowStatus, now};

/// Where the flow is written for the person to edit (`e` at the plan's prompt).
const EDITED_FLOW_FILE: &str = "flow.edit.json";

/// What the plan's approval decided.
pub(crate) enum Gate {
    /// Run this flow (the plan as planned, or as the person edited it).
    Go(Flow),
    /// Stop here with this exit code: rejected (1), waiting for `ocflow approve` (3), or
    /// interrupted at the prompt (130).
    Stop(ExitCode),
}

/// A reply to one of a flow's questions.
pub(crate) enum Reply {
    Yes,
    /// No, with the person's reason when they gave one.
    No(Option<String>),
    /// Edit the flow (offered for the plan only).
    Edit,
    /// Nobody answers here: the flow waits, saved, for `ocflow approve` or `ocflow reject`.
    Later,
    /// Ctrl-C or SIGTERM came first.
    Interrupted,
}

/// A question a flow asks: what it says, the lines said before it, and whether the flow may
/// be edited instead.
pub(crate) struct Question {
    prompt: String,
    details: Vec<String>,
    edit: bool,
}

/// Who answers a flow's questions: a person at this terminal ([`Terminal`]); headless, nobody
/// now ([`Later`]: the flow waits); or `ocflow approve` / `ocflow reject`, which MCP's
/// approve and reject tools run, answering the question a waiting flow saved ([`Given`]).
/// Every reply is settled the same way ([`settle`]).
pub(crate) trait Answerer {
    /// Who replies, as the journal records it.
    fn by(&self) -> AnsweredBy;
    /// The reply to `question`.
    fn reply<'a>(&'a mut self, question: &'a Question) -> BoxFuture<'a, Result<Reply>>;
}

type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// A person at the terminal: each question asked until it gets an answer.
pub(crate) struct Terminal;

impl Answerer for Terminal {
    fn by(&self) -> AnsweredBy {
        AnsweredBy::Terminal
    }

    fn reply<'a>(&'a mut self, question: &'a Question) -> BoxFuture<'a, Result<Reply>> {
        Box::pin(async move {
            for line in &question.details {
                say(&format!("ocflow: {}", printable(line)));
            }
            let choices = if question.edit {
                "[y]es, [n]o, [e]dit the flow"
            } else {
                "[y]es, [n]o"
            };
            loop {
                say(&format!("ocflow: {}? {choices}: ", question.prompt));
                let Some(line) = read_or_stop(interrupted()).await? else {
                    return Ok(Reply::Interrupted);
                };
                // End of input: nobody will answer here; the flow waits for `ocflow approve`.
                let Some(line) = line else {
                    return Ok(Reply::Later);
                };
                match line.trim().to_ascii_lowercase().as_str() {
                    "y" | "yes" => return Ok(Reply::Yes),
                    "n" | "no" => return Ok(Reply::No(None)),
                    "e" | "edit" if question.edit => return Ok(Reply::Edit),
                    other => say(&format!(
                        "ocflow: {:?} is not an answer: type {}",
                        printable(other),
                        if question.edit { "y, n or e" } else { "y or n" }
                    )),
                }
            }
        })
    }
}

/// Headless: nobody answers now; the flow waits for `ocflow approve` or `ocflow reject`.
pub(crate) struct Later;

impl Answerer for Later {
    fn by(&self) -> AnsweredBy {
        AnsweredBy::Command
    }

    fn reply<'a>(&'a mut self, _: &'a Question) -> BoxFuture<'a, Result<Reply>> {
        Box::pin(async { Ok(Reply::Later) })
    }
}

/// The reply `ocflow approve` or `ocflow reject` gives (`by` MCP when its tools ran them).
pub(crate) struct Given {
    pub(crate) reply: Option<Reply>,
    pub(crate) by: AnsweredBy,
}

impl Answerer for Given {
    fn by(&self) -> AnsweredBy {
        self.by
    }

    fn reply<'a>(&'a mut self, _: &'a Question) -> BoxFuture<'a, Result<Reply>> {
        Box::pin(async { Ok(self.reply.take().unwrap_or(Reply::Later)) })
    }
}

/// Who answers here: the person at the terminal, or, headless or with `--json`, nobody now.
fn person(json: bool) -> Box<dyn Answerer + Send> {
    if at_a_terminal(json) {
        Box::new(Terminal)
    } else {
        Box::new(Later)
    }
}

/// Whether a person can answer here: a terminal on both sides, and no `--json` caller.
pub(crate) fn at_a_terminal(json: bool) -> bool {
    !json && std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// The questions asked before a flow runs: its plan (`--approve plan`), then its risky
/// commands (`--approve risky`).
pub(crate) async fn before_running(
    config: &Config,
    task: &TaskDir,
    flow: Flow,
    status: &mut FlowStatus,
    events: &mut Events,
    apply_after: bool,
) -> Result<Gate> {
    let mut asking = Asking {
        config,
        task,
        status,
        events,
        person: person(config.json),
        apply_after,
    };
    match asking.plan(flow).await? {
        Gate::Go(flow) => asking.risky(flow).await,
        stop => Ok(stop),
    }
}

/// What the questions before a flow runs share: the new flow's task and status (replaced when
/// the plan is edited), who answers, and whether the run applies at its end.
struct Asking<'a> {
    config: &'a Config,
    task: &'a TaskDir,
    status: &'a mut FlowStatus,
    events: &'a mut Events,
    person: Box<dyn Answerer + Send>,
    apply_after: bool,
}

impl Asking<'_> {
    /// `--approve plan`: asks whoever answers (yes / no / edit at a terminal), the flow saved
    /// as waiting first, so that a run killed at the prompt is approved later.
    async fn plan(&mut self, mut flow: Flow) -> Result<Gate> {
        let (config, task) = (self.config, self.task);
        if !config.approvals.plan {
            return Ok(Gate::Go(flow));
        }
        // With `--approve risky` too, the plan's one question names the flagged commands: its
        // yes approves them.
        let risky = |flow: &Flow| -> Vec<String> {
            if !config.approvals.risky {
                return Vec::new();
            }
            flagged_reasons(config, flow)
        };
        let apply_after = self.apply_after;
        let asked = |flow: &Flow| PendingApproval {
            kind: ApprovalKind::Plan,
            subject: [plan_subject(flow)]
                .into_iter()
                .chain(risky(flow).into_iter().map(|r| format!("risky: {r}")))
                .collect::<Vec<_>>()
                .join("; "),
            step: None,
            asked_at: now(),
            apply_after,
            approve_apply: config.approvals.apply,
        };
        save_waiting(task, self.status, asked(&flow))?;
        loop {
            let question = Question {
                prompt: "run this plan".into(),
                details: risky(&flow)
                    .into_iter()
                    .map(|r| format!("risky: {r}"))
                    .collect(),
                edit: true,
            };
            let reply = self.person.reply(&question).await?;
            let by = self.person.by();
            if !matches!(reply, Reply::Edit) {
                return decided(task, self.status, flow, self.events, reply, by);
            }
            match edit(config, task, &flow) {
                Ok(edited) => {
                    flow = edited;
                    state::save_flow(task, &flow)?;
                    answered(task, self.status, self.events, Answer::Edited, by, None)?;
                    *self.status = renewed(self.status, &flow);
                    save_waiting(task, self.status, asked(&flow))?;
                    live::show_plan(&flow, config.json);
                }
                // Said with every problem; the person edits again or answers otherwise.
                Err(error) => say(&format!(
                    "ocflow: the edited flow is not valid, so the plan is unchanged:\n{}",
                    printable_lines(&error.to_string())
                )),
            }
        }
    }

    /// `--approve risky`: the steps whose commands the policy flags (destructive, the network)
    /// are asked about before the flow runs, instead of refused: yes or no at a terminal;
    /// headless the flow waits (exit 3) for `ocflow approve`.
    async fn risky(&mut self, flow: Flow) -> Result<Gate> {
        let config = self.config;
        // A plan a person approves shows its flagged commands: that yes approved them.
        if !config.approvals.risky || config.approvals.plan {
            return Ok(Gate::Go(flow));
        }
        let flagged = config.policy.flagged(&flow.steps);
        let Some(first) = flagged.first() else {
            return Ok(Gate::Go(flow));
        };
        let reasons = flagged_reasons(config, &flow);
        let pending = PendingApproval {
            kind: ApprovalKind::Risky,
            subject: reasons.join("; "),
            step: first.step.clone(),
            asked_at: now(),
            apply_after: self.apply_after,
            approve_apply: config.approvals.apply,
        };
        save_waiting(self.task, self.status, pending)?;
        let question = Question {
            prompt: "run these commands".into(),
            details: reasons.iter().map(|r| format!("risky: {r}")).collect(),
            edit: false,
        };
        let reply = self.person.reply(&question).await?;
        let by = self.person.by();
        decided(self.task, self.status, flow, self.events, reply, by)
    }
}

/// What a reply to a question before the flow runs decides: a yes runs `flow`, a no ends it
/// failed, nobody answering leaves it waiting (exit 3).
fn decided(
    task: &TaskDir,
    status: &mut FlowStatus,
    flow: Flow,
    events: &mut Events,
    reply: Reply,
    by: AnsweredBy,
) -> Result<Gate> {
    match reply {
        Reply::Yes => {
            settle(task, status, &flow, events, Reply::Yes, by)?;
            Ok(Gate::Go(flow))
        }
        Reply::No(reason) => {
            settle(task, status, &flow, events, Reply::No(reason), by)?;
            Ok(Gate::Stop(ExitCode::Failure))
        }
        Reply::Interrupted => Ok(Gate::Stop(ExitCode::Interrupted)),
        Reply::Later | Reply::Edit => {
            announce_waiting(task, status, events)?;
            Ok(Gate::Stop(ExitCode::Paused))
        }
    }
}

/// Settles the question a flow waits for with `reply`, journaled as `by`'s: a yes lets the
/// flow go on (a plan or risky commands run; an apply is written, the flow succeeded); a no
/// ends it ([`reject`]). The status is saved; nothing else is done.
pub(crate) fn settle(
    task: &TaskDir,
    status: &mut FlowStatus,
    flow: &Flow,
    events: &mut Events,
    reply: Reply,
    by: AnsweredBy,
) -> Result<()> {
    match reply {
        Reply::Yes => {
            let kind = status.approval.as_ref().map(|p| p.kind);
            answered(task, status, events, Answer::Approved, by, None)?;
            status.move_to(match kind {
                Some(ApprovalKind::Apply) => FlowState::Succeeded,
                _ => FlowState::Running,
            })?;
            status.message = None;
            state::save_status(task, status).map(drop)
        }
        Reply::No(reason) => reject(task, status, flow, events, by, reason),
        Reply::Edit | Reply::Later | Reply::Interrupted => Ok(()),
    }
}

/// Answers the question a flow saved as waiting with `answerer`'s reply: `ocflow approve` and
/// `ocflow reject` (which MCP's tools run) give theirs ([`Given`]), settled as a terminal's is.
/// Called under the task's lock.
pub(crate) async fn answer_waiting(
    task: &TaskDir,
    status: &mut FlowStatus,
    flow: &Flow,
    events: &mut Events,
    answerer: &mut (dyn Answerer + Send),
) -> Result<()> {
    let Some(pending) = &status.approval else {
        return Err(Error::Usage(format!(
            "task {} is not waiting for an approval",
            task.task_id
        )));
    };
    let question = Question {
        prompt: pending.subject.clone(),
        details: Vec::new(),
        edit: false,
    };
    let reply = answerer.reply(&question).await?;
    settle(task, status, flow, events, reply, answerer.by())
}

/// `--approve apply`: whether a succeeded flow's `changed` files may be written now (`None`:
/// go on and apply). At a terminal a person says yes or no (no leaves the flow succeeded, its
/// changes unwritten); headless the flow waits (exit 3) for `ocflow approve`, which applies.
pub(crate) async fn apply_gate(
    task: &TaskDir,
    status: &mut FlowStatus,
    flow: &Flow,
    events: &mut Events,
    changed: usize,
    json: bool,
) -> Result<Option<ExitCode>> {
    let pending = PendingApproval {
        kind: ApprovalKind::Apply,
        subject: format!(
            "write the {changed} changed file(s) into the repository (`ocflow diff {}` shows \
             them)",
            task.task_id
        ),
        step: None,
        asked_at: now(),
        apply_after: true,
        approve_apply: true,
    };
    save_waiting(task, status, pending)?;
    let question = Question {
        prompt: format!("write the {changed} changed file(s) into the repository"),
        details: Vec::new(),
        edit: false,
    };
    let mut person = person(json);
    match person.reply(&question).await? {
        Reply::Yes => {
            settle(task, status, flow, events, Reply::Yes, person.by())?;
            Ok(None)
        }
        Reply::No(reason) => {
            settle(task, status, flow, events, Reply::No(reason), person.by())?;
            say(&format!(
                "ocflow: nothing was written; `ocflow apply {}` writes the changes later",
                task.task_id
            ));
            Ok(Some(ExitCode::Success))
        }
        Reply::Interrupted => Ok(Some(ExitCode::Interrupted)),
        Reply::Later | Reply::Edit => {
            announce_waiting(task, status, events)?;
            Ok(Some(ExitCode::Paused))
        }
    }
}

/// Resolves once Ctrl-C or SIGTERM asked ocflow to stop (the flag the flow's signal handler
/// raises), checked ten times a second.
async fn interrupted() {
    while !ocflow_core::task::interrupt::raised() {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Why each step the policy flags is flagged, in words.
fn flagged_reasons(config: &Config, flow: &Flow) -> Vec<String> {
    config
        .policy
        .flagged(&flow.steps)
        .iter()
        .map(|p| format!("step {}: {}", p.step.as_deref().unwrap_or("?"), p.message))
        .collect()
}

/// Reads one answer from the terminal: the line (`None` at the end of input, when nobody will
/// answer here), or `None` when `interrupted` comes first.
async fn read_or_stop(
    interrupted: impl std::future::Future<Output = ()>,
) -> Result<Option<Option<String>>> {
    tokio::select! {
        line = tokio::task::spawn_blocking(read_answer) => line
            .map(Some)
            .map_err(|err| Error::internal(format!("reading the answer: {err}"))),
        () = interrupted => Ok(None),
    }
}

/// One line from stdin; `None` at the end of input.
fn read_answer() -> Option<String> {
    let mut line = String::new();
    match std::io::stdin().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line),
    }
}

/// The plan in a line, as an `approval_needed` event and the status say it; the first
/// [`SUBJECT_STEPS`] steps are named (a long flow is read in its `flow.json`).
fn plan_subject(flow: &Flow) -> String {
    let mut steps: Vec<String> = flow
        .steps
        .iter()
        .take(SUBJECT_STEPS)
        .map(|s| format!("{} {}", s.id, s.operation))
        .collect();
    if flow.steps.len() > SUBJECT_STEPS {
        steps.push(format!("… {} more", flow.steps.len() - SUBJECT_STEPS));
    }
    format!(
        "the plan of {} step(s): {}",
        flow.steps.len(),
        steps.join(", ")
    )
}

/// How many steps an approval's subject names.
const SUBJECT_STEPS: usize = 20;

/// Saves the flow as waiting for `pending`.
fn save_waiting(task: &TaskDir, status: &mut FlowStatus, pending: PendingApproval) -> Result<()> {
    status.move_to(FlowState::Waiting)?;
    status.message = Some(format!(
        "waiting for approval of {}: `ocflow approve {1}` goes on, `ocflow reject {1}` \
         ends it",
        pending.kind.what(),
        task.task_id
    ));
    status.approval = Some(pending);
    state::save_status(task, status).map(drop)
}

/// Emits the `approval_needed` event of a flow saved as waiting.
fn announce_waiting(task: &TaskDir, status: &FlowStatus, events: &mut Events) -> Result<()> {
    let pending = status
        .approval
        .clone()
        .ok_or_else(|| Error::internal("a waiting flow without its approval"))?;
    events.emit(Event::ApprovalNeeded {
        task_id: task.task_id.clone(),
        kind: pending.kind,
        subject: pending.subject,
        step: pending.step,
        approve: format!("ocflow approve {}", task.task_id),
        reject: format!("ocflow reject {} --reason TEXT", task.task_id),
    })
}

/// Journals a person's answer and clears the question from the status (not yet saved).
pub(crate) fn answered(
    task: &TaskDir,
    status: &mut FlowStatus,
    events: &mut Events,
    answer: Answer,
    by: AnsweredBy,
    reason: Option<String>,
) -> Result<()> {
    let Some(pending) = status.approval.take() else {
        return Err(Error::Usage(format!(
            "task {} is not waiting for an approval",
            task.task_id
        )));
    };
    events.emit(Event::ApprovalAnswered {
        kind: pending.kind,
        answer,
        by,
        step: pending.step,
        reason,
    })
}

/// A new status for an edited flow: every step pending, what was spent kept.
fn renewed(old: &FlowStatus, flow: &Flow) -> FlowStatus {
    let mut fresh = FlowStatus::new(&old.task_id, flow, &old.repo);
    fresh.created_at = old.created_at.clone();
    fresh.tokens = old.tokens;
    fresh.tokens_by_profile = old.tokens_by_profile.clone();
    fresh.sandbox = old.sandbox.clone();
    fresh.budget = old.budget;
    fresh.memories_used.clone_from(&old.memories_used);
    fresh.instructions_used.clone_from(&old.instructions_used);
    fresh
}

/// Opens the flow in `$VISUAL` or `$EDITOR` and validates what the person saved, as a flow
/// given with `--plan` is validated.
fn edit(config: &Config, task: &TaskDir, flow: &Flow) -> Result<Flow> {
    let editor = std::env::var("VISUAL")
        .ok()
        .or_else(|| std::env::var("EDITOR").ok())
        .filter(|e| !e.trim().is_empty())
        .ok_or_else(|| {
            Error::Usage(
                "no editor: set EDITOR (e.g. `export EDITOR=nano`) to edit the plan".into(),
            )
        })?;
    let path = task.root.join(EDITED_FLOW_FILE);
    let text = serde_json::to_string_pretty(flow)
        .map_err(|err| Error::internal(format!("writing the flow to edit: {err}")))?;
    workspace::write_atomic(&path, (text + "\n").as_bytes())?;
    // Through the shell, as git runs it: EDITOR may carry options (`code --wait`).
    let ran = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(&path)
        .status()
        .io_context(|| format!("starting the editor {editor:?}"))?;
    if !ran.success() {
        return Err(Error::Usage(format!(
            "the editor {editor:?} exited with {ran}; the plan is unchanged"
        )));
    }
    let (edited, _) = launch::read_flow(
        &path,
        Some(&flow.task),
        &config.rules,
        &config.roles,
        Order::AsWritten,
    )?;
    Ok(edited)
}

/// Ends a waiting flow on a person's no: a plan or a risky step fails the flow, with the
/// reason; a rejected apply leaves the flow succeeded and its changes unwritten.
pub(crate) fn reject(
    task: &TaskDir,
    status: &mut FlowStatus,
    flow: &Flow,
    events: &mut Events,
    by: AnsweredBy,
    reason: Option<String>,
) -> Result<()> {
    let kind = status.approval.as_ref().map(|p| p.kind);
    answered(task, status, events, Answer::Rejected, by, reason.clone())?;
    let why = reason.map(|r| format!(": {r}")).unwrap_or_default();
    if kind == Some(ApprovalKind::Apply) {
        status.move_to(FlowState::Succeeded)?;
        status.message = Some(format!("the apply was rejected{why}; nothing was written"));
        return state::save_status(task, status).map(drop);
    }
    // A recovery decision waiting for this answer is never carried out.
    status.pending_recovery = None;
    status.move_to(FlowState::Failed)?;
    status.message = Some(format!(
        "rejected at the approval of {}{why}",
        kind.unwrap_or(ApprovalKind::Plan).what()
    ));
    status.finished_at = Some(now());
    state::save_status(task, status)?;
    ocflow_core::engine::executor::finishing::end_unrun(task, status, flow, events)
}
