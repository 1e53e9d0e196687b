//! What "done" means for a flow: the deliverables its plan names (or that are inferred from its
//! steps when it names none), and the outcome of checking each one at the flow's end. A flow
//! succeeds only when every deliverable holds: never because of the words of its task.

use serde::{Deserialize, Serialize};

/// What a flow must deliver, saved in `flow.json` beside its steps. Validation fills in the
/// steps that deliver each one; the engine checks them all when the flow ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Deliverables {
    /// Files the flow creates, changes or deletes (repository-relative): each must differ from
    /// the repository as the flow found it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// Commands that must pass on the flow's final files: each is run by a step after every step
    /// that changes files, and its last run must succeed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandDeliverable>,
    /// The question the flow answers, when its task asks one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<AnswerDeliverable>,
    /// Read from the steps because the flow named none (a seed plan, an older flow): shown as
    /// such.
    #[serde(default, skip_serializing_if = "is_false")]
    pub inferred: bool,
    /// Inferred from steps a model planned: their commands check the change and deliver
    /// nothing themselves (a 0.5B model planned a command that passes for "email it to
    /// Alice"). A flow a person wrote delivers its commands' passing too.
    #[serde(default, skip_serializing_if = "is_false")]
    pub planned: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// A command that must pass at the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandDeliverable {
    /// The command line; absent for a `run_tests` step that lets the library choose the
    /// repository's test command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The step that runs it last, after every step that changes files (set by validation).
    pub step: String,
    /// The step that ran it before any change to show the task's problem (`reproduce`): its
    /// run then is the other half of the evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reproduced_by: Option<String>,
    /// Who requires it, when not the plan: it is kept through every revision, whatever a
    /// recovery makes of the steps that run it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Required>,
}

/// Why a command must pass whatever the plan says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Required {
    /// The task names it (its test command, or a test file it names).
    Task,
    /// The repository's tests, for a change the model wrote no reproduction for: tests the flow
    /// changed cannot show it done.
    RepositoryTests,
}

/// The question a flow answers, and the step whose model answers it from the files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerDeliverable {
    /// The question, in the plan's words.
    pub question: String,
    /// The files the question is about: the answering step is given each of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// The step whose result is the answer (marked `final_answer`; set by validation).
    pub step: String,
}

impl Deliverables {
    /// Whether the flow names nothing to deliver at all.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.commands.is_empty() && self.answer.is_none()
    }

    /// One line for people: `utils.py changed; `pytest -q` passes; an answer to "…"`.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self.files.iter().map(|f| format!("{f} changed")).collect();
        parts.extend(self.commands.iter().map(CommandDeliverable::describe));
        if let Some(answer) = &self.answer {
            parts.push(format!("an answer to \"{}\"", answer.question));
        }
        if parts.is_empty() {
            return "nothing".into();
        }
        let joined = parts.join("; ");
        if self.inferred {
            format!("{joined} (inferred from the steps)")
        } else {
            joined
        }
    }
}

impl CommandDeliverable {
    /// `` `pytest -q` passes ``, or `the tests pass (step test)` without a command.
    pub fn describe(&self) -> String {
        match &self.command {
            Some(command) if self.reproduced_by.is_some() => {
                format!("`{command}` fails before the change and passes after it")
            }
            Some(command) => format!("`{command}` passes"),
            None => format!("the tests pass (step {})", self.step),
        }
    }
}

/// The kind of a deliverable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum DeliverableKind {
    File,
    Command,
    Answer,
}

/// One deliverable as the engine found it at the flow's end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct DeliverableCheck {
    pub kind: DeliverableKind,
    /// What it is: the file's path, the command, the question.
    pub what: String,
    /// Whether it holds.
    pub met: bool,
    /// The evidence, or why it does not hold: "changed by step fix", "step test failed", …
    pub detail: String,
    /// Inferred from the steps (the flow named no deliverables).
    #[serde(default, skip_serializing_if = "is_false")]
    pub inferred: bool,
}

impl DeliverableCheck {
    /// One line for people: `✓ utils.py changed (by step fix)`.
    pub fn line(&self) -> String {
        let mark = if self.met { "met" } else { "NOT met" };
        let what = match self.kind {
            DeliverableKind::File => format!("file {}", self.what),
            DeliverableKind::Command => format!("command `{}`", self.what),
            DeliverableKind::Answer => format!("answer to \"{}\"", self.what),
        };
        let inferred = if self.inferred { ", inferred" } else { "" };
        format!("{what}: {mark} ({}{inferred})", self.detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deliverables_read_back_as_written_and_leave_out_what_is_empty() {
        let written = Deliverables {
            files: vec!["utils.py".into()],
            commands: vec![CommandDeliverable {
                command: Some("pytest -q".into()),
                step: "test".into(),
                reproduced_by: None,
                required: None,
            }],
            answer: None,
            inferred: false,
            planned: false,
        };
        let value = serde_json::to_value(&written).unwrap();
        assert_eq!(
            value,
            json!({"files": ["utils.py"], "commands": [{"command": "pytest -q", "step": "test"}]})
        );
        assert_eq!(
            serde_json::from_value::<Deliverables>(value).unwrap(),
            written
        );
        assert_eq!(written.describe(), "utils.py changed; `pytest -q` passes");
        assert!(Deliverables::default().is_empty());
    }
}
