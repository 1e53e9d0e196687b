//! Command steps' views as overlays of the snapshot (`[sandbox] overlay = true`): nothing of
//! the repository is copied. A view is three directories, `_layers/` (`_layers-2/`, …):
//!
//! - `view/`, empty: the launcher mounts the overlay there, in a namespace only the command
//!   sees (`engine::sandbox_exec::mount_overlay`);
//! - `changes/`, the view's difference from the snapshot, made again before each command: hard
//!   links to the versions the step sees, whiteouts for the files its ancestors deleted;
//! - `carried/`, what commands left in the directories flows never name (`node_modules`, a
//!   `.venv`, a Rust `target`): kept for later commands in this view, as a copied view keeps it.
//!
//! The layers, top first, are the step's `upper/` (what the command writes), `changes/`,
//! `carried/`, then the snapshot; all but `upper/` are read-only to the command, so a hard
//! link into a step's output can never be written through. The command's changes are exactly
//! `upper/`: read after it (whiteouts are deletions, an opaque directory hides what the view had
//! beneath it), its files moved into the step's output, the rest moved into `carried/`. Creating
//! a view and capturing a command cost what changed, not the repository's size.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::ops::Bound;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use walkdir::WalkDir;

use crate::error::{IoContext, Result};
use crate::model::repo_path::{self, RepoPath};
use crate::task::staging::{self, Captured, Overlay, Version};
use crate::task::workspace::TaskDir;

const CHANGES_DIR: &str = "changes";
const CARRIED_DIR: &str = "carried";

/// A view made of layers (see the module's documentation).
pub(crate) struct LayeredView {
    dir: PathBuf,
    /// What `changes/` shows: the step's overlay, set by `prepare`.
    applied: Overlay,
}

impl LayeredView {
    /// The overlay's mount point, in the view's directory.
    pub(crate) const MOUNT_DIR: &str = "view";

    /// Opens the view in `dir`, keeping what an earlier process carried there.
    pub(crate) fn open(dir: PathBuf) -> Result<LayeredView> {
        let view = LayeredView {
            dir,
            applied: Overlay::default(),
        };
        for sub in [Self::MOUNT_DIR, CHANGES_DIR, CARRIED_DIR] {
            let path = view.dir.join(sub);
            fs::create_dir_all(&path).io_context(|| format!("creating {}", path.display()))?;
        }
        Ok(view)
    }

    /// Where the command sees the view (the overlay's mount point).
    pub(crate) fn mount_point(&self) -> PathBuf {
        self.dir.join(Self::MOUNT_DIR)
    }

    /// The read-only layers under the command's own, top first.
    pub(crate) fn lower_layers(&self, task: &TaskDir) -> Vec<PathBuf> {
        vec![
            self.dir.join(CHANGES_DIR),
            self.dir.join(CARRIED_DIR),
            task.snapshot(),
        ]
    }

    /// Makes `changes/` show `desired`: a hard link to each version, a whiteout for each
    /// deletion — for a whole directory when every file the snapshot has beneath it is deleted
    /// and nothing new is there, so the directory is gone, as for the step that removed it.
    pub(crate) fn prepare(&mut self, task: &TaskDir, desired: &Overlay) -> Result<()> {
        let changes = self.dir.join(CHANGES_DIR);
        staging::remove_tree(&changes)?;
        fs::create_dir_all(&changes).io_context(|| format!("creating {}", changes.display()))?;
        let snapshot = task.snapshot();
        let mut deleted = Vec::new();
        for (path, version) in &desired.versions {
            match version {
                Version::Deleted => deleted.push(path),
                // A version whose file vanished shows nothing, as in a copied view.
                Version::Step { .. } => match desired.source(task, path)? {
                    Some(source) => link_into(&changes, path, &source)?,
                    None => deleted.push(path),
                },
            }
        }
        let carried = self.dir.join(CARRIED_DIR);
        let mut gone: HashMap<RepoPath, bool> = HashMap::new();
        let mut hidden: HashSet<RepoPath> = HashSet::new();
        for path in deleted {
            // The highest directory that is deleted whole, or else the file itself.
            let mut target = path.clone();
            let mut parent = parent_of(path);
            while let Some(dir) = parent {
                let whole = *gone.entry(dir.clone()).or_insert_with(|| {
                    dir.under(&snapshot).is_dir()
                        && !dir.under(&carried).exists()
                        && !versions_within(&desired.versions, &dir)
                            .any(|(_, v)| matches!(v, Version::Step { .. }))
                        && files_under(&snapshot, &dir)
                            .iter()
                            .all(|f| desired.versions.get(f) == Some(&Version::Deleted))
                });
                if !whole {
                    break;
                }
                target = dir.clone();
                parent = parent_of(&dir);
            }
            // Where a version stands (a directory of new files where the snapshot has a file)
            // or lies above (a file where the snapshot has a directory), nothing of the
            // snapshot shows anyway.
            if fs::symlink_metadata(target.under(&snapshot)).is_ok()
                && fs::symlink_metadata(target.under(&changes)).is_err()
                && !is_covered(&changes, &target)
                && hidden.insert(target.clone())
            {
                whiteout(&changes, &target)?;
            }
        }
        self.applied = desired.clone();
        Ok(())
    }

    /// Reads what the command changed from `upper` (see the module's documentation): changed
    /// files are moved into `output_dir` as the step's versions numbered `sequence`, what lies
    /// in excluded directories into `carried/`. Symlinks and special files are reported as
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
            carried: self.dir.join(CARRIED_DIR),
            applied: &mut self.applied,
            forgotten: HashMap::new(),
            captured: Captured::default(),
        };
        if upper.is_dir() {
            capture.walk(upper, step_id, sequence, output_dir, forbidden)?;
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
    carried: PathBuf,
    applied: &'a mut Overlay,
    /// The version each deleted path had (`None`: the snapshot's), so a file made again in the
    /// same command is compared with it.
    forgotten: HashMap<RepoPath, Option<Version>>,
    captured: Captured,
}

impl Capture<'_> {
    fn walk(
        &mut self,
        upper: &Path,
        step_id: &str,
        sequence: u64,
        output_dir: &Path,
        forbidden: &[RepoPath],
    ) -> Result<()> {
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
                // A name no flow path can hold (not UTF-8) is carried with its directory only.
                if let Ok(name) = entry.file_name().into_string() {
                    names.push((name, meta));
                }
            }
            names.sort_by(|a, b| a.0.cmp(&b.0));
            for (name, meta) in names {
                let rel = if dir.is_empty() {
                    name
                } else {
                    format!("{dir}/{name}")
                };
                let there = upper.join(&rel);
                let path = RepoPath::parse(&rel).ok();
                let Some(path) = path.filter(|path| !self.is_excluded(path)) else {
                    // Inside `node_modules`, `.venv`, … (or a name flows refuse): carried.
                    carry(&there, &self.carried.join(&rel))?;
                    continue;
                };
                let kind = meta.file_type();
                if kind.is_dir() {
                    if is_opaque(&there) {
                        self.forget_under(&path);
                        staging::remove_any(&path.under(&self.carried))?;
                    } else if self.shows_file(&path) {
                        self.forget_under(&path);
                    }
                    todo.push(rel);
                    continue;
                }
                // A whiteout, file, symlink or special file: what the view had here is gone.
                self.forget_under(&path);
                staging::remove_any(&path.under(&self.carried))?;
                if is_whiteout(&meta) {
                    continue;
                }
                if !kind.is_file() || forbidden.iter().any(|dir| path.is_within(dir)) {
                    self.captured.ignored.push(rel);
                    continue;
                }
                // Made again where the view had a file: compared with that one.
                if let Some(previous) = self.forgotten.remove(&path) {
                    match previous {
                        Some(version) => self.applied.versions.insert(path.clone(), version),
                        None => self.applied.versions.remove(&path),
                    };
                }
                let before = self.applied.source(self.task, &path).ok().flatten();
                if !staging::same_content(before.as_deref(), &there)? {
                    move_into(&there, &path.under(output_dir))?;
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
            let cargo = || {
                let manifest = RepoPath::parse(&format!("{parent}Cargo.toml"));
                manifest.is_ok_and(|manifest| {
                    manifest.under(self.upper).is_file() || self.shows_file(&manifest)
                })
            };
            if repo_path::EXCLUDED_DIR_NAMES.contains(part) || (*part == "target" && cargo()) {
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

    /// Marks deleted every file the view shows at or beneath `path`, noting the version each
    /// had.
    fn forget_under(&mut self, path: &RepoPath) {
        let mut shown: Vec<RepoPath> = files_under(&self.snapshot, path)
            .into_iter()
            .filter(|file| self.applied.versions.get(file) != Some(&Version::Deleted))
            .collect();
        shown.extend(
            versions_within(&self.applied.versions, path)
                .filter(|(_, v)| matches!(v, Version::Step { .. }))
                .map(|(p, _)| p.clone()),
        );
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

/// Whether a file (not a directory) stands above `path` under `root`.
fn is_covered(root: &Path, path: &RepoPath) -> bool {
    let mut current = root.to_path_buf();
    let parts: Vec<&str> = path.as_str().split('/').collect();
    parts[..parts.len().saturating_sub(1)].iter().any(|part| {
        current.push(part);
        fs::symlink_metadata(&current).is_ok_and(|m| !m.is_dir())
    })
}

fn parent_of(path: &RepoPath) -> Option<RepoPath> {
    let (parent, _) = path.as_str().rsplit_once('/')?;
    RepoPath::parse(parent).ok()
}

/// Creates the directories above `path` under `root`, replacing a file standing where one is
/// needed.
fn make_parents(root: &Path, path: &RepoPath) -> Result<PathBuf> {
    let mut current = root.to_path_buf();
    let parts: Vec<&str> = path.as_str().split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        current.push(part);
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.is_dir() => continue,
            Ok(_) => staging::remove_any(&current)?,
            Err(_) => {}
        }
        fs::create_dir(&current).io_context(|| format!("creating {}", current.display()))?;
    }
    let dest = path.under(root);
    staging::remove_any(&dest)?;
    Ok(dest)
}

/// A hard link to `source` at `path` under `root` (a copy where links are refused).
fn link_into(root: &Path, path: &RepoPath, source: &Path) -> Result<()> {
    let dest = make_parents(root, path)?;
    if fs::hard_link(source, &dest).is_err() {
        fs::copy(source, &dest)
            .io_context(|| format!("copying {} to {}", source.display(), dest.display()))?;
    }
    Ok(())
}

/// An overlay whiteout at `path` under `root`: a character device 0/0, which hides what the
/// layers beneath have there (unprivileged since Linux 5.8).
fn whiteout(root: &Path, path: &RepoPath) -> Result<()> {
    use rustix::fs::{CWD, FileType, Mode, makedev, mknodat};
    let dest = make_parents(root, path)?;
    mknodat(
        CWD,
        &dest,
        FileType::CharacterDevice,
        Mode::empty(),
        makedev(0, 0),
    )
    .map_err(std::io::Error::from)
    .io_context(|| format!("hiding {} from the view", dest.display()))
}

/// Moves `from` (in an upper directory) to `to`, replacing what stands there.
fn move_into(from: &Path, to: &Path) -> Result<()> {
    staging::remove_any(to)?;
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent).io_context(|| format!("creating {}", parent.display()))?;
    }
    fs::rename(from, to).io_context(|| format!("moving {} to {}", from.display(), to.display()))
}

/// Merges what an upper directory has at `from` into `carried/` at `to`, as the overlay showed
/// it: a whiteout removes, a directory that is not opaque merges with the one there, anything
/// else replaces.
fn carry(from: &Path, to: &Path) -> Result<()> {
    let meta = fs::symlink_metadata(from).io_context(|| format!("reading {}", from.display()))?;
    if is_whiteout(&meta) {
        return staging::remove_any(to);
    }
    if meta.is_dir() && !is_opaque(from) && fs::symlink_metadata(to).is_ok_and(|m| m.is_dir()) {
        for entry in fs::read_dir(from).io_context(|| format!("reading {}", from.display()))? {
            let entry = entry.io_context(|| format!("reading {}", from.display()))?;
            carry(&entry.path(), &to.join(entry.file_name()))?;
        }
        return Ok(());
    }
    move_into(from, to)
}

/// An overlay whiteout: a character device 0/0 in the upper directory (a deletion).
fn is_whiteout(meta: &fs::Metadata) -> bool {
    meta.file_type().is_char_device() && meta.rdev() == 0
}

/// An opaque directory of an overlay's upper directory: it hides the lower ones' content (a
/// directory deleted and made again). Overlays mounted in a user namespace mark it with
/// `user.overlay.opaque`, others with `trusted.overlay.opaque`.
fn is_opaque(dir: &Path) -> bool {
    let mut value = [0u8; 4];
    ["user.overlay.opaque", "trusted.overlay.opaque"]
        .iter()
        .any(|name| {
            rustix::fs::lgetxattr(dir, *name, &mut value)
                .is_ok_and(|len| len >= 1 && value[0] == b'y')
        })
}
