//! The user's hooks at a flow's points (`engine::hooks`): the event each is given, and what a
//! hook that blocks does — a step fails with its reason, a flow's end is only said — always
//! journaled as `hook_blocked`.

use serde_json::{Value, json};

use super::Executor;
use crate::engine::hooks::{Blocked, HookPoint};
use crate::flow::operations;
use ocflow_model::event::Event;
use ocflow_model::flow::Step;

impl Executor {
    /// The `before_step` hooks, then `before_command` for a step that runs a command.
    pub(super) fn hooks_before(&mut self, step: &Step) -> Result<(), Blocked> {
        let runs_command = operations::find(&step.operation).is_some_and(|op| op.runs_commands);
        let mut points = vec![HookPoint::BeforeStep];
        if runs_command {
            points.push(HookPoint::BeforeCommand);
        }
        for point in points {
            if !self.settings.hooks.at(point) {
                continue;
            }
            let mut event = self.step_event(step);
            if point == HookPoint::BeforeCommand {
                event["command"] = step.params.get("command").cloned().unwrap_or(Value::Null);
            }
            self.ran(point, Some(&step.id), &event)?;
        }
        Ok(())
    }

    /// The `after_step` hooks of a step that succeeded, told its message and files.
    pub(super) fn hooks_after(
        &mut self,
        step: &Step,
        message: &str,
        files: &[String],
    ) -> Result<(), Blocked> {
        if !self.settings.hooks.at(HookPoint::AfterStep) {
            return Ok(());
        }
        let mut event = self.step_event(step);
        event["message"] = json!(message);
        event["output_files"] = json!(files);
        self.ran(HookPoint::AfterStep, Some(&step.id), &event)
    }

    /// The `flow_end` hooks: the flow has ended whatever they say.
    pub(super) fn hooks_at_end(&mut self, state: &str, changed: &[String]) {
        if !self.settings.hooks.at(HookPoint::FlowEnd) {
            return;
        }
        let event = json!({
            "task_id": self.task.task_id,
            "task": self.flow.task,
            "state": state,
            "message": self.status.message,
            "changed_files": changed,
        });
        if let Err(blocked) = self.ran(HookPoint::FlowEnd, None, &event) {
            ocflow_model::output::say(&format!("ocflow: at the flow's end, {blocked}"));
        }
    }

    /// The `before_apply` hooks of `run --apply`, told the files about to be written.
    pub fn hooks_before_apply(&mut self, files: &[String]) -> Result<(), Blocked> {
        if !self.settings.hooks.at(HookPoint::BeforeApply) {
            return Ok(());
        }
        let event = json!({
            "task_id": self.task.task_id,
            "task": self.flow.task,
            "files": files,
            "branch": null,
        });
        self.ran(HookPoint::BeforeApply, None, &event)
    }

    fn step_event(&self, step: &Step) -> Value {
        json!({
            "task_id": self.task.task_id,
            "task": self.flow.task,
            "step": step.id,
            "operation": step.operation,
            "role": step.role,
            "params": step.params,
        })
    }

    /// Runs the hooks of `point`; one that blocks is journaled.
    fn ran(&mut self, point: HookPoint, step: Option<&str>, event: &Value) -> Result<(), Blocked> {
        let outcome = self.settings.hooks.run(point, event);
        if let Err(blocked) = &outcome {
            let _ = self.events.emit(Event::HookBlocked {
                point: point.name().into(),
                command: blocked.command.clone(),
                reason: blocked.reason.clone(),
                step: step.map(str::to_string),
            });
        }
        outcome
    }
}
