//! Review: what the flow changed compared with the snapshot it started from, as a list and as a
//! unified diff (`apply` writes it into the repository).

use std::fs;
use std::path::{Path, PathBuf};

use crate::flow::ignore_rules;
use crate::flow::operations::{self, Access};
use crate::task::interrupt;
use crate::task::overlay::{Overlay, Version};
use crate::task::workspace::TaskDir;
use ocflow_model::error::{IoContext, Result};
use ocflow_model::output::quoted_path;
use ocflow_model::repo_path::RepoPath;
use ocflow_model::status::FlowStatus;

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: RepoPath,
    pub kind: ChangeKind,
    /// The file with the flow's content (`None` for a deletion).
    pub(crate) new: Option<PathBuf>,
    /// The snapshot's file (`None` for an addition).
    pub(crate) old: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

impl Change {
    /// The file holding the flow's content (`None` for a deletion).
    pub fn new_file(&self) -> Option<&Path> {
        self.new.as_deref()
    }

    /// The snapshot's file (`None` for an addition).
    pub fn old_file(&self) -> Option<&Path> {
        self.old.as_deref()
    }
}

impl ChangeKind {
    /// `added`, `modified` or `deleted`.
    pub fn name(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
        }
    }
}

/// The flow's net changes: every path whose final version differs from the snapshot.
pub fn changes(
    task: &TaskDir,
    status: &FlowStatus,
    flow: &ocflow_model::flow::Flow,
) -> Result<Vec<Change>> {
    changes_and_left_out(task, status, flow).map(|(changes, _)| changes)
}

/// The flow's net changes, and the files a command left behind that git ignores (caches,
/// build output), which are left out of them: reviewed and applied are only what a person
/// would commit. A file step cannot write an ignored file (validation refuses it).
pub fn changes_and_left_out(
    task: &TaskDir,
    status: &FlowStatus,
    flow: &ocflow_model::flow::Flow,
) -> Result<(Vec<Change>, Vec<String>)> {
    let overlay = Overlay::from_status(status, flow, None);
    let base = Overlay::default();
    let mut out = Vec::new();
    let mut left_out = Vec::new();
    let by_command = |version: &Version| match version {
        Version::Step { step, .. } => made_by_command(flow, step),
        Version::Deleted => true,
    };
    // Ignore files a command made (a test runner's cache marks itself ignored): git applies
    // them as the repository's own.
    let mut made_rules = Vec::new();
    for (path, version) in &overlay.versions {
        if by_command(version)
            && let Some(file) = overlay.source(task, path)?
            && let Ok(text) = fs::read_to_string(&file)
            && let Some(rules) = ignore_rules::MadeRules::new(&status.repo, path, &text)
        {
            made_rules.push(rules);
        }
    }
    for (path, version) in &overlay.versions {
        interrupt::check()?;
        // Only a command can touch an ignored path (file steps are refused one), whether it
        // made the file or deleted it: neither is a change a person would commit.
        // Git never ignores a file it has: a command's ignore file leaves out only new files.
        let new_file =
            || Ok::<bool, ocflow_model::error::Error>(base.source(task, path)?.is_none());
        let ignored = ignore_rules::ignored_by(&status.repo, path).is_some()
            || (made_rules.iter().any(|r| r.ignore(&status.repo, path)) && new_file()?);
        if by_command(version) && ignored {
            left_out.push(path.as_str().to_string());
            continue;
        }
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
    Ok((out, left_out))
}

/// Whether `step` ran in a view (a command), whose changes were captured rather than asked for.
fn made_by_command(flow: &ocflow_model::flow::Flow, step: &str) -> bool {
    flow.step(step)
        .and_then(|s| operations::find(&s.operation))
        .is_some_and(|op| op.access == Access::View)
}

fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).io_context(|| format!("reading {}", path.display()))
}

/// The changes as a unified diff (`a/` is the snapshot, `b/` the flow's result).
pub fn unified_diff(changes: &[Change]) -> Result<String> {
    let mut out = String::new();
    for change in changes {
        interrupt::check()?;
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
        // Quoted as git quotes them: a newline in a name cannot fake a line of the diff.
        let (a, b) = (
            quoted_path(&format!("a/{path}")),
            quoted_path(&format!("b/{path}")),
        );
        let (old_name, new_name) = match change.kind {
            ChangeKind::Added => ("/dev/null".to_string(), b.clone()),
            ChangeKind::Deleted => (a.clone(), "/dev/null".to_string()),
            ChangeKind::Modified => (a.clone(), b.clone()),
        };
        // Git's headers, so `git apply` takes the diff as it is.
        out.push_str(&format!("diff --git {a} {b}\n"));
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

/// One line of a diff stat: a changed file and its lines added and removed (`None` for a
/// binary file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStat {
    pub path: String,
    pub kind: ChangeKind,
    pub lines: Option<(usize, usize)>,
}

/// The changes' diff stat, as `git diff --stat` counts it.
pub fn diff_stat(changes: &[Change]) -> Result<Vec<FileStat>> {
    let mut stats = Vec::new();
    for change in changes {
        interrupt::check()?;
        let text = |side: &Option<PathBuf>| -> Result<Option<String>> {
            let bytes = side.as_deref().map(read).transpose()?.unwrap_or_default();
            Ok(String::from_utf8(bytes).ok().filter(|t| !t.contains('\0')))
        };
        let lines = match (text(&change.old)?, text(&change.new)?) {
            (Some(old), Some(new)) => {
                let diff = similar::TextDiff::from_lines(&old, &new);
                let mut counts = (0, 0);
                for op in diff.iter_all_changes() {
                    match op.tag() {
                        similar::ChangeTag::Insert => counts.0 += 1,
                        similar::ChangeTag::Delete => counts.1 += 1,
                        similar::ChangeTag::Equal => {}
                    }
                }
                Some(counts)
            }
            _ => None,
        };
        stats.push(FileStat {
            path: change.path.as_str().to_string(),
            kind: change.kind,
            lines,
        });
    }
    Ok(stats)
}
