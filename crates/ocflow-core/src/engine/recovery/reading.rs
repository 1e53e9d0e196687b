//! Reading the model's recovery answer: the JSON extracted, its shape checked and said plainly
//! for a small model, read into a `Decision`, and the flow it implies checked in full. What is
//! wrong goes back to the model as a list of problems.

use serde_json::Value;

use crate::engine::recovery::context::{Context, Decided};
use crate::engine::recovery::{feedback, revision};
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
        Err(problem) => match prose_decision(context, failed, text) {
            Some(decision) => {
                let taken = match decision.strategy {
                    StrategyKind::Retry => "it is taken as the reason of a retry".to_string(),
                    chosen => format!("its choice, `{chosen}`, is carried out"),
                };
                return Ok(Decided {
                    decision,
                    flow: None,
                    notes: vec![format!(
                        "the recovery answer for step {failed} was a paragraph, not JSON: \
                         {taken}"
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
    let (flow, mut notes) = revision::implied_flow(context, failed, &decision)?;
    // A `modify` that changes nothing of a step that runs the same way every time (no model in
    // it) is a retry, and counts as one: twice is stuck, not a new idea each time.
    if let Some(id) = same_deterministic_step(context, failed, &decision, flow.as_ref()) {
        notes.push(format!(
            "the `modify` of step {id} changes none of its parameters, and it runs the same way \
             each time: it is a retry"
        ));
        let step = (id != failed).then(|| serde_json::json!({ "id": id }));
        let decision = Decision {
            strategy: StrategyKind::Retry,
            reason: decision.reason,
            step,
            steps: Vec::new(),
        };
        return Ok(Decided {
            decision,
            flow: None,
            notes,
        });
    }
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

/// The id of the step a `modify` decision names when the revised flow holds it unchanged and
/// its operation, with those parameters, calls no model.
fn same_deterministic_step(
    context: &Context<'_>,
    failed: &str,
    decision: &Decision,
    revised: Option<&ocflow_model::flow::Flow>,
) -> Option<String> {
    if decision.strategy != StrategyKind::Modify {
        return None;
    }
    let id = decision.step_id().unwrap_or(failed);
    let before = context.flow.step(id)?;
    let after = revised?.step(id)?;
    let unchanged = before.operation == after.operation && before.params == after.params;
    let deterministic = !crate::flow::operations::step_needs_llm(&before.operation, &before.params);
    (unchanged && deterministic).then(|| id.to_string())
}

/// Seed 002's recovery prompt asks for "your recommendation and reasoning" among numbered
/// options ("1. Retry step. 2. Try an alternative operation. 3. Abort and report to user. 4.
/// Suggest a modification …"), and a small model answers a paragraph. A paragraph with no JSON
/// in it at all is read as the strategy it chooses: `abort` and `skip` as such; any other
/// (retry, a modification, an alternative it cannot spell out as steps) as a `retry` whose
/// reason is the paragraph — of the step that wrote the code when a test step failed (which is
/// then shown the paragraph and the failing tests), else of the failed step. Broken JSON is not
/// prose: it is re-asked as before.
fn prose_decision(context: &Context<'_>, failed: &str, text: &str) -> Option<Decision> {
    let text = text.trim();
    let words = text
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphabetic));
    if text.contains(['{', '[']) || words.count() < 5 {
        return None;
    }
    let strategy = chosen_in_prose(text);
    if matches!(strategy, StrategyKind::Abort | StrategyKind::Skip) {
        return Some(Decision {
            strategy,
            reason: text.to_string(),
            step: None,
            steps: Vec::new(),
        });
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

/// The strategy a paragraph chooses: seed 002's option it names by number ("option 3", or a
/// line that begins "3."), else the first strategy it names; a retry when it names none.
fn chosen_in_prose(text: &str) -> StrategyKind {
    use StrategyKind::*;
    let by_number = |n: char| match n {
        '1' => Some(Retry),
        '2' => Some(Alternative),
        '3' => Some(Abort),
        '4' => Some(Modify),
        _ => None,
    };
    let lower = text.to_lowercase();
    let numbered = lower.lines().find_map(|line| {
        let line = line.trim_start_matches(|c: char| c.is_whitespace() || c == '*' || c == '#');
        let mut chars = line.chars();
        match (chars.next(), chars.next()) {
            (Some(n), Some('.' | ')' | ':')) => by_number(n),
            _ => None,
        }
    });
    let option = lower.match_indices("option").find_map(|(at, word)| {
        let after = lower[at + word.len()..].trim_start_matches([' ', '#', ':']);
        after.chars().next().and_then(by_number)
    });
    if let Some(chosen) = option.or(numbered) {
        return chosen;
    }
    let names = [
        ("abort", Abort),
        ("skip", Skip),
        ("retry", Retry),
        ("alternative", Alternative),
        ("replan", Replan),
        ("modif", Modify),
    ];
    names
        .iter()
        .filter_map(|(name, kind)| lower.find(name).map(|at| (at, *kind)))
        .min_by_key(|(at, _)| *at)
        .map_or(Retry, |(_, kind)| kind)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 002's own options, answered in prose: the choice is the one carried out.
    #[test]
    fn a_paragraph_is_read_as_the_option_it_chooses() {
        use StrategyKind::*;
        for (paragraph, chosen) in [
            ("3. Abort and report to user.", Abort),
            (
                "The file cannot be parsed. I recommend option 3: abort and report.",
                Abort,
            ),
            ("1. Retry step, the server was busy.", Retry),
            (
                "The test fails because add subtracts. Run the code change again.",
                Retry,
            ),
            ("Nothing here can pass; skip this step and go on.", Skip),
            (
                "4) Suggest a modification to the step's instructions: use //.",
                Modify,
            ),
        ] {
            assert_eq!(chosen_in_prose(paragraph), chosen, "{paragraph}");
        }
    }
}
