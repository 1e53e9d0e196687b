//! Plugin operations, and the library's own declarations: what the library's registry
//! (`open_codex_lib.registry`) lists — its built-ins as its `operations.json` declares them, and
//! the plugins from a plugin folder or an installed package's entry point — read from its
//! catalogue at start-up and installed in `operations`, so the planner's prompt, the flow schema
//! and the validator know them as they know the compiled-in built-ins. A task's saved catalogue
//! (`operations.json` in its directory) is read here too.

use serde::Deserialize;

use crate::flow::declaration::{self, Declaration};
use crate::flow::operations::{self, OperationSpec};

/// The catalogue as the library prints it (`python -m open_codex_lib catalogue`), with the
/// library's `operations.json` beside it (the bridge adds it: `declarations`).
#[derive(Debug, Deserialize)]
struct Catalogue {
    /// Each read on its own: one malformed entry leaves the others usable.
    operations: Vec<serde_json::Value>,
    #[serde(default)]
    problems: Vec<LoadProblem>,
    /// The text of the library's own `operations.json`, when it ships one.
    #[serde(default)]
    declarations: Option<String>,
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
    /// The library declares the compiled-in built-ins and added no plugin: what was validated
    /// before the catalogue was installed is what it validates now.
    pub as_compiled: bool,
}

/// Reads the library's catalogue and installs its operations: the built-ins as the library
/// declares them (the compiled-in ones when it ships no declarations, or ones that do not read),
/// then its plugins. A catalogue that cannot be read is an error, a plugin that cannot be used
/// is a problem.
pub fn install(catalogue: &str) -> ocflow_model::error::Result<Installed> {
    let catalogue: Catalogue = serde_json::from_str(catalogue).map_err(|err| {
        ocflow_model::error::Error::Bridge(format!(
            "the library's operation catalogue is not readable: {err}"
        ))
    })?;
    let mut installed = Installed::default();
    let built_in = || {
        (
            operations::built_in().to_vec(),
            operations::built_in_roles(),
        )
    };
    let (mut specs, roles) = match &catalogue.declarations {
        Some(file) => match declaration::read_built_ins(file) {
            Ok(declared) => (declared.operations, declared.roles),
            Err(err) => {
                installed.problems.push(format!(
                    "the library's operations.json is not used ({err}): the built-in operations \
                     are the ones ocflow was built with"
                ));
                built_in()
            }
        },
        None => built_in(),
    };
    for problem in catalogue.problems {
        installed.problems.push(format!(
            "the plugin {} was not loaded: {}",
            problem.source, problem.message
        ));
    }
    for value in catalogue.operations {
        let name = value["name"].as_str().unwrap_or("?").to_string();
        let entry: Declaration = match serde_json::from_value(value) {
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
        match declaration::spec(entry, &specs) {
            Ok(spec) => {
                installed.added.push(spec.name.to_string());
                specs.push(declaration::leak(spec));
            }
            Err(problem) => installed.problems.push(format!(
                "the plugin operation from {source} is left out: {problem}"
            )),
        }
    }
    installed.as_compiled = installed.added.is_empty()
        && catalogue
            .declarations
            .as_deref()
            .is_none_or(|file| file == operations::BUILT_IN_FILE);
    operations::install(specs, roles);
    Ok(installed)
}

/// Adds the operations of a task's saved catalogue (`operations.json` in its directory) that
/// are not known now: the plugins it used, for the commands that read a task without loading
/// them (`diff`, `apply`, `report`) or that run on with fewer loaded (`resume`). The ones known
/// now stay as they are. Returns the names added.
pub fn adopt_saved(text: &str) -> Result<Vec<String>, String> {
    let saved = declaration::read_saved(text)?;
    let mut specs: Vec<&'static OperationSpec> = operations::all().collect();
    let mut added = Vec::new();
    for spec in saved.operations {
        if specs.iter().all(|known| known.name != spec.name) {
            added.push(spec.name.to_string());
            specs.push(spec);
        }
    }
    if !added.is_empty() {
        operations::install(specs, operations::roles_in_use());
    }
    Ok(added)
}
