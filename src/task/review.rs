//! Review and apply: what the flow changed compared with the snapshot it started from, as a
//! list, as a unified diff, and written into the repository — atomically per file, and only if
//! the repository still holds what the flow read (unless forced).

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::flow::path_rules::PathRules;
use crate::model::repo_path::RepoPath;
use crate::model::status::FlowStatus;
use crate::task::staging::{Overlay, Version};
use crate::task::workspace::{self, TaskDir};

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) path: RepoPath,
    pub(crate) kind: ChangeKind,
    /// The file with the flow's content (`None` for a deletion).
    pub(crate) new: Option<PathBuf>,
    /// The snapshot's file (`None` for an addition).
    pub(crate) old: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

impl ChangeKind {
    /// `added`, `modified` or `deleted`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
        }
    }
}

/// The flow's net changes: every path whose final version differs from the snapshot.
pub(crate) fn changes(
    task: &TaskDir,
    status: &FlowStatus,
    flow: &crate::model::flow::Flow,
) -> Result<Vec<Change>> {
    let overlay = Overlay::from_status(status, flow, None);
    let base = Overlay::default();
    let mut out = Vec::new();
    for (path, version) in &overlay.versions {
        let old = base.source(task, path)?;
        let new = match version {
            Version::Deleted => None,
            Version::Step { .. } => overlay.source(task, path)?,
        };
        let kind = match (&old, &new) {
            (None, None) => continue,
            (None, Some(_)) => ChangeKind::Added,
            (Some(_), None) => ChangeKind::Deleted,
            (Some(old), Some(new)) => {
                if read(old)? == read(new)? {
                    continue;
                }
                ChangeKind::Modified
            }
        };
        out.push(Change {
            path: path.clone(),
            kind,
            new,
            old,
        });
    }
    Ok(out)
}

fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).io_context(|| format!("reading {}", path.display()))
}

/// The changes as a unified diff (`a/` is the snapshot, `b/` the flow's result).
pub(crate) fn unified_diff(changes: &[Change]) -> Result<String> {
    let mut out = String::new();
    for change in changes {
        let old = change
            .old
            .as_deref()
            .map(read)
            .transpose()?
            .unwrap_or_default();
        let new = change
            .new
            .as_deref()
            .map(read)
            .transpose()?
            .unwrap_or_default();
        let path = change.path.as_str();
        let (old_name, new_name) = match change.kind {
            ChangeKind::Added => ("/dev/null".to_string(), format!("b/{path}")),
            ChangeKind::Deleted => (format!("a/{path}"), "/dev/null".to_string()),
            ChangeKind::Modified => (format!("a/{path}"), format!("b/{path}")),
        };
        // Git's headers, so `git apply` takes the diff as it is.
        out.push_str(&format!("diff --git a/{path} b/{path}\n"));
        match change.kind {
            ChangeKind::Added => out.push_str("new file mode 100644\n"),
            ChangeKind::Deleted => out.push_str("deleted file mode 100644\n"),
            ChangeKind::Modified => {}
        }
        match (std::str::from_utf8(&old), std::str::from_utf8(&new)) {
            (Ok(old), Ok(new)) if !old.contains('\0') && !new.contains('\0') => {
                let diff = similar::TextDiff::from_lines(old, new);
                out.push_str(
                    &diff
                        .unified_diff()
                        .context_radius(3)
                        .missing_newline_hint(true)
                        .header(&old_name, &new_name)
                        .to_string(),
                );
            }
            _ => out.push_str(&format!("Binary files {old_name} and {new_name} differ\n")),
        }
    }
    Ok(out)
}

/// What `apply` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Applied {
    /// These files were written or deleted.
    Written(Vec<String>),
    /// The repository already holds the flow's result.
    AlreadyThere,
    /// The flow changed nothing.
    Nothing,
}

/// What stands at a path in the repository now.
#[derive(Debug, PartialEq, Eq)]
enum Current {
    Missing,
    File(Vec<u8>),
    /// A directory or anything else that is not a regular file.
    Other,
}

fn current(path: &Path) -> Result<Current> {
    match fs::symlink_metadata(path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Current::Missing),
        Err(err) => Err(err).io_context(|| format!("reading {}", path.display())),
        Ok(meta) if meta.is_file() => Ok(Current::File(read(path)?)),
        Ok(_) => Ok(Current::Other),
    }
}

/// Writes the changes into the repository. Everything is checked before anything is written:
/// every target must stay inside the repository (outside `.git` and `workspace`) and hold what
/// the flow read, unless `force`; then deletions go first, then files, each atomically.
pub(crate) fn apply(
    rules: &PathRules,
    task_id: &str,
    changes: &[Change],
    force: bool,
) -> Result<Applied> {
    if changes.is_empty() {
        return Ok(Applied::Nothing);
    }
    let root = &rules.repo;
    let mut drifted = Vec::new();
    let mut blocked = Vec::new();
    let mut already = true;
    for change in changes {
        // Symlinks planted since the flow ran must not redirect a write out of the repository.
        if let Err(problem) = rules.check_contained(&change.path) {
            return Err(Error::Usage(format!("not applying anything: {problem}")));
        }
        let now = current(&change.path.under(root))?;
        let old = change.old.as_deref().map(read).transpose()?;
        let new = change.new.as_deref().map(read).transpose()?;
        let as_file = |bytes: Option<Vec<u8>>| bytes.map_or(Current::Missing, Current::File);
        if now == Current::Other {
            blocked.push(change.path.as_str().to_string());
        }
        if now != as_file(new) {
            already = false;
        }
        if now != as_file(old) {
            drifted.push(change.path.as_str().to_string());
        }
    }
    if already {
        return Ok(Applied::AlreadyThere);
    }
    if !blocked.is_empty() {
        return Err(Error::Usage(format!(
            "not applying anything: a directory or special file now stands where the flow writes a \
             file: {}; move it away first",
            blocked.join(", ")
        )));
    }
    if !drifted.is_empty() && !force {
        return Err(Error::Drift {
            task_id: task_id.to_string(),
            files: drifted,
        });
    }
    let mut written = Vec::new();
    let (deletions, writes): (Vec<&Change>, Vec<&Change>) =
        changes.iter().partition(|c| c.new.is_none());
    for change in deletions {
        let target = change.path.under(root);
        match fs::remove_file(&target) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                return Err(err).io_context(|| format!("deleting {}", target.display()));
            }
            _ => written.push(change.path.as_str().to_string()),
        }
    }
    for change in writes {
        let Some(source) = &change.new else { continue };
        let target = change.path.under(root);
        let bytes = read(source)?;
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).io_context(|| format!("creating {}", parent.display()))?;
        }
        workspace::write_atomic(&target, &bytes)?;
        if let Ok(meta) = fs::metadata(source) {
            let _ = fs::set_permissions(&target, meta.permissions());
        }
        written.push(change.path.as_str().to_string());
    }
    Ok(Applied::Written(written))
}
