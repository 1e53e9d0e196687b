//! bubblewrap's namespaces around the inner launcher: the host's root read-only, a private
//! `/tmp`, `/run` and `/proc`, no network unless allowed, the user's credential stores hidden,
//! the writable paths and the step's private layers bound in.

use std::path::{Path, PathBuf};

use crate::exec::ExecRequest;
use crate::private_layers::Private;

/// Directories hidden from commands behind an empty tmpfs: they hold the host's sockets
/// (`/run/docker.sock`, `/run/dbus/system_bus_socket`, `/run/user/…`, tmux's and ssh-agent's
/// in `/tmp`). A step's `/tmp` is its own; its view and temporary directory are bound in.
const HIDDEN: &[&str] = &["/run", "/tmp"];

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

/// bubblewrap around `ocflow sandbox-exec --inner … -- COMMAND`.
pub(crate) fn bwrap_command(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(
        writable: &'a [PathBuf],
        hidden: &'a [PathBuf],
        network: bool,
    ) -> ExecRequest<'a> {
        ExecRequest {
            writable,
            network,
            bwrap: Some(Path::new("/usr/bin/bwrap")),
            shared_proc: false,
            memory_mb: None,
            max_processes: None,
            inner: false,
            hidden,
            cgroup: None,
            refuse_udp: false,
            overlay: None,
            caches: &[],
            cache_overlay: false,
            private: None,
            dependencies: None,
            command: &[],
        }
    }

    fn args(command: &std::process::Command) -> Vec<String> {
        command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// Whether `args` holds `window` in a row.
    fn has(args: &[String], window: &[&str]) -> bool {
        args.windows(window.len()).any(|w| w == window)
    }

    #[test]
    fn the_command_sees_the_root_read_only_its_own_tmp_and_no_network() {
        let dir = tempfile::tempdir().unwrap();
        let view = dir.path().join("view");
        std::fs::create_dir_all(&view).unwrap();
        let writable = [view.clone()];
        let command = bwrap_command(
            Path::new("/usr/bin/bwrap"),
            &request(&writable, &[], false),
            &writable,
            &Private::default(),
        )
        .unwrap();
        let args = args(&command);
        let view = view.to_string_lossy().into_owned();
        assert!(has(&args, &["--ro-bind", "/", "/"]), "{args:?}");
        assert!(has(&args, &["--tmpfs", "/tmp"]) && has(&args, &["--tmpfs", "/run"]));
        assert!(args.contains(&"--unshare-net".to_string()), "{args:?}");
        assert!(has(&args, &["--bind", &view, &view]), "{args:?}");
        // The inner launcher applies Landlock to the same writable paths.
        assert!(has(&args, &["sandbox-exec", "--inner"]));
        assert!(has(&args, &["--write", &view]), "{args:?}");
        let with_network = bwrap_command(
            Path::new("/usr/bin/bwrap"),
            &request(&writable, &[], true),
            &writable,
            &Private::default(),
        )
        .unwrap();
        assert!(!self::args(&with_network).contains(&"--unshare-net".to_string()));
    }

    #[test]
    fn hidden_paths_are_covered_a_directory_by_a_tmpfs_a_file_by_dev_null() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = dir.path().join("secrets");
        std::fs::create_dir_all(&secrets).unwrap();
        let key = dir.path().join("key");
        std::fs::write(&key, "sk-1").unwrap();
        let gone = dir.path().join("gone");
        let hidden = [secrets.clone(), key.clone(), gone.clone()];
        let command = bwrap_command(
            Path::new("/usr/bin/bwrap"),
            &request(&[], &hidden, false),
            &[],
            &Private::default(),
        )
        .unwrap();
        let args = args(&command);
        let text = |p: &Path| p.to_string_lossy().into_owned();
        assert!(has(&args, &["--tmpfs", &text(&secrets)]), "{args:?}");
        assert!(
            has(&args, &["--ro-bind", "/dev/null", &text(&key)]),
            "{args:?}"
        );
        assert!(!args.contains(&text(&gone)), "{args:?}");
    }
}
