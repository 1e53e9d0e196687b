//! The errors that stop a command, by whose fault they are: the user's input (exit 2), ocflow's
//! environment or a transient cause (exit 1, try again), or a fault in ocflow itself (exit 1,
//! with a request for a bug report). A failed flow is not an error: it is an outcome recorded
//! in `flow_status.json`. `exit_code` maps each to the contract.

use std::path::PathBuf;

use crate::exit::ExitCode;
use crate::llm::LlmError;
use crate::problem::Problem;
use crate::status::{IllegalFlowTransition, IllegalTransition};

/// An error that stops a command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad usage or configuration: the user must change something (permanent; exit 2). The
    /// message names the fix.
    #[error("{0}")]
    Usage(String),

    /// The flow broke one or more validation rules (permanent; exit 2).
    #[error("invalid flow: {} problem(s)\n{}", .0.len(), render_problems(.0))]
    InvalidFlow(Vec<Problem>),

    /// Another ocflow process holds the task's lock (transient: it goes away when that run
    /// ends; exit 2).
    #[error(
        "task {task_id} is locked by another ocflow run (lock file {}); wait for it to finish, or \
         stop it first",
        lock.display()
    )]
    Locked { task_id: String, lock: PathBuf },

    /// The repository changed since the flow read it; applying would overwrite someone's work
    /// (permanent until the user decides; exit 2).
    #[error(
        "the repository changed since the flow read these files, so nothing was \
         applied:\n{}\nreview them, then run `ocflow apply {task_id} --force` to overwrite",
        .files.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n")
    )]
    Drift { task_id: String, files: Vec<String> },

    /// Files were edited since the apply `undo` would take back (permanent until the user
    /// decides; exit 2).
    #[error(
        "these files changed since task {task_id} was applied, so nothing was undone:\n{}\n\
         review them, then run `ocflow undo {task_id} --force` to put them back as they were \
         before the apply (those edits are lost)",
        .files.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n")
    )]
    EditedSinceApply { task_id: String, files: Vec<String> },

    /// A signal stopped an apply; what it had written was put back (exit 130).
    #[error("{0}")]
    ApplyInterrupted(String),

    /// A saved file has an unknown version or is not what ocflow wrote (permanent; exit 2).
    #[error("{path}: {problem}")]
    BadStateFile { path: PathBuf, problem: String },

    /// The Python library could not be loaded (permanent; exit 2).
    #[error("cannot load the Python library: {0}")]
    Bridge(String),

    /// The LLM call failed; `LlmError::transient` says whether trying later can help. A
    /// permanent one (key, URL, model) is the configuration's fault (exit 2); a transient one
    /// exits 1.
    #[error("the LLM call failed: {0}")]
    Llm(#[from] LlmError),

    /// A file-system failure: disk full, permission denied (exit 1; resumable once fixed).
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    /// A signal asked ocflow to stop in the middle of a long phase (publishing, staging, a
    /// capture, the diff): the flow is saved as interrupted and `ocflow resume` continues it
    /// (exit 130).
    #[error("interrupted by a signal; continue with `ocflow resume`")]
    Interrupted,

    /// A fault in ocflow itself, not in the user's input (exit 1).
    #[error(
        "internal error: {message}\nthis is a bug in ocflow; please report it with the task \
         directory{}",
        task_dir.as_ref().map(|d| format!(" {}", d.display())).unwrap_or_default()
    )]
    Internal {
        message: String,
        task_dir: Option<PathBuf>,
    },
}

impl Error {
    /// A fault in ocflow, with the task directory to attach to a bug report when known.
    pub fn internal(message: impl Into<String>) -> Error {
        Error::Internal {
            message: message.into(),
            task_dir: None,
        }
    }

    /// This error, naming `task_dir` when it is an internal fault that does not name one yet.
    pub fn in_task(self, task_dir: &std::path::Path) -> Error {
        match self {
            Error::Internal {
                message,
                task_dir: None,
            } => Error::Internal {
                message,
                task_dir: Some(task_dir.to_path_buf()),
            },
            other => other,
        }
    }

    /// What kind of error this is, for a headless caller (the `error` event's `code`).
    pub fn code(&self) -> &'static str {
        match self {
            Error::Usage(_) => "usage",
            Error::InvalidFlow(_) => "invalid_flow",
            Error::Locked { .. } => "locked",
            Error::Drift { .. } | Error::EditedSinceApply { .. } => "drift",
            Error::ApplyInterrupted(_) => "interrupted",
            Error::BadStateFile { .. } => "bad_state_file",
            Error::Bridge(_) => "bridge",
            Error::Llm(_) => "llm",
            Error::Io { .. } if self.is_no_space() => "no_space",
            Error::Io { .. } => "io",
            Error::Interrupted => "interrupted",
            Error::Internal { .. } => "internal",
        }
    }

    /// Whether the cause is a full disk (or quota): no space, or no inode, left where ocflow
    /// or a command wrote.
    pub fn is_no_space(&self) -> bool {
        let Error::Io { source, .. } = self else {
            return false;
        };
        source.kind() == std::io::ErrorKind::StorageFull
            || source.kind() == std::io::ErrorKind::QuotaExceeded
            || [rustix::io::Errno::NOSPC, rustix::io::Errno::DQUOT]
                .iter()
                .any(|errno| source.raw_os_error() == Some(errno.raw_os_error()))
    }

    /// What to do about it, where the message alone does not say.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::InvalidFlow(_) => Some("fix every problem listed, then run again".into()),
            Error::Locked { task_id, .. } => Some(format!(
                "wait for the other run of {task_id} to end, or stop it"
            )),
            Error::Llm(error) if error.transient() => {
                Some("the endpoint may answer later: run the same command again".into())
            }
            Error::Llm(_) => Some("check the base URL, the model name and the API key".into()),
            // Nothing was left half-written: the same command goes on once there is room (an
            // apply is run again as it was, not resumed).
            Error::Io { .. } if self.is_no_space() => Some(
                "free space on that disk, then run the same command again (`ocflow apply ID` for \
                 an apply; a flow goes on with `ocflow resume ID`): nothing was left half-written"
                    .into(),
            ),
            Error::Io { .. } => Some("free the disk or fix the permission, then resume".into()),
            _ => None,
        }
    }

    /// The process exit code for this error, as fixed by the contract.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::Interrupted => ExitCode::Interrupted,
            Error::Io { .. } | Error::Internal { .. } => ExitCode::Failure,
            Error::ApplyInterrupted(_) => ExitCode::Interrupted,
            Error::Llm(error) if error.transient() => ExitCode::Failure,
            _ => ExitCode::Usage,
        }
    }
}

impl From<IllegalTransition> for Error {
    fn from(error: IllegalTransition) -> Error {
        Error::internal(error.to_string())
    }
}

impl From<IllegalFlowTransition> for Error {
    fn from(error: IllegalFlowTransition) -> Error {
        Error::internal(error.to_string())
    }
}

fn render_problems(problems: &[Problem]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_internal_fault_asks_for_a_bug_report_with_the_task_directory() {
        let error = Error::internal("step x cannot go from skipped to running")
            .in_task(std::path::Path::new("/ws/t"));
        let text = error.to_string();
        assert!(text.contains("this is a bug in ocflow"), "{text}");
        assert!(text.ends_with("with the task directory /ws/t"), "{text}");
        assert_eq!(error.exit_code(), ExitCode::Failure);
        let usage = Error::Usage("give a task".into()).in_task(std::path::Path::new("/ws/t"));
        assert_eq!(usage.to_string(), "give a task");
        assert_eq!(usage.exit_code(), ExitCode::Usage);
    }
}
