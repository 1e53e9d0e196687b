//! Lifecycle hooks: the user's own commands run at fixed points of a flow — before and after a
//! step, before a command step's command, before an apply, at a flow's end — each given the
//! point's event as JSON on stdin, bounded in time. A hook that exits non-zero blocks its point,
//! its stderr the reason: the step fails with it (a recovery sees it), the apply writes nothing;
//! a flow's end cannot be undone, so there it is only said and journaled.
//!
//! Hooks come from the user's config only (`[hooks]`): a repository's own config may not add
//! one until the user trusts it (`ocflow trust`), as it may not run any code. They run as the
//! user, in the repository, outside the sandbox: they are the user's commands, not the model's.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The points a hook may be set at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookPoint {
    BeforeStep,
    AfterStep,
    BeforeCommand,
    BeforeApply,
    FlowEnd,
}

impl HookPoint {
    /// The point's name, as the config and the events write it.
    pub fn name(self) -> &'static str {
        match self {
            HookPoint::BeforeStep => "before_step",
            HookPoint::AfterStep => "after_step",
            HookPoint::BeforeCommand => "before_command",
            HookPoint::BeforeApply => "before_apply",
            HookPoint::FlowEnd => "flow_end",
        }
    }
}

/// The hooks a run has, by point, in the order the config gives them.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    pub before_step: Vec<String>,
    pub after_step: Vec<String>,
    pub before_command: Vec<String>,
    pub before_apply: Vec<String>,
    pub flow_end: Vec<String>,
    /// How long each hook may run before it is stopped (and its point blocked).
    pub timeout: Duration,
    /// Where hooks run: the repository.
    pub dir: PathBuf,
}

/// A hook that blocked its point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub point: HookPoint,
    pub command: String,
    /// Its stderr, or what stopped it.
    pub reason: String,
}

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the {} hook `{}` blocked it: {}",
            self.point.name(),
            self.command,
            self.reason
        )
    }
}

/// A hook's stderr kept as its reason, at most.
const MAX_REASON: usize = 2000;

impl Hooks {
    /// The default time a hook may run.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

    fn commands(&self, point: HookPoint) -> &[String] {
        match point {
            HookPoint::BeforeStep => &self.before_step,
            HookPoint::AfterStep => &self.after_step,
            HookPoint::BeforeCommand => &self.before_command,
            HookPoint::BeforeApply => &self.before_apply,
            HookPoint::FlowEnd => &self.flow_end,
        }
    }

    /// Whether any hook is set at `point`.
    pub fn at(&self, point: HookPoint) -> bool {
        !self.commands(point).is_empty()
    }

    /// Runs the hooks of `point`, each given `event` (with `"hook": point`) on stdin, in order;
    /// the first that exits non-zero or runs out of time blocks the point.
    pub fn run(&self, point: HookPoint, event: &Value) -> Result<(), Blocked> {
        let mut event = event.clone();
        if let Value::Object(fields) = &mut event {
            fields.insert("hook".into(), Value::String(point.name().into()));
        }
        let input = serde_json::to_vec(&event).unwrap_or_default();
        for command in self.commands(point) {
            let blocked = |reason: String| Blocked {
                point,
                command: command.clone(),
                reason,
            };
            match self.run_one(command, &input) {
                Ok(None) => {}
                Ok(Some(reason)) => return Err(blocked(reason)),
                Err(problem) => return Err(blocked(problem)),
            }
        }
        Ok(())
    }

    /// One hook: `None` when it passed, else its reason.
    fn run_one(&self, command: &str, input: &[u8]) -> Result<Option<String>, String> {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new("/bin/sh")
            .args(["-c", command])
            .current_dir(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|err| format!("it could not start ({err})"))?;
        // A hook that reads nothing must not block the write: the event is small, written
        // from a thread of its own all the same.
        let mut stdin = child.stdin.take();
        let input = input.to_vec();
        let writer = std::thread::spawn(move || {
            if let Some(stdin) = stdin.as_mut() {
                let _ = stdin.write_all(&input);
            }
        });
        let mut stderr = child.stderr.take();
        let reader = std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(stderr) = stderr.as_mut() {
                let _ = stderr.take(64 * 1024).read_to_end(&mut text);
            }
            text
        });
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if started.elapsed() >= self.timeout => {
                    if let Some(group) = rustix::process::Pid::from_raw(child.id() as i32) {
                        let _ = rustix::process::kill_process_group(
                            group,
                            rustix::process::Signal::KILL,
                        );
                    }
                    let _ = child.wait();
                    break None;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(err) => return Err(format!("it could not be waited for ({err})")),
            }
        };
        let _ = writer.join();
        let said = String::from_utf8_lossy(&reader.join().unwrap_or_default())
            .trim()
            .to_string();
        let said: String = said.chars().take(MAX_REASON).collect();
        Ok(match status {
            None => Some(format!(
                "it ran out of time ({} s; `[hooks] timeout_seconds`)",
                self.timeout.as_secs()
            )),
            Some(status) if status.success() => None,
            Some(status) if said.is_empty() => Some(format!(
                "it exited {}",
                status
                    .code()
                    .map_or_else(|| "by a signal".into(), |c| c.to_string())
            )),
            Some(_) => Some(said),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hooks(command: &str) -> Hooks {
        Hooks {
            before_step: vec!["true".into(), command.into()],
            timeout: Duration::from_secs(2),
            dir: std::env::temp_dir(),
            ..Hooks::default()
        }
    }

    #[test]
    fn a_hook_reads_the_event_and_blocks_with_its_stderr() {
        let check = "grep -q '\"step\":\"b\"' && { echo 'no b today' >&2; exit 1; } || exit 0";
        let hooks = hooks(check);
        let event = serde_json::json!({"step": "a"});
        assert_eq!(hooks.run(HookPoint::BeforeStep, &event), Ok(()));
        let blocked = hooks
            .run(HookPoint::BeforeStep, &serde_json::json!({"step": "b"}))
            .unwrap_err();
        assert_eq!(blocked.reason, "no b today");
        assert_eq!(blocked.command, check);
        // Other points have no hook: nothing runs.
        assert_eq!(hooks.run(HookPoint::AfterStep, &event), Ok(()));
    }

    #[test]
    fn the_point_is_in_the_event_a_silent_failure_says_its_exit_and_time_is_bounded() {
        let named = hooks("grep -q '\"hook\":\"before_step\"'");
        assert_eq!(
            named.run(HookPoint::BeforeStep, &serde_json::json!({})),
            Ok(())
        );
        let silent = hooks("exit 3").run(HookPoint::BeforeStep, &serde_json::json!({}));
        assert_eq!(silent.unwrap_err().reason, "it exited 3");
        let started = Instant::now();
        let slow = hooks("sleep 30").run(HookPoint::BeforeStep, &serde_json::json!({}));
        assert!(slow.unwrap_err().reason.contains("ran out of time (2 s"));
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
