//! Staging: how steps see the repository without ever writing to it. The repository is copied
//! once into the task's snapshot; a step's view of it is the snapshot overlaid with the outputs
//! of the steps it depends on. File steps get only the files they name, in `input/`; command
//! steps get a full view directory, kept in sync by applying only what changed, and what a
//! command changes there is found by a stat walk and captured as the step's outputs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use walkdir::WalkDir;

use crate::task::interrupt;
use crate::task::workspace::{self, TaskDir};
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::repo_path::{self, RepoPath};
use ocflow_model::status::FlowStatus;

/// What a copy of a tree contained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeStats {
    pub files: u64,
    pub bytes: u64,
    pub duration_ms: u64,
}

/// Copies the repository (minus `.git`, build directories and `skip`, the workspace) into the
/// task's snapshot. Written under a temporary name and renamed, so a snapshot that exists is
/// complete.
pub fn take_snapshot(repo: &Path, task: &TaskDir, skip: &[PathBuf]) -> Result<TreeStats> {
    let target = task.snapshot();
    let partial = task.root.join("_snapshot.partial");
    remove_tree(&partial)?;
    let copied = copy_tree(repo, &partial, skip).and_then(|stats| {
        workspace::sync_file_system(&partial)?;
        fs::rename(&partial, &target)
            .io_context(|| format!("renaming {} into place", partial.display()))?;
        workspace::sync_dir(&task.root)?;
        Ok(stats)
    });
    // A failed copy (a full disk, most often) must not keep its space.
    if copied.is_err() {
        let _ = remove_tree(&partial);
    }
    copied
}

/// Copies `from` into `to` (which must not exist), skipping excluded directories and `skip`.
/// Symlinks are copied as symlinks, never followed. Files are copied by several threads:
/// per-file overhead, not bytes, dominates a source tree.
pub(crate) fn copy_tree(from: &Path, to: &Path, skip: &[PathBuf]) -> Result<TreeStats> {
    copy_tree_keeping(from, to, &|entry| !is_skipped(entry, skip))
}

/// Copies `from` into `to` whole, excluded directories included (a `node_modules` holds
/// others).
pub(crate) fn copy_whole_tree(from: &Path, to: &Path) -> Result<TreeStats> {
    copy_tree_keeping(from, to, &|_| true)
}

fn copy_tree_keeping(
    from: &Path,
    to: &Path,
    keep: &dyn Fn(&walkdir::DirEntry) -> bool,
) -> Result<TreeStats> {
    let started = Instant::now();
    let mut files: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut links: Vec<(PathBuf, PathBuf)> = Vec::new();
    let walker = WalkDir::new(from)
        .follow_links(false)
        .into_iter()
        .filter_entry(|entry| keep(entry));
    for entry in walker {
        interrupt::check()?;
        let entry = entry.map_err(|err| Error::Io {
            context: format!("reading {}", from.display()),
            source: err.into(),
        })?;
        let relative = entry.path().strip_prefix(from).unwrap_or(entry.path());
        let dest = to.join(relative);
        let kind = entry.file_type();
        if kind.is_dir() {
            fs::create_dir_all(&dest).io_context(|| format!("creating {}", dest.display()))?;
        } else if kind.is_symlink() {
            links.push((entry.path().to_path_buf(), dest));
        } else if kind.is_file() {
            files.push((entry.path().to_path_buf(), dest));
        }
    }
    for (source, dest) in &links {
        let target = fs::read_link(source)
            .io_context(|| format!("reading the link {}", source.display()))?;
        std::os::unix::fs::symlink(&target, dest)
            .io_context(|| format!("creating the link {}", dest.display()))?;
    }
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8);
    let bytes = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|worker| {
                let files = &files;
                scope.spawn(move || -> Result<u64> {
                    let mut bytes = 0;
                    for (source, dest) in files.iter().skip(worker).step_by(threads) {
                        interrupt::check()?;
                        bytes += fs::copy(source, dest)
                            .io_context(|| format!("copying {}", source.display()))?;
                    }
                    Ok(bytes)
                })
            })
            .collect();
        workers
            .into_iter()
            .try_fold(0u64, |total, worker| match worker.join() {
                Ok(bytes) => Ok(total + bytes?),
                Err(_) => Err(Error::Io {
                    context: "copying files".into(),
                    source: io::Error::other("a copy thread panicked"),
                }),
            })
    })?;
    Ok(TreeStats {
        files: files.len() as u64,
        bytes,
        duration_ms: started.elapsed().as_millis() as u64,
    })
}

fn is_skipped(entry: &walkdir::DirEntry, skip: &[PathBuf]) -> bool {
    if !entry.file_type().is_dir() || entry.depth() == 0 {
        return false;
    }
    let name = entry.file_name().to_str().unwrap_or("");
    let parent = entry.path().parent().unwrap_or(Path::new(""));
    repo_path::is_excluded_dir(parent, name) || skip.iter().any(|s| s == entry.path())
}

/// Removes a directory tree if it exists.
pub(crate) fn remove_tree(path: &Path) -> Result<()> {
    // File by file, contents first, checking for a signal between files: removing a tree of
    // 100,000 files takes seconds. Whatever the walk cannot do (a tree deeper than a path can
    // name) is left to `remove_dir_all`, which works relative to each directory.
    for entry in WalkDir::new(path).contents_first(true) {
        interrupt::check()?;
        let Ok(entry) = entry else { break };
        let removed = if entry.file_type().is_dir() {
            fs::remove_dir(entry.path())
        } else {
            fs::remove_file(entry.path())
        };
        if removed.is_err() {
            break;
        }
    }
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err).io_context(|| format!("removing {}", path.display())),
    }
}

/// Which version of a path a step sees, when it is not the snapshot's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Version {
    /// The file as the named step left it in `<task>/<step>/output/`, in the success numbered
    /// `sequence`: a step that runs again (recovery) makes a new version of its files.
    Step { step: String, sequence: u64 },
    /// Deleted by a step.
    Deleted,
}

/// The repository's changes as seen by one step: snapshot plus these versions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Overlay {
    pub(crate) versions: BTreeMap<RepoPath, Version>,
}

impl Overlay {
    /// The changes of the succeeded steps in `only` (all of them when `None`), applied in the
    /// flow's topological order (see `Flow::topological_order`), so that steps running at the
    /// same time give the same result as one after another.
    pub(crate) fn from_status(
        status: &FlowStatus,
        flow: &ocflow_model::flow::Flow,
        only: Option<&BTreeSet<String>>,
    ) -> Overlay {
        let rank: HashMap<&str, usize> = flow
            .topological_order()
            .into_iter()
            .enumerate()
            .map(|(i, id)| (id, i))
            .collect();
        let mut succeeded = status.succeeded();
        succeeded.sort_by_key(|s| {
            (
                rank.get(s.id.as_str()).copied().unwrap_or(usize::MAX),
                s.sequence,
            )
        });
        let mut versions = BTreeMap::new();
        for step in succeeded {
            if only.is_some_and(|only| !only.contains(&step.id)) {
                continue;
            }
            for file in &step.output_files {
                if let Ok(path) = RepoPath::parse(file) {
                    versions.insert(
                        path,
                        Version::Step {
                            step: step.id.clone(),
                            sequence: step.sequence.unwrap_or(0),
                        },
                    );
                }
            }
            for file in &step.deleted_files {
                if let Ok(path) = RepoPath::parse(file) {
                    versions.insert(path, Version::Deleted);
                }
            }
        }
        Overlay { versions }
    }

    /// The paths whose version differs between this overlay and `other`, in order.
    pub(crate) fn differing(&self, other: &Overlay) -> Vec<RepoPath> {
        let paths: BTreeSet<&RepoPath> =
            self.versions.keys().chain(other.versions.keys()).collect();
        paths
            .into_iter()
            .filter(|path| self.versions.get(*path) != other.versions.get(*path))
            .cloned()
            .collect()
    }

    /// The file holding `path`'s content as this overlay sees it, or `None` if it does not exist.
    /// Never leaves the task directory, even through a symlink in the snapshot.
    pub(crate) fn source(&self, task: &TaskDir, path: &RepoPath) -> Result<Option<PathBuf>> {
        let file = match self.versions.get(path) {
            Some(Version::Deleted) => return Ok(None),
            Some(Version::Step { step, .. }) => {
                path.under(&task.step_dir(step).join(workspace::OUTPUT_DIR))
            }
            None => path.under(&task.snapshot()),
        };
        if fs::symlink_metadata(&file).is_err() {
            return Ok(None);
        }
        let root = task
            .root
            .canonicalize()
            .io_context(|| format!("resolving {}", task.root.display()))?;
        // A dangling link, a directory, or a link leading out of the task: nothing a flow can
        // read there (validation refuses such paths; this guards what changed since).
        match file.canonicalize() {
            Ok(real) if real.starts_with(&root) && real.is_file() => Ok(Some(real)),
            _ => Ok(None),
        }
    }
}

/// Copies the current version of each of `paths` into `input_dir`; returns those that exist.
pub(crate) fn stage_inputs(
    task: &TaskDir,
    overlay: &Overlay,
    paths: &[RepoPath],
    input_dir: &Path,
) -> Result<Vec<RepoPath>> {
    let mut staged = Vec::new();
    for path in paths {
        if let Some(source) = overlay.source(task, path)? {
            let dest = path.under(input_dir);
            copy_file(&source, &dest)?;
            staged.push(path.clone());
        }
    }
    Ok(staged)
}

/// Copies one file, creating the destination's parent directories.
fn copy_file(source: &Path, dest: &Path) -> Result<()> {
    if let Some(parent) = dest.parent() {
        fs::create_dir_all(parent).io_context(|| format!("creating {}", parent.display()))?;
    }
    fs::copy(source, dest)
        .io_context(|| format!("copying {} to {}", source.display(), dest.display()))?;
    Ok(())
}

/// Puts a copy of `source` at `path` under `root`, whatever stands there now: a file or
/// symlink where a directory is needed, or a directory where the file goes, is removed first
/// (a path can change from file to directory and back within a flow).
fn place_file(root: &Path, path: &RepoPath, source: &Path) -> Result<()> {
    place_file_marking(root, path, source, &mut |_| Ok(()))
}

/// `place_file`, telling `replaced` of each directory it made where something else stood.
pub(crate) fn place_file_marking(
    root: &Path,
    path: &RepoPath,
    source: &Path,
    replaced: &mut dyn FnMut(&Path) -> Result<()>,
) -> Result<()> {
    let mut current = root.to_path_buf();
    let parts: Vec<&str> = path.as_str().split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        current.push(part);
        let stood = match fs::symlink_metadata(&current) {
            Ok(meta) if meta.is_dir() => continue,
            Ok(_) => {
                remove_any(&current)?;
                true
            }
            Err(_) => false,
        };
        fs::create_dir(&current).io_context(|| format!("creating {}", current.display()))?;
        if stood {
            replaced(&current)?;
        }
    }
    let dest = path.under(root);
    remove_any(&dest)?;
    fs::copy(source, &dest)
        .io_context(|| format!("copying {} to {}", source.display(), dest.display()))?;
    Ok(())
}

/// Removes a file, symlink or directory tree if there is one.
pub(crate) fn remove_any(path: &Path) -> Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => remove_tree(path),
        Ok(_) => fs::remove_file(path).io_context(|| format!("removing {}", path.display())),
        Err(_) => Ok(()),
    }
}

/// What is wrong with what a step left in its `output/` directory: the step fails with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct OutputError(pub(crate) String);

/// The files a step left in its `output/` directory. Anything but regular files and
/// directories (a symlink, a fifo) and any path a flow may not write is an error.
pub(crate) fn list_outputs(output_dir: &Path) -> Result<Vec<RepoPath>, OutputError> {
    let mut outputs = Vec::new();
    if !output_dir.exists() {
        return Ok(outputs);
    }
    for entry in WalkDir::new(output_dir).follow_links(false).min_depth(1) {
        let entry = entry
            .map_err(|err| OutputError(format!("cannot read {}: {err}", output_dir.display())))?;
        let kind = entry.file_type();
        if kind.is_dir() {
            continue;
        }
        let relative = entry
            .path()
            .strip_prefix(output_dir)
            .unwrap_or(entry.path())
            .display()
            .to_string();
        if !kind.is_file() {
            return Err(OutputError(format!(
                "the step left {relative} in output/, which is not a regular file (symlinks are \
                 not accepted)"
            )));
        }
        outputs.push(
            RepoPath::parse(&relative)
                .map_err(|err| OutputError(format!("the step wrote output/{relative}: {err}")))?,
        );
    }
    outputs.sort();
    Ok(outputs)
}

/// Makes `final_output/` hold the latest version of every file the flow changed: copies a
/// step's outputs there and removes what it deleted.
pub(crate) fn publish(
    task: &TaskDir,
    step_id: &str,
    outputs: &[String],
    deletions: &[String],
) -> Result<()> {
    let final_dir = task.final_output();
    let output_dir = task.step_dir(step_id).join(workspace::OUTPUT_DIR);
    // Deletions first: a deleted file may be where a directory of new outputs goes.
    for file in deletions {
        interrupt::check()?;
        remove_any(&final_dir.join(file))?;
    }
    for file in outputs {
        interrupt::check()?;
        let path = RepoPath::parse(file).map_err(|problem| Error::BadStateFile {
            path: task.file(workspace::STATUS_FILE),
            problem: format!("the recorded output {file}: {problem}; it was edited by hand"),
        })?;
        place_file(&final_dir, &path, &output_dir.join(file))?;
    }
    Ok(())
}

/// Rebuilds `final_output/` from the recorded outputs of the succeeded steps, so that a crash
/// between a step's status write and its publishing leaves nothing stale.
pub fn rebuild_final_output(
    task: &TaskDir,
    status: &FlowStatus,
    flow: &ocflow_model::flow::Flow,
) -> Result<()> {
    remove_tree(&task.final_output())?;
    fs::create_dir_all(task.final_output())
        .io_context(|| format!("creating {}", task.final_output().display()))?;
    let overlay = Overlay::from_status(status, flow, None);
    for (path, version) in &overlay.versions {
        interrupt::check()?;
        if let Version::Step { step, .. } = version {
            publish(task, step, &[path.as_str().to_string()], &[])?;
        }
    }
    Ok(())
}

/// What identifies a file's state without reading it: as `git status` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    inode: u64,
    mode: u32,
}

impl Stamp {
    fn of_stat(stat: &rustix::fs::Stat) -> Stamp {
        Stamp {
            len: stat.st_size as u64,
            mtime_ns: i128::from(stat.st_mtime) * 1_000_000_000 + i128::from(stat.st_mtime_nsec),
            ctime_ns: i128::from(stat.st_ctime) * 1_000_000_000 + i128::from(stat.st_ctime_nsec),
            inode: stat.st_ino,
            mode: stat.st_mode,
        }
    }

    fn of(meta: &fs::Metadata) -> Stamp {
        Stamp {
            len: meta.len(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
            inode: meta.ino(),
            mode: meta.mode(),
        }
    }
}

/// Calls `visit(relative path, stamp, is regular file)` for every file, symlink and special
/// file under `root`, skipping excluded directories. Like `find`, it works relative to each
/// directory (`openat`, `fstatat`), so no path is resolved from the root for every file.
fn stat_walk(root: &Path, visit: &mut dyn FnMut(&str, Stamp, bool)) -> Result<()> {
    use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, openat, statat};
    fn walk_dir(
        dir: &std::os::fd::OwnedFd,
        absolute: &Path,
        relative: &mut String,
        visit: &mut dyn FnMut(&str, Stamp, bool),
    ) -> io::Result<()> {
        for entry in Dir::read_from(dir)? {
            if interrupt::raised() {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let entry = entry?;
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if name == "." || name == ".." {
                continue;
            }
            let mut kind = entry.file_type();
            let stat = if kind == FileType::Directory {
                None
            } else {
                Some(statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?)
            };
            if kind == FileType::Unknown {
                let stat = statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
                kind = FileType::from_raw_mode(stat.st_mode);
            }
            let length = relative.len();
            if !relative.is_empty() {
                relative.push('/');
            }
            relative.push_str(name);
            match (kind, stat) {
                (FileType::Directory, _) => {
                    if !repo_path::is_excluded_dir(absolute, name) {
                        let child = openat(
                            dir,
                            name,
                            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                            Mode::empty(),
                        )?;
                        walk_dir(&child, &absolute.join(name), relative, visit)?;
                    }
                }
                (_, Some(stat)) => visit(
                    relative,
                    Stamp::of_stat(&stat),
                    kind == FileType::RegularFile,
                ),
                (_, None) => {}
            }
            relative.truncate(length);
        }
        Ok(())
    }
    let mut open = || -> io::Result<()> {
        let fd = rustix::fs::open(
            root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        walk_dir(&fd, root, &mut String::new(), visit)
    };
    let walked = open().io_context(|| format!("walking {}", root.display()));
    interrupt::check()?;
    walked
}

/// Files whose timestamps are this close to the moment the view was last recorded are compared
/// by content: the file-system clock is coarse, so a write right after the record could keep
/// the same timestamps.
const RACY_WINDOW_NS: i128 = 20_000_000;

/// The full view of the repository that command steps run in: a directory kept equal to the
/// snapshot plus the versions in `applied`.
pub(crate) struct View {
    root: PathBuf,
    manifest: HashMap<RepoPath, Stamp>,
    /// What a capture reported as never leaving the view (a symlink a command made, a special
    /// file), with its stamp then: reported again only once it changes, as a view made of
    /// layers reports it only when a command writes it.
    ignored: HashMap<RepoPath, Stamp>,
    applied: Overlay,
    recorded_at_ns: i128,
}

/// What a command step changed in the view.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Captured {
    pub(crate) output_files: Vec<String>,
    pub(crate) deleted_files: Vec<String>,
    /// Paths that changed but cannot be carried (symlinks, special files).
    pub(crate) ignored: Vec<String>,
    /// The first file the command wrote at a path longer than a flow keeps
    /// (`repo_path::MAX_PATH_BYTES`): the step fails naming it (`too_long_message`).
    pub(crate) too_long: Option<String>,
}

/// Whether a path a command wrote is longer than any flow path may be. Such a file could not
/// be staged, published or applied (the kernel refuses paths of 4096 bytes and more in one
/// call), so it fails the step rather than vanish or stop the flow.
pub(crate) fn is_too_long(path: &str) -> bool {
    path.len() > repo_path::MAX_PATH_BYTES
}

/// The first file, symlink or special file under `dir` (relative to it), found relative to
/// each directory: it works however deep the tree goes.
pub(crate) fn first_file_under(dir: &Path) -> Result<Option<String>> {
    let mut first = None;
    stat_walk(dir, &mut |path, _, _| {
        first.get_or_insert_with(|| path.to_string());
    })?;
    Ok(first)
}

/// The part of a too-long `path` (see `is_too_long`) where it first crosses the limit: the
/// ancestor (or the path itself) to remove so that nothing too deep stays in a view.
pub(crate) fn too_long_root(path: &str) -> &str {
    path.match_indices('/')
        .map(|(at, _)| &path[..at])
        .find(|prefix| is_too_long(prefix))
        .unwrap_or(path)
}

/// Removes what lies at `at`, a tree or a file; std's `remove_dir_all` works relative to each
/// directory, so depth is no obstacle.
pub(crate) fn remove_entry(at: &Path) -> Result<()> {
    let removed = match fs::symlink_metadata(at) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(at),
        Ok(_) => fs::remove_file(at),
        Err(_) => Ok(()),
    };
    removed.io_context(|| format!("removing {}", at.display()))
}

/// Why a step that wrote `path` (see `is_too_long`) failed: the path, shortened, with its
/// length and depth, the limit, and what to do.
pub(crate) fn too_long_message(path: &str) -> String {
    let shown = if path.chars().count() > 60 {
        let head: String = path.chars().take(30).collect();
        let tail: String = path
            .chars()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("{head}…{tail}")
    } else {
        path.to_string()
    };
    format!(
        "the command wrote {shown}, a path of {} bytes, {} directories deep; a flow keeps paths of \
         at most {} bytes (longer ones fail with \"File name too long\"): make the tree \
         shallower or keep it out of the repository",
        path.len(),
        path.matches('/').count(),
        repo_path::MAX_PATH_BYTES
    )
}

impl View {
    /// Builds a fresh view from the snapshot, replacing any left by an earlier process.
    pub(crate) fn create(task: &TaskDir, root: PathBuf) -> Result<View> {
        remove_tree(&root)?;
        copy_tree(&task.snapshot(), &root, &[])?;
        let mut view = View {
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
    pub(crate) fn open(task: &TaskDir, root: PathBuf) -> Result<View> {
        if !root.is_dir() {
            return View::create(task, root);
        }
        let snapshot = task.snapshot();
        let walk_files = |base: &Path| -> Result<Vec<(RepoPath, fs::FileType)>> {
            let mut found = Vec::new();
            for entry in WalkDir::new(base)
                .follow_links(false)
                .min_depth(1)
                .into_iter()
                .filter_entry(|e| !is_skipped(e, &[]))
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
                (Ok(a), Ok(b)) if a.is_file() && b.is_file() => same_content(Some(&there), &here)?,
                _ => false,
            };
            if !same {
                remove_any(&here)?;
            }
        }
        for (path, kind) in walk_files(&snapshot)? {
            interrupt::check()?;
            let (here, there) = (path.under(&root), path.under(&snapshot));
            if fs::symlink_metadata(&here).is_ok() {
                continue;
            }
            if kind.is_symlink() {
                let target = fs::read_link(&there)
                    .io_context(|| format!("reading the link {}", there.display()))?;
                if let Some(parent) = here.parent() {
                    fs::create_dir_all(parent)
                        .io_context(|| format!("creating {}", parent.display()))?;
                }
                std::os::unix::fs::symlink(&target, &here)
                    .io_context(|| format!("creating the link {}", here.display()))?;
            } else {
                place_file(&root, &path, &there)?;
            }
        }
        let mut view = View {
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

    /// Makes the view show `desired`, touching only the paths where it differs from what the
    /// view shows now.
    pub(crate) fn sync(&mut self, task: &TaskDir, desired: &Overlay) -> Result<()> {
        for path in self.applied.differing(desired) {
            interrupt::check()?;
            let dest = path.under(&self.root);
            match desired.source(task, &path)? {
                Some(source) => place_file(&self.root, &path, &source)?,
                // A directory standing here holds other tracked paths; they are synced in turn.
                None if dest.is_dir() && !dest.is_symlink() => {}
                None => remove_any(&dest)?,
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
        stat_walk(&self.root, &mut |path, stamp, is_file| {
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
            if is_too_long(path.as_str()) {
                // Removed from the view from where it crosses the limit (beyond 4096 bytes
                // nothing could walk it again), as the view made of layers drops it.
                captured
                    .too_long
                    .get_or_insert_with(|| path.as_str().to_string());
                remove_entry(&self.root.join(too_long_root(path.as_str())))?;
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
            if !same_content(before.as_deref(), &file)? {
                copy_file(&file, &path.under(output_dir))?;
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
            stat_walk(&self.root, &mut |path, _, _| {
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
        stat_walk(&self.root, &mut |path, stamp, _| {
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

/// Whether `after` has exactly the content of `before` (`None`: did not exist).
pub(crate) fn same_content(before: Option<&Path>, after: &Path) -> Result<bool> {
    let Some(before) = before else {
        return Ok(false);
    };
    let (a, b) = (fs::metadata(before), fs::metadata(after));
    if let (Ok(a), Ok(b)) = (&a, &b)
        && a.len() != b.len()
    {
        return Ok(false);
    }
    let left = fs::read(before).io_context(|| format!("reading {}", before.display()))?;
    let right = fs::read(after).io_context(|| format!("reading {}", after.display()))?;
    Ok(left == right)
}

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}
