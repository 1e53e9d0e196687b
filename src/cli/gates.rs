//! The questions a flow asks a person while it runs (issue 31 §2): the plan shown and answered
//! at a terminal (yes / no / edit in `$EDITOR`), the risky commands, the apply; headless, the
//! flow is saved as `waiting` (an `approval_needed` event, exit 3) for `ocflow approve` /
//! `ocflow reject` (`approval`), which answer through `answered`, `reject` and
//! `approved_in_resume` here.

use std::io::IsTerminal;

use crate::cli::config::Config;
use crate::cli::launch;
use crate::cli::live;
use ocflow_core::engine::signals::Interrupt;
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

/// Whether a person can answer here: a terminal on both sides, and no `--json` caller.
pub(crate) fn at_a_terminal(json: bool) -> bool {
    !json && std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// `--approve plan`: asks a person at the terminal (yes / no / edit), or saves the flow as
/// waiting for `ocflow approve`. `status` is the new flow's; it is replaced when the plan is
/// edited.
pub(crate) async fn plan_gate(
    config: &Config,
    task: &TaskDir,
    mut flow: Flow,
    status: &mut FlowStatus,
    events: &mut Events,
    interrupt: &Interrupt,
    apply_after: bool,
) -> Result<Gate> {
    if !config.approvals.plan {
        return Ok(Gate::Go(flow));
    }
    // With `--approve risky` too, the plan's one question names the flagged commands: its yes
    // approves them.
    let risky = |flow: &Flow| -> Vec<String> {
        if !config.approvals.risky {
            return Vec::new();
        }
        flagged_reasons(config, flow)
    };
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
    // Saved as waiting before anyone is asked: a run killed at the prompt is approved later.
    save_waiting(task, status, asked(&flow))?;
    if !at_a_terminal(config.json) {
        return announce(task, status, events);
    }
    for reason in risky(&flow) {
        say(&format!("ocflow: risky: {}", printable(&reason)));
    }
    loop {
        say("ocflow: run this plan? [y]es, [n]o, [e]dit the flow: ");
        let Some(line) = read_or_stop(interrupt.wait()).await? else {
            return Ok(Gate::Stop(ExitCode::Interrupted));
        };
        // End of input: nobody will answer here; the flow waits for `ocflow approve`.
        let Some(line) = line else {
            return announce(task, status, events);
        };
        match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => {
                approved_here(task, status, events, FlowState::Running)?;
                return Ok(Gate::Go(flow));
            }
            "n" | "no" => {
                reject(task, status, &flow, events, AnsweredBy::Terminal, None)?;
                return Ok(Gate::Stop(ExitCode::Failure));
            }
            "e" | "edit" => match edit(config, task, &flow) {
                Ok(edited) => {
                    flow = edited;
                    state::save_flow(task, &flow)?;
                    let by = AnsweredBy::Terminal;
                    answered(task, status, events, Answer::Edited, by, None)?;
                    *status = renewed(status, &flow);
                    save_waiting(task, status, asked(&flow))?;
                    live::show_plan(&flow, config.json);
                    for reason in risky(&flow) {
                        say(&format!("ocflow: risky: {}", printable(&reason)));
                    }
                }
                // Said with every problem; the person edits again or answers otherwise.
                Err(error) => say(&format!(
                    "ocflow: the edited flow is not valid, so the plan is unchanged:\n{}",
                    printable_lines(&error.to_string())
                )),
            },
            other => say(&format!(
                "ocflow: {:?} is not an answer: type y, n or e",
                printable(other)
            )),
        }
    }
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
    if !at_a_terminal(json) {
        announce_waiting(task, status, events)?;
        return Ok(Some(ExitCode::Paused));
    }
    loop {
        say(&format!(
            "ocflow: write the {changed} changed file(s) into the repository? [y]es, [n]o: "
        ));
        let Some(line) = read_or_stop(interrupted()).await? else {
            return Ok(Some(ExitCode::Interrupted));
        };
        let Some(line) = line else {
            announce_waiting(task, status, events)?;
            return Ok(Some(ExitCode::Paused));
        };
        match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => {
                approved_here(task, status, events, FlowState::Succeeded)?;
                return Ok(None);
            }
            "n" | "no" => {
                reject(task, status, flow, events, AnsweredBy::Terminal, None)?;
                say(&format!(
                    "ocflow: nothing was written; `ocflow apply {}` writes the changes later",
                    task.task_id
                ));
                return Ok(Some(ExitCode::Success));
            }
            other => say(&format!(
                "ocflow: {:?} is not an answer: type y or n",
                printable(other)
            )),
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

/// `--approve risky`: the steps whose commands the policy flags (destructive, the network)
/// are asked about before the flow runs, instead of refused. At a terminal a person says yes
/// or no; headless the flow waits (exit 3) for `ocflow approve`.
pub(crate) async fn risky_gate(
    config: &Config,
    task: &TaskDir,
    flow: Flow,
    status: &mut FlowStatus,
    events: &mut Events,
    interrupt: &Interrupt,
    apply_after: bool,
) -> Result<Gate> {
    if !config.approvals.risky {
        return Ok(Gate::Go(flow));
    }
    // A plan a person approves shows its flagged commands: that yes approved them.
    if config.approvals.plan {
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
        apply_after,
        approve_apply: config.approvals.apply,
    };
    save_waiting(task, status, pending)?;
    if !at_a_terminal(config.json) {
        return announce(task, status, events);
    }
    for reason in &reasons {
        say(&format!("ocflow: risky: {}", printable(reason)));
    }
    loop {
        say("ocflow: run these commands? [y]es, [n]o: ");
        let Some(line) = read_or_stop(interrupt.wait()).await? else {
            return Ok(Gate::Stop(ExitCode::Interrupted));
        };
        let Some(line) = line else {
            return announce(task, status, events);
        };
        match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => {
                approved_here(task, status, events, FlowState::Running)?;
                return Ok(Gate::Go(flow));
            }
            "n" | "no" => {
                reject(task, status, &flow, events, AnsweredBy::Terminal, None)?;
                return Ok(Gate::Stop(ExitCode::Failure));
            }
            other => say(&format!(
                "ocflow: {:?} is not an answer: type y or n",
                printable(other)
            )),
        }
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

/// A yes at the terminal: journaled, and the flow goes on as `then`.
fn approved_here(
    task: &TaskDir,
    status: &mut FlowStatus,
    events: &mut Events,
    then: FlowState,
) -> Result<()> {
    answered(
        task,
        status,
        events,
        Answer::Approved,
        AnsweredBy::Terminal,
        None,
    )?;
    status.move_to(then)?;
    status.message = None;
    state::save_status(task, status).map(drop)
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

/// Tells a headless caller what waits (an `approval_needed` event) and ends the command with
/// exit 3; the state was saved by [`save_waiting`].
fn announce(task: &TaskDir, status: &FlowStatus, events: &mut Events) -> Result<Gate> {
    announce_waiting(task, status, events)?;
    Ok(Gate::Stop(ExitCode::Paused))
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
    let (edited, _) = launch::read_flow(&path, Some(&flow.task), &config.rules, &config.roles)?;
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
    let summary_path = task.file(workspace::SUMMARY_FILE);
    let summary = ocflow_core::engine::summary::from_journal(task, status, flow)?;
    workspace::write_atomic(&summary_path, summary.as_bytes())?;
    events.emit(Event::FlowFinished {
        task_id: task.task_id.clone(),
        state: FlowState::Failed,
        reason: status.failure_reason(),
        changed_files: Vec::new(),
        diff: None,
        summary: summary_path,
        summary_text: summary,
        tokens: status.tokens,
        contradicted_claims: Vec::new(),
        final_answer: None,
        deliverables: Vec::new(),
        budget: Some(status.budget).filter(|b| !b.is_empty()),
    })
}

/// Continues a flow a person approved in `ocflow approve`: journals the answer and lets the
/// flow run (called by `resume` under the task's lock).
pub(crate) fn approved_in_resume(
    task: &TaskDir,
    status: &mut FlowStatus,
    events: &mut Events,
    by: AnsweredBy,
) -> Result<()> {
    answered(task, status, events, Answer::Approved, by, None)?;
    status.move_to(FlowState::Running)?;
    status.message = None;
    Ok(())
}
