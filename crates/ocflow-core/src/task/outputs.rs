//! A step's outputs: the files it left in `<task>/<step>/output/`, and `final_output/`, which
//! holds the latest version of every file the flow changed (what `diff` and `apply` read).

use std::fs;
use std::path::Path;

use walkdir::WalkDir;

use crate::task::file_tree;
use crate::task::interrupt;
use crate::task::overlay::{Overlay, Version};
use crate::task::workspace::{self, TaskDir};
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::flow::Flow;
use ocflow_model::repo_path::RepoPath;
use ocflow_model::status::FlowStatus;

/// What is wrong with what a step left in its `output/` directory: the step fails with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct OutputError(pub(crate) String);

/// The files a step left in its `output/` directory. Anything but regular files and
/// directories (a symlink, a fifo) and any path a flow may not write is an error.
pub(crate) fn list_outputs(output_dir: &Path) -> Result<Vec<RepoPath>, OutputError> {
    let mut outputs = Vec::new();
    if !output_dir.exists() {
        return Ok(outputs);
    }
    for entry in WalkDir::new(output_dir).follow_links(false).min_depth(1) {
        let entry = entry
            .map_err(|err| OutputError(format!("cannot read {}: {err}", output_dir.display())))?;
        let kind = entry.file_type();
        if kind.is_dir() {
            continue;
        }
        let relative = entry
            .path()
            .strip_prefix(output_dir)
            .unwrap_or(entry.path())
            .display()
            .to_string();
        if !kind.is_file() {
            return Err(OutputError(format!(
                "the step left {relative} in output/, which is not a regular file (symlinks are \
                 not accepted)"
            )));
        }
        outputs.push(
            RepoPath::parse(&relative)
                .map_err(|err| OutputError(format!("the step wrote output/{relative}: {err}")))?,
        );
    }
    outputs.sort();
    Ok(outputs)
}

/// Makes `final_output/` hold the latest version of every file the flow changed: copies a
/// step's outputs there and removes what it deleted.
pub(crate) fn publish(
    task: &TaskDir,
    step_id: &str,
    outputs: &[String],
    deletions: &[String],
) -> Result<()> {
    let final_dir = task.final_output();
    let output_dir = task.step_dir(step_id).join(workspace::OUTPUT_DIR);
    // Deletions first: a deleted file may be where a directory of new outputs goes.
    for file in deletions {
        interrupt::check()?;
        file_tree::remove_any(&final_dir.join(file))?;
    }
    for file in outputs {
        interrupt::check()?;
        let path = RepoPath::parse(file).map_err(|problem| Error::BadStateFile {
            path: task.file(workspace::STATUS_FILE),
            problem: format!("the recorded output {file}: {problem}; it was edited by hand"),
        })?;
        file_tree::place_file(&final_dir, &path, &output_dir.join(file))?;
    }
    Ok(())
}

/// Rebuilds `final_output/` from the recorded outputs of the succeeded steps, so that a crash
/// between a step's status write and its publishing leaves nothing stale.
pub fn rebuild_final_output(task: &TaskDir, status: &FlowStatus, flow: &Flow) -> Result<()> {
    file_tree::remove_tree(&task.final_output())?;
    fs::create_dir_all(task.final_output())
        .io_context(|| format!("creating {}", task.final_output().display()))?;
    let overlay = Overlay::from_status(status, flow, None);
    for (path, version) in &overlay.versions {
        interrupt::check()?;
        if let Version::Step { step, .. } = version {
            publish(task, step, &[path.as_str().to_string()], &[])?;
        }
    }
    Ok(())
}
