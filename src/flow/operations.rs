//! The registry of operations a flow may use: their parameters, types, how each one touches
//! the repository and which earlier results it is given. The validator, the planner's and the
//! recovery prompt's lists of operations and the step contract's checks all come from it, so
//! they cannot drift apart. The operations themselves are declared by the library, in
//! `python/open_codex_lib/operations.json`: compiled in here (validation needs no Python), and
//! replaced by the library's own declarations and plugins once it is loaded (`plugins`).

use std::sync::{LazyLock, RwLock};

use crate::flow::declaration;

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
pub(crate) struct ParamSpec {
    pub(crate) name: &'static str,
    pub(crate) kind: ParamType,
    pub(crate) meaning: ParamMeaning,
    pub(crate) required: bool,
    pub(crate) doc: &'static str,
    /// Other names a step may give it by (the seed's prompt: `instructions_for_llm`).
    pub(crate) aliases: &'static [&'static str],
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
pub(crate) struct OperationSpec {
    pub(crate) name: &'static str,
    pub(crate) doc: &'static str,
    pub(crate) params: &'static [ParamSpec],
    /// Groups of parameters of which exactly one must be given.
    pub(crate) exactly_one_of: &'static [&'static str],
    pub(crate) access: Access,
    pub(crate) needs_llm: bool,
    /// Whether it runs commands: a role that may run none may not use it.
    pub(crate) runs_commands: bool,
    /// The path parameters whose files the operation writes or deletes.
    pub(crate) writes: &'static [&'static str],
    /// Which earlier steps' results the operation is given (the instructions' `steps`).
    pub(crate) reads: Reads,
    /// Parameters whose presence makes a step of it call the LLM (`write_file`'s
    /// `instructions`).
    pub(crate) needs_llm_with: &'static [&'static str],
    /// Parameters without which the library may use the LLM (kept for the saved catalogue).
    pub(crate) may_use_llm_without: &'static [&'static str],
    /// It touches its view only through commands, so the view may be made of overlay layers.
    pub(crate) commands_only: bool,
    /// A failed step of it means the tests failed.
    pub(crate) runs_tests: bool,
    /// The built-in roles that may use it.
    pub(crate) roles: &'static [&'static str],
    /// The role a step of it gets when the flow names none.
    pub(crate) default_role: Option<&'static str>,
    /// The goal line of its steps' instructions: the first line that applies.
    pub(crate) goal: &'static [GoalLine],
    /// Whether the library declares it itself (not a plugin).
    pub(crate) builtin: bool,
    /// Where a plugin comes from (empty for the built-ins).
    pub(crate) source: &'static str,
    /// The library's function, `module:function`.
    pub(crate) implementation: &'static str,
}

/// One way to say what a step does: it applies when every parameter of `when` is given as
/// non-empty text; `{param}` in `text` stands for that parameter's text, on one line.
#[derive(Debug)]
pub(crate) struct GoalLine {
    pub(crate) when: &'static [&'static str],
    pub(crate) text: &'static str,
}

/// Which earlier results an operation receives (docs/step-contract.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Reads {
    /// Only the steps its step-reference parameters name (`content_from_step`).
    #[default]
    Named,
    /// The steps its step-reference parameters name or, when it names none, every step it
    /// depends on, directly or not (`generate_summary` summarises them all).
    NamedOrAncestors,
}

impl ParamSpec {
    /// The parameter's type as the library's registry names it (`path`, `step`, …).
    pub(crate) fn type_name(&self) -> &'static str {
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

/// The library's declarations of the built-in operations, as this build was compiled with.
pub(crate) const BUILT_IN_FILE: &str = include_str!("../../python/open_codex_lib/operations.json");

/// The compiled-in built-ins, read at first use; a file that does not read is a build that
/// cannot validate anything, said by `built_in_problem`.
static BUILT_IN: LazyLock<Result<&'static [&'static OperationSpec], String>> =
    LazyLock::new(|| {
        declaration::read_file(BUILT_IN_FILE)
            .map(|specs| &*Box::leak(specs.into_boxed_slice()))
            .map_err(|err| format!("the built-in operations (operations.json) do not read: {err}"))
    });

/// The operations installed since start-up (the library's declarations and plugins, or a
/// task's saved catalogue); `None` until then, when the compiled-in built-ins are used.
static INSTALLED: RwLock<Option<&'static [&'static OperationSpec]>> = RwLock::new(None);

/// Why the compiled-in declarations cannot be used, if they cannot.
pub(crate) fn built_in_problem() -> Option<std::string::String> {
    BUILT_IN.as_ref().err().cloned()
}

/// The compiled-in built-ins (none if they do not read: see `built_in_problem`).
pub(crate) fn built_in() -> &'static [&'static OperationSpec] {
    BUILT_IN.as_ref().map_or(&[], |specs| specs)
}

/// Replaces the operations: from now on these are every operation, in this order.
pub(crate) fn install(specs: Vec<&'static OperationSpec>) {
    let specs: &'static [&'static OperationSpec] = Box::leak(specs.into_boxed_slice());
    // A poisoned lock only means a thread panicked while swapping a reference: take it over.
    let mut installed = INSTALLED.write().unwrap_or_else(|e| e.into_inner());
    *installed = Some(specs);
}

/// Every operation: the built-ins, then the plugins.
pub(crate) fn all() -> impl Iterator<Item = &'static OperationSpec> {
    let installed = *INSTALLED.read().unwrap_or_else(|e| e.into_inner());
    installed.unwrap_or_else(built_in).iter().copied()
}

/// Looks an operation up by name.
pub(crate) fn find(name: &str) -> Option<&'static OperationSpec> {
    all().find(|op| op.name == name)
}

/// All operation names, for error messages.
pub(crate) fn names() -> Vec<&'static str> {
    all().map(|op| op.name).collect()
}

/// The operations as the planner's prompt lists them, generated from this registry so the
/// model is told exactly what the validator accepts.
pub(crate) fn catalogue() -> std::string::String {
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
pub(crate) fn step_needs_llm(
    operation: &str,
    params: &serde_json::Map<std::string::String, serde_json::Value>,
) -> bool {
    find(operation)
        .is_some_and(|op| op.needs_llm || op.needs_llm_with.iter().any(|p| params.contains_key(*p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_documents_every_operation_of_the_registry() {
        let block = crate::model::step_spec::tests::contract_block("step-contract:results");
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
