//! The command sandbox: `ocflow sandbox-exec --write DIR … -- PROGRAM ARGS…` restricts itself
//! with Landlock (the kernel's unprivileged access control) and then becomes PROGRAM. The
//! library starts every command step through it, so a command can read anything but write
//! only in its view, its own temporary directory, the system temporary directories and tool
//! caches — never in a directory that holds the repository or the workspace. It can neither
//! reach abstract Unix sockets nor signal processes outside the sandbox. Where the kernel has no
//! Landlock, commands run as they are and their results say `"sandbox": "none"`.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use crate::exit::ExitCode;
use crate::model::step_spec::Sandbox as StepSandbox;

use landlock::{
    ABI, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
    path_beneath_rules,
};

/// How command steps are confined.
#[derive(Debug, Clone)]
pub(crate) struct SandboxPlan {
    /// What the kernel enforces: `landlock` or `landlock-partial`.
    pub(crate) kind: String,
    /// Paths commands may write beneath besides their view and temporary directory.
    pub(crate) writable: Vec<PathBuf>,
}

impl SandboxPlan {
    /// The plan for one flow: without any writable path that would open `protected` (its
    /// repository and workspace, canonical). Landlock grants whole trees, so `/tmp` is left out
    /// when the repository lives in `/tmp`.
    pub(crate) fn protecting(&self, protected: &[PathBuf]) -> SandboxPlan {
        let writable = self
            .writable
            .iter()
            .filter(|path| {
                let real = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
                !protected.iter().any(|p| p.starts_with(&real))
            })
            .cloned()
            .collect();
        SandboxPlan {
            kind: self.kind.clone(),
            writable,
        }
    }

    /// The launcher for commands running in `view`: writable are the view, `extra` (the
    /// step's temporary directory) and the plan's paths.
    pub(crate) fn launcher(
        &self,
        view: &Path,
        extra: &[PathBuf],
    ) -> crate::error::Result<StepSandbox> {
        use crate::error::IoContext;
        let exe = std::env::current_exe()
            .io_context(|| "finding the ocflow executable for the sandbox".into())?;
        let view = view
            .canonicalize()
            .io_context(|| format!("resolving {}", view.display()))?;
        let mut launcher = vec![exe.to_string_lossy().into_owned(), "sandbox-exec".into()];
        for path in std::iter::once(&view).chain(extra).chain(&self.writable) {
            launcher.push("--write".into());
            launcher.push(path.to_string_lossy().into_owned());
        }
        launcher.push("--".into());
        Ok(StepSandbox {
            launcher,
            kind: self.kind.clone(),
        })
    }
}

/// The Landlock ABI ocflow asks for (file system rights and scopes); older kernels enforce
/// what they can, and the result says `landlock-partial`.
const ABI_VERSION: ABI = ABI::V6;

/// Paths every command may write besides its view and its own temporary directory: the
/// system's temporary directories, device files programs write to, and tool caches. The cache
/// directories are created if missing, so a tool's first run can fill them.
pub(crate) fn default_writable() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = [
        "/tmp",
        "/var/tmp",
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
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".cargo")));
    if let Some(cargo) = cargo_home {
        // Not all of CARGO_HOME: its bin/ is on PATH.
        paths.extend(["registry", "git"].iter().map(|dir| cargo.join(dir)));
        paths.push(cargo.join(".package-cache"));
    }
    if let Some(home) = home {
        for cache in [".cache", ".npm", ".local/share/virtualenvs"] {
            let dir = home.join(cache);
            let _ = std::fs::create_dir_all(&dir);
            paths.push(dir);
        }
    }
    paths
}

/// Restricts this process to reading everywhere and writing only beneath `writable` (paths
/// that do not exist are left out). Returns what the kernel enforced.
fn restrict(writable: &[PathBuf]) -> Result<&'static str, String> {
    let existing: Vec<&Path> = writable
        .iter()
        .map(PathBuf::as_path)
        .filter(|p| p.exists())
        .collect();
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI_VERSION))
        .and_then(|ruleset| ruleset.scope(Scope::AbstractUnixSocket | Scope::Signal))
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

/// `ocflow sandbox-exec`: restrict, then exec. Only returns on failure (exit code 126, as a
/// shell does for a command it cannot run).
pub(crate) fn exec(writable: &[PathBuf], probe: bool, command: &[OsString]) -> ExitCode {
    let kind = match restrict(writable) {
        Ok(kind) => kind,
        Err(err) => {
            crate::output::say(&format!(
                "ocflow sandbox-exec: cannot set up the sandbox: {err}"
            ));
            return ExitCode::CannotRun;
        }
    };
    if probe {
        crate::output::print_stdout(&format!("{kind}\n"));
        return ExitCode::Success;
    }
    let Some((program, args)) = command.split_first() else {
        crate::output::say("ocflow sandbox-exec: give the command after `--`");
        return ExitCode::CannotRun;
    };
    let error = std::process::Command::new(program).args(args).exec();
    crate::output::say(&format!(
        "ocflow sandbox-exec: cannot run {}: {error}",
        program.to_string_lossy()
    ));
    ExitCode::CannotRun
}

/// What the kernel enforces here (`landlock`, `landlock-partial`), or `None` when it has no
/// Landlock. Asks a child `sandbox-exec --probe`: restricting this process would restrict
/// ocflow. A probe that cannot run is an error, not a silent "no sandbox".
pub(crate) fn probe() -> Result<Option<String>, String> {
    let exe = std::env::current_exe()
        .map_err(|err| format!("cannot find the ocflow executable: {err}"))?;
    let output = std::process::Command::new(&exe)
        .args(["sandbox-exec", "--probe"])
        .output()
        .map_err(|err| format!("cannot run {}: {err}", exe.display()))?;
    let kind = String::from_utf8_lossy(&output.stdout).trim().to_string();
    match kind.as_str() {
        "none" => Ok(None),
        "landlock" | "landlock-partial" if output.status.success() => Ok(Some(kind)),
        _ => Err(format!(
            "the sandbox probe failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )),
    }
}
