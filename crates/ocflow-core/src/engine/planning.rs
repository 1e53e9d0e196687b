//! A flow's planning, as the engine runs it: the planner's call beside the progress heartbeat
//! and the interrupt (Ctrl-C or SIGTERM drops the request at once), and the three ways a flow
//! ends before it has a plan — failed or refused, paused by its budget, interrupted — each
//! recorded where the executor records its own (`executor::finishing`, `executor::pausing`,
//! `executor::stopping`), so that `ocflow resume` plans the task again.

use std::fs;
use std::path::Path;

use crate::engine::executor::FlowOutcome;
use crate::engine::executor::{finishing, pausing, stopping};
use crate::engine::signals::Interrupt;
use crate::llm::client::Llm;
use crate::llm::planner::{PlanError, Planner};
use crate::task::events::{Events, beating};
use crate::task::workspace::TaskDir;
use ocflow_model::error::Result;
use ocflow_model::flow::{FLOW_VERSION, Flow};
use ocflow_model::llm::LlmErrorKind;
use ocflow_model::status::FlowStatus;

/// Where the planner's raw answers are kept in a task directory.
pub const PLANNING_DIR: &str = "planning";

/// What planning gave.
pub enum Planned {
    /// A valid flow, what validation added to it (said once it runs), and how many answers
    /// the model gave for it.
    Flow {
        flow: Box<Flow>,
        notes: Vec<String>,
        answers: usize,
    },
    /// The flow ended before it had a plan, recorded in the task: failed (`callers_fault`
    /// when the configuration or the task is what to fix: a refused key, a wrong URL, a task
    /// the model refused), paused by the budget, or interrupted.
    Ended {
        outcome: FlowOutcome,
        callers_fault: bool,
    },
}

/// Plans `task_text` for the task `task` on `repo`, saying so with a heartbeat while the model
/// works; a flow that ends here is recorded with no steps.
pub async fn plan(
    planner: &Planner<'_>,
    task: &TaskDir,
    task_text: &str,
    repo: &Path,
    events: &mut Events,
    interrupt: &Interrupt,
) -> Result<Planned> {
    let llm = planner.llm;
    let answers_dir = task.root.join(PLANNING_DIR);
    let pulse = events.pulse();
    let planning = planner.plan(task_text, &answers_dir);
    let beat = || pulse.beat("planning", Vec::new(), llm.usage_for("planner"));
    let planned = tokio::select! {
        planned = beating(planning, beat) => planned,
        () = interrupt.wait() => {
            let status = spent(task, task_text, repo, llm);
            stopping::interrupt_planning(task, status, events)?;
            return Ok(ended(FlowOutcome::Interrupted, false));
        }
    };
    let error = match planned {
        Ok((flow, notes)) => {
            let answers = count_answers(&answers_dir);
            return Ok(Planned::Flow {
                flow: Box::new(flow),
                notes,
                answers,
            });
        }
        Err(error) => error,
    };
    let status = spent(task, task_text, repo, llm);
    if let PlanError::Llm(refused) = &error
        && refused.kind == LlmErrorKind::BudgetExhausted
    {
        pausing::pause_planning(task, status, llm, events)?;
        return Ok(ended(FlowOutcome::Paused, false));
    }
    let callers_fault = is_callers_fault(&error);
    finishing::fail_planning(
        task,
        status,
        &no_steps(task_text),
        events,
        &error,
        callers_fault,
    )?;
    Ok(ended(FlowOutcome::Failed, callers_fault))
}

fn ended(outcome: FlowOutcome, callers_fault: bool) -> Planned {
    Planned::Ended {
        outcome,
        callers_fault,
    }
}

/// The status of a flow stopped while planning: no steps, what the planner spent.
fn spent(task: &TaskDir, task_text: &str, repo: &Path, llm: &Llm) -> FlowStatus {
    let mut status = FlowStatus::new(&task.task_id, &no_steps(task_text), repo);
    status.count_tokens(&llm.profile_for("planner"), &llm.usage_for("planner"));
    status
}

/// The flow of a task before (or without) a plan.
pub fn no_steps(task_text: &str) -> Flow {
    Flow {
        version: FLOW_VERSION,
        task: task_text.to_string(),
        steps: Vec::new(),
        deliverables: None,
    }
}

/// Whether a planning failure is the caller's to fix: the configuration (key, URL, model,
/// quota), or a task the model refused.
pub fn is_callers_fault(error: &PlanError) -> bool {
    use LlmErrorKind::*;
    matches!(
        error,
        PlanError::Refused { .. } | PlanError::Unchecked { .. }
    ) || matches!(error, PlanError::Llm(e)
            if matches!(e.kind, Unauthorized | NotFound | Redirected | QuotaExceeded))
}

/// How many answers the model gave (the planner keeps each as `plan-answer-N.md`).
fn count_answers(dir: &Path) -> usize {
    fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.starts_with("plan-answer-") && name.ends_with(".md")
            })
            .count()
    })
}
