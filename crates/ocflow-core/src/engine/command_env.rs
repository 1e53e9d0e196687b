//! The variables ocflow sets for a step's commands: its own temporary directory, git kept
//! inside the view, the markers `orphans` finds its processes by, bytecode caches off, lines
//! 200 columns wide (`COLUMNS`: runners' failure lines uncut), and npm
//! offline when the step has no network. They travel in the step spec's `env` (with the values
//! of the command's references); the library starts each command with the process's
//! environment without secrets (`process.py` `scrub_env`) and these on top, and adds none of
//! its own.

use std::path::Path;

use serde_json::{Map, Value};

use crate::engine::orphans;
use crate::task::workspace::TaskDir;

/// The width a command's output is laid out for.
const COLUMNS: &str = "200";

/// What a command step's commands are given, for the step `step` of `task` whose temporary
/// directory is `temp`; `offline`: the sandbox keeps the step off the network.
pub(crate) fn for_command_step(
    task: &TaskDir,
    step: &str,
    temp: &Path,
    offline: bool,
) -> Map<String, Value> {
    let text = |value: &Path| Value::String(value.to_string_lossy().into_owned());
    let mut env = Map::new();
    env.insert("TMPDIR".into(), text(temp));
    // The view has no .git of its own: git must not find the user's repository above it.
    env.insert("GIT_CEILING_DIRECTORIES".into(), text(&task.root));
    // Marks the command (and what it starts) as this task's and this step's, for
    // `orphans::stop` and `orphans::stop_step`.
    env.insert(
        orphans::MARKER.into(),
        Value::String(orphans::marker_value(task)),
    );
    env.insert(orphans::STEP_MARKER.into(), Value::String(step.to_string()));
    // Files in the view are replaced within the same second with the same size when a step
    // runs again; Python's bytecode cache keys on seconds and size, so it would run stale code.
    env.insert("PYTHONDONTWRITEBYTECODE".into(), Value::String("1".into()));
    // No terminal to size lines by: runners cut their failure lines at 80 columns (pytest's
    // short summary, `AssertionErr...`), losing the values the step failed on.
    env.insert("COLUMNS".into(), Value::String(COLUMNS.into()));
    if offline {
        // npm and npx fetch a package that is not installed, retrying for over a minute when
        // there is no network: offline, they fail at once, and the step's message says which
        // package is missing.
        env.insert("npm_config_offline".into(), Value::String("true".into()));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(env: &Map<String, Value>) -> Vec<&str> {
        env.keys().map(String::as_str).collect()
    }

    #[test]
    fn a_command_step_gets_its_temp_dir_the_ceiling_the_markers_and_no_bytecode() {
        let root = tempfile::tempdir().unwrap();
        let task = TaskDir::at(root.path().to_path_buf()).unwrap();
        let temp = root.path().join("s1").join("tmp");
        let env = for_command_step(&task, "s1", &temp, false);
        let mut expected = vec![
            "COLUMNS",
            "GIT_CEILING_DIRECTORIES",
            "OCFLOW_STEP",
            "OCFLOW_TASK",
            "PYTHONDONTWRITEBYTECODE",
            "TMPDIR",
        ];
        expected.sort();
        let mut seen = names(&env);
        seen.sort();
        assert_eq!(seen, expected);
        assert_eq!(env["TMPDIR"], Value::String(temp.display().to_string()));
        assert_eq!(
            env["GIT_CEILING_DIRECTORIES"],
            Value::String(root.path().display().to_string())
        );
        assert_eq!(env["OCFLOW_STEP"], Value::String("s1".into()));
        assert_eq!(
            env["OCFLOW_TASK"],
            Value::String(orphans::marker_value(&task))
        );
        assert_eq!(env["PYTHONDONTWRITEBYTECODE"], Value::String("1".into()));
        assert_eq!(env["COLUMNS"], Value::String("200".into()));
    }

    #[test]
    fn npm_runs_offline_only_when_the_step_has_no_network() {
        let root = tempfile::tempdir().unwrap();
        let task = TaskDir::at(root.path().to_path_buf()).unwrap();
        let temp = root.path().join("tmp");
        let offline = for_command_step(&task, "s", &temp, true);
        assert_eq!(
            offline.get("npm_config_offline"),
            Some(&Value::String("true".into()))
        );
        let online = for_command_step(&task, "s", &temp, false);
        assert_eq!(online.get("npm_config_offline"), None);
    }
}
