//! `ocflow sandbox-exec` itself: what a command step's launcher does before it becomes the
//! command — the limits and the step's cgroup, then bubblewrap's namespaces (or, without them,
//! the socket filter), then Landlock (see `ocflow-core`'s `engine/sandbox.rs` for the layers and
//! what each stops).

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
pub struct ExecRequest<'a> {
    pub writable: &'a [PathBuf],
    pub network: bool,
    pub bwrap: Option<&'a Path>,
    /// bubblewrap makes no PID namespace and binds the container's `/proc` (see `SandboxArgs`).
    pub shared_proc: bool,
    pub memory_mb: Option<u64>,
    pub max_processes: Option<u64>,
    /// Already inside the namespaces: only Landlock is left to apply.
    pub inner: bool,
    /// Files and directories the command must not see (the key file).
    pub hidden: &'a [PathBuf],
    /// The step's cgroup, named by the host (`step_cgroup::name`).
    pub cgroup: Option<&'a str>,
    /// Install the socket filter (`socket_filter.rs`): no network and no network namespace.
    pub refuse_udp: bool,
    /// The view to show through an overlay, so that the command's changes land elsewhere.
    pub overlay: Option<Overlay<'a>>,
    /// The user's tool caches: the command reads them, and writes only a layer of its own.
    pub caches: &'a [Cache],
    /// Whether to try overlays for the caches (else the command gets empty caches of its own).
    pub cache_overlay: bool,
    /// The step's private directory: its caches' layers and its own `/var/tmp`.
    pub private: Option<&'a Path>,
    /// The repository's installed dependencies, shown read-only in the view.
    pub dependencies: Option<Dependencies<'a>>,
    pub command: &'a [OsString],
}

/// The repository's dependency directories (`node_modules`, `.venv`), which views never hold,
/// shown to the command read-only at the same places in its view: `dirs` (relative paths)
/// bound from `from` (the repository) onto `into` (the view), nothing copied. Given to the
/// launcher as `--dependencies-from REPO --dependencies-into VIEW --dependency REL…`.
#[derive(Debug, Clone, Copy)]
pub struct Dependencies<'a> {
    pub from: &'a Path,
    pub into: &'a Path,
    pub dirs: &'a [PathBuf],
}

impl Dependencies<'_> {
    /// Each directory's source in the repository and its place in the view. A place that is
    /// not plainly inside the view is left out: an earlier command may have left a symlink
    /// where the repository has a directory (`web -> /home/…`), and the mount point made
    /// through it would land outside.
    fn pairs(&self) -> impl Iterator<Item = (PathBuf, PathBuf)> + '_ {
        self.dirs
            .iter()
            .filter(|dir| plainly_inside(self.into, dir))
            .map(|dir| (self.from.join(dir), self.into.join(dir)))
    }
}

/// Whether `relative` names a place under `root` through directories only: no `..`, no
/// symlink on the way (the last component may be missing: it is the mount point).
fn plainly_inside(root: &Path, relative: &Path) -> bool {
    use std::path::Component;
    let mut current = root.to_path_buf();
    for part in relative.components() {
        let Component::Normal(name) = part else {
            return false;
        };
        current.push(name);
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return false,
            Err(_) => return true,
        }
    }
    true
}

/// A user's tool cache (`~/.cache`, `~/.npm`, `CARGO_HOME`…) and the variable that moves it
/// (`XDG_CACHE_HOME`, `npm_config_cache`, `CARGO_HOME`…), given to the launcher as
/// `--cache VARIABLE:PATH`. A command reads it, never changes it: it sees it through an overlay
/// whose upper layer is the step's, or, where no overlay can be mounted, the variable points at
/// an empty directory of the step's and the user's stays read-only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    pub variable: String,
    pub path: PathBuf,
}

impl Cache {
    /// `VARIABLE:PATH` (a variable has no colon; the path may).
    pub fn parse(arg: &std::ffi::OsStr) -> Option<Cache> {
        let text = arg.to_str()?;
        let (variable, path) = text.split_once(':')?;
        Some(Cache {
            variable: variable.to_string(),
            path: PathBuf::from(path),
        })
    }
}

/// A step's own `/var/tmp`, in its private directory (the host's is shared by every process
/// and survives the step).
const PRIVATE_VAR_TMP: &str = "var-tmp";

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
pub fn exec(request: &ExecRequest<'_>) -> String {
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
pub fn probe(dir: Option<&Path>) -> Result<String, ProbeError> {
    // First, as the launcher does: in a user namespace or under Landlock it could not.
    let cgroups = crate::step_cgroup::Hierarchies::find();
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
    let landlock = restrict(&[], true).map_err(ProbeError::Landlock)?;
    let seccomp = crate::socket_filter::refuse_datagrams().is_ok()
        && std::net::UdpSocket::bind("127.0.0.1:0").is_err();
    let seccomp = if seccomp { "seccomp" } else { "no-seccomp" };
    Ok(format!("{landlock}\n{overlay}\n{seccomp}\n{cgroup}"))
}

/// Why the probe could not say what this machine allows.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// Restricting the probe's own process failed outright (not merely unsupported, which
    /// the probe reports as `none`): the kernel or the system refused Landlock's calls.
    #[error("cannot set up Landlock: {0}")]
    Landlock(String),
}

enum Never {}

fn confine_and_exec(request: &ExecRequest<'_>) -> Result<Never, String> {
    let Some((program, args)) = request.command.split_first() else {
        return Err("give the command after `--`".into());
    };
    let mut private = Private::default();
    let mut writable = request.writable.to_vec();
    if !request.inner {
        limit_resources(request.memory_mb, request.max_processes, request.cgroup)?;
        // A user and mount namespace of the launcher's own, for the view's overlay (which must
        // be mounted) and the caches' (which may fall back to directories of the step's).
        let wants_caches = request.cache_overlay && request.private.is_some();
        // Without bubblewrap the dependencies are bound here, in that namespace.
        let binds_here = request.bwrap.is_none() && request.dependencies.is_some();
        let needs_namespace = request.overlay.is_some() || binds_here;
        let own_namespace = if needs_namespace || wants_caches {
            match enter_own_namespace() {
                Ok(()) => true,
                Err(problem) if needs_namespace => return Err(problem),
                Err(_) => false,
            }
        } else {
            false
        };
        if let Some(overlay) = request.overlay {
            mount_overlay_here(overlay, "")?;
        }
        // The repository's dependencies: through an overlay whose upper layer is the step's
        // own where one can be mounted (tools write there, nyc and babel their
        // `node_modules/.cache`; what they write goes with the step), else read-only, bound
        // here or by bubblewrap.
        let mut read_only = Vec::new();
        for (index, (source, target)) in request
            .dependencies
            .iter()
            .flat_map(|d| d.pairs())
            .enumerate()
        {
            let layered = own_namespace
                && request.cache_overlay
                && request
                    .private
                    .is_some_and(|dir| overlay_dependency(dir, index, &source, &target));
            if !layered {
                read_only.push((source, target));
            }
        }
        if binds_here {
            bind_read_only_here(&read_only)?;
        }
        if let Some(dir) = request.private {
            private = make_private(request, dir, own_namespace)?;
            writable.extend(private.writable.iter().cloned());
        }
        private.read_only_dependencies = read_only;
        if let Some(bwrap) = request.bwrap {
            let mut command = bwrap_command(bwrap, request, &writable, &private)?;
            let error = command.envs(private.env.iter().cloned()).exec();
            return Err(format!("cannot run {}: {error}", bwrap.display()));
        }
        if request.refuse_udp {
            crate::socket_filter::refuse_datagrams().map_err(|err| err.to_string())?;
        }
    }
    // Whatever user started the step, its command holds no capability: run by root, it kept
    // them all, on the host without a user namespace, and inside bubblewrap's namespaces too
    // (where those not namespaced, loading a module or setting the clock, reach the host).
    crate::capabilities::drop_all()?;
    restrict(&writable, request.network).map_err(|err| format!("cannot set up Landlock: {err}"))?;
    let error = std::process::Command::new(program)
        .args(args)
        .envs(private.env.iter().cloned())
        .exec();
    Err(format!("cannot run {}: {error}", program.to_string_lossy()))
}

/// What the step's private directory gives the command: paths it may write (caches seen
/// through their overlays, the directories standing in for the others, its `/var/tmp`), the
/// variables pointing tools at those directories, and a `/var/tmp` for bubblewrap to bind.
#[derive(Debug, Default)]
struct Private {
    writable: Vec<PathBuf>,
    /// The user's caches left read-only: bubblewrap binds them, so one beneath a hidden
    /// directory (a home in `/tmp`) stays readable.
    read_only: Vec<PathBuf>,
    env: Vec<(String, PathBuf)>,
    var_tmp: Option<PathBuf>,
    /// The dependency directories no overlay could show: bubblewrap binds them read-only
    /// (source, place in the view).
    read_only_dependencies: Vec<(PathBuf, PathBuf)>,
}

/// Makes the step's private layers in `dir`: each cache through an overlay where `own_namespace`
/// allows one (the user's cache the lower layer, the step's directory the upper one), else a
/// directory of the step's named by the cache's variable (the user's left read-only); and a
/// `/var/tmp` of the step's, mounted here in the launcher's namespace or bound by bubblewrap
/// (without either, `/var/tmp` stays read-only).
fn make_private(
    request: &ExecRequest<'_>,
    dir: &Path,
    own_namespace: bool,
) -> Result<Private, String> {
    let made = |path: &Path| {
        std::fs::create_dir_all(path)
            .map_err(|err| format!("cannot make {}: {err}", path.display()))
    };
    let mut private = Private::default();
    for (index, cache) in request.caches.iter().enumerate() {
        let layer = dir.join(format!("cache-{index}"));
        let (upper, work) = (layer.join("upper"), layer.join("work"));
        let mounted = request.cache_overlay
            && own_namespace
            && cache.path.is_dir()
            && made(&upper).is_ok()
            && made(&work).is_ok()
            && {
                let overlay = Overlay {
                    target: &cache.path,
                    lower: std::slice::from_ref(&cache.path),
                    upper: &upper,
                    work: &work,
                };
                // `volatile` (Linux 5.10): the layer is thrown away with the step, so its
                // unmount need not sync the upper file system (which costs milliseconds on a
                // busy disk); older kernels refuse the option.
                mount_overlay_here(overlay, ",volatile").is_ok()
                    || mount_overlay_here(overlay, "").is_ok()
            };
        if mounted {
            private.writable.push(cache.path.clone());
            continue;
        }
        if cache.path.is_dir() {
            private.read_only.push(cache.path.clone());
        }
        if cache.variable.is_empty() {
            continue;
        }
        let own = layer.join("own");
        made(&own)?;
        if cache.variable == "CARGO_HOME" {
            // Cargo's settings live in its home: the step's starts with the user's (not the
            // credentials, which no command needs).
            for name in ["config.toml", "config"] {
                let _ = std::fs::copy(cache.path.join(name), own.join(name));
            }
        }
        private.env.push((cache.variable.clone(), own.clone()));
        private.writable.push(own);
    }
    let var_tmp = dir.join(PRIVATE_VAR_TMP);
    made(&var_tmp)?;
    if request.bwrap.is_some() {
        private.var_tmp = Some(var_tmp);
    } else if own_namespace && rustix::mount::mount_bind(&var_tmp, "/var/tmp").is_ok() {
        private.writable.push(PathBuf::from("/var/tmp"));
    }
    Ok(private)
}

/// bubblewrap around `ocflow sandbox-exec --inner … -- COMMAND`.
fn bwrap_command(
    bwrap: &Path,
    request: &ExecRequest<'_>,
    writable: &[PathBuf],
    private: &Private,
) -> Result<std::process::Command, String> {
    // The same launcher, whichever binary it is (`ocflow` or `ocflow-sandbox`): both take
    // `sandbox-exec` first.
    let exe = std::env::current_exe().map_err(|err| format!("cannot find ocflow: {err}"))?;
    let mut command = std::process::Command::new(bwrap);
    command.args(["--die-with-parent", "--new-session", "--unshare-ipc"]);
    command.arg("--unshare-uts");
    if !request.network {
        command.arg("--unshare-net");
    }
    command.args(["--ro-bind", "/", "/", "--dev", "/dev"]);
    if request.shared_proc {
        // The kernel mounts no fresh /proc in a user namespace while the container's has
        // locked mounts over it; without CAP_SYS_ADMIN bubblewrap needs that user namespace
        // for the others. The step's processes then show among the container's.
        command.args(["--unshare-user", "--ro-bind", "/proc", "/proc"]);
    } else {
        command.args(["--unshare-pid", "--proc", "/proc"]);
    }
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
    for path in private.read_only.iter().filter(bound) {
        command.arg("--ro-bind").arg(path).arg(path);
    }
    for path in writable.iter().filter(bound) {
        command.arg("--bind").arg(path).arg(path);
    }
    // Over the view's writable bind, so they stay read-only in it; bubblewrap makes the
    // mount points (an empty directory in the view, which captures skip).
    for (source, target) in &private.read_only_dependencies {
        command.arg("--ro-bind").arg(source).arg(target);
    }
    if let Some(var_tmp) = &private.var_tmp {
        command.arg("--bind").arg(var_tmp).arg("/var/tmp");
    }
    command.arg("--").arg(exe).args(["sandbox-exec", "--inner"]);
    // The private /tmp holds nothing of the host's: the command may use it as it likes.
    let var_tmp = private.var_tmp.as_ref().map(|_| Path::new("/var/tmp"));
    for path in writable
        .iter()
        .map(PathBuf::as_path)
        .chain([Path::new("/tmp")])
        .chain(var_tmp)
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
fn mount_overlay(overlay: Overlay<'_>) -> Result<(), String> {
    enter_own_namespace()?;
    mount_overlay_here(overlay, "")
}

/// Moves this process into a new user and mount namespace, keeping its ids, with every mount
/// private: what it mounts then is seen by it and its children only.
fn enter_own_namespace() -> Result<(), String> {
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
fn overlay_dependency(private: &Path, index: usize, source: &Path, target: &Path) -> bool {
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

/// Binds each dependency directory (source, place in the view) read-only, in the namespace
/// `enter_own_namespace` made (the mount point made if missing). The read-only remount keeps
/// the flags the source's mount has (`nosuid`, `nodev`…): a user namespace may not drop them.
fn bind_read_only_here(pairs: &[(PathBuf, PathBuf)]) -> Result<(), String> {
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
fn mount_overlay_here(overlay: Overlay<'_>, options: &str) -> Result<(), String> {
    use rustix::mount::{MountFlags, mount};
    let refused = |what: &str, err: std::io::Error| format!("cannot {what} for the overlay: {err}");
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
        Some(name) => crate::step_cgroup::Hierarchies::find()
            .join(name, max_processes, memory_mb)
            .map_err(|err| err.to_string()),
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
