//! The process exit codes of the contract, as one type every command returns (fd's
//! `exit_codes.rs` pattern): a headless caller branches on them.

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    /// The flow succeeded, or the command did what it was asked.
    Success,
    /// The flow ended failed or aborted (`flow_status.json` and `summary.md` say why), or ocflow
    /// itself failed (disk full, an internal fault).
    Failure,
    /// Paused for a budget or an approval; `ocflow resume` (a budget) or `ocflow approve`
    /// (an approval) continues.
    Paused,
    /// Invalid input: usage, configuration, an invalid plan, a path outside the repository, a
    /// task locked by another run.
    Usage,
    /// Interrupted by a signal; the state is saved and `ocflow resume` continues.
    Interrupted,
    /// `ocflow sandbox-exec` could not start its command (126, as a shell says).
    CannotRun,
    /// `ocflow wait --timeout` gave up before the flow ended (124, as `timeout(1)` says); the
    /// flow goes on.
    TimedOut,
}

impl ExitCode {
    /// The number the process exits with.
    pub fn code(self) -> u8 {
        match self {
            ExitCode::Success => 0,
            ExitCode::Failure => 1,
            ExitCode::Usage => 2,
            ExitCode::Paused => 3,
            ExitCode::Interrupted => 130,
            ExitCode::CannotRun => 126,
            ExitCode::TimedOut => 124,
        }
    }
}

impl ExitCode {
    /// The exit code a process ended with, as this type (an unknown number is a failure).
    pub fn from_code(code: u8) -> ExitCode {
        match code {
            0 => ExitCode::Success,
            2 => ExitCode::Usage,
            3 => ExitCode::Paused,
            124 => ExitCode::TimedOut,
            126 => ExitCode::CannotRun,
            130 => ExitCode::Interrupted,
            _ => ExitCode::Failure,
        }
    }
}

impl From<ExitCode> for std::process::ExitCode {
    fn from(code: ExitCode) -> std::process::ExitCode {
        std::process::ExitCode::from(code.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every exit code, the compiler holding the list whole.
    fn every() -> Vec<ExitCode> {
        let all = vec![
            ExitCode::Success,
            ExitCode::Failure,
            ExitCode::Paused,
            ExitCode::Usage,
            ExitCode::Interrupted,
            ExitCode::CannotRun,
            ExitCode::TimedOut,
        ];
        for code in &all {
            match code {
                ExitCode::Success
                | ExitCode::Failure
                | ExitCode::Paused
                | ExitCode::Usage
                | ExitCode::Interrupted
                | ExitCode::CannotRun
                | ExitCode::TimedOut => {}
            }
        }
        all
    }

    #[test]
    fn every_code_reads_back_and_the_guide_says_each() {
        let guide = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide.md"),
        )
        .unwrap();
        let said = guide
            .split("the exit code says how it ended:")
            .nth(1)
            .and_then(|rest| rest.split("Inside OpenHands").next())
            .unwrap_or_default()
            .replace('\n', " ");
        for code in every() {
            assert_eq!(ExitCode::from_code(code.code()), code);
            let number = code.code();
            assert!(
                said.contains(&format!(" {number} ")),
                "docs/guide.md does not say what exit code {number} means: {said}"
            );
        }
    }
}
