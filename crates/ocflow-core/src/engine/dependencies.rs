//! What of the repository command steps see beside their view. Views never hold the
//! directories packages are installed in (`node_modules`, `.venv`: flows never read or write
//! them, and snapshots skip them), yet tests run with them. So each command step sees the
//! repository's own, at the same places in its view, read-only: bound by the launcher
//! (bubblewrap's `--ro-bind`, or a bind mount in the launcher's namespace), nothing copied, so
//! whatever a command tries there never reaches the user's tree nor the diff. Where no mount
//! can be made (no namespaces at all, or no sandbox), a copy view gets a copy of them, once,
//! and the flow says so.
//!
//! The same way, a command sees the repository's `.git` (read-only: `git log`, `git describe`,
//! setuptools-scm versions work as in the user's shell; whatever git writes is the step's and
//! goes with it), and its build directories (cargo's `target/` …) through a layer the view
//! keeps from step to step and the flow removes at its end: a build reuses the user's, and
//! never changes it. Copy views get neither (a copy of `.git` or `target/` would cost what the
//! layers save).
use std::path::{Path, PathBuf};

use walkdir::WalkDir;

use ocflow_model::error::Result;
use ocflow_model::repo_path;

/// The names of the directories packages are installed in, among those flows never touch
/// (`repo_path::EXCLUDED_DIR_NAMES`): `target` and `__pycache__` are build output a command
/// makes again, `.git` and `.ocflow` are not the project's.
pub(crate) const DEPENDENCY_DIR_NAMES: &[&str] = &["node_modules", ".venv"];

/// The dependency directories of one repository.
#[derive(Debug, Clone, Default)]
pub struct Dependencies {
    /// The repository, canonical.
    pub(crate) repo: PathBuf,
    /// Each directory, relative to the repository, outermost only (a `node_modules` inside
    /// another comes with it), sorted.
    pub(crate) dirs: Vec<PathBuf>,
    /// Whether the repository has a `.git` directory, shown read-only beside the dependencies.
    pub(crate) git: bool,
    /// The build directories (`repo_path::BUILD_OUTPUTS`) the repository has, and the one its
    /// top-level toolchain would make, relative to it, sorted.
    pub(crate) build_outputs: Vec<PathBuf>,
}

impl Dependencies {
    /// Finds the dependency directories of `repo` (at any depth: a monorepo's packages have
    /// their own), not looking inside `.git`, build directories or `skip` (the workspace).
    /// Symlinks are not followed: one named `node_modules` is already in the snapshot.
    pub fn find(repo: &Path, skip: &[PathBuf]) -> Dependencies {
        let mut dirs = Vec::new();
        let mut build_outputs = Vec::new();
        let mut walk = WalkDir::new(repo).follow_links(false).into_iter();
        while let Some(Ok(entry)) = walk.next() {
            if !entry.file_type().is_dir() || entry.depth() == 0 {
                continue;
            }
            let name = entry.file_name().to_str().unwrap_or("");
            let parent = entry.path().parent().unwrap_or(repo);
            let relative = entry.path().strip_prefix(repo).map(Path::to_path_buf);
            if let Ok(relative) = relative {
                if DEPENDENCY_DIR_NAMES.contains(&name) {
                    dirs.push(relative);
                } else if repo_path::is_build_output(name, |file| parent.join(file).is_file()) {
                    build_outputs.push(relative);
                }
            }
            if repo_path::is_excluded_dir(parent, name) || skip.iter().any(|s| s == entry.path()) {
                walk.skip_current_dir();
            }
        }
        // The top-level toolchain's, which its first build makes (the flow's build then keeps
        // to its layer all the same).
        for (dir, markers) in repo_path::BUILD_OUTPUTS {
            let wanted = PathBuf::from(dir);
            if markers.iter().any(|m| repo.join(m).is_file()) && !build_outputs.contains(&wanted) {
                build_outputs.push(wanted);
            }
        }
        dirs.sort();
        build_outputs.sort();
        Dependencies {
            repo: repo.to_path_buf(),
            dirs,
            git: repo.join(".git").is_dir(),
            build_outputs,
        }
    }

    /// The directories the launcher shows read-only: the dependencies, then `.git`.
    pub(crate) fn read_only_dirs(&self) -> impl Iterator<Item = PathBuf> + '_ {
        let git = self.git.then(|| PathBuf::from(".git"));
        self.dirs.iter().cloned().chain(git)
    }

    /// Whether there are no dependency directories (`.git` and build directories aside).
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    /// Whether the launcher has nothing to show beside the view.
    pub(crate) fn shows_nothing(&self) -> bool {
        self.dirs.is_empty() && !self.git && self.build_outputs.is_empty()
    }

    /// The directories as people read them: `node_modules/, web/node_modules/`.
    pub fn listing(&self) -> String {
        let names: Vec<String> = self
            .dirs
            .iter()
            .map(|dir| format!("{}/", dir.display()))
            .collect();
        names.join(", ")
    }

    /// Where neither a bind mount nor bubblewrap is possible: copies each directory into the
    /// copy view `view`, once (views keep these directories from step to step; an earlier
    /// command's changes there stay the view's). Every file is copied, whatever its name.
    pub(crate) fn copy_into(&self, view: &Path) -> Result<()> {
        for dir in &self.dirs {
            let target = view.join(dir);
            // Never through a symlink an earlier command left where the repository has a
            // directory: the copy would land outside the view.
            let through_link = dir.ancestors().skip(1).any(|above| {
                !above.as_os_str().is_empty()
                    && std::fs::symlink_metadata(view.join(above)).is_ok_and(|m| !m.is_dir())
            });
            // An empty directory is a mount point an earlier, sandboxed run left (a resume
            // with --no-sandbox): filled now.
            if std::fs::read_dir(&target).is_ok_and(|mut entries| entries.next().is_none()) {
                let _ = std::fs::remove_dir(&target);
            }
            if through_link || std::fs::symlink_metadata(&target).is_ok() {
                continue;
            }
            crate::task::file_tree::copy_whole_tree(&self.repo.join(dir), &target)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_outermost_dependency_directories_at_any_depth() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        for made in [
            "node_modules/tape/node_modules/deep",
            ".venv/lib",
            "web/node_modules/x",
            "src",
            ".git/node_modules",
            "ws/node_modules",
        ] {
            std::fs::create_dir_all(repo.join(made)).unwrap();
        }
        std::os::unix::fs::symlink(repo.join("src"), repo.join("src/node_modules")).unwrap();
        let found = Dependencies::find(repo, &[repo.join("ws")]);
        let dirs: Vec<&str> = found.dirs.iter().map(|d| d.to_str().unwrap()).collect();
        assert_eq!(dirs, [".venv", "node_modules", "web/node_modules"]);
        assert_eq!(found.listing(), ".venv/, node_modules/, web/node_modules/");
        assert!(found.git, "the repository's .git is shown too");
        assert!(found.build_outputs.is_empty());
    }

    #[test]
    fn finds_the_build_directories_a_toolchain_beside_them_makes() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        for made in [
            "target/debug",
            "tools/gen/target",
            "docs/target",
            "app/build",
        ] {
            std::fs::create_dir_all(repo.join(made)).unwrap();
        }
        for manifest in ["Cargo.toml", "tools/gen/Cargo.toml", "app/build.gradle.kts"] {
            std::fs::write(repo.join(manifest), "").unwrap();
        }
        let found = Dependencies::find(repo, &[]);
        let outputs: Vec<&str> = found
            .build_outputs
            .iter()
            .map(|d| d.to_str().unwrap())
            .collect();
        // docs/target has no toolchain beside it: it is the project's own directory.
        assert_eq!(outputs, ["app/build", "target", "tools/gen/target"]);
        assert!(!found.git);
        assert!(found.is_empty() && !found.shows_nothing());
        // A Maven project that was never built: its first build's `target/` is layered too.
        let fresh = tempfile::tempdir().unwrap();
        std::fs::write(fresh.path().join("pom.xml"), "<project/>").unwrap();
        let found = Dependencies::find(fresh.path(), &[]);
        assert_eq!(found.build_outputs, [PathBuf::from("target")]);
    }

    #[test]
    fn copies_go_into_the_view_once_and_never_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, view, outside) = (
            dir.path().join("repo"),
            dir.path().join("view"),
            dir.path().join("outside"),
        );
        for made in ["node_modules/a/node_modules/b", "web/node_modules/c"] {
            std::fs::create_dir_all(repo.join(made)).unwrap();
        }
        std::fs::write(repo.join("node_modules/a/node_modules/b/i.js"), "b").unwrap();
        std::fs::write(repo.join("web/node_modules/c/i.js"), "c").unwrap();
        // The mount point a sandboxed run left.
        std::fs::create_dir_all(view.join("node_modules")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, view.join("web")).unwrap();
        let found = Dependencies::find(&repo, &[]);
        found.copy_into(&view).unwrap();
        let nested = view.join("node_modules/a/node_modules/b/i.js");
        assert_eq!(std::fs::read_to_string(&nested).unwrap(), "b");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        // A view's copy is its own from then on: not copied again over what a command did.
        std::fs::write(&nested, "changed").unwrap();
        found.copy_into(&view).unwrap();
        assert_eq!(std::fs::read_to_string(&nested).unwrap(), "changed");
    }
}
