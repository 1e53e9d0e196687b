//! The resolved configuration: command line, environment and config files turned into one
//! checked value before any work starts (ripgrep's raw flags → `HiArgs`, fd's `Opts` →
//! `Config`); the rest of ocflow reads only `Config`. Precedence: flags > environment > the
//! workspace's `ocflow.toml` > `~/.config/ocflow/config.toml` > defaults.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::cli::args::BudgetArgs;
use crate::cli::args::{ApproveWhat, GlobalArgs, LimitArgs};
use crate::cli::budget::{self, FilePrice};
use crate::cli::layered::{Layered, layered};
use crate::cli::profiles::{self, FileLlm, LlmConfig, NoLlm};
use ocflow_core::engine::hooks::Hooks;
use ocflow_core::engine::recovery;
use ocflow_core::engine::sandbox::{self, SandboxSettings};
use ocflow_core::engine::sandbox_probe::SandboxProbe;
use ocflow_core::flow::path_rules::{PathRules, absolute, canonical_or_absolute};
use ocflow_core::flow::policy::CommandPolicy;
use ocflow_core::flow::roles::{Role, Roles};
use ocflow_core::llm::budget::Price;
use ocflow_core::llm::key::ApiKey;
use ocflow_core::task::workspace::WORKSPACE_CONFIG;
use ocflow_model::approval::Approvals;
use ocflow_model::budget::BudgetLimits;
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::llm::DEFAULT_PROFILE;
use ocflow_model::step_spec::Limits;

/// The default operation library.
pub(crate) const DEFAULT_CODEX_LIB: &str = "open_codex_lib";
const DEFAULT_STEP_TIMEOUT_SECONDS: u64 = 600;
/// LLM-bound steps wait most of their time; four at once is a fair share of a small endpoint.
const DEFAULT_JOBS: usize = 4;
const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1024 * 1024;
/// A command step's memory: room for a compiler or a test suite, not for the whole machine.
const DEFAULT_MEMORY_MB: u64 = 8192;
/// A command step's processes at once: a parallel build fits, a fork bomb does not.
const DEFAULT_MAX_PROCESSES: u64 = 1024;

/// Everything a command needs to know, resolved once.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// The canonical repository root.
    pub(crate) repo: PathBuf,
    /// The absolute workspace root (it may not exist yet).
    pub(crate) workspace: PathBuf,
    /// Whether the workspace is the default one inside the repository.
    pub(crate) default_workspace: bool,
    /// Whether the repository was named (`--repo`) or found as git finds it, rather than taken
    /// to be the current directory by a command that needs none.
    pub(crate) repo_named: bool,
    /// Where the flow's paths may go in `repo`.
    pub(crate) rules: PathRules,
    pub(crate) codex_lib: String,
    pub(crate) python_dir: Option<PathBuf>,
    pub(crate) json: bool,
    /// What commands of model-made steps may do.
    pub(crate) policy: CommandPolicy,
    /// Who may take which step (built-in roles and `[roles.NAME]`).
    pub(crate) roles: Roles,
    /// The LLM settings, or why there are none.
    pub(crate) llm: std::result::Result<LlmConfig, NoLlm>,
    /// The environment variable the API key came from, if one held it: a process that started
    /// ocflow still holds it there.
    pub(crate) key_variable: Option<String>,
    /// How steps run: for the commands that run them (`run`, `resume`, `demo`).
    pub(crate) run: RunConfig,
    /// What a person and a headless caller should be told before the command runs (settings
    /// of an untrusted repository's config that were ignored).
    pub(crate) warnings: Vec<String>,
    /// The user's own config file, where `ocflow trust` writes.
    pub(crate) user_config: Option<PathBuf>,
    /// Where plugin operations come from.
    pub(crate) plugins: Plugins,
    /// What a person is asked before the flow goes on (`[approve]` and `--approve`).
    pub(crate) approvals: Approvals,
    /// The user's lifecycle hooks (`[hooks]`).
    pub(crate) hooks: Hooks,
}

/// How steps run.
#[derive(Debug, Clone)]
pub(crate) struct RunConfig {
    /// Steps run at the same time at most.
    pub(crate) jobs: usize,
    /// Default limits of each step.
    pub(crate) limits: Limits,
    /// How command steps are sandboxed; `None`: not at all (`--no-sandbox`, `[sandbox] enabled
    /// = false`, a kernel without Landlock, or a command that runs no steps).
    pub(crate) sandbox: SandboxProbe,
    /// Bounds of automatic retries and of recovery.
    pub(crate) recovery_limits: recovery::Limits,
    /// Whether a failed step goes to the LLM for a recovery strategy (when there is an LLM).
    pub(crate) recovery: bool,
    /// The flow's budget: flags over the config files (`cli::budget`).
    pub(crate) budget: BudgetLimits,
    /// Each model's price, and the models in use without one.
    pub(crate) prices: (BTreeMap<String, Price>, Vec<String>),
    /// Whether the flow recalls and writes the user's failure memory (not with `--no-memory`).
    /// Only the command line turns it off: no config file, least of all a repository's, can
    /// point it elsewhere or turn it on (reliability S9).
    pub(crate) memory: bool,
    /// Whether a flow that needed recovery ends with the reflection's call (not with
    /// `--no-reflect`).
    pub(crate) reflect: bool,
}

/// The contents of a config file. Unknown keys are errors, so a typo is not silently ignored.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConfig {
    /// Python module implementing `execute_operation`.
    pub(crate) codex_lib: Option<String>,
    #[serde(default)]
    pub(crate) limits: FileLimits,
    #[serde(default)]
    pub(crate) llm: FileLlm,
    #[serde(default)]
    pub(crate) recovery: FileRecovery,
    #[serde(default)]
    pub(crate) sandbox: FileSandbox,
    /// Only in the user's own config: the repositories whose own config is obeyed in full.
    #[serde(default)]
    pub(crate) trust: FileTrust,
    /// `[roles.NAME]`: roles added, or built-in ones replaced.
    #[serde(default)]
    pub(crate) roles: std::collections::BTreeMap<String, Role>,
    #[serde(default)]
    pub(crate) plugins: FilePlugins,
    /// `[budget]`: every flow's limits when no flag gives them.
    #[serde(default, deserialize_with = "budget::strict")]
    pub(crate) budget: BudgetArgs,
    /// `[prices."MODEL"]`: the price table of `--max-cost`.
    #[serde(default)]
    pub(crate) prices: BTreeMap<String, FilePrice>,
    /// `[approve]`: what a person is asked before the flow goes on.
    #[serde(default)]
    pub(crate) approve: FileApprove,
    /// `[hooks]`: the user's commands at a flow's points (`engine::hooks`).
    #[serde(default)]
    pub(crate) hooks: FileHooks,
}

/// `[hooks]` in a config file: commands (`/bin/sh -c`) run at each point, in order, given the
/// point's event as JSON on stdin; a non-zero exit blocks the point, stderr the reason.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileHooks {
    pub(crate) before_step: Option<Vec<String>>,
    pub(crate) after_step: Option<Vec<String>>,
    pub(crate) before_command: Option<Vec<String>>,
    pub(crate) before_apply: Option<Vec<String>>,
    pub(crate) flow_end: Option<Vec<String>>,
    /// How long each hook may run (default 30).
    pub(crate) timeout_seconds: Option<u64>,
}

layered!(FileHooks {
    before_step,
    after_step,
    before_command,
    before_apply,
    flow_end,
    timeout_seconds
});

/// `[approve]` in a config file: the approvals every run asks for (`--approve` adds to them).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileApprove {
    /// Show the plan and wait for yes / no / edit before any step runs.
    pub(crate) plan: Option<bool>,
    /// Ask before a command the policy flags, or a recovery that replans or replaces steps.
    pub(crate) risky: Option<bool>,
    /// Ask before `--apply` writes the changes into the repository.
    pub(crate) apply: Option<bool>,
}

/// `[plugins]` in a config file: where plugin operations come from.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FilePlugins {
    /// Folders of plugin files (`*.py`, packages), relative to the config file's directory.
    #[serde(default)]
    pub(crate) folders: Vec<String>,
    /// Whether installed packages' entry points (group `open_codex_lib.operations`) load.
    pub(crate) entry_points: Option<bool>,
}

/// Where plugin operations come from, resolved.
#[derive(Debug, Clone, Default)]
pub(crate) struct Plugins {
    /// Absolute folders, user config's first.
    pub(crate) folders: Vec<PathBuf>,
    pub(crate) entry_points: bool,
}

/// `[trust]` in the user's config, written by `ocflow trust`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileTrust {
    /// Canonical repository paths.
    #[serde(default)]
    pub(crate) repositories: Vec<String>,
}

/// `[sandbox]` in a config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileSandbox {
    /// Run command steps in the sandbox (default true).
    pub(crate) enabled: Option<bool>,
    /// Use namespaces (bubblewrap) where the kernel allows them (default true); `false` leaves
    /// Landlock and the limits alone, as on a machine that refuses namespaces.
    pub(crate) namespaces: Option<bool>,
    /// Let every command step use the network (default false: only loopback).
    pub(crate) network: Option<bool>,
    /// More paths commands may write beneath (`~/` is the home directory).
    #[serde(default)]
    pub(crate) writable: Vec<String>,
    /// The memory a command step may use, in MiB (default 8192).
    pub(crate) memory_mb: Option<u64>,
    /// The processes a command step may run at once (default 1024).
    pub(crate) max_processes: Option<u64>,
    /// Show command steps their view through an overlay where the kernel allows it.
    pub(crate) overlay: Option<bool>,
}

/// `[recovery]` in a config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileRecovery {
    /// Ask the LLM for a strategy when a step fails (default true when an LLM is configured).
    pub(crate) enabled: Option<bool>,
    pub(crate) max_attempts_per_step: Option<u32>,
    pub(crate) max_revisions: Option<u32>,
    pub(crate) max_recovery_calls: Option<u32>,
    pub(crate) max_transient_retries: Option<u32>,
    /// Let LLM-proposed commands be destructive (`rm -rf ~`, `git reset --hard`…).
    pub(crate) allow_destructive: Option<bool>,
}

/// `[limits]` in a config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileLimits {
    pub(crate) jobs: Option<usize>,
    pub(crate) step_timeout_seconds: Option<u64>,
    pub(crate) max_output_bytes: Option<u64>,
}

layered!(FileApprove { plan, risky, apply });
layered!(FileLimits {
    jobs,
    step_timeout_seconds,
    max_output_bytes
});
layered!(FileSandbox {
    enabled,
    namespaces,
    network,
    writable,
    memory_mb,
    max_processes,
    overlay
});
layered!(FileRecovery {
    enabled,
    max_attempts_per_step,
    max_revisions,
    max_recovery_calls,
    max_transient_retries,
    allow_destructive
});

impl Layered for FilePlugins {
    /// The user's folders first, then the workspace's.
    fn or(self, fallback: Self) -> Self {
        FilePlugins {
            folders: fallback.folders.or(self.folders),
            entry_points: self.entry_points.or(fallback.entry_points),
        }
    }
}

/// A role the workspace's file names replaces the user's of the same name whole.
impl Layered for Role {
    fn or(self, _fallback: Self) -> Self {
        self
    }
}

impl FileConfig {
    /// Reads a config file; a missing file is an empty config.
    fn load(path: &Path) -> Result<FileConfig> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let mut file: FileConfig = toml::from_str(&text)
                    .map_err(|err| Error::Usage(format!("{}: {err}", path.display())))?;
                // A relative plugin folder or key file is relative to the file that names it.
                let home = std::env::var_os("HOME").map(PathBuf::from);
                let dir = path.parent().unwrap_or(Path::new("."));
                let profile_files = file
                    .llm
                    .profiles
                    .values_mut()
                    .filter_map(|p| p.api_key_file.as_mut());
                for relative in file.plugins.folders.iter_mut().chain(profile_files) {
                    let at = at_home(relative, home.as_deref());
                    *relative = dir.join(at).to_string_lossy().into_owned();
                }
                for name in file.llm.profiles.keys() {
                    profiles::check_name("llm.profiles", name)
                        .map_err(|err| Error::Usage(format!("{}: {err}", path.display())))?;
                }
                for name in file.roles.keys() {
                    profiles::check_name("roles", name)
                        .map_err(|err| Error::Usage(format!("{}: {err}", path.display())))?;
                }
                Ok(file)
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(FileConfig::default()),
            Err(err) => Err(err).io_context(|| format!("reading {}", path.display())),
        }
    }

    /// `self` where it says something, else `fallback`.
    /// Takes out what a repository's own config may not decide until the user trusts it:
    /// whatever runs or loads code, widens the sandbox or sends the key elsewhere. Returns the
    /// keys it took out.
    fn without_untrusted(&mut self) -> Vec<&'static str> {
        let mut ignored = Vec::new();
        let mut drop = |name: &'static str, present: bool| {
            if present {
                ignored.push(name);
            }
        };
        drop("codex_lib", self.codex_lib.take().is_some());
        // A price of 0 would lift the user's cost budget: prices are the user's to set.
        drop("prices", !std::mem::take(&mut self.prices).is_empty());
        let priced = self.llm.profiles.values_mut().fold(false, |any, p| {
            let price =
                p.price_per_mtok_in.take().is_some() | p.price_per_mtok_out.take().is_some();
            price | any
        });
        drop("llm.profiles.*.price_per_mtok_in / out", priced);
        drop(
            "plugins.folders",
            !std::mem::take(&mut self.plugins.folders).is_empty(),
        );
        drop(
            "plugins.entry_points = true",
            self.plugins.entry_points.take() == Some(true),
        );
        drop("llm.base_url", self.llm.base_url.take().is_some());
        drop(
            "llm.api_key_command",
            self.llm.api_key_command.take().is_some(),
        );
        let profiles = self
            .llm
            .profiles
            .values_mut()
            .fold(false, |any, p| p.without_untrusted() | any);
        drop(
            "llm.profiles.*.base_url / api_key_env / api_key_file",
            profiles,
        );
        let sandbox = &mut self.sandbox;
        drop(
            "sandbox.enabled = false",
            sandbox.enabled.take() == Some(false),
        );
        drop(
            "sandbox.namespaces = false",
            sandbox.namespaces.take() == Some(false),
        );
        drop(
            "sandbox.network = true",
            sandbox.network.take() == Some(true),
        );
        drop(
            "sandbox.writable",
            !std::mem::take(&mut sandbox.writable).is_empty(),
        );
        drop("sandbox.memory_mb", sandbox.memory_mb.take().is_some());
        drop(
            "sandbox.max_processes",
            sandbox.max_processes.take().is_some(),
        );
        // A hook runs a command as the user, outside the sandbox: the user's to set (S9).
        let hooks = std::mem::take(&mut self.hooks);
        drop(
            "hooks",
            [
                &hooks.before_step,
                &hooks.after_step,
                &hooks.before_command,
                &hooks.before_apply,
                &hooks.flow_end,
            ]
            .iter()
            .any(|h| h.is_some())
                || hooks.timeout_seconds.is_some(),
        );
        // A repository may ask for more approvals, never for fewer (S9): its `false` would
        // silence the user's own `true`.
        let approve = &mut self.approve;
        let fewer = [&mut approve.plan, &mut approve.risky, &mut approve.apply]
            .into_iter()
            .fold(false, |any, a| (a.take_if(|on| !*on).is_some()) | any);
        drop("approve.* = false", fewer);
        let destructive = self.recovery.allow_destructive.take() == Some(true);
        drop("recovery.allow_destructive = true", destructive);
        // A role may narrow what steps do; opening the network is what it may not grant.
        let networked = self
            .roles
            .values_mut()
            .fold(false, |any, r| std::mem::take(&mut r.network) | any);
        drop("roles.*.network = true", networked);
        ignored
    }

    /// `self` (the workspace's file) over `fallback` (the user's), field by field. The trusted
    /// repositories are the user's alone; the budget was resolved from both files before
    /// (`budget::file_limits`).
    fn or(self, fallback: FileConfig) -> FileConfig {
        FileConfig {
            roles: self.roles.or(fallback.roles),
            prices: self.prices.or(fallback.prices),
            budget: self.budget,
            trust: fallback.trust,
            codex_lib: self.codex_lib.or(fallback.codex_lib),
            plugins: self.plugins.or(fallback.plugins),
            approve: self.approve.or(fallback.approve),
            hooks: self.hooks.or(fallback.hooks),
            limits: self.limits.or(fallback.limits),
            llm: self.llm.or(fallback.llm),
            sandbox: self.sandbox.or(fallback.sandbox),
            recovery: self.recovery.or(fallback.recovery),
        }
    }
}

impl Config {
    /// The command policy the planner and recovery apply: with `--approve risky`, what it flags
    /// is asked about rather than refused.
    pub(crate) fn proposal_policy(&self) -> CommandPolicy {
        if self.approvals.risky {
            self.policy.asking_a_person()
        } else {
            self.policy
        }
    }

    /// Resolves every setting. `needs_repo`: whether the command works on a repository, which
    /// must then be named or found (see `discover_repo`); `limits` are the flags of a command
    /// that runs steps (`None` for the others, which then probe no sandbox); `api_key` comes from
    /// `llm::key::take_key_at_startup`, which read the environment.
    pub(crate) fn resolve(
        args: &GlobalArgs,
        needs_repo: bool,
        limits: Option<&LimitArgs>,
        api_key: ApiKey,
    ) -> Result<Config> {
        let (repo, repo_named) = repository(args, needs_repo)?;
        let (workspace, default_workspace) = match &args.workspace {
            Some(dir) => (absolute(dir)?, false),
            None => (repo.join(".ocflow"), true),
        };
        let Files {
            file,
            budget: file_budget,
            mut warnings,
            user_config,
        } = Files::load(&repo, &workspace)?;
        // Before any process starts (the sandbox probe included): no child inherits them.
        profiles::take_key_variables(&file.llm);
        let codex_lib = codex_lib(args, &file)?;
        let no_flags = LimitArgs::default();
        let flags = limits.unwrap_or(&no_flags);
        let policy = CommandPolicy {
            allow_destructive: flags.allow_destructive
                || file.recovery.allow_destructive == Some(true),
            allow_network: file.sandbox.network == Some(true),
        };
        let mut run = run_config(flags, limits.is_some(), &file, file_budget);
        let key_variable = api_key.variable().map(str::to_string);
        let mut roles = Roles::with(file.roles.clone());
        let llm = profiles::resolve_llm(args, &file.llm, &roles, api_key)?;
        if let Ok(resolved) = &llm {
            run.prices = budget::prices(&file.llm, &file.prices, resolved);
            // A step may name a profile itself, checked like a role's against those defined.
            let mut profiles: std::collections::BTreeMap<String, Option<String>> = resolved
                .profiles
                .keys()
                .map(|name| (name.clone(), None))
                .collect();
            for (name, why) in &resolved.unavailable {
                profiles.insert(name.clone(), Some(why.clone()));
            }
            roles = roles.with_profiles(profiles);
            warnings.extend(llm_warnings(args, &file, resolved));
        }
        let asked = |what: ApproveWhat| flags.approve.contains(&what);
        let approvals = Approvals {
            plan: file.approve.plan == Some(true),
            risky: file.approve.risky == Some(true),
            apply: file.approve.apply == Some(true),
        }
        .union(Approvals {
            plan: asked(ApproveWhat::Plan),
            risky: asked(ApproveWhat::Risky),
            apply: asked(ApproveWhat::Apply),
        });
        let hooks = Hooks {
            before_step: file.hooks.before_step.clone().unwrap_or_default(),
            after_step: file.hooks.after_step.clone().unwrap_or_default(),
            before_command: file.hooks.before_command.clone().unwrap_or_default(),
            before_apply: file.hooks.before_apply.clone().unwrap_or_default(),
            flow_end: file.hooks.flow_end.clone().unwrap_or_default(),
            timeout: file
                .hooks
                .timeout_seconds
                .map_or(Hooks::DEFAULT_TIMEOUT, std::time::Duration::from_secs),
            dir: repo.clone(),
        };
        Ok(Config {
            approvals,
            hooks,
            rules: PathRules::new(&repo, &workspace),
            key_variable,
            llm,
            repo,
            workspace,
            default_workspace,
            repo_named,
            codex_lib,
            python_dir: args
                .python_dir
                .as_ref()
                .map(|dir| absolute(dir))
                .transpose()?,
            json: args.json,
            policy,
            roles,
            run,
            warnings,
            user_config,
            plugins: Plugins {
                folders: file.plugins.folders.iter().map(PathBuf::from).collect(),
                entry_points: file.plugins.entry_points != Some(false),
            },
        })
    }

    /// The LLM settings, or a usage error saying exactly what to set.
    pub(crate) fn require_llm(&self) -> Result<&LlmConfig> {
        self.llm
            .as_ref()
            .map_err(|missing| Error::Usage(missing.to_string()))
    }
}

/// The repository `--repo` names (which must exist), or the one found as git finds it; and
/// whether it was named or found. A repository a command works on is never a git directory or
/// a system one.
fn repository(args: &GlobalArgs, needs_repo: bool) -> Result<(PathBuf, bool)> {
    let (repo, repo_named) = match &args.repo {
        Some(repo) => (
            repo.canonicalize().map_err(|err| {
                Error::Usage(format!(
                    "--repo {}: {err}; give the path of an existing directory",
                    repo.display()
                ))
            })?,
            true,
        ),
        None => discover_repo(needs_repo)?,
    };
    if !repo.is_dir() {
        return Err(Error::Usage(format!(
            "--repo {} is not a directory",
            repo.display()
        )));
    }
    if repo_named || needs_repo {
        refuse_a_git_directory(&repo)?;
        refuse_a_system_directory(&repo)?;
    }
    Ok((repo, repo_named))
}

/// The configuration files, merged: the workspace's over the user's.
struct Files {
    file: FileConfig,
    /// The files' budget: an untrusted repository's may lower the user's, never raise it.
    budget: BudgetLimits,
    /// What was ignored of an untrusted repository's config, said.
    warnings: Vec<String>,
    /// The user's config file, where it would be.
    user_config: Option<PathBuf>,
}

impl Files {
    /// Loads the user's config and the workspace's. The workspace's config, when the workspace
    /// lies in the repository, came with the repository: obeyed in full only once the user
    /// trusts that repository.
    fn load(repo: &Path, workspace: &Path) -> Result<Files> {
        let user_config = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))
            .map(|dir| dir.join("ocflow").join("config.toml"));
        let user = user_config
            .as_deref()
            .map(FileConfig::load)
            .transpose()?
            .unwrap_or_default();
        let own_path = workspace.join(WORKSPACE_CONFIG);
        let mut own = FileConfig::load(&own_path)?;
        let mut warnings = Vec::new();
        let trusted = user.trust.repositories.iter().any(|r| Path::new(r) == repo);
        // Inside by its path or by where a symlink leads: a repository may ship
        // `.ocflow/ocflow.toml` as a link to a file a command step can write.
        // `--workspace ../ws` is beside the repository, not in it: `..` is taken off by name
        // before comparing (a path's components would still begin with the repository's).
        let from_repo = lexically_normal(&absolute(&own_path)?).starts_with(repo)
            || canonical_or_absolute(&own_path).starts_with(repo);
        if from_repo && !trusted {
            let ignored = own.without_untrusted();
            if !ignored.is_empty() {
                warnings.push(format!(
                    "the repository's own config {} sets {}, which run or load code, widen the \
                     sandbox or send the key elsewhere: ignored until you trust this repository \
                     (`ocflow --repo {} trust`)",
                    own_path.display(),
                    ignored.join(", "),
                    repo.display()
                ));
            }
        }
        let budget = budget::file_limits(&own.budget, &user.budget, from_repo && !trusted);
        Ok(Files {
            file: own.or(user),
            budget,
            warnings,
            user_config,
        })
    }
}

/// The operation library's Python module: `--codex-lib`, the config's, or the default.
fn codex_lib(args: &GlobalArgs, file: &FileConfig) -> Result<String> {
    let codex_lib = args
        .codex_lib
        .clone()
        .or_else(|| file.codex_lib.clone())
        .unwrap_or_else(|| DEFAULT_CODEX_LIB.into());
    let is_module = |name: &str| {
        name.split('.')
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_alphanumeric() || c == '_'))
    };
    if codex_lib.is_empty() || !is_module(&codex_lib) {
        return Err(Error::Usage(format!(
            "--codex-lib {codex_lib:?} is not a Python module name (like open_codex_lib or \
             my_pkg.ops)"
        )));
    }
    Ok(codex_lib)
}

/// How steps run: the flags over the files' settings over the defaults. `probes`: the command
/// runs steps, so its sandbox is probed.
fn run_config(
    flags: &LimitArgs,
    probes: bool,
    file: &FileConfig,
    budget: BudgetLimits,
) -> RunConfig {
    RunConfig {
        jobs: flags
            .jobs
            .or(file.limits.jobs)
            .unwrap_or(DEFAULT_JOBS)
            .max(1),
        limits: Limits {
            timeout_seconds: flags
                .step_timeout
                .or(file.limits.step_timeout_seconds)
                .unwrap_or(DEFAULT_STEP_TIMEOUT_SECONDS),
            max_output_bytes: flags
                .max_output_bytes
                .or(file.limits.max_output_bytes)
                .unwrap_or(DEFAULT_MAX_OUTPUT_BYTES),
        },
        sandbox: if probes {
            resolve_sandbox(flags, &file.sandbox, &file.llm)
        } else {
            SandboxProbe::decided(None)
        },
        recovery_limits: recovery_limits(&file.recovery),
        recovery: !flags.no_recovery && file.recovery.enabled != Some(false),
        budget: budget::limits(&flags.budget, budget),
        prices: Default::default(),
        memory: !flags.no_memory,
        reflect: !flags.no_reflect,
    }
}

/// What the resolved LLM settings would surprise a person with: a provider prefix taken off
/// the model's name, a profile that sends the default model's name to a server of its own, a
/// retry window shorter than one request's timeout.
fn llm_warnings(args: &GlobalArgs, file: &FileConfig, llm: &LlmConfig) -> Vec<String> {
    let mut warnings = Vec::new();
    let asked = args
        .model
        .clone()
        .or_else(|| profiles::env_first(&["OCFLOW_MODEL", "LLM_MODEL"]));
    // Once a session: an agent running ocflow again and again need not be told each time.
    if let Some(asked) = asked
        && profiles::without_provider(&asked) != asked
        && llm.planner.profile == DEFAULT_PROFILE
        && crate::cli::user_state::first_time_this_session(&format!("model prefix {asked}"))
    {
        warnings.push(format!(
            "the model is sent as `{}`: `{asked}` carries LiteLLM's provider prefix",
            llm.planner.model
        ));
    }
    for (name, profile) in &file.llm.profiles {
        let sent = [&llm.planner, &llm.recovery, &llm.summary, &llm.operations]
            .into_iter()
            .chain(llm.roles.values())
            .find(|m| &m.profile == name);
        if let (Some(sent), true) = (sent, profile.base_url.is_some() && profile.model.is_none()) {
            warnings.push(format!(
                "[llm.profiles.{name}] has a base_url of its own but no model: the default \
                 model's name ({}) is sent there; set model under [llm.profiles.{name}]",
                sent.model
            ));
        }
    }
    let slowest = llm
        .endpoints
        .values()
        .find(|endpoint| endpoint.retry.max_elapsed < endpoint.request_timeout);
    if let Some(endpoint) = slowest {
        warnings.push(format!(
            "max_retry_seconds ({} s) is shorter than request_timeout_seconds ({} s): a slow \
             answer is given up at {0} s, before one request could time out; raise \
             max_retry_seconds under [llm] in ocflow.toml to at least {1}",
            endpoint.retry.max_elapsed.as_secs(),
            endpoint.request_timeout.as_secs()
        ));
    }
    warnings
}

/// The repository, found as git finds it: the current directory or the nearest one above it
/// holding `.git`. Without one, a command that works on a repository is refused, naming
/// `--repo`; the others (a task given by its directory, the demo) take the current directory.
/// Returns the repository and whether it was found as git finds it.
fn discover_repo(needs_repo: bool) -> Result<(PathBuf, bool)> {
    let cwd = std::env::current_dir().io_context(|| "finding the current directory".into())?;
    if needs_repo {
        // Inside a bare repository (or a .git), the work tree above is not the one meant.
        refuse_a_git_directory(&cwd)?;
    }
    if let Some(root) = cwd.ancestors().find(|dir| dir.join(".git").exists()) {
        let root = root
            .canonicalize()
            .io_context(|| format!("resolving {}", root.display()))?;
        return Ok((root, true));
    }
    if needs_repo {
        return Err(Error::Usage(format!(
            "{} is not in a git repository (nor is any directory above it): run ocflow inside \
             your repository, or name it with --repo DIR",
            cwd.display()
        )));
    }
    let cwd = cwd
        .canonicalize()
        .io_context(|| format!("resolving {}", cwd.display()))?;
    Ok((cwd, false))
}

/// Refuses a repository that is a git directory, or lies in one: a bare repository (`x.git`)
/// or a work tree's `.git`. Their files are git's own (`hooks/post-update` is what the next
/// `git push` runs), not a work tree a flow may change; git itself says "must be run in a work
/// tree" there.
fn refuse_a_git_directory(repo: &Path) -> Result<()> {
    // Up to the nearest work tree (a directory holding `.git`): one checked out inside a bare
    // repository's directory (`git -C x.git worktree add wt`) is a work tree like any other.
    let git_dir = repo
        .ancestors()
        .take_while(|dir| !dir.join(".git").exists() || is_git_directory(dir))
        .find(|dir| is_git_directory(dir));
    let Some(git_dir) = git_dir else {
        return Ok(());
    };
    let work_tree = git_dir
        .parent()
        .filter(|_| git_dir.file_name().is_some_and(|name| name == ".git"));
    Err(Error::Usage(match work_tree {
        Some(work_tree) => format!(
            "{} is a git directory, not a work tree (flows would change git's own files, such \
             as its hooks): give the work tree, --repo {}",
            repo.display(),
            work_tree.display()
        ),
        None => format!(
            "{}{} is a bare git repository, with no work tree (git says \"must be \
             run in a work tree\"; a flow would change git's own files, such as the hooks a \
             push runs): make one with `git -C {} worktree add ../work` (or `git clone`) and \
             give it with --repo",
            if repo == git_dir {
                String::new()
            } else {
                format!("{} is inside a git directory: ", repo.display())
            },
            git_dir.display(),
            git_dir.display()
        ),
    }))
}

/// Refuses the system's own directories as a repository (`--repo /etc` ran, copying
/// `/etc/shadow` into the snapshot, and `apply` would write there): a flow works on a
/// project, and these hold the machine's files, secrets among them.
fn refuse_a_system_directory(repo: &Path) -> Result<()> {
    const SYSTEM: &[&str] = &[
        "/", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/run", "/var",
    ];
    let within = ["/etc", "/proc", "/sys", "/dev", "/boot"]
        .iter()
        .any(|dir| repo.starts_with(dir));
    if within || SYSTEM.iter().any(|dir| repo == Path::new(dir)) {
        return Err(Error::Usage(format!(
            "{} is not a project's repository (it holds the system's files, secrets among \
             them): give the repository to work on with --repo",
            repo.display()
        )));
    }
    Ok(())
}

/// Whether `dir` is a git directory (what `git init --bare` makes, or a work tree's `.git`):
/// `HEAD`, `objects/` and `refs/` at its top, as git itself recognises one.
fn is_git_directory(dir: &Path) -> bool {
    dir.join("HEAD").is_file() && dir.join("objects").is_dir() && dir.join("refs").is_dir()
}

/// The recovery limits: config files, then defaults.
fn recovery_limits(file: &FileRecovery) -> recovery::Limits {
    let defaults = recovery::Limits::default();
    recovery::Limits {
        max_attempts_per_step: file
            .max_attempts_per_step
            .unwrap_or(defaults.max_attempts_per_step)
            .max(1),
        max_revisions: file.max_revisions.unwrap_or(defaults.max_revisions),
        max_recovery_calls: file
            .max_recovery_calls
            .unwrap_or(defaults.max_recovery_calls),
        max_transient_retries: file
            .max_transient_retries
            .unwrap_or(defaults.max_transient_retries),
    }
}

/// How command steps are sandboxed: the kind the kernel enforces and the paths commands may
/// write beneath besides their view and temporary directory (a flow leaves out those that hold
/// its repository or workspace), or `None` when commands run without it. The probe is made
/// here and started by the command (see `SandboxProbe`).
fn resolve_sandbox(flags: &LimitArgs, file: &FileSandbox, llm: &FileLlm) -> SandboxProbe {
    if flags.no_sandbox || file.enabled == Some(false) {
        return SandboxProbe::decided(None);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let extra = file.writable.iter().map(|p| at_home(p, home.as_deref()));
    SandboxProbe::deferred(SandboxSettings {
        namespaces: file.namespaces != Some(false),
        network: file.network == Some(true),
        writable: sandbox::default_writable()
            .into_iter()
            .chain(extra)
            .collect(),
        caches: sandbox::default_caches(),
        memory_mb: file.memory_mb.unwrap_or(DEFAULT_MEMORY_MB).max(16),
        max_processes: file.max_processes.unwrap_or(DEFAULT_MAX_PROCESSES).max(4),
        // The key files, when keys came from them: no command may read them.
        overlay: file.overlay != Some(false),
        hidden: std::env::var_os(ocflow_core::llm::key::KEY_FILE_VARIABLE)
            .map(PathBuf::from)
            .into_iter()
            .chain(
                llm.profiles
                    .values()
                    .filter_map(|p| p.api_key_file.as_deref())
                    .map(PathBuf::from),
            )
            .map(|path| canonical_or_absolute(&path))
            .collect(),
    })
}

/// `path`, with a leading `~/` meaning the home directory.
fn at_home(path: &str, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(path),
    }
}

/// `path` with `.` and `..` taken off by name (no file system look-up).
fn lexically_normal(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other),
        }
    }
    normal
}
