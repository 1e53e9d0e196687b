//! What every command that runs steps shares: the LLM client, the operation library, the
//! engine's settings built from the resolved `Config`, and the repository snapshot. Running the
//! executor to an exit code is `execute`'s.

use std::fs;
use std::path::Path;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;

use crate::cli::config::{Config, DEFAULT_CODEX_LIB, Plugins};
use crate::cli::progress;
use ocflow_core::engine::bridge::{self, Bridge, HostLlm};
use ocflow_core::engine::dependencies::Dependencies;
use ocflow_core::engine::executor::{RecoverySettings, Settings};
use ocflow_core::engine::memory::Memory;
use ocflow_core::engine::sandbox::SandboxPlan;
use ocflow_core::engine::sandbox_probe::PendingSandbox;
use ocflow_core::flow::deliverables::Order;
use ocflow_core::flow::path_rules::{PathRules, canonical_or_absolute};
use ocflow_core::flow::plugins;
use ocflow_core::flow::project_instructions::ProjectInstructions;
use ocflow_core::flow::roles::Roles;
use ocflow_core::flow::validate;
use ocflow_core::llm::client::{Endpoint, Llm};
use ocflow_core::llm::key;
use ocflow_core::task::events::Events;
use ocflow_model::error::{Error, Result};
use ocflow_model::event::{Event, Record};
use ocflow_model::flow::Flow;
use ocflow_model::problem::Problem;
use ocflow_model::repo_path::RepoPath;
use ocflow_model::status::{FlowStatus, now};

/// The LLM client, or a usage error saying what to configure.
pub(crate) fn require_llm(config: &Config) -> Result<Arc<Llm>> {
    connect_llm(config)?.ok_or_else(|| no_llm(config))
}

/// The usage error saying what to configure for an LLM.
pub(crate) fn no_llm(config: &Config) -> Error {
    match config.require_llm() {
        Err(missing) => missing,
        Ok(_) => Error::internal("an LLM is configured but no client could be made"),
    }
}

/// The LLM client, when one is configured (`None` otherwise).
pub(crate) fn connect_llm(config: &Config) -> Result<Option<Arc<Llm>>> {
    let Ok(llm) = &config.llm else {
        return Ok(None);
    };
    let mut client = match &llm.replay {
        Some(recording) => Llm::replay(recording)?,
        None if llm.endpoints.is_empty() => return Ok(None),
        None => {
            let mut endpoints = llm.endpoints.clone();
            // The credential helper gives the default key, once, when nothing did: to every
            // profile that takes the default key.
            let inheriting: Vec<&mut Endpoint> = endpoints
                .iter_mut()
                .filter(|(name, e)| llm.default_key_profiles.contains(name) && e.api_key.is_empty())
                .map(|(_, e)| e)
                .collect();
            if let (false, Some(command)) = (inheriting.is_empty(), &llm.key_command) {
                let key = key::from_command(command)?;
                for endpoint in inheriting {
                    endpoint.api_key = key.clone();
                }
            }
            Llm::connect(endpoints, llm.record.as_deref())?
        }
    };
    client.redact_ignored_files(&config.repo, &config.workspace);
    Ok(Some(Arc::new(client)))
}

/// The operation library, loaded into the embedded interpreter once per process.
static LOADED: OnceLock<Library> = OnceLock::new();

/// What loading the library gave.
struct Library {
    bridge: Arc<Bridge>,
    /// What could not be loaded, in words: plugins, and roles naming no operation.
    problems: Vec<String>,
    /// Whether the operations are the compiled-in ones (`plugins::Installed::as_compiled`).
    as_compiled: bool,
}

/// The library loading on a thread of its own (`load_in_background`), for the first
/// `load_operations` to take.
static LOADING: Mutex<Option<JoinHandle<Result<Library>>>> = Mutex::new(None);

/// Whether the library's load may go on while a flow given with `--plan` is read and its task
/// set up: no plugin folder, and the bundled library, so the operations are the compiled-in
/// ones (a flow naming an entry point's operation fails to read, waits for the load and is read
/// again; one the library declares otherwise is checked again, `validated_again`).
pub(crate) fn may_load_later(config: &Config) -> bool {
    config.plugins.folders.is_empty() && config.codex_lib == DEFAULT_CODEX_LIB
}

/// Starts loading the library on a thread of its own: the interpreter's start (tens of
/// milliseconds) goes on while the command reads its flow and sets its task up (issue 28 §4).
pub(crate) fn load_in_background(config: &Config) {
    let (python_dir, module) = (config.python_dir.clone(), config.codex_lib.clone());
    let plugins = config.plugins.clone();
    let started = std::thread::Builder::new()
        .name("library".into())
        .spawn(move || load_library(python_dir, &module, &plugins));
    if let Ok(handle) = started {
        *LOADING.lock().unwrap_or_else(PoisonError::into_inner) = Some(handle);
    }
}

/// Whether a load started by `load_in_background` has not been taken yet.
pub(crate) fn loading() -> bool {
    LOADING
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .is_some()
}

fn load_library(python_dir: Option<PathBuf>, module: &str, plugins: &Plugins) -> Result<Library> {
    let python_dir = bridge::find_python_dir(python_dir);
    let bridge = Arc::new(Bridge::load(python_dir.as_deref(), module)?);
    let (problems, as_compiled) = match bridge.catalogue(&plugins.folders, plugins.entry_points)? {
        Some(catalogue) => {
            let installed = plugins::install(&catalogue)?;
            (installed.problems, installed.as_compiled)
        }
        None if plugins.folders.is_empty() => (Vec::new(), true),
        None => (
            vec![format!(
                "{module} has no operation registry (load_plugins, catalogue): the plugin \
                 folders in [plugins] are not loaded"
            )],
            true,
        ),
    };
    Ok(Library {
        bridge,
        problems,
        as_compiled,
    })
}

/// The operation library, loaded into the embedded interpreter (once per process), its
/// catalogue's plugin operations added to the registry.
pub(crate) fn load_bridge(config: &Config) -> Result<Arc<Bridge>> {
    Ok(load_operations(config)?.0)
}

/// Loads the library and takes its catalogue: the plugin operations join the built-ins before
/// any flow is planned or validated. Returns the library and a warning for every plugin that
/// could not be loaded and every role naming an operation that does not exist. A load started
/// in the background is waited for, and says its warnings itself (the command's start, which
/// says the others, did not wait for it).
pub(crate) fn load_operations(config: &Config) -> Result<(Arc<Bridge>, Vec<String>)> {
    if let Some(loaded) = LOADED.get() {
        return Ok((loaded.bridge.clone(), loaded.problems.clone()));
    }
    let background = LOADING
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    let joined = background.is_some();
    let mut loaded = match background {
        Some(handle) => handle
            .join()
            .unwrap_or_else(|_| Err(Error::internal("loading the library panicked")))?,
        None => load_library(
            config.python_dir.clone(),
            &config.codex_lib,
            &config.plugins,
        )?,
    };
    loaded.problems.extend(config.roles.unknown_operations());
    if joined {
        for message in &loaded.problems {
            let event = Event::Warning {
                message: message.clone(),
            };
            progress::show(&Record::now(now(), event), config.json);
        }
    }
    let answer = (loaded.bridge.clone(), loaded.problems.clone());
    let _ = LOADED.set(loaded);
    Ok(answer)
}

/// Whether a flow read before the library was loaded must be read again: the library declared
/// other operations than the compiled-in ones (see `may_load_later`).
pub(crate) fn validated_again() -> bool {
    LOADED.get().is_some_and(|loaded| !loaded.as_compiled)
}

/// Reads and validates a flow file, checking its size before reading it whole; with what
/// validation added to it (see `validate::parse_flow_noting`). `order`: `Any` for a plan
/// read for the first time (`--plan`), `AsWritten` for a flow read again.
pub(crate) fn read_flow(
    path: &Path,
    default_task: Option<&str>,
    rules: &PathRules,
    roles: &Roles,
    order: Order,
) -> Result<(Flow, Vec<String>)> {
    let unreadable = |err: std::io::Error| {
        Error::Usage(format!("cannot read the flow {}: {err}", path.display()))
    };
    let size = fs::metadata(path).map_err(unreadable)?.len();
    if size > validate::MAX_FLOW_BYTES as u64 {
        return Err(Error::InvalidFlow(vec![Problem {
            step: None,
            rule: "limits",
            message: format!(
                "{} is {size} bytes; the limit is {}",
                path.display(),
                validate::MAX_FLOW_BYTES
            ),
        }]));
    }
    let text = fs::read_to_string(path).map_err(unreadable)?;
    // The roles' problems come with the parameters' (every problem at once).
    let role_problems = |flow: &Flow| roles.apply(flow.clone()).err().unwrap_or_default();
    let (flow, notes) =
        validate::parse_flow_checking(&text, default_task, rules, order, &role_problems)
            .map_err(Error::InvalidFlow)?;
    if flow.task.len() > validate::MAX_TASK_BYTES {
        return Err(Error::InvalidFlow(vec![Problem {
            step: None,
            rule: "limits",
            message: format!(
                "the flow's task is {} bytes, over the 1 MiB limit for a task; put a long \
                 specification in a file in the repository and give a short task that names it",
                flow.task.len()
            ),
        }]));
    }
    // Who takes each step, and whether that role may: hand-written flows are held to it too.
    let flow = roles.apply(flow).map_err(Error::InvalidFlow)?;
    Ok((flow, notes))
}

/// The engine's settings for a flow on `rules.repo` with its tasks in `workspace_dir`, from the
/// resolved configuration (waiting for the sandbox probe, if it still runs).
pub(crate) fn engine_settings(
    config: &Config,
    rules: &PathRules,
    workspace_dir: &Path,
    llm: Option<Arc<Llm>>,
) -> Result<Settings> {
    settings_waiting(config, rules, workspace_dir, llm, SandboxWait::Now)
}

/// When a flow waits for its sandbox probe.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SandboxWait {
    /// Before the flow starts (`engine_settings`): its start says what confines commands.
    Now,
    /// Before its first command step: the engine waits (`Settings::pending_sandbox`), and
    /// LLM steps start beside the probe.
    BeforeCommands,
}

/// `engine_settings`, waiting for the sandbox probe as `defer_sandbox` says.
pub(crate) fn settings_waiting(
    config: &Config,
    rules: &PathRules,
    workspace_dir: &Path,
    llm: Option<Arc<Llm>>,
    defer_sandbox: SandboxWait,
) -> Result<Settings> {
    let models = config.llm.as_ref().ok();
    let run = &config.run;
    let workspace_dir = canonical_or_absolute(workspace_dir);
    let runtime = tokio::runtime::Handle::current();
    let role_prompts = config
        .roles
        .iter()
        .filter_map(|(name, role)| Some((name.clone(), role.prompt.clone()?)))
        .collect();
    let sandbox = match defer_sandbox {
        SandboxWait::Now => run.sandbox.plan()?,
        SandboxWait::BeforeCommands => None,
    };
    let mut settings = Settings {
        host_llm: llm.clone().zip(models).map(|(llm, models)| {
            Arc::new(HostLlm {
                llm,
                settings: models.operations.clone(),
                role_models: models.roles.clone(),
                profile_models: models.profiles.clone(),
                role_prompts,
                instructions: project_instructions(&rules.repo, &workspace_dir),
                runtime,
            })
        }),
        // Without an endpoint for its profile, the summary is written from the journal.
        summary_llm: llm.clone().zip(
            models
                .filter(|m| m.unavailable_for(&m.summary).is_none())
                .map(|m| m.summary.clone()),
        ),
        recovery_limits: run.recovery_limits,
        jobs: run.jobs,
        sandbox: sandbox.map(|plan| plan.protecting(&[rules.repo.clone(), workspace_dir.clone()])),
        pending_sandbox: None,
        recovery: llm
            .zip(models)
            .filter(|(_, models)| {
                run.recovery && models.unavailable_for(&models.recovery).is_none()
            })
            .map(|(llm, models)| RecoverySettings {
                llm,
                model: models.recovery.clone(),
                rules: rules.clone(),
                policy: config.proposal_policy(),
                roles: config.roles.clone(),
            }),
        limits: run.limits.clone(),
        // The workspace as a repository path, when it lies inside the repository.
        forbidden: RepoPath::from_walk(&rules.repo, &workspace_dir)
            .into_iter()
            .collect(),
        dependencies: Dependencies::find(&rules.repo, std::slice::from_ref(&workspace_dir)),
        // Set by the command once it knows what the flow spent before (`cli::budget`).
        budget: None,
        memory: memory(config),
        reflect: run.reflect,
        approve_risky: config.approvals.risky.then_some(config.policy),
        hooks: config.hooks.clone(),
    };
    if let SandboxWait::BeforeCommands = defer_sandbox {
        let dependencies = settings.dependencies.clone();
        settings.pending_sandbox =
            Some(pending_sandbox(config, rules, &workspace_dir, dependencies));
    }
    Ok(settings)
}

/// The repository's instructions for agents (`AGENTS.md` and the rest), found once a process:
/// the planner's prompt and the steps' take the same files, and finding them walks the
/// repository (about 0.1 s on 20,000 files). A process runs one flow; MCP and batches start a
/// process for each.
pub(crate) fn project_instructions(repo: &Path, workspace: &Path) -> ProjectInstructions {
    type Found = Option<(PathBuf, PathBuf, ProjectInstructions)>;
    static FOUND: Mutex<Found> = Mutex::new(None);
    let mut found = FOUND.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((at, skipped, instructions)) = found.as_ref()
        && at == repo
        && skipped == workspace
    {
        return instructions.clone();
    }
    let instructions = ProjectInstructions::find(repo, &[workspace.to_path_buf()]);
    *found = Some((
        repo.to_path_buf(),
        workspace.to_path_buf(),
        instructions.clone(),
    ));
    instructions
}

/// The failure memory of the configured repository, in the user's state directory; `None`
/// with `--no-memory` or without a state directory. Made once a process for a repository (its
/// key asks git, the redaction reads its ignored files), for the planner and the engine alike.
pub(crate) fn memory(config: &Config) -> Option<Arc<Memory>> {
    type Made = Option<(std::path::PathBuf, Arc<Memory>)>;
    static MEMORY: std::sync::Mutex<Made> = std::sync::Mutex::new(None);
    if !config.run.memory {
        return None;
    }
    let mut made = MEMORY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((repo, memory)) = made.as_ref()
        && *repo == config.repo
    {
        return Some(memory.clone());
    }
    let state = crate::cli::user_state::dir()?;
    let memory = Arc::new(Memory::for_repository(
        &state,
        &config.repo,
        &canonical_or_absolute(&config.workspace),
    ));
    *made = Some((config.repo.clone(), memory.clone()));
    Some(memory)
}

/// Records what confines the flow's command steps, and warns, once per flow, when a command
/// could still read the key from the environment of a process that started ocflow. A flow
/// that waits for its probe (`SandboxWait::BeforeCommands`) says it when the engine has waited.
pub(crate) fn report_sandbox(
    config: &Config,
    settings: &Settings,
    flow_status: &mut FlowStatus,
    events: &mut Events,
) -> Result<()> {
    if settings.pending_sandbox.is_some() {
        return Ok(());
    }
    let (line, warnings) = sandbox_report(
        config.key_variable.as_deref(),
        &settings.dependencies,
        settings.sandbox.as_ref(),
    );
    flow_status.sandbox = Some(line);
    for message in warnings {
        events.emit(Event::Warning { message })?;
    }
    Ok(())
}

/// The probe still running for a flow on `rules.repo`, handed to the engine with what it
/// says of the plan once known.
fn pending_sandbox(
    config: &Config,
    rules: &PathRules,
    workspace_dir: &Path,
    dependencies: Dependencies,
) -> PendingSandbox {
    let key_variable = config.key_variable.clone();
    PendingSandbox {
        probe: config.run.sandbox.clone(),
        protect: vec![rules.repo.clone(), workspace_dir.to_path_buf()],
        report: Box::new(move |plan| sandbox_report(key_variable.as_deref(), &dependencies, plan)),
    }
}

/// The status's sandbox line for `plan`, and the warnings of the flow's start: what the probe
/// left out, the key a command could read (`key_variable`, when it came from the
/// environment), the `dependencies` copied into views.
fn sandbox_report(
    key_variable: Option<&str>,
    dependencies: &Dependencies,
    plan: Option<&SandboxPlan>,
) -> (String, Vec<String>) {
    let line = match plan {
        Some(plan) => format!("{}: {}", plan.kind(), plan.describe()),
        None => "none: command steps run unconfined (--no-sandbox, `[sandbox] enabled = false`, \
                 or a kernel with neither namespaces nor Landlock)"
            .into(),
    };
    let mut warnings = Vec::new();
    let key_exposed = key_variable.filter(|_| !plan.is_some_and(SandboxPlan::isolates_processes));
    // What the start-up probe left out, because bubblewrap was refused or a trial launch
    // failed. Where that took the namespaces, what it means for the key is said with it: one
    // warning for one cause (in a container, the usual case).
    let fallbacks = plan
        .map(|plan| plan.fallbacks.as_slice())
        .unwrap_or_default();
    let key_said_with = key_exposed.filter(|_| !fallbacks.is_empty());
    for (at, fallback) in fallbacks.iter().enumerate() {
        let message = match key_said_with {
            Some(variable) if at + 1 == fallbacks.len() => format!(
                "{fallback}. So the sandbox is partial here: a command step could read the API \
                 key from the environment of a process that started ocflow ({variable}), and \
                 your files too, so a key file ({}) does not help here: let `api_key_command` \
                 in your ocflow config fetch the key (a password manager) instead",
                key::KEY_FILE_VARIABLE
            ),
            _ => fallback.clone(),
        };
        warnings.push(message);
    }
    // The repository's installed dependencies are copied into views where no mount can show
    // them: slower, and worth knowing.
    let mounted = plan.is_some_and(SandboxPlan::mounts_dependencies);
    if !dependencies.is_empty() && !mounted {
        warnings.push(format!(
            "command steps see copies of the repository's {} (no namespaces to bind them \
             read-only here): each view copies them once, and what a command changes in \
             them stays in its view",
            dependencies.listing()
        ));
    }
    if let (Some(variable), None) = (key_exposed, key_said_with) {
        warnings.push(format!(
            "the sandbox is partial here (no namespaces), so a command step could read \
             the API key from the environment of a process that started ocflow \
             ({variable}); namespaces close this (install bubblewrap). Without them a \
             command can read your files too, so a key file ({}) does not help here: let \
             `api_key_command` in your ocflow config fetch the key (a password manager) \
             instead",
            key::KEY_FILE_VARIABLE
        ));
    }
    (line, warnings)
}
