//! The instructions file, `open_codex_instructions.md`: what one step must do, readable by a
//! person and complete enough for `python -m open_codex_lib FILE` to run the step alone. The
//! Markdown comes from the template in `prompts/`; the library reads the fenced
//! `json ocflow-step` block. It never contains the API key.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::model::flow::Step;
use crate::flow::operations::{self, Access};
use crate::model::repo_path::RepoPath;

/// The template, from `prompts/step_instructions.md`.
const TEMPLATE: &str = include_str!("../../prompts/step_instructions.md");

/// The instructions file format version.
pub const INSTRUCTIONS_VERSION: u32 = 1;

/// The machine-readable part of the instructions, for the library.
#[derive(Debug, Clone, Serialize)]
pub struct StepSpec {
    /// Format version; see `INSTRUCTIONS_VERSION`.
    pub version: u32,
    pub task_id: String,
    pub task: String,
    pub step_id: String,
    pub operation: String,
    pub role: Option<String>,
    /// Parameters with `@{outputs…}` references already resolved.
    pub params: Map<String, Value>,
    /// Relative to the instructions file's directory.
    pub input_dir: String,
    pub output_dir: String,
    /// The full repository view, for operations that need one; else `None`.
    pub work_dir: Option<String>,
    /// Repository-relative files staged under `input_dir`.
    pub input_files: Vec<String>,
    /// Earlier steps this one may read (`content_from_step`): their result and output dir.
    pub steps: Map<String, Value>,
    pub limits: Limits,
    /// Environment for commands: the values of references in `command` (`OCFLOW_REF_n`).
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub env: Map<String, Value>,
    /// How commands are started, when they run in the sandbox.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Sandbox>,
}

/// The sandbox launcher the library puts before every command.
#[derive(Debug, Clone, Serialize)]
pub struct Sandbox {
    /// `ocflow sandbox-exec --write VIEW --write … --`
    pub launcher: Vec<String>,
    /// What the kernel enforces (`landlock`, `landlock-partial`), reported in results.
    pub kind: String,
}

impl Sandbox {
    /// The launcher for commands running in `view`: writable are the view and `writable`.
    pub fn launcher(
        view: &std::path::Path,
        writable: &[std::path::PathBuf],
        kind: &str,
    ) -> crate::error::Result<Sandbox> {
        use crate::error::IoContext;
        let exe = std::env::current_exe()
            .io_context(|| "finding the ocflow executable for the sandbox".into())?;
        let view = view
            .canonicalize()
            .io_context(|| format!("resolving {}", view.display()))?;
        let mut launcher = vec![exe.to_string_lossy().into_owned(), "sandbox-exec".into()];
        for path in std::iter::once(&view).chain(writable) {
            launcher.push("--write".into());
            launcher.push(path.to_string_lossy().into_owned());
        }
        launcher.push("--".into());
        Ok(Sandbox {
            launcher,
            kind: kind.to_string(),
        })
    }
}

/// Limits the library enforces inside the step.
#[derive(Debug, Clone, Serialize)]
pub struct Limits {
    pub timeout_seconds: u64,
    pub max_output_bytes: u64,
}

/// One earlier step as the context section lists it.
pub struct DoneStep<'a> {
    pub id: &'a str,
    pub operation: &'a str,
    pub message: &'a str,
}

/// Renders the whole instructions file.
pub fn render(spec: &StepSpec, step: &Step, done: &[DoneStep<'_>]) -> String {
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
        Some(Access::View) => "- files the command creates, changes or deletes in `work_dir` are captured by ocflow as this step's outputs".to_string(),
        _ => "- write every new or changed file under `output/`, at its repository-relative path; report deletions in `deleted_files`".to_string(),
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
pub fn staged_paths(step: &Step) -> Vec<RepoPath> {
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
