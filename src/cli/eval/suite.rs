//! An eval's input, `SUITE.jsonl`: `batch`'s task lines, each with a `check` — the command that
//! says whether the task is solved, run on the flow's result in a fresh copy of the repository,
//! never shown to the model. The checks are taken out and the rest written as the batch's
//! tasks file, relative paths made absolute (the batch reads it from `--out`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The checks of a suite, by task id, and its tasks as the batch reads them.
#[derive(Debug)]
pub(crate) struct Suite {
    pub(crate) checks: BTreeMap<String, Check>,
    /// The suite's lines without their checks (each a JSON object), with their task ids, in
    /// the suite's order.
    lines: Vec<(String, String)>,
}

impl Suite {
    /// Its tasks as the batch reads them: JSON lines, without the checks.
    pub(crate) fn tasks_file(&self) -> String {
        self.lines
            .iter()
            .map(|(_, line)| format!("{line}\n"))
            .collect()
    }

    /// Takes the tasks `ids` out of the suite.
    pub(crate) fn leave_out(&mut self, ids: &[String]) {
        for id in ids {
            self.checks.remove(id);
        }
        self.lines.retain(|(id, _)| !ids.contains(id));
    }
}

/// How one task is judged.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    /// The command (`/bin/sh -c`), run in a fresh copy of the repository with the flow's changes.
    pub(crate) command: String,
    /// The repository as the suite names it: a directory (absolute) or a git URL and revision.
    pub(crate) repo: Repo,
    /// The task, in words.
    pub(crate) task: String,
    /// The files the model alone is shown (`--baseline`; the suite's `files`).
    pub(crate) files: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) enum Repo {
    Path(PathBuf),
    Git { url: String, rev: Option<String> },
}

/// Reads the suite at `path`: every problem is reported at once with its line number.
pub(crate) fn read(path: &Path) -> Result<Suite, String> {
    let text = std::fs::read_to_string(path).map_err(|err| {
        format!(
            "cannot read {}: {err}; give the path of a JSON-lines suite",
            path.display()
        )
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let base = std::path::absolute(base).unwrap_or_else(|_| base.to_path_buf());
    let mut checks = BTreeMap::new();
    let mut lines = Vec::new();
    let mut problems = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match task_line(line, &base) {
            Ok((id, check, rest)) => {
                lines.push((id.clone(), rest));
                checks.insert(id, check);
            }
            Err(problem) => problems.push(format!("line {}: {problem}", index + 1)),
        }
    }
    if !problems.is_empty() {
        return Err(format!(
            "{} is not a valid suite; nothing ran:\n{}",
            path.display(),
            problems.join("\n")
        ));
    }
    if checks.is_empty() {
        return Err(format!(
            "{} has no task: write one JSON object a line, e.g. {{\"id\": \"t1\", \"task\": \
             \"Fix add in calc.py\", \"repo\": \"calc\", \"check\": \"python3 -m pytest -q\"}}",
            path.display()
        ));
    }
    Ok(Suite { checks, lines })
}

/// One line: its id, its check, and the line without the check (paths absolute).
fn task_line(line: &str, base: &Path) -> Result<(String, Check, String), String> {
    let mut object: Map<String, Value> =
        serde_json::from_str(line).map_err(|err| format!("not a JSON object ({err})"))?;
    let command = match object.remove("check") {
        Some(Value::String(command)) if !command.trim().is_empty() => command,
        Some(_) => return Err("\"check\" must be a command, as a non-empty string".into()),
        None => {
            return Err(
                "no \"check\": give the command that says whether the task is solved, run on \
                 the flow's result (e.g. \"check\": \"python3 -m pytest -q tests\")"
                    .into(),
            );
        }
    };
    let files = match object.remove("files") {
        None => Vec::new(),
        Some(Value::Array(files)) if files.iter().all(Value::is_string) => files
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Some(_) => return Err("\"files\" must be a list of paths".into()),
    };
    let task = object
        .get("task")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let id = match object.get("id") {
        Some(Value::String(id)) => id.clone(),
        _ => return Err("no \"id\" (a string)".into()),
    };
    let absolute = |value: &str| base.join(value).to_string_lossy().into_owned();
    let repo = match object.get_mut("repo") {
        Some(Value::String(dir)) => {
            *dir = absolute(dir);
            Repo::Path(PathBuf::from(dir.as_str()))
        }
        Some(Value::Object(git)) => match (git.get("git"), git.get("rev")) {
            (Some(Value::String(url)), rev) => Repo::Git {
                url: url.clone(),
                rev: rev.and_then(Value::as_str).map(str::to_string),
            },
            _ => return Err("\"repo\" must be a directory or {\"git\": URL}".into()),
        },
        _ => return Err("no \"repo\" (a directory, or {\"git\": URL})".into()),
    };
    if let Some(Value::String(plan)) = object.get_mut("plan") {
        *plan = absolute(plan);
    }
    let rest = serde_json::to_string(&object).map_err(|err| err.to_string())?;
    Ok((
        id,
        Check {
            command,
            repo,
            task,
            files,
        },
        rest,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_are_taken_out_and_paths_made_absolute() {
        let dir = tempfile::tempdir().unwrap();
        let suite = dir.path().join("suite.jsonl");
        std::fs::write(
            &suite,
            "{\"id\": \"a\", \"task\": \"t\", \"repo\": \"r\", \"plan\": \"p.json\", \
             \"check\": \"make test\"}\n\n",
        )
        .unwrap();
        let read = read(&suite).unwrap();
        let line: Value = serde_json::from_str(read.tasks_file().trim()).unwrap();
        assert_eq!(line.get("check"), None, "the model never sees the check");
        assert_eq!(
            line["repo"],
            dir.path().join("r").to_string_lossy().as_ref()
        );
        assert_eq!(
            line["plan"],
            dir.path().join("p.json").to_string_lossy().as_ref()
        );
        assert_eq!(read.checks["a"].command, "make test");
    }

    #[test]
    fn every_bad_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let suite = dir.path().join("suite.jsonl");
        std::fs::write(
            &suite,
            "{\"id\": \"a\", \"task\": \"t\", \"repo\": \"r\"}\nnot json\n\
             {\"id\": \"c\", \"task\": \"t\", \"repo\": \"r\", \"check\": 3}\n",
        )
        .unwrap();
        let problem = read(&suite).unwrap_err();
        assert!(problem.contains("line 1: no \"check\""), "{problem}");
        assert!(problem.contains("line 2: not a JSON object"), "{problem}");
        assert!(
            problem.contains("line 3: \"check\" must be a command"),
            "{problem}"
        );
    }
}
