//! Writing a flow's changes into the repository, all or nothing, even when killed. Every
//! target is checked before anything is touched (inside the repository, no symlink on the way,
//! no file where a directory must be, the content the flow read still there unless forced).
//! Then the apply journal (`apply_journal`) keeps every target's old and new version durably,
//! and only then is each new file written beside its target and renamed over it, or the target
//! removed. A failure, or a signal between two files, puts everything back from the journal;
//! a kill leaves the journal for the next command to roll back. Nothing but a staged copy ever
//! stands beside the user's files, and only while it is being written.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::flow::path_rules::PathRules;
use crate::task::apply_journal::{self, Current, Stage, as_current, current, place_with, read};
use crate::task::review::Change;
use crate::task::workspace::{self, TaskDir};
use ocflow_model::error::{Error, Result};

/// What `apply` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// These files were written or deleted.
    Written(Vec<String>),
    /// The repository already holds the flow's result.
    AlreadyThere,
    /// The flow changed nothing.
    Nothing,
}

/// Writes the changes into the repository, or nothing at all. `stop` is asked between two
/// files: when it says yes (a signal came), what was written is put back and the apply ends
/// interrupted.
pub fn apply(
    rules: &PathRules,
    task: &TaskDir,
    changes: &[Change],
    force: bool,
    stop: &dyn Fn() -> bool,
) -> Result<Applied> {
    apply_with(rules, task, changes, force, &mut |_| {
        if stop() {
            Err(std::io::Error::from(ErrorKind::Interrupted))
        } else {
            Ok(())
        }
    })
}

/// `apply`, with `before_each` called before every change to the repository (its number
/// counts from 0): the tests make it fail at each point in turn.
fn apply_with(
    rules: &PathRules,
    task: &TaskDir,
    changes: &[Change],
    force: bool,
    before_each: &mut dyn FnMut(usize) -> std::io::Result<()>,
) -> Result<Applied> {
    if changes.is_empty() {
        return Ok(Applied::Nothing);
    }
    let Some(plan) = check(rules, &task.task_id, changes, force)? else {
        return Ok(Applied::AlreadyThere);
    };
    let planned: Vec<&Change> = plan.iter().map(|(_, change)| *change).collect();
    let mut journal = apply_journal::begin(task, &rules.repo, &planned)?;
    let (failed, err) = match write(&rules.repo, &plan, force, before_each) {
        Ok(done) => {
            journal.set_stage(Stage::Applied)?;
            return Ok(Applied::Written(done));
        }
        Err(failure) => failure,
    };
    let task_id = &task.task_id;
    // Past the last file, it was the final flush that failed.
    let target = plan
        .get(failed)
        .map_or("(flushing the disk)".to_string(), |(_, c)| {
            c.path.as_str().to_string()
        });
    let drifted = err
        .get_ref()
        .is_some_and(|inner| inner.downcast_ref::<Edited>().is_some());
    let put_back = journal.restore(rules, false).and_then(|restored| {
        // The file edited meanwhile was never written: it stays as its editor left it.
        let kept_edit = drifted && restored.left == [target.clone()];
        if restored.left.is_empty() || kept_edit {
            journal.set_stage(Stage::RolledBack)
        } else {
            Err(Error::Usage(format!(
                "{} changed meanwhile and stay as they are",
                restored.left.join(", ")
            )))
        }
    });
    match put_back {
        Ok(()) if drifted => Err(Error::Drift {
            task_id: task_id.clone(),
            files: vec![target],
        }),
        Ok(()) if err.kind() == ErrorKind::Interrupted => Err(Error::ApplyInterrupted(format!(
            "the apply of task {task_id} was interrupted, so every change was undone and the \
             repository is as it was; apply it again with `ocflow apply {task_id}`"
        ))),
        Ok(()) => Err(Error::Io {
            context: format!(
                "applying task {task_id}: writing {target} failed, so every change was undone \
                 and the repository is as it was"
            ),
            source: err,
        }),
        Err(left) => Err(Error::Io {
            context: format!(
                "applying task {task_id}: writing {target} failed, and undoing the changes \
                 failed too ({left}); the next ocflow command on the task tries again"
            ),
            source: err,
        }),
    }
}

/// A target someone edited after the apply checked it, found just before it was replaced.
#[derive(Debug)]
struct Edited;

impl std::fmt::Display for Edited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the file changed after the apply checked it")
    }
}

impl std::error::Error for Edited {}

/// Whether `target` still holds what the flow read (`old`: the snapshot's file, `None`: it
/// did not exist): checked again just before each file is replaced, since the check of every
/// target comes before the journal is written and a person may edit one meanwhile.
fn still_as_read(target: &Path, old: Option<&Path>) -> std::io::Result<()> {
    let now = match fs::read(target) {
        Ok(bytes) => Some(bytes),
        Err(err) if err.kind() == ErrorKind::NotFound => None,
        Err(err) => return Err(err),
    };
    let read = old.map(fs::read).transpose()?;
    if now == read {
        Ok(())
    } else {
        Err(std::io::Error::other(Edited))
    }
}

/// Writes each planned change; on a failure, which one and why. Unless `force`, each target is
/// checked to hold what the flow read just before it is replaced.
fn write(
    repo: &Path,
    plan: &[(PathBuf, &Change)],
    force: bool,
    before_each: &mut dyn FnMut(usize) -> std::io::Result<()>,
) -> std::result::Result<Vec<String>, (usize, std::io::Error)> {
    let mut count = 0;
    let mut point = || {
        let outcome = before_each(count);
        count += 1;
        outcome
    };
    let mut done = Vec::new();
    for (index, (target, change)) in plan.iter().enumerate() {
        let unchanged = || match force {
            true => Ok(()),
            false => still_as_read(target, change.old.as_deref()),
        };
        let outcome =
            match &change.new {
                Some(source) => point()
                    .and_then(|()| match target.parent() {
                        Some(parent) => fs::create_dir_all(parent),
                        None => Ok(()),
                    })
                    .and_then(|()| point())
                    .and_then(|()| {
                        place_with(source, target, &mut || {
                            point()?;
                            unchanged()
                        })
                    }),
                None => point().and_then(|()| unchanged()).and_then(|()| {
                    match fs::remove_file(target) {
                        Err(err) if err.kind() == ErrorKind::NotFound => Ok(()),
                        other => other,
                    }
                }),
            };
        outcome.map_err(|err| (index, err))?;
        done.push(change.path.as_str().to_string());
    }
    // Every new name reaches the disk before the journal says the apply is done.
    workspace::sync_file_system(repo).map_err(|err| match err {
        Error::Io { source, .. } => (plan.len(), source),
        other => (plan.len(), std::io::Error::other(other.to_string())),
    })?;
    Ok(done)
}

/// Checks every change before any is made; `None` when the repository already holds them all.
/// Returns each change still to make with its target path.
pub fn check<'a>(
    rules: &PathRules,
    task_id: &str,
    changes: &'a [Change],
    force: bool,
) -> Result<Option<Vec<(PathBuf, &'a Change)>>> {
    let root = &rules.repo;
    let mut drifted = Vec::new();
    let mut blocked = Vec::new();
    let mut plan: Vec<(PathBuf, &Change)> = Vec::new();
    for change in changes {
        // Symlinks planted since the flow ran must not redirect a write out of the repository.
        if let Err(problem) = rules.check_contained(&change.path) {
            return Err(Error::Usage(format!("not applying anything: {problem}")));
        }
        let target = change.path.under(root);
        if change.new.is_some()
            && let Some(parent) = not_a_directory(&target, root)
        {
            blocked.push(format!(
                "{} (needs {} to be a directory)",
                change.path.as_str(),
                parent.strip_prefix(root).unwrap_or(&parent).display()
            ));
            continue;
        }
        let now = current(&target)?;
        let old = change.old.as_deref().map(read).transpose()?;
        let new = change.new.as_deref().map(read).transpose()?;
        if now == Current::Other {
            blocked.push(change.path.as_str().to_string());
        }
        // Already in place (an earlier `apply --only`, or by hand): nothing to do there.
        if now == as_current(new) {
            continue;
        }
        if now != as_current(old) {
            drifted.push(change.path.as_str().to_string());
        }
        plan.push((target, change));
    }
    if !blocked.is_empty() {
        return Err(Error::Usage(format!(
            "not applying anything: a directory, symlink or file now stands where the flow \
             needs something else: {}; move it away first",
            blocked.join(", ")
        )));
    }
    if plan.is_empty() {
        return Ok(None);
    }
    if !drifted.is_empty() && !force {
        return Err(Error::Drift {
            task_id: task_id.to_string(),
            files: drifted,
        });
    }
    // Deletions first, then writes.
    plan.sort_by_key(|(_, c)| c.new.is_some());
    Ok(Some(plan))
}

/// The first ancestor of `target` below `root` that exists and is not a real directory.
fn not_a_directory(target: &Path, root: &Path) -> Option<PathBuf> {
    let relative = target.strip_prefix(root).ok()?;
    let mut dir = root.to_path_buf();
    let parts: Vec<_> = relative.components().collect();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        dir.push(part);
        match fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Some(dir),
            Err(_) => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::review::ChangeKind;
    use ocflow_model::repo_path::RepoPath;
    use std::collections::BTreeMap;

    fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
        walkdir::WalkDir::new(dir)
            .into_iter()
            .flatten()
            .map(|e| {
                let name = e.path().strip_prefix(dir).unwrap().display().to_string();
                let bytes = if e.file_type().is_file() {
                    fs::read(e.path()).unwrap()
                } else {
                    b"<dir>".to_vec()
                };
                (name, bytes)
            })
            .collect()
    }

    fn change(flow: &Path, repo: &Path, path: &str, new: Option<&str>) -> Change {
        let old_file = repo.join(path);
        let old = old_file.is_file().then(|| {
            let copy = flow.join(format!("old-{}", path.replace('/', "_")));
            fs::copy(&old_file, &copy).unwrap();
            copy
        });
        let new = new.map(|text| {
            let file = flow.join(format!("new-{}", path.replace('/', "_")));
            fs::write(&file, text).unwrap();
            file
        });
        let kind = match (&old, &new) {
            (None, _) => ChangeKind::Added,
            (_, None) => ChangeKind::Deleted,
            _ => ChangeKind::Modified,
        };
        Change {
            path: RepoPath::parse(path).unwrap(),
            kind,
            new,
            old,
        }
    }

    /// A failure at any point of an apply leaves the repository exactly as it was; with no
    /// failure, every change is made.
    #[test]
    fn apply_is_all_or_nothing_under_a_failure_at_any_point() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("repo")).unwrap();
        let repo = dir.path().join("repo").canonicalize().unwrap();
        let flow = dir.path().join("flow");
        fs::create_dir(&flow).unwrap();
        fs::write(repo.join("a.txt"), "old a\n").unwrap();
        fs::write(repo.join("gone.txt"), "bye\n").unwrap();
        fs::create_dir(repo.join("src")).unwrap();
        fs::write(repo.join("src/m.py"), "old m\n").unwrap();
        let changes = vec![
            change(&flow, &repo, "a.txt", Some("new a\n")),
            change(&flow, &repo, "gone.txt", None),
            change(&flow, &repo, "src/m.py", Some("new m\n")),
            change(&flow, &repo, "new/deep/b.txt", Some("b\n")),
        ];
        let rules = PathRules::new(&repo, &dir.path().join("workspace"));
        let task = TaskDir::new(&dir.path().join("workspace"), "t");
        let before = tree(&repo);
        let mut failures = 0;
        for at in 0.. {
            let mut fault = |n: usize| {
                if n == at {
                    Err(std::io::Error::other("injected"))
                } else {
                    Ok(())
                }
            };
            match apply_with(&rules, &task, &changes, false, &mut fault) {
                Err(err) => {
                    failures += 1;
                    assert!(err.to_string().contains("repository is as it was"), "{err}");
                    assert_eq!(tree(&repo), before, "a failure at point {at} left changes");
                }
                Ok(applied) => {
                    assert_eq!(
                        applied,
                        Applied::Written(vec![
                            "gone.txt".into(),
                            "a.txt".into(),
                            "src/m.py".into(),
                            "new/deep/b.txt".into()
                        ])
                    );
                    break;
                }
            }
        }
        assert!(
            failures >= 8,
            "only {failures} points of failure were tried"
        );
        let after = tree(&repo);
        assert_eq!(after["a.txt"], b"new a\n");
        assert_eq!(after["src/m.py"], b"new m\n");
        assert_eq!(after["new/deep/b.txt"], b"b\n");
        assert!(!after.contains_key("gone.txt"));
        assert!(
            after.keys().all(|k| !k.contains(".ocflow-")),
            "no staged or set-aside file is left: {:?}",
            after.keys()
        );
    }

    /// Issue 38: an edit of a target in the first moments of an apply (after every target was
    /// checked, before it was replaced) was overwritten, and undo then brought the edit back
    /// as "old". Each target is checked again just before it is replaced: an edit at any point
    /// stops the apply, puts back what it wrote, and keeps the person's edit.
    #[test]
    fn an_edit_made_while_the_apply_runs_is_never_overwritten() {
        for at in 0..6 {
            let dir = tempfile::tempdir().unwrap();
            fs::create_dir(dir.path().join("repo")).unwrap();
            let repo = dir.path().join("repo").canonicalize().unwrap();
            let flow = dir.path().join("flow");
            fs::create_dir(&flow).unwrap();
            fs::write(repo.join("a.txt"), "old a\n").unwrap();
            fs::write(repo.join("b.txt"), "old b\n").unwrap();
            let changes = vec![
                change(&flow, &repo, "a.txt", Some("new a\n")),
                change(&flow, &repo, "b.txt", Some("new b\n")),
            ];
            let rules = PathRules::new(&repo, &dir.path().join("workspace"));
            let task = TaskDir::new(&dir.path().join("workspace"), "t");
            // The person edits b.txt at point `at` of the apply.
            let edited = repo.join("b.txt");
            let mut edit = |n: usize| {
                if n == at {
                    fs::write(&edited, "mine\n")?;
                }
                Ok(())
            };
            match apply_with(&rules, &task, &changes, false, &mut edit) {
                Err(Error::Drift { files, .. }) => {
                    assert_eq!(files, vec!["b.txt".to_string()], "at {at}");
                    assert_eq!(fs::read_to_string(repo.join("a.txt")).unwrap(), "old a\n");
                }
                Ok(_) => {
                    assert!(at >= 5, "an edit at point {at} was overwritten");
                    assert_eq!(fs::read_to_string(repo.join("a.txt")).unwrap(), "new a\n");
                }
                Err(other) => panic!("at {at}: {other}"),
            }
            // Whatever happened, the edit made before b.txt was replaced is there.
            let b = fs::read_to_string(&edited).unwrap();
            assert!(
                b == "mine\n" || (at >= 5 && b == "new b\n"),
                "at {at}: {b:?}"
            );
        }
    }
}
