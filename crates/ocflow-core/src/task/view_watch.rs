//! Watching a copied view (inotify) for the paths a command touches, so that finding what a
//! step changed costs what the command touched instead of a stat walk of the whole repository
//! (20,000 files made every command step several times dearer than on 10).
//!
//! The kernel queues an event as each write, creation, removal or rename happens, so once the
//! command has ended (and whatever it left running was stopped) every path it touched is in
//! the queue. A file written through a shared mapping was opened for writing first, which is
//! an event too. What events cannot describe exactly — a directory made, removed or moved
//! (its files came or went without their own events), a full queue, a `Cargo.toml` (it decides
//! whether `target/` is a build directory) — makes the answer `Touched::Unknown`, and the view
//! is walked whole, as it always was. Where inotify is not available (no instance or watch
//! left under the user's limits), there is no watch and the view is always walked.

use std::collections::{BTreeSet, HashMap};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use walkdir::WalkDir;

use crate::task::file_tree;
use ocflow_model::repo_path;

/// The one file whose coming or going changes which directories are walked (`target/` is a
/// build directory only beside it, `repo_path::is_excluded_dir`).
const DECIDES_EXCLUSION: &str = "Cargo.toml";

/// Beyond this many directories a view is walked instead of watched: each watch holds kernel
/// memory, and the user's watches (`fs.inotify.max_user_watches`) are shared by every view
/// and every other program (8,192 was the kernel's default limit).
const MAX_WATCHED_DIRS: usize = 8192;

/// What the events since the last look say was touched in the view.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Touched {
    /// The paths (relative to the view, `/`-separated) of the files, symlinks and special
    /// files that were written, made, removed, renamed or changed mode; perhaps unchanged.
    Paths(BTreeSet<String>),
    /// Something the events cannot describe path by path happened: walk the whole view.
    Unknown,
}

/// An inotify instance watching every directory of a view that a walk of it visits.
pub(crate) struct ViewWatch {
    fd: OwnedFd,
    root: PathBuf,
    /// Each watch's directory, relative to the view ("" for the view itself).
    dirs: HashMap<i32, String>,
}

impl ViewWatch {
    /// Watches every directory of the view at `root` that a walk visits (not build or
    /// dependency directories). `None` when inotify cannot be had here (the user's instances
    /// or watches are used up, more than `MAX_WATCHED_DIRS` directories, or one cannot be
    /// read): the view is walked instead.
    pub(crate) fn start(root: &Path) -> Option<ViewWatch> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok()?;
        let mut watch = ViewWatch {
            fd,
            root: root.to_path_buf(),
            dirs: HashMap::new(),
        };
        let walk = WalkDir::new(root)
            .follow_links(false)
            .into_iter()
            .filter_entry(|entry| !file_tree::is_skipped(entry, &[]));
        for entry in walk {
            let entry = entry.ok()?;
            if !entry.file_type().is_dir() {
                continue;
            }
            if watch.dirs.len() >= MAX_WATCHED_DIRS {
                return None;
            }
            let relative = entry.path().strip_prefix(root).ok()?.to_str()?.to_string();
            let wd = inotify::add_watch(&watch.fd, entry.path(), mask()).ok()?;
            watch.dirs.insert(wd, relative);
        }
        Some(watch)
    }

    /// Reads every event queued since the last call: what was touched, or `Unknown`.
    pub(crate) fn drain(&mut self) -> Touched {
        let mut buffer = vec![MaybeUninit::<u8>::uninit(); 64 * 1024];
        let mut reader = inotify::Reader::new(&self.fd, &mut buffer);
        let mut paths = BTreeSet::new();
        let mut unknown = false;
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::INTR) => continue,
                // An unreadable queue tells nothing: the walk decides.
                Err(_) => return Touched::Unknown,
            };
            let flags = event.events();
            if flags.intersects(
                ReadFlags::QUEUE_OVERFLOW
                    | ReadFlags::IGNORED
                    | ReadFlags::DELETE_SELF
                    | ReadFlags::MOVE_SELF
                    | ReadFlags::UNMOUNT,
            ) {
                // Keep reading: the queue must be empty when the view is walked again.
                unknown = true;
                continue;
            }
            // An event about a watched directory itself (its mode, its times): directories
            // are not tracked.
            let Some(name) = event.file_name() else {
                continue;
            };
            let Some(dir) = self.dirs.get(&event.wd()) else {
                unknown = true;
                continue;
            };
            // A name that is not UTF-8 is skipped by the walk too.
            let Ok(name) = name.to_str() else {
                continue;
            };
            if flags.contains(ReadFlags::ISDIR) {
                let made_or_gone = ReadFlags::CREATE
                    | ReadFlags::DELETE
                    | ReadFlags::MOVED_FROM
                    | ReadFlags::MOVED_TO;
                let parent = self.root.join(dir);
                if flags.intersects(made_or_gone) && !repo_path::is_excluded_dir(&parent, name) {
                    unknown = true;
                }
                continue;
            }
            if name == DECIDES_EXCLUSION {
                unknown = true;
            }
            paths.insert(if dir.is_empty() {
                name.to_string()
            } else {
                format!("{dir}/{name}")
            });
        }
        if unknown {
            Touched::Unknown
        } else {
            Touched::Paths(paths)
        }
    }
}

/// The events that can mean a tracked path changed. Opening or reading is not one; a write
/// through a shared mapping needs a descriptor opened for writing, whose closing is.
fn mask() -> WatchFlags {
    WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::DONT_FOLLOW
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn paths(watch: &mut ViewWatch) -> Vec<String> {
        match watch.drain() {
            Touched::Paths(paths) => paths.into_iter().collect(),
            Touched::Unknown => panic!("expected paths"),
        }
    }

    #[test]
    fn names_the_files_touched_and_nothing_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::create_dir_all(root.join("node_modules/x")).unwrap();
        for file in [
            "top.txt",
            "a/b/deep.txt",
            "a/gone.txt",
            "a/read.txt",
            "a/mode.sh",
        ] {
            fs::write(root.join(file), "x\n").unwrap();
        }
        let mut watch = ViewWatch::start(root).unwrap();
        assert_eq!(paths(&mut watch), Vec::<String>::new());
        fs::write(root.join("a/b/deep.txt"), "y\n").unwrap();
        fs::remove_file(root.join("a/gone.txt")).unwrap();
        fs::rename(root.join("top.txt"), root.join("a/moved.txt")).unwrap();
        fs::read(root.join("a/read.txt")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(root.join("a/mode.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("x", root.join("link")).unwrap();
        // Dependency directories are never walked, so never watched.
        fs::write(root.join("node_modules/x/i.js"), "z\n").unwrap();
        assert_eq!(
            paths(&mut watch),
            [
                "a/b/deep.txt",
                "a/gone.txt",
                "a/mode.sh",
                "a/moved.txt",
                "link",
                "top.txt"
            ]
        );
        // Read once: the next look starts empty.
        assert_eq!(paths(&mut watch), Vec::<String>::new());
    }

    #[test]
    fn a_queue_that_overflowed_means_walking() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut watch = ViewWatch::start(root).unwrap();
        // Each file written is at least two events (made, then closed after writing): more
        // than the kernel queues for one instance.
        let queued: usize = fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .map_or(16384, |text| text.trim().parse().unwrap_or(16384));
        for i in 0..queued / 2 + 100 {
            fs::write(root.join(format!("f{i}")), "x").unwrap();
        }
        assert_eq!(watch.drain(), Touched::Unknown);
    }

    #[test]
    fn a_directory_made_removed_or_moved_or_a_cargo_manifest_means_walking() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("a/b")).unwrap();
        let mut watch = ViewWatch::start(root).unwrap();
        let mut expect_unknown = |change: &dyn Fn()| {
            change();
            assert_eq!(watch.drain(), Touched::Unknown);
            // The watch is made again after a walk: as the view does.
            watch = ViewWatch::start(root).unwrap();
        };
        expect_unknown(&|| fs::create_dir(root.join("new")).unwrap());
        expect_unknown(&|| fs::rename(root.join("new"), root.join("a/renamed")).unwrap());
        expect_unknown(&|| fs::remove_dir_all(root.join("a/b")).unwrap());
        expect_unknown(&|| fs::write(root.join("a/Cargo.toml"), "[package]\n").unwrap());
        // A build directory made or removed is not walked: nothing to learn.
        fs::create_dir(root.join("a/target")).unwrap();
        fs::create_dir(root.join("__pycache__")).unwrap();
        fs::write(root.join("a/target/app"), "bin").unwrap();
        assert_eq!(paths(&mut watch), Vec::<String>::new());
    }
}
