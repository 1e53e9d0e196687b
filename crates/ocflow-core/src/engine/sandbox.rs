//! The command sandbox. The library starts every command step through
//! `ocflow sandbox-exec [OPTIONS] -- /bin/sh -c COMMAND`, which confines itself in layers and
//! then becomes the command:
//!
//! 1. **limits**: the step's cgroup where ocflow may make one (`step_cgroup.rs`): a process
//!    limit, a memory limit for all the step's processes together, and everything the step
//!    started killed at its end; `RLIMIT_DATA` for each process in any case, so a runaway step
//!    fails alone;
//! 2. **namespaces** (bubblewrap, where the kernel allows them): new PID, mount, network, IPC
//!    and UTS namespaces and a new session; a fresh `/proc` that shows only the step's
//!    processes (no other process's environment, no key); the whole file system read-only except
//!    the view, the step's temporary directory and the allowed caches (no `chmod`, `touch` or
//!    `setxattr` on the repository); `/run` hidden (no Docker or D-Bus socket); only loopback
//!    unless the step may use the network; and everything the step started dies with it;
//! 3. **Landlock**: writes only beneath the same paths, TCP connect and bind refused when the
//!    network is off (ABI 4), abstract Unix sockets and signals outside scoped off (ABI 6).
//!
//! Where namespaces are refused (an unprivileged container), layers 1 and 3 still hold, a
//! seccomp filter (`socket_filter.rs`) keeps UDP and raw packets in when the network is off,
//! and every result says the sandbox is partial, and what holds (`udp`, `memory`).

use std::path::{Path, PathBuf};

use crate::engine::dependencies::Dependencies;
use ocflow_model::error::{Error, IoContext};
use ocflow_model::step_spec::{Sandbox as StepSandbox, SandboxLayers};
use ocflow_sandbox::exec::Cache;
use ocflow_sandbox::step_cgroup::Hierarchies;

/// How command steps are confined, as probed once at start-up.
#[derive(Debug, Clone)]
pub struct SandboxPlan {
    /// bubblewrap, when it can make namespaces here (and `[sandbox] namespaces` is not off).
    pub bwrap: Option<PathBuf>,
    /// Whether bubblewrap makes no PID namespace and binds the container's `/proc`: where it
    /// can make the other namespaces but the kernel refuses it a fresh `/proc` (a container's
    /// masked `/proc`, without CAP_SYS_ADMIN).
    pub shared_proc: bool,
    /// What Landlock enforces: `landlock`, `landlock-partial` or `none`.
    pub landlock: String,
    /// Whether commands may open network connections (`[sandbox] network`).
    pub(crate) network: bool,
    /// Paths commands may write beneath besides their view and temporary directory.
    pub(crate) writable: Vec<PathBuf>,
    /// The user's tool caches: commands read them and write only a layer of the step's own.
    pub(crate) caches: Vec<Cache>,
    /// The memory a step may use, in MiB: for all its processes together where a memory
    /// cgroup can be made, else for each process (`RLIMIT_DATA`).
    pub(crate) memory_mb: u64,
    /// The processes a step may run at once.
    pub max_processes: u64,
    /// How the process limit is enforced: `cgroup`, or `none` where no cgroup can be made.
    pub process_limit: &'static str,
    /// Whether a memory cgroup holds each step's memory as a whole.
    pub(crate) memory_cgroup: bool,
    /// Where steps' cgroups are made, for the host to end them.
    pub(crate) cgroups: Hierarchies,
    /// Whether the socket filter (`socket_filter.rs`, seccomp) holds here: without a network
    /// namespace it is what keeps UDP in when the network is off.
    pub(crate) seccomp: bool,
    /// What commands must not see: the key file.
    pub(crate) hidden: Vec<PathBuf>,
    /// Whether command steps see their view through an overlay (their changes read from its
    /// upper directory, no walk of the view): where the user asked for it and the kernel
    /// allows it.
    pub overlay: bool,
    /// What the start-up probe had to leave out because a trial launch failed with it, and
    /// why: said once per flow, as a warning.
    pub fallbacks: Vec<String>,
}

/// What belongs to one step's launch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StepScope<'a> {
    /// The step's own directory for its caches' layers and its `/var/tmp` (emptied with it).
    pub(crate) private: &'a Path,
    /// The step's group, which the host ends with the step (`step_cgroup::name`).
    pub(crate) cgroup: &'a str,
    /// The repository's installed dependencies, bound read-only into the view (where
    /// `mounts_dependencies`).
    pub(crate) dependencies: Option<&'a Dependencies>,
    /// The view's build layers (`LayeredView::build_layers`), for a view made of layers.
    pub(crate) build_layers: Option<&'a Path>,
}

/// The settings a plan is made from.
#[derive(Debug)]
pub struct SandboxSettings {
    pub namespaces: bool,
    pub network: bool,
    pub writable: Vec<PathBuf>,
    pub caches: Vec<Cache>,
    pub memory_mb: u64,
    pub max_processes: u64,
    pub hidden: Vec<PathBuf>,
    /// Use overlays where the kernel allows them (on unless `[sandbox] overlay = false`).
    pub overlay: bool,
}

impl SandboxPlan {
    /// Probes what this machine enforces and makes the plan, or `None` when the kernel has
    /// neither namespaces ocflow may use nor Landlock (commands then run unconfined, and say
    /// so). A probe that cannot run is an error, not a silent "no sandbox".
    pub fn probe(settings: SandboxSettings) -> Result<Option<SandboxPlan>, Error> {
        // Two processes that know nothing of each other, each making namespaces (tens of
        // milliseconds on a quiet machine, several hundred on a loaded one): run at once, the
        // flow's start waits for the longer, not for both.
        let (landlock, found_bwrap) = std::thread::scope(|scope| {
            let bwrap = settings.namespaces.then(|| scope.spawn(usable_bwrap));
            let landlock = probe_landlock();
            // A probe thread that panicked found no bubblewrap: the sandbox line says so.
            let bwrap = bwrap.and_then(|thread| thread.join().ok().flatten());
            (landlock, bwrap)
        });
        let (landlock, overlay, seccomp, cgroup) = landlock?;
        let (bwrap, shared_proc, refused) = match found_bwrap {
            Some(Ok(bwrap)) => (Some(bwrap), false, None),
            Some(Err((bwrap, said))) if bwrap_works(&bwrap, SHARED_PROC) => {
                (Some(bwrap), true, Some(said))
            }
            Some(Err((_, said))) => (None, false, Some(said)),
            None => (None, false, None),
        };
        if bwrap.is_none() && landlock == "none" {
            return Ok(None);
        }
        // Only where a launcher could join one: the limits are then claimed per step.
        let cgroups = if cgroup {
            Hierarchies::find()
        } else {
            Hierarchies::default()
        };
        let process_limit = if cgroups.has_pids() { "cgroup" } else { "none" };
        let plan = SandboxPlan {
            bwrap,
            shared_proc,
            landlock,
            network: settings.network,
            writable: settings.writable,
            caches: settings.caches,
            memory_mb: settings.memory_mb,
            max_processes: settings.max_processes,
            process_limit,
            memory_cgroup: cgroups.has_memory(),
            cgroups,
            seccomp,
            hidden: settings.hidden,
            // The overlay is mounted in namespaces of the launcher's own.
            overlay: overlay && settings.overlay && settings.namespaces,
            // bubblewrap installed but refused (a container without CAP_SYS_ADMIN, where no
            // user namespace may mount `/proc` either) is worth a warning; not installed is the
            // user's choice, and the flow's sandbox line says what holds.
            fallbacks: refused
                .map(|said| {
                    let what = if shared_proc {
                        WITHOUT_PID_NAMESPACE
                    } else {
                        WITHOUT_NAMESPACES
                    };
                    format!(
                        "command steps run {what}: bubblewrap cannot make all its namespaces \
                         here ({said})"
                    )
                })
                .into_iter()
                .collect(),
        };
        plan.settle().map(Some)
    }

    /// The plan a command step can be launched with: with bubblewrap, this one if a trial
    /// launch (the launcher, with the arguments a step gets, running `true`) works, else the
    /// first that does of this one without overlays, without namespaces, without either, with
    /// the reason in `fallbacks`. Probing each layer alone is not enough: in a container
    /// running as root in its own PID namespace, bubblewrap works on its own but cannot mount
    /// `/proc` in the user namespace the launcher makes for overlays, and every step failed.
    fn settle(self) -> Result<SandboxPlan, Error> {
        if self.bwrap.is_none() {
            // Without bubblewrap, what can fail in a launch has a fallback of its own: a view's
            // overlay that cannot be mounted runs again in a copy, the caches and `/var/tmp`
            // fall back inside the launcher. The trial (a launch, tens of milliseconds at
            // start-up) is for bubblewrap inside the launcher's namespace.
            return Ok(self);
        }
        let refused = match self.try_launch() {
            Ok(()) => return Ok(self),
            Err(reason) => reason,
        };
        let (overlay, bwrap) = (self.overlay, self.bwrap.is_some());
        let shared_proc = self.shared_proc;
        let without_overlays =
            "without overlays (views are copies; tool caches start empty in each step)";
        // (namespaces, a PID namespace of their own, overlays, what that leaves)
        let mut candidates = Vec::new();
        if overlay {
            candidates.push((true, shared_proc, false, without_overlays.to_string()));
        }
        if bwrap && !shared_proc {
            candidates.push((true, true, overlay, WITHOUT_PID_NAMESPACE.to_string()));
            if overlay {
                let what = format!("{WITHOUT_PID_NAMESPACE}, {without_overlays}");
                candidates.push((true, true, false, what));
            }
        }
        if bwrap {
            candidates.push((false, false, overlay, WITHOUT_NAMESPACES.to_string()));
            if overlay {
                candidates.push((
                    false,
                    false,
                    false,
                    "without namespaces nor overlays".into(),
                ));
            }
        }
        for (keep_bwrap, share_proc, keep_overlay, what) in candidates {
            let mut next = self.clone();
            next.overlay = keep_overlay;
            next.shared_proc = keep_bwrap && share_proc;
            if !keep_bwrap {
                next.bwrap = None;
            }
            if next.try_launch().is_ok() {
                next.fallbacks.push(format!(
                    "command steps run {what}: the sandbox launcher failed with all its layers \
                     here ({refused})"
                ));
                return Ok(next);
            }
        }
        Err(Error::Usage(format!(
            "the sandbox launcher cannot run a command here ({refused}); run with --no-sandbox \
             to go on without it"
        )))
    }

    /// Launches `true` as a command step would be (a view made of layers when overlays are on,
    /// its temporary and private directories, the caches, bubblewrap), in a scratch directory
    /// of the temporary directory; the launcher's or bubblewrap's complaint when it fails.
    fn try_launch(&self) -> Result<(), String> {
        static TRIALS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let trial = TRIALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let trials = std::env::temp_dir().join(".ocflow-launch-trials");
        sweep_trials(&trials);
        let root = trials.join(format!("{}-{trial}", std::process::id()));
        let cgroup = format!("{}.trial-{trial}", std::process::id());
        let [view, lower, upper, work, temp, private] =
            ["view", "lower", "upper", "work", "tmp", "private"].map(|name| root.join(name));
        let made = [&view, &lower, &upper, &work, &temp]
            .iter()
            .all(|dir| std::fs::create_dir_all(dir).is_ok());
        let result = (|| {
            if !made {
                // No scratch space to try in: that says nothing of the layers (as before the
                // trial, they stand as probed).
                return Ok(());
            }
            let lower = [lower.clone()];
            let overlay = self.overlay.then_some(LauncherOverlay {
                lower: &lower,
                upper: &upper,
                work: &work,
            });
            let sandbox = self
                .launcher(
                    &view,
                    std::slice::from_ref(&temp),
                    false,
                    overlay,
                    StepScope {
                        private: &private,
                        cgroup: &cgroup,
                        dependencies: None,
                        build_layers: None,
                    },
                )
                .map_err(|err| err.to_string())?;
            let (program, args) = sandbox
                .launcher
                .split_first()
                .ok_or_else(|| "no launcher".to_string())?;
            let output = std::process::Command::new(program)
                .args(args)
                .args(["/bin/sh", "-c", "true"])
                .current_dir(&view)
                .stdin(std::process::Stdio::null())
                .output()
                .map_err(|err| format!("cannot run {program}: {err}"))?;
            if output.status.success() {
                return Ok(());
            }
            Err(complaint(&output))
        })();
        // The trial joined a group as a step does (named after this process, so a killed
        // start-up's is swept like a step's).
        self.cgroups.end(&cgroup);
        ocflow_sandbox::exec::remove_overlay_dirs(&root);
        result
    }

    /// The plan for one flow: without any writable path that would open `protected` (its
    /// repository and workspace, canonical). Landlock and bind mounts grant whole trees, so
    /// `/tmp` is left out when the repository lives in `/tmp`.
    pub fn protecting(&self, protected: &[PathBuf]) -> SandboxPlan {
        // Neither a tree holding the repository or workspace, nor one inside them (a
        // CARGO_HOME or TMPDIR in the repository, a repository in the home). A cache left out
        // stays read-only: an overlay on it would hide the step's view.
        let apart = |path: &Path| {
            let real = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
            !protected
                .iter()
                .any(|p| p.starts_with(&real) || real.starts_with(p))
        };
        SandboxPlan {
            writable: self.writable.iter().filter(|p| apart(p)).cloned().collect(),
            caches: self
                .caches
                .iter()
                .filter(|c| apart(&c.path))
                .cloned()
                .collect(),
            ..self.clone()
        }
    }

    /// What holds for a step, by layer; `network`: whether this step may use the network.
    pub fn layers(&self, network: bool) -> SandboxLayers {
        SandboxLayers {
            namespaces: self.bwrap.is_some(),
            proc: match (&self.bwrap, self.shared_proc) {
                (None, _) => "host",
                (Some(_), true) => "shared",
                (Some(_), false) => "own",
            }
            .into(),
            network: if network { "on" } else { "off" }.into(),
            landlock: self.landlock.clone(),
            processes: match self.process_limit {
                "none" => format!("not limited (no pids cgroup here){}", self.ends_steps()),
                how => format!("{} ({how})", self.max_processes),
            },
            memory_mb: self.memory_mb,
            memory: self.memory_limit(),
            udp: if self.holds_udp(network) {
                "blocked"
            } else {
                "open"
            }
            .into(),
            caches: if self.overlay { "overlay" } else { "private" }.into(),
            capabilities: "dropped".into(),
            core_dumps: false,
            partial: !self.isolates_processes() || self.landlock != "landlock",
        }
    }

    /// How far the memory limit reaches: `N MiB per step (cgroup)`, or `N MiB per process
    /// (rlimit)` where no memory cgroup can be made (four processes may then use four times
    /// it).
    fn memory_limit(&self) -> String {
        if self.memory_cgroup {
            format!("{} MiB per step (cgroup)", self.memory_mb)
        } else {
            format!("{} MiB per process (rlimit)", self.memory_mb)
        }
    }

    /// Where processes are not limited: whether what a step leaves is killed at its end all
    /// the same (a cgroup without controllers), said after the limit.
    fn ends_steps(&self) -> &'static str {
        if self.cgroups.ends_steps() {
            "; ended with the step (cgroup)"
        } else {
            ""
        }
    }

    /// Whether a step without the `network` it may use sends no datagram out: a network
    /// namespace of its own, or else the socket filter.
    fn holds_udp(&self, network: bool) -> bool {
        !network && (self.bwrap.is_some() || self.seccomp)
    }

    /// Whether commands see only their own processes (a PID namespace and a fresh `/proc`):
    /// else other processes' environments, the key's too, are within their reach.
    pub fn isolates_processes(&self) -> bool {
        self.bwrap.is_some() && !self.shared_proc
    }

    /// One word for the whole: `namespaces+landlock`, `namespaces`, `landlock`,
    /// `landlock-partial` (older kernel), the last two meaning namespaces were refused.
    pub fn kind(&self) -> String {
        match (&self.bwrap, self.landlock.as_str()) {
            (Some(_), "none") => "namespaces".into(),
            (Some(_), landlock) => format!("namespaces+{landlock}"),
            (None, landlock) => landlock.into(),
        }
    }

    /// A sentence for people: what confines command steps in this flow.
    pub fn describe(&self) -> String {
        let namespaces = if self.isolates_processes() {
            "namespaces (PID, mount, network, IPC; the file system read-only but the step's view)"
        } else if self.bwrap.is_some() {
            "namespaces but no PID namespace (mount, network, IPC; the file system read-only but \
             the step's view; a fresh /proc refused here: commands can see other processes)"
        } else {
            "no namespaces (refused here: commands can see other processes and host sockets)"
        };
        let processes = match self.process_limit {
            "none" => format!(
                "processes not limited (no pids cgroup here){}",
                self.ends_steps()
            ),
            how => format!("at most {} processes per step ({how})", self.max_processes),
        };
        let caches = if self.overlay {
            "your tool caches read through a layer of the step's own"
        } else {
            "tool caches the step's own, empty (yours read-only)"
        };
        format!(
            "{namespaces}; Landlock: {}; network {} unless a step allows it; UDP {}; {caches}; \
             {processes}; memory {}; capabilities dropped; no core dumps",
            self.landlock,
            if self.network { "on" } else { "off" },
            if self.holds_udp(self.network) {
                "blocked"
            } else {
                "open"
            },
            self.memory_limit()
        )
    }

    /// The launcher for a command running in `view`: writable are the view, `extra` (the
    /// step's temporary directory) and the plan's paths; `network`: whether this step may use
    /// the network; `scope`: what is the step's own (see `StepScope`).
    /// With `overlay`, the launcher mounts it on `view`.
    pub(crate) fn launcher(
        &self,
        view: &Path,
        extra: &[PathBuf],
        network: bool,
        overlay: Option<LauncherOverlay<'_>>,
        scope: StepScope<'_>,
    ) -> ocflow_model::error::Result<StepSandbox> {
        let StepScope {
            private,
            cgroup,
            dependencies,
            build_layers,
        } = scope;
        let exe = std::env::current_exe()
            .io_context(|| "finding the ocflow executable for the sandbox".into())?;
        // The small launcher beside ocflow starts in a fraction of the time: it is not linked
        // with Python. It takes the same arguments.
        let small = exe.with_file_name("ocflow-sandbox");
        let exe = if small.is_file() { small } else { exe };
        let view = view
            .canonicalize()
            .io_context(|| format!("resolving {}", view.display()))?;
        let mut launcher = vec![exe.to_string_lossy().into_owned(), "sandbox-exec".into()];
        for path in std::iter::once(&view).chain(extra).chain(&self.writable) {
            launcher.push("--write".into());
            launcher.push(path.to_string_lossy().into_owned());
        }
        if network {
            launcher.push("--network".into());
        } else if self.bwrap.is_none() && self.seccomp {
            launcher.push("--refuse-udp".into());
        }
        for path in &self.hidden {
            launcher.push("--hide".into());
            launcher.push(path.to_string_lossy().into_owned());
        }
        if let Some(bwrap) = &self.bwrap {
            launcher.push("--bwrap".into());
            launcher.push(bwrap.to_string_lossy().into_owned());
            if self.shared_proc {
                launcher.push("--shared-proc".into());
            }
        }
        if let Some(overlay) = overlay {
            let mut flags = vec![("--overlay-on", view.clone())];
            for layer in overlay.lower {
                let layer = layer
                    .canonicalize()
                    .io_context(|| format!("resolving {}", layer.display()))?;
                flags.push(("--overlay-lower", layer));
            }
            flags.push(("--overlay-upper", overlay.upper.to_path_buf()));
            flags.push(("--overlay-work", overlay.work.to_path_buf()));
            for (flag, path) in flags {
                launcher.push(flag.into());
                launcher.push(path.to_string_lossy().into_owned());
            }
        }
        launcher.push("--private".into());
        launcher.push(private.to_string_lossy().into_owned());
        if let Some(dependencies) = dependencies.filter(|d| !d.shows_nothing()) {
            launcher.push("--dependencies-from".into());
            launcher.push(dependencies.repo.to_string_lossy().into_owned());
            launcher.push("--dependencies-into".into());
            launcher.push(view.to_string_lossy().into_owned());
            for dir in dependencies.read_only_dirs() {
                launcher.push("--dependency".into());
                launcher.push(dir.to_string_lossy().into_owned());
            }
            // Only a view made of layers keeps build layers: a copy view holds its builds.
            if let Some(layers) = build_layers.filter(|_| !dependencies.build_outputs.is_empty()) {
                for dir in &dependencies.build_outputs {
                    launcher.push("--build-output".into());
                    launcher.push(dir.to_string_lossy().into_owned());
                }
                launcher.push("--build-layers".into());
                launcher.push(layers.to_string_lossy().into_owned());
            }
        }
        for cache in &self.caches {
            launcher.push("--cache".into());
            launcher.push(format!("{}:{}", cache.variable, cache.path.display()));
        }
        if self.overlay {
            launcher.push("--cache-overlay".into());
        }
        launcher.push("--memory-mb".into());
        launcher.push(self.memory_mb.to_string());
        launcher.push("--max-processes".into());
        launcher.push(self.max_processes.to_string());
        if self.cgroups.ends_steps() {
            launcher.push("--cgroup".into());
            launcher.push(cgroup.into());
        }
        launcher.push("--".into());
        Ok(StepSandbox {
            launcher,
            kind: self.kind(),
            layers: Some(self.layers(network)),
            view_layers: Vec::new(),
        })
    }
}

impl SandboxPlan {
    /// Whether the launcher can show the repository's dependency directories in a view by a
    /// mount: bubblewrap binds them, and where overlays could be mounted the launcher's own
    /// namespace can bind them too. Else a copy view gets copies.
    pub fn mounts_dependencies(&self) -> bool {
        self.bwrap.is_some() || self.overlay
    }

    /// Whether overlays work in `dir` (the task's directory, where views' layers and steps'
    /// upper directories live): the start-up probe tried the temporary directory, and another
    /// file system may refuse (overlayfs takes no overlay, as a container's root file system
    /// often is, for an upper directory).
    pub(crate) fn overlay_works_in(&self, dir: &Path) -> bool {
        let Ok(exe) = std::env::current_exe() else {
            return false;
        };
        let small = exe.with_file_name("ocflow-sandbox");
        let exe = if small.is_file() { small } else { exe };
        run_probe(
            std::process::Command::new(exe)
                .args(["sandbox-exec", "--probe", "--probe-in"])
                .arg(dir)
                .stderr(std::process::Stdio::null()),
        )
        .is_ok_and(|output| {
            String::from_utf8_lossy(&output.stdout).lines().nth(1) == Some("overlay")
        })
    }
}

/// Removes the scratch directories of trial launches whose ocflow is gone (killed during its
/// start-up): each is named after its process, `PID-N`.
fn sweep_trials(trials: &Path) {
    for entry in std::fs::read_dir(trials).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let owner = name
            .to_str()
            .and_then(|name| name.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if owner.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            ocflow_sandbox::exec::remove_overlay_dirs(&entry.path());
        }
    }
}

/// An overlay the launcher mounts on the view: read-only layers (top first) under `upper`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LauncherOverlay<'a> {
    pub(crate) lower: &'a [PathBuf],
    pub(crate) upper: &'a Path,
    pub(crate) work: &'a Path,
}

/// Paths every command may write besides its view and its own temporary directory: the
/// system's temporary directory (a step's own with namespaces) and device files programs write
/// to. Not `/var/tmp` (each step gets its own) nor the tool caches (`default_caches`).
pub fn default_writable() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = [
        "/tmp",
        "/dev/shm",
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/random",
        "/dev/urandom",
        "/dev/tty",
        "/dev/ptmx",
        "/dev/pts",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    paths.push(std::env::temp_dir());
    paths
}

/// Runs a `sandbox-exec --probe`, then removes the cgroup it joined (named after its pid).
fn run_probe(command: &mut std::process::Command) -> std::io::Result<std::process::Output> {
    use std::process::Stdio;
    let child = command.stdout(Stdio::piped()).spawn()?;
    let name = format!("{}.probe", child.id());
    let output = child.wait_with_output();
    Hierarchies::find().end(&name);
    output
}

/// The user's tool caches commands may use (read, and write a layer of their own): the XDG
/// cache (pip, Go, yarn, pre-commit…), npm's, pipenv's virtualenvs and cargo's home, each with
/// the variable that moves it. Made if missing, so an overlay can be mounted on it.
pub fn default_caches() -> Vec<Cache> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let set = |variable: &str| std::env::var_os(variable).map(PathBuf::from);
    let at_home = |relative: &str| home.as_ref().map(|h| h.join(relative));
    let caches = [
        (
            "XDG_CACHE_HOME",
            set("XDG_CACHE_HOME").or_else(|| at_home(".cache")),
        ),
        (
            "npm_config_cache",
            set("npm_config_cache").or_else(|| at_home(".npm")),
        ),
        ("WORKON_HOME", at_home(".local/share/virtualenvs")),
        (
            "CARGO_HOME",
            set("CARGO_HOME").or_else(|| at_home(".cargo")),
        ),
    ];
    caches
        .into_iter()
        .filter_map(|(variable, path)| {
            let path = path?;
            // Cargo's home is the user's choice to have; the others are made for a tool's
            // first run.
            if variable != "CARGO_HOME" {
                let _ = std::fs::create_dir_all(&path);
            }
            let path = path.canonicalize().ok()?;
            Some(Cache {
                variable: variable.into(),
                path,
            })
        })
        .collect()
}

/// What command steps are left with where bubblewrap cannot give them a PID namespace.
const WITHOUT_PID_NAMESPACE: &str = "in namespaces without a PID namespace of their own (the \
     container's /proc: other processes' environments within reach; the network, the file \
     system, Landlock and the limits hold)";

/// What command steps are left with where bubblewrap cannot run at all.
const WITHOUT_NAMESPACES: &str = "without namespaces (Landlock and the limits hold)";

/// bubblewrap's arguments for the namespaces ocflow uses, with a fresh `/proc`.
const OWN_PROC: &[&str] = &["--proc", "/proc", "--unshare-pid"];

/// The same without a PID namespace, in a user namespace, the container's `/proc` bound.
const SHARED_PROC: &[&str] = &["--unshare-user", "--ro-bind", "/proc", "/proc"];

/// bubblewrap, if it is installed: `Ok` when the kernel lets it make the namespaces ocflow
/// uses, else what it said when refused.
fn usable_bwrap() -> Option<Result<PathBuf, (PathBuf, String)>> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/bin")])
        .map(|dir| dir.join("bwrap"))
        .find(|candidate| candidate.is_file())?;
    Some(match try_bwrap(&found, OWN_PROC) {
        Ok(()) => Ok(found),
        Err(said) => Err((found, said)),
    })
}

/// Whether `bwrap` makes the namespaces ocflow uses, `proc` telling how to give `/proc`.
fn bwrap_works(bwrap: &Path, proc: &[&str]) -> bool {
    try_bwrap(bwrap, proc).is_ok()
}

/// Runs `true` in bubblewrap's namespaces; what it said when it failed.
fn try_bwrap(bwrap: &Path, proc: &[&str]) -> Result<(), String> {
    let tried = std::process::Command::new(bwrap)
        .args(["--ro-bind", "/", "/", "--dev", "/dev"])
        .args(proc)
        .args([
            "--unshare-net",
            "--unshare-ipc",
            "--new-session",
            "--",
            "/bin/true",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .output();
    match tried {
        Ok(output) if output.status.success() => Ok(()),
        Ok(output) => Err(complaint(&output)),
        Err(err) => Err(format!("cannot run {}: {err}", bwrap.display())),
    }
}

/// What a program that failed said, on one line and short enough for a warning; its exit
/// status when it said nothing.
fn complaint(output: &std::process::Output) -> String {
    let said = String::from_utf8_lossy(&output.stderr);
    let said: String = said.trim().chars().take(300).collect();
    if said.is_empty() {
        format!("it ended with {}", output.status)
    } else {
        said.replace('\n', "; ")
    }
}

/// What Landlock enforces here (`landlock`, `landlock-partial`, `none`), whether overlays
/// can be mounted, and whether the socket filter holds. Asks a child `sandbox-exec --probe`:
/// restricting this process would restrict ocflow.
fn probe_landlock() -> Result<(String, bool, bool, bool), Error> {
    let failed = |problem: String| {
        Error::Usage(format!(
            "{problem}; run with --no-sandbox to go on without it"
        ))
    };
    let exe = std::env::current_exe()
        .map_err(|err| failed(format!("cannot find the ocflow executable: {err}")))?;
    let output = run_probe(
        std::process::Command::new(&exe)
            .args(["sandbox-exec", "--probe"])
            .stderr(std::process::Stdio::piped()),
    )
    .map_err(|err| failed(format!("cannot run {}: {err}", exe.display())))?;
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let mut lines = text.lines();
    let kind = lines.next().unwrap_or("").trim().to_string();
    let overlay = lines.next().map(str::trim) == Some("overlay");
    let seccomp = lines.next().map(str::trim) == Some("seccomp");
    let cgroup = lines.next().map(str::trim) == Some("cgroup");
    match kind.as_str() {
        "none" | "landlock" | "landlock-partial" if output.status.success() => {
            Ok((kind, overlay, seccomp, cgroup))
        }
        _ => Err(failed(format!(
            "the sandbox probe failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_scope() -> StepScope<'static> {
        StepScope {
            private: Path::new("/p"),
            cgroup: "1.x.s",
            dependencies: None,
            build_layers: None,
        }
    }

    /// A plan without namespaces, as on a kernel that refuses them, with what else holds.
    fn plan(cgroups: bool, seccomp: bool) -> SandboxPlan {
        SandboxPlan {
            bwrap: None,
            shared_proc: false,
            landlock: "landlock".into(),
            network: false,
            writable: Vec::new(),
            caches: Vec::new(),
            memory_mb: 256,
            max_processes: 64,
            process_limit: if cgroups { "cgroup" } else { "none" },
            memory_cgroup: cgroups,
            cgroups: if cgroups {
                Hierarchies::at(Path::new("/sys/fs/cgroup/x"), true)
            } else {
                Hierarchies::default()
            },
            seccomp,
            hidden: Vec::new(),
            overlay: false,
            fallbacks: Vec::new(),
        }
    }

    #[test]
    fn without_cgroups_or_seccomp_nothing_claims_more_than_holds() {
        let bare = plan(false, false);
        let layers = bare.layers(false);
        assert_eq!(layers.memory, "256 MiB per process (rlimit)");
        assert_eq!(layers.udp, "open");
        assert!(
            layers.processes.contains("not limited"),
            "{}",
            layers.processes
        );
        let said = bare.describe();
        assert!(!said.contains("per step"), "{said}");
        assert!(said.contains("UDP open"), "{said}");
        assert!(said.contains("memory 256 MiB per process"), "{said}");
        let launcher = bare
            .launcher(Path::new("/"), &[], false, None, test_scope())
            .unwrap();
        assert!(!launcher.launcher.contains(&"--refuse-udp".to_string()));
        assert!(!launcher.launcher.contains(&"--cgroup".to_string()));
    }

    #[test]
    fn namespaces_without_a_pid_one_say_other_processes_are_in_sight() {
        let shared = SandboxPlan {
            bwrap: Some(PathBuf::from("/usr/bin/bwrap")),
            shared_proc: true,
            ..plan(true, true)
        };
        let layers = shared.layers(false);
        assert_eq!(
            (layers.namespaces, layers.proc.as_str(), layers.partial),
            (true, "shared", true)
        );
        assert_eq!(
            layers.udp, "blocked",
            "a network namespace of the step's own"
        );
        assert!(!shared.isolates_processes());
        let said = shared.describe();
        assert!(said.contains("no PID namespace"), "{said}");
        assert!(said.contains("can see other processes"), "{said}");
        let launcher = shared
            .launcher(Path::new("/"), &[], false, None, test_scope())
            .unwrap()
            .launcher;
        assert!(launcher.contains(&"--shared-proc".to_string()));
        let own = SandboxPlan {
            shared_proc: false,
            ..shared
        };
        assert_eq!(
            (own.layers(false).proc.as_str(), own.layers(false).partial),
            ("own", false)
        );
        let launcher = own
            .launcher(Path::new("/"), &[], false, None, test_scope())
            .unwrap()
            .launcher;
        assert!(!launcher.contains(&"--shared-proc".to_string()));
    }

    #[test]
    fn a_cgroup_without_controllers_ends_steps_and_limits_nothing() {
        let ends = SandboxPlan {
            cgroups: Hierarchies::at(Path::new("/sys/fs/cgroup/x"), false),
            ..plan(false, true)
        };
        let layers = ends.layers(false);
        assert_eq!(
            layers.processes,
            "not limited (no pids cgroup here); ended with the step (cgroup)"
        );
        assert_eq!(layers.memory, "256 MiB per process (rlimit)");
        let launcher = ends
            .launcher(Path::new("/"), &[], false, None, test_scope())
            .unwrap();
        assert!(
            launcher
                .launcher
                .windows(2)
                .any(|w| w == ["--cgroup", "1.x.s"])
        );
    }

    #[test]
    fn with_cgroups_and_seccomp_the_limits_are_per_step_and_udp_is_refused() {
        let held = plan(true, true);
        let layers = held.layers(false);
        assert_eq!(layers.memory, "256 MiB per step (cgroup)");
        assert_eq!(layers.udp, "blocked");
        assert_eq!(held.layers(true).udp, "open", "a step allowed the network");
        let said = held.describe();
        assert!(said.contains("UDP blocked"), "{said}");
        assert!(
            said.contains("at most 64 processes per step (cgroup)"),
            "{said}"
        );
        assert!(said.contains("memory 256 MiB per step (cgroup)"), "{said}");
        let args = |network| {
            held.launcher(Path::new("/"), &[], network, None, test_scope())
                .unwrap()
                .launcher
        };
        assert!(args(false).contains(&"--refuse-udp".to_string()));
        assert!(!args(true).contains(&"--refuse-udp".to_string()));
        assert!(args(false).windows(2).any(|w| w == ["--cgroup", "1.x.s"]));
    }
}
