//! The pyo3 bridge: loads the operation library (`open_codex_lib` or `--codex-lib MODULE`) into
//! the embedded interpreter and runs one step through `execute_operation`. Calls block, so the
//! executor makes them from `spawn_blocking`; Python releases the GIL while a step waits on a
//! subprocess or the network, so steps can overlap.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyDict, PyModule, PyTuple};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::flow::project_instructions::{ProjectInstructions, Selected};
use crate::flow::test_command::TestCommand;
use crate::llm::client::Llm;
use ocflow_model::error::{Error, Result};
use ocflow_model::flow::Step;
use ocflow_model::llm::{ChatRequest, DEFAULT_PROFILE, Message, ModelSettings};
use ocflow_model::repo_path::RepoPath;

/// The kind of the error a step's model call ends with when ocflow is stopping (a signal): the
/// executor runs such a step again on resume, never counts it failed.
pub(crate) const STOPPING_KIND: &str = "interrupted";

/// The LLM as the library reaches it: `llm_config["complete"]` calls back into this process,
/// so retries, token accounting, recording and the key stay in one place.
pub struct HostLlm {
    pub llm: Arc<Llm>,
    /// The library's operations' model, for steps whose role names none.
    pub settings: ModelSettings,
    /// Each role's model, for roles that name a profile or limits.
    pub role_models: BTreeMap<String, ModelSettings>,
    /// Every profile's model (`default` included), for steps that name a profile or a model
    /// themselves.
    pub profile_models: BTreeMap<String, ModelSettings>,
    /// Each role's addition to the system prompt.
    pub role_prompts: BTreeMap<String, String>,
    /// The repository's own instructions for agents, each step given those for its target.
    pub instructions: ProjectInstructions,
    pub runtime: tokio::runtime::Handle,
}

/// The model one step asks: its role's, or the operations' one.
#[derive(Clone)]
pub(crate) struct StepLlm {
    pub(crate) host: Arc<HostLlm>,
    /// What its calls are counted under: the step id.
    pub(crate) purpose: String,
    pub(crate) settings: ModelSettings,
    /// Added to the system prompt of each call.
    pub(crate) prompt: Option<String>,
    /// The repository's conventions for the step's target, after the system prompt's fixed
    /// text and the role's (so a prefix cache keeps the fixed part).
    pub(crate) conventions: Option<Selected>,
    /// Why the step runs again (`StepStatus::feedback`), before its own request.
    pub(crate) feedback: Option<String>,
}

impl HostLlm {
    /// The model `step` asks, counted under its id, shown the repository's instructions for
    /// `target` (the file it works on; `None`: the whole repository). Its own `profile` or
    /// `model` wins over its role's; a `model` alone is asked at the default endpoint.
    pub(crate) fn for_step(self: &Arc<Self>, step: &Step, target: Option<&RepoPath>) -> StepLlm {
        let role = step.role.as_deref().unwrap_or_default();
        let named = match (&step.profile, &step.model) {
            (Some(profile), _) => self.profile_models.get(profile),
            (None, Some(_)) => self.profile_models.get(DEFAULT_PROFILE),
            (None, None) => None,
        };
        let mut settings = named
            .or_else(|| self.role_models.get(role))
            .unwrap_or(&self.settings)
            .clone();
        if let Some(model) = &step.model {
            settings.model.clone_from(model);
        }
        StepLlm {
            host: self.clone(),
            purpose: step.id.clone(),
            settings,
            prompt: self.role_prompts.get(role).cloned(),
            conventions: self.instructions.for_target(target),
            feedback: None,
        }
    }
}

/// What the library sends through `complete`.
#[derive(Deserialize)]
struct CompleteCall {
    messages: Vec<Message>,
    #[serde(default)]
    json: bool,
    /// A JSON Schema for the answer, for endpoints that constrain decoding to one.
    #[serde(default)]
    schema: Option<Value>,
    /// The temperature of this call (a re-ask asks a little warmer), instead of the step's.
    #[serde(default)]
    temperature: Option<f32>,
}

impl StepLlm {
    /// The `llm_config` the library is given (model settings; never the key).
    pub(crate) fn config(&self) -> Value {
        json!({
            "model": self.settings.model,
            "temperature": self.settings.temperature,
            "max_tokens": self.settings.max_tokens,
        })
    }

    /// One `complete` call from a step, as JSON in and out. Called on the step's own thread
    /// (a `spawn_blocking` thread, where blocking on the runtime is allowed) with the GIL
    /// released.
    fn complete(&self, call: &str) -> String {
        let call: CompleteCall = match serde_json::from_str(call) {
            Ok(call) => call,
            Err(err) => {
                return json!({"error": {
                    "kind": "bad_request",
                    "transient": false,
                    "message": format!("complete() got {err}"),
                }})
                .to_string();
            }
        };
        let mut settings = self.settings.clone();
        if let Some(temperature) = call.temperature {
            settings.temperature = Some(temperature.clamp(0.0, 2.0));
        }
        let mut messages = call.messages;
        let conventions = self.conventions.as_ref().map(|c| c.section.clone());
        for addition in [self.prompt.clone(), conventions].into_iter().flatten() {
            match messages.iter_mut().find(|m| m.role == "system") {
                Some(system) => system.content = format!("{}\n\n{addition}", system.content),
                None => messages.insert(0, Message::system(addition.clone())),
            }
        }
        // The step's own request starts with why it runs again: a model that answered the
        // same code before sees what the tests said of it.
        if let Some(feedback) = &self.feedback
            && let Some(request) = messages.iter_mut().find(|m| m.role == "user")
        {
            request.content = format!("{feedback}\n\n{}", request.content);
        }
        let request = ChatRequest {
            purpose: self.purpose.clone(),
            settings,
            messages,
            json: call.json,
            schema: call.schema,
            optional: false,
        };
        // A signal ends the call at once: the run then stops, and its runtime with it, while
        // this step's thread may still be here (a call going on to use the runtime's timers
        // then panicked).
        let stopped = || {
            json!({"error": {
                "kind": STOPPING_KIND,
                "transient": true,
                "message": "ocflow is stopping (a signal): the step runs again on resume",
            }})
            .to_string()
        };
        if crate::task::interrupt::raised() {
            return stopped();
        }
        let answered = self.host.runtime.block_on(async {
            tokio::select! {
                biased;
                () = crate::task::interrupt::stopped() => None,
                answer = self.host.llm.chat(&request) => Some(answer),
            }
        });
        let Some(answered) = answered else {
            return stopped();
        };
        match answered {
            Ok(answer) => json!({
                "content": answer.content,
                "finish_reason": answer.finish_reason,
                "usage": {
                    "prompt_tokens": answer.usage.prompt_tokens,
                    "completion_tokens": answer.usage.completion_tokens,
                    "total_tokens": answer.usage.total_tokens,
                },
            })
            .to_string(),
            Err(error) => json!({"error": {
                "kind": error.kind,
                "transient": error.transient(),
                "message": error.message,
            }})
            .to_string(),
        }
    }
}

const SHIM: &str = include_str!("bridge_shim.py");

/// The loaded library.
pub struct Bridge {
    shim: Py<PyModule>,
    library: Py<PyAny>,
    /// What was loaded, for messages: module, file, interpreter.
    pub description: String,
}

/// How one call of `execute_operation` ended.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum CallOutcome {
    /// The library returned a JSON-like dict (its `status` is checked by the caller).
    Returned { result: Value },
    /// The library raised.
    Exception {
        r#type: String,
        message: String,
        traceback: String,
    },
    /// The library returned something that is not a JSON-like dict.
    Garbage { message: String },
}

impl Bridge {
    /// Starts the interpreter if needed, puts `python_dir` first on `sys.path`, and imports
    /// `module`, which must have a callable `execute_operation`.
    pub fn load(python_dir: Option<&Path>, module: &str) -> Result<Bridge> {
        crate::engine::interpreter::start();
        Python::attach(|py| -> PyResult<Bridge> {
            if let Some(dir) = python_dir {
                let path = py.import("sys")?.getattr("path")?;
                path.call_method1("insert", (0, dir.to_string_lossy().to_string()))?;
            }
            let code = CString::new(SHIM)
                .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
            let shim =
                PyModule::from_code(py, &code, c"ocflow_bridge_shim.py", c"ocflow_bridge_shim")?;
            shim.call_method0("install")?;
            crate::engine::bridge_host::install(py)?;
            let library = shim.call_method1("load", (module,))?;
            let file: String = library
                .getattr("__file__")
                .and_then(|f| f.extract())
                .unwrap_or_else(|_| "?".into());
            let python: String = shim.call_method0("describe")?.extract()?;
            Ok(Bridge {
                shim: shim.unbind(),
                library: library.unbind(),
                description: format!("{module} from {file} ({python})"),
            })
        })
        .map_err(|err| {
            let detail = Python::attach(|py| format_error(py, &err));
            Error::Bridge(format!(
                "{detail}\nocflow looks for the library in --python-dir / OCFLOW_PYTHON_DIR, next \
                 to the executable, in its source tree, then in its Python's own paths (`pip \
                 install ./python` from a clone, with the Python ocflow was built against: {}); \
                 a module given with --codex-lib must be importable (PYTHONPATH)",
                crate::engine::interpreter::built_home().unwrap_or("see PYO3_PYTHON")
            ))
        })
    }

    /// The syntax checks' grammars: each language with `None` when it loads, else why not and
    /// what to install; an error when the library's syntax module cannot be read.
    pub fn syntax_checks(&self) -> Result<Vec<(String, Option<String>)>> {
        Python::attach(|py| -> PyResult<Vec<(String, Option<String>)>> {
            let found = py
                .import("open_codex_lib.syntax")?
                .call_method0("availability")?;
            let mut languages = Vec::new();
            for item in found.call_method0("items")?.try_iter()? {
                let (language, problem): (String, Option<String>) = item?.extract()?;
                languages.push((language, problem));
            }
            Ok(languages)
        })
        .map_err(|err| Error::Bridge(Python::attach(|py| format_error(py, &err))))
    }

    /// Runs one step. Everything the library prints goes to `log_path`. With `host`, the
    /// library gets `llm_config["complete"]`, counted under the step's id.
    pub(crate) fn execute(
        &self,
        instructions: &Path,
        llm_config: &Value,
        log_path: &Path,
        host: Option<StepLlm>,
    ) -> CallOutcome {
        Python::attach(|py| -> PyResult<CallOutcome> {
            let host_functions = PyDict::new(py);
            if let Some(host) = host {
                let complete = PyCFunction::new_closure(
                    py,
                    Some(c"complete_json"),
                    None,
                    move |args: &Bound<'_, PyTuple>,
                          _kwargs: Option<&Bound<'_, PyDict>>|
                          -> PyResult<String> {
                        let call: String = args.get_item(0)?.extract()?;
                        let host = host.clone();
                        Ok(args.py().detach(move || host.complete(&call)))
                    },
                )?;
                host_functions.set_item("complete_json", complete)?;
            }
            let text: String = self
                .shim
                .bind(py)
                .call_method1(
                    "run_step",
                    (
                        self.library.bind(py),
                        instructions.to_string_lossy().to_string(),
                        llm_config.to_string(),
                        log_path.to_string_lossy().to_string(),
                        host_functions,
                    ),
                )?
                .extract()?;
            serde_json::from_str(&text)
                .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
        })
        .unwrap_or_else(|err| CallOutcome::Garbage {
            message: format!(
                "the bridge itself failed: {}",
                Python::attach(|py| format_error(py, &err))
            ),
        })
    }

    /// Loads the plugins from `folders` (and the installed packages' entry points, with
    /// `entry_points`) and returns the library's operation catalogue as JSON; `None` for a
    /// library without a registry.
    pub fn catalogue(&self, folders: &[PathBuf], entry_points: bool) -> Result<Option<String>> {
        let folders: Vec<String> = folders
            .iter()
            .map(|f| f.to_string_lossy().into_owned())
            .collect();
        let folders = serde_json::to_string(&folders).unwrap_or_else(|_| "[]".into());
        Python::attach(|py| -> PyResult<Option<String>> {
            self.shim
                .bind(py)
                .call_method1("catalogue", (self.library.bind(py), folders, entry_points))?
                .extract()
        })
        .map_err(|err| {
            Error::Bridge(format!(
                "the library's operation catalogue could not be read: {}",
                Python::attach(|py| format_error(py, &err))
            ))
        })
    }

    /// How the repository at `repo` runs its tests, most specific first, as the library's
    /// `find_test_commands` reads its build files: the one guess both the planner's prompt and
    /// a `run_tests` step without a command use. `None` for a library without that function.
    pub fn test_commands(&self, repo: &Path) -> Result<Option<Vec<TestCommand>>> {
        let repo = repo.to_string_lossy().into_owned();
        let text = Python::attach(|py| -> PyResult<Option<String>> {
            self.shim
                .bind(py)
                .call_method1("test_commands", (self.library.bind(py), repo))?
                .extract()
        })
        .map_err(|err| {
            Error::Bridge(format!(
                "the library could not say how the repository runs its tests: {}",
                Python::attach(|py| format_error(py, &err))
            ))
        })?;
        text.map(|text| {
            serde_json::from_str(&text).map_err(|err| {
                Error::Bridge(format!(
                    "the library's find_test_commands returned {text:?}, not a list of \
                     {{command, framework, found_in}}: {err}"
                ))
            })
        })
        .transpose()
    }

    /// The library's map of the repository's definitions for the planner: `files` (relative
    /// to `repo`), the most related to `task` first, in at most `budget` characters. `None`
    /// for a library without `map_repository`.
    pub fn repo_map(
        &self,
        repo: &Path,
        files: &[RepoPath],
        task: &str,
        budget: usize,
    ) -> Result<Option<String>> {
        let repo = repo.to_string_lossy().into_owned();
        let files = serde_json::to_string(files).map_err(|err| Error::internal(err.to_string()))?;
        Python::attach(|py| -> PyResult<Option<String>> {
            self.shim
                .bind(py)
                .call_method1(
                    "repo_map",
                    (self.library.bind(py), repo, files, task, budget),
                )?
                .extract()
        })
        .map_err(|err| {
            Error::Bridge(format!(
                "the library could not map the repository: {}",
                Python::attach(|py| format_error(py, &err))
            ))
        })
    }

    /// Has the library import the modules of `operations` now, on a thread of its own, while
    /// the caller sets up the flow's task: the first steps would otherwise import them, one
    /// waiting for the other's import. A failing import is left for the step to report.
    pub fn preload(self: &Arc<Self>, operations: BTreeSet<String>) {
        let bridge = Arc::clone(self);
        let names = serde_json::to_string(&operations).unwrap_or_else(|_| "[]".into());
        let _ = std::thread::Builder::new()
            .name("preload".into())
            .spawn(move || {
                Python::attach(|py| {
                    let _ = bridge
                        .shim
                        .bind(py)
                        .call_method1("preload", (bridge.library.bind(py), names));
                });
            });
    }

    /// Asks the library to kill the commands it is running (its optional `cancel_all`).
    pub(crate) fn cancel_all(&self) {
        Python::attach(|py| {
            let _ = self
                .shim
                .bind(py)
                .call_method1("cancel", (self.library.bind(py),));
        });
    }
}

fn format_error(py: Python<'_>, err: &PyErr) -> String {
    let traceback = err
        .traceback(py)
        .and_then(|tb| tb.format().ok())
        .unwrap_or_default();
    format!("{traceback}{err}")
}

/// Where the bundled `python/` folder is: the explicit directory, else next to the executable
/// (or up to three levels above it, which covers `target/debug/ocflow` in a checkout), else
/// the source tree this binary was built from.
pub fn find_python_dir(explicit: Option<PathBuf>) -> Option<PathBuf> {
    if explicit.is_some() {
        return explicit;
    }
    let has_library = |dir: &Path| dir.join("open_codex_lib").join("__init__.py").is_file();
    if let Ok(exe) = std::env::current_exe() {
        for dir in exe.ancestors().skip(1).take(4) {
            let candidate = dir.join("python");
            if has_library(&candidate) {
                return Some(candidate);
            }
        }
    }
    // The checkout this binary was built from (the crate lives in `crates/ocflow-core`).
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../python")
        .canonicalize()
        .ok()?;
    has_library(&source).then_some(source)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The library's tests of views made of layers (`python/tests/test_view.py`), run by pytest
    /// inside the embedded interpreter, where they read the layers through the `ocflow_host`
    /// module the bridge installs (`engine::bridge_host`): the rules are the host's, the
    /// assertions the library's.
    #[test]
    fn the_library_reads_views_made_of_layers_through_the_host() {
        let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python");
        Bridge::load(Some(&python), "open_codex_lib").unwrap();
        let tests = python.join("tests/test_view.py");
        let code = CString::new(format!(
            r#"
import sys
import pytest

class Outcomes:
    def __init__(self):
        self.seen = []

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            reason = report.longrepr[2] if report.skipped else str(report.longrepr or "")
            self.seen.append((report.nodeid.split("::")[-1], report.outcome, reason))

if not hasattr(sys, "argv"):
    sys.argv = ["pytest"]
outcomes = Outcomes()
code = int(pytest.main(
    [{tests:?}, "-q", "-p", "no:cacheprovider", "--capture=sys"], plugins=[outcomes]
))
seen = outcomes.seen
"#,
            tests = tests.display().to_string()
        ))
        .unwrap();
        let (code, seen): (i32, Vec<(String, String, String)>) = Python::attach(|py| {
            let scope = PyDict::new(py);
            py.run(&code, Some(&scope), Some(&scope))?;
            let code = scope.get_item("code")?.unwrap().extract()?;
            let seen = scope.get_item("seen")?.unwrap().extract()?;
            PyResult::Ok((code, seen))
        })
        .unwrap();
        if seen
            .iter()
            .any(|(_, _, why)| why.contains("extended attributes"))
        {
            eprintln!("SKIPPED: no user extended attributes on this file system");
            return;
        }
        let mut outcomes: Vec<(&str, &str)> = seen
            .iter()
            .map(|(name, outcome, _)| (name.as_str(), outcome.as_str()))
            .collect();
        outcomes.sort();
        assert_eq!(
            outcomes,
            vec![
                (
                    "test_a_path_is_read_from_the_highest_layer_that_has_it",
                    "passed"
                ),
                ("test_a_symlink_is_followed_through_the_view", "passed"),
                ("test_a_walk_merges_the_layers", "passed"),
                (
                    "test_the_test_command_is_found_through_the_layers",
                    "passed"
                ),
                ("test_without_layers_the_work_dir_is_the_view", "passed"),
                // Here the host's functions are there: nothing is missing.
                (
                    "test_without_the_host_a_view_made_of_layers_says_what_it_needs",
                    "skipped"
                ),
            ],
            "{seen:?}"
        );
        assert_eq!(code, 0, "{seen:?}");
    }
}
