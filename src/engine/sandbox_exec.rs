//! `ocflow sandbox-exec` itself: what a command step's launcher does before it becomes the
//! command — the limits, then bubblewrap's namespaces, then Landlock (see `sandbox.rs` for the
//! layers and what each stops). This file depends on nothing else of ocflow: it is compiled into
//! `ocflow` (the `sandbox-exec` subcommand) and into `ocflow-sandbox`, a small binary without
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

/// Where ocflow makes a `pids` cgroup per command step (cgroup v1 hierarchy).
pub(crate) const PIDS_CGROUP: &str = "/sys/fs/cgroup/pids/ocflow";

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
    pub(crate) command: &'a [OsString],
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

/// What Landlock enforces here: `landlock`, `landlock-partial` or `none` (it restricts this
/// process, so a probe runs in a child of its own).
pub(crate) fn probe() -> Result<&'static str, String> {
    restrict(&[], true).map_err(|err| format!("cannot set up Landlock: {err}"))
}

enum Never {}

fn confine_and_exec(request: &ExecRequest<'_>) -> Result<Never, String> {
    let Some((program, args)) = request.command.split_first() else {
        return Err("give the command after `--`".into());
    };
    if !request.inner {
        limit_resources(request.memory_mb, request.max_processes)?;
        if let Some(bwrap) = request.bwrap {
            let error = bwrap_command(bwrap, request)?.exec();
            return Err(format!("cannot run {}: {error}", bwrap.display()));
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

/// The memory limit (`RLIMIT_DATA`) and the process limit: a `pids` cgroup of its own where
/// ocflow may make one. Not `RLIMIT_NPROC`: it counts every process and thread of the user (a
/// desktop's browser included), so a step would fail for what others run, and root ignores it.
fn limit_resources(memory_mb: Option<u64>, max_processes: Option<u64>) -> Result<(), String> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    if let Some(mb) = memory_mb {
        let bytes = mb.saturating_mul(1024 * 1024);
        let limit = Rlimit {
            current: Some(bytes),
            maximum: Some(bytes),
        };
        setrlimit(Resource::Data, limit).map_err(|err| format!("cannot limit memory: {err}"))?;
    }
    if let Some(max) = max_processes {
        // Where no cgroup can be made, the step runs without a process limit (results say so).
        join_pids_cgroup(max);
    }
    Ok(())
}

/// Moves this process into a new `pids` cgroup allowing `max` processes; whatever it starts
/// stays there. Cgroups left empty by earlier steps are removed first.
fn join_pids_cgroup(max: u64) -> bool {
    let root = Path::new(PIDS_CGROUP);
    if std::fs::create_dir_all(root).is_err() {
        return false;
    }
    // Sweeping waits on the kernel while groups' last processes exit: only when they pile up.
    let groups: Vec<_> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .collect();
    for entry in groups.iter().filter(|_| groups.len() > 64) {
        // A group is named after the sandbox-exec that made it (it becomes bubblewrap, keeping
        // its pid): one whose maker is gone is left over. One just made and not yet joined
        // must not go. Removal fails, harmlessly, while processes remain in it.
        let owner = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u32>().ok());
        if owner.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
    let group = root.join(std::process::id().to_string());
    std::fs::create_dir_all(&group).is_ok()
        && std::fs::write(group.join("pids.max"), max.to_string()).is_ok()
        && std::fs::write(group.join("cgroup.procs"), "0").is_ok()
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
