//! The copied view: the full directory a command step runs in when overlays are not available,
//! a copy of the snapshot kept equal to the step's overlay by applying only what changed. What
//! a command changes there is found from the paths the view's watch saw touched
//! (`task::view_watch`), or, when the watch cannot say, by one stat walk against the view's
//! manifest, and captured as the step's outputs.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use walkdir::WalkDir;

use crate::task::capture::{self, Captured};
use crate::task::file_tree::{self, Stamp};
use crate::task::interrupt;
use crate::task::overlay::{Overlay, Version};
use crate::task::view_watch::{Touched, ViewWatch};
use crate::task::workspace::TaskDir;
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::repo_path::RepoPath;

/// Files whose timestamps are this close to the moment the view was last recorded are compared
/// by content: the file-system clock is coarse, so a write right after the record could keep
/// the same timestamps.
const RACY_WINDOW_NS: i128 = 20_000_000;

/// The full view of the repository that command steps run in: a directory kept equal to the
/// snapshot plus the versions in `applied`.
pub(crate) struct CopiedView {
    root: PathBuf,
    manifest: HashMap<RepoPath, Stamp>,
    /// What a capture reported as never leaving the view (a symlink a command made, a special
    /// file), with its stamp then: reported again only once it changes, as a view made of
    /// layers reports it only when a command writes it.
    ignored: HashMap<RepoPath, Stamp>,
    applied: Overlay,
    recorded_at_ns: i128,
    /// The paths commands touched since the view was last synced; `None` where inotify is not
    /// available (the view is walked).
    watch: Option<ViewWatch>,
    /// Files with more than one name in the view: writing through one name changes the
    /// others without an event naming them, so they are looked at by every capture.
    linked: BTreeSet<RepoPath>,
    /// How many captures walked the whole view (the watch could not say what changed).
    walks: u64,
}

impl CopiedView {
    /// Builds a fresh view from the snapshot, replacing any left by an earlier process.
    pub(crate) fn create(task: &TaskDir, root: PathBuf) -> Result<CopiedView> {
        file_tree::remove_tree(&root)?;
        file_tree::copy_tree(&task.snapshot(), &root, &[])?;
        CopiedView::recorded(root)
    }

    /// The view in `root`, which shows the snapshot: what it holds now is its manifest.
    fn recorded(root: PathBuf) -> Result<CopiedView> {
        let mut view = CopiedView {
            root,
            manifest: HashMap::new(),
            ignored: HashMap::new(),
            applied: Overlay::default(),
            recorded_at_ns: 0,
            watch: None,
            linked: BTreeSet::new(),
            walks: 0,
        };
        view.manifest = view.walk()?.into_iter().collect();
        view.note_links();
        view.recorded_at_ns = now_ns();
        view.watch = ViewWatch::start(&view.root);
        Ok(view)
    }

    /// Opens the task's view: an existing one (left by an earlier process, perhaps killed in the
    /// middle of a command) is set back to the snapshot, file by file, keeping the excluded
    /// directories — build caches, virtual environments — as an uninterrupted run keeps them.
    pub(crate) fn open(task: &TaskDir, root: PathBuf) -> Result<CopiedView> {
        if !root.is_dir() {
            return CopiedView::create(task, root);
        }
        let snapshot = task.snapshot();
        let walk_files = |base: &Path| -> Result<Vec<(RepoPath, fs::FileType)>> {
            let mut found = Vec::new();
            for entry in WalkDir::new(base)
                .follow_links(false)
                .min_depth(1)
                .into_iter()
                .filter_entry(|e| !file_tree::is_skipped(e, &[]))
            {
                let entry = entry.map_err(|err| Error::Io {
                    context: format!("reading {}", base.display()),
                    source: err.into(),
                })?;
                if !entry.file_type().is_dir()
                    && let Some(path) = RepoPath::from_walk(base, entry.path())
                {
                    found.push((path, entry.file_type()));
                }
            }
            Ok(found)
        };
        for (path, _) in walk_files(&root)? {
            interrupt::check()?;
            let (here, there) = (path.under(&root), path.under(&snapshot));
            let same = match (fs::symlink_metadata(&here), fs::symlink_metadata(&there)) {
                (Ok(a), Ok(b)) if a.is_symlink() && b.is_symlink() => {
                    fs::read_link(&here).ok() == fs::read_link(&there).ok()
                }
                (Ok(a), Ok(b)) if a.is_file() && b.is_file() => {
                    file_tree::same_content(Some(&there), &here)?
                }
                _ => false,
            };
            if !same {
                file_tree::remove_any(&here)?;
            }
        }
        for (path, kind) in walk_files(&snapshot)? {
            interrupt::check()?;
            let (here, there) = (path.under(&root), path.under(&snapshot));
            if fs::symlink_metadata(&here).is_ok() {
                continue;
            }
            if kind.is_symlink() {
                if let Some(parent) = here.parent() {
                    fs::create_dir_all(parent)
                        .io_context(|| format!("creating {}", parent.display()))?;
                }
                file_tree::copy_link(&there, &here)?;
            } else {
                file_tree::place_file(&root, &path, &there)?;
            }
        }
        CopiedView::recorded(root)
    }

    /// Makes the view show `desired`, touching only the paths where it differs from what the
    /// view shows now.
    pub(crate) fn sync(&mut self, task: &TaskDir, desired: &Overlay) -> Result<()> {
        for path in self.applied.differing(desired) {
            interrupt::check()?;
            let dest = path.under(&self.root);
            match desired.source(task, &path)? {
                Some(source) => file_tree::place_file(&self.root, &path, &source)?,
                // A directory standing here holds other tracked paths; they are synced in turn.
                None if dest.is_dir() && !dest.is_symlink() => {}
                None => file_tree::remove_any(&dest)?,
            }
            self.record(&path)?;
        }
        self.applied = desired.clone();
        self.recorded_at_ns = now_ns();
        // What the sync itself wrote is recorded already; a directory it made is watched from
        // now on (the watch is made again).
        if let Some(watch) = &mut self.watch
            && watch.drain() == Touched::Unknown
        {
            self.watch = ViewWatch::start(&self.root);
        }
        Ok(())
    }

    /// Finds what a step changed in the view with one stat walk, copies the changed files into
    /// `output_dir`, and records them as the step's versions. Paths under `forbidden` (the
    /// workspace, when inside the repository) are never captured.
    /// `sequence` is the number the step gets if it succeeds.
    pub(crate) fn capture(
        &mut self,
        task: &TaskDir,
        step_id: &str,
        sequence: u64,
        output_dir: &Path,
        forbidden: &[RepoPath],
    ) -> Result<Captured> {
        let mut captured = Captured::default();
        let touched = match self.watch.as_mut().map(ViewWatch::drain) {
            Some(Touched::Paths(paths)) => Some(paths),
            _ => None,
        };
        let from_events = touched.and_then(|paths| self.touched_candidates(paths));
        let walked = from_events.is_none();
        let (candidates, gone) = match from_events {
            Some(found) => found,
            None => self.walked_candidates()?,
        };
        for (path, stamp, is_file) in candidates {
            interrupt::check()?;
            let known = self.manifest.get(&path).copied();
            if capture::is_too_long(path.as_str()) {
                // Removed from the view from where it crosses the limit (beyond 4096 bytes
                // nothing could walk it again), as the view made of layers drops it.
                captured
                    .too_long
                    .get_or_insert_with(|| path.as_str().to_string());
                file_tree::remove_entry(&self.root.join(capture::too_long_root(path.as_str())))?;
                continue;
            }
            if !is_file || forbidden.iter().any(|dir| path.is_within(dir)) {
                // Symlinks and special files a command made, and anything in the workspace,
                // never leave the view.
                if known != Some(stamp) && self.ignored.get(&path) != Some(&stamp) {
                    captured.ignored.push(path.as_str().to_string());
                    self.ignored.insert(path, stamp);
                }
                continue;
            }
            let file = path.under(&self.root);
            let before = self.applied.source(task, &path).ok().flatten();
            if stamp.links > 1 {
                self.linked.insert(path.clone());
            } else {
                self.linked.remove(&path);
            }
            if !file_tree::same_content(before.as_deref(), &file)? {
                file_tree::copy_file(&file, &path.under(output_dir))?;
                self.applied.versions.insert(
                    path.clone(),
                    Version::Step {
                        step: step_id.to_string(),
                        sequence,
                    },
                );
                captured.output_files.push(path.as_str().to_string());
            }
            self.manifest.insert(path, stamp);
        }
        for path in gone {
            self.manifest.remove(&path);
            self.linked.remove(&path);
            self.applied.versions.insert(path.clone(), Version::Deleted);
            captured.deleted_files.push(path.as_str().to_string());
        }
        captured.output_files.sort();
        captured.ignored.sort();
        self.recorded_at_ns = now_ns();
        if walked {
            self.note_links();
        }
        if self.watch.is_none() {
            // Lost to a walk (its events could not say what changed), or never had: watched
            // again from this state, which the manifest now records.
            self.watch = ViewWatch::start(&self.root);
        }
        Ok(captured)
    }

    /// The paths a capture looks at, from what the watch saw touched (and every file with
    /// another name): those that exist, with their stamps, and the known ones that are gone.
    /// `None` when a file touched has a name not yet known to be one of several: its other
    /// names changed without an event, and only a walk finds them.
    fn touched_candidates(&self, touched: BTreeSet<String>) -> Option<Candidates> {
        // Named as the walk names them.
        let mut paths: BTreeSet<RepoPath> = touched
            .iter()
            .filter_map(|path| RepoPath::from_walk(Path::new(""), Path::new(path)))
            .collect();
        paths.extend(self.linked.iter().cloned());
        let (mut candidates, mut gone) = (Vec::new(), Vec::new());
        for path in paths {
            match fs::symlink_metadata(path.under(&self.root)) {
                // A directory standing where a file was came with an event that made the
                // watch send the capture to the walk; one here is not a tracked path.
                Ok(meta) if meta.is_dir() => {}
                Ok(meta) => {
                    let stamp = Stamp::of(&meta);
                    if meta.is_file() && stamp.links > 1 && !self.linked.contains(&path) {
                        return None;
                    }
                    candidates.push((path, stamp, meta.is_file()));
                }
                Err(_) if self.manifest.contains_key(&path) => gone.push(path),
                Err(_) => {}
            }
        }
        Some((candidates, gone))
    }

    /// The paths a capture looks at, found by walking the whole view: those whose stamps
    /// differ from the manifest's (or too recent to tell), and the known ones that are gone.
    /// The watch, whose events could not say what changed, is dropped.
    fn walked_candidates(&mut self) -> Result<Candidates> {
        self.watch = None;
        self.walks += 1;
        let racy_after = self.recorded_at_ns - RACY_WINDOW_NS;
        let known_before = self.manifest.len();
        let mut known_seen = 0;
        // Only what differs leaves the walk; an unchanged tree costs no allocation per file.
        let mut candidates: Vec<(RepoPath, Stamp, bool)> = Vec::new();
        file_tree::stat_walk(&self.root, &mut |path, stamp, is_file| {
            let known = self.manifest.get(path).copied();
            known_seen += usize::from(known.is_some());
            let racy = stamp.mtime_ns >= racy_after || stamp.ctime_ns >= racy_after;
            if known != Some(stamp) || (racy && is_file) {
                candidates.push((
                    RepoPath::from_walk(Path::new(""), Path::new(path))
                        .unwrap_or_else(RepoPath::root),
                    stamp,
                    is_file,
                ));
            }
        })?;
        // Fewer known paths seen than were known means something was deleted; only then walk
        // again to find what.
        let mut gone = Vec::new();
        if known_seen < known_before {
            let mut seen = std::collections::HashSet::new();
            file_tree::stat_walk(&self.root, &mut |path, _, _| {
                seen.insert(path.to_string());
            })?;
            gone = self
                .manifest
                .keys()
                .filter(|path| !seen.contains(path.as_str()))
                .cloned()
                .collect();
            gone.sort();
        }
        Ok((candidates, gone))
    }

    /// Notes which of the manifest's files have another name.
    fn note_links(&mut self) {
        self.linked = self
            .manifest
            .iter()
            .filter(|(_, stamp)| stamp.links > 1)
            .map(|(path, _)| path.clone())
            .collect();
    }

    /// Every file and symlink in the view (skipping excluded directories) with its stamp.
    fn walk(&self) -> Result<Vec<(RepoPath, Stamp)>> {
        let mut out = Vec::with_capacity(self.manifest.len() + 16);
        file_tree::stat_walk(&self.root, &mut |path, stamp, _| {
            out.push((
                RepoPath::from_walk(Path::new(""), Path::new(path)).unwrap_or_else(RepoPath::root),
                stamp,
            ));
        })?;
        Ok(out)
    }

    /// Notes the current stamp of `path` in the manifest (which holds files and symlinks only).
    fn record(&mut self, path: &RepoPath) -> Result<()> {
        match fs::symlink_metadata(path.under(&self.root)) {
            Ok(meta) if !meta.is_dir() => {
                self.manifest.insert(path.clone(), Stamp::of(&meta));
            }
            _ => {
                self.manifest.remove(path);
            }
        }
        Ok(())
    }
}

/// The paths a capture looks at, each with its stamp and whether it is a regular file; and
/// the known paths that are gone.
type Candidates = (Vec<(RepoPath, Stamp, bool)>, Vec<RepoPath>);

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::os::unix::fs::PermissionsExt;

    /// A task whose snapshot holds `files`, and a view of it.
    fn view_of(dir: &Path, files: &[(&str, &str)]) -> (TaskDir, CopiedView) {
        let task = TaskDir::new(dir, "t");
        for (path, content) in files {
            let file = task.snapshot().join(path);
            fs::create_dir_all(file.parent().unwrap()).unwrap();
            fs::write(file, content).unwrap();
        }
        let view = CopiedView::create(&task, task.view(0)).unwrap();
        (task, view)
    }

    /// The regular files under `root` with their content (build directories left out).
    fn files(root: &Path) -> BTreeMap<String, String> {
        let mut found = BTreeMap::new();
        // A step that changed nothing has no output directory.
        if !root.exists() {
            return found;
        }
        file_tree::stat_walk(root, &mut |path, _, is_file| {
            if is_file {
                found.insert(path.to_string(), String::new());
            }
        })
        .unwrap();
        for (path, content) in &mut found {
            *content = fs::read_to_string(root.join(path)).unwrap();
        }
        found
    }

    /// Commands as they would touch a view, one per step.
    fn commands() -> Vec<fn(&Path)> {
        vec![
            |v| {
                fs::write(v.join("a.txt"), "changed\n").unwrap();
                fs::write(v.join("src/new.txt"), "new\n").unwrap();
                fs::remove_file(v.join("c.txt")).unwrap();
            },
            // Written again with the same bytes: touched, not changed.
            |v| fs::write(v.join("a.txt"), "changed\n").unwrap(),
            // A second name for a file, then a write through it: both names changed.
            |v| fs::hard_link(v.join("src/d.txt"), v.join("src/linked.txt")).unwrap(),
            |v| {
                use std::io::Write;
                let mut file = fs::OpenOptions::new()
                    .append(true)
                    .open(v.join("src/linked.txt"))
                    .unwrap();
                file.write_all(b"through the other name\n").unwrap();
            },
            |v| fs::remove_file(v.join("src/linked.txt")).unwrap(),
            |v| fs::write(v.join("src/d.txt"), "one name again\n").unwrap(),
            // A directory made (walked), then a file in it changed (watched since).
            |v| {
                fs::create_dir_all(v.join("made/deep")).unwrap();
                fs::write(v.join("made/deep/x.txt"), "x\n").unwrap();
            },
            |v| fs::write(v.join("made/deep/x.txt"), "x again\n").unwrap(),
            |v| fs::remove_dir_all(v.join("made")).unwrap(),
            |v| {
                std::os::unix::fs::symlink("a.txt", v.join("link.txt")).unwrap();
                fs::rename(v.join("src/e.txt"), v.join("e-renamed.txt")).unwrap();
                fs::set_permissions(v.join("b.txt"), fs::Permissions::from_mode(0o755)).unwrap();
            },
            // Build output is never captured, watched or not.
            |v| {
                fs::create_dir_all(v.join("__pycache__")).unwrap();
                fs::write(v.join("__pycache__/m.pyc"), "bytecode").unwrap();
            },
            // Made, written and removed by one command: nothing to capture.
            |v| {
                fs::write(v.join("src/tmp.txt"), "t\n").unwrap();
                fs::remove_file(v.join("src/tmp.txt")).unwrap();
            },
        ]
    }

    #[test]
    fn the_watch_finds_what_the_walk_finds_and_walks_only_when_it_cannot_say() {
        let dir = tempfile::tempdir().unwrap();
        let snapshot = [
            ("a.txt", "a\n"),
            ("b.txt", "b\n"),
            ("c.txt", "c\n"),
            ("src/d.txt", "d\n"),
            ("src/e.txt", "e\n"),
        ];
        let (watched_task, mut watched) = view_of(&dir.path().join("w"), &snapshot);
        let (walked_task, mut walked) = view_of(&dir.path().join("k"), &snapshot);
        assert!(watched.watch.is_some(), "inotify is available here");
        let mut walks_expected = 0;
        for (number, command) in commands().into_iter().enumerate() {
            let step = format!("s{number}");
            walked.watch = None;
            command(&watched.root);
            command(&walked.root);
            let out = |task: &TaskDir| task.step_dir(&step).join("output");
            let sequence = number as u64 + 1;
            let by_events = watched
                .capture(&watched_task, &step, sequence, &out(&watched_task), &[])
                .unwrap();
            let by_walk = walked
                .capture(&walked_task, &step, sequence, &out(&walked_task), &[])
                .unwrap();
            assert_eq!(by_events, by_walk, "step {number}");
            assert_eq!(files(&out(&watched_task)), files(&out(&walked_task)));
            // Only a directory made or removed, or a second name first seen, needs a walk.
            if [2, 6, 8].contains(&number) {
                walks_expected += 1;
            }
            assert_eq!(watched.walks, walks_expected, "walks after step {number}");
        }
        assert_eq!(files(&watched.root), files(&walked.root));
        let changed = files(&watched.root);
        assert_eq!(changed["src/d.txt"], "one name again\n");
        assert!(!changed.contains_key("src/e.txt") && changed.contains_key("e-renamed.txt"));
        // Set back to the snapshot, the view shows nothing of what the steps did.
        watched.sync(&watched_task, &Overlay::default()).unwrap();
        assert_eq!(files(&watched.root), files(&watched_task.snapshot()));
    }

    #[test]
    fn a_file_written_through_its_other_name_is_captured_under_both() {
        let dir = tempfile::tempdir().unwrap();
        let (task, mut view) = view_of(dir.path(), &[("a.txt", "a\n")]);
        let out = |step: &str| task.step_dir(step).join("output");
        fs::hard_link(view.root.join("a.txt"), view.root.join("b.txt")).unwrap();
        let first = view.capture(&task, "link", 1, &out("link"), &[]).unwrap();
        assert_eq!(first.output_files, ["b.txt"]);
        fs::write(view.root.join("b.txt"), "both\n").unwrap();
        let second = view.capture(&task, "write", 2, &out("write"), &[]).unwrap();
        assert_eq!(second.output_files, ["a.txt", "b.txt"]);
        // Known to have two names, the pair costs no walk.
        assert_eq!(view.walks, 1);
    }

    #[test]
    fn a_view_synced_to_another_step_shows_exactly_that_steps_files() {
        let dir = tempfile::tempdir().unwrap();
        let (task, mut view) = view_of(dir.path(), &[("a.txt", "a\n"), ("b.txt", "b\n")]);
        let out = |step: &str| task.step_dir(step).join("output");
        fs::write(view.root.join("a.txt"), "from one\n").unwrap();
        fs::write(view.root.join("one.txt"), "1\n").unwrap();
        let one = view.capture(&task, "one", 1, &out("one"), &[]).unwrap();
        assert_eq!(one.output_files, ["a.txt", "one.txt"]);
        let after_one = view.applied.clone();
        // A sibling of `one` (not after it) gets the view: none of `one`'s files.
        view.sync(&task, &Overlay::default()).unwrap();
        assert_eq!(files(&view.root), files(&task.snapshot()));
        fs::remove_file(view.root.join("b.txt")).unwrap();
        let two = view.capture(&task, "two", 2, &out("two"), &[]).unwrap();
        assert_eq!(two.deleted_files, ["b.txt"]);
        assert!(two.output_files.is_empty());
        // A step after `one` only: `one`'s files, and `b.txt` back.
        view.sync(&task, &after_one).unwrap();
        let shown = files(&view.root);
        assert_eq!(shown["a.txt"], "from one\n");
        assert_eq!(shown["b.txt"], "b\n");
        assert_eq!(shown["one.txt"], "1\n");
        // Nothing the syncs wrote is taken for a command's change.
        let three = view.capture(&task, "three", 3, &out("three"), &[]).unwrap();
        assert_eq!(three, Captured::default());
        assert_eq!(view.walks, 0);
    }
}
