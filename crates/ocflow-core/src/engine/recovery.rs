//! Recovery: what happens when a step fails for good. The LLM is shown the failed step, its
//! error, the tail of its log and its structured test failures, what is done and what remains,
//! and answers one strategy from a closed set. The answer is extracted and validated like a
//! plan (same re-ask rule); any flow it implies goes through the full flow validation. Limits
//! and the stuck rule stop a recovery that is going nowhere.

use std::collections::BTreeSet;
use std::fs;

use serde_json::{Value, json};

use crate::flow::operations;
use crate::flow::path_rules::PathRules;
use crate::flow::policy::CommandPolicy;
use crate::flow::roles::Roles;
use crate::flow::validate;
use crate::llm::answer;
use crate::llm::client::Llm;
use crate::task::failure_cause;
use crate::task::workspace::TaskDir;
use ocflow_model::decision::{Decision, StrategyKind};
use ocflow_model::flow::{FLOW_VERSION, Flow};
use ocflow_model::llm::{ChatRequest, LlmError, Message, ModelSettings};
use ocflow_model::status::{FlowStatus, StepState};
use ocflow_model::step_result::StepResult;

const PROMPT: &str = include_str!("../../../../prompts/recovery.md");
const FIX: &str = include_str!("../../../../prompts/recovery_fix.md");

/// Answers asked for per recovery round.
const MAX_ANSWERS: usize = 3;

/// The bounds of recovery, from `[recovery]` in ocflow.toml.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Attempts of one step, all causes together.
    pub max_attempts_per_step: u32,
    /// Replans (new revisions of the remaining flow) per flow.
    pub max_revisions: u32,
    /// Strategies asked of the LLM per flow.
    pub max_recovery_calls: u32,
    /// Automatic retries of a transient failure, without asking the LLM.
    pub max_transient_retries: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_attempts_per_step: 3,
            max_revisions: 3,
            max_recovery_calls: 10,
            max_transient_retries: 2,
        }
    }
}

/// Why recovery stopped; the flow fails with this in its summary.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Stop {
    #[error(
        "step {step} has failed {attempts} time(s), the most allowed per step \
         (max_attempts_per_step)"
    )]
    AttemptsCap { step: String, attempts: u32 },
    #[error(
        "{calls} recovery answer(s) were asked of the LLM in this flow, the most allowed \
         (max_recovery_calls)"
    )]
    RecoveryCallsCap { calls: u32 },
    #[error(
        "the LLM proposed replanning again, but the flow has been replanned {revisions} time(s), \
         the most allowed (max_revisions)"
    )]
    RevisionsCap { revisions: u32 },
    #[error(
        "recovery is stuck: the LLM proposed `{strategy}` with the same parameters for step {step} \
         a second time"
    )]
    Stuck {
        step: String,
        strategy: StrategyKind,
    },
    #[error(
        "no usable recovery strategy after {answers} answer(s) (saved in {dir}); last \
         problems:\n{problems}"
    )]
    NoValidAnswer {
        answers: usize,
        dir: String,
        problems: String,
    },
    #[error("the recovery LLM call failed: {0}")]
    Llm(#[from] LlmError),
    #[error("cannot save the recovery answer: {0}")]
    Io(#[from] std::io::Error),
}

/// A decision and the flow it leads to (`None`: the flow does not change).
pub(crate) struct Decided {
    pub(crate) decision: Decision,
    pub(crate) flow: Option<Flow>,
    /// What ocflow changed in the proposed steps, to say (a reused id given a fresh one).
    pub(crate) notes: Vec<String>,
}

/// What recovery needs to see and check.
pub(crate) struct Context<'a> {
    pub(crate) llm: &'a Llm,
    pub(crate) settings: &'a ModelSettings,
    pub(crate) rules: &'a PathRules,
    pub(crate) task: &'a TaskDir,
    pub(crate) flow: &'a Flow,
    pub(crate) status: &'a FlowStatus,
    pub(crate) limits: Limits,
    /// What the commands of proposed steps may do.
    pub(crate) policy: CommandPolicy,
    /// Who may take the proposed steps.
    pub(crate) roles: &'a Roles,
    /// The failed step's result, when it got one (an exception or an engine fault leaves none).
    pub(crate) result: Option<&'a StepResult>,
}

/// Checks the limits, then asks the LLM for a strategy for `failed` until one passes every
/// check (at most `MAX_ANSWERS` answers). Answers are saved in `<task>/recovery/`.
pub(crate) async fn decide(context: &Context<'_>, failed: &str) -> Result<Decided, Stop> {
    let entry = context.status.step(failed);
    let attempts = entry.map_or(0, |s| s.attempts);
    if attempts >= context.limits.max_attempts_per_step {
        return Err(Stop::AttemptsCap {
            step: failed.to_string(),
            attempts,
        });
    }
    if context.status.recovery_calls >= context.limits.max_recovery_calls {
        return Err(Stop::RecoveryCallsCap {
            calls: context.status.recovery_calls,
        });
    }
    let round = entry.map_or(0, |s| s.recoveries.len()) + 1;
    let dir = context.task.root.join("recovery");
    fs::create_dir_all(&dir)?;
    let mut messages = vec![Message::user(prompt(context, failed))];
    let mut problems = String::new();
    let mut answers = answer::Answers::default();
    for answer_number in 1..=MAX_ANSWERS {
        let request = ChatRequest {
            purpose: "recovery".into(),
            settings: context.settings.for_answer(answer_number),
            messages: messages.clone(),
            json: true,
            schema: Some(decision_schema()),
        };
        let reply = context.llm.chat(&request).await?;
        fs::write(
            dir.join(format!("{failed}-round{round}-answer{answer_number}.md")),
            &reply.content,
        )?;
        if answers.repeats(&reply) {
            return Err(Stop::NoValidAnswer {
                answers: answer_number,
                dir: dir.display().to_string(),
                problems: format!("{problems}\n{}", answer::REPEATED),
            });
        }
        let checked = if reply.is_truncated() {
            Err(vec![
                "the answer was cut off (token limit): answer with a shorter JSON object"
                    .to_string(),
            ])
        } else {
            check(context, failed, &reply.content)
        };
        // A limit reached is final, whatever the model would answer next.
        if let Ok(decided) = &checked
            && decided.decision.strategy == StrategyKind::Replan
            && context.status.replans >= context.limits.max_revisions
        {
            return Err(Stop::RevisionsCap {
                revisions: context.status.replans,
            });
        }
        match checked {
            Ok(decided) => return Ok(decided),
            Err(found) => {
                problems = found
                    .iter()
                    .map(|p| format!("- {p}"))
                    .collect::<Vec<_>>()
                    .join("\n");
                messages.push(Message::assistant(reply.content));
                messages.push(Message::user(FIX.trim().replace("{{problems}}", &problems)));
            }
        }
    }
    Err(Stop::NoValidAnswer {
        answers: MAX_ANSWERS,
        dir: dir.display().to_string(),
        problems,
    })
}

/// The flow a decision made before a crash leads to, computed again on resume.
pub(crate) fn redo(
    context: &Context<'_>,
    failed: &str,
    decision: Decision,
) -> Result<Decided, Stop> {
    let (flow, notes) =
        implied_flow(context, failed, &decision).map_err(|problems| Stop::NoValidAnswer {
            answers: 0,
            dir: "the status file".into(),
            problems: problems.join("\n"),
        })?;
    Ok(Decided {
        decision,
        flow,
        notes,
    })
}

/// Parses an answer into a decision and the flow it implies, or the problems to show the
/// model. A repeated strategy, an exhausted cap and `abort` are final: they are not re-asked.
fn check(context: &Context<'_>, failed: &str, text: &str) -> Result<Decided, Vec<String>> {
    let extracted = answer::extract_json(text).map_err(|p| vec![p.to_string()])?;
    let value: serde_json::Value =
        serde_json::from_str(&extracted.json).map_err(|err| vec![format!("not JSON: {err}")])?;
    if let Some(problem) = shape_problem(&value) {
        return Err(vec![problem]);
    }
    let decision: Decision = serde_json::from_value(value).map_err(|err| {
        // serde's words without its positions: a small model reads plain sentences best.
        let plain = err.to_string();
        let plain = plain
            .split(" at line ")
            .next()
            .unwrap_or(&plain)
            .to_string();
        vec![format!(
            "the answer must be one JSON object {{\"strategy\": \"retry\" | \"modify\" | \
             \"alternative\" | \"skip\" | \"replan\" | \"abort\", \"reason\": \"...\", \"step\": \
             {{...}}, \"steps\": [...]}}: {plain}"
        )]
    })?;
    let (flow, notes) = implied_flow(context, failed, &decision)?;
    if let Some(flow) = &flow {
        // Only what the LLM proposes now: steps that are new or changed.
        let proposed = flow
            .steps
            .iter()
            .filter(|s| context.flow.step(&s.id) != Some(*s));
        if let Some(problem) = context.policy.check(proposed) {
            return Err(vec![problem.to_string()]);
        }
    }
    Ok(Decided {
        decision,
        flow,
        notes,
    })
}

/// The shape of a recovery answer, for endpoints that constrain decoding to a schema.
fn decision_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "strategy": {"type": "string",
                "enum": ["retry", "modify", "alternative", "skip", "replan", "abort"]},
            "reason": {"type": "string"},
            "step": {"type": "object"},
            "steps": {"type": "array", "items": {"type": "object"}}
        },
        "required": ["strategy", "reason"]
    })
}

/// The strategies, as the model must write them.
const STRATEGIES: &str = "\"retry\", \"modify\", \"alternative\", \"skip\", \"replan\", \"abort\"";

/// What is wrong with the answer's shape, said plainly for a small model.
fn shape_problem(value: &serde_json::Value) -> Option<String> {
    let Some(object) = value.as_object() else {
        return Some(format!(
            "answer with one JSON object, not a {}: {{\"strategy\": ..., \"reason\": ...}}",
            kind_of(value)
        ));
    };
    match object.get("strategy") {
        None => Some(format!(
            "`strategy` is missing: add \"strategy\" with one of these strings: {STRATEGIES}"
        )),
        Some(serde_json::Value::String(name)) => {
            let known = STRATEGIES.split(", ").any(|s| s.trim_matches('"') == name);
            (!known).then(|| {
                format!("`strategy` must be one of these strings: {STRATEGIES}, not \"{name}\"")
            })
        }
        Some(other) => Some(format!(
            "`strategy` must be one of these strings: {STRATEGIES}, not {} {}",
            article(other),
            kind_of(other)
        )),
    }
}

fn kind_of(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Object(_) => "object",
        serde_json::Value::Array(_) => "list",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::Bool(_) => "true/false",
        serde_json::Value::Null => "null",
    }
}

fn article(value: &serde_json::Value) -> &'static str {
    if matches!(
        value,
        serde_json::Value::Object(_) | serde_json::Value::Array(_)
    ) {
        "an"
    } else {
        "a"
    }
}

/// The flow after a decision, fully validated, and what ocflow changed in the proposed steps;
/// `None` when the flow itself does not change.
fn implied_flow(
    context: &Context<'_>,
    failed: &str,
    decision: &Decision,
) -> Result<(Option<Flow>, Vec<String>), Vec<String>> {
    let flow = context.flow;
    let mut notes = Vec::new();
    // A new step that reuses an id of the flow gets a fresh one (`fix_again_2`), and the new
    // steps' references to it follow: small models reuse ids, and refusing cost good fixes.
    let mut new_steps = |values: &[Value]| -> Result<Vec<Value>, Vec<String>> {
        if values.is_empty() {
            return Err(vec![format!(
                "`{}` needs `steps`: the new steps",
                decision.strategy
            )]);
        }
        let mut taken: BTreeSet<String> = context
            .status
            .steps
            .iter()
            .map(|s| s.id.clone())
            .chain(flow.steps.iter().map(|s| s.id.clone()))
            .collect();
        let mut renamed: Vec<(String, String)> = Vec::new();
        let mut added = values.to_vec();
        for value in &mut added {
            let Some(id) = value.get("id").and_then(Value::as_str).map(str::to_string) else {
                continue;
            };
            if taken.insert(id.clone()) {
                continue;
            }
            let fresh = (2..)
                .map(|n| format!("{id}_{n}"))
                .find(|candidate| !taken.contains(candidate))
                .unwrap_or_default();
            taken.insert(fresh.clone());
            value["id"] = Value::String(fresh.clone());
            notes.push(format!(
                "recovery proposed a new step with the id `{id}`, which the flow already uses; \
                 it runs as `{fresh}`"
            ));
            renamed.push((id, fresh));
        }
        for value in &mut added {
            for (old, fresh) in &renamed {
                renumber(value, old, fresh);
            }
        }
        Ok(added)
    };
    let mut steps: Vec<Value> = flow
        .steps
        .iter()
        .map(|s| serde_json::to_value(s).unwrap_or(Value::Null))
        .collect();
    match decision.strategy {
        StrategyKind::Retry | StrategyKind::Skip | StrategyKind::Abort => {
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
            let mut merged = steps[position].clone();
            if let (Value::Object(target), Value::Object(change)) = (&mut merged, changed) {
                for (key, value) in change {
                    target.insert(key.clone(), value.clone());
                }
                target.insert("id".into(), Value::String(id.to_string()));
            }
            steps[position] = merged;
        }
        StrategyKind::Alternative => {
            let mut added = new_steps(&decision.steps)?;
            let failed_step = flow
                .step(failed)
                .ok_or_else(|| vec![format!("step {failed} is not in the flow")])?;
            let added_ids: Vec<String> = added
                .iter()
                .filter_map(|v| v.get("id").and_then(Value::as_str).map(str::to_string))
                .collect();
            // New steps without dependencies start where the failed step started.
            for value in &mut added {
                if value.get("depends_on").is_none_or(Value::is_null)
                    && !failed_step.depends_on.is_empty()
                {
                    value["depends_on"] = json!(failed_step.depends_on);
                }
            }
            // The steps that needed the failed step now need the new steps instead.
            let needed: BTreeSet<String> = added
                .iter()
                .flat_map(|v| match v.get("depends_on") {
                    Some(Value::String(dep)) => vec![dep.clone()],
                    Some(Value::Array(deps)) => deps
                        .iter()
                        .filter_map(|d| d.as_str().map(str::to_string))
                        .collect(),
                    _ => Vec::new(),
                })
                .collect();
            let sinks: Vec<String> = added_ids
                .iter()
                .filter(|id| !needed.contains(*id))
                .cloned()
                .collect();
            steps.retain(|v| v.get("id").and_then(Value::as_str) != Some(failed));
            for value in &mut steps {
                rewire(value, failed, &sinks);
            }
            steps.extend(added);
        }
        StrategyKind::Replan => {
            let added = new_steps(&decision.steps)?;
            steps.retain(|v| {
                v.get("id")
                    .and_then(Value::as_str)
                    .and_then(|id| context.status.step(id))
                    .is_some_and(|s| s.status == StepState::Succeeded)
            });
            steps.extend(added);
        }
    }
    after_finished_steps(&mut steps, flow, context.status);
    let text = json!({"version": FLOW_VERSION, "task": flow.task, "steps": steps}).to_string();
    let strings = |problems: Vec<ocflow_model::problem::Problem>| -> Vec<String> {
        problems.iter().map(|p| p.to_string()).collect()
    };
    let revised = validate::parse_flow(&text, Some(&flow.task), context.rules).map_err(strings)?;
    // A revision gives no step to a role that may not take it.
    let revised = context.roles.apply(revised).map_err(strings)?;
    Ok((Some(revised), notes))
}

/// Points a new step's references to `old` (its dependencies, `@{outputs.OLD.…}` and
/// `content_from_step`) at `fresh`, the id the step of that name was given.
fn renumber(step: &mut Value, old: &str, fresh: &str) {
    match step.get_mut("depends_on") {
        Some(Value::String(dep)) if dep == old => *dep = fresh.to_string(),
        Some(Value::Array(deps)) => {
            for dep in deps.iter_mut() {
                if dep.as_str() == Some(old) {
                    *dep = Value::String(fresh.to_string());
                }
            }
        }
        _ => {}
    }
    let Some(Value::Object(params)) = step.get_mut("params") else {
        return;
    };
    for (name, value) in params.iter_mut() {
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
fn after_finished_steps(steps: &mut [Value], flow: &Flow, status: &FlowStatus) {
    let id_of = |v: &Value| v.get("id").and_then(Value::as_str).map(str::to_string);
    let ids: Vec<String> = steps.iter().filter_map(id_of).collect();
    let new: BTreeSet<&str> = ids
        .iter()
        .map(String::as_str)
        .filter(|id| flow.step(id).is_none())
        .collect();
    let finished: Vec<&str> = ids
        .iter()
        .map(String::as_str)
        .filter(|id| {
            status
                .step(id)
                .is_some_and(|s| s.status == StepState::Succeeded)
        })
        .collect();
    let depended_on: BTreeSet<String> = finished
        .iter()
        .filter_map(|id| flow.step(id))
        .flat_map(|s| s.depends_on.iter().cloned())
        .collect();
    let sinks: Vec<&str> = finished
        .iter()
        .copied()
        .filter(|id| !depended_on.contains(*id))
        .collect();
    for step in steps.iter_mut() {
        let Some(id) = id_of(step) else { continue };
        if !new.contains(id.as_str()) {
            continue;
        }
        let mut deps = depends_on(step);
        if deps.iter().any(|d| new.contains(d.as_str())) {
            continue;
        }
        for sink in &sinks {
            if !deps.iter().any(|d| d == sink) {
                deps.push((*sink).to_string());
            }
        }
        step["depends_on"] = json!(deps);
    }
}

/// A step's `depends_on`, written as one id or a list.
fn depends_on(step: &Value) -> Vec<String> {
    match step.get("depends_on") {
        Some(Value::String(dep)) => vec![dep.clone()],
        Some(Value::Array(deps)) => deps
            .iter()
            .filter_map(|d| d.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// Replaces `old` in a step's `depends_on` with `new`.
fn rewire(step: &mut Value, old: &str, new: &[String]) {
    let deps = depends_on(step);
    if !deps.iter().any(|d| d == old) {
        return;
    }
    let mut rewired: Vec<String> = deps.into_iter().filter(|d| d != old).collect();
    rewired.extend(new.iter().cloned());
    step["depends_on"] = json!(rewired);
}

/// The recovery prompt: the failed step, its error and log tail, its structured test
/// failures, the steps done with their outputs, and the steps remaining.
fn prompt(context: &Context<'_>, failed: &str) -> String {
    let step_dir = context.task.step_dir(failed);
    let entry = context.status.step(failed);
    let error = entry
        .and_then(|s| s.error.as_ref())
        .map_or("unknown", |e| e.message.as_str());
    let evidence = failure_cause::evidence(context.result, &step_dir, failure_cause::FOR_THE_MODEL);
    let failures = if evidence.test_failures.is_empty() {
        "(none reported)".to_string()
    } else {
        evidence
            .test_failures
            .iter()
            .map(|line| format!("- {line}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let mut log: String = evidence
        .outputs
        .iter()
        .map(|(field, tail)| format!("{field}:\n{tail}\n"))
        .collect();
    if let Some(tail) = &evidence.log {
        log = tail.clone();
    }
    let done: Vec<String> = context
        .flow
        .steps
        .iter()
        .filter_map(|s| {
            context
                .status
                .step(&s.id)
                .filter(|st| st.status == StepState::Succeeded)
                .map(|st| (s, st))
        })
        .map(|(s, st)| {
            let outputs = if st.output_files.is_empty() {
                String::new()
            } else {
                format!("; changed {}", st.output_files.join(", "))
            };
            format!(
                "- {} ({}): {}{outputs}",
                s.id,
                s.operation,
                st.message.as_deref().unwrap_or("")
            )
        })
        .collect();
    let remaining: Vec<String> = context
        .flow
        .steps
        .iter()
        .filter(|s| {
            s.id != failed
                && context
                    .status
                    .step(&s.id)
                    .is_some_and(|st| st.status == StepState::Pending)
        })
        .map(|s| serde_json::to_string(s).unwrap_or_default())
        .collect();
    let tried: Vec<String> = entry
        .map(|s| {
            s.recoveries
                .iter()
                .map(|r| format!("- {}: {}", r.strategy, r.reason))
                .collect()
        })
        .unwrap_or_default();
    let failed_json = context
        .flow
        .step(failed)
        .and_then(|s| serde_json::to_string(s).ok())
        .unwrap_or_default();
    PROMPT
        .trim()
        .replace("{{task}}", &context.flow.task)
        .replace("{{failed_step}}", &failed_json)
        .replace("{{attempts}}", &entry.map_or(0, |s| s.attempts).to_string())
        .replace("{{error}}", error)
        .replace("{{test_failures}}", &failures)
        .replace(
            "{{log}}",
            if log.trim().is_empty() {
                "(empty)"
            } else {
                log.trim_end()
            },
        )
        .replace("{{done}}", &or_none(&done))
        .replace("{{remaining}}", &or_none(&remaining))
        .replace("{{tried}}", &or_none(&tried))
        .replace("{{operations}}", operations::catalogue().trim_end())
}

fn or_none(lines: &[String]) -> String {
    if lines.is_empty() {
        "(none)".into()
    } else {
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewiring_replaces_the_failed_dependency() {
        let mut step = json!({"id": "c", "depends_on": ["a", "b"]});
        rewire(&mut step, "b", &["x".into(), "y".into()]);
        assert_eq!(step["depends_on"], json!(["a", "x", "y"]));
    }
}
