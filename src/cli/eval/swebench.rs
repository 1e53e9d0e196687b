//! SWE-bench-shaped instances as a suite, and predictions for the official harness.
//!
//! In: a JSON-lines file whose lines have `instance_id`, `repo` (a git repository: a local
//! path or a URL this machine can clone), `base_commit`, `problem_statement` and
//! `test_command` (the command that passes once the instance is solved: its FAIL_TO_PASS tests,
//! as the user's harness runs them). Each instance's repository is cloned at its base commit
//! under `--out` (`swebench/repos/ID`) and becomes a suite line. Out, after the eval:
//! `predictions.jsonl`, one line per finished flow — `instance_id`, `model_patch` (the flow's
//! diff, empty when it changed nothing) and `model_name_or_path` — which `swebench`'s
//! harness evaluates in its own containers.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::json;

use crate::cli::batch::results::TaskResult;

#[derive(Deserialize)]
struct Instance {
    instance_id: String,
    repo: String,
    base_commit: String,
    problem_statement: String,
    test_command: String,
}

/// Whether the file at `path` holds SWE-bench instances (its first line has `instance_id` and
/// `problem_statement`).
pub(crate) fn is_instances(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    serde_json::from_str::<serde_json::Value>(first).is_ok_and(|line| {
        line.get("instance_id").is_some() && line.get("problem_statement").is_some()
    })
}

/// Clones each instance at its base commit under `out` and writes the suite; returns its path.
pub(crate) fn suite(path: &Path, out: &Path) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let root = out.join("swebench");
    let mut lines = String::new();
    for (index, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let instance: Instance = serde_json::from_str(line).map_err(|err| {
            format!(
                "{} line {}: not a SWE-bench instance ({err}); each line needs instance_id, \
                 repo, base_commit, problem_statement and test_command",
                path.display(),
                index + 1
            )
        })?;
        let repo = root.join("repos").join(&instance.instance_id);
        if !repo.join(".git").is_dir() {
            let source = if Path::new(&instance.repo).exists() || !instance.repo.contains("://") {
                base.join(&instance.repo).to_string_lossy().into_owned()
            } else {
                instance.repo.clone()
            };
            git(&["clone", "-q", &source, &repo.to_string_lossy()], out)?;
        }
        git(&["checkout", "-q", "--force", &instance.base_commit], &repo)?;
        let line = json!({
            "id": instance.instance_id,
            "task": instance.problem_statement,
            "repo": repo,
            "check": instance.test_command,
        });
        lines.push_str(&format!("{line}\n"));
    }
    let suite = root.join("suite.jsonl");
    std::fs::write(&suite, lines)
        .map_err(|err| format!("cannot write {}: {err}", suite.display()))?;
    Ok(suite)
}

/// Writes `predictions.jsonl` in `out`: each finished flow's diff as its instance's patch.
pub(crate) fn write_predictions<'a>(
    out: &Path,
    finished: impl Iterator<Item = &'a TaskResult>,
    model: &str,
) -> Result<PathBuf, String> {
    let mut lines = String::new();
    for result in finished {
        let patch = match &result.diff {
            Some(diff) => std::fs::read_to_string(diff).map_err(|err| err.to_string())?,
            None => String::new(),
        };
        let line = json!({
            "instance_id": result.id,
            "model_patch": patch,
            "model_name_or_path": model,
        });
        lines.push_str(&format!("{line}\n"));
    }
    let path = out.join("predictions.jsonl");
    std::fs::write(&path, lines)
        .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    Ok(path)
}

fn git(args: &[&str], dir: &Path) -> Result<(), String> {
    let output = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|err| format!("cannot run git: {err}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "git {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}
