//! Keeps the API key out of the process environment. A command step runs as the same user
//! and could read ocflow's start-up environment through `/proc/<ocflow pid>/environ`, which
//! `unsetenv` does not change. So when a key variable is set, ocflow re-executes itself at
//! start-up, before any thread exists, without the key variables, handing the key over
//! through a pipe; the new process image's environment never held it. The process is also
//! made non-dumpable, which closes `/proc/<pid>/mem` to other processes of the user.
//! `ApiKey` holds the key in memory and never shows it.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

use std::fmt;

/// An API key. It is never serialised, printed, or written anywhere.
#[derive(Clone, Default)]
pub struct ApiKey(String);

impl ApiKey {
    pub(crate) fn new(key: String) -> ApiKey {
        ApiKey(key)
    }

    /// The key itself, for the Authorization header and for scrubbing it from step environments.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() {
            "ApiKey(none)"
        } else {
            "ApiKey(***)"
        })
    }
}

/// The variables that may hold the key, in order of precedence.
pub(crate) const KEY_VARIABLES: &[&str] = &["OCFLOW_API_KEY", "OPENAI_API_KEY", "LLM_API_KEY"];
/// Names the pipe the key arrives through after the re-execution.
const KEY_FD_VARIABLE: &str = "OCFLOW_KEY_FD";

/// Call first thing in `main`, while the process has one thread. Returns the key, if any.
/// When a key variable is set this does not return: it re-executes the binary (unless that
/// fails, in which case the key is taken from the environment as it is).
pub fn take_key_at_startup() -> ApiKey {
    // Not dumpable: other processes of the same user (a command step, without the sandbox)
    // cannot read this process's memory or environment through /proc.
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    if let Some(fd) = std::env::var(KEY_FD_VARIABLE)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    {
        // SAFETY: single-threaded start-up; no other code reads the environment yet.
        unsafe { std::env::remove_var(KEY_FD_VARIABLE) };
        return read_handed_over(fd);
    }
    let Some(key) = KEY_VARIABLES
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    else {
        return ApiKey::default();
    };
    if let Err(reason) = reexec_without(&key) {
        // Still correct, only less private: the key stays in this process's start-up block.
        crate::output::say(&format!(
            "ocflow: warning: could not hide the API key from child processes ({reason})"
        ));
    }
    ApiKey::new(key)
}

fn read_handed_over(fd: i32) -> ApiKey {
    // SAFETY: the fd was created by our own parent image for exactly this hand-over and is
    // not used anywhere else.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let mut key = String::new();
    let _ = file.read_to_string(&mut key);
    ApiKey::new(key)
}

fn reexec_without(key: &str) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let (reader, writer) = rustix::pipe::pipe().map_err(|e| e.to_string())?;
    // The pipe holds 64 KiB: the whole key fits before anyone reads it.
    std::fs::File::from(writer)
        .write_all(key.as_bytes())
        .map_err(|e| e.to_string())?;
    rustix::io::fcntl_setfd(&reader, rustix::io::FdFlags::empty()).map_err(|e| e.to_string())?;
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let mut command = std::process::Command::new(exe);
    command
        .args(args)
        .env(KEY_FD_VARIABLE, reader.as_raw_fd().to_string());
    for name in KEY_VARIABLES {
        command.env_remove(name);
    }
    // Only returns on failure.
    let error = command.exec();
    Err(error.to_string())
}
