//! The executor before a risky recovery (`--approve risky`): a decision that replans or
//! replaces steps, or proposes a command the policy flags, is kept pending in the status while
//! the flow waits (state `waiting`) for a person; `ocflow approve` resumes the flow, which then
//! carries the saved decision out, and `ocflow reject` ends it.

use super::{Executor, Next};
use crate::flow::policy::CommandPolicy;
use ocflow_model::approval::{ApprovalKind, PendingApproval};
use ocflow_model::decision::{Decision, StrategyKind};
use ocflow_model::error::Result;
use ocflow_model::event::Event;
use ocflow_model::flow::Step;
use ocflow_model::status::{self, FlowState};

impl Executor {
    /// Why `decision` needs a person's yes under `policy` (the user's own, not the one the
    /// recovery model was held to), or `None` when it may be carried out at once.
    pub(super) fn needs_approval(decision: &Decision, policy: &CommandPolicy) -> Option<String> {
        let proposed: Vec<Step> = decision
            .step
            .iter()
            .chain(&decision.steps)
            .filter_map(|value| serde_json::from_value(value.clone()).ok())
            .collect();
        let flagged: Vec<String> = policy
            .flagged(&proposed)
            .into_iter()
            .map(|p| format!("step {}: {}", p.step.unwrap_or_default(), p.message))
            .collect();
        let changes_the_flow = matches!(
            decision.strategy,
            StrategyKind::Replan | StrategyKind::Alternative
        );
        if flagged.is_empty() && !changes_the_flow {
            return None;
        }
        let mut why = format!(
            "recovery proposes to {}: {}",
            decision.strategy, decision.reason
        );
        for flag in flagged {
            why.push_str(&format!("; {flag}"));
        }
        Some(why)
    }

    /// Marks the flow as waiting for a person's yes to the recovery of `failed` (saved with
    /// the pending decision by the caller).
    pub(super) fn mark_waiting(&mut self, failed: &str, why: &str) -> Result<()> {
        self.status.move_to(FlowState::Waiting)?;
        let id = &self.task.task_id;
        self.status.message = Some(format!(
            "waiting for approval of the recovery of step {failed}: `ocflow approve {id}` \
             carries it out, `ocflow reject {id}` ends the flow"
        ));
        self.status.approval = Some(PendingApproval {
            kind: ApprovalKind::Risky,
            subject: why.to_string(),
            step: Some(failed.to_string()),
            asked_at: status::now(),
            apply_after: false,
            approve_apply: false,
        });
        Ok(())
    }

    /// Says that the flow waits (`approval_needed`) and stops it here.
    pub(super) fn announce_waiting(&mut self, failed: &str, why: String) -> Result<Next> {
        let id = self.task.task_id.clone();
        self.events.emit(Event::ApprovalNeeded {
            task_id: id.clone(),
            kind: ApprovalKind::Risky,
            subject: why,
            step: Some(failed.to_string()),
            approve: format!("ocflow approve {id}"),
            reject: format!("ocflow reject {id} --reason TEXT"),
        })?;
        Ok(Next::Waiting)
    }
}
