//! An operation as it is declared — in the library's `operations.json` (the built-ins), in its
//! catalogue (plugins) or in a task's saved catalogue — and how a declaration becomes the
//! registry's `OperationSpec`. One reader for all three, so a built-in and a plugin are held
//! to the same rules, and a saved catalogue reads back as the operations the flow used.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::flow::operation::{
    Access, GoalLine, OperationSpec, ParamMeaning, ParamSpec, ParamType, Reads,
};

/// A file of declarations: the library's `operations.json`, or a task's saved catalogue.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct DeclarationFile {
    /// The format's version; a newer one is refused.
    pub(crate) version: u32,
    /// The declarations, each read on its own so a bad one is named.
    pub(crate) operations: Vec<serde_json::Value>,
    /// The built-in roles but `developer` (who may use any operation): the operations each may
    /// use, in the order the planner is shown them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) roles: BTreeMap<String, Vec<String>>,
}

/// What a file of declarations declares: the operations, in order, and the built-in roles'
/// operations (none in a task's saved catalogue, which keeps only the operations).
#[derive(Debug)]
pub(crate) struct Declared {
    pub(crate) operations: Vec<&'static OperationSpec>,
    pub(crate) roles: BTreeMap<String, Vec<String>>,
}

/// The version of `operations.json` this build reads and writes.
pub(crate) const DECLARATION_VERSION: u32 = 1;

/// One operation's declaration. Plugins give the catalogue's fields; the built-ins say more
/// (the fields after `needs_llm`), each with a default that is right for a plugin.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Declaration {
    pub(crate) name: String,
    /// One line: what it does, shown to the planner.
    pub(crate) doc: String,
    /// Whether the library declares it in its own `operations.json` (a plugin does not; every
    /// entry of that file is, and a saved catalogue says which were).
    #[serde(default)]
    pub(crate) builtin: bool,
    /// Where a plugin comes from, for messages.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) params: Vec<DeclaredParam>,
    /// Parameters of which exactly one must be given.
    #[serde(default)]
    pub(crate) exactly_one_of: Vec<String>,
    /// The path parameters whose files it writes or deletes.
    #[serde(default)]
    pub(crate) writes: Vec<String>,
    /// Whether it runs commands: a role that may run none may not use it.
    #[serde(default)]
    pub(crate) runs_commands: bool,
    /// Whether every step of it calls the LLM.
    #[serde(default)]
    pub(crate) needs_llm: bool,
    /// Which earlier results it is given: `named` or `named_or_ancestors`.
    #[serde(default)]
    pub(crate) reads: Reads,
    /// Parameters whose presence makes a step of it call the LLM.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) needs_llm_with: Vec<String>,
    /// Parameters without which it may use the LLM (the library's concern; kept so a saved
    /// catalogue says everything the library's file said).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) may_use_llm_without: Vec<String>,
    /// It touches its view only through the commands it runs, so the view may be made of
    /// overlay layers (a plugin may write into its view from Python: never).
    #[serde(default, skip_serializing_if = "is_false")]
    pub(crate) commands_only: bool,
    /// A failed step of it means the tests failed (the summary's claims are checked by it).
    #[serde(default, skip_serializing_if = "is_false")]
    pub(crate) runs_tests: bool,
    /// Its command shows a task's problem before any change: it runs before every change, and
    /// the same command must pass after them (`reproduce`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub(crate) reproduces: bool,
    /// Whether the planner is offered it (listed in its prompt, allowed by its answer's schema):
    /// false for an operation that reads other plans' steps (`ask_model`, seed 000's described
    /// tasks), so a small model is not offered an answer in text for a change. A flow may still
    /// name it.
    #[serde(default = "offered", skip_serializing_if = "is_offered")]
    pub(crate) offered: bool,
    /// The result field that holds what a step of it produced (`content` of `read_file`): what
    /// seed 004's `result_data` reads and the flow's answer shows; the message when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<String>,
    /// A step of it closes a flow with a summary: the last that succeeded is the flow's answer
    /// when no step is marked (`generate_summary`, seed 002's closing step).
    #[serde(default, skip_serializing_if = "is_false")]
    pub(crate) summarises: bool,
    /// A step of it deletes the files its `writes` parameters name (`delete_file`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub(crate) deletes: bool,
    /// The field of its result that answers a question about the files it is given (a step of
    /// it may be a flow's answer); absent for an operation that answers none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) answers: Option<String>,
    /// The role a step of it gets when the flow names none (`developer` when not said).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) default_role: Option<String>,
    /// The goal line of a step's instructions: the first line whose `when` parameters are all
    /// given as non-empty text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) goal: Vec<DeclaredGoal>,
    /// The library's function, `module:function` (the library's concern; kept when saved).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) implementation: String,
}

fn offered() -> bool {
    true
}

fn is_offered(value: &bool) -> bool {
    *value
}

fn is_false(value: &bool) -> bool {
    !value
}

/// One declared parameter.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct DeclaredParam {
    pub(crate) name: String,
    /// `string`, `integer`, `boolean`, `path`, `directory`, `step` or `command`: the JSON type
    /// and what the value means at once.
    pub(crate) r#type: String,
    #[serde(default)]
    pub(crate) required: bool,
    #[serde(default)]
    pub(crate) doc: String,
    /// Other names models use for it (the seed's prompt: `instructions_for_llm`), taken when
    /// the step does not also give this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) aliases: Vec<String>,
}

/// One declared goal line.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct DeclaredGoal {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) when: Vec<String>,
    /// `{param}` stands for the parameter's text, on one line.
    pub(crate) text: String,
}

/// Reads the library's `operations.json`: its built-in operations and roles.
pub(crate) fn read_built_ins(text: &str) -> Result<Declared, String> {
    read(text, true)
}

/// Reads a task's saved catalogue: the operations it was validated against, as written.
pub(crate) fn read_saved(text: &str) -> Result<Declared, String> {
    read(text, false)
}

/// Reads a file of declarations into specs: every entry, or the first problem (the library's
/// own file and a saved catalogue are written whole, so a bad entry means a bad file).
fn read(text: &str, built_ins: bool) -> Result<Declared, String> {
    let file: DeclarationFile = serde_json::from_str(text).map_err(|err| err.to_string())?;
    if file.version > DECLARATION_VERSION {
        return Err(format!(
            "it is version {}; this ocflow reads version {DECLARATION_VERSION}: upgrade ocflow",
            file.version
        ));
    }
    let mut specs = Vec::new();
    for value in file.operations {
        let mut declaration: Declaration =
            serde_json::from_value(value).map_err(|err| err.to_string())?;
        declaration.builtin |= built_ins;
        specs.push(leak(spec(declaration, &specs)?));
    }
    for (role, operations) in &file.roles {
        if let Some(unknown) = operations
            .iter()
            .find(|name| specs.iter().all(|op| op.name != name.as_str()))
        {
            return Err(format!(
                "role `{role}` names `{unknown}`, which the file does not declare"
            ));
        }
    }
    Ok(Declared {
        operations: specs,
        roles: file.roles,
    })
}

/// The specs as a file of declarations (what a task saves as its catalogue).
pub(crate) fn write_file<'a>(specs: impl Iterator<Item = &'a OperationSpec>) -> String {
    let operations = specs
        .map(|spec| serde_json::to_value(declaration(spec)).unwrap_or_default())
        .collect();
    let file = DeclarationFile {
        version: DECLARATION_VERSION,
        operations,
        roles: BTreeMap::new(),
    };
    serde_json::to_string_pretty(&file).unwrap_or_default()
}

/// Leaks a spec: operations live as long as the process.
pub(crate) fn leak(spec: OperationSpec) -> &'static OperationSpec {
    Box::leak(Box::new(spec))
}

/// Leaks a string: operations live as long as the process.
fn forever(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

fn forever_list(list: Vec<String>) -> &'static [&'static str] {
    Box::leak(
        list.into_iter()
            .map(forever)
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    )
}

fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 64
}

/// The parameter type's JSON type and meaning, from its declared name.
fn param_type(name: &str) -> Option<(ParamType, ParamMeaning)> {
    Some(match name {
        "string" => (ParamType::String, ParamMeaning::Text),
        "integer" => (ParamType::Integer, ParamMeaning::Setting),
        "boolean" => (ParamType::Boolean, ParamMeaning::Setting),
        "path" => (ParamType::String, ParamMeaning::FilePath),
        "directory" => (ParamType::String, ParamMeaning::DirPath),
        "step" => (ParamType::String, ParamMeaning::StepRef),
        "command" => (ParamType::String, ParamMeaning::Command),
        _ => return None,
    })
}

/// One declaration as the registry holds operations; `earlier` are the ones read before it,
/// whose names it may not take.
pub(crate) fn spec(
    entry: Declaration,
    earlier: &[&OperationSpec],
) -> Result<OperationSpec, String> {
    let name = entry.name;
    if !is_name(&name) {
        return Err(format!(
            "its name {name:?} is not lower-case letters, digits and _"
        ));
    }
    if earlier.iter().any(|op| op.name == name) {
        return Err(format!("`{name}` is already an operation"));
    }
    let mut params = Vec::new();
    for param in entry.params {
        let Some((kind, meaning)) = param_type(&param.r#type) else {
            return Err(format!(
                "`{name}`: parameter `{}` has the unknown type {:?}",
                param.name, param.r#type
            ));
        };
        if !is_name(&param.name) {
            return Err(format!(
                "`{name}`: the parameter name {:?} is not lower-case letters, digits and _",
                param.name
            ));
        }
        params.push(ParamSpec {
            name: forever(param.name),
            kind,
            meaning,
            required: param.required,
            doc: forever(param.doc),
            aliases: forever_list(param.aliases),
        });
    }
    let declared = |p: &String| params.iter().any(|q| q.name == p.as_str());
    let goal_params = entry.goal.iter().flat_map(|line| &line.when);
    if let Some(unknown) = entry
        .writes
        .iter()
        .chain(&entry.exactly_one_of)
        .chain(&entry.needs_llm_with)
        .chain(&entry.may_use_llm_without)
        .chain(goal_params)
        .find(|p| !declared(p))
    {
        return Err(format!(
            "`{name}` names `{unknown}`, which is not one of its parameters"
        ));
    }
    let sees_directories = params.iter().any(|p| p.meaning == ParamMeaning::DirPath);
    let goal: Vec<GoalLine> = entry
        .goal
        .into_iter()
        .map(|line| GoalLine {
            when: forever_list(line.when),
            text: forever(line.text),
        })
        .collect();
    Ok(OperationSpec {
        name: forever(name),
        doc: forever(entry.doc),
        params: Box::leak(params.into_boxed_slice()),
        exactly_one_of: forever_list(entry.exactly_one_of),
        // An operation that runs commands, or is given a directory, works in a full view of
        // the repository; the others get only the files their path parameters name.
        access: if entry.runs_commands || sees_directories {
            Access::View
        } else {
            Access::Files
        },
        needs_llm: entry.needs_llm,
        runs_commands: entry.runs_commands,
        writes: forever_list(entry.writes),
        reads: entry.reads,
        needs_llm_with: forever_list(entry.needs_llm_with),
        may_use_llm_without: forever_list(entry.may_use_llm_without),
        commands_only: entry.commands_only,
        runs_tests: entry.runs_tests,
        reproduces: entry.reproduces,
        offered: entry.offered,
        result: entry.result.map(forever),
        summarises: entry.summarises,
        deletes: entry.deletes,
        answers: entry.answers.map(forever),
        default_role: entry.default_role.map(forever),
        goal: Box::leak(goal.into_boxed_slice()),
        builtin: entry.builtin,
        source: forever(entry.source),
        implementation: forever(entry.implementation),
    })
}

/// A spec as its declaration (the inverse of `spec`).
fn declaration(spec: &OperationSpec) -> Declaration {
    let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
    Declaration {
        name: spec.name.to_string(),
        doc: spec.doc.to_string(),
        builtin: spec.builtin,
        source: spec.source.to_string(),
        params: spec
            .params
            .iter()
            .map(|p| DeclaredParam {
                name: p.name.to_string(),
                r#type: p.type_name().to_string(),
                required: p.required,
                doc: p.doc.to_string(),
                aliases: strings(p.aliases),
            })
            .collect(),
        exactly_one_of: strings(spec.exactly_one_of),
        writes: strings(spec.writes),
        runs_commands: spec.runs_commands,
        needs_llm: spec.needs_llm,
        reads: spec.reads,
        needs_llm_with: strings(spec.needs_llm_with),
        may_use_llm_without: strings(spec.may_use_llm_without),
        commands_only: spec.commands_only,
        runs_tests: spec.runs_tests,
        reproduces: spec.reproduces,
        offered: spec.offered,
        result: spec.result.map(str::to_string),
        summarises: spec.summarises,
        deletes: spec.deletes,
        answers: spec.answers.map(str::to_string),
        default_role: spec.default_role.map(str::to_string),
        goal: spec
            .goal
            .iter()
            .map(|line| DeclaredGoal {
                when: strings(line.when),
                text: line.text.to_string(),
            })
            .collect(),
        implementation: spec.implementation.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declaration_naming_an_unknown_parameter_is_refused() {
        let text = r#"{"version": 1, "operations": [{"name": "peek", "doc": "d",
            "params": [{"name": "file_path", "type": "path"}],
            "goal": [{"when": ["nope"], "text": "x"}]}]}"#;
        assert_eq!(
            read_built_ins(text).unwrap_err(),
            "`peek` names `nope`, which is not one of its parameters"
        );
        let newer = r#"{"version": 2, "operations": []}"#;
        assert!(read_saved(newer).unwrap_err().contains("upgrade ocflow"));
        let typo = r#"{"version": 1, "operations": [{"name": "peek", "doc": "d"}],
            "roles": {"coder": ["peek", "peak"]}}"#;
        assert_eq!(
            read_built_ins(typo).unwrap_err(),
            "role `coder` names `peak`, which the file does not declare"
        );
    }
}
