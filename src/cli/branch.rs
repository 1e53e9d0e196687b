//! `ocflow apply ID --branch NAME`: the flow's changes as one commit on a new branch, made with
//! git's plumbing in an index of its own — the working tree, the index and the current branch
//! are never touched, so many tasks can each become a branch (and a pull request) while the
//! user works. The branch starts at HEAD; each changed file is taken whole as the flow left it.
//! Beside it, `pull_request.md` in the task directory: the task, the summary, the tests run, the
//! files — what a pull request's description takes.

use crate::cli::git::git;
use std::path::Path;

use ocflow_core::task::review::{Change, ChangeKind};
use ocflow_core::task::workspace::{self, TaskDir};
use ocflow_model::error::{Error, Result};
use ocflow_model::output::say;
use ocflow_model::status::FlowStatus;

/// The description file a pull request takes, in the task directory.
pub(crate) const PULL_REQUEST_FILE: &str = "pull_request.md";

/// Commits `changes` of `task` on the new branch `name` of its repository; returns the commit.
pub(crate) fn commit_on_branch(
    task: &TaskDir,
    flow_status: &FlowStatus,
    changes: &[Change],
    name: &str,
    message: &str,
) -> Result<String> {
    let repo = &flow_status.repo;
    if changes.is_empty() {
        return Err(Error::Usage(format!(
            "task {} changed no file: there is nothing to commit on {name}",
            task.task_id
        )));
    }
    git(repo, &["check-ref-format", "--branch", name], &[]).map_err(|_| {
        Error::Usage(format!(
            "{name:?} is not a valid branch name (git check-ref-format); give another"
        ))
    })?;
    let head = git(repo, &["rev-parse", "--verify", "HEAD^{commit}"], &[]).map_err(|_| {
        Error::Usage(format!(
            "{} has no commit to start a branch from; commit once, or apply without --branch",
            repo.display()
        ))
    })?;
    // An index of the branch's own, in the task directory: the user's is never read or written.
    let index = task.file("_branch.index");
    let _ = std::fs::remove_file(&index);
    let env = [("GIT_INDEX_FILE", index.as_os_str())];
    git(repo, &["read-tree", &head], &env)?;
    for change in changes {
        let path = change.path.as_str();
        match (change.kind, change.new_file()) {
            (ChangeKind::Deleted, _) | (_, None) => {
                git(repo, &["update-index", "--force-remove", "--", path], &env)?;
            }
            (_, Some(file)) => {
                let file_text = file.to_string_lossy();
                let blob = git(
                    repo,
                    &["hash-object", "-w", "--no-filters", &file_text],
                    &[],
                )?;
                let mode = if is_executable(file) {
                    "100755"
                } else {
                    "100644"
                };
                let entry = format!("{mode},{blob},{path}");
                git(
                    repo,
                    &["update-index", "--add", "--cacheinfo", &entry],
                    &env,
                )?;
            }
        }
    }
    let tree = git(repo, &["write-tree"], &env)?;
    let _ = std::fs::remove_file(&index);
    let commit = git(
        repo,
        &["commit-tree", &tree, "-p", &head, "-m", message],
        &[],
    )?;
    // The empty old value: the branch must not exist yet (never moved under someone's work).
    let reference = format!("refs/heads/{name}");
    git(repo, &["update-ref", &reference, &commit, ""], &[]).map_err(|_| {
        Error::Usage(format!(
            "the branch {name} already exists; nothing was changed. Give another name"
        ))
    })?;
    let description = task.file(PULL_REQUEST_FILE);
    let _ = std::fs::write(&description, pull_request(task, flow_status, changes));
    say(&format!(
        "ocflow: committed task {}'s {} file(s) on the new branch {name} ({}); your working \
         tree, index and branch are as they were. A pull request's description: {}",
        task.task_id,
        changes.len(),
        &commit[..commit.len().min(12)],
        description.display()
    ));
    Ok(commit)
}

/// The pull request's description: the task, the flow's summary, the tests it ran, the files.
fn pull_request(task: &TaskDir, flow_status: &FlowStatus, changes: &[Change]) -> String {
    let summary = std::fs::read_to_string(task.file(workspace::SUMMARY_FILE)).unwrap_or_default();
    let tests: Vec<String> = flow_status
        .steps
        .iter()
        .filter(|s| s.operation == "run_tests" || s.operation == "reproduce")
        .map(|s| {
            format!(
                "- `{}` ({}): {}",
                s.id,
                s.status,
                s.message.as_deref().unwrap_or("")
            )
        })
        .collect();
    let files: Vec<String> = changes
        .iter()
        .map(|c| format!("- {} ({})", c.path, c.kind.name()))
        .collect();
    format!(
        "## Task\n\n{}\n\n## What the flow did\n\n{}\n\n## Tests run\n\n{}\n\n## Files\n\n{}\n\n\
         Made by ocflow from task {}.\n",
        flow_status.task.trim(),
        summary.trim(),
        if tests.is_empty() {
            "(none)".to_string()
        } else {
            tests.join("\n")
        },
        files.join("\n"),
        task.task_id
    )
}

fn is_executable(file: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(file).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}
