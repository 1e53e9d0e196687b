//! Overlays, mounted without privileges in a user and mount namespace of the launcher's own
//! (Linux 5.11): the view a command sees (its changes land in the step's upper layer), the
//! repository's dependencies layered the same way or bound read-only, the probe that says
//! whether this machine can, and removing what an overlay leaves.

use std::path::{Path, PathBuf};

/// A view shown to the command through the kernel's overlayfs, mounted on `target` (the view's
/// directory) in a user and mount namespace of the launcher's own, before bubblewrap starts:
/// the read-only layers `lower` (top first) under `upper`, where whatever the command creates,
/// changes or deletes lands (deletions as whiteouts).
#[derive(Debug, Clone, Copy)]
pub struct Overlay<'a> {
    pub target: &'a Path,
    pub lower: &'a [PathBuf],
    pub upper: &'a Path,
    pub work: &'a Path,
}

/// Mounts `overlay` in a new user and mount namespace of this process (overlayfs may be
/// mounted without privileges there since Linux 5.11). The user keeps its own ids inside.
fn mount_overlay(overlay: Overlay<'_>) -> Result<(), String> {
    enter_own_namespace()?;
    mount_overlay_here(overlay, "")
}

/// Moves this process into a new user and mount namespace, keeping its ids, with every mount
/// private: what it mounts then is seen by it and its children only.
pub(crate) fn enter_own_namespace() -> Result<(), String> {
    use rustix::mount::{MountPropagationFlags, mount_change};
    use rustix::thread::{UnshareFlags, unshare_unsafe};
    let (uid, gid) = (
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw(),
    );
    let refused = |what: &str, err: std::io::Error| format!("cannot {what} for the overlay: {err}");
    // SAFETY: the launcher is single-threaded; no other thread shares its file table or
    // credentials.
    unsafe { unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWNS) }
        .map_err(|err| refused("make a user and mount namespace", err.into()))?;
    std::fs::write("/proc/self/setgroups", "deny")
        .and_then(|()| std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1")))
        .and_then(|()| std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1")))
        .map_err(|err| refused("map the user", err))?;
    mount_change(
        "/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .map_err(|err| refused("make the mounts private", err.into()))?;
    Ok(())
}

/// Shows the dependency directory `source` at `target` in the view through an overlay whose
/// upper layer is the step's own (`dependency-INDEX` in its private directory), in the
/// namespace `enter_own_namespace` made. False where it cannot be mounted.
pub(crate) fn overlay_dependency(
    private: &Path,
    index: usize,
    source: &Path,
    target: &Path,
) -> bool {
    let layer = private.join(format!("dependency-{index}"));
    let (upper, work) = (layer.join("upper"), layer.join("work"));
    let made = [&upper, &work, &target.to_path_buf()]
        .iter()
        .all(|dir| std::fs::create_dir_all(dir).is_ok());
    let lower = [source.to_path_buf()];
    let overlay = Overlay {
        target,
        lower: &lower,
        upper: &upper,
        work: &work,
    };
    // Thrown away with the step, as the caches' layers are: `volatile` where the kernel has it.
    made && (mount_overlay_here(overlay, ",volatile").is_ok()
        || mount_overlay_here(overlay, "").is_ok())
}

/// Shows the build directory `source` of the repository at `target` in the view through an
/// overlay whose upper layer is `layer/upper` (kept by the host from step to step), in the
/// namespace `enter_own_namespace` made. Where the repository has no such directory the
/// overlay's lower layer is `layer/empty`: what a build writes is still kept apart.
pub(crate) fn overlay_build_output(
    source: &Path,
    target: &Path,
    layer: &Path,
) -> Result<(), String> {
    let (upper, work, empty) = (layer.join("upper"), layer.join("work"), layer.join("empty"));
    let lower = [if source.is_dir() {
        source.to_path_buf()
    } else {
        empty.clone()
    }];
    for dir in [&upper, &work, &empty, &target.to_path_buf()] {
        std::fs::create_dir_all(dir)
            .map_err(|err| format!("cannot make {} for the build layer: {err}", dir.display()))?;
    }
    let overlay = Overlay {
        target,
        lower: &lower,
        upper: &upper,
        work: &work,
    };
    mount_overlay_here(overlay, "")
}

/// Binds each dependency directory (source, place in the view) read-only, in the namespace
/// `enter_own_namespace` made (the mount point made if missing). The read-only remount keeps
/// the flags the source's mount has (`nosuid`, `nodev`…): a user namespace may not drop them.
pub(crate) fn bind_read_only_here(pairs: &[(PathBuf, PathBuf)]) -> Result<(), String> {
    use rustix::fs::StatVfsMountFlags as Has;
    use rustix::mount::{MountFlags, mount_bind_recursive, mount_remount};
    for (source, target) in pairs {
        let refused = |what: &str, err: std::io::Error| {
            format!(
                "cannot {what} {} read-only in the view: {err}",
                source.display()
            )
        };
        std::fs::create_dir_all(target).map_err(|err| refused("make a place for", err))?;
        mount_bind_recursive(source, target).map_err(|err| refused("bind", err.into()))?;
        let has = rustix::fs::statvfs(source)
            .map(|stat| stat.f_flag)
            .unwrap_or(Has::empty());
        let mut flags = MountFlags::BIND | MountFlags::RDONLY;
        for (kept, flag) in [
            (Has::NOSUID, MountFlags::NOSUID),
            (Has::NODEV, MountFlags::NODEV),
            (Has::NOEXEC, MountFlags::NOEXEC),
            (Has::NOATIME, MountFlags::NOATIME),
            (Has::NODIRATIME, MountFlags::NODIRATIME),
            (Has::RELATIME, MountFlags::RELATIME),
        ] {
            if has.contains(kept) {
                flags |= flag;
            }
        }
        mount_remount(target, flags, "").map_err(|err| refused("show", err.into()))?;
    }
    Ok(())
}

/// Mounts `overlay`, in the namespace `enter_own_namespace` made, with overlayfs's `options`
/// besides the layers (`,volatile`, or none).
pub(crate) fn mount_overlay_here(overlay: Overlay<'_>, options: &str) -> Result<(), String> {
    use rustix::mount::{MountFlags, mount};
    let refused = |what: &str, err: std::io::Error| format!("cannot {what} for the overlay: {err}");
    // `userxattr`: in a user namespace overlayfs keeps its marks (opaque directories) in
    // `user.overlay.*` attributes; without it, removing a directory fails with EIO.
    let lower: Vec<String> = overlay.lower.iter().map(|p| escape(p)).collect();
    let options = format!(
        "userxattr,lowerdir={},upperdir={},workdir={}{options}",
        lower.join(":"),
        escape(overlay.upper),
        escape(overlay.work)
    );
    let cwd = std::env::current_dir().ok();
    mount(
        "overlay",
        overlay.target,
        "overlay",
        MountFlags::empty(),
        std::ffi::CString::new(options)
            .map_err(|err| refused("use the paths", std::io::Error::other(err)))?
            .as_c_str(),
    )
    .map_err(|err| refused("mount", err.into()))?;
    // The command starts in the view: entered again by its path, the directory is the
    // overlay's, not the one beneath it.
    if let Some(cwd) = cwd {
        std::env::set_current_dir(&cwd).map_err(|err| refused("enter the view", err))?;
    }
    Ok(())
}

/// A path as an overlayfs option takes it: commas and colons separate options and layers, and
/// a backslash escapes them.
fn escape(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        if matches!(c, '\\' | ',' | ':') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Whether overlays can be mounted in `dir` as views use them: two read-only layers, the upper
/// one hiding a file of the lower one with a whiteout made without privileges, mounted on a
/// scratch directory. Unshares this process, so it runs in a child of its own (`sandbox-exec
/// --probe`).
pub fn probe_overlay(dir: &Path) -> bool {
    use rustix::fs::{CWD, FileType, Mode, makedev, mknodat};
    let root = dir.join(format!(".ocflow-overlay-probe-{}", std::process::id()));
    let [mnt, top, bottom, upper, work] =
        ["mnt", "top", "bottom", "upper", "work"].map(|name| root.join(name));
    let made = [&mnt, &top, &bottom.join("dir"), &upper, &work]
        .iter()
        .all(|dir| std::fs::create_dir_all(dir).is_ok())
        && std::fs::write(bottom.join("dir/file"), "x").is_ok()
        && std::fs::write(bottom.join("hidden"), "x").is_ok()
        && mknodat(
            CWD,
            top.join("hidden"),
            FileType::CharacterDevice,
            Mode::empty(),
            makedev(0, 0),
        )
        .is_ok();
    // A write and a directory's removal through the overlay (the second needs the file
    // system to take overlayfs's marks), and the whiteout honoured.
    let lower = [top, bottom];
    let works = made
        && mount_overlay(Overlay {
            target: &mnt,
            lower: &lower,
            upper: &upper,
            work: &work,
        })
        .is_ok()
        && std::fs::write(mnt.join("probe"), "x").is_ok()
        && upper.join("probe").is_file()
        && std::fs::symlink_metadata(mnt.join("hidden")).is_err()
        && std::fs::remove_dir_all(mnt.join("dir")).is_ok();
    let _ = rustix::mount::unmount(&mnt, rustix::mount::UnmountFlags::DETACH);
    remove_overlay_dirs(&root);
    works
}

/// Removes a tree an overlay used: its work directory holds a directory without permissions.
pub fn remove_overlay_dirs(root: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for entry in walk_dirs(root) {
        let _ = std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o700));
    }
    let _ = std::fs::remove_dir_all(root);
}

/// Every directory under `root` (itself included), made readable on the way.
fn walk_dirs(root: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let mut found = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    todo.push(entry.path());
                }
            }
        }
        found.push(dir);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_escaped_where_overlayfs_would_split_it() {
        assert_eq!(escape(Path::new("/a,b:c\\d/e")), "/a\\,b\\:c\\\\d/e");
        assert_eq!(escape(Path::new("/plain/path")), "/plain/path");
    }

    #[test]
    fn removing_an_overlay_tree_takes_directories_without_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("layers");
        let locked = root.join("work/work");
        std::fs::create_dir_all(&locked).unwrap();
        std::fs::write(locked.join("f"), "x").unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        remove_overlay_dirs(&root);
        assert!(!root.exists());
    }
}
