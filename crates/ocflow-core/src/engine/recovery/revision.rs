//! Applying a recovery decision to the flow: the answer's steps read into typed steps once,
//! then inserted (`alternative`, `replan`), replaced (`modify`), rewired and renumbered, new
//! steps placed after the finished ones, and the revised flow validated whole.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::engine::recovery::context::Context;
use crate::flow::validate;
use ocflow_model::decision::{Decision, StrategyKind};
use ocflow_model::flow::{FLOW_VERSION, Flow, Step};
use ocflow_model::status::{FlowStatus, StepState};

/// The flow after a decision, fully validated, and what ocflow changed in the proposed steps;
/// `None` when the flow itself does not change. The answer's steps are read into typed steps
/// once, here, with the problems a flow's steps would have; the flow is edited typed, then
/// validated whole.
pub(super) fn implied_flow(
    context: &Context<'_>,
    failed: &str,
    decision: &Decision,
) -> Result<(Option<Flow>, Vec<String>), Vec<String>> {
    let flow = context.flow;
    let mut notes = Vec::new();
    let strings = |problems: Vec<ocflow_model::problem::Problem>| -> Vec<String> {
        problems.iter().map(|p| p.to_string()).collect()
    };
    // The answer's new steps, read as the steps they become: `first_index` is where the first
    // of them stands in the revised flow. A new step that reuses an id of the flow gets a fresh
    // one (`fix_again_2`), and the new steps' references to it follow: small models reuse ids,
    // and refusing cost good fixes.
    let mut new_steps = |values: &[Value], first_index: usize| -> Result<Vec<Step>, Vec<String>> {
        if values.is_empty() {
            return Err(vec![format!(
                "`{}` needs `steps`: the new steps",
                decision.strategy
            )]);
        }
        let mut added = validate::read_steps(values.to_vec(), first_index).map_err(strings)?;
        let mut taken: BTreeSet<String> = context
            .status
            .steps
            .iter()
            .map(|s| s.id.clone())
            .chain(flow.steps.iter().map(|s| s.id.clone()))
            .collect();
        let mut renamed: Vec<(String, String)> = Vec::new();
        for step in &mut added {
            let id = step.id.clone();
            if taken.insert(id.clone()) {
                continue;
            }
            let fresh = (2..)
                .map(|n| format!("{id}_{n}"))
                .find(|candidate| !taken.contains(candidate))
                .unwrap_or_default();
            taken.insert(fresh.clone());
            step.id = fresh.clone();
            notes.push(format!(
                "recovery proposed a new step with the id `{id}`, which the flow already uses; \
                 it runs as `{fresh}`"
            ));
            renamed.push((id, fresh));
        }
        for step in &mut added {
            for (old, fresh) in &renamed {
                renumber(step, old, fresh);
            }
        }
        Ok(added)
    };
    let mut steps: Vec<Step> = flow.steps.clone();
    match decision.strategy {
        StrategyKind::Retry => {
            // A retry may name the step to run again: the failed one, or one it depends on (the
            // code a failing test checks), which runs again unchanged with what follows.
            if let Some(id) = decision.step_id()
                && id != failed
                && !flow.ancestors(failed).contains(id)
            {
                return Err(vec![format!(
                    "`retry` may run step {failed} again or a step it depends on; `{id}` is \
                     neither"
                )]);
            }
            return Ok((None, notes));
        }
        StrategyKind::Skip | StrategyKind::Abort => {
            return Ok((None, notes));
        }
        StrategyKind::Modify => {
            let Some(changed) = &decision.step else {
                return Err(vec![
                    "`modify` needs `step`: the changed step, with the id of the step to change"
                        .into(),
                ]);
            };
            let id = changed.get("id").and_then(Value::as_str).unwrap_or(failed);
            if id != failed && !flow.ancestors(failed).contains(id) {
                return Err(vec![format!(
                    "`modify` may change step {failed} or a step it depends on; `{id}` is neither"
                )]);
            }
            let Some(position) = flow.steps.iter().position(|s| s.id == id) else {
                return Err(vec![format!("there is no step `{id}` to modify")]);
            };
            // The change is a patch: the fields it gives replace the step's, the id stays.
            if let Value::Object(change) = changed {
                let mut merged = serde_json::Map::new();
                if let Ok(Value::Object(fields)) = serde_json::to_value(&steps[position]) {
                    merged = fields;
                }
                for (key, value) in change {
                    merged.insert(key.clone(), value.clone());
                }
                merged.insert("id".into(), Value::String(id.to_string()));
                let read = validate::read_steps(vec![Value::Object(merged)], position);
                if let Some(step) = read.map_err(strings)?.pop() {
                    steps[position] = step;
                }
            }
        }
        StrategyKind::Alternative => {
            let kept = flow.steps.iter().filter(|s| s.id != failed).count();
            let mut added = new_steps(&decision.steps, kept)?;
            let failed_step = flow
                .step(failed)
                .ok_or_else(|| vec![format!("step {failed} is not in the flow")])?;
            // New steps that name no dependencies start where the failed step started; an
            // empty list written out is a choice, and kept.
            for (step, written) in added.iter_mut().zip(&decision.steps) {
                let named = written
                    .get("depends_on")
                    .is_some_and(|deps| !deps.is_null());
                if !named && !failed_step.depends_on.is_empty() {
                    step.depends_on = failed_step.depends_on.clone();
                }
            }
            // The steps that needed the failed step now need the new steps instead.
            let needed: BTreeSet<&str> = added
                .iter()
                .flat_map(|s| s.depends_on.iter().map(String::as_str))
                .collect();
            let sinks: Vec<String> = added
                .iter()
                .filter(|s| !needed.contains(s.id.as_str()))
                .map(|s| s.id.clone())
                .collect();
            steps.retain(|s| s.id != failed);
            for step in &mut steps {
                rewire(step, failed, &sinks);
            }
            steps.extend(added);
        }
        StrategyKind::Replan => {
            steps.retain(|s| {
                context
                    .status
                    .step(&s.id)
                    .is_some_and(|s| s.status == StepState::Succeeded)
            });
            let added = new_steps(&decision.steps, steps.len())?;
            steps.extend(added);
        }
    }
    after_finished_steps(&mut steps, flow, context.status);
    let revised = Flow {
        version: FLOW_VERSION,
        task: flow.task.clone(),
        steps,
        // Settled again with the revised steps (a check step that was replaced is found anew).
        deliverables: flow.deliverables.clone(),
    };
    // Validated as a whole, as a planned flow is: ids, the graph, paths, concurrent writers.
    let text = serde_json::to_string(&revised).map_err(|err| vec![err.to_string()])?;
    let revised = validate::parse_flow(&text, Some(&flow.task), context.rules).map_err(strings)?;
    // A revision gives no step to a role that may not take it.
    let revised = context.roles.apply(revised).map_err(strings)?;
    Ok((Some(revised), notes))
}

/// Points a new step's references to `old` (its dependencies, `@{outputs.OLD.…}` and
/// `content_from_step`) at `fresh`, the id the step of that name was given.
fn renumber(step: &mut Step, old: &str, fresh: &str) {
    for dep in &mut step.depends_on {
        if dep == old {
            *dep = fresh.to_string();
        }
    }
    for (name, value) in step.params.iter_mut() {
        if let Value::String(text) = value {
            if name == "content_from_step" && text == old {
                *text = fresh.to_string();
            } else {
                *text = text.replace(
                    &format!("@{{outputs.{old}."),
                    &format!("@{{outputs.{fresh}."),
                );
            }
        }
    }
}

/// A revision's new steps come after every step that has already finished (it ran before
/// them), so each new step that depends on no other new step is made to depend on the finished
/// steps nothing finished depends on — all finished steps are then its ancestors. Without this,
/// a new step rewriting a file a finished step wrote would be refused as a race that cannot
/// happen, and would not see that step's version of the file.
fn after_finished_steps(steps: &mut [Step], flow: &Flow, status: &FlowStatus) {
    let new: BTreeSet<String> = steps
        .iter()
        .filter(|s| flow.step(&s.id).is_none())
        .map(|s| s.id.clone())
        .collect();
    let finished: Vec<&str> = steps
        .iter()
        .map(|s| s.id.as_str())
        .filter(|id| {
            status
                .step(id)
                .is_some_and(|s| s.status == StepState::Succeeded)
        })
        .collect();
    let depended_on: BTreeSet<&str> = finished
        .iter()
        .filter_map(|id| flow.step(id))
        .flat_map(|s| s.depends_on.iter().map(String::as_str))
        .collect();
    let sinks: Vec<String> = finished
        .iter()
        .filter(|id| !depended_on.contains(**id))
        .map(|id| id.to_string())
        .collect();
    for step in steps.iter_mut() {
        if !new.contains(&step.id) || step.depends_on.iter().any(|d| new.contains(d)) {
            continue;
        }
        for sink in &sinks {
            if !step.depends_on.contains(sink) {
                step.depends_on.push(sink.clone());
            }
        }
    }
}

/// Replaces `old` in a step's `depends_on` with `new`.
fn rewire(step: &mut Step, old: &str, new: &[String]) {
    if !step.depends_on.iter().any(|d| d == old) {
        return;
    }
    step.depends_on.retain(|d| d != old);
    step.depends_on.extend(new.iter().cloned());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rewiring_replaces_the_failed_dependency() {
        let mut step: Step = serde_json::from_value(
            json!({"id": "c", "operation": "shell", "depends_on": ["a", "b"]}),
        )
        .unwrap();
        rewire(&mut step, "b", &["x".into(), "y".into()]);
        assert_eq!(step.depends_on, vec!["a", "x", "y"]);
    }

    #[test]
    fn renumbering_follows_a_renamed_step_in_dependencies_and_parameters() {
        let mut step: Step = serde_json::from_value(json!({
            "id": "check",
            "operation": "write_file",
            "depends_on": "fix",
            "params": {
                "content_from_step": "fix",
                "file_path": "@{outputs.fix.path}",
                "note": "fixes @{outputs.fixed.x}",
            },
        }))
        .unwrap();
        renumber(&mut step, "fix", "fix_2");
        assert_eq!(step.depends_on, vec!["fix_2"]);
        assert_eq!(
            Value::Object(step.params),
            json!({
                "content_from_step": "fix_2",
                "file_path": "@{outputs.fix_2.path}",
                "note": "fixes @{outputs.fixed.x}",
            })
        );
    }
}
