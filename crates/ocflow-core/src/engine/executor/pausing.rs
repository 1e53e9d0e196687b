//! A flow paused by its budget: no step starts once a budget is spent, the calls in flight
//! finish (or are cancelled, for time), a step whose call the budget refused goes back to
//! pending, and when none runs the flow is saved `paused` with the budget that stopped it
//! (exit 3). `ocflow resume` with a higher limit continues there, spent so far carried over.
//! The `budget` events (50, 80 and 100 %) come from here too.

use super::{Executor, FlowOutcome, missing_step};
use crate::llm::budget::Budget;
use crate::llm::client::Llm;
use crate::task::events::Events;
use crate::task::state;
use crate::task::workspace::TaskDir;
use ocflow_model::budget::{BudgetExceeded, PauseReason};
use ocflow_model::error::{Error, Result};
use ocflow_model::event::Event;
use ocflow_model::flow::Step;
use ocflow_model::llm::LlmErrorKind;
use ocflow_model::status::{FlowState, FlowStatus, StepState};
use ocflow_model::step_result::StepResult;

/// What a step stopped by the budget says until it runs again.
const STOPPED: &str = "stopped by the budget before its model's answer; it runs again on resume";

impl Executor {
    /// The budget that stops the flow, once one does.
    pub(super) fn budget_exceeded(&self) -> Option<BudgetExceeded> {
        self.settings.budget.as_ref()?.exceeded()
    }

    /// Emits a `budget` event for every threshold reached since the last call.
    pub(super) fn announce_budget(&mut self) -> Result<()> {
        let Some(budget) = self.settings.budget.clone() else {
            return Ok(());
        };
        budget.check_time();
        announce_crossings(&budget, &mut self.events)
    }

    /// Whether a step's call was refused or cancelled by the budget: not the step's failure.
    pub(super) fn stopped_by_budget(result: &StepResult) -> bool {
        result
            .llm_error
            .as_ref()
            .and_then(|failure| failure.llm_error())
            .is_some_and(|error| error.kind == LlmErrorKind::BudgetExhausted)
    }

    /// A step whose call the budget refused: back to pending, to run again on resume (what it
    /// wrote is not kept: it never succeeded).
    pub(super) fn requeue_for_budget(&mut self, step: &Step) -> Result<()> {
        let entry = self
            .status
            .step_mut(&step.id)
            .ok_or_else(|| missing_step(&self.task, &step.id))?;
        entry.requeue(Some(STOPPED))?;
        self.save()
    }

    /// Whether the flow stopped for its budget rather than ended: something is left to run
    /// (a step or a recovery) and nothing failed for a reason of its own.
    pub(super) fn left_for_the_budget(&self) -> bool {
        let recovering = self
            .status
            .pending_recovery
            .as_ref()
            .map(|p| p.step.as_str());
        let mut left = recovering.is_some();
        for step in &self.flow.steps {
            match self.status.step(&step.id).map(|s| s.status) {
                Some(StepState::Succeeded | StepState::Skipped) => {}
                Some(StepState::Failed) if recovering != Some(step.id.as_str()) => return false,
                _ => left = true,
            }
        }
        left && self.status.message.is_none()
    }

    /// Saves the flow paused for `exceeded` and says so: exit 3, resumable.
    pub(super) fn pause(&mut self, exceeded: BudgetExceeded) -> Result<FlowOutcome> {
        let reason = PauseReason::Budget(exceeded);
        let message = format!("paused: {reason}; {}", reason.advice(&self.task.task_id));
        self.status.paused = Some(reason);
        self.status.message = Some(message.clone());
        self.status.move_to(FlowState::Paused)?;
        self.save()?;
        self.announce_budget()?;
        let pending = self
            .status
            .steps
            .iter()
            .filter(|s| s.status == StepState::Pending && self.flow.step(&s.id).is_some())
            .map(|s| s.id.clone())
            .collect();
        self.events.emit(Event::FlowPaused {
            task_id: self.task.task_id.clone(),
            reason,
            message,
            pending,
            budget: self.status.budget,
        })?;
        Ok(FlowOutcome::Paused)
    }
}

/// Emits a `budget` event for every threshold `budget` reached since it was last asked.
fn announce_crossings(budget: &Budget, events: &mut Events) -> Result<()> {
    for crossing in budget.take_crossings() {
        events.emit(Event::Budget {
            budget: crossing.budget,
            percent: crossing.percent,
            spent: crossing.spent,
            limit: crossing.limit,
            message: crossing.describe(),
        })?;
    }
    Ok(())
}

/// A flow whose planning the budget stopped (`engine::planning`): saved `paused` with no steps
/// (exit 3); `resume` with a higher limit plans it again, what planning spent carried over.
pub(crate) fn pause_planning(
    task: &TaskDir,
    mut status: FlowStatus,
    llm: &Llm,
    events: &mut Events,
) -> Result<()> {
    let Some(budget) = llm.budget() else {
        return Err(Error::internal(
            "planning was refused by a budget it does not have",
        ));
    };
    let Some(exceeded) = budget.exceeded() else {
        return Err(Error::internal(
            "planning was refused by a budget that is not spent",
        ));
    };
    let reason = PauseReason::Budget(exceeded);
    let message = format!(
        "paused while planning: {reason}; {}",
        reason.advice(&task.task_id)
    );
    status.move_to(FlowState::Paused)?;
    status.paused = Some(reason);
    status.message = Some(message.clone());
    status.budget = budget.usage();
    state::save_status(task, &mut status)?;
    announce_crossings(budget, events)?;
    events.emit(Event::FlowPaused {
        task_id: task.task_id.clone(),
        reason,
        message,
        pending: Vec::new(),
        budget: status.budget,
    })
}
