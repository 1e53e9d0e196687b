//! Writing a flow's changes into the repository, all or nothing. Every target is checked before
//! anything is touched (inside the repository, no symlink on the way, no file where a directory
//! must be, the content the flow read still there unless forced). Then the new contents are
//! staged as temporary files beside their targets, and only then moved into place, each old
//! file first moved aside. Any failure undoes every move in reverse order, so the repository is
//! left exactly as it was; the old files are removed only once every change is in place.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::flow::path_rules::PathRules;
use crate::task::review::Change;

/// What `apply` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Applied {
    /// These files were written or deleted.
    Written(Vec<String>),
    /// The repository already holds the flow's result.
    AlreadyThere,
    /// The flow changed nothing.
    Nothing,
}

/// What stands at a path in the repository now.
#[derive(Debug, PartialEq, Eq)]
enum Current {
    Missing,
    File(Vec<u8>),
    /// A directory, a symlink or anything else that is not a regular file.
    Other,
}

fn current(path: &Path) -> Result<Current> {
    match fs::symlink_metadata(path) {
        Err(err) if err.kind() == ErrorKind::NotFound => Ok(Current::Missing),
        Err(err) => Err(err).io_context(|| format!("reading {}", path.display())),
        Ok(meta) if meta.is_file() => Ok(Current::File(read(path)?)),
        Ok(_) => Ok(Current::Other),
    }
}

fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).io_context(|| format!("reading {}", path.display()))
}

/// Writes the changes into the repository, or nothing at all.
pub(crate) fn apply(
    rules: &PathRules,
    task_id: &str,
    changes: &[Change],
    force: bool,
) -> Result<Applied> {
    apply_with(rules, task_id, changes, force, &mut |_| Ok(()))
}

/// `apply`, with `fault` called before every change to the file system (its number counts
/// from 0): the tests make it fail at each point in turn.
fn apply_with(
    rules: &PathRules,
    task_id: &str,
    changes: &[Change],
    force: bool,
    fault: &mut dyn FnMut(usize) -> std::io::Result<()>,
) -> Result<Applied> {
    if changes.is_empty() {
        return Ok(Applied::Nothing);
    }
    let Some(plan) = check(rules, task_id, changes, force)? else {
        return Ok(Applied::AlreadyThere);
    };
    let mut undo = Undo::default();
    let mut count = 0;
    let mut step = |undo: &mut Undo, action: &mut dyn FnMut(&mut Undo) -> std::io::Result<()>| {
        fault(count)?;
        count += 1;
        action(undo)
    };
    let mut done = Vec::new();
    let outcome = (|| -> std::io::Result<()> {
        for (target, change) in &plan {
            match &change.new {
                Some(source) => {
                    let bytes = fs::read(source)?;
                    let mode = fs::metadata(source)?.permissions();
                    step(&mut undo, &mut |undo| {
                        undo.make_parents(target, &rules.repo)
                    })?;
                    let temp = temporary_beside(target, "new")?;
                    step(&mut undo, &mut |undo| {
                        undo.created.push(temp.clone());
                        fs::write(&temp, &bytes)?;
                        fs::set_permissions(&temp, mode.clone())?;
                        fs::File::open(&temp)?.sync_all()
                    })?;
                    if fs::symlink_metadata(target).is_ok() {
                        step(&mut undo, &mut |undo| undo.move_aside(target))?;
                    }
                    step(&mut undo, &mut |undo| undo.put(&temp, target))?;
                }
                None => {
                    if fs::symlink_metadata(target).is_ok() {
                        step(&mut undo, &mut |undo| undo.move_aside(target))?;
                    }
                }
            }
            done.push(change.path.as_str().to_string());
        }
        Ok(())
    })();
    match outcome {
        Ok(()) => {
            undo.commit();
            Ok(Applied::Written(done))
        }
        Err(err) => {
            let failed = done.len();
            let target = plan
                .get(failed)
                .map_or(String::new(), |(_, c)| c.path.as_str().to_string());
            match undo.roll_back() {
                Ok(()) => Err(Error::Io {
                    context: format!(
                        "applying task {task_id}: writing {target} failed, so every change \
                         was undone and the repository is as it was"
                    ),
                    source: err,
                }),
                Err(left) => Err(Error::Io {
                    context: format!(
                        "applying task {task_id}: writing {target} failed, and undoing the \
                         changes failed too: {left}"
                    ),
                    source: err,
                }),
            }
        }
    }
}

/// Checks every change before any is made; `None` when the repository already holds them all.
/// Returns each change still to make with its target path.
fn check<'a>(
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
        let as_file = |bytes: Option<Vec<u8>>| bytes.map_or(Current::Missing, Current::File);
        if now == Current::Other {
            blocked.push(change.path.as_str().to_string());
        }
        // Already in place (an earlier `apply --only`, or by hand): nothing to do there.
        if now == as_file(new) {
            continue;
        }
        if now != as_file(old) {
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

/// What was done so far, to be undone in reverse order on failure.
#[derive(Debug, Default)]
struct Undo {
    /// Directories made for new files (outermost first).
    made_dirs: Vec<PathBuf>,
    /// Staged files not yet moved into place.
    created: Vec<PathBuf>,
    /// Old files moved aside: (where it was, where it is).
    set_aside: Vec<(PathBuf, PathBuf)>,
    /// New files moved into place.
    placed: Vec<PathBuf>,
}

impl Undo {
    fn make_parents(&mut self, target: &Path, root: &Path) -> std::io::Result<()> {
        let mut missing = Vec::new();
        let mut dir = target.parent();
        while let Some(d) = dir {
            if d == root || fs::symlink_metadata(d).is_ok() {
                break;
            }
            missing.push(d.to_path_buf());
            dir = d.parent();
        }
        for d in missing.into_iter().rev() {
            fs::create_dir(&d)?;
            self.made_dirs.push(d);
        }
        Ok(())
    }

    fn move_aside(&mut self, target: &Path) -> std::io::Result<()> {
        let aside = temporary_beside(target, "old")?;
        fs::rename(target, &aside)?;
        self.set_aside.push((target.to_path_buf(), aside));
        Ok(())
    }

    fn put(&mut self, temp: &Path, target: &Path) -> std::io::Result<()> {
        fs::rename(temp, target)?;
        self.created.retain(|c| c != temp);
        self.placed.push(target.to_path_buf());
        Ok(())
    }

    /// Every change in place: the set-aside old files go.
    fn commit(self) {
        for (_, aside) in self.set_aside {
            if let Err(err) = fs::remove_file(&aside) {
                crate::output::say(&format!(
                    "ocflow: warning: could not remove {} (the old file): {err}",
                    aside.display()
                ));
            }
        }
        if let Some(dir) = self.placed.first().and_then(|p| p.parent()) {
            let _ = crate::task::workspace::sync_dir(dir);
        }
    }

    /// Puts everything back as it was; says what could not be.
    fn roll_back(self) -> std::result::Result<(), String> {
        let mut left = Vec::new();
        for placed in self.placed.iter().rev() {
            if let Err(err) = fs::remove_file(placed) {
                left.push(format!("{} stays ({err})", placed.display()));
            }
        }
        for temp in &self.created {
            let _ = fs::remove_file(temp);
        }
        for (original, aside) in self.set_aside.iter().rev() {
            if let Err(err) = fs::rename(aside, original) {
                left.push(format!(
                    "the old {} is kept as {} ({err})",
                    original.display(),
                    aside.display()
                ));
            }
        }
        for dir in self.made_dirs.iter().rev() {
            let _ = fs::remove_dir(dir);
        }
        if left.is_empty() {
            Ok(())
        } else {
            Err(left.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::repo_path::RepoPath;
    use crate::task::review::ChangeKind;
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
            match apply_with(&rules, "t", &changes, false, &mut fault) {
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
}
