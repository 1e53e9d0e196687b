//! What an ACP client is shown of a flow, made from ocflow's own records: the plan (from
//! `flow.json`) as the protocol's plan, each step as a tool call with its status and message,
//! the changes as diff content, and ocflow's words as agent messages. Pure functions of JSON,
//! so the mapping is tested without a client.

use std::path::Path;

use serde_json::{Value, json};

/// The text of a prompt's content blocks: the text blocks, a linked file's URI, and an embedded
/// resource's text under its URI. An error names what is missing.
pub(crate) fn prompt_text(blocks: &Value) -> Result<String, String> {
    let blocks = blocks
        .as_array()
        .ok_or("`prompt` must be a list of content blocks")?;
    let mut parts = Vec::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => parts.push(block["text"].as_str().unwrap_or_default().to_string()),
            Some("resource_link") => {
                parts.push(format!(
                    "(file: {})",
                    block["uri"].as_str().unwrap_or_default()
                ));
            }
            Some("resource") => {
                let resource = &block["resource"];
                let uri = resource["uri"].as_str().unwrap_or_default();
                if let Some(text) = resource["text"].as_str() {
                    parts.push(format!("{uri}:\n```\n{text}\n```"));
                } else {
                    parts.push(format!("(file: {uri})"));
                }
            }
            // Images and audio: a flow's model reads text only (`promptCapabilities` says so).
            _ => {}
        }
    }
    let text = parts.join("\n").trim().to_string();
    if text.is_empty() {
        return Err("the prompt holds no text: write the coding task".into());
    }
    Ok(text)
}

/// The protocol's kind of tool call for a step of `operation`.
pub(crate) fn tool_kind(operation: &str) -> &'static str {
    match operation {
        "read_file" | "list_files" => "read",
        "search_code" => "search",
        "write_file" | "modify_code" | "edit_code" | "refactor_function" => "edit",
        "execute_shell_command" | "run_tests" | "reproduce" => "execute",
        "analyze_code" | "ask_model" | "generate_summary" => "think",
        _ => "other",
    }
}

/// A step's title: its description, else its operation and the file or command it works on.
pub(crate) fn step_title(step: &Value) -> String {
    if let Some(description) = step["description"]
        .as_str()
        .filter(|d| !d.trim().is_empty())
    {
        return description.trim().to_string();
    }
    let operation = step["operation"].as_str().unwrap_or("step");
    let params = &step["params"];
    match params["file_path"]
        .as_str()
        .or_else(|| params["command"].as_str())
    {
        Some(what) => format!("{operation} {what}"),
        None => operation.to_string(),
    }
}

/// The flow's steps as the protocol's plan, each with its status (`pending`, `in_progress`,
/// `completed`) from `status_of`.
pub(crate) fn plan(flow: &Value, status_of: impl Fn(&str) -> &'static str) -> Value {
    let entries: Vec<Value> = flow["steps"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|step| {
            let id = step["id"].as_str().unwrap_or_default();
            json!({"content": step_title(step), "priority": "medium", "status": status_of(id)})
        })
        .collect();
    json!({"sessionUpdate": "plan", "entries": entries})
}

/// A step's tool call id: `TASK/STEP`, unique across a session's flows (their steps' ids
/// repeat: `fix`, `reproduce`).
pub(crate) fn call_id(task: &str, step: &str) -> String {
    format!("{task}/{step}")
}

/// A step that started: a tool call in progress, located at its file when it has one.
pub(crate) fn step_started(task: &str, step: &Value, repo: &Path) -> Value {
    let id = step["id"].as_str().unwrap_or_default();
    let operation = step["operation"].as_str().unwrap_or_default();
    let mut call = json!({
        "sessionUpdate": "tool_call",
        "toolCallId": call_id(task, id),
        "title": step_title(step),
        "kind": tool_kind(operation),
        "status": "in_progress",
        "rawInput": step["params"],
    });
    if let Some(file) = step["params"]["file_path"].as_str() {
        call["locations"] = json!([{"path": repo.join(file)}]);
    }
    call
}

/// A step that ended (`step_finished`): its tool call completed or failed, with its message.
/// With `result` (the step's `result.json`), a command's output too: the end of what it
/// printed, in a fence.
pub(crate) fn step_finished(task: &str, event: &Value, result: Option<&Value>) -> Value {
    let status = if event["status"] == "succeeded" {
        "completed"
    } else {
        "failed"
    };
    let mut content = vec![text_content(event["message"].as_str().unwrap_or_default())];
    if let Some(output) = result.and_then(command_output) {
        content.push(text_content(&output));
    }
    json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": call_id(task, event["step"].as_str().unwrap_or_default()),
        "status": status,
        "content": content,
    })
}

/// The most of a command's output a tool call shows (its end).
const OUTPUT_CHARS: usize = 2000;

/// A command step's output (stdout, then stderr), its last `OUTPUT_CHARS` characters in a
/// fence; none for a step that ran no command or printed nothing.
fn command_output(result: &Value) -> Option<String> {
    let printed: String = ["stdout", "stderr"]
        .iter()
        .filter_map(|name| result[*name].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let printed = printed.trim();
    if printed.is_empty() {
        return None;
    }
    let count = printed.chars().count();
    let tail: String = printed
        .chars()
        .skip(count.saturating_sub(OUTPUT_CHARS))
        .collect();
    let cut = if count > OUTPUT_CHARS { "…" } else { "" };
    let fence = ocflow_model::output::fence_for(&tail);
    Some(format!("{fence}\n{cut}{tail}\n{fence}"))
}

/// One changed file as the protocol's diff content (`old` absent for a new file; a deleted
/// file's new text is empty).
pub(crate) fn diff(path: &Path, old: Option<&str>, new: Option<&str>) -> Value {
    let mut diff = json!({"type": "diff", "path": path, "newText": new.unwrap_or_default()});
    if let Some(old) = old {
        diff["oldText"] = json!(old);
    }
    diff
}

/// Text as a tool call's content.
pub(crate) fn text_content(text: &str) -> Value {
    json!({"type": "content", "content": {"type": "text", "text": text}})
}

/// ocflow's words to the person, as an agent message.
pub(crate) fn message(text: &str) -> Value {
    json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
}

/// The task as the person's message, for a session loaded again.
pub(crate) fn user_message(text: &str) -> Value {
    json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}})
}

/// What a flow's end says: its answer first (a question's), then its state and why, then the
/// summary's words.
pub(crate) fn ending(finished: &Value) -> String {
    let mut text = String::new();
    if let Some(answer) = finished["final_answer"]["text"]
        .as_str()
        .filter(|a| !a.trim().is_empty())
    {
        text.push_str(answer.trim());
        text.push_str("\n\n");
    }
    let state = finished["state"].as_str().unwrap_or("ended");
    text.push_str(&format!(
        "Task {} {state}",
        finished["task_id"].as_str().unwrap_or_default()
    ));
    if let Some(reason) = finished["reason"].as_str().filter(|r| !r.is_empty()) {
        text.push_str(&format!(": {reason}"));
    }
    text.push('.');
    if let Some(summary) = finished["summary_text"]
        .as_str()
        .filter(|s| !s.trim().is_empty())
    {
        text.push_str("\n\n");
        text.push_str(summary.trim());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_is_its_text_its_links_and_its_embedded_files() {
        let blocks = json!([
            {"type": "text", "text": "Fix the rounding in"},
            {"type": "resource_link", "uri": "file:///r/money.py", "name": "money.py"},
            {"type": "resource", "resource": {"uri": "file:///r/t.py", "text": "x = 1"}},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        ]);
        assert_eq!(
            prompt_text(&blocks).unwrap(),
            "Fix the rounding in\n(file: file:///r/money.py)\nfile:///r/t.py:\n```\nx = 1\n```"
        );
        let empty = prompt_text(&json!([{"type": "image", "data": "", "mimeType": "image/png"}]));
        assert!(empty.unwrap_err().contains("holds no text"));
        assert!(prompt_text(&json!("fix it")).is_err());
    }

    #[test]
    fn steps_become_a_plan_and_tool_calls() {
        let flow = json!({"steps": [
            {"id": "fix", "operation": "modify_code",
             "params": {"file_path": "money.py", "instructions": "round half up"}},
            {"id": "test", "operation": "run_tests", "description": "run the tests",
             "params": {"command": "pytest -q"}},
        ]});
        let plan = plan(
            &flow,
            |id| if id == "fix" { "completed" } else { "pending" },
        );
        assert_eq!(
            plan["entries"],
            json!([
                {"content": "modify_code money.py", "priority": "medium", "status": "completed"},
                {"content": "run the tests", "priority": "medium", "status": "pending"},
            ])
        );
        let started = step_started("t", &flow["steps"][0], Path::new("/r"));
        assert_eq!(started["toolCallId"], json!("t/fix"));
        assert_eq!(started["kind"], json!("edit"));
        assert_eq!(started["locations"], json!([{"path": "/r/money.py"}]));
        let result = json!({"stdout": "F\n1 failed", "stderr": ""});
        let event =
            json!({"step": "test", "status": "failed", "message": "tests failed: 1 failed"});
        let finished = step_finished("t", &event, Some(&result));
        // The command's output after its message, in a fence.
        assert_eq!(
            finished["content"][1]["content"]["text"],
            json!("```\nF\n1 failed\n```")
        );
        assert_eq!(finished["status"], json!("failed"));
        assert_eq!(
            finished["content"][0]["content"]["text"],
            json!("tests failed: 1 failed")
        );
    }

    #[test]
    fn an_ending_gives_the_answer_first() {
        let finished = json!({"task_id": "t", "state": "succeeded", "reason": null,
            "final_answer": {"text": "It returns None."}, "summary_text": "Read stats.py."});
        assert_eq!(
            ending(&finished),
            "It returns None.\n\nTask t succeeded.\n\nRead stats.py."
        );
    }
}
