//! The overlay: which version of each changed path a step sees — the snapshot's, a step's
//! output, or deleted — from the steps it depends on. Both kinds of view are synced to one;
//! file steps get the files they name copied from it into `input/`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use crate::flow::graph::Ancestors;
use crate::task::file_tree;
use crate::task::workspace::{self, TaskDir};
use ocflow_model::error::{IoContext, Result};
use ocflow_model::flow::Flow;
use ocflow_model::repo_path::RepoPath;
use ocflow_model::status::{FlowStatus, StepState};

/// Which version of a path a step sees, when it is not the snapshot's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Version {
    /// The file as the named step left it in `<task>/<step>/output/`, in the success numbered
    /// `sequence`: a step that runs again (recovery) makes a new version of its files.
    Step { step: String, sequence: u64 },
    /// Deleted by a step.
    Deleted,
}

/// The repository's changes as seen by one step: snapshot plus these versions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Overlay {
    pub(crate) versions: BTreeMap<RepoPath, Version>,
}

impl Overlay {
    /// The changes of the succeeded steps in `only` (all of them when `None`), applied in the
    /// flow's topological order (see `Flow::topological_order`), so that steps running at the
    /// same time give the same result as one after another.
    pub(crate) fn from_status(
        status: &FlowStatus,
        flow: &Flow,
        only: Option<&BTreeSet<String>>,
    ) -> Overlay {
        let rank: HashMap<&str, usize> = flow
            .topological_order()
            .into_iter()
            .enumerate()
            .map(|(i, id)| (id, i))
            .collect();
        let mut succeeded = status.succeeded();
        succeeded.sort_by_key(|s| {
            (
                rank.get(s.id.as_str()).copied().unwrap_or(usize::MAX),
                s.sequence,
            )
        });
        let mut versions = BTreeMap::new();
        for step in succeeded {
            if only.is_some_and(|only| !only.contains(&step.id)) {
                continue;
            }
            for file in &step.output_files {
                if let Ok(path) = RepoPath::parse(file) {
                    versions.insert(
                        path,
                        Version::Step {
                            step: step.id.clone(),
                            sequence: step.sequence.unwrap_or(0),
                        },
                    );
                }
            }
            for file in &step.deleted_files {
                if let Ok(path) = RepoPath::parse(file) {
                    versions.insert(path, Version::Deleted);
                }
            }
        }
        Overlay { versions }
    }

    /// What `from_status` gives for one step's ancestors, without a pass over the whole flow:
    /// the graph knows them in order. `only_paths`: the paths the step reads (a file step's),
    /// the rest left out; `None` for every path (a command step's view).
    pub(crate) fn of_ancestors(
        status: &FlowStatus,
        ancestors: &Ancestors,
        only_paths: Option<&[RepoPath]>,
    ) -> Overlay {
        let mut versions = BTreeMap::new();
        let wanted = |file: &str| -> Option<RepoPath> {
            match only_paths {
                Some(paths) => paths.iter().find(|p| p.as_str() == file).cloned(),
                None => RepoPath::parse(file).ok(),
            }
        };
        for id in ancestors.in_order() {
            let Some(step) = status.step(id).filter(|s| s.status == StepState::Succeeded) else {
                continue;
            };
            for file in &step.output_files {
                if let Some(path) = wanted(file) {
                    let version = Version::Step {
                        step: step.id.clone(),
                        sequence: step.sequence.unwrap_or(0),
                    };
                    versions.insert(path, version);
                }
            }
            for file in &step.deleted_files {
                if let Some(path) = wanted(file) {
                    versions.insert(path, Version::Deleted);
                }
            }
        }
        Overlay { versions }
    }

    /// The paths whose version differs between this overlay and `other`, in order.
    pub(crate) fn differing(&self, other: &Overlay) -> Vec<RepoPath> {
        let paths: BTreeSet<&RepoPath> =
            self.versions.keys().chain(other.versions.keys()).collect();
        paths
            .into_iter()
            .filter(|path| self.versions.get(*path) != other.versions.get(*path))
            .cloned()
            .collect()
    }

    /// The file holding `path`'s content as this overlay sees it, or `None` if it does not exist.
    /// Never leaves the task directory, even through a symlink in the snapshot.
    pub(crate) fn source(&self, task: &TaskDir, path: &RepoPath) -> Result<Option<PathBuf>> {
        let file = match self.versions.get(path) {
            Some(Version::Deleted) => return Ok(None),
            Some(Version::Step { step, .. }) => {
                path.under(&task.step_dir(step).join(workspace::OUTPUT_DIR))
            }
            None => path.under(&task.snapshot()),
        };
        if fs::symlink_metadata(&file).is_err() {
            return Ok(None);
        }
        let root = task
            .root
            .canonicalize()
            .io_context(|| format!("resolving {}", task.root.display()))?;
        // A dangling link, a directory, or a link leading out of the task: nothing a flow can
        // read there (validation refuses such paths; this guards what changed since).
        match file.canonicalize() {
            Ok(real) if real.starts_with(&root) && real.is_file() => Ok(Some(real)),
            _ => Ok(None),
        }
    }
}

/// Copies the current version of each of `paths` into `input_dir`; returns those that exist.
pub(crate) fn stage_inputs(
    task: &TaskDir,
    overlay: &Overlay,
    paths: &[RepoPath],
    input_dir: &Path,
) -> Result<Vec<RepoPath>> {
    let mut staged = Vec::new();
    for path in paths {
        if let Some(source) = overlay.source(task, path)? {
            let dest = path.under(input_dir);
            file_tree::copy_file(&source, &dest)?;
            staged.push(path.clone());
        }
    }
    Ok(staged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::graph::FlowGraph;
    use serde_json::json;
    use std::sync::Arc;

    /// `of_ancestors` gives what `from_status` gives for a step's ancestors (later steps of the
    /// order winning, a step that did not succeed left out, a deletion kept), and with
    /// `only_paths` the same versions for those paths and nothing else.
    #[test]
    fn the_overlay_of_ancestors_is_the_one_built_from_the_whole_status() {
        // Written out of order: `b2` runs before `b1` would by position, as its dependency.
        let flow: Flow = serde_json::from_value(json!({"version": 1, "task": "t", "steps": [
            {"id": "a", "operation": "write_file"},
            {"id": "b1", "operation": "write_file", "depends_on": ["b2"]},
            {"id": "b2", "operation": "write_file", "depends_on": ["a"]},
            {"id": "failed", "operation": "write_file", "depends_on": ["a"]},
            {"id": "aside", "operation": "write_file"},
            {"id": "last", "operation": "write_file", "depends_on": ["b1", "failed"]}
        ]}))
        .unwrap();
        let mut status = FlowStatus::new("t", &flow, Path::new("/repo"));
        let outputs = [
            ("a", vec!["x.txt", "y.txt", "gone.txt"], vec![]),
            ("b1", vec!["x.txt"], vec!["gone.txt"]),
            ("b2", vec!["x.txt", "z.txt"], vec![]),
            ("aside", vec!["y.txt"], vec![]),
        ];
        // Finished in another order than the flow's: the order decides, not the sequence.
        for (sequence, (id, written, deleted)) in outputs.iter().enumerate() {
            let step = status.step_mut(id).unwrap();
            step.start("now".into()).unwrap();
            let files = |names: &Vec<&str>| names.iter().map(|n| n.to_string()).collect();
            let done = (files(written), files(deleted));
            step.succeed("now".into(), 1, 10 - sequence as u64, done, "ok".into())
                .unwrap();
        }
        let failed = status.step_mut("failed").unwrap();
        failed.start("now".into()).unwrap();
        let graph = Arc::new(FlowGraph::new(&flow));
        let ancestors = graph.ancestors("last");
        let expected = Overlay::from_status(&status, &flow, Some(&flow.ancestors("last")));
        assert_eq!(Overlay::of_ancestors(&status, &ancestors, None), expected);
        let path = |p: &str| RepoPath::parse(p).unwrap();
        assert_eq!(
            expected.versions.get(&path("x.txt")),
            Some(&Version::Step {
                step: "b1".into(),
                sequence: 9
            })
        );
        let wanted = [path("x.txt"), path("gone.txt"), path("new.txt")];
        let some = Overlay::of_ancestors(&status, &ancestors, Some(&wanted));
        let mut restricted = expected.clone();
        restricted.versions.retain(|p, _| wanted.contains(p));
        assert_eq!(some, restricted);
        assert_eq!(some.versions.len(), 2);
    }
}
