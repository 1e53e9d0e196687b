//! The resolved configuration: command line, environment and config files turned into checked,
//! absolute settings before any work starts. Precedence: flags > environment > the workspace's
//! `ocflow.toml` > `~/.config/ocflow/config.toml` > defaults.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::cli::{GlobalArgs, LimitArgs};
use crate::error::{Error, IoContext, Result};
use crate::instructions::Limits;
use crate::validate::PathRules;

/// The default operation library.
pub const DEFAULT_CODEX_LIB: &str = "open_codex_lib";
/// The config file inside a workspace.
pub const WORKSPACE_CONFIG: &str = "ocflow.toml";
const DEFAULT_STEP_TIMEOUT_SECONDS: u64 = 600;
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
}

/// The contents of a config file. Unknown keys are errors, so a typo is not silently ignored.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Python module implementing `execute_operation`.
    pub codex_lib: Option<String>,
    #[serde(default)]
    pub limits: FileLimits,
}

/// `[limits]` in a config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileLimits {
    pub step_timeout_seconds: Option<u64>,
    pub max_output_bytes: Option<u64>,
}

impl FileConfig {
    /// Reads a config file; a missing file is an empty config.
    fn load(path: &Path) -> Result<FileConfig> {
        match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text).map_err(|err| Error::Usage(format!("{}: {err}", path.display()))),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(FileConfig::default()),
            Err(err) => Err(err).io_context(|| format!("reading {}", path.display())),
        }
    }

    /// `self` where it says something, else `fallback`.
    fn or(self, fallback: FileConfig) -> FileConfig {
        FileConfig {
            codex_lib: self.codex_lib.or(fallback.codex_lib),
            limits: FileLimits {
                step_timeout_seconds: self.limits.step_timeout_seconds.or(fallback.limits.step_timeout_seconds),
                max_output_bytes: self.limits.max_output_bytes.or(fallback.limits.max_output_bytes),
            },
        }
    }
}

impl Config {
    pub fn resolve(args: &GlobalArgs) -> Result<Config> {
        let repo = args.repo.canonicalize().map_err(|err| {
            Error::Usage(format!("--repo {}: {err}; give the path of an existing directory", args.repo.display()))
        })?;
        if !repo.is_dir() {
            return Err(Error::Usage(format!("--repo {} is not a directory", repo.display())));
        }
        let (workspace, default_workspace) = match &args.workspace {
            Some(dir) => (absolute(dir)?, false),
            None => (repo.join(".ocflow"), true),
        };
        let user_config = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))
            .map(|dir| dir.join("ocflow").join("config.toml"));
        let file = FileConfig::load(&workspace.join(WORKSPACE_CONFIG))?
            .or(user_config.as_deref().map(FileConfig::load).transpose()?.unwrap_or_default());
        let codex_lib = args.codex_lib.clone().or_else(|| file.codex_lib.clone()).unwrap_or_else(|| DEFAULT_CODEX_LIB.into());
        if codex_lib.is_empty() || !codex_lib.split('.').all(|part| !part.is_empty() && part.chars().all(|c| c.is_alphanumeric() || c == '_')) {
            return Err(Error::Usage(format!("--codex-lib {codex_lib:?} is not a Python module name (like open_codex_lib or my_pkg.ops)")));
        }
        Ok(Config {
            repo,
            workspace,
            default_workspace,
            codex_lib,
            python_dir: args.python_dir.as_ref().map(|dir| absolute(dir)).transpose()?,
            json: args.json,
            file,
        })
    }

    /// Where flow paths may go: inside the repository, outside its `.git` and the workspace.
    pub fn path_rules(&self) -> PathRules {
        PathRules { repo: self.repo.clone(), forbidden: vec![self.repo.join(".git"), canonical_or_absolute(&self.workspace)] }
    }

    /// The step limits: flags, then config files, then defaults.
    pub fn limits(&self, args: &LimitArgs) -> Limits {
        Limits {
            timeout_seconds: args.step_timeout.or(self.file.limits.step_timeout_seconds).unwrap_or(DEFAULT_STEP_TIMEOUT_SECONDS),
            max_output_bytes: args.max_output_bytes.or(self.file.limits.max_output_bytes).unwrap_or(DEFAULT_MAX_OUTPUT_BYTES),
        }
    }
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
            return rest.iter().rev().fold(canonical, |acc: PathBuf, name| acc.join(name));
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
