//! The workspace on disk: where tasks live, the layout of a task directory, task ids, the
//! per-task lock, and atomic writes of state files (temp file, fsync, rename, fsync the
//! directory).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use ocflow_model::error::{Error, IoContext, Result};

/// Names inside a task directory. Step directories use the step id, which can never start with
/// `_` or contain `.`, so these cannot collide with a step.
pub const FLOW_FILE: &str = "flow.json";
/// The operations the flow was validated against, plugins included, as declarations: what
/// `diff`, `apply`, `report` and `resume` know them by without loading the plugins.
pub const OPERATIONS_FILE: &str = "operations.json";
pub const STATUS_FILE: &str = "flow_status.json";
pub const JOURNAL_FILE: &str = "journal.jsonl";
pub const SUMMARY_FILE: &str = "summary.md";
/// The page `ocflow report` writes.
pub const REPORT_FILE: &str = "report.html";
/// The flow's changes as a unified diff, written when it ends.
pub const DIFF_FILE: &str = "changes.diff";
/// The config file inside a workspace.
pub const WORKSPACE_CONFIG: &str = "ocflow.toml";
pub(crate) const FINAL_OUTPUT_DIR: &str = "final_output";
pub(crate) const SNAPSHOT_DIR: &str = "_snapshot";
pub(crate) const VIEW_DIR: &str = "_view";
/// The directory of a view made of layers (`task::layered_view`).
pub(crate) const LAYERS_DIR: &str = "_layers";
const LOCK_FILE: &str = ".lock";
/// How many more times `lock` tries a taken lock, 20 ms apart.
const LOCK_TRIES: u32 = 5;

/// The name of view number `index`.
pub(crate) fn view_dir_name(index: usize) -> String {
    if index == 0 {
        VIEW_DIR.to_string()
    } else {
        format!("{VIEW_DIR}-{}", index + 1)
    }
}

/// The name of the view made of layers number `index`.
pub(crate) fn layers_dir_name(index: usize) -> String {
    if index == 0 {
        LAYERS_DIR.to_string()
    } else {
        format!("{LAYERS_DIR}-{}", index + 1)
    }
}

/// Files inside a step directory.
pub(crate) const INSTRUCTIONS_FILE: &str = "open_codex_instructions.md";
pub(crate) const RESULT_FILE: &str = "result.json";
pub(crate) const STEP_LOG_FILE: &str = "step.log";
pub(crate) const TRACEBACK_FILE: &str = "traceback.txt";
pub(crate) const INPUT_DIR: &str = "input";
pub(crate) const OUTPUT_DIR: &str = "output";

/// One task's directory, `<workspace>/<task_id>/`.
#[derive(Debug, Clone)]
pub struct TaskDir {
    pub task_id: String,
    pub root: PathBuf,
}

impl TaskDir {
    pub fn new(workspace: &Path, task_id: &str) -> TaskDir {
        TaskDir {
            task_id: task_id.to_string(),
            root: workspace.join(task_id),
        }
    }

    /// Opens an existing task directory given as a path.
    pub fn at(root: PathBuf) -> Option<TaskDir> {
        let task_id = root.file_name()?.to_str()?.to_string();
        Some(TaskDir { task_id, root })
    }

    /// The workspace holding this task.
    pub fn workspace(&self) -> PathBuf {
        self.root
            .parent()
            .map_or_else(|| self.root.clone(), Path::to_path_buf)
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    pub(crate) fn step_dir(&self, step_id: &str) -> PathBuf {
        self.root.join(step_id)
    }

    pub fn snapshot(&self) -> PathBuf {
        self.root.join(SNAPSHOT_DIR)
    }

    /// The directory of view number `index` (0, 1, …): `_view`, `_view-2`, …
    pub(crate) fn view(&self, index: usize) -> PathBuf {
        self.root.join(view_dir_name(index))
    }

    /// The directory of the view made of layers number `index`: `_layers`, `_layers-2`, …
    pub(crate) fn layers(&self, index: usize) -> PathBuf {
        self.root.join(layers_dir_name(index))
    }

    pub fn final_output(&self) -> PathBuf {
        self.root.join(FINAL_OUTPUT_DIR)
    }

    /// Creates the directory for a new task; fails if it already exists, so two runs cannot
    /// both start the same task.
    pub fn create(&self) -> Result<()> {
        if let Some(workspace) = self.root.parent() {
            create_workspace(workspace)?;
        }
        match fs::create_dir(&self.root) {
            Ok(()) => Ok(()),
            // A directory holding neither flow nor status was left by a run killed right after
            // creating it: it is taken over (the lock still lets only one run proceed).
            Err(err)
                if err.kind() == std::io::ErrorKind::AlreadyExists
                    && !self.file(FLOW_FILE).exists()
                    && !self.file(STATUS_FILE).exists() =>
            {
                Ok(())
            }
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(self.already_exists())
            }
            Err(err) => Err(err).io_context(|| format!("creating {}", self.root.display())),
        }
    }

    /// Opens the task for a run: made (unless `again`: it exists, planned again) and locked for
    /// as long as the guard lives. A task directory that would hold `repo` is refused, and of
    /// two runs taking over the same empty directory, the one that got the lock second finds
    /// the first one's task, and stops.
    pub fn open_for_run(&self, repo: &Path, again: bool) -> Result<TaskLock> {
        if repo.starts_with(crate::flow::path_rules::canonical_or_absolute(&self.root)) {
            return Err(Error::Usage(format!(
                "--task-id {}: the task directory {} would hold the repository; choose \
                 another id",
                self.task_id,
                self.root.display()
            )));
        }
        if !again {
            self.create()?;
        }
        let lock = self.lock()?;
        if !again && self.has_started() {
            return Err(self.already_exists());
        }
        Ok(lock)
    }

    /// The error for a new task whose id another run took.
    pub fn already_exists(&self) -> Error {
        Error::Usage(format!(
            "task {} already exists in {}; continue it with `ocflow resume {}` or choose another \
             --task-id",
            self.task_id,
            self.root.display(),
            self.task_id
        ))
    }

    /// Whether a run has saved the task's flow or status (it is no empty leftover).
    pub fn has_started(&self) -> bool {
        self.file(FLOW_FILE).exists() || self.file(STATUS_FILE).exists()
    }

    /// Takes the task's lock for as long as the returned guard lives. The lock is an OS file
    /// lock, so it disappears with the process even after a `kill -9`.
    ///
    /// A lock found taken is tried again for a moment: `owner_alive` (`status`, `list`) holds
    /// it shared for a few microseconds, which must not turn a `run` or `resume` away.
    pub fn lock(&self) -> Result<TaskLock> {
        let path = self.file(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .io_context(|| format!("opening the lock file {}", path.display()))?;
        let mut tries = 0;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(TaskLock { _file: file }),
                Err(fs::TryLockError::WouldBlock) if tries < LOCK_TRIES => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(fs::TryLockError::WouldBlock) => {
                    return Err(Error::Locked {
                        task_id: self.task_id.clone(),
                        lock: path,
                    });
                }
                Err(fs::TryLockError::Error(err)) => {
                    return Err(err).io_context(|| format!("locking {}", path.display()));
                }
            }
        }
    }

    /// Whether a live ocflow holds the task's lock. A flow saved as `running` whose lock
    /// nobody holds lost its ocflow (`kill -9`, a crash, the machine stopped): the kernel
    /// dropped the lock with the process. Asked with a shared lock taken and dropped at once,
    /// so looking never blocks a `run` (see `lock`) and never writes the task.
    pub fn owner_alive(&self) -> bool {
        let Ok(file) = File::open(self.file(LOCK_FILE)) else {
            return false;
        };
        matches!(file.try_lock_shared(), Err(fs::TryLockError::WouldBlock))
    }
}

/// Below this many bytes free, the file system holding the workspace counts as full: a
/// command filled it, or nothing ocflow must save (a result, the status) would fit.
const NEARLY_FULL_BYTES: u64 = 1 << 20;

/// What `status` and step errors say when the workspace's disk is full.
pub(crate) const NO_SPACE: &str = "no space left on the workspace's disk";

/// Whether the file system holding `dir` is (next to) full: under `NEARLY_FULL_BYTES` free
/// to an unprivileged writer, or no inode left (100,000 small files fill a small file system
/// that way long before its bytes).
pub(crate) fn disk_full(dir: &Path) -> bool {
    rustix::fs::statvfs(dir).is_ok_and(|stat| {
        stat.f_bavail.saturating_mul(stat.f_frsize) < NEARLY_FULL_BYTES
            || (stat.f_files > 0 && stat.f_favail == 0)
    })
}

/// What a new workspace starts with: `workspace-template/`, built into the binary.
const WORKSPACE_TEMPLATE: &[(&str, &str)] = &[(
    WORKSPACE_CONFIG,
    include_str!("../../../../workspace-template/ocflow.toml"),
)];

/// Creates the workspace directory if needed; a new one gets the template's files.
pub(crate) fn create_workspace(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir).io_context(|| format!("creating the workspace {}", dir.display()))?;
    for (name, content) in WORKSPACE_TEMPLATE {
        write_atomic(&dir.join(name), content.as_bytes())?;
    }
    Ok(())
}

/// Takes back what `create_workspace` made in `dir` for a run that could not start: its files,
/// then the directory if nothing else came into it meanwhile.
pub fn remove_new_workspace(dir: &Path) {
    for (name, _) in WORKSPACE_TEMPLATE {
        let _ = fs::remove_file(dir.join(name));
    }
    let _ = fs::remove_dir(dir);
}

/// Holds a task's lock; dropping it releases the lock.
#[derive(Debug)]
pub struct TaskLock {
    _file: File,
}

/// Writes `bytes` to `path` so that readers see either the old file or the new one, never a
/// mix, even across a crash or power loss: `write_replacing`, then the directory flushed, so
/// the new name is durable too.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_replacing(path, bytes)?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Writes `bytes` to `path` so that readers see either the old file or the new one, never a
/// mix: temp file, its data flushed, rename. The directory is not flushed: after a power loss
/// the file may be missing (the damaged-workspace checks then run its step again), never there
/// with other bytes.
pub(crate) fn write_replacing(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let context = || format!("writing {}", path.display());
    let mut temp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .io_context(context)?;
    temp.write_all(bytes).io_context(context)?;
    temp.as_file().sync_data().io_context(context)?;
    temp.persist(path)
        .map_err(|err| err.error)
        .io_context(context)?;
    Ok(())
}

/// Flushes the data of `relative` files under `root` (a step's outputs) before anything that
/// says the step succeeded is written: after a power loss an output is whole or missing.
pub(crate) fn sync_data(root: &Path, relative: &[String]) -> Result<()> {
    for file in relative {
        crate::task::interrupt::check()?;
        let path = root.join(file);
        File::open(&path)
            .and_then(|f| f.sync_data())
            .io_context(|| format!("syncing {}", path.display()))?;
    }
    Ok(())
}

/// Serialises `value` as pretty JSON and writes it atomically.
pub(crate) fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|err| Error::Io {
        context: format!("serialising {}", path.display()),
        source: err.into(),
    })?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// Makes a rename or creation inside `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .io_context(|| format!("syncing the directory {}", dir.display()))
}

/// Flushes the whole file system holding `dir` (one call instead of one fsync per file, for
/// the snapshot's thousands of files).
pub(crate) fn sync_file_system(dir: &Path) -> Result<()> {
    let handle = File::open(dir).io_context(|| format!("opening {}", dir.display()))?;
    rustix::fs::syncfs(&handle)
        .map_err(std::io::Error::from)
        .io_context(|| format!("syncing the file system of {}", dir.display()))
}

/// A new task id, short enough to type and to remember: the task's first word and three
/// random letters or digits, `refactor-k7m` (`flow-…` for a task without words). Any unique
/// prefix of it names the task too. The task's words stay in the status as its title.
/// Words that name nothing of a task: articles, politeness, pronouns.
const FILLER_WORDS: &[&str] = &[
    "a", "an", "the", "this", "that", "these", "those", "please", "can", "could", "would", "you",
    "we", "i", "it", "my", "our", "let", "lets", "s", "now", "then", "also", "just", "so", "and",
    "to", "of", "in", "on", "for",
];

pub fn new_task_id(task: &str) -> String {
    // The first meaningful word: "The modern parser…" is `modern-…`, not `the-…`.
    let words = || {
        task.split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
    };
    let word: String = words()
        .find(|w| !FILLER_WORDS.contains(&w.to_ascii_lowercase().as_str()))
        .or_else(|| words().next())
        .unwrap_or("flow")
        .to_ascii_lowercase()
        .chars()
        .take(12)
        .collect();
    // No 0/o, 1/l: ids are read aloud and copied by hand.
    const ALPHABET: &[u8] = b"23456789abcdefghijkmnpqrstuvwxyz";
    let suffix: String = (0..3)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{word}-{suffix}")
}

/// Whether a user-given task id is safe as a directory name.
pub fn is_valid_task_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_are_short_readable_and_safe() {
        let id = new_task_id("Refactor calculate_metrics in utils.py!");
        assert!(
            id.starts_with("refactor-") && id.len() == "refactor-".len() + 3,
            "{id}"
        );
        assert!(is_valid_task_id(&id));
        assert!(new_task_id("¿?").starts_with("flow-"));
        assert!(new_task_id("The modern parser drops tabs").starts_with("modern-"));
        assert!(new_task_id("Please add a README").starts_with("add-"));
        assert!(new_task_id("The").starts_with("the-"));
        assert!(new_task_id("Internationalisation of everything").len() <= 16);
        assert!(!is_valid_task_id("../x"));
        assert!(!is_valid_task_id(".hidden"));
    }

    #[test]
    fn atomic_write_replaces_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, b"old").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left behind"
        );
    }
}
