//! Running git in the user's repository, for `apply --commit`, `undo` and `apply --branch`: one
//! runner, its failure an error that names the command and what git said.

use std::path::Path;
use std::process::{Command, Stdio};

use ocflow_model::error::{Error, Result};

/// Runs `git ARGS` in `repo` with `env` added; its stdout, trimmed, or an error naming the
/// command and git's own message.
pub(crate) fn git(repo: &Path, args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Result<String> {
    let output = Command::new("git")
        .current_dir(repo)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .map_err(|err| Error::Usage(format!("git could not run: {err}")))?;
    if !output.status.success() {
        return Err(Error::Usage(format!(
            "`git {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// `git ARGS` in `repo` with the environment as it is.
pub(crate) fn git_output(repo: &Path, args: &[&str]) -> Result<String> {
    git(repo, args, &[])
}
