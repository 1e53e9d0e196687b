//! File trees on disk, as staging needs them: copying a tree (by several threads, symlinks
//! kept as symlinks), placing one file whatever stands at its path, removing trees with a check
//! for a signal between files, and the stat walk (with each file's `Stamp`) that finds what a
//! command changed without reading the files.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use walkdir::WalkDir;

use crate::task::interrupt;
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::repo_path::{self, RepoPath};

/// What a copy of a tree contained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeStats {
    pub files: u64,
    pub bytes: u64,
    pub duration_ms: u64,
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

/// Gives `dest` the modification time of `source`: a copy of the repository then looks to build
/// tools as old as the repository's files, so what the user built from them is still fresh
/// (cargo compares times; a snapshot of new times rebuilt every crate of the repository). A
/// file whose time cannot be set keeps the copy's: it is built again, never wrongly skipped.
// The stat fields' types differ between targets: the casts are needed on some.
#[allow(clippy::unnecessary_cast)]
fn keep_modified_time(source: &Path, dest: &Path) {
    use rustix::fs::{AtFlags, CWD, Timestamps, statat, utimensat};
    let Ok(stat) = statat(CWD, source, AtFlags::SYMLINK_NOFOLLOW) else {
        return;
    };
    let time = |seconds: i64, nanos: u64| rustix::fs::Timespec {
        tv_sec: seconds,
        tv_nsec: nanos as _,
    };
    let times = Timestamps {
        last_access: time(stat.st_atime as i64, stat.st_atime_nsec as u64),
        last_modification: time(stat.st_mtime as i64, stat.st_mtime_nsec as u64),
    };
    let _ = utimensat(CWD, dest, &times, AtFlags::SYMLINK_NOFOLLOW);
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
        copy_link(source, dest)?;
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
                        keep_modified_time(source, dest);
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

/// Makes `dest` a symlink with the target of the symlink `source`: a link is copied, never
/// followed.
pub(crate) fn copy_link(source: &Path, dest: &Path) -> Result<()> {
    let target =
        fs::read_link(source).io_context(|| format!("reading the link {}", source.display()))?;
    std::os::unix::fs::symlink(&target, dest)
        .io_context(|| format!("creating the link {}", dest.display()))
}

/// Whether a walk of a tree leaves this entry out: a directory staging excludes (see
/// `repo_path::is_excluded_dir`) or one of `skip`; never the tree's root.
pub(crate) fn is_skipped(entry: &walkdir::DirEntry, skip: &[PathBuf]) -> bool {
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

/// Copies one file, creating the destination's parent directories.
pub(crate) fn copy_file(source: &Path, dest: &Path) -> Result<()> {
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
pub(crate) fn place_file(root: &Path, path: &RepoPath, source: &Path) -> Result<()> {
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

/// What identifies a file's state without reading it: as `git status` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) len: u64,
    pub(crate) mtime_ns: i128,
    pub(crate) ctime_ns: i128,
    pub(crate) inode: u64,
    pub(crate) mode: u32,
    /// How many names the file has: a view's file with another name can change without an
    /// event naming it (`task::view_watch`).
    pub(crate) links: u64,
}

impl Stamp {
    // `st_nlink` is 64 bits wide on x86-64, 32 on some other architectures.
    #[allow(clippy::useless_conversion)]
    pub(crate) fn of_stat(stat: &rustix::fs::Stat) -> Stamp {
        Stamp {
            len: stat.st_size as u64,
            mtime_ns: i128::from(stat.st_mtime) * 1_000_000_000 + i128::from(stat.st_mtime_nsec),
            ctime_ns: i128::from(stat.st_ctime) * 1_000_000_000 + i128::from(stat.st_ctime_nsec),
            inode: stat.st_ino,
            mode: stat.st_mode,
            links: u64::from(stat.st_nlink),
        }
    }

    pub(crate) fn of(meta: &fs::Metadata) -> Stamp {
        Stamp {
            len: meta.len(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
            inode: meta.ino(),
            mode: meta.mode(),
            links: meta.nlink(),
        }
    }
}

/// The stack of the thread a walk runs on: a frame a directory deep, and a command may make a
/// tree thousands deep (3000 took 8 MB of a debug build's stack, the main thread's whole
/// limit; 256 MB takes some 90,000).
/// Only what is used is committed.
const WALK_STACK_BYTES: usize = 256 << 20;

/// Calls `visit(relative path, stamp, is regular file)` for every file, symlink and special
/// file under `root`, skipping excluded directories. Like `find`, it works relative to each
/// directory (`openat`, `fstatat`), so no path is resolved from the root for every file, and
/// so no depth is too deep to open; the walk runs on a thread of its own with a stack as deep
/// as a tree may be.
pub(crate) fn stat_walk(
    root: &Path,
    visit: &mut (dyn FnMut(&str, Stamp, bool) + Send),
) -> Result<()> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("ocflow-walk".into())
            .stack_size(WALK_STACK_BYTES)
            .spawn_scoped(scope, || stat_walk_here(root, visit))
            .map_err(|err| Error::Io {
                context: format!("walking {}", root.display()),
                source: err,
            })?
            .join()
            .unwrap_or_else(|_| {
                Err(Error::Io {
                    context: format!("walking {}", root.display()),
                    source: io::Error::other("the walk's thread panicked"),
                })
            })
    })
}

fn stat_walk_here(root: &Path, visit: &mut dyn FnMut(&str, Stamp, bool)) -> Result<()> {
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
