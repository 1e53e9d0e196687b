//! The other seeds' plan formats, read as ocflow's own (as seed 002's parameter names are, by
//! the aliases in `operations.json`). A model taught by one of the seeds writes its fields; they
//! are mapped before validation, so every rule holds for them as for ours:
//!
//! - seed 004 (the orchestrator's plans and task messages): a step's `stepId` or `sub_task_id`
//!   is its `id`, `sub_task_input` its `params` (or, holding `operation` and `params`, both),
//!   `assigned_agent_role` its `role`, `isFinalAnswer` its `final_answer`, `context_summary` its
//!   `description`; `tool_name` names the operation when it is one (else, like `parent_task_id`
//!   and `api_keys_config_ref`, it is dropped); `@{outputs.STEP.result_data}` (or
//!   `processed_result_data`) reads the field that holds STEP's result ([`result_data_field`]).
//! - seed 000 (the crew's execution plan): `tasks` are the `steps`, `user_instruction` the
//!   task; a task's `task_id` is its `id`, `required_role` its `role`, `dependencies` its
//!   `depends_on`; `parsed_intent` and a task's `status` and `output` (the crew's bookkeeping)
//!   are dropped. A task with only a `description` (the crew's agents answer in text unless
//!   told which files to write) is a model step that answers in text, `ask_model`, the
//!   description its `instructions`; a role ocflow has no built-in of (`SoftwarePlanner`,
//!   `QualityAssuranceAgent`) is named there ("As SoftwarePlanner: …") instead of being the
//!   step's role, and the QA agent's `raw_instruction` is given as the step's input.
//!
//! A field given both ways keeps ocflow's spelling; the seed's is dropped.

use serde_json::{Map, Value};

/// Top-level fields: (the seed's name, ocflow's).
const FLOW_FIELDS: &[(&str, &str)] = &[("tasks", "steps"), ("user_instruction", "task")];
/// Top-level bookkeeping of seed 000's plan, with nothing for a flow.
const FLOW_DROPPED: &[&str] = &["parsed_intent"];
/// Step fields: (the seed's name, ocflow's).
const STEP_FIELDS: &[(&str, &str)] = &[
    ("stepId", "id"),
    ("sub_task_id", "id"),
    ("context_summary", "description"),
    ("step_id", "id"),
    ("task_id", "id"),
    ("sub_task_input", "params"),
    ("assigned_agent_role", "role"),
    ("required_role", "role"),
    ("dependencies", "depends_on"),
    ("isFinalAnswer", "final_answer"),
    ("is_final_answer", "final_answer"),
];
/// A task's bookkeeping in seed 000's plan.
const STEP_DROPPED: &[&str] = &["status", "output"];
/// Seed 004's task message fields with nothing for a step: the parent task (the flow is it),
/// the tool's name (the operation says what runs), and a reference to API keys (ocflow's key
/// is its own, never a plan's).
const MESSAGE_DROPPED: &[&str] = &["parent_task_id", "tool_name", "api_keys_config_ref"];
/// The operation of a task described in words alone (seed 000's crew tasks).
const DESCRIBED: &str = "ask_model";
/// What seed 004 calls a step's result in a reference.
const RESULT_DATA: &[&str] = &["result_data", "processed_result_data"];

/// Maps a flow object's fields from the seeds' names to ocflow's.
pub(crate) fn flow_object(object: &mut Map<String, Value>) {
    rename(object, FLOW_FIELDS);
    for field in FLOW_DROPPED {
        object.remove(*field);
    }
}

/// Maps a step object's fields from the seeds' names to ocflow's.
pub(crate) fn step_object(object: &mut Map<String, Value>) {
    // Seed 004's FileSystemTool input: `{"operation": …, "params": {…}}` inside the input.
    if !object.contains_key("params")
        && let Some(Value::Object(input)) = object.get("sub_task_input")
        && input.get("operation").is_some_and(Value::is_string)
        && input.get("params").is_some_and(Value::is_object)
        && let Some(Value::Object(mut input)) = object.remove("sub_task_input")
    {
        for field in ["operation", "params"] {
            if let Some(value) = input.remove(field)
                && !object.contains_key(field)
            {
                object.insert(field.to_string(), value);
            }
        }
    }
    rename(object, STEP_FIELDS);
    // A message whose tool is an operation's name and that names no operation otherwise.
    if !object.contains_key("operation")
        && let Some(Value::String(tool)) = object.get("tool_name")
        && crate::flow::operations::find(tool).is_some()
    {
        let tool = tool.clone();
        object.insert("operation".into(), Value::String(tool));
    }
    for field in MESSAGE_DROPPED {
        object.remove(*field);
    }
    described_task(object);
    if object.contains_key("operation") {
        for field in STEP_DROPPED {
            object.remove(*field);
        }
    }
}

/// Seed 000's task described in words alone (no operation, no parameters): a model step that
/// does it in text, its role named in its instructions when ocflow has no role of that name.
fn described_task(object: &mut Map<String, Value>) {
    if object.contains_key("operation") || object.contains_key("params") {
        return;
    }
    let Some(description) = object
        .get("description")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(str::to_string)
    else {
        return;
    };
    let foreign = object
        .get("role")
        .and_then(Value::as_str)
        .filter(|role| !crate::flow::roles::is_built_in(role))
        .map(str::to_string);
    let mut instructions = match &foreign {
        Some(role) => format!("As {role}: {description}"),
        None => description,
    };
    if foreign.is_some() {
        object.remove("role");
    }
    match object.remove("raw_instruction") {
        Some(Value::String(raw)) if !raw.trim().is_empty() => {
            instructions.push_str(&format!("\n\nInput, as the plan gives it: {}", raw.trim()));
        }
        Some(Value::Null) | Some(Value::String(_)) | None => {}
        Some(raw) => instructions.push_str(&format!("\n\nInput, as the plan gives it: {raw}")),
    }
    let mut params = Map::new();
    params.insert("instructions".into(), Value::String(instructions));
    object.insert("operation".into(), Value::String(DESCRIBED.into()));
    object.insert("params".into(), Value::Object(params));
}

fn rename(object: &mut Map<String, Value>, fields: &[(&str, &str)]) {
    for (theirs, ours) in fields {
        if let Some(value) = object.remove(*theirs)
            && !object.contains_key(*ours)
        {
            object.insert((*ours).to_string(), value);
        }
    }
}

/// The field of a step's `result.json` that holds what it produced, as seed 004's
/// `result_data` names it: a file's content, a summary, a command's output, else the message.
pub fn result_data_field(operation: &str) -> &'static str {
    crate::flow::operations::find(operation)
        .and_then(|op| op.result)
        .unwrap_or("message")
}

/// `text` with seed 004's `@{outputs.STEP.result_data}` references written as ocflow's:
/// `operation_of` gives a step's operation by id (an unknown step is left for validation).
pub(crate) fn references(text: &str, operation_of: &dyn Fn(&str) -> Option<String>) -> String {
    if !RESULT_DATA.iter().any(|name| text.contains(name)) {
        return text.to_string();
    }
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("@{outputs.") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let Some(close) = after.find('}') else {
            // Unclosed: the rest is kept as it is (validation names the broken reference).
            rest = after;
            break;
        };
        let inner = &after["@{outputs.".len()..close];
        let mut parts = inner.splitn(2, '.');
        let (step, field) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        match operation_of(step) {
            Some(operation) if RESULT_DATA.contains(&field) => {
                out.push_str(&format!(
                    "@{{outputs.{step}.{}}}",
                    result_data_field(&operation)
                ));
            }
            _ => out.push_str(&after[..=close]),
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unclosed_reference_keeps_the_text_once() {
        let text = "see @{outputs.a.result_data and more";
        assert_eq!(references(text, &|_| Some("read_file".into())), text);
    }
    use serde_json::json;

    #[test]
    fn seed_004s_step_fields_are_ocflows() {
        let Value::Object(mut step) = json!({"stepId": "s1", "isFinalAnswer": true,
            "sub_task_input": {"operation": "read_file", "params": {"file_path": "a.py"}},
            "assigned_agent_role": "reviewer"})
        else {
            unreachable!()
        };
        step_object(&mut step);
        assert_eq!(
            Value::Object(step),
            json!({"id": "s1", "final_answer": true, "operation": "read_file",
                   "params": {"file_path": "a.py"}, "role": "reviewer"})
        );
    }

    /// Issue 37: seed 004's task message in its full shape was refused for its `tool_name`.
    #[test]
    fn seed_004s_task_message_reads_as_a_step() {
        let Value::Object(mut message) = json!({"sub_task_id": "read_notes",
            "parent_task_id": "task-9", "assigned_agent_role": "reviewer",
            "tool_name": "FileSystemTool",
            "sub_task_input": {"operation": "read_file", "params": {"file_path": "notes.md"}},
            "context_summary": "the notes the user asked about",
            "api_keys_config_ref": "research-profile"})
        else {
            unreachable!()
        };
        step_object(&mut message);
        assert_eq!(
            Value::Object(message),
            json!({"id": "read_notes", "role": "reviewer", "operation": "read_file",
                   "params": {"file_path": "notes.md"},
                   "description": "the notes the user asked about"})
        );
        // A tool named as an operation is the step's operation.
        let Value::Object(mut named) = json!({"sub_task_id": "r", "tool_name": "read_file",
            "sub_task_input": {"file_path": "notes.md"}})
        else {
            unreachable!()
        };
        step_object(&mut named);
        assert_eq!(
            Value::Object(named),
            json!({"id": "r", "operation": "read_file", "params": {"file_path": "notes.md"}})
        );
    }

    #[test]
    fn seed_000s_tasks_are_steps_and_ours_win_a_clash() {
        let Value::Object(mut flow) = json!({"user_instruction": "do it", "parsed_intent": {},
            "tasks": []})
        else {
            unreachable!()
        };
        flow_object(&mut flow);
        assert_eq!(Value::Object(flow), json!({"task": "do it", "steps": []}));
        let Value::Object(mut step) = json!({"task_id": "t1", "id": "mine",
            "operation": "run_tests", "required_role": "tester", "dependencies": ["a"],
            "status": "PENDING", "output": null})
        else {
            unreachable!()
        };
        step_object(&mut step);
        assert_eq!(
            Value::Object(step),
            json!({"id": "mine", "operation": "run_tests", "role": "tester",
                   "depends_on": ["a"]})
        );
    }

    #[test]
    fn result_data_reads_the_field_that_holds_the_result() {
        let operation = |id: &str| (id == "r").then(|| "read_file".to_string());
        assert_eq!(
            references(
                "x @{outputs.r.result_data} @{outputs.q.result_data} y",
                &operation
            ),
            "x @{outputs.r.content} @{outputs.q.result_data} y"
        );
        assert_eq!(
            references("@{outputs.r.message}", &operation),
            "@{outputs.r.message}"
        );
    }
}
