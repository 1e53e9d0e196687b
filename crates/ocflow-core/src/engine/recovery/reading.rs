//! Reading the model's recovery answer: the JSON extracted, its shape checked and said plainly
//! for a small model, read into a `Decision`, and the flow it implies checked in full. What is
//! wrong goes back to the model as a list of problems.

use serde_json::Value;

use crate::engine::recovery::{Context, Decided, feedback, revision};
use crate::llm::answer;
use ocflow_model::decision::{Decision, StrategyKind};

/// Parses an answer into a decision and the flow it implies, or the problems to show the
/// model. A repeated strategy, an exhausted cap and `abort` are final: they are not re-asked.
pub(super) fn check(
    context: &Context<'_>,
    failed: &str,
    text: &str,
) -> Result<Decided, Vec<String>> {
    let extracted = match answer::extract_json(text) {
        Ok(extracted) => extracted,
        Err(problem) => match prose_retry(context, failed, text) {
            Some(decision) => {
                return Ok(Decided {
                    decision,
                    flow: None,
                    notes: vec![format!(
                        "the recovery answer for step {failed} was a paragraph, not JSON: it is \
                         taken as the reason of a retry"
                    )],
                });
            }
            None => return Err(vec![problem.to_string()]),
        },
    };
    let value: Value =
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
    let (flow, notes) = revision::implied_flow(context, failed, &decision)?;
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

/// Seed 002's recovery prompt asks for "your recommendation and reasoning", and a small model
/// answers a paragraph. A paragraph with no JSON in it at all is read as a `retry` whose reason
/// is the paragraph: of the step that wrote the code when a test step failed (which is then
/// shown the paragraph and the failing tests), else of the failed step. Broken JSON is not
/// prose: it is re-asked as before.
fn prose_retry(context: &Context<'_>, failed: &str, text: &str) -> Option<Decision> {
    let text = text.trim();
    let words = text
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphabetic));
    if text.contains(['{', '[']) || words.count() < 5 {
        return None;
    }
    let step = feedback::code_step_of(context.flow, failed, context.result)
        .map(|id| serde_json::json!({ "id": id }));
    Some(Decision {
        strategy: StrategyKind::Retry,
        reason: text.to_string(),
        step,
        steps: Vec::new(),
    })
}

/// The shape of a recovery answer, for endpoints that constrain decoding to a schema.
pub(super) fn decision_schema() -> Value {
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
fn shape_problem(value: &Value) -> Option<String> {
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
        Some(Value::String(name)) => {
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

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "object",
        Value::Array(_) => "list",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "true/false",
        Value::Null => "null",
    }
}

fn article(value: &Value) -> &'static str {
    if matches!(value, Value::Object(_) | Value::Array(_)) {
        "an"
    } else {
        "a"
    }
}
