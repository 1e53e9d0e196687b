//! Repository-relative paths: the lexical rules every file path in a flow must follow, and the
//! containment check on canonical paths that keeps reads and writes inside the repository.

use std::fmt;
use std::path::{Component, Path, PathBuf};

/// Longest path accepted in a flow, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;

/// Directory names never staged, copied into a view, or written by a flow, at any depth.
pub const EXCLUDED_DIR_NAMES: &[&str] =
    &[".git", "node_modules", ".venv", "__pycache__", ".ocflow"];

/// Build directories, by their name and the files beside them that say a toolchain builds
/// there: cargo's and Maven's `target`, Gradle's `build` and `.gradle`. What a build makes
/// there is made again, so flows skip them as they skip the excluded names, and command steps
/// see the repository's own through a layer of the flow's (`ocflow-sandbox`'s build outputs).
pub const BUILD_OUTPUTS: &[(&str, &[&str])] = &[
    ("target", &["Cargo.toml", "pom.xml"]),
    ("build", &["build.gradle", "build.gradle.kts"]),
    (
        ".gradle",
        &[
            "settings.gradle",
            "settings.gradle.kts",
            "build.gradle",
            "build.gradle.kts",
        ],
    ),
];

/// Whether a directory called `name` inside `parent` is one that staging skips: the excluded
/// names anywhere, and a build directory where its toolchain's files sit beside it.
pub fn is_excluded_dir(parent: &Path, name: &str) -> bool {
    EXCLUDED_DIR_NAMES.contains(&name) || is_build_output(name, |file| parent.join(file).is_file())
}

/// Whether a directory called `name` is a build directory, `beside` saying whether a file of
/// that name sits beside it.
pub fn is_build_output(name: &str, beside: impl Fn(&str) -> bool) -> bool {
    BUILD_OUTPUTS
        .iter()
        .any(|(dir, markers)| *dir == name && markers.iter().any(|marker| beside(marker)))
}

/// Why a path cannot be used; the message says what is wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PathError(pub String);

/// A normalised, relative path inside the repository (`/`-separated, no `.` or `..`).
/// The empty path is the repository root.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct RepoPath(String);

impl RepoPath {
    /// Parses a path written in a flow. The error says what is wrong and how to fix it.
    pub fn parse(raw: &str) -> Result<RepoPath, PathError> {
        Self::parse_text(raw).map_err(PathError)
    }

    fn parse_text(raw: &str) -> Result<RepoPath, String> {
        if raw.is_empty() {
            return Err("the path is empty; give a path relative to the repository root".into());
        }
        if raw.len() > MAX_PATH_BYTES {
            return Err(format!("the path is longer than {MAX_PATH_BYTES} bytes"));
        }
        if raw.contains('\0') {
            return Err("the path contains a NUL byte".into());
        }
        if raw.starts_with('~') {
            return Err(format!(
                "{raw:?} starts with `~`; paths are relative to the repository root, home \
                 directories are out of reach"
            ));
        }
        let mut parts = Vec::new();
        for component in Path::new(raw).components() {
            match component {
                Component::Normal(part) => match part.to_str() {
                    Some(part) => parts.push(part),
                    None => return Err(format!("{raw:?} is not valid UTF-8")),
                },
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(format!(
                        "{raw:?} contains `..`; write the path relative to the repository root \
                         without `..`"
                    ));
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(format!(
                        "{raw:?} is absolute; write it relative to the repository root"
                    ));
                }
            }
        }
        // Compared without case: on a case-insensitive file system `.GIT` is the `.git`.
        for part in &parts {
            let Some(excluded) = EXCLUDED_DIR_NAMES
                .iter()
                .find(|name| name.eq_ignore_ascii_case(part))
            else {
                continue;
            };
            let same = if part == excluded {
                String::new()
            } else {
                format!(" (which is `{excluded}` on a case-insensitive file system)")
            };
            return Err(format!(
                "{raw:?} goes through `{part}`{same}, which flows never read or write"
            ));
        }
        Ok(RepoPath(parts.join("/")))
    }

    /// The repository root itself.
    pub fn root() -> RepoPath {
        RepoPath(String::new())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this path is `dir` or lies below it (by components).
    pub fn is_within(&self, dir: &RepoPath) -> bool {
        dir.0.is_empty()
            || self.0 == dir.0
            || self
                .0
                .strip_prefix(&dir.0)
                .is_some_and(|rest| rest.starts_with('/'))
    }

    /// This path below `base`.
    pub fn under(&self, base: &Path) -> PathBuf {
        if self.0.is_empty() {
            base.to_path_buf()
        } else {
            base.join(&self.0)
        }
    }

    /// Builds a path from a file found under `base` while walking a tree.
    /// The walk must skip excluded directories itself; a walk yields no `.` or `..`.
    pub fn from_walk(base: &Path, path: &Path) -> Option<RepoPath> {
        let text = path.strip_prefix(base).ok()?.to_str()?;
        (!text.is_empty()).then(|| RepoPath(text.to_string()))
    }
}

/// Lets maps keyed by `RepoPath` be searched with a `&str`, without allocating.
impl std::borrow::Borrow<str> for RepoPath {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RepoPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str(".")
        } else {
            f.write_str(&self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_and_refuses() {
        assert_eq!(
            RepoPath::parse("./a//b/./c.py").map(|p| p.0),
            Ok("a/b/c.py".into())
        );
        assert_eq!(RepoPath::parse("."), Ok(RepoPath::root()));
        for bad in [
            "",
            "../x",
            "a/../../x",
            "/etc/passwd",
            "~/.ssh/id_rsa",
            ".git/config",
            "a/node_modules/x",
            "x\0y",
        ] {
            assert!(RepoPath::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
