//! The instructions file, `open_codex_instructions.md`: what one step must do, readable by a
//! person and complete enough for `python -m open_codex_lib FILE` to run the step alone. The
//! Markdown comes from the template in `prompts/`; the library reads the fenced
//! `json ocflow-step` block. It never contains the API key.

use serde_json::{Map, Value};

use crate::flow::operations::{self, Access, OperationSpec, ParamMeaning, Reads};
use crate::task::workspace;
use ocflow_model::flow::{Flow, Step};
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

/// Renders the whole instructions file.
pub(crate) fn render(spec: &StepSpec, step: &Step, done: &[DoneStep<'_>]) -> String {
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
    if done.is_empty() {
        context.push("- This step depends on no other step.".into());
    } else {
        context.push("- Steps this one builds on:".into());
        context.extend(
            done.iter()
                .map(|d| format!("  - `{}` ({}): {}", d.id, d.operation, d.message)),
        );
    }
    let params = spec
        .params
        .iter()
        .map(|(name, value)| format!("- `{name}`: {}", preview(value)))
        .collect::<Vec<_>>()
        .join("\n");
    let step_json = serde_json::to_string_pretty(spec).unwrap_or_else(|_| "{}".into());
    TEMPLATE
        .replace("{{step_id}}", &spec.step_id)
        .replace("{{operation}}", &spec.operation)
        .replace("{{task}}", &one_line(&spec.task))
        .replace("{{goal}}", &goal(spec))
        .replace("{{inputs}}", &inputs)
        .replace("{{outputs}}", &outputs)
        .replace("{{context}}", &context.join("\n"))
        .replace(
            "{{params}}",
            if params.is_empty() { "- none" } else { &params },
        )
        // Last: the JSON may contain text that looks like a placeholder.
        .replace("{{step_json}}", &step_json)
}

/// One sentence saying what the step does.
fn goal(spec: &StepSpec) -> String {
    let param = |name: &str| {
        spec.params
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let file = param("file_path");
    match spec.operation.as_str() {
        "read_file" => format!("Read `{file}` and return its content."),
        "write_file" if spec.params.contains_key("content_from_step") => {
            format!(
                "Write `{file}` with the content produced by step `{}`.",
                param("content_from_step")
            )
        }
        "write_file" if spec.params.contains_key("instructions") => {
            format!("Write a new `{file}`: {}", one_line(&param("instructions")))
        }
        "write_file" => format!("Write `{file}` with the given content."),
        "modify_code" | "refactor_function" => {
            format!("Change `{file}`: {}", one_line(&param("instructions")))
        }
        "analyze_code" => format!(
            "Analyse `{file}`{}.",
            if param("query").is_empty() {
                String::new()
            } else {
                format!(" for: {}", one_line(&param("query")))
            }
        ),
        "execute_shell_command" => format!(
            "Run `{}` at the repository root.",
            one_line(&param("command"))
        ),
        "run_tests" => match param("command").as_str() {
            "" => "Run the repository's tests and report the results.".to_string(),
            command => format!(
                "Run the tests with `{}` and report the results.",
                one_line(command)
            ),
        },
        "generate_summary" => "Summarise what the earlier steps did.".to_string(),
        "list_files" => format!(
            "List the files under `{}`.",
            if param("path").is_empty() {
                ".".into()
            } else {
                param("path")
            }
        ),
        "delete_file" => format!("Delete `{file}`."),
        other => format!("Perform `{other}`."),
    }
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
