//! `ocflow sandbox-exec` itself: what a command step's launcher does before it becomes the
//! command, in order — the limits and the step's cgroup (`limits`), the overlay view and the
//! step's private layers (`overlay`, `private_layers`), bubblewrap's namespaces (`bubblewrap`)
//! or, without them, the socket filter, no capability, then Landlock (`landlock_rules`). See
//! `ocflow-core`'s `engine/sandbox.rs` for the layers and what each stops, and this crate's
//! README.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use crate::bubblewrap::bwrap_command;
use crate::landlock_rules::restrict;
use crate::limits::limit_resources;
pub use crate::overlay::Overlay;
pub use crate::overlay::remove_overlay_dirs;
use crate::overlay::{
    bind_read_only_here, enter_own_namespace, mount_overlay_here, overlay_build_output,
    overlay_dependency, probe_overlay,
};
use crate::private_layers::{Private, make_private};

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

/// What of the repository a view never holds, shown to the command at the same places in its
/// view, nothing copied. Given to the launcher as `--dependencies-from REPO --dependencies-into
/// VIEW --dependency REL… --build-output REL… --build-layers DIR`.
///
/// - `dirs`: the dependency directories (`node_modules`, `.venv`) and `.git`, shown from `from`
///   (the repository) onto `into` (the view) read-only: through an overlay whose upper layer is
///   the step's own (thrown away with it), else bound read-only.
/// - `build_outputs`: the build directories (cargo's `target/` …), each shown through an
///   overlay of the repository's (or of nothing, where it has none) under the upper layer
///   `build_layers/INDEX`, which the host keeps from step to step of one view and removes at
///   the flow's end: a build reuses the user's, and what it writes never reaches it.
#[derive(Debug, Clone, Copy)]
pub struct Dependencies<'a> {
    pub from: &'a Path,
    pub into: &'a Path,
    pub dirs: &'a [PathBuf],
    pub build_outputs: &'a [PathBuf],
    pub build_layers: Option<&'a Path>,
}

impl Dependencies<'_> {
    /// Each directory's source in the repository and its place in the view. A place that is
    /// not plainly inside the view is left out: an earlier command may have left a symlink
    /// where the repository has a directory (`web -> /home/…`), and the mount point made
    /// through it would land outside.
    pub(crate) fn pairs(&self) -> impl Iterator<Item = (PathBuf, PathBuf)> + '_ {
        self.dirs
            .iter()
            .filter(|dir| plainly_inside(self.into, dir))
            .map(|dir| (self.from.join(dir), self.into.join(dir)))
    }

    /// Each build directory's source in the repository, its place in the view and its layer.
    pub(crate) fn build_pairs(&self) -> impl Iterator<Item = (PathBuf, PathBuf, PathBuf)> + '_ {
        let layers = self.build_layers;
        self.build_outputs
            .iter()
            .enumerate()
            .filter(|(_, dir)| plainly_inside(self.into, dir))
            .filter_map(move |(index, dir)| {
                let layer = layers?.join(index.to_string());
                Some((self.from.join(dir), self.into.join(dir), layer))
            })
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
        let binds_here =
            request.bwrap.is_none() && request.dependencies.is_some_and(|d| !d.dirs.is_empty());
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
        // The build directories, through the view's build layers: where none can be mounted
        // a build writes into the view, as any command does (slower, never wrong), and the
        // command's output says why.
        if own_namespace && request.cache_overlay {
            for (source, target, layer) in request.dependencies.iter().flat_map(|d| d.build_pairs())
            {
                if let Err(problem) = overlay_build_output(&source, &target, &layer) {
                    eprintln!(
                        "ocflow: the build directory is not shared with the repository's: {problem}"
                    );
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dependency_is_placed_only_plainly_inside_the_view() {
        let dir = tempfile::tempdir().unwrap();
        let view = dir.path().join("view");
        std::fs::create_dir_all(view.join("web")).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, view.join("linked")).unwrap();
        assert!(plainly_inside(&view, Path::new("web/node_modules")));
        assert!(plainly_inside(&view, Path::new("node_modules")));
        // A symlink on the way, or `..`, would put the mount point outside the view.
        assert!(!plainly_inside(&view, Path::new("linked/node_modules")));
        assert!(!plainly_inside(&view, Path::new("../elsewhere")));
        let dirs = [PathBuf::from("web"), PathBuf::from("linked/x")];
        let deps = Dependencies {
            from: Path::new("/repo"),
            into: &view,
            dirs: &dirs,
            build_outputs: &dirs,
            build_layers: Some(Path::new("/layers")),
        };
        let pairs: Vec<_> = deps.pairs().collect();
        assert_eq!(pairs, [(PathBuf::from("/repo/web"), view.join("web"))]);
        // A build directory's layer is named by its place in the list, left out or not.
        let built: Vec<_> = deps.build_pairs().collect();
        assert_eq!(
            built,
            [(
                PathBuf::from("/repo/web"),
                view.join("web"),
                PathBuf::from("/layers/0")
            )]
        );
    }

    #[test]
    fn a_cache_is_a_variable_and_a_path_that_may_hold_colons() {
        let cache = Cache::parse(std::ffi::OsStr::new("CARGO_HOME:/home/u/a:b")).unwrap();
        assert_eq!(cache.variable, "CARGO_HOME");
        assert_eq!(cache.path, PathBuf::from("/home/u/a:b"));
        assert!(Cache::parse(std::ffi::OsStr::new("no-colon")).is_none());
    }

    #[test]
    fn a_request_without_a_command_is_refused_before_anything_is_confined() {
        let request = ExecRequest {
            writable: &[],
            network: false,
            bwrap: None,
            shared_proc: false,
            memory_mb: None,
            max_processes: None,
            inner: true,
            hidden: &[],
            cgroup: None,
            refuse_udp: false,
            overlay: None,
            caches: &[],
            cache_overlay: false,
            private: None,
            dependencies: None,
            command: &[],
        };
        assert_eq!(exec(&request), "give the command after `--`");
    }
}
