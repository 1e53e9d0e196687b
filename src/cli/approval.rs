//! `ocflow approve` / `ocflow reject` (and MCP's `ocflow_approve`): a person's answer to a flow
//! waiting for one (`gates`). A plan or a risky step approved runs on as `resume` runs it; an
//! apply approved is written; a no ends the flow.

use crate::cli::apply;
use crate::cli::args::{ApplyArgs, ApproveArgs, LimitArgs, RejectArgs, ResumeArgs};
use crate::cli::config::Config;
use crate::cli::gates::{Given, Reply, answer_waiting};
use crate::cli::progress::Progress;
use crate::cli::resume;
use crate::cli::tasks::find_task;
use ocflow_core::task::events::Events;
use ocflow_core::task::journal::Journal;
use ocflow_core::task::state;
use ocflow_core::task::workspace::{self, TaskDir};
use ocflow_model::approval::{AnsweredBy, ApprovalKind, PendingApproval};
use ocflow_model::error::{Error, Result};
use ocflow_model::exit::ExitCode;
use ocflow_model::output::say;
use ocflow_model::status::{FlowState, FlowStatus};

/// The waiting flow `id` names, with its question; a clear error when it waits for nothing.
fn waiting_task(config: &Config, id: &str) -> Result<(TaskDir, FlowStatus, PendingApproval)> {
    let task = find_task(config, Some(id), false)?;
    let status = state::load_status(&task)?;
    match (&status.state, status.approval.clone()) {
        (FlowState::Waiting, Some(pending)) => Ok((task, status, pending)),
        (state, _) => Err(Error::Usage(format!(
            "task {} is {state}, not waiting for an approval; `ocflow status {0}` says where \
             it stands",
            task.task_id
        ))),
    }
}

fn answered_by(via_mcp: bool) -> AnsweredBy {
    if via_mcp {
        AnsweredBy::Mcp
    } else {
        AnsweredBy::Command
    }
}

fn events_of(config: &Config, task: &TaskDir) -> Result<Events> {
    Ok(Events::new(
        Journal::open(&task.file(workspace::JOURNAL_FILE))?,
        Progress::plain(config.json),
    ))
}

/// `ocflow approve ID` (and MCP's `ocflow_approve`): a waiting plan or risky step runs on, as
/// `resume` runs it; a waiting apply is written.
pub(crate) async fn approve(config: &Config, args: ApproveArgs) -> Result<ExitCode> {
    let by = answered_by(args.via_mcp);
    let (task, _, pending) = waiting_task(config, &args.task)?;
    if pending.kind != ApprovalKind::Apply {
        let resume_args = ResumeArgs {
            task: Some(task.root.to_string_lossy().into_owned()),
            retry_failed: false,
            recover: false,
            apply: pending.apply_after,
            limits: LimitArgs::default(),
        };
        // The run's own `--approve apply` still holds for the apply at its end.
        let mut config = config.clone();
        config.approvals.apply |= pending.approve_apply;
        return resume::continue_flow(&config, resume_args, Some(by)).await;
    }
    {
        let _lock = task.lock()?;
        // Read again under the lock: another answer may have come first.
        let mut status = waiting_task(config, &args.task)?.1;
        let flow = state::load_flow_of(&task, &status)?;
        let mut events = events_of(config, &task)?;
        let mut given = Given {
            reply: Some(Reply::Yes),
            by,
        };
        answer_waiting(&task, &mut status, &flow, &mut events, &mut given).await?;
    }
    apply::apply(
        config,
        ApplyArgs {
            task: Some(task.root.to_string_lossy().into_owned()),
            force: false,
            only: Vec::new(),
            exclude: Vec::new(),
            commit: false,
            branch: None,
        },
    )
}

/// `ocflow reject ID [--reason TEXT]`: the waiting flow ends (an apply is not written).
pub(crate) async fn reject(config: &Config, args: RejectArgs) -> Result<ExitCode> {
    let (task, _, _) = waiting_task(config, &args.task)?;
    let _lock = task.lock()?;
    // Read again under the lock: another answer may have come first.
    let (_, mut status, _) = waiting_task(config, &args.task)?;
    let flow = state::load_flow_of(&task, &status)?;
    let mut events = events_of(config, &task)?;
    let mut given = Given {
        reply: Some(Reply::No(args.reason)),
        by: answered_by(args.via_mcp),
    };
    answer_waiting(&task, &mut status, &flow, &mut events, &mut given).await?;
    say(&format!(
        "ocflow: task {}: {}",
        task.task_id,
        status.message.as_deref().unwrap_or("rejected")
    ));
    Ok(ExitCode::Success)
}
