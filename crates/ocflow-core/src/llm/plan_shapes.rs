//! Plans of one shape on the files a task names: a change of each (`modify_code` with the task
//! as instructions) or a question about the first (`analyze_code` with the task as query).
//! Shown to a model whose plan touched none of them, as a hint it may copy; and, for a change
//! only, made by ocflow itself when the model's own plans could not be used at all, once the
//! model has said the task asks for one. The model still decides whether the task is a change,
//! a question or nothing a repository can do: ocflow only writes the plan a small model could
//! not (a real Qwen2.5-Coder-0.5B planned `read_file .docs/instructions.md` for five of ten
//! Exercism exercises, the same plan again when told, and so never ran the change it could
//! write when asked for the file alone). Such a plan must be shown done by a command that fails
//! before it and passes after it: the repository's tests, else the model's reproduction.

use serde_json::{Value, json};

use crate::flow::operations;
use crate::flow::test_command::is_test_file;
use crate::llm::answer;
use crate::llm::client::Llm;
use ocflow_model::flow::Flow;
use ocflow_model::llm::{ChatRequest, LlmError, Message, ModelSettings};
use ocflow_model::prompt_template;
use ocflow_model::repo_path::RepoPath;

const ASK: &str = include_str!("../../../../prompts/plan_shape.md");

/// What a task asks for, as a plan's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A change to the files the task names.
    Change,
    /// An answer to a question about them.
    Question,
}

/// The model's choice when ocflow is to plan for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Choice {
    /// The task asks for a change of the files it names: ocflow plans it.
    Change,
    /// The task only asks a question: ocflow plans none (see `Planner::plan_for_the_model`).
    Answer,
    /// No change to this repository can do the task, and why.
    Refuse(String),
}

/// The most of the task a plan shown as a hint carries (its whole text, mostly).
const TASK_IN_A_HINT: usize = 1500;

/// The files a plan of a shape is made on: those the task names that are no tests (a test the
/// task names is how the fault shows, rarely where it is). None: no such plan.
pub(crate) fn targets(named: &[RepoPath]) -> Vec<&RepoPath> {
    named.iter().filter(|p| !is_test_file(p.as_str())).collect()
}

/// A one-step plan on `file`, in the answer's own form, the task collapsed to one line and cut
/// to `TASK_IN_A_HINT` characters: a hint the model may copy. The step carries the task itself
/// (a code step's model is shown its instructions and the file).
pub(crate) fn hint(file: &RepoPath, shape: Shape, task: &str) -> String {
    let mut task = task.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some((at, _)) = task.char_indices().nth(TASK_IN_A_HINT) {
        task.truncate(at);
        task.push_str(" …");
    }
    json!({"steps": [step_on(file, shape, &task)]}).to_string()
}

/// The plan ocflow makes for a change: one `modify_code` of each of `files` with the whole task
/// as its instructions, the steps' ids told apart where files share a stem.
pub(crate) fn change(files: &[&RepoPath], task: &str) -> String {
    let mut steps: Vec<Value> = Vec::new();
    for file in files {
        let mut step = step_on(file, Shape::Change, task);
        let id = step["id"].as_str().unwrap_or("change").to_string();
        let taken = |id: &str| steps.iter().any(|s| s["id"] == json!(id));
        let unique = (1..)
            .map(|n| {
                if n == 1 {
                    id.clone()
                } else {
                    format!("{id}_{n}")
                }
            })
            .find(|candidate| !taken(candidate))
            .unwrap_or(id);
        step["id"] = json!(unique);
        steps.push(step);
    }
    json!({"steps": steps}).to_string()
}

/// Makes the changes of a plan ocflow made wait for its reproduction: a reproduction that shows
/// no problem leaves the change without evidence, so the coder is not asked for it (a change
/// no check can show, of an exercise whose tests already passed, had broken it).
pub(crate) fn changes_wait_for_the_reproduction(flow: &mut Flow) {
    let reproductions: Vec<String> = flow
        .steps
        .iter()
        .filter(|s| operations::find(&s.operation).is_some_and(|op| op.reproduces))
        .map(|s| s.id.clone())
        .collect();
    for step in &mut flow.steps {
        if step.operation == "modify_code" {
            for id in &reproductions {
                if !step.depends_on.contains(id) {
                    step.depends_on.push(id.clone());
                }
            }
        }
    }
}

fn step_on(file: &RepoPath, shape: Shape, task: &str) -> Value {
    let path = file.as_str();
    let stem = path.rsplit('/').next().unwrap_or(path);
    let stem = stem.split('.').next().unwrap_or(stem);
    let id: String = stem
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    match shape {
        Shape::Change => json!({"id": format!("change_{id}"), "operation": "modify_code",
            "params": {"file_path": path, "instructions": task}}),
        Shape::Question => json!({"id": format!("answer_{id}"), "operation": "analyze_code",
            "params": {"file_path": path, "query": task}, "final_answer": true}),
    }
}

/// The most tokens the shape question's answer may take.
const ANSWER_TOKENS: u32 = 200;

/// What the model's answer to the shape question was, and its choice when it made one.
pub(crate) struct Asked {
    pub(crate) answer: String,
    pub(crate) choice: Option<Choice>,
}

/// Asks the model, in a conversation of its own (short: a small model that could not plan is
/// asked one thing), which shape the task asks for on `files`. One answer; one that is no
/// choice leaves the planning's own failure standing.
pub(crate) async fn ask(
    llm: &Llm,
    settings: &ModelSettings,
    files: &[&RepoPath],
    task: &str,
) -> Result<Asked, LlmError> {
    let names: Vec<&str> = files.iter().map(|f| f.as_str()).collect();
    // A word and a reason: the budget reserves no more than the answer needs.
    let mut settings = settings.clone();
    settings.max_tokens = Some(
        settings
            .max_tokens
            .map_or(ANSWER_TOKENS, |m| m.min(ANSWER_TOKENS)),
    );
    let request = ChatRequest {
        purpose: "planner".into(),
        settings,
        messages: vec![Message::user(prompt_template::fill_with(
            ASK.trim(),
            &[("files", &names.join(", ")), ("task", task)],
        ))],
        json: true,
        schema: Some(schema()),
        optional: false,
    };
    let reply = llm.chat(&request).await?;
    let choice = if reply.is_truncated() {
        None
    } else {
        choice(&reply.content)
    };
    Ok(Asked {
        answer: reply.content,
        choice,
    })
}

/// The choice in an answer: `{"choice": "change" | "answer" | "refuse", "why": "…"}`.
fn choice(content: &str) -> Option<Choice> {
    let extracted = answer::extract_json(content).ok()?;
    let value: Value = serde_json::from_str(&extracted.json).ok()?;
    let why = value
        .get("why")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|w| !w.is_empty());
    match value.get("choice")?.as_str()?.trim() {
        "change" => Some(Choice::Change),
        "answer" => Some(Choice::Answer),
        "refuse" => Some(Choice::Refuse(why.unwrap_or("no reason given").to_string())),
        _ => None,
    }
}

/// The answer's schema, for servers that constrain decoding by one.
fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "choice": {"type": "string", "enum": ["change", "answer", "refuse"]},
            "why": {"type": "string"}
        },
        "required": ["choice"],
        "additionalProperties": false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> RepoPath {
        RepoPath::parse(p).unwrap()
    }

    #[test]
    fn the_choice_is_read_from_the_answer() {
        assert_eq!(choice(r#"{"choice": "change"}"#), Some(Choice::Change));
        assert_eq!(
            choice("```json\n{\"choice\": \"change\"}\n```"),
            Some(Choice::Change)
        );
        assert_eq!(
            choice(r#"{"choice": "answer", "why": ""}"#),
            Some(Choice::Answer)
        );
        assert_eq!(
            choice(r#"{"choice": "refuse", "why": " needs a phone "}"#),
            Some(Choice::Refuse("needs a phone".into()))
        );
        for none in [r#"{"choice": "both"}"#, r#"{"change": true}"#, "change", ""] {
            assert_eq!(choice(none), None, "{none}");
        }
    }

    #[test]
    fn a_change_is_planned_on_every_named_file_that_is_no_test() {
        let named = [
            path("a.py"),
            path("tests/test_a.py"),
            path("lib/b.py"),
            path("b.js"),
        ];
        let files = targets(&named);
        assert_eq!(files.len(), 3);
        let plan: Value = serde_json::from_str(&change(&files, "Do X.\n\nThen Y.")).unwrap();
        let steps = plan["steps"].as_array().unwrap();
        let ids: Vec<&str> = steps.iter().map(|s| s["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["change_a", "change_b", "change_b_2"]);
        // The whole task, as the user wrote it.
        assert_eq!(
            steps[0]["params"]["instructions"],
            json!("Do X.\n\nThen Y.")
        );
        assert_eq!(
            serde_json::from_str::<Value>(&change(&[], "Do X.")).unwrap()["steps"],
            json!([])
        );
    }
}
