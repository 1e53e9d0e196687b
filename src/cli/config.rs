//! The resolved configuration: command line, environment and config files turned into checked,
//! absolute settings before any work starts. Precedence: flags > environment > the workspace's
//! `ocflow.toml` > `~/.config/ocflow/config.toml` > defaults.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use std::time::Duration;

use crate::cli::args::{GlobalArgs, LimitArgs};
use crate::error::{Error, IoContext, Result};
use crate::engine::instructions::Limits;
use crate::llm::client::{ApiKey, Endpoint, ModelSettings, RetryPolicy};
use crate::flow::validate::PathRules;

/// The default operation library.
pub const DEFAULT_CODEX_LIB: &str = "open_codex_lib";
/// The config file inside a workspace.
pub const WORKSPACE_CONFIG: &str = "ocflow.toml";
const DEFAULT_STEP_TIMEOUT_SECONDS: u64 = 600;
/// LLM-bound steps wait most of their time; four at once is a fair share of a small endpoint.
const DEFAULT_JOBS: usize = 4;
const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1024 * 1024;

/// Settings every command shares.
#[derive(Debug, Clone)]
pub struct Config {
    /// The canonical repository root.
    pub repo: PathBuf,
    /// The absolute workspace root (it may not exist yet).
    pub workspace: PathBuf,
    /// Whether the workspace is the default one inside the repository.
    pub default_workspace: bool,
    pub codex_lib: String,
    pub python_dir: Option<PathBuf>,
    pub json: bool,
    /// What the config files say, for settings resolved per command.
    pub file: FileConfig,
    /// The LLM settings, or why there are none (the message names what to set).
    pub llm: std::result::Result<LlmConfig, String>,
}

/// How command steps are confined.
#[derive(Debug, Clone)]
pub struct SandboxPlan {
    /// What the kernel enforces: `landlock` or `landlock-partial`.
    pub kind: String,
    /// Paths commands may write beneath besides their view and temporary directory.
    pub writable: Vec<PathBuf>,
}

/// How to reach the LLM and which models to use.
#[derive(Debug, Clone)]
pub struct LlmConfig {
    /// `None` when answers come from a recording.
    pub endpoint: Option<Endpoint>,
    /// For planning and the final summary.
    pub planner: ModelSettings,
    /// For the library's LLM operations.
    pub operations: ModelSettings,
    pub record: Option<PathBuf>,
    pub replay: Option<PathBuf>,
}

/// The contents of a config file. Unknown keys are errors, so a typo is not silently ignored.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Python module implementing `execute_operation`.
    pub codex_lib: Option<String>,
    #[serde(default)]
    pub limits: FileLimits,
    #[serde(default)]
    pub llm: FileLlm,
    #[serde(default)]
    pub recovery: FileRecovery,
    #[serde(default)]
    pub sandbox: FileSandbox,
}

/// `[sandbox]` in a config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSandbox {
    /// Run command steps in the Landlock sandbox where the kernel has it (default true).
    pub enabled: Option<bool>,
    /// More paths commands may write beneath (`~/` is the home directory).
    #[serde(default)]
    pub writable: Vec<String>,
}

/// `[recovery]` in a config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRecovery {
    /// Ask the LLM for a strategy when a step fails (default true when an LLM is configured).
    pub enabled: Option<bool>,
    pub max_attempts_per_step: Option<u32>,
    pub max_revisions: Option<u32>,
    pub max_recovery_calls: Option<u32>,
    pub max_transient_retries: Option<u32>,
    /// Let LLM-proposed commands be destructive (`rm -rf ~`, `git reset --hard`…).
    pub allow_destructive: Option<bool>,
}

/// `[llm]` in a config file. The key is never read from a file: only from the environment.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileLlm {
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub request_timeout_seconds: Option<u64>,
    pub max_attempts: Option<u32>,
    pub max_retry_seconds: Option<u64>,
    /// Settings for planning and summarising.
    #[serde(default)]
    pub planner: FileModel,
    /// Settings for the library's LLM operations.
    #[serde(default)]
    pub operations: FileModel,
}

/// `[llm.planner]` / `[llm.operations]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileModel {
    pub model: Option<String>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
}

impl FileModel {
    fn or(self, fallback: FileModel) -> FileModel {
        FileModel {
            model: self.model.or(fallback.model),
            temperature: self.temperature.or(fallback.temperature),
            max_tokens: self.max_tokens.or(fallback.max_tokens),
        }
    }
}

/// `[limits]` in a config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileLimits {
    pub jobs: Option<usize>,
    pub step_timeout_seconds: Option<u64>,
    pub max_output_bytes: Option<u64>,
}

impl FileConfig {
    /// Reads a config file; a missing file is an empty config.
    fn load(path: &Path) -> Result<FileConfig> {
        match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text)
                .map_err(|err| Error::Usage(format!("{}: {err}", path.display()))),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(FileConfig::default()),
            Err(err) => Err(err).io_context(|| format!("reading {}", path.display())),
        }
    }

    /// `self` where it says something, else `fallback`.
    fn or(self, fallback: FileConfig) -> FileConfig {
        FileConfig {
            codex_lib: self.codex_lib.or(fallback.codex_lib),
            limits: FileLimits {
                jobs: self.limits.jobs.or(fallback.limits.jobs),
                step_timeout_seconds: self
                    .limits
                    .step_timeout_seconds
                    .or(fallback.limits.step_timeout_seconds),
                max_output_bytes: self
                    .limits
                    .max_output_bytes
                    .or(fallback.limits.max_output_bytes),
            },
            llm: FileLlm {
                base_url: self.llm.base_url.or(fallback.llm.base_url),
                model: self.llm.model.or(fallback.llm.model),
                request_timeout_seconds: self
                    .llm
                    .request_timeout_seconds
                    .or(fallback.llm.request_timeout_seconds),
                max_attempts: self.llm.max_attempts.or(fallback.llm.max_attempts),
                max_retry_seconds: self
                    .llm
                    .max_retry_seconds
                    .or(fallback.llm.max_retry_seconds),
                planner: self.llm.planner.or(fallback.llm.planner),
                operations: self.llm.operations.or(fallback.llm.operations),
            },
            sandbox: FileSandbox {
                enabled: self.sandbox.enabled.or(fallback.sandbox.enabled),
                writable: self
                    .sandbox
                    .writable
                    .into_iter()
                    .chain(fallback.sandbox.writable)
                    .collect(),
            },
            recovery: FileRecovery {
                enabled: self.recovery.enabled.or(fallback.recovery.enabled),
                max_attempts_per_step: self
                    .recovery
                    .max_attempts_per_step
                    .or(fallback.recovery.max_attempts_per_step),
                max_revisions: self
                    .recovery
                    .max_revisions
                    .or(fallback.recovery.max_revisions),
                max_recovery_calls: self
                    .recovery
                    .max_recovery_calls
                    .or(fallback.recovery.max_recovery_calls),
                max_transient_retries: self
                    .recovery
                    .max_transient_retries
                    .or(fallback.recovery.max_transient_retries),
                allow_destructive: self
                    .recovery
                    .allow_destructive
                    .or(fallback.recovery.allow_destructive),
            },
        }
    }
}

impl Config {
    /// `api_key` comes from `secret::take_key_at_startup`, which read the environment.
    pub fn resolve(args: &GlobalArgs, api_key: ApiKey) -> Result<Config> {
        let repo = args.repo.canonicalize().map_err(|err| {
            Error::Usage(format!(
                "--repo {}: {err}; give the path of an existing directory",
                args.repo.display()
            ))
        })?;
        if !repo.is_dir() {
            return Err(Error::Usage(format!(
                "--repo {} is not a directory",
                repo.display()
            )));
        }
        let (workspace, default_workspace) = match &args.workspace {
            Some(dir) => (absolute(dir)?, false),
            None => (repo.join(".ocflow"), true),
        };
        let user_config = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))
            .map(|dir| dir.join("ocflow").join("config.toml"));
        let file = FileConfig::load(&workspace.join(WORKSPACE_CONFIG))?.or(user_config
            .as_deref()
            .map(FileConfig::load)
            .transpose()?
            .unwrap_or_default());
        let codex_lib = args
            .codex_lib
            .clone()
            .or_else(|| file.codex_lib.clone())
            .unwrap_or_else(|| DEFAULT_CODEX_LIB.into());
        if codex_lib.is_empty()
            || !codex_lib.split('.').all(|part| {
                !part.is_empty() && part.chars().all(|c| c.is_alphanumeric() || c == '_')
            })
        {
            return Err(Error::Usage(format!(
                "--codex-lib {codex_lib:?} is not a Python module name (like open_codex_lib or my_pkg.ops)"
            )));
        }
        let llm = resolve_llm(args, &file.llm, api_key)?;
        Ok(Config {
            repo,
            workspace,
            default_workspace,
            codex_lib,
            python_dir: args
                .python_dir
                .as_ref()
                .map(|dir| absolute(dir))
                .transpose()?,
            json: args.json,
            file,
            llm,
        })
    }

    /// The LLM settings, or a usage error saying exactly what to set.
    pub fn require_llm(&self) -> Result<&LlmConfig> {
        self.llm
            .as_ref()
            .map_err(|missing| Error::Usage(missing.clone()))
    }

    /// Where flow paths may go: inside the repository, outside its `.git` and the workspace.
    pub fn path_rules(&self) -> PathRules {
        PathRules {
            repo: self.repo.clone(),
            forbidden: vec![
                self.repo.join(".git"),
                canonical_or_absolute(&self.workspace),
            ],
        }
    }

    /// The recovery limits: config files, then defaults.
    pub fn recovery_limits(&self) -> crate::engine::recovery::Limits {
        let defaults = crate::engine::recovery::Limits::default();
        let file = &self.file.recovery;
        crate::engine::recovery::Limits {
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

    /// How command steps are sandboxed: the kind the kernel enforces and the paths commands
    /// may write beneath besides their view and temporary directory (none that holds `repo` or
    /// `workspace`), or `None` when commands run without it (`--no-sandbox`,
    /// `[sandbox] enabled = false`, or a kernel without Landlock).
    pub fn sandbox(
        &self,
        args: &LimitArgs,
        repo: &Path,
        workspace: &Path,
    ) -> Result<Option<SandboxPlan>> {
        if args.no_sandbox || self.file.sandbox.enabled == Some(false) {
            return Ok(None);
        }
        let Some(kind) = crate::engine::sandbox::probe().map_err(|problem| {
            Error::Usage(format!(
                "{problem}; run with --no-sandbox to go on without it"
            ))
        })?
        else {
            return Ok(None);
        };
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let extra =
            self.file
                .sandbox
                .writable
                .iter()
                .map(|p| match (p.strip_prefix("~/"), &home) {
                    (Some(rest), Some(home)) => home.join(rest),
                    _ => PathBuf::from(p),
                });
        let protected = [
            canonical_or_absolute(repo),
            canonical_or_absolute(workspace),
        ];
        let writable = crate::engine::sandbox::without_protected(
            crate::engine::sandbox::default_writable()
                .into_iter()
                .chain(extra)
                .collect(),
            &protected,
        );
        Ok(Some(SandboxPlan { kind, writable }))
    }

    /// Steps run at the same time: the flag, then config files, then 4.
    pub fn jobs(&self, args: &LimitArgs) -> usize {
        args.jobs
            .or(self.file.limits.jobs)
            .unwrap_or(DEFAULT_JOBS)
            .max(1)
    }

    /// The step limits: flags, then config files, then defaults.
    pub fn limits(&self, args: &LimitArgs) -> Limits {
        Limits {
            timeout_seconds: args
                .step_timeout
                .or(self.file.limits.step_timeout_seconds)
                .unwrap_or(DEFAULT_STEP_TIMEOUT_SECONDS),
            max_output_bytes: args
                .max_output_bytes
                .or(self.file.limits.max_output_bytes)
                .unwrap_or(DEFAULT_MAX_OUTPUT_BYTES),
        }
    }
}

/// The first non-empty environment variable of `names`.
fn env_first(names: &[&str]) -> Option<String> {
    names
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
}

/// Flags > environment > config files; `Err(message)` when no endpoint is configured.
fn resolve_llm(
    args: &GlobalArgs,
    file: &FileLlm,
    api_key: ApiKey,
) -> Result<std::result::Result<LlmConfig, String>> {
    let base_url = args
        .base_url
        .clone()
        .or_else(|| env_first(&["OCFLOW_BASE_URL", "OPENAI_BASE_URL", "LLM_BASE_URL"]))
        .or_else(|| file.base_url.clone());
    let model = args
        .model
        .clone()
        .or_else(|| env_first(&["OCFLOW_MODEL", "LLM_MODEL"]));
    let replay = args.replay.as_ref().map(|p| absolute(p)).transpose()?;
    let record = args.record.as_ref().map(|p| absolute(p)).transpose()?;
    let settings = |section: &FileModel, max_tokens: u32| -> Option<ModelSettings> {
        let name = model
            .clone()
            .or_else(|| section.model.clone())
            .or_else(|| file.model.clone())
            .or_else(|| replay.as_ref().map(|_| "replay".to_string()))?;
        Some(ModelSettings {
            model: name,
            temperature: Some(section.temperature.unwrap_or(0.2)),
            max_tokens: Some(section.max_tokens.unwrap_or(max_tokens)),
        })
    };
    let endpoint = match (&base_url, &replay) {
        (_, Some(_)) => None,
        (Some(url), None) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(Error::Usage(format!(
                    "the base URL {url:?} must start with http:// or https:// (for example http://localhost:8000/v1)"
                )));
            }
            Some(Endpoint {
                base_url: url.trim_end_matches('/').to_string(),
                api_key,
                request_timeout: Duration::from_secs(
                    file.request_timeout_seconds.unwrap_or(120).max(1),
                ),
                retry: RetryPolicy {
                    max_attempts: file.max_attempts.unwrap_or(5).max(1),
                    max_elapsed: Duration::from_secs(file.max_retry_seconds.unwrap_or(300)),
                    ..RetryPolicy::default()
                },
            })
        }
        (None, None) => {
            return Ok(Err("no LLM endpoint is configured: set OCFLOW_BASE_URL (or OPENAI_BASE_URL / LLM_BASE_URL) to an OpenAI-compatible URL such as http://localhost:8000/v1, or pass --base-url URL; the key comes from OCFLOW_API_KEY (or OPENAI_API_KEY / LLM_API_KEY) and the model from OCFLOW_MODEL (or LLM_MODEL) or --model".into()));
        }
    };
    let (Some(planner), Some(operations)) = (
        settings(&file.planner, 4096),
        settings(&file.operations, 8192),
    ) else {
        return Ok(Err("no model is configured: set OCFLOW_MODEL (or LLM_MODEL), pass --model NAME, or set model under [llm] in ocflow.toml".into()));
    };
    Ok(Ok(LlmConfig {
        endpoint,
        planner,
        operations,
        record,
        replay,
    }))
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).io_context(|| format!("resolving {}", path.display()))
}

/// The canonical form of a path that may not exist yet: its longest existing ancestor made
/// canonical, with the rest appended.
pub fn canonical_or_absolute(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut current = path;
    loop {
        if let Ok(canonical) = current.canonicalize() {
            return rest
                .iter()
                .rev()
                .fold(canonical, |acc: PathBuf, name| acc.join(name));
        }
        match (current.parent(), current.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                current = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}
