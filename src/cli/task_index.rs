//! The user's index of recent tasks: task id → task directory and repository, kept in the
//! user's state directory (`user_state`: `$XDG_STATE_HOME/ocflow/tasks.json`), so a task id or
//! a task directory names its task from any directory, and `ocflow list --all` shows every
//! repository's tasks. It holds paths and ids only (never a key, never a task's words), is
//! bounded, and is rewritten whole under a lock (read, merge, atomic rename), so ocflow
//! processes writing at once lose no entry. `OCFLOW_TASK_INDEX=off` turns it off.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cli::args::GlobalArgs;
use ocflow_core::task::state;
use ocflow_core::task::workspace::{self, TaskDir};
use ocflow_model::error::{Error, Result};
use ocflow_model::status::{FlowStatus, now};

/// The index's file name in `<state dir>/ocflow/`.
const FILE: &str = "tasks.json";
/// Held exclusively while the index is read, merged and replaced.
const LOCK: &str = "tasks.lock";
/// The variable that turns the index off (`off`, `0`, `false`, `no`).
pub(crate) const DISABLE_VARIABLE: &str = "OCFLOW_TASK_INDEX";
/// The most entries kept: the newest; an agent's session makes a few dozen tasks at most.
const MAX_ENTRIES: usize = 200;
const VERSION: u32 = 1;

/// One task the index knows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// The task's id (its directory's name).
    pub(crate) task_id: String,
    /// The task directory, absolute.
    pub(crate) task_dir: PathBuf,
    /// The repository the task works on, absolute.
    pub(crate) repo: PathBuf,
    /// When the task was recorded (RFC 3339).
    pub(crate) recorded_at: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    version: u32,
    /// Newest first.
    tasks: Vec<Entry>,
}

/// The index file, or `None` when it is turned off or there is no state directory.
pub(crate) fn file() -> Option<PathBuf> {
    let variable = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if variable(DISABLE_VARIABLE).is_some_and(|v| {
        matches!(
            v.to_ascii_lowercase().as_str(),
            "off" | "0" | "false" | "no"
        )
    }) {
        return None;
    }
    Some(crate::cli::user_state::dir()?.join(FILE))
}

/// Records `task` (working on `repo`) as the newest entry. The index is a convenience: a
/// failure to write it is said on stderr and the command goes on.
pub(crate) fn remember(task: &TaskDir, repo: &Path) {
    let Some(file) = file() else {
        return;
    };
    let task_dir = workspace_path(&task.root);
    let entry = Entry {
        task_id: task.task_id.clone(),
        task_dir: task_dir.clone(),
        repo: repo.to_path_buf(),
        recorded_at: now(),
    };
    let written = update(&file, |tasks| {
        tasks.retain(|e| e.task_dir != task_dir);
        tasks.insert(0, entry);
    });
    if let Err(err) = written {
        ocflow_model::output::say(&format!(
            "ocflow: warning: could not record the task in {}: {err}",
            file.display()
        ));
    }
}

/// Every entry whose task directory still exists, newest first; entries of deleted
/// directories are dropped from the file as well.
pub(crate) fn entries() -> Vec<Entry> {
    let Some(file) = file() else {
        return Vec::new();
    };
    let stored = read(&file);
    // Stale: the directory is gone. (One without a status yet may be a detached run starting.)
    if stored.tasks.iter().all(|e| e.task_dir.is_dir()) {
        return stored.tasks;
    }
    let mut live = Vec::new();
    let pruned = update(&file, |tasks| {
        tasks.retain(|e| e.task_dir.is_dir());
        live = tasks.clone();
    });
    match pruned {
        Ok(()) => live,
        // Not writable: still answer without the stale entries.
        Err(_) => stored
            .tasks
            .into_iter()
            .filter(|e| e.task_dir.is_dir())
            .collect(),
    }
}

/// Points `global` at the task `arg` names when no `--repo` or `--workspace` does, so the
/// command finds it from any directory: a task directory given as a path names its own
/// workspace and repository; a task id found in the current repository's workspace is left to
/// it (it wins); otherwise the index's entry for the id (or a unique beginning of one).
/// An id several repositories hold is refused, naming them.
pub(crate) fn locate(global: &mut GlobalArgs, arg: Option<&str>) -> Result<()> {
    let Some(arg) = arg else {
        return Ok(());
    };
    if global.repo.is_some() || global.workspace.is_some() {
        return Ok(());
    }
    let as_path = PathBuf::from(arg);
    if is_task(&as_path) {
        let root = workspace_path(&as_path);
        if let Some(task) = TaskDir::at(root.clone()) {
            global.workspace = Some(task.workspace());
            global.repo = state::load_status(&task)
                .ok()
                .map(|status| status.repo)
                .filter(|repo| repo.is_dir());
        }
        return Ok(());
    }
    if !workspace::is_valid_task_id(arg) || in_current_repository(arg) {
        return Ok(());
    }
    let all = entries();
    let exact: Vec<&Entry> = all.iter().filter(|e| e.task_id == arg).collect();
    let found = if exact.is_empty() {
        all.iter().filter(|e| e.task_id.starts_with(arg)).collect()
    } else {
        exact
    };
    match found.as_slice() {
        [] => Ok(()),
        [entry] => {
            global.workspace = entry.task_dir.parent().map(Path::to_path_buf);
            global.repo = Some(entry.repo.clone()).filter(|repo| repo.is_dir());
            Ok(())
        }
        several => Err(Error::Usage(format!(
            "{arg:?} names several tasks: {}; name one with --repo DIR (or give its task \
             directory)",
            several
                .iter()
                .map(|e| format!(
                    "{} in {} ({})",
                    e.task_id,
                    e.repo.display(),
                    e.task_dir.display()
                ))
                .collect::<Vec<_>>()
                .join("; ")
        ))),
    }
}

/// What a command line needs, besides `ocflow SUBCOMMAND ID`, to reach `task` from any
/// directory: nothing while the index is on; `--repo` (and `--workspace` when it is not the
/// repository's own) when it is off.
pub(crate) fn reach(task: &TaskDir, repo: &Path) -> String {
    if file().is_some() {
        return String::new();
    }
    let mut text = format!(" --repo {}", shell_word(repo));
    let workspace = task.workspace();
    if workspace != repo.join(".ocflow") {
        text.push_str(&format!(" --workspace {}", shell_word(&workspace)));
    }
    text
}

/// `ocflow list --all`: every indexed task of every repository, newest first (with `--json`,
/// one line per task).
pub(crate) fn list_all(json: bool) -> Result<ocflow_model::exit::ExitCode> {
    let tasks: Vec<(Entry, Option<FlowStatus>)> = entries()
        .into_iter()
        .map(|entry| {
            let status = TaskDir::at(entry.task_dir.clone()).and_then(|task| {
                state::load_status(&task)
                    .ok()
                    .map(|status| crate::cli::tasks::as_shown(&task, status).0)
            });
            (entry, status)
        })
        .collect();
    let mut out = String::new();
    for (entry, status) in &tasks {
        if json {
            let line = serde_json::json!({"version": 1, "type": "task",
                "task_id": entry.task_id, "task_dir": entry.task_dir, "repo": entry.repo,
                "state": status.as_ref().map(|s| s.state),
                "task": status.as_ref().map(|s| s.task.clone()),
                "updated_at": status.as_ref().map_or(entry.recorded_at.clone(),
                    |s| s.updated_at.clone())});
            out.push_str(&format!("{line}\n"));
        } else {
            let state = status.as_ref().map_or("unknown".to_string(), |s| {
                serde_json::to_value(s.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            });
            out.push_str(&format!(
                "{:<24} {:<12} {}\n",
                entry.task_id,
                state,
                entry.repo.display()
            ));
        }
    }
    if tasks.is_empty() && !json {
        ocflow_model::output::say(&match file() {
            Some(file) => format!("ocflow: no recent tasks in {}", file.display()),
            None => format!("ocflow: the task index is off ({DISABLE_VARIABLE})"),
        });
    }
    ocflow_model::output::print_stdout(&out);
    Ok(ocflow_model::exit::ExitCode::Success)
}

/// Whether `dir` is a task directory (it holds a status or a flow).
fn is_task(dir: &Path) -> bool {
    dir.join(workspace::STATUS_FILE).is_file() || dir.join(workspace::FLOW_FILE).is_file()
}

/// Whether the git repository holding the current directory has a task `id` (or one beginning
/// with it) in its default workspace.
fn in_current_repository(id: &str) -> bool {
    let Ok(cwd) = std::env::current_dir() else {
        return false;
    };
    let Some(repo) = cwd.ancestors().find(|dir| dir.join(".git").exists()) else {
        return false;
    };
    let workspace = repo.join(".ocflow");
    if is_task(&workspace.join(id)) {
        return true;
    }
    fs::read_dir(&workspace).is_ok_and(|entries| {
        entries.flatten().any(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(id))
                && is_task(&entry.path())
        })
    })
}

/// `path`, absolute and without symlinks where it exists.
fn workspace_path(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|cwd| cwd.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    })
}

/// `path` as one shell word: quoted when it holds anything a shell would split or expand.
fn shell_word(path: &Path) -> String {
    let text = path.display().to_string();
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+=,:@%".contains(c))
    {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// The index's content; an unreadable, damaged or newer file is as good as none.
fn read(file: &Path) -> Stored {
    fs::read(file)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Stored>(&bytes).ok())
        .filter(|stored| stored.version == VERSION)
        .unwrap_or_default()
}

/// Reads the index, lets `change` edit its entries and replaces the file, all under the
/// index's lock: two processes recording at once both keep their entry.
fn update(file: &Path, change: impl FnOnce(&mut Vec<Entry>)) -> std::io::Result<()> {
    let dir = file.parent().unwrap_or(Path::new("."));
    {
        use std::os::unix::fs::DirBuilderExt;
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let lock: File = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK))?;
    // Released when `lock` is dropped (or the process dies).
    lock.lock()?;
    let mut stored = read(file);
    stored.version = VERSION;
    change(&mut stored.tasks);
    stored.tasks.truncate(MAX_ENTRIES);
    let mut text = serde_json::to_string_pretty(&stored).map_err(std::io::Error::other)?;
    text.push('\n');
    let mut temp = tempfile::Builder::new()
        .prefix(".tmp-tasks-")
        .tempfile_in(dir)?;
    temp.write_all(text.as_bytes())?;
    temp.as_file().sync_data()?;
    temp.persist(file).map_err(|err| err.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, dir: &Path) -> Entry {
        Entry {
            task_id: id.into(),
            task_dir: dir.join(id),
            repo: dir.to_path_buf(),
            recorded_at: now(),
        }
    }

    #[test]
    fn concurrent_updates_keep_every_entry_and_the_index_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ocflow").join(FILE);
        let threads: Vec<_> = (0..8)
            .map(|n| {
                let file = file.clone();
                let root = dir.path().to_path_buf();
                std::thread::spawn(move || {
                    for i in 0..10 {
                        let e = entry(&format!("t{n}-{i}"), &root);
                        update(&file, |tasks| tasks.insert(0, e)).unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(read(&file).tasks.len(), 80);
        for i in 0..MAX_ENTRIES {
            let e = entry(&format!("more-{i}"), dir.path());
            update(&file, |tasks| tasks.insert(0, e)).unwrap();
        }
        let kept = read(&file).tasks;
        assert_eq!(kept.len(), MAX_ENTRIES);
        assert_eq!(kept[0].task_id, format!("more-{}", MAX_ENTRIES - 1));
    }

    #[test]
    fn a_path_with_spaces_is_quoted_for_the_shell() {
        assert_eq!(shell_word(Path::new("/a/b-c")), "/a/b-c");
        assert_eq!(shell_word(Path::new("/a b/it's")), r"'/a b/it'\''s'");
    }
}
