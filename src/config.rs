//! The resolved configuration: the command line and environment turned into checked, absolute
//! settings before any work starts.

use std::path::{Path, PathBuf};

use crate::cli::GlobalArgs;
use crate::error::{Error, IoContext, Result};
use crate::validate::PathRules;

/// The default operation library.
pub const DEFAULT_CODEX_LIB: &str = "open_codex_lib";

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
        let codex_lib = args.codex_lib.clone().unwrap_or_else(|| DEFAULT_CODEX_LIB.into());
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
        })
    }

    /// Where flow paths may go: inside the repository, outside its `.git` and the workspace.
    pub fn path_rules(&self) -> PathRules {
        PathRules { repo: self.repo.clone(), forbidden: vec![self.repo.join(".git"), canonical_or_absolute(&self.workspace)] }
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
