//! The instructions file, `open_codex_instructions.md`: what one step must do, readable by a
//! person and complete enough for `python -m open_codex_lib FILE` to run the step alone. The
//! Markdown comes from the template in `prompts/`; the library reads the fenced
//! `json ocflow-step` block. It never contains the API key.

use serde_json::{Map, Value};

use crate::flow::operations::{self, Access, OperationSpec, ParamMeaning, Reads};
use crate::task::workspace;
use ocflow_model::flow::{Flow, Step};
use ocflow_model::prompt_template::{self, Braces};
use ocflow_model::repo_path::RepoPath;
use ocflow_model::step_spec::{EarlierStep, StepSpec};

/// The template, from `prompts/step_instructions.md`.
const TEMPLATE: &str = include_str!("../../../../prompts/step_instructions.md");

/// One earlier step as the context section lists it.
pub(crate) struct DoneStep<'a> {
    pub(crate) id: &'a str,
    pub(crate) operation: &'a str,
    pub(crate) message: &'a str,
}

/// Renders the whole instructions file. `dependencies` are the steps in the step's
/// `depends_on`, which validation makes hold every step its parameters read (a reference or a
/// step parameter). The context lists only those, never the whole chain: a file that listed
/// every ancestor grew with the flow's depth and a long chain wrote quadratic bytes (issue 28).
/// Each entry names the step's own instructions file, so a person can still walk the chain back.
pub(crate) fn render(spec: &StepSpec, step: &Step, dependencies: &[DoneStep<'_>]) -> String {
    let inputs = if spec.input_files.is_empty() {
        match spec.work_dir {
            Some(_) => "- the whole repository, with every earlier change applied, at `work_dir`"
                .to_string(),
            None => "- none".to_string(),
        }
    } else {
        spec.input_files
            .iter()
            .map(|f| format!("- `{f}` (staged at `input/{f}`)"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let outputs = match operations::find(&spec.operation).map(|op| op.access) {
        Some(Access::View) => {
            "- files the command creates, changes or deletes in `work_dir` are captured by ocflow \
             as this step's outputs"
                .to_string()
        }
        _ => "- write every new or changed file under `output/`, at its repository-relative path; \
              report deletions in `deleted_files`"
            .to_string(),
    };
    let mut context = vec![format!(
        "- Role: {}",
        step.role.as_deref().unwrap_or("(none)")
    )];
    if let Some(description) = &step.description {
        context.push(format!("- Purpose: {description}"));
    }
    if dependencies.is_empty() {
        context.push("- This step depends on no other step.".into());
    } else {
        context.push("- Steps this one depends on:".into());
        context.extend(dependencies.iter().map(context_entry));
    }
    let params = spec
        .params
        .iter()
        .map(|(name, value)| format!("- `{name}`: {}", preview(value)))
        .collect::<Vec<_>>()
        .join("\n");
    let step_json = serde_json::to_string_pretty(spec).unwrap_or_else(|_| "{}".into());
    prompt_template::fill_with(
        TEMPLATE,
        &[
            ("step_id", &spec.step_id),
            ("operation", &spec.operation),
            ("task", &one_line(&spec.task)),
            ("goal", &goal(spec)),
            ("inputs", &inputs),
            ("outputs", &outputs),
            ("context", &context.join("\n")),
            ("params", if params.is_empty() { "- none" } else { &params }),
            ("step_json", &step_json),
        ],
    )
}

/// One context line: the step, what it reported, and where its result, its outputs and its own
/// instructions are, relative to this file's directory as every path in the file is.
fn context_entry(step: &DoneStep<'_>) -> String {
    let id = step.id;
    format!(
        "  - `{id}` ({}): {}; result `../{id}/{}`, output `../{id}/{}`, instructions `../{id}/{}`",
        step.operation,
        one_line(step.message),
        workspace::RESULT_FILE,
        workspace::OUTPUT_DIR,
        workspace::INSTRUCTIONS_FILE,
    )
}

/// One sentence saying what the step does: the first of its operation's declared goal lines
/// whose parameters the step gives as text.
fn goal(spec: &StepSpec) -> String {
    goal_of(&spec.operation, &spec.params)
}

fn goal_of(operation: &str, params: &serde_json::Map<String, Value>) -> String {
    let text = |name: &str| params.get(name).and_then(Value::as_str).unwrap_or("");
    let line = operations::find(operation).and_then(|op| {
        op.goal
            .iter()
            .find(|line| line.when.iter().all(|name| !text(name).is_empty()))
    });
    let Some(line) = line else {
        return format!("Perform `{operation}`.");
    };
    prompt_template::fill(line.text, Braces::Single, |name| Some(one_line(text(name))))
}

fn one_line(text: &str) -> String {
    let first: String = text
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(200)
        .collect();
    if first.len() < text.len() {
        format!("{first} …")
    } else {
        first
    }
}

fn preview(value: &Value) -> String {
    match value {
        Value::String(text) if text.contains('\n') || text.len() > 200 => {
            format!(
                "({} bytes, {} lines) {}",
                text.len(),
                text.lines().count(),
                one_line(text)
            )
        }
        Value::String(text) => format!("`{text}`"),
        other => other.to_string(),
    }
}

/// The file parameters of a step that are staged into its `input/`.
pub(crate) fn staged_paths(step: &Step) -> Vec<RepoPath> {
    let Some(spec) = operations::find(&step.operation) else {
        return Vec::new();
    };
    spec.params
        .iter()
        .filter(|p| p.meaning == operations::ParamMeaning::FilePath)
        .filter_map(|p| step.params.get(p.name).and_then(Value::as_str))
        .filter_map(|raw| RepoPath::parse(raw).ok())
        .collect()
}

/// The earlier steps whose results a step is given (`steps` in its instructions), in flow
/// order: those its step-reference parameters name, or for an operation that reads them all
/// when it names none (`generate_summary`), every step it depends on (docs/step-contract.md).
pub(crate) fn earlier_steps(flow: &Flow, step: &Step, spec: &OperationSpec) -> Map<String, Value> {
    let named: Vec<&str> = spec
        .params
        .iter()
        .filter(|p| p.meaning == ParamMeaning::StepRef)
        .filter_map(|p| step.params.get(p.name).and_then(Value::as_str))
        .collect();
    let ids: Vec<&str> = if named.is_empty() && spec.reads == Reads::NamedOrAncestors {
        let ancestors = flow.ancestors(&step.id);
        flow.steps
            .iter()
            .map(|s| s.id.as_str())
            .filter(|id| ancestors.contains(*id))
            .collect()
    } else {
        named
    };
    ids.into_iter()
        .map(|id| {
            let earlier = EarlierStep {
                result: format!("../{id}/{}", workspace::RESULT_FILE),
                output_dir: format!("../{id}/{}", workspace::OUTPUT_DIR),
            };
            (
                id.to_string(),
                serde_json::to_value(earlier).unwrap_or(Value::Null),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn goal_with(operation: &str, params: Value) -> String {
        goal_of(operation, params.as_object().unwrap())
    }

    /// The declared goal lines say what the name matches they replaced said, word for word.
    #[test]
    fn every_operation_has_the_goal_line_it_always_had() {
        let cases = [
            (
                "read_file",
                json!({"file_path": "a.py"}),
                "Read `a.py` and return its content.",
            ),
            (
                "write_file",
                json!({"file_path": "a.py", "content_from_step": "s1"}),
                "Write `a.py` with the content produced by step `s1`.",
            ),
            (
                "write_file",
                json!({"file_path": "a.py", "instructions": "a parser\nin two parts"}),
                "Write a new `a.py`: a parser …",
            ),
            (
                "write_file",
                json!({"file_path": "a.py", "content": "x"}),
                "Write `a.py` with the given content.",
            ),
            (
                "modify_code",
                json!({"file_path": "a.py", "instructions": "fix it"}),
                "Change `a.py`: fix it",
            ),
            (
                "refactor_function",
                json!({"file_path": "a.py", "instructions": "tidy"}),
                "Change `a.py`: tidy",
            ),
            (
                "analyze_code",
                json!({"file_path": "a.py"}),
                "Analyse `a.py`.",
            ),
            (
                "analyze_code",
                json!({"file_path": "a.py", "query": "bugs"}),
                "Analyse `a.py` for: bugs.",
            ),
            (
                "execute_shell_command",
                json!({"command": "make"}),
                "Run `make` at the repository root.",
            ),
            (
                "run_tests",
                json!({}),
                "Run the repository's tests and report the results.",
            ),
            (
                "run_tests",
                json!({"command": "pytest"}),
                "Run the tests with `pytest` and report the results.",
            ),
            (
                "generate_summary",
                json!({}),
                "Summarise what the earlier steps did.",
            ),
            ("list_files", json!({}), "List the files under `.`."),
            (
                "list_files",
                json!({"path": "src"}),
                "List the files under `src`.",
            ),
            (
                "delete_file",
                json!({"file_path": "a.py"}),
                "Delete `a.py`.",
            ),
            (
                "no_such_operation",
                json!({}),
                "Perform `no_such_operation`.",
            ),
        ];
        for (operation, params, expected) in cases {
            assert_eq!(goal_with(operation, params), expected, "{operation}");
        }
    }

    #[test]
    fn a_brace_that_names_no_parameter_stays() {
        let filled = prompt_template::fill("{a} {} {B} {", Braces::Single, |name| {
            Some(format!("<{name}>"))
        });
        assert_eq!(filled, "<a> {} {B} {");
    }
}
