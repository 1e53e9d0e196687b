//! The failure memory of one repository, as a flow uses it: what a failed step leaves in it
//! (normalised by `failure_fingerprint`, redacted like a prompt: no key, no line of a file git
//! ignores, no file content beyond the error lines), the past failures recalled before planning
//! and before recovery (`memory_recall`), and how a flow's failures ended. The database itself
//! is `memory_store`; the repository's key, shared by its clones, `repository_key`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use crate::engine::failure_fingerprint::{self, bounded, normalise};
use crate::engine::memory_recall::{self, Query, Recalled};
use crate::engine::memory_store::{MEMORY_FILE, MemoryError, MemoryStore, NewFailure, Remembered};
use crate::engine::repository_key;
use crate::flow::ignore_rules;
use crate::llm::redact::Redactor;
use crate::task::failure_cause;
use ocflow_model::decision::Decision;
use ocflow_model::flow::Step;
use ocflow_model::repo_path::RepoPath;
use ocflow_model::status::StepStatus;
use ocflow_model::step_result::StepResult;

/// The newest failures a recall compares, at most: the cost of a recall stays bounded however
/// long the memory grows (5000 failures took 0.9 s to read and print in a debug build).
const RECALLED_FROM: i64 = 500;
/// The task's words kept with a failure.
const MAX_TASK_CHARS: usize = 300;
/// What a strategy changed, as kept.
const MAX_FIX_CHARS: usize = 600;
/// A parameter's text kept in a fix.
const MAX_PARAM_CHARS: usize = 240;
/// Parameters that hold a file's content: never kept, only their size.
const CONTENT_PARAMS: &[&str] = &[
    "content",
    "new_content",
    "code",
    "patch",
    "diff",
    "replacement",
    "old_text",
    "new_text",
];

/// The memory of the repository a flow works on. Its key and redaction are found at first
/// use: a flow that fails nothing never asks git for the key nor reads the ignore rules (the
/// start of every flow paid for both, on its critical path: issue 28 §4).
pub struct Memory {
    /// `memory.sqlite` in the user's state directory.
    path: PathBuf,
    repo: PathBuf,
    /// Where the task directories are (never read for redaction).
    workspace: PathBuf,
    /// The repository's key (`repository_key`).
    repo_key: OnceLock<String>,
    /// The prompts' redaction, applied to everything stored.
    redactor: OnceLock<Redactor>,
}

impl Memory {
    /// The memory in `state_dir` (the user's `…/state/ocflow`) of the repository at `repo`,
    /// whose task directories are under `workspace` (never read for redaction).
    pub fn for_repository(state_dir: &Path, repo: &Path, workspace: &Path) -> Memory {
        Memory {
            path: state_dir.join(MEMORY_FILE),
            repo: repo.to_path_buf(),
            workspace: workspace.to_path_buf(),
            repo_key: OnceLock::new(),
            redactor: OnceLock::new(),
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The repository's key, as its failures are stored under.
    pub fn repo_key(&self) -> &str {
        self.repo_key
            .get_or_init(|| repository_key::key(&self.repo))
    }

    /// Opens the database (each use opens it: a flow holds no lock between its writes).
    pub fn open(&self) -> Result<MemoryStore, MemoryError> {
        MemoryStore::open(&self.path)
    }

    /// The failures remembered of flow `task_id`, oldest first.
    pub fn of_flow(&self, task_id: &str) -> Result<Vec<Remembered>, MemoryError> {
        self.open()?.of_task(self.repo_key(), task_id)
    }

    /// The past failures nearest to planning `task`.
    pub fn for_planning(&self, task: &str) -> Result<Recalled, MemoryError> {
        let past = self.open()?.recent(Some(self.repo_key()), RECALLED_FROM)?;
        let query = Query {
            text: normalise(&self.redact(task)),
            operation: None,
        };
        Ok(memory_recall::recall(
            &past,
            &query,
            memory_recall::BUDGET_BYTES,
        ))
    }

    /// The past failures nearest to `failure`, about to be recovered.
    pub fn for_recovery(&self, failure: &NewFailure) -> Result<Recalled, MemoryError> {
        let past = self.open()?.recent(Some(self.repo_key()), RECALLED_FROM)?;
        let query = Query {
            text: format!(
                "{} {} {} {} {} {}",
                failure.task,
                failure.operation,
                failure.error_class,
                failure.tests.join(" "),
                failure.files.join(" "),
                failure.error_lines.join(" ")
            ),
            operation: Some(failure.operation.clone()),
        };
        Ok(memory_recall::recall(
            &past,
            &query,
            memory_recall::BUDGET_BYTES,
        ))
    }

    /// The failure of `step` (its status `entry`, its `result` when it got one, its directory
    /// `step_dir`) in flow `task_id` doing `task`, normalised and redacted, before a strategy.
    pub fn failure(
        &self,
        task_id: &str,
        task: &str,
        step: &Step,
        entry: Option<&StepStatus>,
        result: Option<&StepResult>,
        step_dir: &Path,
    ) -> NewFailure {
        let evidence = failure_cause::evidence(result, step_dir, failure_cause::FOR_THE_MODEL);
        let error = entry.and_then(|s| s.error.as_ref());
        let first_test_class = result
            .and_then(|r| r.tests.as_ref())
            .and_then(|t| t.failures.iter().find_map(|f| f.error_type.clone()));
        let error_class = first_test_class
            .or_else(|| error.and_then(|e| e.exception_type.clone()))
            .or_else(|| error.map(|e| e.kind.clone()))
            .unwrap_or_else(|| "failure".into());
        let mut output: String = self.redact(
            &evidence
                .outputs
                .iter()
                .map(|(_, tail)| tail.as_str())
                .chain(evidence.log.as_deref())
                .collect::<Vec<_>>()
                .join("\n"),
        );
        if let Some(error) = error {
            output = format!("{}\n{output}", self.redact(&error.message));
        }
        let mut error_lines: Vec<String> = evidence
            .test_failures
            .iter()
            .map(|line| normalise(&self.redact(line)))
            .collect();
        error_lines.extend(failure_fingerprint::error_lines(&output));
        error_lines.dedup();
        error_lines.truncate(12);
        NewFailure {
            task_id: task_id.to_string(),
            task: bounded(&self.redact(task), MAX_TASK_CHARS),
            step: step.id.clone(),
            operation: step.operation.clone(),
            error_class: bounded(&normalise(&self.redact(&error_class)), 80),
            tests: failure_fingerprint::test_names(&evidence.test_failures)
                .into_iter()
                .map(|name| self.redact(&name))
                .collect(),
            files: self.files(step, entry),
            error_lines,
            strategy: None,
            fix: None,
        }
    }

    /// The repository paths a step named or changed, without those git ignores.
    fn files(&self, step: &Step, entry: Option<&StepStatus>) -> Vec<String> {
        let mut named: Vec<String> = Vec::new();
        for (name, value) in &step.params {
            if !(name.contains("path") || name.contains("file")) {
                continue;
            }
            match value {
                Value::String(path) => named.push(path.clone()),
                Value::Array(paths) => {
                    named.extend(paths.iter().filter_map(Value::as_str).map(str::to_string));
                }
                _ => {}
            }
        }
        named.extend(entry.map(|s| s.output_files.clone()).unwrap_or_default());
        let mut kept: Vec<String> = Vec::new();
        for path in named {
            let Ok(parsed) = RepoPath::parse(&path) else {
                continue;
            };
            if ignore_rules::ignored_by(&self.repo, &parsed).is_none()
                && !kept.iter().any(|k| k == parsed.as_str())
            {
                kept.push(parsed.as_str().to_string());
            }
        }
        kept.truncate(20);
        kept
    }

    /// Remembers `failure` followed by `decision`; its id.
    pub fn record(&self, mut failure: NewFailure, decision: &Decision) -> Result<i64, MemoryError> {
        failure.strategy = Some(decision.strategy.to_string());
        failure.fix = Some(self.redact(&fix_of(decision)));
        self.open()?.record(self.repo_key(), &failure)
    }

    /// Flow `task_id` ended (`flow_succeeded` or not, with `succeeded_steps`): its open
    /// failures ended with it.
    pub fn settle(
        &self,
        task_id: &str,
        flow_succeeded: bool,
        succeeded_steps: &[String],
    ) -> Result<usize, MemoryError> {
        self.open()?
            .settle(self.repo_key(), task_id, flow_succeeded, succeeded_steps)
    }

    /// The reflection's lesson, kept with flow `task_id`'s failures; `checked` when the flow
    /// verified its fix (a command that must pass passed at its end).
    pub fn teach(&self, task_id: &str, lesson: &str, checked: bool) -> Result<usize, MemoryError> {
        let lesson = bounded(&self.redact(lesson), MAX_FIX_CHARS);
        self.open()?
            .teach(self.repo_key(), task_id, &lesson, checked)
    }

    fn redact(&self, text: &str) -> String {
        let redactor = self
            .redactor
            .get_or_init(|| Redactor::for_repository(&self.repo, &self.workspace));
        redactor.redact(text).text
    }
}

/// What a decision changed, in a few words: its reason and the steps it proposed, with any
/// file content left out (only its size said).
fn fix_of(decision: &Decision) -> String {
    let steps: Vec<String> = decision
        .step
        .iter()
        .chain(decision.steps.iter())
        .map(step_in_words)
        .collect();
    let mut text = decision.reason.trim().to_string();
    if !steps.is_empty() {
        text.push_str(&format!(" [{}]", steps.join("; ")));
    }
    bounded(
        &text.split_whitespace().collect::<Vec<_>>().join(" "),
        MAX_FIX_CHARS,
    )
}

/// `step id (operation): name=value, …`, content parameters by their size only.
fn step_in_words(step: &Value) -> String {
    let id = step.get("id").and_then(Value::as_str).unwrap_or("?");
    let operation = step.get("operation").and_then(Value::as_str);
    let params: Vec<String> = step
        .get("params")
        .and_then(Value::as_object)
        .map(|params| {
            params
                .iter()
                .map(|(name, value)| {
                    let text = match value {
                        Value::String(text) if CONTENT_PARAMS.contains(&name.as_str()) => {
                            format!("<{} characters not kept>", text.chars().count())
                        }
                        Value::String(text) => format!("{text:?}"),
                        other => other.to_string(),
                    };
                    format!("{name}={}", bounded(&text, MAX_PARAM_CHARS))
                })
                .collect()
        })
        .unwrap_or_default();
    match operation {
        Some(operation) => format!("step {id} ({operation}): {}", params.join(", ")),
        None => format!("step {id}: {}", params.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocflow_model::decision::StrategyKind;

    #[test]
    fn a_fix_keeps_the_instructions_and_never_a_files_content() {
        let decision = Decision {
            strategy: StrategyKind::Modify,
            reason: "halve divides  with /".into(),
            step: Some(serde_json::json!({"id": "code", "params": {
                "file_path": "calc.py",
                "instructions": "Use floor division (//)",
                "content": "SECRET_BODY = 1\n"
            }})),
            steps: Vec::new(),
        };
        let fix = fix_of(&decision);
        assert_eq!(
            fix,
            "halve divides with / [step code: file_path=\"calc.py\", instructions=\"Use floor \
             division (//)\", content=<16 characters not kept>]"
        );
    }

    #[test]
    fn a_failure_is_stored_without_the_key_or_ignored_files_lines() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::write(repo.join(".gitignore"), ".env\nsecret/\n").unwrap();
        std::fs::write(
            repo.join(".env"),
            "DATABASE_URL=postgres://u:hunter2@db/x\n",
        )
        .unwrap();
        let memory =
            Memory::for_repository(&dir.path().join("state"), &repo, &dir.path().join("w"));
        let step: Step = serde_json::from_value(serde_json::json!({
            "id": "test", "operation": "run_tests",
            "params": {"file_path": "secret/keys.txt", "files": ["calc.py"]}
        }))
        .unwrap();
        let result: StepResult = serde_json::from_value(serde_json::json!({
            "version": 1, "status": "failure", "message": "1 failed",
            "stderr": "Traceback\nDATABASE_URL=postgres://u:hunter2@db/x\n\
                       KeyError: sk-abcdefghijklmnopqrstuvwxyz0123456789 at /tmp/r/calc.py:12\n"
        }))
        .unwrap();
        let failure = memory.failure("t", "fix it", &step, None, Some(&result), dir.path());
        let stored = format!("{failure:?}");
        assert!(!stored.contains("hunter2"), "{stored}");
        assert!(!stored.contains("sk-abcdefghijklmnop"), "{stored}");
        assert_eq!(
            failure.files,
            vec!["calc.py"],
            "an ignored path is not kept"
        );
        assert!(
            failure
                .error_lines
                .iter()
                .any(|l| l.starts_with("KeyError: [redacted") && l.ends_with("calc.py:N")),
            "{:?}",
            failure.error_lines
        );
        let id = memory
            .record(
                failure,
                &Decision {
                    strategy: StrategyKind::Skip,
                    reason: "no".into(),
                    step: None,
                    steps: Vec::new(),
                },
            )
            .unwrap();
        let kept = memory.open().unwrap().get(id).unwrap().unwrap();
        assert_eq!(kept.failure.strategy.as_deref(), Some("skip"));
        assert_eq!(kept.repo, memory.repo_key());
    }
}
