//! Command steps' views as overlays of the snapshot: nothing of the repository is copied. A
//! view is two directories, `_layers/` (`_layers-2/`, …):
//!
//! - `view/`, empty: the launcher mounts the overlay there, in a namespace only the command
//!   sees (`engine::sandbox_exec::mount_overlay`);
//! - `changes/`, the view's difference from the snapshot, as a copied view would hold it: the
//!   versions of the steps the command depends on, whiteouts (character devices 0/0) for what
//!   they deleted, and whatever earlier commands in this view left (a `node_modules`, a build
//!   directory, a symlink), merged from their upper directories.
//!
//! The layers, top first, are the step's `upper/` (what the command writes), `changes/`, then
//! the snapshot; all but `upper/` are read-only to the command. Before a command, `changes/` is
//! synced to the step's versions by touching only the paths whose version differs, each with a
//! fresh copy (as a copied view's sync writes one, so build tools see it as newer than what was
//! built from another version). After it, the command's changes are exactly `upper/`: read
//! (whiteouts are deletions, an opaque directory hides what the view had beneath it), its
//! changed files linked into the step's output, then merged into `changes/` as overlayfs would
//! show them. Making a view and capturing a command cost what changed, not the repository.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::ops::Bound;
use std::path::{Path, PathBuf};

use walkdir::WalkDir;

use crate::task::capture::{self, Captured};
use crate::task::file_tree;
use crate::task::interrupt;
use crate::task::overlay::{Overlay, Version};
use crate::task::overlay_rules::{is_opaque, is_whiteout};
use crate::task::workspace::TaskDir;
use ocflow_model::error::{IoContext, Result};
use ocflow_model::repo_path::{self, RepoPath};

const CHANGES_DIR: &str = "changes";
const BUILD_DIR: &str = "build";

/// Removes every view's build layers (`LayeredView::build_layers`) from the task: at a flow's
/// end nothing of its builds is kept, as the repository's own build directories hold what the
/// user built. A resumed flow builds again from those.
pub(crate) fn remove_build_layers(task: &TaskDir) {
    let Ok(entries) = fs::read_dir(&task.root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name
            .to_string_lossy()
            .starts_with(crate::task::workspace::LAYERS_DIR)
        {
            let build = entry.path().join(BUILD_DIR);
            if build.exists() {
                ocflow_sandbox::exec::remove_overlay_dirs(&build);
            }
        }
    }
}

/// A view made of layers (see the module's documentation).
pub(crate) struct LayeredView {
    dir: PathBuf,
    /// The versions the view shows: set by `prepare`, updated by `capture`.
    applied: Overlay,
}

impl LayeredView {
    /// The overlay's mount point, in the view's directory.
    pub(crate) const MOUNT_DIR: &str = "view";

    /// Opens the view in `dir`. What an earlier process left in `changes/` (perhaps killed in
    /// the middle of a command) is set back to the snapshot, keeping the excluded directories
    /// — build caches, virtual environments — as a copied view keeps them.
    pub(crate) fn open(task: &TaskDir, dir: PathBuf) -> Result<LayeredView> {
        let view = LayeredView {
            dir,
            applied: Overlay::default(),
        };
        for sub in [Self::MOUNT_DIR, CHANGES_DIR] {
            let path = view.dir.join(sub);
            fs::create_dir_all(&path).io_context(|| format!("creating {}", path.display()))?;
        }
        reset(&view.dir.join(CHANGES_DIR), &task.snapshot())?;
        Ok(view)
    }

    /// Where the command sees the view (the overlay's mount point).
    pub(crate) fn mount_point(&self) -> PathBuf {
        self.dir.join(Self::MOUNT_DIR)
    }

    /// The layers the view's commands see the repository's build directories through
    /// (`engine::dependencies`), kept from step to step until the flow ends.
    pub(crate) fn build_layers(&self) -> PathBuf {
        self.dir.join(BUILD_DIR)
    }

    /// The read-only layers under the command's own, top first.
    pub(crate) fn lower_layers(&self, task: &TaskDir) -> Vec<PathBuf> {
        vec![self.dir.join(CHANGES_DIR), task.snapshot()]
    }

    /// Makes the view show `desired`, touching only the paths where it differs from what the
    /// view shows now: a fresh copy of the version, or a whiteout where a lower layer has the
    /// path.
    pub(crate) fn prepare(&mut self, task: &TaskDir, desired: &Overlay) -> Result<()> {
        let changes = self.dir.join(CHANGES_DIR);
        let snapshot = task.snapshot();
        for path in self.applied.differing(desired) {
            interrupt::check()?;
            let dest = path.under(&changes);
            match desired.source(task, &path)? {
                // A file or whiteout standing where a directory is needed gives way to an
                // opaque one: the view had no directory there, so nothing of the snapshot
                // beneath it may show (as when a copied view's sync creates it).
                Some(source) => {
                    file_tree::place_file_marking(&changes, &path, &source, &mut |dir| {
                        mark_opaque(dir)
                    })?
                }
                None => {
                    let here = fs::symlink_metadata(&dest).ok();
                    // A directory standing here holds other tracked paths; they are synced in
                    // turn.
                    if here.as_ref().is_some_and(fs::Metadata::is_dir)
                        || (here.is_none()
                            && path.under(&snapshot).is_dir()
                            && shows_from_below(&changes, &path))
                    {
                        continue;
                    }
                    file_tree::remove_any(&dest)?;
                    if fs::symlink_metadata(path.under(&snapshot)).is_ok()
                        && shows_from_below(&changes, &path)
                    {
                        whiteout(&dest)?;
                    }
                }
            }
        }
        self.applied = desired.clone();
        Ok(())
    }

    /// Reads what the command changed from `upper` (see the module's documentation): changed
    /// files are linked into `output_dir` as the step's versions numbered `sequence`, then
    /// everything is merged into `changes/`. Symlinks and special files are reported as
    /// ignored; paths under `forbidden` (the workspace) are never captured.
    pub(crate) fn capture(
        &mut self,
        task: &TaskDir,
        step_id: &str,
        sequence: u64,
        upper: &Path,
        output_dir: &Path,
        forbidden: &[RepoPath],
    ) -> Result<Captured> {
        let mut capture = Capture {
            task,
            upper,
            snapshot: task.snapshot(),
            applied: &mut self.applied,
            forgotten: HashMap::new(),
            captured: Captured::default(),
        };
        if upper.is_dir() {
            capture.walk(step_id, sequence, output_dir, forbidden)?;
            merge(upper, &self.dir.join(CHANGES_DIR))?;
        }
        let Capture {
            forgotten,
            mut captured,
            ..
        } = capture;
        // What was deleted and not made again (a file made again is an output if it differs,
        // and nothing if it does not).
        for path in forgotten.into_keys() {
            if self.applied.versions.get(&path) == Some(&Version::Deleted) {
                captured.deleted_files.push(path.as_str().to_string());
            }
        }
        captured.output_files.sort();
        captured.deleted_files.sort();
        captured.ignored.sort();
        Ok(captured)
    }
}

/// One capture's state: what the view shows (`applied`, updated as the upper directory is read)
/// and what it showed at the paths the command deleted.
struct Capture<'a> {
    task: &'a TaskDir,
    upper: &'a Path,
    snapshot: PathBuf,
    applied: &'a mut Overlay,
    /// The version each deleted path had (`None`: the snapshot's), so a file made again in the
    /// same command is compared with it.
    forgotten: HashMap<RepoPath, Option<Version>>,
    captured: Captured,
}

impl Capture<'_> {
    fn walk(
        &mut self,
        step_id: &str,
        sequence: u64,
        output_dir: &Path,
        forbidden: &[RepoPath],
    ) -> Result<()> {
        let upper = self.upper;
        let mut todo = vec![String::new()];
        while let Some(dir) = todo.pop() {
            let source_dir = upper.join(&dir);
            let mut names: Vec<(String, fs::Metadata)> = Vec::new();
            for entry in fs::read_dir(&source_dir)
                .io_context(|| format!("reading {}", source_dir.display()))?
            {
                let entry = entry.io_context(|| format!("reading {}", source_dir.display()))?;
                let meta = fs::symlink_metadata(entry.path())
                    .io_context(|| format!("reading {}", entry.path().display()))?;
                // A name no flow path can hold (not UTF-8) is never captured (it is merged).
                if let Ok(name) = entry.file_name().into_string() {
                    names.push((name, meta));
                }
            }
            names.sort_by(|a, b| a.0.cmp(&b.0));
            for (name, meta) in names {
                interrupt::check()?;
                let rel = if dir.is_empty() {
                    name
                } else {
                    format!("{dir}/{name}")
                };
                let there = upper.join(&rel);
                if capture::is_too_long(&rel) {
                    // Not carried (no flow path is this long), and not walked further: beyond
                    // 4096 bytes the kernel opens no path. Beneath a directory, the first file
                    // is found relative to it.
                    let first = if meta.is_dir() {
                        capture::first_file_under(&there)?.map(|inner| format!("{rel}/{inner}"))
                    } else {
                        Some(rel.clone())
                    };
                    if let (None, Some(first)) = (&self.captured.too_long, first) {
                        self.captured.too_long = Some(first);
                    }
                    // Nor merged into the view: nothing could walk it again.
                    file_tree::remove_entry(&there)?;
                    continue;
                }
                let path = RepoPath::parse(&rel).ok();
                // Inside `node_modules`, `.venv`, … (or a name flows refuse): never captured.
                let Some(path) = path.filter(|path| !self.is_excluded(path)) else {
                    continue;
                };
                let kind = meta.file_type();
                if kind.is_dir() {
                    if is_opaque(&there) || self.shows_file(&path) {
                        self.forget_under(&path, true);
                    }
                    todo.push(rel);
                    continue;
                }
                if is_whiteout(&meta) {
                    self.forget_under(&path, true);
                    continue;
                }
                // A symlink or special file, or a file in the workspace: ignored, as in a
                // copied view; the files of a directory it replaced are gone, but a file it
                // replaced keeps its version (it is never carried out of the view).
                if !kind.is_file() || forbidden.iter().any(|dir| path.is_within(dir)) {
                    self.forget_under(&path, false);
                    self.captured.ignored.push(rel);
                    continue;
                }
                self.forget_under(&path, true);
                // Made again where the view had a file: compared with that one.
                if let Some(previous) = self.forgotten.remove(&path) {
                    match previous {
                        Some(version) => self.applied.versions.insert(path.clone(), version),
                        None => self.applied.versions.remove(&path),
                    };
                }
                let before = self.applied.source(self.task, &path).ok().flatten();
                if !file_tree::same_content(before.as_deref(), &there)? {
                    link_into(output_dir, &path, &there)?;
                    self.applied.versions.insert(
                        path.clone(),
                        Version::Step {
                            step: step_id.to_string(),
                            sequence,
                        },
                    );
                    self.captured.output_files.push(rel);
                }
            }
        }
        Ok(())
    }

    /// Whether `path` lies in a directory staging skips (`node_modules`, `.venv`, a `target`
    /// beside a `Cargo.toml` the view shows — perhaps one the command just wrote).
    fn is_excluded(&self, path: &RepoPath) -> bool {
        let parts: Vec<&str> = path.as_str().split('/').collect();
        let mut parent = String::new();
        for part in &parts[..parts.len().saturating_sub(1)] {
            let beside = |file: &str| {
                let manifest = RepoPath::parse(&format!("{parent}{file}"));
                manifest.is_ok_and(|manifest| {
                    manifest.under(self.upper).is_file() || self.shows_file(&manifest)
                })
            };
            if repo_path::EXCLUDED_DIR_NAMES.contains(part)
                || repo_path::is_build_output(part, beside)
            {
                return true;
            }
            parent.push_str(part);
            parent.push('/');
        }
        false
    }

    /// Whether the view shows a file (not a directory) at `path`.
    fn shows_file(&self, path: &RepoPath) -> bool {
        match self.applied.versions.get(path) {
            Some(Version::Step { .. }) => true,
            Some(Version::Deleted) => false,
            None => fs::symlink_metadata(path.under(&self.snapshot)).is_ok_and(|m| !m.is_dir()),
        }
    }

    /// Marks deleted every file the view shows beneath `path`, and at it if `itself`, noting
    /// the version each had.
    fn forget_under(&mut self, path: &RepoPath, itself: bool) {
        let mut shown: Vec<RepoPath> = files_under(&self.snapshot, path)
            .into_iter()
            .filter(|file| self.applied.versions.get(file) != Some(&Version::Deleted))
            .collect();
        shown.extend(
            versions_within(&self.applied.versions, path)
                .filter(|(_, v)| matches!(v, Version::Step { .. }))
                .map(|(p, _)| p.clone()),
        );
        shown.retain(|file| itself || file != path);
        for file in shown {
            let previous = self.applied.versions.insert(file.clone(), Version::Deleted);
            self.forgotten.entry(file).or_insert(previous);
        }
    }
}

/// The versions at or beneath `dir`: `dir` itself, then the keys between `dir/` and `dir0`
/// (`0` follows `/`), without visiting the rest of the map.
fn versions_within<'a>(
    versions: &'a BTreeMap<RepoPath, Version>,
    dir: &RepoPath,
) -> impl Iterator<Item = (&'a RepoPath, &'a Version)> {
    let (below, after) = (format!("{}/", dir.as_str()), format!("{}0", dir.as_str()));
    versions
        .get_key_value(dir.as_str())
        .into_iter()
        .chain(versions.range::<str, _>((
            Bound::Included(below.as_str()),
            Bound::Excluded(after.as_str()),
        )))
}

/// The files and symlinks the snapshot has at or beneath `path`.
fn files_under(snapshot: &Path, path: &RepoPath) -> Vec<RepoPath> {
    let root = path.under(snapshot);
    match fs::symlink_metadata(&root) {
        Ok(meta) if meta.is_dir() => WalkDir::new(&root)
            .follow_links(false)
            .min_depth(1)
            .into_iter()
            .flatten()
            .filter(|entry| !entry.file_type().is_dir())
            .filter_map(|entry| RepoPath::from_walk(snapshot, entry.path()))
            .collect(),
        Ok(_) => vec![path.clone()],
        Err(_) => Vec::new(),
    }
}

/// Whether what the lower layer has at `path` shows through `changes`: no directory above it
/// there is opaque, and nothing else (a file, a whiteout) stands above it.
fn shows_from_below(changes: &Path, path: &RepoPath) -> bool {
    let mut current = changes.to_path_buf();
    let parts: Vec<&str> = path.as_str().split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        current.push(part);
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.is_dir() => {
                if is_opaque(&current) {
                    return false;
                }
            }
            Ok(_) => return false,
            Err(_) => return true,
        }
    }
    true
}

/// A hard link to `source` at `path` under `root` (a copy where links are refused), the
/// directories above it created.
fn link_into(root: &Path, path: &RepoPath, source: &Path) -> Result<()> {
    let dest = path.under(root);
    if let Some(parent) = dest.parent() {
        fs::create_dir_all(parent).io_context(|| format!("creating {}", parent.display()))?;
    }
    if fs::hard_link(source, &dest).is_err() {
        fs::copy(source, &dest)
            .io_context(|| format!("copying {} to {}", source.display(), dest.display()))?;
    }
    Ok(())
}

/// An overlay whiteout at `dest`: a character device 0/0, which hides what the layers beneath
/// have there (unprivileged since Linux 5.8).
fn whiteout(dest: &Path) -> Result<()> {
    use rustix::fs::{CWD, FileType, Mode, makedev, mknodat};
    mknodat(
        CWD,
        dest,
        FileType::CharacterDevice,
        Mode::empty(),
        makedev(0, 0),
    )
    .map_err(std::io::Error::from)
    .io_context(|| format!("hiding {} from the view", dest.display()))
}

/// Merges an upper directory into `changes` as overlayfs shows the two: a directory that is
/// not opaque merges with the one there; anything else (a file, a symlink, a whiteout, an
/// opaque directory, which keeps its mark) replaces what stands there, moved. A directory
/// made where `changes` has a whiteout or a file is not marked opaque by overlayfs (the mark
/// is only needed over the upper layer's own whiteouts), yet showed nothing beneath it: it is
/// marked here, or the snapshot's directory would show through it once the whiteout is gone.
fn merge(from: &Path, to: &Path) -> Result<()> {
    for entry in fs::read_dir(from).io_context(|| format!("reading {}", from.display()))? {
        interrupt::check()?;
        let entry = entry.io_context(|| format!("reading {}", from.display()))?;
        let (source, dest) = (entry.path(), to.join(entry.file_name()));
        let meta =
            fs::symlink_metadata(&source).io_context(|| format!("reading {}", source.display()))?;
        if meta.is_dir()
            && !is_opaque(&source)
            && fs::symlink_metadata(&dest).is_ok_and(|m| m.is_dir())
        {
            merge(&source, &dest)?;
            continue;
        }
        let over_non_dir = meta.is_dir() && fs::symlink_metadata(&dest).is_ok();
        file_tree::remove_any(&dest)?;
        fs::rename(&source, &dest)
            .io_context(|| format!("moving {} to {}", source.display(), dest.display()))?;
        if over_non_dir {
            mark_opaque(&dest)?;
        }
    }
    Ok(())
}

/// Marks a directory of `changes` opaque: nothing of the layers beneath shows in it.
fn mark_opaque(dir: &Path) -> Result<()> {
    rustix::fs::lsetxattr(
        dir,
        "user.overlay.opaque",
        b"y",
        rustix::fs::XattrFlags::empty(),
    )
    .map_err(std::io::Error::from)
    .io_context(|| format!("marking {} opaque", dir.display()))
}

/// Sets `changes` back to showing the snapshot, keeping the excluded directories: files,
/// symlinks and whiteouts go, and directories lose their opaque mark.
fn reset(changes: &Path, snapshot: &Path) -> Result<()> {
    let mut todo = vec![changes.to_path_buf()];
    while let Some(dir) = todo.pop() {
        // Which directories are kept is decided before any file goes (a `target` is kept
        // beside a `Cargo.toml` about to be removed).
        let mut files = Vec::new();
        for entry in fs::read_dir(&dir).io_context(|| format!("reading {}", dir.display()))? {
            let entry = entry.io_context(|| format!("reading {}", dir.display()))?;
            let path = entry.path();
            if !fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                files.push(path);
                continue;
            }
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let relative = dir.strip_prefix(changes).unwrap_or(&dir);
            if repo_path::is_excluded_dir(&dir, &name)
                || repo_path::is_excluded_dir(&snapshot.join(relative), &name)
            {
                continue;
            }
            let _ = rustix::fs::lremovexattr(&path, "user.overlay.opaque");
            todo.push(path);
        }
        for file in files {
            interrupt::check()?;
            file_tree::remove_any(&file)?;
        }
    }
    Ok(())
}
