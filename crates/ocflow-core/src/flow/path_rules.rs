//! Where a flow's paths may go: inside the repository (checked on canonical paths, by
//! components, following every symlink that exists), outside its `.git`, the workspace and
//! build directories. `PathRules` is built in one place, `PathRules::new`, for validation,
//! recovery and apply alike.

use std::path::{Path, PathBuf};

use crate::flow::ignore_rules;
use ocflow_model::repo_path::{self, PathError, RepoPath};

/// Where file paths must stay: the canonical repository root, minus the forbidden directories
/// inside it (its `.git` and the workspace).
#[derive(Debug, Clone)]
pub struct PathRules {
    pub repo: PathBuf,
    pub(crate) forbidden: Vec<PathBuf>,
}

impl PathRules {
    /// The rules for a repository and a workspace (which may not exist yet): both made
    /// canonical, so a symlinked spelling of either cannot slip past.
    /// The workspace is out of reach when it lies inside the repository (the default,
    /// `<repo>/.ocflow`). When it holds the repository (OpenHands' `/workspace/project/repo`),
    /// only its task directories are out of reach, and none of them can be inside the
    /// repository (`run` refuses such a task id).
    pub fn new(repo: &Path, workspace: &Path) -> PathRules {
        let repo = canonical_or_absolute(repo);
        let workspace = canonical_or_absolute(workspace);
        let mut forbidden = vec![repo.join(".git")];
        if !repo.starts_with(&workspace) {
            forbidden.push(workspace);
        }
        PathRules { forbidden, repo }
    }

    /// Checks a path parameter; returns it normalised.
    pub(crate) fn check(&self, raw: &str, is_dir: bool) -> Result<RepoPath, PathError> {
        let path = if is_dir && (raw == "." || raw == "./" || raw.is_empty()) {
            RepoPath::root()
        } else {
            RepoPath::parse(raw)?
        };
        self.check_contained(&path)?;
        self.check_not_build_dir(&path)?;
        if let Some(rule) = ignore_rules::ignored_by(&self.repo, &path) {
            return Err(PathError(format!(
                "{path} is ignored by the repository ({rule}); flows neither read nor write \
                 what git ignores (secrets, environments, build output). Name a tracked file, \
                 or use a command step"
            )));
        }
        Ok(path)
    }

    /// Checks that `path` resolves inside the repository and outside the forbidden
    /// directories, as the file system is now (apply checks again before writing: a symlink may
    /// have been planted since validation).
    pub(crate) fn check_contained(&self, path: &RepoPath) -> Result<(), PathError> {
        let forbidden: Vec<&Path> = self.forbidden.iter().map(PathBuf::as_path).collect();
        check_contained(&self.repo, path, &forbidden)
    }

    fn check_not_build_dir(&self, path: &RepoPath) -> Result<(), PathError> {
        let mut parent = self.repo.clone();
        for part in path.as_str().split('/').filter(|p| !p.is_empty()) {
            if repo_path::is_excluded_dir(&parent, part) {
                return Err(PathError(format!(
                    "{path} goes through the build directory {part}/, which flows never read or \
                     write"
                )));
            }
            parent.push(part);
        }
        Ok(())
    }
}

/// Checks that `path`, resolved under `root` with every existing symlink followed, stays inside
/// `root` and outside every `forbidden` directory. Containment is decided by path components of
/// canonical paths, never by string prefix, so `/r/app-secrets` is not inside `/r/app`.
/// `root` and `forbidden` must already be canonical.
pub(crate) fn check_contained(
    root: &Path,
    path: &RepoPath,
    forbidden: &[&Path],
) -> Result<(), PathError> {
    let full = path.under(root);
    // The longest existing ancestor decides where the path really goes; the rest does not exist
    // yet and so cannot hide a symlink.
    let mut existing = full.as_path();
    let mut rest = Vec::new();
    let resolved = loop {
        match existing.canonicalize() {
            Ok(canonical) => break canonical,
            // A symlink that leads nowhere (or in a loop): where a write through it would land
            // depends on what appears later, so it is refused by name.
            Err(_) if existing.is_symlink() => {
                let target = std::fs::read_link(existing).unwrap_or_default();
                let link = existing.strip_prefix(root).unwrap_or(existing);
                return Err(PathError(format!(
                    "{path} goes through the symlink {} → {}, which leads nowhere; remove it \
                     or make it point to a directory inside the repository",
                    link.display(),
                    target.display()
                )));
            }
            Err(_) => match (existing.parent(), existing.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_owned());
                    existing = parent;
                }
                _ => return Err(PathError(format!("{path} cannot be resolved"))),
            },
        }
    };
    let resolved = rest.iter().rev().fold(resolved, |acc, name| acc.join(name));
    if !resolved.starts_with(root) {
        return Err(PathError(format!(
            "{path} resolves to {}, outside the repository (a symlink points out of it)",
            resolved.display()
        )));
    }
    if let Some(dir) = forbidden.iter().find(|dir| resolved.starts_with(dir)) {
        return Err(PathError(format!(
            "{path} resolves into {}, which flows may not touch",
            dir.display()
        )));
    }
    Ok(())
}

/// The canonical form of a path that may not exist yet: its longest existing ancestor made
/// canonical, with the rest appended.
/// `path` made absolute against the current directory (without resolving links).
pub fn absolute(path: &Path) -> ocflow_model::error::Result<PathBuf> {
    use ocflow_model::error::IoContext;
    std::path::absolute(path).io_context(|| format!("resolving {}", path.display()))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containment_uses_components_and_follows_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let repo = base.join("app");
        let secrets = base.join("app-secrets");
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::create_dir_all(&secrets).unwrap();
        std::os::unix::fs::symlink(&secrets, repo.join("link")).unwrap();
        let ok = RepoPath::parse("new/dir/file.txt").unwrap();
        assert_eq!(check_contained(&repo, &ok, &[]), Ok(()));
        let escaping = RepoPath::parse("link/x").unwrap();
        assert!(check_contained(&repo, &escaping, &[]).is_err());
        let workspace = repo.join("ws");
        std::fs::create_dir_all(&workspace).unwrap();
        let inside_workspace = RepoPath::parse("ws/flow_status.json").unwrap();
        assert!(check_contained(&repo, &inside_workspace, &[&workspace]).is_err());
    }
}
