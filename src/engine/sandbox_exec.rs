//! `ocflow sandbox-exec` itself: what a command step's launcher does before it becomes the
//! command — the limits and the step's cgroup, then bubblewrap's namespaces (or, without them,
//! the socket filter), then Landlock (see `sandbox.rs` for the layers and what each stops).
//! This file depends on nothing else of ocflow but its two neighbours `step_cgroup.rs` and
//! `socket_filter.rs`: it is compiled into `ocflow` (the `sandbox-exec` subcommand) and, with
//! them, into `ocflow-sandbox`, a small binary without
//! the embedded Python that starts in a fraction of the time, which launchers use when it is
//! installed beside `ocflow`.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    Scope, path_beneath_rules,
};

/// The Landlock ABI ocflow asks for (file system and TCP rights, scopes); older kernels enforce
/// what they can, and results say `landlock-partial`.
const ABI_VERSION: ABI = ABI::V6;

/// Directories hidden from commands behind an empty tmpfs: they hold the host's sockets
/// (`/run/docker.sock`, `/run/dbus/system_bus_socket`, `/run/user/…`, tmux's and ssh-agent's
/// in `/tmp`). A step's `/tmp` is its own; its view and temporary directory are bound in.
const HIDDEN: &[&str] = &["/run", "/tmp"];

/// What `ocflow sandbox-exec` was asked to do.
pub(crate) struct ExecRequest<'a> {
    pub(crate) writable: &'a [PathBuf],
    pub(crate) network: bool,
    pub(crate) bwrap: Option<&'a Path>,
    pub(crate) memory_mb: Option<u64>,
    pub(crate) max_processes: Option<u64>,
    /// Already inside the namespaces: only Landlock is left to apply.
    pub(crate) inner: bool,
    /// Files and directories the command must not see (the key file).
    pub(crate) hidden: &'a [PathBuf],
    /// The step's cgroup, named by the host (`step_cgroup::name`).
    pub(crate) cgroup: Option<&'a str>,
    /// Install the socket filter (`socket_filter.rs`): no network and no network namespace.
    pub(crate) refuse_udp: bool,
    /// The view to show through an overlay, so that the command's changes land elsewhere.
    pub(crate) overlay: Option<Overlay<'a>>,
    pub(crate) command: &'a [OsString],
}

/// A view shown to the command through the kernel's overlayfs, mounted on `target` (the view's
/// directory) in a user and mount namespace of the launcher's own, before bubblewrap starts:
/// the read-only layers `lower` (top first) under `upper`, where whatever the command creates,
/// changes or deletes lands (deletions as whiteouts).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Overlay<'a> {
    pub(crate) target: &'a Path,
    pub(crate) lower: &'a [PathBuf],
    pub(crate) upper: &'a Path,
    pub(crate) work: &'a Path,
}

/// Credential stores in the home directory a command has no business reading: hidden with
/// namespaces (a command could print them, and a failed step's output goes into the recovery
/// prompt, to the model).
const SECRETS_IN_HOME: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".docker",
    ".kube",
    ".config/gcloud",
    ".config/gh",
    ".password-store",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
];

/// Confines this process, then becomes the command. Only returns on failure, with the reason.
pub(crate) fn exec(request: &ExecRequest<'_>) -> String {
    match confine_and_exec(request) {
        Ok(never) => match never {},
        Err(problem) => problem,
    }
}

/// What this machine allows, in four lines: what Landlock enforces (`landlock`,
/// `landlock-partial` or `none`), then `overlay` or `no-overlay` (an overlay whose upper
/// directory is in `dir`, the temporary directory when `None`), then `seccomp` when the socket
/// filter holds (a UDP socket refused) or `no-seccomp`, then `cgroup` when this process could
/// join a step cgroup as a launcher does (`<pid>.probe`, which the caller removes) or
/// `no-cgroup`. It joins, unshares and restricts this process, so a probe runs in a child of
/// its own.
pub(crate) fn probe(dir: Option<&Path>) -> Result<String, String> {
    // First, as the launcher does: in a user namespace or under Landlock it could not.
    let cgroups = super::step_cgroup::Hierarchies::find();
    let name = format!("{}.probe", std::process::id());
    // With limits, as a launcher sets them (a million MiB: none that binds).
    let joined = cgroups.join(&name, Some(4096), Some(1 << 20)).is_ok();
    let cgroup = if cgroups.ends_steps() && joined {
        "cgroup"
    } else {
        "no-cgroup"
    };
    let overlay = if probe_overlay(&dir.map_or_else(std::env::temp_dir, Path::to_path_buf)) {
        "overlay"
    } else {
        "no-overlay"
    };
    let landlock = restrict(&[], true).map_err(|err| format!("cannot set up Landlock: {err}"))?;
    let seccomp = super::socket_filter::refuse_datagrams().is_ok()
        && std::net::UdpSocket::bind("127.0.0.1:0").is_err();
    let seccomp = if seccomp { "seccomp" } else { "no-seccomp" };
    Ok(format!("{landlock}\n{overlay}\n{seccomp}\n{cgroup}"))
}

enum Never {}

fn confine_and_exec(request: &ExecRequest<'_>) -> Result<Never, String> {
    let Some((program, args)) = request.command.split_first() else {
        return Err("give the command after `--`".into());
    };
    if !request.inner {
        limit_resources(request.memory_mb, request.max_processes, request.cgroup)?;
        if let Some(overlay) = request.overlay {
            mount_overlay(overlay)?;
        }
        if let Some(bwrap) = request.bwrap {
            let error = bwrap_command(bwrap, request)?.exec();
            return Err(format!("cannot run {}: {error}", bwrap.display()));
        }
        if request.refuse_udp {
            super::socket_filter::refuse_datagrams()?;
        }
    }
    restrict(request.writable, request.network)
        .map_err(|err| format!("cannot set up Landlock: {err}"))?;
    let error = std::process::Command::new(program).args(args).exec();
    Err(format!("cannot run {}: {error}", program.to_string_lossy()))
}

/// bubblewrap around `ocflow sandbox-exec --inner … -- COMMAND`.
fn bwrap_command(bwrap: &Path, request: &ExecRequest<'_>) -> Result<std::process::Command, String> {
    // The same launcher, whichever binary it is (`ocflow` or `ocflow-sandbox`): both take
    // `sandbox-exec` first.
    let exe = std::env::current_exe().map_err(|err| format!("cannot find ocflow: {err}"))?;
    let mut command = std::process::Command::new(bwrap);
    command.args([
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-ipc",
    ]);
    command.arg("--unshare-uts");
    if !request.network {
        command.arg("--unshare-net");
    }
    command.args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
    for hidden in HIDDEN {
        command.args(["--tmpfs", hidden]);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let secrets = home
        .iter()
        .flat_map(|home| SECRETS_IN_HOME.iter().map(|s| home.join(s)));
    for secret in secrets.chain(request.hidden.iter().cloned()) {
        match std::fs::metadata(&secret) {
            Ok(meta) if meta.is_dir() => command.arg("--tmpfs").arg(&secret),
            Ok(_) => command.arg("--ro-bind").arg("/dev/null").arg(&secret),
            Err(_) => continue,
        };
    }
    // After the tmpfs mounts, so what lies beneath one of them stays reachable: ocflow itself
    // (for the inner launcher) and the writable paths, but not the hidden directories whole.
    if HIDDEN.iter().any(|hidden| exe.starts_with(hidden)) {
        command.arg("--ro-bind").arg(&exe).arg(&exe);
    }
    let bound = |p: &&PathBuf| {
        p.exists()
            && !p.starts_with("/dev")
            && !HIDDEN.iter().any(|hidden| p.as_path() == Path::new(hidden))
    };
    for path in request.writable.iter().filter(bound) {
        command.arg("--bind").arg(path).arg(path);
    }
    command.arg("--").arg(exe).args(["sandbox-exec", "--inner"]);
    // The private /tmp holds nothing of the host's: the command may use it as it likes.
    for path in request
        .writable
        .iter()
        .map(PathBuf::as_path)
        .chain([Path::new("/tmp")])
    {
        command.arg("--write").arg(path);
    }
    // Inside a private network namespace TCP reaches only the step's own loopback (test suites
    // start local servers there): Landlock's TCP rules are for when there is no such namespace.
    command.arg("--network");
    command.arg("--").args(request.command);
    Ok(command)
}

/// Mounts `overlay` in a new user and mount namespace of this process (overlayfs may be
/// mounted without privileges there since Linux 5.11). The user keeps its own ids inside.
pub(crate) fn mount_overlay(overlay: Overlay<'_>) -> Result<(), String> {
    use rustix::mount::{MountFlags, MountPropagationFlags, mount, mount_change};
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
    // Commas and colons separate overlayfs options and layers; a backslash escapes them.
    let escape = |path: &Path| {
        let mut out = String::new();
        for c in path.to_string_lossy().chars() {
            if matches!(c, '\\' | ',' | ':') {
                out.push('\\');
            }
            out.push(c);
        }
        out
    };
    // `userxattr`: in a user namespace overlayfs keeps its marks (opaque directories) in
    // `user.overlay.*` attributes; without it, removing a directory fails with EIO.
    let lower: Vec<String> = overlay.lower.iter().map(|p| escape(p)).collect();
    let options = format!(
        "userxattr,lowerdir={},upperdir={},workdir={}",
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

/// Whether overlays can be mounted in `dir` as views use them: two read-only layers, the upper
/// one hiding a file of the lower one with a whiteout made without privileges, mounted on a
/// scratch directory. Unshares this process, so it runs in a child of its own (`sandbox-exec
/// --probe`).
pub(crate) fn probe_overlay(dir: &Path) -> bool {
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
pub(crate) fn remove_overlay_dirs(root: &Path) {
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

/// The limits: the step's cgroup (`step_cgroup.rs`: its processes, its memory as a whole, and
/// everything it starts kept for the host to kill at the step's end) where one can be made,
/// and `RLIMIT_DATA` for each process in any case. Not `RLIMIT_NPROC`: it counts every process
/// and thread of the user (a desktop's browser included), so a step would fail for what
/// others run, and root ignores it.
fn limit_resources(
    memory_mb: Option<u64>,
    max_processes: Option<u64>,
    cgroup: Option<&str>,
) -> Result<(), String> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    if let Some(mb) = memory_mb {
        let bytes = mb.saturating_mul(1024 * 1024);
        let limit = Rlimit {
            current: Some(bytes),
            maximum: Some(bytes),
        };
        setrlimit(Resource::Data, limit).map_err(|err| format!("cannot limit memory: {err}"))?;
    }
    // The host names a group only where its probe could join one, and then says the limits
    // hold per step: a group it named that cannot be joined stops the command. Without a
    // name (no cgroup here), the step runs with the rlimit alone, and results say so.
    match cgroup {
        Some(name) => super::step_cgroup::Hierarchies::find().join(name, max_processes, memory_mb),
        None => Ok(()),
    }
}

/// Restricts this process to reading everywhere and writing only beneath `writable` (paths
/// that do not exist are left out), and, unless `network`, to no TCP connect or bind. Returns
/// what the kernel enforced.
fn restrict(writable: &[PathBuf], network: bool) -> Result<&'static str, String> {
    let existing: Vec<&Path> = writable
        .iter()
        .map(PathBuf::as_path)
        .filter(|p| p.exists())
        .collect();
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI_VERSION))
        .map_err(|err| err.to_string())?;
    if !network {
        // Handled with no port allowed: every TCP connect and bind is refused.
        ruleset = ruleset
            .handle_access(AccessNet::from_all(ABI_VERSION))
            .map_err(|e| e.to_string())?;
    }
    let status = ruleset
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .and_then(|ruleset| ruleset.create())
        .and_then(|ruleset| {
            ruleset.add_rules(path_beneath_rules(["/"], AccessFs::from_read(ABI_VERSION)))
        })
        .and_then(|ruleset| {
            ruleset.add_rules(path_beneath_rules(
                existing,
                AccessFs::from_all(ABI_VERSION),
            ))
        })
        .and_then(|ruleset| ruleset.restrict_self())
        .map_err(|err| err.to_string())?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => "landlock",
        RulesetStatus::PartiallyEnforced => "landlock-partial",
        RulesetStatus::NotEnforced => "none",
    })
}
