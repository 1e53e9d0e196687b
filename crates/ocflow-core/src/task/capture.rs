//! What a command step changed in its view (`Captured`), as both kinds of view report it, and
//! the paths a command may write but a flow cannot keep (longer than `MAX_PATH_BYTES`).

use std::path::Path;

use crate::task::file_tree;
use ocflow_model::error::Result;
use ocflow_model::repo_path;

/// What a command step changed in the view.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Captured {
    pub(crate) output_files: Vec<String>,
    pub(crate) deleted_files: Vec<String>,
    /// Paths that changed but cannot be carried (symlinks, special files).
    pub(crate) ignored: Vec<String>,
    /// The first file the command wrote at a path longer than a flow keeps
    /// (`repo_path::MAX_PATH_BYTES`): the step fails naming it (`too_long_message`).
    pub(crate) too_long: Option<String>,
}

/// Whether a path a command wrote is longer than any flow path may be. Such a file could not
/// be staged, published or applied (the kernel refuses paths of 4096 bytes and more in one
/// call), so it fails the step rather than vanish or stop the flow.
pub(crate) fn is_too_long(path: &str) -> bool {
    path.len() > repo_path::MAX_PATH_BYTES
}

/// The first file, symlink or special file under `dir` (relative to it), found relative to
/// each directory: it works however deep the tree goes.
pub(crate) fn first_file_under(dir: &Path) -> Result<Option<String>> {
    let mut first = None;
    file_tree::stat_walk(dir, &mut |path, _, _| {
        first.get_or_insert_with(|| path.to_string());
    })?;
    Ok(first)
}

/// The part of a too-long `path` (see `is_too_long`) where it first crosses the limit: the
/// ancestor (or the path itself) to remove so that nothing too deep stays in a view.
pub(crate) fn too_long_root(path: &str) -> &str {
    path.match_indices('/')
        .map(|(at, _)| &path[..at])
        .find(|prefix| is_too_long(prefix))
        .unwrap_or(path)
}

/// Why a step that wrote `path` (see `is_too_long`) failed: the path, shortened, with its
/// length and depth, the limit, and what to do.
pub(crate) fn too_long_message(path: &str) -> String {
    let shown = if path.chars().count() > 60 {
        let head: String = path.chars().take(30).collect();
        let tail: String = path
            .chars()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("{head}…{tail}")
    } else {
        path.to_string()
    };
    format!(
        "the command wrote {shown}, a path of {} bytes, {} directories deep; a flow keeps paths of \
         at most {} bytes (longer ones fail with \"File name too long\"): make the tree \
         shallower or keep it out of the repository",
        path.len(),
        path.matches('/').count(),
        repo_path::MAX_PATH_BYTES
    )
}
