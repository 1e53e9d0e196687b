//! The launcher's command line, parsed in one place: `ocflow sandbox-exec` takes it as a
//! subcommand, and `ocflow-sandbox` as its whole command line. The host writes it
//! (`ocflow-core`'s `engine/sandbox.rs`), and the launcher writes it again for its inner half
//! (`exec.rs`, `--inner`).

use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct SandboxArgs {
    /// A path the command may write beneath (repeatable).
    #[arg(long = "write", value_name = "PATH")]
    pub write: Vec<PathBuf>,
    /// Only report what Landlock enforces here ("landlock", "landlock-partial" or "none").
    #[arg(long)]
    pub probe: bool,
    /// With --probe: try the overlay in this directory (else the temporary directory).
    #[arg(long, value_name = "DIR")]
    pub probe_in: Option<PathBuf>,
    /// Let the command use the network (otherwise only loopback, and TCP refused).
    #[arg(long)]
    pub network: bool,
    /// Run the command in namespaces made by this bubblewrap.
    #[arg(long, value_name = "PATH")]
    pub bwrap: Option<PathBuf>,
    /// With --bwrap: in a user namespace of bubblewrap's own, without a PID namespace, the
    /// container's /proc bound read-only, where the kernel refuses a fresh /proc (the masked
    /// /proc of a container without CAP_SYS_ADMIN).
    #[arg(long)]
    pub shared_proc: bool,
    /// The memory the command may use, in MiB.
    #[arg(long, value_name = "MB")]
    pub memory_mb: Option<u64>,
    /// The processes the command may run at once.
    #[arg(long, value_name = "N")]
    pub max_processes: Option<u64>,
    /// A file or directory the command must not see (repeatable).
    #[arg(long = "hide", value_name = "PATH")]
    pub hide: Vec<PathBuf>,
    /// The step's cgroup, made or joined: the host kills what is left in it at the step's end.
    #[arg(long, value_name = "NAME")]
    pub cgroup: Option<String>,
    /// Refuse every socket but TCP, Unix and netlink ones (a seccomp filter), for a command
    /// without the network and without a network namespace.
    #[arg(long)]
    pub refuse_udp: bool,
    /// (internal) Already inside the namespaces: apply Landlock and run the command.
    #[arg(long)]
    pub inner: bool,
    /// Mount an overlay here: the layers `--overlay-lower` (repeatable, top first) under the
    /// upper directory `--overlay-upper`.
    #[arg(long, value_name = "PATH")]
    pub overlay_on: Option<PathBuf>,
    #[arg(long, value_name = "PATH")]
    pub overlay_lower: Vec<PathBuf>,
    #[arg(long, value_name = "PATH")]
    pub overlay_upper: Option<PathBuf>,
    #[arg(long, value_name = "PATH")]
    pub overlay_work: Option<PathBuf>,
    /// A user's tool cache the command reads but never changes, as VARIABLE:PATH (repeatable).
    #[arg(long = "cache", value_name = "VARIABLE:PATH")]
    pub cache: Vec<std::ffi::OsString>,
    /// Show the caches through overlays (else directories of the step's own stand in).
    #[arg(long)]
    pub cache_overlay: bool,
    /// The step's private directory: its caches' layers and its own /var/tmp.
    #[arg(long, value_name = "DIR")]
    pub private: Option<PathBuf>,
    /// The repository whose dependency directories (`--dependency`) the command sees.
    #[arg(long, value_name = "REPO")]
    pub dependencies_from: Option<PathBuf>,
    /// The view they are shown in, read-only, at the same relative places.
    #[arg(long, value_name = "VIEW")]
    pub dependencies_into: Option<PathBuf>,
    /// A dependency directory, relative to the repository (repeatable).
    #[arg(long = "dependency", value_name = "PATH")]
    pub dependency: Vec<PathBuf>,
    /// A build directory, relative to the repository (repeatable): shown through the layer
    /// `--build-layers DIR/INDEX`, INDEX its place among these.
    #[arg(long = "build-output", value_name = "PATH")]
    pub build_output: Vec<PathBuf>,
    /// Where the build directories' layers are (see --build-output).
    #[arg(long, value_name = "DIR")]
    pub build_layers: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(last = true)]
    pub command: Vec<std::ffi::OsString>,
}
