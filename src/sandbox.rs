//! The command sandbox: `ocflow sandbox-exec --write DIR … -- PROGRAM ARGS…` restricts itself
//! with Landlock (the kernel's unprivileged access control) and then becomes PROGRAM. The
//! library starts every command step through it, so a command can read anything but write
//! only in its view, temporary directories and tool caches: not the user's repository, its
//! `.git`, the workspace, or `~/.ssh`. Where the kernel has no Landlock, commands run as they
//! are and their results say `"sandbox": "none"`.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use landlock::{ABI, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, path_beneath_rules};

/// The Landlock ABI ocflow asks for; older kernels enforce what they can.
const ABI_VERSION: ABI = ABI::V5;

/// Paths every command may write besides its view: temporary directories, device files that
/// programs write to, and the caches of common tools (below `$HOME`).
pub fn default_writable() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = ["/tmp", "/var/tmp", "/dev/shm", "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/pts"]
        .iter()
        .map(PathBuf::from)
        .collect();
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
        for cache in [".cache", ".cargo/registry", ".cargo/git", ".npm", ".local/share/virtualenvs"] {
            paths.push(home.join(cache));
        }
    }
    paths
}

/// Restricts this process to reading everywhere and writing only beneath `writable`.
/// Returns whether the kernel enforced it.
fn restrict(writable: &[PathBuf]) -> Result<bool, String> {
    let existing: Vec<&Path> = writable.iter().map(PathBuf::as_path).filter(|p| p.exists()).collect();
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI_VERSION))
        .and_then(|ruleset| ruleset.create())
        .and_then(|ruleset| ruleset.add_rules(path_beneath_rules(["/"], AccessFs::from_read(ABI_VERSION))))
        .and_then(|ruleset| ruleset.add_rules(path_beneath_rules(existing, AccessFs::from_all(ABI_VERSION))))
        .and_then(|ruleset| ruleset.restrict_self())
        .map_err(|err| err.to_string())?;
    Ok(status.ruleset != RulesetStatus::NotEnforced)
}

/// `ocflow sandbox-exec`: restrict, then exec. Only returns on failure (exit code 126, as a
/// shell does for a command it cannot run).
pub fn exec(writable: &[PathBuf], probe: bool, command: &[OsString]) -> u8 {
    let enforced = match restrict(writable) {
        Ok(enforced) => enforced,
        Err(err) => {
            crate::events::say(&format!("ocflow sandbox-exec: cannot set up the sandbox: {err}"));
            return 126;
        }
    };
    if probe {
        crate::commands::print_stdout(if enforced { "landlock\n" } else { "none\n" });
        return 0;
    }
    let Some((program, args)) = command.split_first() else {
        crate::events::say("ocflow sandbox-exec: give the command after `--`");
        return 126;
    };
    let error = std::process::Command::new(program).args(args).exec();
    crate::events::say(&format!("ocflow sandbox-exec: cannot run {}: {error}", program.to_string_lossy()));
    126
}

/// Whether commands can be sandboxed here: asks a child `sandbox-exec --probe` (restricting
/// this process itself would restrict ocflow).
pub fn available() -> bool {
    let Ok(exe) = std::env::current_exe() else { return false };
    std::process::Command::new(exe)
        .args(["sandbox-exec", "--probe"])
        .output()
        .is_ok_and(|out| out.status.success() && out.stdout.starts_with(b"landlock"))
}
