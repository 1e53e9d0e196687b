//! The registry of operations a flow may use: their parameters, types, how each one touches
//! the repository and which earlier results it is given. The validator, the planner's and the
//! recovery prompt's lists of operations and the step contract's checks all come from it, so
//! they cannot drift apart. The operations themselves are declared by the library, in
//! `python/open_codex_lib/operations.json`: compiled in here (validation needs no Python), and
//! replaced by the library's own declarations and plugins once it is loaded (`plugins`).

use std::collections::BTreeMap;
use std::sync::{LazyLock, RwLock};

use crate::flow::declaration;
pub(crate) use crate::flow::operation::{Access, OperationSpec, ParamMeaning, ParamType, Reads};

/// The library's declarations of the built-in operations, as this build was compiled with.
pub(crate) const BUILT_IN_FILE: &str =
    include_str!("../../../../python/open_codex_lib/operations.json");

/// A set of operations and the built-in roles' lists of them, as long as the process lives.
#[derive(Debug, Clone, Copy)]
struct Catalogue {
    operations: &'static [&'static OperationSpec],
    roles: &'static BTreeMap<String, Vec<String>>,
}

impl Catalogue {
    fn leak(operations: Vec<&'static OperationSpec>, roles: BTreeMap<String, Vec<String>>) -> Self {
        Catalogue {
            operations: Box::leak(operations.into_boxed_slice()),
            roles: Box::leak(Box::new(roles)),
        }
    }
}

/// The compiled-in built-ins, read at first use; a file that does not read is a build that
/// cannot validate anything, said by `built_in_problem`.
static BUILT_IN: LazyLock<Result<Catalogue, String>> = LazyLock::new(|| {
    declaration::read_built_ins(BUILT_IN_FILE)
        .map(|declared| Catalogue::leak(declared.operations, declared.roles))
        .map_err(|err| format!("the built-in operations (operations.json) do not read: {err}"))
});

/// The operations installed since start-up (the library's declarations and plugins, or a
/// task's saved catalogue); `None` until then, when the compiled-in built-ins are used.
static INSTALLED: RwLock<Option<Catalogue>> = RwLock::new(None);

/// Why the compiled-in declarations cannot be used, if they cannot.
pub fn built_in_problem() -> Option<String> {
    BUILT_IN.as_ref().err().cloned()
}

/// The compiled-in catalogue (empty if it does not read: see `built_in_problem`).
fn compiled_in() -> Catalogue {
    static EMPTY: BTreeMap<String, Vec<String>> = BTreeMap::new();
    BUILT_IN.as_ref().map_or(
        Catalogue {
            operations: &[],
            roles: &EMPTY,
        },
        |catalogue| *catalogue,
    )
}

/// The catalogue in use: the installed one, else the compiled-in one.
fn current() -> Catalogue {
    // A poisoned lock only means a thread panicked while swapping a reference: take it over.
    let installed = *INSTALLED.read().unwrap_or_else(|e| e.into_inner());
    installed.unwrap_or_else(compiled_in)
}

/// The compiled-in built-in operations.
pub(crate) fn built_in() -> &'static [&'static OperationSpec] {
    compiled_in().operations
}

/// The compiled-in built-in roles' operations.
pub(crate) fn built_in_roles() -> BTreeMap<String, Vec<String>> {
    compiled_in().roles.clone()
}

/// The built-in roles' operations in use now.
pub(crate) fn roles_in_use() -> BTreeMap<String, Vec<String>> {
    current().roles.clone()
}

/// Replaces the operations and the built-in roles' lists of them: from now on these are every
/// operation, in this order.
pub(crate) fn install(specs: Vec<&'static OperationSpec>, roles: BTreeMap<String, Vec<String>>) {
    let catalogue = Catalogue::leak(specs, roles);
    let mut installed = INSTALLED.write().unwrap_or_else(|e| e.into_inner());
    *installed = Some(catalogue);
}

/// The operations the built-in role `role` may use, in the order the planner is shown them;
/// `None` for a name that is no such role.
pub fn role_operations(role: &str) -> Option<&'static [String]> {
    current().roles.get(role).map(Vec::as_slice)
}

/// Every operation: the built-ins, then the plugins.
pub fn all() -> impl Iterator<Item = &'static OperationSpec> {
    current().operations.iter().copied()
}

/// Looks an operation up by name.
pub fn find(name: &str) -> Option<&'static OperationSpec> {
    all().find(|op| op.name == name)
}

/// Whether `step` needs the sandbox's plan: any step but one that takes only its files (an LLM
/// or file step); one of an operation not known is not taken for a file step.
pub(crate) fn needs_sandbox(step: &ocflow_model::flow::Step) -> bool {
    !find(&step.operation).is_some_and(|op| op.access == Access::Files)
}

/// All operation names, for error messages.
pub(crate) fn names() -> Vec<&'static str> {
    all().map(|op| op.name).collect()
}

/// The operations as the planner's prompt lists them, generated from this registry so the
/// model is told exactly what the validator accepts.
pub fn catalogue() -> String {
    let mut out = String::new();
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

/// The operations in the shortest form that still says everything the validator checks, for
/// the LLM's prompts (the planner's and recovery's): one line per operation, one line of its
/// parameters. A parameter is a string unless its type is given, and its description is given
/// the first time it appears only (`file_path` means the same in every operation), which is
/// about a third of `catalogue`'s characters.
pub fn prompt_catalogue() -> String {
    let mut out = String::new();
    let mut described: Vec<(&str, &str)> = Vec::new();
    for op in all().filter(|op| op.offered) {
        out.push_str(&format!("- `{}`: {}\n", op.name, op.doc));
        let mut params: Vec<String> = op
            .params
            .iter()
            .map(|param| {
                let mut text = param.name.to_string();
                if param.required {
                    text.push('*');
                }
                if param.kind != ParamType::String {
                    text.push_str(&format!(" ({})", param.kind.name()));
                }
                if !described.contains(&(param.name, param.doc)) {
                    described.push((param.name, param.doc));
                    text.push_str(&format!(": {}", param.doc));
                }
                text
            })
            .collect();
        if !op.exactly_one_of.is_empty() {
            params.push(format!(
                "give exactly one of {}",
                op.exactly_one_of.join(", ")
            ));
        }
        if !params.is_empty() {
            out.push_str(&format!("    {}\n", params.join("; ")));
        }
    }
    out
}

/// A step id, as the validator accepts it (its length is left to the validator).
const ID_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_-]*$";
/// A repository-relative path: no leading `/` or `~`, no spaces. Plain character classes
/// only: llama.cpp turns the schema into a grammar, and its server died on `\s`.
const PATH_PATTERN: &str = "^[A-Za-z0-9_.][A-Za-z0-9_./+@-]*$";

/// The JSON Schema of a planner's answer, generated from this registry like the catalogue: a
/// flow, its deliverables and each step one of the operations, with its parameters typed and
/// the required ones required, and, last, the reason it refuses the task if it does. Endpoints that
/// constrain decoding to a schema then cannot produce an unknown operation or a missing
/// parameter; the validator still checks everything else (paths, references, cycles).
pub(crate) fn flow_schema() -> serde_json::Value {
    use serde_json::json;
    let steps: Vec<serde_json::Value> = all()
        .filter(|op| op.offered)
        .map(|op| {
            let params: serde_json::Map<String, serde_json::Value> = op
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
                    "final_answer": {"type": "boolean"},
                    "params": {"type": "object", "properties": params, "required": required}
                },
                "required": ["id", "operation", "params"]
            })
        })
        .collect();
    // What done means comes before the steps: the model says it, then plans for it.
    let flow = json!({
        "type": "object",
        "properties": {
            "version": {"type": "integer"},
            "task": {"type": "string"},
            "deliverables": {
                "type": "object",
                "properties": {
                    "files": {"type": "array",
                        "items": {"type": "string", "pattern": PATH_PATTERN}},
                    "commands": {"type": "array", "items": {"type": "string"}},
                    "answer": {"type": "string"}
                }
            },
            "steps": {"type": "array", "minItems": 1, "items": {"anyOf": steps}},
            // Last, and inside the flow: a grammar that offered `{"refuse": …}` as an answer of
            // its own at the root had a 0.5B model refuse 7 doable tasks out of 7.
            "refuse": {"type": "string"}
        },
        "required": ["steps"]
    });
    flow
}

/// Whether a step of this operation with these parameters calls the LLM.
pub fn step_needs_llm(
    operation: &str,
    params: &serde_json::Map<String, serde_json::Value>,
) -> bool {
    find(operation)
        .is_some_and(|op| op.needs_llm || op.needs_llm_with.iter().any(|p| params.contains_key(*p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The planner's answer schema, deliverables and refusal included, is documented where
    /// people read it (`docs/plan.schema.json`), generated from the built-in operations.
    #[test]
    fn plan_schema_file_is_generated_from_the_operations() {
        let text = serde_json::to_string_pretty(&flow_schema()).unwrap() + "\n";
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/plan.schema.json");
        if std::env::var_os("OCFLOW_WRITE_SCHEMA").is_some() {
            std::fs::write(&path, &text).unwrap();
        }
        let written = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            written == text,
            "{} is not what the operations generate; regenerate it with OCFLOW_WRITE_SCHEMA=1 \
             cargo test -p ocflow-core plan_schema",
            path.display()
        );
    }

    #[test]
    fn the_built_in_declarations_read_and_read_back_as_they_were_written() {
        assert_eq!(built_in_problem(), None);
        assert_eq!(built_in().len(), 14);
        let specs = declaration::read_built_ins(BUILT_IN_FILE)
            .unwrap()
            .operations;
        assert!(specs.iter().all(|op| op.builtin));
        let again = declaration::read_saved(&declaration::write_file(specs.iter().copied()))
            .unwrap()
            .operations;
        assert_eq!(format!("{specs:?}"), format!("{again:?}"));
    }

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
        let mut documented: Vec<String> = block["operations"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let mut registry: Vec<String> = names().into_iter().map(str::to_string).collect();
        documented.sort();
        registry.sort();
        assert_eq!(documented, registry);
    }
}
