//! The flow: a task broken into steps, each an operation of `open_codex_lib` with parameters and
//! dependencies. This is the serde model written to `flow.json`; `validate` builds it from
//! untrusted JSON and checks every rule before anything runs.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::deliverable::Deliverables;

/// The flow format version this build writes and reads.
pub const FLOW_VERSION: u32 = 1;

/// A validated flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flow {
    /// Format version; see `FLOW_VERSION`.
    pub version: u32,
    /// The task in the user's words.
    pub task: String,
    /// The steps in the order they were written; execution follows `depends_on`.
    pub steps: Vec<Step>,
    /// What the flow must deliver for its task to be done, checked at its end; absent in a
    /// flow saved before deliverables existed (they are then inferred from its steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliverables: Option<Deliverables>,
}

/// One step of a flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Unique id, `[A-Za-z0-9][A-Za-z0-9_-]{0,63}`; also the name of the step's directory.
    pub id: String,
    /// An operation of the registry (`operations::OPERATIONS`).
    pub operation: String,
    /// Optional role (developer, tester, …) the planner gave the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Optional one-line purpose, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The operation's parameters; strings may hold `@{outputs.STEP.FIELD}` references.
    #[serde(default)]
    pub params: Map<String, Value>,
    /// Ids of the steps that must succeed before this one starts. A flow may write one id or a
    /// list (see `read_depends_on`); it is always written back as a list.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "deserialize_depends_on"
    )]
    pub depends_on: Vec<String>,
    /// Whether its result is the flow's answer (seed 004's `isFinalAnswer`): its text heads
    /// the summary and is in `flow_finished`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub final_answer: bool,
    /// The model profile (`[llm.profiles.NAME]`) its LLM calls use, named by the step itself
    /// rather than through a role (seed 002: the orchestrator chooses the model per call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// A model on its profile's endpoint (the default one unless `profile` names another),
    /// instead of the profile's own model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// What is wrong with a `depends_on` as written. The messages are what validation and
/// recovery show a model, so they say what to write.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DependsOnError {
    /// An entry of the list that is not a string.
    #[error("depends_on holds {0}, which is not a step id")]
    NotAnId(Value),
    /// Neither a string nor a list (an object, a number).
    #[error("depends_on must be a step id or a list of step ids")]
    NeitherIdNorList,
}

/// Reads `depends_on` as a flow may write it: one id, a list of ids, or `null` for none. An id
/// listed twice counts once. Every entry that is not an id is reported, and the others are still
/// read, so that validation names all of them at once. This is the one place that knows the form.
pub fn read_depends_on(value: Value) -> (Vec<String>, Vec<DependsOnError>) {
    match value {
        Value::Null => (Vec::new(), Vec::new()),
        Value::String(id) => (vec![id], Vec::new()),
        Value::Array(entries) => {
            let mut ids: Vec<String> = Vec::new();
            let mut problems = Vec::new();
            for entry in entries {
                match entry {
                    Value::String(id) if !ids.contains(&id) => ids.push(id),
                    Value::String(_) => {}
                    other => problems.push(DependsOnError::NotAnId(other)),
                }
            }
            (ids, problems)
        }
        _ => (Vec::new(), vec![DependsOnError::NeitherIdNorList]),
    }
}

/// `depends_on` through serde: `read_depends_on`, failing on its first problem.
fn deserialize_depends_on<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<String>, D::Error> {
    let (ids, problems) = read_depends_on(Value::deserialize(deserializer)?);
    match problems.into_iter().next() {
        Some(problem) => Err(serde::de::Error::custom(problem)),
        None => Ok(ids),
    }
}

impl Flow {
    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id == id)
    }

    /// The operations its steps use, each once.
    pub fn operations(&self) -> BTreeSet<String> {
        self.steps
            .iter()
            .map(|step| step.operation.clone())
            .collect()
    }

    /// The steps in the order `--jobs 1` runs them: dependencies first, and among the steps
    /// ready at the same time, the one written first. Later steps in this order win when two
    /// change the same file, so the result does not depend on which finished first.
    pub fn topological_order(&self) -> Vec<&str> {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let index: HashMap<&str, usize> = self
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_str(), i))
            .collect();
        let mut waiting: Vec<usize> = self
            .steps
            .iter()
            .map(|s| {
                s.depends_on
                    .iter()
                    .filter(|d| index.contains_key(d.as_str()))
                    .count()
            })
            .collect();
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); self.steps.len()];
        for (i, step) in self.steps.iter().enumerate() {
            for dep in &step.depends_on {
                if let Some(&d) = index.get(dep.as_str()) {
                    dependents[d].push(i);
                }
            }
        }
        let mut ready: BinaryHeap<Reverse<usize>> = waiting
            .iter()
            .enumerate()
            .filter(|(_, w)| **w == 0)
            .map(|(i, _)| Reverse(i))
            .collect();
        let mut order = Vec::with_capacity(self.steps.len());
        while let Some(Reverse(i)) = ready.pop() {
            order.push(self.steps[i].id.as_str());
            for &next in &dependents[i] {
                waiting[next] -= 1;
                if waiting[next] == 0 {
                    ready.push(Reverse(next));
                }
            }
        }
        order
    }

    /// Every step `id` depends on, directly or through other steps.
    pub fn ancestors(&self, id: &str) -> BTreeSet<String> {
        let by_id: HashMap<&str, &Step> = self.steps.iter().map(|s| (s.id.as_str(), s)).collect();
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&str> = by_id
            .get(id)
            .map(|s| s.depends_on.iter().map(String::as_str).collect())
            .unwrap_or_default();
        while let Some(next) = stack.pop() {
            if seen.insert(next.to_string())
                && let Some(step) = by_id.get(next)
            {
                stack.extend(step.depends_on.iter().map(String::as_str));
            }
        }
        seen
    }
}

/// A reference to a field of an earlier step's result: `@{outputs.STEP.FIELD.SUBFIELD}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputRef {
    /// The whole `@{...}` text, as written.
    pub text: String,
    pub step: String,
    /// The path into the step's result dict (at least one field).
    pub fields: Vec<String>,
}

/// A reference that cannot be read or resolved; the message names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RefError(pub String);

const REF_OPEN: &str = "@{outputs.";

/// Finds the output references in a string. A malformed one is an error naming it.
pub fn output_refs(text: &str) -> Result<Vec<OutputRef>, RefError> {
    Ok(scan_refs(text)?
        .into_iter()
        .map(|(_, reference)| reference)
        .collect())
}

/// Replaces every output reference in `text` using `lookup`, which returns the field's value
/// as text or an error naming what is missing. Substituted text is never scanned again.
/// `lookup` also gets where the reference stands in the text (for a shell's quotes).
pub fn substitute_refs(
    text: &str,
    mut lookup: impl FnMut(&OutputRef, usize) -> Result<String, RefError>,
) -> Result<String, RefError> {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for (start, reference) in scan_refs(text)? {
        out.push_str(&text[copied..start]);
        out.push_str(&lookup(&reference, start)?);
        copied = start + reference.text.len();
    }
    out.push_str(&text[copied..]);
    Ok(out)
}

/// The references in `text` with their byte offsets.
/// Every malformed reference is named, not only the first (one hid the next).
fn scan_refs(text: &str) -> Result<Vec<(usize, OutputRef)>, RefError> {
    let mut refs = Vec::new();
    let mut malformed = Vec::new();
    let mut offset = 0;
    while let Some(found) = text[offset..].find(REF_OPEN) {
        let start = offset + found;
        let inner_start = start + REF_OPEN.len();
        let Some(close) = text[inner_start..].find('}') else {
            malformed.push(format!("unclosed reference {:?}", &text[start..]));
            break;
        };
        let end = inner_start + close + 1;
        let whole = &text[start..end];
        let mut parts = text[inner_start..end - 1].split('.').map(str::to_string);
        let step = parts.next().unwrap_or_default();
        let fields: Vec<String> = parts.collect();
        if step.is_empty() || fields.is_empty() || fields.iter().any(|f| f.is_empty()) {
            malformed.push(format!(
                "malformed reference {whole:?}; write @{{outputs.STEP_ID.FIELD}}"
            ));
            offset = end;
            continue;
        }
        refs.push((
            start,
            OutputRef {
                text: whole.to_string(),
                step,
                fields,
            },
        ));
        offset = end;
    }
    if malformed.is_empty() {
        Ok(refs)
    } else {
        Err(RefError(malformed.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_references() {
        let refs = output_refs("a @{outputs.scan.data.functions} b @{outputs.s2.content}").unwrap();
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[0].step, "scan");
        assert_eq!(refs[0].fields, vec!["data", "functions"]);
        assert!(output_refs("@{outputs.only}").is_err());
        assert!(output_refs("@{outputs.a.b").is_err());
        assert_eq!(output_refs("plain @{other}").unwrap(), vec![]);
        // Issue 38: a bad reference no longer hides the next one.
        let both = output_refs("@{outputs.a} and @{outputs..b} and @{outputs.c.d").unwrap_err();
        assert_eq!(
            both.0,
            "malformed reference \"@{outputs.a}\"; write @{outputs.STEP_ID.FIELD}; malformed \
             reference \"@{outputs..b}\"; write @{outputs.STEP_ID.FIELD}; unclosed reference \
             \"@{outputs.c.d\""
        );
    }

    fn dependencies_of(step: Value) -> Result<Vec<String>, String> {
        serde_json::from_value::<Step>(step)
            .map(|step| step.depends_on)
            .map_err(|err| err.to_string())
    }

    #[test]
    fn depends_on_is_one_id_or_a_list() {
        let step = |deps: Value| json!({"id": "b", "operation": "shell", "depends_on": deps});
        assert_eq!(dependencies_of(step(json!("a"))), Ok(vec!["a".to_string()]));
        assert_eq!(
            dependencies_of(step(json!(["a", "c", "a"]))),
            Ok(vec!["a".to_string(), "c".to_string()])
        );
        assert_eq!(dependencies_of(step(Value::Null)), Ok(vec![]));
        assert_eq!(
            dependencies_of(json!({"id": "b", "operation": "shell"})),
            Ok(vec![])
        );
        assert!(
            dependencies_of(step(json!(["a", 3])))
                .is_err_and(|err| err.contains("depends_on holds 3, which is not a step id")),
        );
        assert!(
            dependencies_of(step(json!({"a": 1}))).is_err_and(
                |err| err.contains("depends_on must be a step id or a list of step ids")
            )
        );
    }

    #[test]
    fn reading_depends_on_reports_every_entry_that_is_not_an_id() {
        let (ids, problems) = read_depends_on(json!(["a", 3, null, "a", "b"]));
        assert_eq!(ids, vec!["a".to_string(), "b".to_string()]);
        assert_eq!(
            problems,
            vec![
                DependsOnError::NotAnId(json!(3)),
                DependsOnError::NotAnId(Value::Null)
            ]
        );
    }
}
