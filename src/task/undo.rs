//! What an apply replaced, kept at apply time so `ocflow undo` can put it back byte for byte.
//! Each apply of a task is kept in `<task>/applies/<n>/`: `before/` holds the repository's
//! files as they were (only those the apply touched), `after/` what the apply wrote, and
//! `apply.json` the list, the directories the apply had to create, and whether it was undone.
//! Undoing is an apply of the reversed changes, so it is all or nothing too, and refuses files
//! changed since the apply unless forced.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{IoContext, Result};
use crate::model::repo_path::RepoPath;
use crate::model::status::now;
use crate::task::review::{Change, ChangeKind};
use crate::task::workspace::{self, TaskDir};

/// Where a task's applies are kept.
const APPLIES_DIR: &str = "applies";
const RECORD_FILE: &str = "apply.json";

/// One apply, as kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ApplyRecord {
    pub(crate) version: u32,
    pub(crate) applied_at: String,
    /// The files touched, with whether each existed before and after.
    pub(crate) files: Vec<KeptFile>,
    /// Directories that did not exist before (outermost first).
    pub(crate) made_dirs: Vec<String>,
    #[serde(default)]
    pub(crate) undone_at: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct KeptFile {
    pub(crate) path: RepoPath,
    pub(crate) before: bool,
    pub(crate) after: bool,
}

/// An apply's record on disk.
#[derive(Debug)]
pub(crate) struct Kept {
    pub(crate) dir: PathBuf,
    pub(crate) record: ApplyRecord,
}

/// Keeps the repository's current version of every file `changes` touch, and the versions
/// they will get, before the apply; `discard` it if the apply then fails.
pub(crate) fn keep(task: &TaskDir, repo: &Path, changes: &[Change]) -> Result<Kept> {
    let root = task.root.join(APPLIES_DIR);
    fs::create_dir_all(&root).io_context(|| format!("creating {}", root.display()))?;
    let number = fs::read_dir(&root)
        .io_context(|| format!("reading {}", root.display()))?
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .max()
        .unwrap_or(0)
        + 1;
    let dir = root.join(number.to_string());
    let mut files = Vec::new();
    let mut made_dirs: Vec<String> = Vec::new();
    for change in changes {
        let target = change.path.under(repo);
        let before = target.is_file();
        if before {
            copy(&target, &change.path.under(&dir.join("before")))?;
        }
        if let Some(new) = &change.new {
            copy(new, &change.path.under(&dir.join("after")))?;
        }
        if change.kind == ChangeKind::Added {
            for missing in missing_parents(repo, &target) {
                if !made_dirs.contains(&missing) {
                    made_dirs.push(missing);
                }
            }
        }
        files.push(KeptFile {
            path: change.path.clone(),
            before,
            after: change.new.is_some(),
        });
    }
    made_dirs.sort_by_key(|d| d.matches('/').count());
    let record = ApplyRecord {
        version: 1,
        applied_at: now(),
        files,
        made_dirs,
        undone_at: None,
    };
    workspace::write_json_atomic(&dir.join(RECORD_FILE), &record)?;
    Ok(Kept { dir, record })
}

impl Kept {
    /// The apply did not happen: its record goes.
    pub(crate) fn discard(self) {
        let _ = fs::remove_dir_all(&self.dir);
    }

    /// The changes that put the repository back as it was before this apply.
    pub(crate) fn reversed(&self) -> Vec<Change> {
        self.record
            .files
            .iter()
            .map(|file| {
                let kept = |side: &str, present: bool| {
                    present.then(|| file.path.under(&self.dir.join(side)))
                };
                let kind = match (file.after, file.before) {
                    (true, false) => ChangeKind::Deleted,
                    (false, true) => ChangeKind::Added,
                    _ => ChangeKind::Modified,
                };
                Change {
                    path: file.path.clone(),
                    kind,
                    new: kept("before", file.before),
                    old: kept("after", file.after),
                }
            })
            .collect()
    }

    /// Marks the apply undone and removes the directories it had created, if empty now.
    pub(crate) fn mark_undone(mut self, repo: &Path) -> Result<()> {
        for dir in self.record.made_dirs.iter().rev() {
            let _ = fs::remove_dir(repo.join(dir));
        }
        self.record.undone_at = Some(now());
        workspace::write_json_atomic(&self.dir.join(RECORD_FILE), &self.record)
    }
}

/// The task's last apply not yet undone, if any.
pub(crate) fn last_apply(task: &TaskDir) -> Result<Option<Kept>> {
    let root = task.root.join(APPLIES_DIR);
    let Ok(entries) = fs::read_dir(&root) else {
        return Ok(None);
    };
    let mut numbers: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .collect();
    numbers.sort_unstable();
    for number in numbers.into_iter().rev() {
        let dir = root.join(number.to_string());
        let path = dir.join(RECORD_FILE);
        let text =
            fs::read_to_string(&path).io_context(|| format!("reading {}", path.display()))?;
        let record: ApplyRecord =
            serde_json::from_str(&text).map_err(|err| crate::error::Error::BadStateFile {
                path: path.clone(),
                problem: err.to_string(),
            })?;
        if record.undone_at.is_none() {
            return Ok(Some(Kept { dir, record }));
        }
    }
    Ok(None)
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent).io_context(|| format!("creating {}", parent.display()))?;
    }
    fs::copy(from, to).io_context(|| format!("keeping a copy of {}", from.display()))?;
    Ok(())
}

/// The directories between `repo` and `target` that do not exist yet, repository-relative.
fn missing_parents(repo: &Path, target: &Path) -> Vec<String> {
    let mut missing = Vec::new();
    let mut dir = target.parent();
    while let Some(current) = dir {
        if current == repo || current.exists() {
            break;
        }
        if let Ok(relative) = current.strip_prefix(repo) {
            missing.push(relative.to_string_lossy().into_owned());
        }
        dir = current.parent();
    }
    missing
}
