//! The registry of operations a flow may use: their parameters, types, how each one touches
//! the repository and which earlier results it is given. The validator, the planner's and the
//! recovery prompt's lists of operations and the step contract's checks all come from it, so
//! they cannot drift apart.

/// The JSON type a parameter must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParamType {
    String,
    Integer,
    Boolean,
}

impl ParamType {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ParamType::String => "a string",
            ParamType::Integer => "an integer",
            ParamType::Boolean => "true or false",
        }
    }

    pub(crate) fn accepts(self, value: &serde_json::Value) -> bool {
        match self {
            ParamType::String => value.is_string(),
            ParamType::Integer => value.is_i64() || value.is_u64(),
            ParamType::Boolean => value.is_boolean(),
        }
    }
}

/// What a parameter's value means, beyond its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParamMeaning {
    /// Free text (content, instructions).
    Text,
    /// A shell command. References in it reach the command as environment variables, never
    /// as shell code.
    Command,
    /// A file path relative to the repository; the file is staged into the step's `input/`.
    FilePath,
    /// A directory path relative to the repository (`.` is the root).
    DirPath,
    /// The id of an earlier step this one reads from; it must be an ancestor.
    StepRef,
    /// A number or flag.
    Setting,
}

/// One parameter of an operation.
#[derive(Debug)]
pub struct ParamSpec {
    pub name: &'static str,
    pub(crate) kind: ParamType,
    pub(crate) meaning: ParamMeaning,
    pub required: bool,
    pub doc: &'static str,
}

/// How a step of this operation sees the repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Only the files named in its parameters, staged into `input/`; it writes into `output/`.
    Files,
    /// A full view of the repository with all earlier changes applied; what it changes there is
    /// captured as its outputs.
    View,
}

/// One operation of `open_codex_lib`.
#[derive(Debug)]
pub struct OperationSpec {
    pub name: &'static str,
    pub doc: &'static str,
    pub params: &'static [ParamSpec],
    /// Groups of parameters of which exactly one must be given.
    pub exactly_one_of: &'static [&'static str],
    pub(crate) access: Access,
    pub needs_llm: bool,
    /// Whether it runs commands: a role that may run none may not use it.
    pub runs_commands: bool,
    /// The path parameters whose files the operation writes or deletes.
    pub writes: &'static [&'static str],
    /// Which earlier steps' results the operation is given (the instructions' `steps`).
    pub(crate) reads: Reads,
}

/// Which earlier results an operation receives (docs/step-contract.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reads {
    /// Only the steps its step-reference parameters name (`content_from_step`).
    Named,
    /// The steps its step-reference parameters name or, when it names none, every step it
    /// depends on, directly or not (`generate_summary` summarises them all).
    NamedOrAncestors,
}

impl ParamSpec {
    /// The parameter's type as the library's registry names it (`path`, `step`, …).
    pub fn type_name(&self) -> &'static str {
        match (self.kind, self.meaning) {
            (_, ParamMeaning::FilePath) => "path",
            (_, ParamMeaning::DirPath) => "directory",
            (_, ParamMeaning::StepRef) => "step",
            (_, ParamMeaning::Command) => "command",
            (ParamType::Integer, _) => "integer",
            (ParamType::Boolean, _) => "boolean",
            (ParamType::String, _) => "string",
        }
    }
}

impl OperationSpec {
    pub(crate) fn param(&self, name: &str) -> Option<&'static ParamSpec> {
        self.params.iter().find(|p| p.name == name)
    }
}

const fn param(
    name: &'static str,
    kind: ParamType,
    meaning: ParamMeaning,
    required: bool,
    doc: &'static str,
) -> ParamSpec {
    ParamSpec {
        name,
        kind,
        meaning,
        required,
        doc,
    }
}

use ParamMeaning::*;
use ParamType::*;

const FILE_PATH: ParamSpec = param(
    "file_path",
    String,
    FilePath,
    true,
    "file relative to the repository root",
);
const TIMEOUT: ParamSpec = param(
    "timeout_seconds",
    Integer,
    Setting,
    false,
    "kill the command (and its children) after this many seconds",
);
const NETWORK: ParamSpec = param(
    "network",
    Boolean,
    Setting,
    false,
    "let the command use the network (off by default; model-made steps need the user's \
     `[sandbox] network = true`)",
);
const RETRYABLE: ParamSpec = param(
    "retryable",
    Boolean,
    Setting,
    false,
    "a timeout is transient: run the command again automatically",
);

const MODIFY_PARAMS: &[ParamSpec] = &[
    FILE_PATH,
    param(
        "instructions",
        String,
        Text,
        true,
        "what to change, in plain words",
    ),
    param(
        "function_name",
        String,
        Text,
        false,
        "the function to rewrite, when only one changes",
    ),
];

/// Every operation, in the order they are documented.
pub(crate) const OPERATIONS: &[OperationSpec] = &[
    OperationSpec {
        name: "read_file",
        doc: "read a file; its text becomes the step's `content` output",
        params: &[FILE_PATH],
        exactly_one_of: &[],
        access: Access::Files,
        needs_llm: false,
        runs_commands: false,
        reads: Reads::Named,
        writes: &[],
    },
    OperationSpec {
        name: "write_file",
        doc: "create or overwrite a file from `content`, from another step's content, or generated \
              from `instructions`",
        params: &[
            FILE_PATH,
            param("content", String, Text, false, "the whole new content"),
            param(
                "content_from_step",
                String,
                StepRef,
                false,
                "id of an earlier step whose content to write",
            ),
            param(
                "instructions",
                String,
                Text,
                false,
                "describe the file for the LLM to write",
            ),
        ],
        exactly_one_of: &["content", "content_from_step", "instructions"],
        access: Access::Files,
        needs_llm: false,
        runs_commands: false,
        reads: Reads::Named,
        writes: &["file_path"],
    },
    OperationSpec {
        name: "modify_code",
        doc: "rewrite a file following instructions (the LLM returns the whole new file)",
        params: MODIFY_PARAMS,
        exactly_one_of: &[],
        access: Access::Files,
        needs_llm: true,
        runs_commands: false,
        reads: Reads::Named,
        writes: &["file_path"],
    },
    OperationSpec {
        name: "refactor_function",
        doc: "rewrite one function of a file following instructions",
        params: MODIFY_PARAMS,
        exactly_one_of: &[],
        access: Access::Files,
        needs_llm: true,
        runs_commands: false,
        reads: Reads::Named,
        writes: &["file_path"],
    },
    OperationSpec {
        name: "analyze_code",
        doc: "analyse a file; findings in the result, a report in the step directory",
        params: &[
            FILE_PATH,
            param("query", String, Text, false, "what to look for"),
            param(
                "report_path",
                String,
                FilePath,
                false,
                "also write the report into the repository at this path",
            ),
        ],
        exactly_one_of: &[],
        access: Access::Files,
        needs_llm: true,
        runs_commands: false,
        reads: Reads::Named,
        writes: &["report_path"],
    },
    OperationSpec {
        name: "execute_shell_command",
        doc: "run a shell command at the repository root (with all earlier changes applied); files \
              it changes become the step's outputs",
        params: &[
            param("command", String, Command, true, "the shell command"),
            TIMEOUT,
            RETRYABLE,
            NETWORK,
        ],
        exactly_one_of: &[],
        access: Access::View,
        needs_llm: false,
        runs_commands: true,
        reads: Reads::Named,
        writes: &[],
    },
    OperationSpec {
        name: "run_tests",
        doc: "run the test suite (pytest or cargo test when no command is given) and report \
              passed/failed counts",
        params: &[
            param("command", String, Command, false, "the test command"),
            TIMEOUT,
            RETRYABLE,
            NETWORK,
        ],
        exactly_one_of: &[],
        access: Access::View,
        needs_llm: false,
        runs_commands: true,
        reads: Reads::Named,
        writes: &[],
    },
    OperationSpec {
        name: "generate_summary",
        doc: "write a short summary of what earlier steps did",
        params: &[
            param(
                "message",
                String,
                Text,
                false,
                "the summary text, when it is already known",
            ),
            param(
                "changes_from_step",
                String,
                StepRef,
                false,
                "id of the step whose changes to summarise",
            ),
        ],
        exactly_one_of: &[],
        access: Access::Files,
        needs_llm: false,
        runs_commands: false,
        reads: Reads::NamedOrAncestors,
        writes: &[],
    },
    OperationSpec {
        name: "list_files",
        doc: "list the repository's files under a directory",
        params: &[
            param(
                "path",
                String,
                DirPath,
                false,
                "directory relative to the repository root (default `.`)",
            ),
            param(
                "pattern",
                String,
                Text,
                false,
                "glob on file names, e.g. `*.py`",
            ),
            param(
                "recursive",
                Boolean,
                Setting,
                false,
                "descend into subdirectories (default true)",
            ),
        ],
        exactly_one_of: &[],
        access: Access::View,
        needs_llm: false,
        runs_commands: false,
        reads: Reads::Named,
        writes: &[],
    },
    OperationSpec {
        name: "delete_file",
        doc: "delete a file",
        params: &[FILE_PATH],
        exactly_one_of: &[],
        access: Access::Files,
        needs_llm: false,
        runs_commands: false,
        reads: Reads::Named,
        writes: &["file_path"],
    },
];

/// Other names a parameter is known by — the seed's planning prompt (`modify_code(file_path,
/// instructions_for_llm)`, `analyze_code(file_path, analysis_query)`), which models keep using:
/// (operation, alias, parameter).
pub(crate) const PARAM_ALIASES: &[(&str, &str, &str)] = &[
    ("modify_code", "instructions_for_llm", "instructions"),
    ("refactor_function", "instructions_for_llm", "instructions"),
    ("write_file", "instructions_for_llm", "instructions"),
    ("analyze_code", "analysis_query", "query"),
];

/// The plugin operations the library's catalogue added at start-up (`plugins::install`).
static PLUGINS: std::sync::OnceLock<Vec<OperationSpec>> = std::sync::OnceLock::new();

/// Adds the plugin operations, once per process; a second call changes nothing.
pub(crate) fn install_plugins(plugins: Vec<OperationSpec>) {
    let _ = PLUGINS.set(plugins);
}

/// Every operation: the built-in ones, then the plugins.
pub fn all() -> impl Iterator<Item = &'static OperationSpec> {
    OPERATIONS.iter().chain(PLUGINS.get().into_iter().flatten())
}

/// Looks an operation up by name.
pub fn find(name: &str) -> Option<&'static OperationSpec> {
    all().find(|op| op.name == name)
}

/// All operation names, for error messages.
pub(crate) fn names() -> Vec<&'static str> {
    all().map(|op| op.name).collect()
}

/// The operations as the planner's prompt lists them, generated from this registry so the
/// model is told exactly what the validator accepts.
pub fn catalogue() -> std::string::String {
    let mut out = std::string::String::new();
    for op in all() {
        out.push_str(&format!("- `{}`: {}\n", op.name, op.doc));
        for param in op.params {
            let required = if param.required { "*" } else { "" };
            out.push_str(&format!(
                "    {}{} ({}): {}\n",
                param.name,
                required,
                param.kind.name(),
                param.doc
            ));
        }
        if !op.exactly_one_of.is_empty() {
            out.push_str(&format!(
                "    give exactly one of: {}\n",
                op.exactly_one_of.join(", ")
            ));
        }
    }
    out
}

/// A step id, as the validator accepts it (its length is left to the validator).
const ID_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_-]*$";
/// A repository-relative path: no leading `/` or `~`, no spaces. Plain character classes
/// only: llama.cpp turns the schema into a grammar, and its server died on `\s`.
const PATH_PATTERN: &str = "^[A-Za-z0-9_.][A-Za-z0-9_./+@-]*$";

/// The JSON Schema of a flow, generated from this registry like the catalogue: each step one
/// of the operations, with its parameters typed and the required ones required. Endpoints that
/// constrain decoding to a schema then cannot produce an unknown operation or a missing
/// parameter; the validator still checks everything else (paths, references, cycles).
pub(crate) fn flow_schema() -> serde_json::Value {
    use serde_json::json;
    let steps: Vec<serde_json::Value> = all()
        .map(|op| {
            let params: serde_json::Map<std::string::String, serde_json::Value> = op
                .params
                .iter()
                .map(|p| {
                    let schema = match (p.kind, p.meaning) {
                        // Relative paths: not `/…`, not `~…` (the validator checks the rest).
                        (_, ParamMeaning::FilePath | ParamMeaning::DirPath) => {
                            json!({"type": "string", "pattern": PATH_PATTERN})
                        }
                        (_, ParamMeaning::StepRef) => {
                            json!({"type": "string", "pattern": ID_PATTERN})
                        }
                        (ParamType::String, _) => json!({"type": "string"}),
                        (ParamType::Integer, _) => json!({"type": "integer"}),
                        (ParamType::Boolean, _) => json!({"type": "boolean"}),
                    };
                    (p.name.to_string(), schema)
                })
                .collect();
            let required: Vec<&str> = op
                .params
                .iter()
                .filter(|p| p.required)
                .map(|p| p.name)
                .collect();
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "pattern": ID_PATTERN},
                    "operation": {"const": op.name},
                    "depends_on": {"type": "array",
                        "items": {"type": "string", "pattern": ID_PATTERN}},
                    "role": {"type": "string"},
                    "params": {"type": "object", "properties": params, "required": required}
                },
                "required": ["id", "operation", "params"]
            })
        })
        .collect();
    json!({
        "type": "object",
        "properties": {
            "version": {"type": "integer"},
            "task": {"type": "string"},
            "steps": {"type": "array", "minItems": 1, "items": {"anyOf": steps}}
        },
        "required": ["steps"]
    })
}

/// Whether a step of this operation with these parameters calls the LLM.
pub fn step_needs_llm(
    operation: &str,
    params: &serde_json::Map<std::string::String, serde_json::Value>,
) -> bool {
    find(operation).is_some_and(|op| {
        op.needs_llm || (op.name == "write_file" && params.contains_key("instructions"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_documents_every_operation_of_the_registry() {
        // docs/step-contract.md's fenced `json step-contract:results` block.
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/step-contract.md"
        ))
        .unwrap();
        let opening = "```json step-contract:results\n";
        let start = text.find(opening).unwrap() + opening.len();
        let end = start + text[start..].find("\n```").unwrap();
        let block: serde_json::Value = serde_json::from_str(&text[start..end]).unwrap();
        let mut documented: Vec<std::string::String> = block["operations"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let mut registry: Vec<std::string::String> =
            names().into_iter().map(str::to_string).collect();
        documented.sort();
        registry.sort();
        assert_eq!(documented, registry);
    }
}
