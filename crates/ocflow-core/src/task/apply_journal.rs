//! The apply journal, as SQLite keeps a rollback journal: before `apply` writes anything into
//! the repository, every file it will touch is kept in `<task>/applies/<n>/` — `before/` the
//! repository's version, `after/` the flow's — with `apply.json` naming them and the stage the
//! apply is at, all flushed to disk. Killed at any moment, an apply leaves a record that every
//! later command touching the task finds first: an apply cut short is rolled back (or forward,
//! when every new file was already in place), an undo cut short is finished. `ocflow undo`
//! restores from the same copies, so it is all or nothing too.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::flow::path_rules::PathRules;
use crate::task::review::Change;
use crate::task::workspace::{self, TaskDir};
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::repo_path::RepoPath;
use ocflow_model::status::now;

/// Where a task's applies are kept.
const APPLIES_DIR: &str = "applies";
const RECORD_FILE: &str = "apply.json";
/// The format version of `apply.json` this ocflow writes and reads.
const APPLY_VERSION: u32 = 1;

/// Where an apply stands; `Writing` and `Undoing` are the stages a kill can leave behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The copies are kept and the repository is being written.
    Writing,
    /// Every file is in place.
    #[default]
    Applied,
    /// Every file is in place and `apply --commit` is staging and committing them (the index
    /// entries they had are kept in `index_before`).
    Committing,
    /// Cut short, then put back as it was before.
    RolledBack,
    /// `undo` is putting the files back.
    Undoing,
    /// Undone: the files are as they were before it.
    Undone,
}

/// One apply, as kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApplyRecord {
    pub(crate) version: u32,
    pub applied_at: String,
    /// The files touched, with whether each existed before and after.
    pub(crate) files: Vec<KeptFile>,
    /// Directories that did not exist before (outermost first).
    pub(crate) made_dirs: Vec<String>,
    /// Where the apply stands (records written before stages existed were applied).
    #[serde(default)]
    pub stage: Stage,
    #[serde(default)]
    pub(crate) undone_at: Option<String>,
    /// The commit `apply --commit` made of these files, which `undo` removes again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Whether the undo under way was forced (files edited since are put back too).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forced: bool,
    /// The index entries of the apply's files before `apply --commit` staged them, as `git
    /// ls-files --stage` printed them (a file absent from it was not in the index): what a
    /// commit cut short and `undo` put back, so a staged change never outlives them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_before: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct KeptFile {
    pub(crate) path: RepoPath,
    pub(crate) before: bool,
    pub(crate) after: bool,
}

/// An apply's record on disk.
#[derive(Debug)]
pub struct Kept {
    pub(crate) dir: PathBuf,
    pub record: ApplyRecord,
}

/// What putting an apply's files back did.
#[derive(Debug, Default)]
pub struct Restored {
    /// Files written back or removed.
    pub files: Vec<String>,
    /// Files that hold neither the apply's version nor the one before (edited since): left as
    /// they are, so nobody's work is lost.
    pub left: Vec<String>,
}

/// Keeps the repository's current version of every file `changes` touch and the versions they
/// will get, durably, before the first write: the journal of an apply at stage `Writing`.
pub(crate) fn begin(task: &TaskDir, repo: &Path, changes: &[&Change]) -> Result<Kept> {
    let root = task.root.join(APPLIES_DIR);
    fs::create_dir_all(&root).io_context(|| format!("creating {}", root.display()))?;
    let number = numbers(&root)?.last().copied().unwrap_or(0) + 1;
    let dir = root.join(number.to_string());
    let mut files = Vec::new();
    let mut made_dirs: Vec<String> = Vec::new();
    for change in changes {
        let target = change.path.under(repo);
        let before = fs::symlink_metadata(&target).is_ok_and(|meta| meta.is_file());
        if before {
            copy(&target, &change.path.under(&dir.join("before")))?;
        }
        if let Some(new) = &change.new {
            copy(new, &change.path.under(&dir.join("after")))?;
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
        version: APPLY_VERSION,
        applied_at: now(),
        files,
        made_dirs,
        stage: Stage::Writing,
        undone_at: None,
        commit: None,
        forced: false,
        index_before: None,
    };
    // The copies reach the disk before the record that says they are there.
    workspace::sync_file_system(&dir)?;
    workspace::write_json_atomic(&dir.join(RECORD_FILE), &record)?;
    workspace::sync_dir(&root)?;
    Ok(Kept { dir, record })
}

impl Kept {
    /// Records the apply's new stage, durably.
    pub fn set_stage(&mut self, stage: Stage) -> Result<()> {
        self.record.stage = stage;
        if stage == Stage::Undone {
            self.record.undone_at = Some(now());
        }
        workspace::write_json_atomic(&self.dir.join(RECORD_FILE), &self.record)
    }

    /// Records that `undo` starts putting the files back, and whether it was forced.
    pub fn set_undoing(&mut self, forced: bool) -> Result<()> {
        self.record.forced = forced;
        self.set_stage(Stage::Undoing)
    }

    /// The repository paths of the apply's files.
    pub fn paths(&self) -> Vec<String> {
        self.record
            .files
            .iter()
            .map(|f| f.path.as_str().to_string())
            .collect()
    }

    /// Records the commit made of the apply's files: the apply is complete.
    pub fn set_commit(&mut self, sha: String) -> Result<()> {
        self.record.commit = Some(sha);
        self.set_stage(Stage::Applied)
    }

    /// Records, before anything is staged, the index entries of the apply's files: the stage
    /// `Committing`, which a kill leaves for the next command to finish.
    pub fn begin_commit(&mut self, index_before: String) -> Result<()> {
        self.record.index_before = Some(index_before);
        self.set_stage(Stage::Committing)
    }

    /// The apply's version of a file (`None`: the apply deleted it, or never wrote it).
    fn kept(&self, side: &str, file: &KeptFile) -> Option<PathBuf> {
        let present = if side == "before" {
            file.before
        } else {
            file.after
        };
        present.then(|| file.path.under(&self.dir.join(side)))
    }

    /// The changes that put the repository back as it was before this apply (`old`: what the
    /// apply wrote), for checking that nobody edited the files since.
    pub fn reversed(&self) -> Vec<Change> {
        self.record
            .files
            .iter()
            .map(|file| {
                let kind = match (file.after, file.before) {
                    (true, false) => crate::task::review::ChangeKind::Deleted,
                    (false, true) => crate::task::review::ChangeKind::Added,
                    _ => crate::task::review::ChangeKind::Modified,
                };
                Change {
                    path: file.path.clone(),
                    kind,
                    new: self.kept("before", file),
                    old: self.kept("after", file),
                }
            })
            .collect()
    }

    /// Refuses a journal naming a path outside the repository (edited by hand, or a symlink
    /// planted on the way since): nothing is read or written through it.
    pub fn check_paths(&self, rules: &PathRules) -> Result<()> {
        let named = self
            .record
            .files
            .iter()
            .map(|f| f.path.as_str())
            .chain(self.record.made_dirs.iter().map(String::as_str));
        for raw in named {
            let problem = match RepoPath::parse(raw) {
                Ok(path) => rules.check_contained(&path).err().map(|p| p.to_string()),
                Err(problem) => Some(problem.to_string()),
            };
            if let Some(problem) = problem {
                return Err(Error::Usage(format!(
                    "the apply journal {} names {raw:?}, which is not a path inside the \
                     repository ({problem}); nothing was put back: check that journal",
                    self.dir.join(RECORD_FILE).display()
                )));
            }
        }
        Ok(())
    }

    /// Whether every file holds the version this apply writes.
    pub fn all_in_place(&self, repo: &Path) -> Result<bool> {
        for file in &self.record.files {
            let wanted = self.kept("after", file).map(|p| read(&p)).transpose()?;
            if current(&file.path.under(repo))? != as_current(wanted) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Puts every file back as it was before this apply, each replaced atomically: a file
    /// already so is left alone, and so is one that holds neither version unless `force`.
    /// Directories the apply made go if empty, and so does anything an apply killed half-way
    /// left beside its files. Safe to run again after a kill.
    pub fn restore(&self, rules: &PathRules, force: bool) -> Result<Restored> {
        self.check_paths(rules)?;
        let repo = rules.repo.as_path();
        let mut restored = Restored::default();
        for file in self.record.files.iter().rev() {
            let target = file.path.under(repo);
            let before = self.kept("before", file);
            let old = before.as_deref().map(read).transpose()?;
            let now = current(&target)?;
            if now == as_current(old) {
                continue;
            }
            let new = self.kept("after", file).map(|p| read(&p)).transpose()?;
            if !force && now != as_current(new) {
                restored.left.push(file.path.as_str().to_string());
                continue;
            }
            match &before {
                // Its directory may be gone since (removed by hand): made again.
                Some(source) => target
                    .parent()
                    .map_or(Ok(()), fs::create_dir_all)
                    .and_then(|()| place(source, &target)),
                None => fs::remove_file(&target).or_else(|err| match err.kind() {
                    ErrorKind::NotFound => Ok(()),
                    _ => Err(err),
                }),
            }
            .io_context(|| format!("putting back {}", target.display()))?;
            restored.files.push(file.path.as_str().to_string());
        }
        self.remove_leftovers(repo);
        for dir in self.record.made_dirs.iter().rev() {
            let _ = fs::remove_dir(repo.join(dir));
        }
        workspace::sync_file_system(repo)?;
        Ok(restored)
    }

    /// Removes the staged copies (`.NAME.ocflow-new-*`) an apply killed half-way left beside
    /// its targets, and the set-aside ones (`.NAME.ocflow-old-*`) of older versions of ocflow.
    pub fn remove_leftovers(&self, repo: &Path) {
        let mut parents: Vec<PathBuf> = self
            .record
            .files
            .iter()
            .filter_map(|f| f.path.under(repo).parent().map(Path::to_path_buf))
            .collect();
        parents.sort();
        parents.dedup();
        for parent in parents {
            let Ok(entries) = fs::read_dir(&parent) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let ours = self.record.files.iter().any(|file| {
                    let base = file.path.as_str().rsplit('/').next().unwrap_or_default();
                    [".ocflow-new-", ".ocflow-old-"]
                        .iter()
                        .any(|mark| name.starts_with(&format!(".{base}{mark}")))
                });
                if ours {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
    }
}

/// What stands at a path in the repository now.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Current {
    Missing,
    File(Vec<u8>),
    /// A directory, a symlink or anything else that is not a regular file.
    Other,
}

pub(crate) fn current(path: &Path) -> Result<Current> {
    match fs::symlink_metadata(path) {
        Err(err) if err.kind() == ErrorKind::NotFound => Ok(Current::Missing),
        Err(err) => Err(err).io_context(|| format!("reading {}", path.display())),
        Ok(meta) if meta.is_file() => Ok(Current::File(read(path)?)),
        Ok(_) => Ok(Current::Other),
    }
}

/// A file's wanted content as what would stand there: `None` is no file.
pub(crate) fn as_current(bytes: Option<Vec<u8>>) -> Current {
    bytes.map_or(Current::Missing, Current::File)
}

/// Puts a copy of `source` at `target` in one step: written beside it and flushed, then
/// renamed over it, so `target` is only ever its old version or the whole new one.
pub(crate) fn place(source: &Path, target: &Path) -> std::io::Result<()> {
    place_with(source, target, &mut || Ok(()))
}

/// `place`, with `before_rename` called once the copy is staged beside the target.
pub(crate) fn place_with(
    source: &Path,
    target: &Path,
    before_rename: &mut dyn FnMut() -> std::io::Result<()>,
) -> std::io::Result<()> {
    let temp = temporary_beside(target, "new")?;
    let written = fs::copy(source, &temp)
        .and_then(|_| fs::File::open(&temp)?.sync_all())
        .and_then(|()| before_rename())
        .and_then(|()| fs::rename(&temp, target));
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

/// A fresh name beside `target` for a staged or a set-aside file.
fn temporary_beside(target: &Path, purpose: &str) -> std::io::Result<PathBuf> {
    let dir = target.parent().unwrap_or(Path::new("."));
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    for _ in 0..100 {
        let candidate = dir.join(format!(
            ".{name}.ocflow-{purpose}-{:08x}",
            rand::random::<u32>()
        ));
        if fs::symlink_metadata(&candidate).is_err() {
            return Ok(candidate);
        }
    }
    Err(std::io::Error::other(format!(
        "no free temporary name beside {}",
        target.display()
    )))
}

/// The task's last apply in effect (stage `Applied`), if any.
pub fn last_apply(task: &TaskDir) -> Result<Option<Kept>> {
    last_at(task, &[Stage::Applied])
}

/// The task's last apply when a kill cut it (or its undo) short.
pub fn unfinished(task: &TaskDir) -> Result<Option<Kept>> {
    let Some(last) = last_at(task, &[])? else {
        return Ok(None);
    };
    Ok(matches!(
        last.record.stage,
        Stage::Writing | Stage::Committing | Stage::Undoing
    )
    .then_some(last))
}

/// The last record at one of `stages` (any stage when empty).
fn last_at(task: &TaskDir, stages: &[Stage]) -> Result<Option<Kept>> {
    let root = task.root.join(APPLIES_DIR);
    if !root.is_dir() {
        return Ok(None);
    }
    for number in numbers(&root)?.into_iter().rev() {
        let dir = root.join(number.to_string());
        let path = dir.join(RECORD_FILE);
        let text = match fs::read_to_string(&path) {
            // Killed before its record was written: no file of the repository was touched.
            Err(err) if err.kind() == ErrorKind::NotFound => continue,
            other => other.io_context(|| format!("reading {}", path.display()))?,
        };
        let mut record = parse_record(&path, &text)?;
        if record.undone_at.is_some() {
            record.stage = Stage::Undone;
        }
        if stages.is_empty() || stages.contains(&record.stage) {
            return Ok(Some(Kept { dir, record }));
        }
    }
    Ok(None)
}

/// Reads a kept `apply.json`, its version first: a journal of another version is refused,
/// never read as this one's, since recovery and `undo` write the repository on its word.
fn parse_record(path: &Path, text: &str) -> Result<ApplyRecord> {
    let bad = |problem: String| Error::BadStateFile {
        path: path.to_path_buf(),
        problem,
    };
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|err| bad(err.to_string()))?;
    match value.get("version").and_then(serde_json::Value::as_u64) {
        Some(version) if version == u64::from(APPLY_VERSION) => {}
        Some(version) if version > u64::from(APPLY_VERSION) => {
            return Err(bad(format!(
                "apply journal version {version} was written by a newer ocflow (this one reads \
                 version {APPLY_VERSION}): use that version of ocflow to recover or undo this \
                 apply"
            )));
        }
        Some(version) => {
            return Err(bad(format!(
                "apply journal version {version} is not one ocflow writes (this one reads \
                 version {APPLY_VERSION}); it was edited or damaged outside ocflow"
            )));
        }
        None => {
            return Err(bad(
                "no numeric `version` field; this is not an apply journal ocflow wrote".into(),
            ));
        }
    }
    serde_json::from_value(value).map_err(|err| bad(err.to_string()))
}

/// The numbers of the applies kept under `root`, in order.
fn numbers(root: &Path) -> Result<Vec<u32>> {
    let mut numbers: Vec<u32> = fs::read_dir(root)
        .io_context(|| format!("reading {}", root.display()))?
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .collect();
    numbers.sort_unstable();
    Ok(numbers)
}

pub(crate) fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).io_context(|| format!("reading {}", path.display()))
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
