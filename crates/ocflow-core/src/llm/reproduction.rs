//! The command that shows a task's problem, asked of the model once its plan is valid: one
//! that fails on the repository as it is and must pass after the change. With it a change is
//! done by evidence (the same command failing before and passing after), not because a file
//! changed: a real Qwen2.5-Coder-0.5B rewrote `calculate_metrics` so that it still divided by
//! zero, and nothing else could tell. Asked only where nothing else checks the change: the
//! task names no test to pass, and the plan changes files other than documentation and runs
//! no reproduction of its own.

use std::path::Path;

use serde_json::{Value, json};

use crate::flow::deliverables;
use crate::flow::operations;
use crate::flow::policy::CommandPolicy;
use crate::flow::shell;
use crate::llm::answer;
use crate::llm::client::Llm;
use ocflow_model::flow::Flow;
use ocflow_model::llm::{ChatRequest, LlmError, LlmErrorKind, Message, ModelSettings};
use ocflow_model::prompt_template;

const ASK: &str = include_str!("../../../../prompts/reproduce.md");
const AGAIN: &str = include_str!("../../../../prompts/reproduce_again.md");

/// Extensions of files whose change no command can show: documentation and plain text.
const DOCUMENTATION: &[&str] = &["md", "markdown", "rst", "txt", "adoc"];

/// Whether the model should be asked for a reproduction of `flow`'s problem: it changes a file
/// other than documentation, reproduces nothing itself, and `checked` (the task names no test
/// that must pass) is false.
pub(crate) fn wanted(flow: &Flow, checked: bool) -> bool {
    let reproduces = reproduces(flow);
    let documentation = |path: &str| {
        Path::new(path)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| DOCUMENTATION.contains(&e.to_ascii_lowercase().as_str()))
    };
    !checked
        && !reproduces
        && deliverables::written_paths(flow)
            .iter()
            .any(|path| !documentation(path))
}

/// Whether a step of `flow` reproduces the task's problem before any change (`reproduce`).
pub(crate) fn reproduces(flow: &Flow) -> bool {
    flow.steps
        .iter()
        .any(|s| operations::find(&s.operation).is_some_and(|op| op.reproduces))
}

/// What the model was asked and what it answered, for the caller to save.
pub(crate) struct Asked {
    /// The model's answers, in order (none when it was not asked).
    pub(crate) answers: Vec<String>,
    /// One sentence each for what was added to the flow, or why nothing was.
    pub(crate) notes: Vec<String>,
    /// Why the model's last answer could not be used, when it gave one that was no usable
    /// command twice (not shell, a copy of the question, refused by the policy, cut off): the
    /// change would then be checked by nothing, and the caller stops.
    pub(crate) unusable: Option<String>,
}

/// Answers asked for: the first, and one re-ask with the reason.
const MAX_ANSWERS: usize = 2;

/// A question for one shell command, asked once a plan is valid: the reproduction of a
/// change's problem (this file), or the evidence for a question's answer (`llm::evidence`).
pub(crate) struct CommandQuestion {
    /// The question, `{{task}}` the task.
    pub(crate) ask: &'static str,
    /// The re-ask, `{{why}}` why the answer could not be used.
    pub(crate) again: &'static str,
    /// The call's purpose, as usage counts it.
    pub(crate) purpose: &'static str,
    /// What the command is, in a note: "reproduction of the problem".
    pub(crate) what: &'static str,
    /// Adds the command's steps to the flow; returns notes of what was added.
    pub(crate) add: fn(&mut Flow, &str) -> Vec<String>,
}

/// The reproduction of a change's problem.
pub(crate) const REPRODUCTION: CommandQuestion = CommandQuestion {
    ask: ASK,
    again: AGAIN,
    purpose: "reproduction",
    what: "reproduction of the problem",
    add: deliverables::require_reproduction,
};

/// Asks `question` of the model, continuing the planning conversation (`conversation` ends with
/// its plan), for one command; adds its steps (`question.add`: for a reproduction, a step
/// running it before any change and a check after every change). An answer that is no usable
/// command is asked again once with the reason; `{"command": null}` adds nothing, and says so.
pub(crate) async fn ask_for_command(
    llm: &Llm,
    settings: &ModelSettings,
    policy: &CommandPolicy,
    mut conversation: Vec<Message>,
    flow: &mut Flow,
    question: &CommandQuestion,
) -> Result<Asked, LlmError> {
    conversation.push(Message::user(prompt_template::fill_with(
        question.ask.trim(),
        &[("task", &flow.task)],
    )));
    let nothing = |why: &str| format!("no {}: {why}", question.what);
    let mut asked = Asked {
        answers: Vec::new(),
        notes: Vec::new(),
        unusable: None,
    };
    for _ in 0..MAX_ANSWERS {
        let request = ChatRequest {
            purpose: question.purpose.into(),
            settings: settings.clone(),
            messages: conversation.clone(),
            json: true,
            schema: Some(schema()),
            optional: true,
        };
        let reply = match llm.chat(&request).await {
            Ok(reply) => reply,
            // The plan is what the budget was for: a flow does not pause for its evidence.
            Err(error) if error.kind == LlmErrorKind::BudgetExhausted => {
                asked.notes.push(nothing(&format!(
                    "the budget leaves no room to ask ({error})"
                )));
                asked.unusable = None;
                return Ok(asked);
            }
            Err(error) => return Err(error),
        };
        asked.answers.push(reply.content.clone());
        let why = if reply.is_truncated() {
            "the model's answer was cut off".to_string()
        } else {
            match command(&reply.content) {
                None => {
                    asked.notes.push(nothing("the model gave no command"));
                    asked.unusable = None;
                    return Ok(asked);
                }
                Some(command) => match unusable(question.ask, &command) {
                    Some(why) => format!("the model's `{command}` {why}"),
                    None => {
                        let mut tried = flow.clone();
                        let notes = (question.add)(&mut tried, &command);
                        match policy.check(&tried.steps) {
                            Some(problem) => problem.to_string(),
                            None => {
                                *flow = tried;
                                asked.notes.extend(notes);
                                asked.unusable = None;
                                return Ok(asked);
                            }
                        }
                    }
                },
            }
        };
        asked.unusable = Some(why.clone());
        conversation.push(Message::assistant(reply.content));
        conversation.push(Message::user(prompt_template::fill_with(
            question.again.trim(),
            &[("why", &why)],
        )));
    }
    Ok(asked)
}

/// Why a command cannot show the problem, if it cannot: a copy of the question's own words (a
/// small model copies them: `python3 -c`, "the command"), or no shell command at all.
fn unusable(asked: &str, command: &str) -> Option<&'static str> {
    if asked.contains(command) {
        Some("repeats the question")
    } else if !shell::parses(command) {
        Some("is not a shell command")
    } else {
        None
    }
}

/// The command of an answer: `{"command": "…"}` (or a bare JSON string), trimmed; `None` for
/// `null`, an empty command, or what is not JSON.
fn command(content: &str) -> Option<String> {
    let extracted = answer::extract_json(content).ok()?;
    let value: Value = serde_json::from_str(&extracted.json).ok()?;
    let command = match &value {
        Value::Object(object) => object.get("command")?.as_str()?,
        Value::String(text) => text.as_str(),
        _ => return None,
    };
    Some(command.trim().to_string()).filter(|c| !c.is_empty())
}

/// The answer's schema, for servers that constrain decoding by one.
fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {"command": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
        "required": ["command"],
        "additionalProperties": false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_is_read_from_the_answer() {
        let said = r#"{"command": " python3 -c \"import u\" "}"#;
        assert_eq!(command(said).as_deref(), Some("python3 -c \"import u\""));
        assert_eq!(command("```json\n{\"command\": null}\n```"), None);
        assert_eq!(command(r#"{"command": ""}"#), None);
        assert_eq!(command("no idea"), None);
    }

    /// A real Qwen2.5-Coder-0.5B answered the question's example, `assert f(x) == y`, when the
    /// question had one: the question now has no code to copy, and a copy of its words is none.
    #[test]
    fn copies_of_the_question_and_what_is_not_shell_show_nothing() {
        assert!(
            !ASK.contains("assert f("),
            "the question shows code a model copies"
        );
        assert_eq!(unusable(ASK, "python3 -c"), Some("repeats the question"));
        assert_eq!(unusable(ASK, "the command"), Some("repeats the question"));
        assert_eq!(
            unusable(ASK, "calculate_metrics([])"),
            Some("is not a shell command")
        );
        let real = "python3 -c \"from utils import calculate_metrics as c; assert c([]) == 0\"";
        assert_eq!(unusable(ASK, real), None);
    }
}
