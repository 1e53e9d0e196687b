//! Keeps the API key out of the process environment. A command step runs as the same user
//! and could read ocflow's start-up environment through `/proc/<ocflow pid>/environ`, which
//! `unsetenv` does not change. So when a key variable is set, ocflow re-executes itself at
//! start-up, before any thread exists, without the key variables, handing the key over
//! through a pipe; the new process image's environment never held it. The process is also
//! made non-dumpable, which closes `/proc/<pid>/mem` to other processes of the user.
//! `ApiKey` holds the key in memory and never shows it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

use std::fmt;

/// An API key. It is never serialised, printed, or written anywhere.
#[derive(Clone, Default)]
pub struct ApiKey {
    key: String,
    /// The environment variable it came from, if it did: a process that started ocflow still
    /// holds it there.
    variable: Option<String>,
}

impl ApiKey {
    pub(crate) fn new(key: String, variable: Option<String>) -> ApiKey {
        ApiKey { key, variable }
    }

    /// The key itself, for the Authorization header (the client's, and `ocflow batch`'s LLM
    /// gate's, which adds it to its flows' requests).
    pub fn expose(&self) -> &str {
        &self.key
    }

    pub fn is_empty(&self) -> bool {
        self.key.is_empty()
    }

    /// The environment variable the key came from, if it came from one.
    pub fn variable(&self) -> Option<&str> {
        self.variable.as_deref()
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.key.is_empty() {
            "ApiKey(none)"
        } else {
            "ApiKey(***)"
        })
    }
}

/// Names a file holding the key: no environment holds the key then, not even a parent's.
pub const KEY_FILE_VARIABLE: &str = "OCFLOW_API_KEY_FILE";
/// Carries, across the re-execution, the name of the variable the key came from.
const KEY_SOURCE_VARIABLE: &str = "OCFLOW_KEY_SOURCE";

/// The variables that may hold the key, in order of precedence.
pub const KEY_VARIABLES: &[&str] = &["OCFLOW_API_KEY", "OPENAI_API_KEY", "LLM_API_KEY"];
/// Names the pipe the key arrives through after the re-execution.
const KEY_FD_VARIABLE: &str = "OCFLOW_KEY_FD";

/// Call first thing in `main`, while the process has one thread. Returns the key, if any: from
/// a key variable or, failing that, the file `OCFLOW_API_KEY_FILE` names (which only its owner
/// may read). When a key variable is set this does not return: it re-executes the binary
/// (unless that fails, in which case the key is taken from the environment as it is).
pub fn take_key_at_startup() -> Result<ApiKey, ocflow_model::error::Error> {
    // Not dumpable: other processes of the same user (a command step, without the sandbox)
    // cannot read this process's memory or environment through /proc.
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    if let Some(fd) = std::env::var(KEY_FD_VARIABLE)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    {
        let variable = std::env::var(KEY_SOURCE_VARIABLE).ok();
        // SAFETY: single-threaded start-up; no other code reads the environment yet.
        unsafe {
            std::env::remove_var(KEY_FD_VARIABLE);
            std::env::remove_var(KEY_SOURCE_VARIABLE);
        }
        return Ok(ApiKey::new(read_handed_over(fd), variable));
    }
    let Some((variable, key)) = KEY_VARIABLES.iter().find_map(|name| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty())
            .map(|key| (*name, key))
    }) else {
        return match std::env::var_os(KEY_FILE_VARIABLE) {
            Some(path) => from_file_variable(std::path::Path::new(&path)),
            None => Ok(ApiKey::default()),
        };
    };
    if let Err(reason) = reexec_without(&key, variable) {
        // Still correct, only less private: the key stays in this process's start-up block.
        ocflow_model::output::say(&format!(
            "ocflow: warning: could not hide the API key from child processes ({reason})"
        ));
    }
    Ok(ApiKey::new(key, Some(variable.to_string())))
}

/// The key in a file only its owner may read.
fn from_file_variable(path: &std::path::Path) -> Result<ApiKey, ocflow_model::error::Error> {
    from_file(path)
        .map_err(|err| ocflow_model::error::Error::Usage(format!("{KEY_FILE_VARIABLE}: {err}")))
}

/// Why a key file gave no key (all permanent: the file must be fixed by a person).
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    /// The file could not be read (missing, or not ours to read).
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// Others may read it: a key there is not secret, so it is refused.
    #[error(
        "{} can be read by others (mode {mode:o}); make it yours alone: chmod 600 {0}",
        path.display()
    )]
    ReadableByOthers { path: std::path::PathBuf, mode: u32 },
    /// It holds nothing but white space.
    #[error("{} is empty", path.display())]
    Empty { path: std::path::PathBuf },
}

/// The key in a file only its owner may read.
pub fn from_file(path: &std::path::Path) -> Result<ApiKey, KeyFileError> {
    use std::os::unix::fs::MetadataExt;
    let unreadable = |source| KeyFileError::Unreadable {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    if meta.mode() & 0o077 != 0 {
        return Err(KeyFileError::ReadableByOthers {
            path: path.to_path_buf(),
            mode: meta.mode() & 0o777,
        });
    }
    let text = std::fs::read_to_string(path).map_err(unreadable)?;
    let key = text.trim();
    if key.is_empty() {
        return Err(KeyFileError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(ApiKey::new(key.to_string(), None))
}

/// Keys taken out of the environment for model profiles (`api_key_env`), by variable.
static TAKEN: std::sync::Mutex<BTreeMap<String, String>> = std::sync::Mutex::new(BTreeMap::new());

/// The key a profile's variable holds, taken out of this process's environment so no child
/// inherits it (the process is not dumpable, so its start-up environment cannot be read
/// either). Called while resolving the configuration, before any thread exists.
pub fn take_variable(name: &str) -> Option<ApiKey> {
    let mut taken = TAKEN.lock().ok()?;
    if let Some(key) = taken.get(name) {
        return Some(ApiKey::new(key.clone(), Some(name.to_string())));
    }
    let key = std::env::var(name).ok().filter(|v| !v.is_empty())?;
    // SAFETY: called from `Config::resolve`, before the runtime or any other thread starts.
    unsafe { std::env::remove_var(name) };
    taken.insert(name.to_string(), key.clone());
    Some(ApiKey::new(key, Some(name.to_string())))
}

/// The key a credential helper prints (`api_key_command`, like git's credential helpers): run
/// once, with `sh -c`, its first line of output taken.
pub fn from_command(command: &str) -> Result<ApiKey, ocflow_model::error::Error> {
    let usage =
        |problem: String| ocflow_model::error::Error::Usage(format!("api_key_command: {problem}"));
    let output = std::process::Command::new("/bin/sh")
        .args(["-c", command])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|err| usage(format!("cannot run it: {err}")))?;
    if !output.status.success() {
        return Err(usage(format!("`{command}` failed ({})", output.status)));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let key = text.lines().next().unwrap_or("").trim();
    if key.is_empty() {
        return Err(usage(format!("`{command}` printed no key")));
    }
    Ok(ApiKey::new(key.to_string(), None))
}

/// What goes through the hand-over pipe: the key, and every key variable taken out of the
/// environment (all of `KEY_VARIABLES` that were set, and profiles' `api_key_env`), which a
/// profile may name.
#[derive(serde::Serialize, serde::Deserialize)]
struct HandedOver {
    key: String,
    #[serde(default)]
    variables: BTreeMap<String, String>,
}

fn read_handed_over(fd: i32) -> String {
    // SAFETY: the fd was created by our own parent image for exactly this hand-over and is
    // not used anywhere else.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    let handed: HandedOver = serde_json::from_str(&text).unwrap_or(HandedOver {
        key: text,
        variables: BTreeMap::new(),
    });
    if let Ok(mut taken) = TAKEN.lock() {
        taken.extend(handed.variables);
    }
    handed.key
}

/// The pipe's content: `key`, the variables taken so far, and `more`.
fn handed_over_text(key: &str, more: BTreeMap<String, String>) -> String {
    let mut variables = TAKEN.lock().map(|t| t.clone()).unwrap_or_default();
    variables.extend(more);
    let handed = HandedOver {
        key: key.to_string(),
        variables,
    };
    serde_json::to_string(&handed).unwrap_or_default()
}

fn reexec_without(key: &str, variable: &str) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let (reader, writer) = rustix::pipe::pipe().map_err(|e| e.to_string())?;
    // The pipe holds 64 KiB: the whole key fits before anyone reads it.
    // Every key variable set, not only the one the key came from: a profile may name another.
    let set: BTreeMap<String, String> = KEY_VARIABLES
        .iter()
        .filter_map(|name| Some((name.to_string(), std::env::var(name).ok()?)))
        .filter(|(_, value)| !value.is_empty())
        .collect();
    std::fs::File::from(writer)
        .write_all(handed_over_text(key, set).as_bytes())
        .map_err(|e| e.to_string())?;
    rustix::io::fcntl_setfd(&reader, rustix::io::FdFlags::empty()).map_err(|e| e.to_string())?;
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let mut command = std::process::Command::new(exe);
    command
        .args(args)
        .env(KEY_FD_VARIABLE, reader.as_raw_fd().to_string())
        .env(KEY_SOURCE_VARIABLE, variable);
    for name in KEY_VARIABLES {
        command.env_remove(name);
    }
    // Only returns on failure.
    let error = command.exec();
    Err(error.to_string())
}

/// Hands `key` to a child ocflow the way the re-execution does: through a pipe whose reading
/// end only that child inherits, never through its environment. Returns the parent's copy of
/// the reading end, to be dropped once the child is spawned (`None`: no key to give).
pub fn hand_over(
    command: &mut tokio::process::Command,
    key: &ApiKey,
) -> std::io::Result<Option<OwnedFd>> {
    for name in KEY_VARIABLES {
        command.env_remove(name);
    }
    let variables = TAKEN.lock().map(|t| !t.is_empty()).unwrap_or(false);
    if key.is_empty() && !variables {
        return Ok(None);
    }
    // Close-on-exec here, so a child spawned at the same time elsewhere never inherits it.
    let (reader, writer) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    std::fs::File::from(writer)
        .write_all(handed_over_text(key.expose(), BTreeMap::new()).as_bytes())?;
    let fd = reader.as_raw_fd();
    command.env(KEY_FD_VARIABLE, fd.to_string());
    match key.variable() {
        Some(variable) => command.env(KEY_SOURCE_VARIABLE, variable),
        None => command.env_remove(KEY_SOURCE_VARIABLE),
    };
    // SAFETY: between fork and exec the closure only calls fcntl, which is async-signal-safe;
    // it keeps the pipe open across this one child's exec.
    unsafe {
        command.pre_exec(move || {
            let fd = rustix::fd::BorrowedFd::borrow_raw(fd);
            rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty()).map_err(Into::into)
        });
    }
    Ok(Some(reader))
}
