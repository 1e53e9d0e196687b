//! Plugin operations: the operations the library's registry (`open_codex_lib.registry`) adds
//! to the built-in ten — from a plugin folder or an installed package's entry point — read
//! from its catalogue at start-up and added to `operations`, so the planner's prompt, the flow
//! schema and the validator know them as they know the built-ins.

use serde::Deserialize;

use crate::flow::operations::{
    self, Access, OperationSpec, ParamMeaning, ParamSpec, ParamType, Reads,
};

/// The catalogue as the library prints it (`python -m open_codex_lib catalogue`).
#[derive(Debug, Deserialize)]
struct Catalogue {
    /// Each read on its own: one malformed entry leaves the others usable.
    operations: Vec<serde_json::Value>,
    #[serde(default)]
    problems: Vec<LoadProblem>,
}

#[derive(Debug, Deserialize)]
struct Entry {
    name: String,
    doc: String,
    #[serde(default)]
    builtin: bool,
    #[serde(default)]
    source: String,
    #[serde(default)]
    params: Vec<EntryParam>,
    #[serde(default)]
    exactly_one_of: Vec<String>,
    #[serde(default)]
    writes: Vec<String>,
    #[serde(default)]
    runs_commands: bool,
    #[serde(default)]
    needs_llm: bool,
}

#[derive(Debug, Deserialize)]
struct EntryParam {
    name: String,
    r#type: String,
    #[serde(default)]
    required: bool,
    #[serde(default)]
    doc: String,
}

/// A plugin that could not be loaded: where, and why.
#[derive(Debug, Deserialize)]
struct LoadProblem {
    source: String,
    message: String,
}

/// What a catalogue added: the plugin operations' names, and a sentence for every plugin that
/// could not be loaded or used (the built-ins and the other plugins work on).
#[derive(Debug, Default)]
pub struct Installed {
    pub(crate) added: Vec<String>,
    pub problems: Vec<String>,
}

/// Reads the library's catalogue and adds its plugin operations to the registry (once per
/// process). The built-ins stay the ones compiled in; a catalogue that cannot be read is an
/// error, a plugin that cannot be used is a problem.
pub fn install(catalogue: &str) -> ocflow_model::error::Result<Installed> {
    let catalogue: Catalogue = serde_json::from_str(catalogue).map_err(|err| {
        ocflow_model::error::Error::Bridge(format!(
            "the library's operation catalogue is not readable: {err}"
        ))
    })?;
    let mut installed = Installed::default();
    for problem in catalogue.problems {
        installed.problems.push(format!(
            "the plugin {} was not loaded: {}",
            problem.source, problem.message
        ));
    }
    let mut plugins = Vec::new();
    for value in catalogue.operations {
        let name = value["name"].as_str().unwrap_or("?").to_string();
        let entry: Entry = match serde_json::from_value(value) {
            Ok(entry) => entry,
            Err(err) => {
                installed.problems.push(format!(
                    "the plugin operation `{name}` is left out: its declaration is not \
                     readable ({err})"
                ));
                continue;
            }
        };
        if entry.builtin {
            continue;
        }
        let source = entry.source.clone();
        match spec(entry, &plugins) {
            Ok(spec) => {
                installed.added.push(spec.name.to_string());
                plugins.push(spec);
            }
            Err(problem) => installed.problems.push(format!(
                "the plugin operation from {source} is left out: {problem}"
            )),
        }
    }
    operations::install_plugins(plugins);
    Ok(installed)
}

/// Leaks a string: plugin operations live as long as the process, like the built-ins.
fn forever(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 64
}

/// One plugin operation as the registry holds operations.
fn spec(entry: Entry, earlier: &[OperationSpec]) -> Result<OperationSpec, String> {
    let name = entry.name;
    if !is_name(&name) {
        return Err(format!(
            "its name {name:?} is not lower-case letters, digits and _"
        ));
    }
    if operations::OPERATIONS.iter().any(|op| op.name == name)
        || earlier.iter().any(|op| op.name == name)
    {
        return Err(format!("`{name}` is already an operation"));
    }
    let mut params = Vec::new();
    for param in entry.params {
        let (kind, meaning) = match param.r#type.as_str() {
            "string" => (ParamType::String, ParamMeaning::Text),
            "integer" => (ParamType::Integer, ParamMeaning::Setting),
            "boolean" => (ParamType::Boolean, ParamMeaning::Setting),
            "path" => (ParamType::String, ParamMeaning::FilePath),
            "directory" => (ParamType::String, ParamMeaning::DirPath),
            "step" => (ParamType::String, ParamMeaning::StepRef),
            "command" => (ParamType::String, ParamMeaning::Command),
            other => {
                return Err(format!(
                    "`{name}`: parameter `{}` has the unknown type {other:?}",
                    param.name
                ));
            }
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
        });
    }
    let declared = |p: &String| params.iter().any(|q| q.name == p.as_str());
    if let Some(unknown) = entry
        .writes
        .iter()
        .chain(&entry.exactly_one_of)
        .find(|p| !declared(p))
    {
        return Err(format!(
            "`{name}` names `{unknown}`, which is not one of its parameters"
        ));
    }
    let sees_directories = params.iter().any(|p| p.meaning == ParamMeaning::DirPath);
    let names = |list: Vec<String>| -> &'static [&'static str] {
        Box::leak(
            list.into_iter()
                .map(forever)
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        )
    };
    Ok(OperationSpec {
        name: forever(name),
        doc: forever(entry.doc),
        params: Box::leak(params.into_boxed_slice()),
        exactly_one_of: names(entry.exactly_one_of),
        // A plugin that runs commands, or is given a directory, works in a full view of the
        // repository, as the built-in commands do; the others get only the files their path
        // parameters name.
        access: if entry.runs_commands || sees_directories {
            Access::View
        } else {
            Access::Files
        },
        needs_llm: entry.needs_llm,
        runs_commands: entry.runs_commands,
        writes: names(entry.writes),
        reads: Reads::Named,
    })
}
