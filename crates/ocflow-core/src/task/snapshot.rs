//! The snapshot: the repository copied once, at the task's start, into `<task>/snapshot/`.
//! Every step sees the repository through it, so the repository itself is never written to
//! while a flow runs.

use std::fs;
use std::path::{Path, PathBuf};

use crate::task::file_tree::{self, TreeStats};
use crate::task::workspace::{self, TaskDir};
use ocflow_model::error::{IoContext, Result};

/// Copies the repository (minus `.git`, build directories and `skip`, the workspace) into the
/// task's snapshot. Written under a temporary name and renamed, so a snapshot that exists is
/// complete.
pub fn take_snapshot(repo: &Path, task: &TaskDir, skip: &[PathBuf]) -> Result<TreeStats> {
    let target = task.snapshot();
    let partial = task.root.join("_snapshot.partial");
    file_tree::remove_tree(&partial)?;
    let copied = file_tree::copy_tree(repo, &partial, skip).and_then(|stats| {
        workspace::sync_file_system(&partial)?;
        fs::rename(&partial, &target)
            .io_context(|| format!("renaming {} into place", partial.display()))?;
        workspace::sync_dir(&task.root)?;
        Ok(stats)
    });
    // A failed copy (a full disk, most often) must not keep its space.
    if copied.is_err() {
        let _ = file_tree::remove_tree(&partial);
    }
    copied
}
