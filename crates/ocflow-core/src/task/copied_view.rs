//! The copied view: the full directory a command step runs in when overlays are not available,
//! a copy of the snapshot kept equal to the step's overlay by applying only what changed. What
//! a command changes there is found by one stat walk against the view's manifest and captured
//! as the step's outputs.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use walkdir::WalkDir;

use crate::task::capture::{self, Captured};
use crate::task::file_tree::{self, Stamp};
use crate::task::interrupt;
use crate::task::overlay::{Overlay, Version};
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
        };
        view.manifest = view.walk()?.into_iter().collect();
        view.recorded_at_ns = now_ns();
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
        // Fewer known paths seen than were known means something was deleted; only then walk
        // again to find what.
        if known_seen < known_before {
            let mut seen = std::collections::HashSet::new();
            file_tree::stat_walk(&self.root, &mut |path, _, _| {
                seen.insert(path.to_string());
            })?;
            let mut gone: Vec<RepoPath> = self
                .manifest
                .keys()
                .filter(|path| !seen.contains(path.as_str()))
                .cloned()
                .collect();
            gone.sort();
            for path in gone {
                self.manifest.remove(&path);
                self.applied.versions.insert(path.clone(), Version::Deleted);
                captured.deleted_files.push(path.as_str().to_string());
            }
        }
        captured.output_files.sort();
        captured.ignored.sort();
        self.recorded_at_ns = now_ns();
        Ok(captured)
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

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}
