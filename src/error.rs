//! The errors the library returns. Each variant says whether retrying can help (transient)
//! or whether the input must change first (permanent); `exit_code` maps them to the contract.

use std::path::PathBuf;

/// An error that stops a command. Flow failures are not errors: they are outcomes recorded in
/// `flow_status.json` (see `executor::FlowOutcome`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad usage or configuration (permanent; exit 2). The message names the fix.
    #[error("{0}")]
    Usage(String),

    /// The flow broke one or more validation rules (permanent; exit 2).
    #[error("invalid flow: {} problem(s)\n{}", .0.len(), render_problems(.0))]
    InvalidFlow(Vec<crate::flow::validate::Problem>),

    /// Another ocflow process holds the task's lock (transient: it goes away when that run ends; exit 2).
    #[error(
        "task {task_id} is locked by another ocflow run (lock file {}); wait for it to finish, or stop it first",
        lock.display()
    )]
    Locked { task_id: String, lock: PathBuf },

    /// The repository changed since the flow read it; applying would overwrite someone's work
    /// (permanent until the user decides; exit 2).
    #[error(
        "the repository changed since the flow read these files, so nothing was applied:\n{}\nreview them, then run `ocflow apply --force` to overwrite",
        .0.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n")
    )]
    Drift(Vec<String>),

    /// A persisted file has an unknown version or is not what ocflow wrote (permanent; exit 2).
    #[error("{path}: {problem}")]
    BadStateFile { path: PathBuf, problem: String },

    /// The Python library could not be loaded (permanent; exit 2).
    #[error("cannot load the Python library: {0}")]
    Bridge(String),

    /// A file-system failure (transient or permanent depending on the cause; exit 1).
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The process exit code for this error, as fixed by the contract.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Io { .. } => 1,
            _ => 2,
        }
    }
}

fn render_problems(problems: &[crate::flow::validate::Problem]) -> String {
    problems
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Attaches a human context to `std::io::Error`s.
pub trait IoContext<T> {
    fn io_context(self, context: impl FnOnce() -> String) -> Result<T, Error>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn io_context(self, context: impl FnOnce() -> String) -> Result<T, Error> {
        self.map_err(|source| Error::Io {
            context: context(),
            source,
        })
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
