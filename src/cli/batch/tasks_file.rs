//! The batch's input, `TASKS.jsonl`: one JSON object a line naming a task, its repository and
//! optionally its plan, model and endpoint. Every line is read and checked before anything
//! runs, and every problem is reported at once with its line number (exit 2).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Where a task's repository comes from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RepoSource {
    /// A directory (for the Ray engine: on storage every node sees).
    Path(PathBuf),
    /// A git repository a Ray worker clones into its scratch space.
    Git { url: String, rev: Option<String> },
}

/// One line of TASKS.jsonl, checked.
#[derive(Debug, Clone)]
pub(crate) struct BatchTask {
    /// Unique in the file; the flow's task id and the name of its files under `--out`.
    pub(crate) id: String,
    /// The task, in words.
    pub(crate) task: String,
    pub(crate) repo: RepoSource,
    /// A flow file to run instead of planning (absolute).
    pub(crate) plan: Option<PathBuf>,
    /// The model this task's flow asks (`--model`).
    pub(crate) model: Option<String>,
    /// The OpenAI-compatible endpoint this task's flow asks, through the batch's LLM gate.
    pub(crate) base_url: Option<String>,
}

/// A line as written: unknown fields are refused, so a misspelt one is not silently ignored.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLine {
    id: String,
    task: String,
    repo: RawRepo,
    #[serde(default)]
    plan: Option<PathBuf>,
    #[serde(default, alias = "profile")]
    model: Option<String>,
    #[serde(default)]
    base_url: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawRepo {
    Path(PathBuf),
    Git {
        git: String,
        #[serde(default)]
        rev: Option<String>,
    },
}

/// Why TASKS.jsonl cannot run: every problem found, one per line.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TasksFileError {
    #[error("cannot read {path}: {source}; give the path of a JSON-lines file of tasks")]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} has no task: write one JSON object a line, e.g. {{\"id\": \"t1\", \"task\": \
         \"Add a README\", \"repo\": \"path/to/repo\"}}"
    )]
    Empty { path: PathBuf },
    #[error("{path} is not a valid tasks file; nothing ran:\n{}", problems.join("\n"))]
    Invalid {
        path: PathBuf,
        problems: Vec<String>,
    },
}

/// Reads and checks every line of `path`. Relative `repo` and `plan` paths are taken from the
/// file's own directory. `git_allowed`: whether `{"git": ...}` repositories can run (only the
/// Ray engine clones them).
pub(crate) fn read(path: &Path, git_allowed: bool) -> Result<Vec<BatchTask>, TasksFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| TasksFileError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let base = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let base = std::path::absolute(&base).unwrap_or(base);
    let mut problems = Vec::new();
    let mut tasks = Vec::new();
    let mut first_line_of: HashMap<String, usize> = HashMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let parsed: RawLine = match serde_json::from_str(raw) {
            Ok(parsed) => parsed,
            Err(err) => {
                problems.push(format!(
                    "line {line}: {err} (each line is one JSON object with \"id\", \"task\" \
                     and \"repo\"; \"plan\", \"model\" and \"base_url\" are optional)"
                ));
                continue;
            }
        };
        match check(parsed, line, &base, git_allowed) {
            Ok(task) => {
                if let Some(first) = first_line_of.get(&task.id) {
                    problems.push(format!(
                        "line {line}: the id {:?} is already used on line {first}; give each \
                         task an id of its own",
                        task.id
                    ));
                } else {
                    first_line_of.insert(task.id.clone(), line);
                    tasks.push(task);
                }
            }
            Err(mut found) => problems.append(&mut found),
        }
    }
    if !problems.is_empty() {
        return Err(TasksFileError::Invalid {
            path: path.to_path_buf(),
            problems,
        });
    }
    if tasks.is_empty() {
        return Err(TasksFileError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(tasks)
}

/// Checks one parsed line; `Err` holds each of its problems.
fn check(
    raw: RawLine,
    line: usize,
    base: &Path,
    git_allowed: bool,
) -> Result<BatchTask, Vec<String>> {
    let mut problems = Vec::new();
    // The id names a directory and files under --out: a plain name, never a path.
    let id_ok = !raw.id.is_empty()
        && raw.id.len() <= 100
        && !raw.id.starts_with('.')
        && !raw.id.starts_with('-')
        && raw
            .id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !id_ok {
        problems.push(format!(
            "line {line}: the id {:?} is not a plain name; use letters, digits, '-', '_' and \
             '.' (at most 100, not starting with '.' or '-')",
            raw.id
        ));
    }
    if raw.task.trim().is_empty() {
        problems.push(format!(
            "line {line}: \"task\" is empty; say in words what the flow should do"
        ));
    }
    let repo = match raw.repo {
        RawRepo::Path(dir) => {
            let dir = base.join(dir);
            // Where a symlink leads, checked there: a batch writes into it with --apply.
            let real = dir.canonicalize().unwrap_or_else(|_| dir.clone());
            if !dir.is_dir() {
                problems.push(format!(
                    "line {line}: the repository {} is not a directory; give the path of a \
                     repository (relative paths are taken from the tasks file's directory)",
                    dir.display()
                ));
            } else if !real.join(".git").exists() {
                // As `ocflow run` refuses to run where no work tree is found: a tasks file is
                // written by hand or by a script, and `/etc` ran (its snapshot held
                // /etc/shadow), and `--apply` wrote there.
                problems.push(format!(
                    "line {line}: the repository {} is not a git work tree (no .git at its \
                     root{}); give the root of a repository, or `git init` it first",
                    dir.display(),
                    if real == dir {
                        String::new()
                    } else {
                        format!(", where it leads: {}", real.display())
                    }
                ));
            }
            RepoSource::Path(real)
        }
        RawRepo::Git { git, rev } => {
            if !git_allowed {
                problems.push(format!(
                    "line {line}: the repository {{\"git\": {git:?}}} is cloned only by the Ray \
                     engine's workers; run with --engine ray, or clone it and give its path"
                ));
            } else if git.trim().is_empty() {
                problems.push(format!("line {line}: \"git\" is empty; give a clone URL"));
            }
            RepoSource::Git { url: git, rev }
        }
    };
    let plan = raw.plan.map(|plan| base.join(plan));
    if let Some(plan) = &plan
        && !plan.is_file()
    {
        problems.push(format!(
            "line {line}: the plan {} does not exist; give a flow file, or leave \"plan\" out \
             to have the LLM plan",
            plan.display()
        ));
    }
    if let Some(url) = &raw.base_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        problems.push(format!(
            "line {line}: \"base_url\" {url:?} must start with http:// or https:// (for \
             example http://localhost:8000/v1)"
        ));
    }
    if raw.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
        problems.push(format!(
            "line {line}: \"model\" is empty; name a model or leave it out"
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(BatchTask {
        id: raw.id,
        task: raw.task,
        repo,
        plan,
        model: raw.model,
        base_url: raw.base_url.map(|u| u.trim_end_matches('/').to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(lines: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("repo/.git")).unwrap();
        std::fs::write(dir.path().join("flow.json"), "[]").unwrap();
        let path = dir.path().join("tasks.jsonl");
        std::fs::write(&path, lines).unwrap();
        (dir, path)
    }

    #[test]
    fn every_problem_is_named_with_its_line() {
        let (_dir, path) = file(concat!(
            "{\"id\": \"a\", \"task\": \"x\", \"repo\": \"repo\", \"plan\": \"flow.json\"}\n",
            "{\"id\": \"a\", \"task\": \"y\", \"repo\": \"repo\"}\n",
            "\n",
            "{\"id\": \"b\", \"task\": \"y\", \"repo\": \"nowhere\"}\n",
            "not json\n",
            "{\"id\": \"../c\", \"task\": \"y\", \"repo\": \"repo\", \"plan\": \"no.json\"}\n",
            "{\"id\": \"d\", \"task\": \"y\", \"repo\": {\"git\": \"https://x/y.git\"}}\n",
            "{\"id\": \"e\", \"task\": \"y\", \"repo\": \"repo\", \"modle\": \"m\"}\n",
        ));
        let Err(TasksFileError::Invalid { problems, .. }) = read(&path, false) else {
            panic!("accepted");
        };
        let lines: Vec<&str> = problems
            .iter()
            .map(|p| p.split(':').next().unwrap())
            .collect();
        assert_eq!(
            lines,
            [
                "line 2", "line 4", "line 5", "line 6", "line 6", "line 7", "line 8"
            ],
            "{problems:#?}"
        );
        assert!(
            problems[0].contains("already used on line 1"),
            "{}",
            problems[0]
        );
        assert!(problems[5].contains("--engine ray"), "{}", problems[5]);
        assert!(problems[6].contains("modle"), "{}", problems[6]);
    }

    #[test]
    fn paths_are_taken_from_the_files_directory() {
        let (dir, path) = file(
            "{\"id\": \"a\", \"task\": \"x\", \"repo\": \"repo\", \"plan\": \"flow.json\", \
             \"base_url\": \"http://h:1/v1/\"}\n{\"id\": \"b\", \"task\": \"y\", \"repo\": \
             {\"git\": \"https://x/y.git\", \"rev\": \"main\"}}\n",
        );
        let tasks = read(&path, true).unwrap();
        let root = dir.path().canonicalize().unwrap();
        assert_eq!(tasks[0].repo, RepoSource::Path(root.join("repo")));
        assert_eq!(
            tasks[0].plan.as_deref(),
            Some(dir.path().join("flow.json").as_path())
        );
        assert_eq!(tasks[0].base_url.as_deref(), Some("http://h:1/v1"));
        assert_eq!(
            tasks[1].repo,
            RepoSource::Git {
                url: "https://x/y.git".into(),
                rev: Some("main".into())
            }
        );
    }
}
