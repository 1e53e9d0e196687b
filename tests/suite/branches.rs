//! `ocflow apply ID --branch NAME` (issue 42): the flow's changes as one commit on a new branch,
//! the working tree, the index and the current branch untouched; a pull request's description
//! beside it; an existing branch refused.

use serde_json::json;

use super::support::*;

#[test]
fn a_flow_becomes_a_commit_on_a_new_branch_and_nothing_else_changes() {
    let sandbox = Sandbox::new(&[
        ("a.txt", "old a\n"),
        ("gone.txt", "bye\n"),
        ("work.txt", "w\n"),
    ]);
    git(&sandbox.repo, &["init", "-q", "-b", "main"]);
    git(&sandbox.repo, &["add", "-A"]);
    git(&sandbox.repo, &["commit", "-qm", "start"]);
    let flow = json!({"task": "Edit a and add b", "steps": [
        {"id": "edit", "operation": "write_file",
         "params": {"file_path": "a.txt", "content": "new a\n"}},
        {"id": "add", "operation": "write_file",
         "params": {"file_path": "dir/b.txt", "content": "b\n"}},
        {"id": "remove", "operation": "delete_file", "params": {"file_path": "gone.txt"}}
    ]});
    assert_exit(&sandbox.run(&flow, "t"), 0);
    // The user's work in progress: a changed file and a staged one.
    std::fs::write(sandbox.repo.join("work.txt"), "w, edited\n").unwrap();
    std::fs::write(sandbox.repo.join("staged.txt"), "s\n").unwrap();
    git(&sandbox.repo, &["add", "staged.txt"]);
    let status_before = git(&sandbox.repo, &["status", "--porcelain"]);
    let head_before = git(&sandbox.repo, &["rev-parse", "HEAD"]);

    let output = sandbox
        .ocflow()
        .args(["apply", "t", "--branch", "ocflow/t"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert!(
        stderr(&output).contains("on the new branch ocflow/t"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        git(&sandbox.repo, &["status", "--porcelain"]),
        status_before
    );
    assert_eq!(git(&sandbox.repo, &["rev-parse", "HEAD"]), head_before);
    assert_eq!(
        git(&sandbox.repo, &["branch", "--show-current"]).trim(),
        "main"
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("a.txt")).unwrap(),
        "old a\n"
    );
    // The branch: HEAD plus exactly the flow's changes.
    let files = git(
        &sandbox.repo,
        &["diff", "--name-status", "main", "ocflow/t"],
    );
    assert_eq!(files, "M\ta.txt\nA\tdir/b.txt\nD\tgone.txt\n");
    assert_eq!(git(&sandbox.repo, &["show", "ocflow/t:a.txt"]), "new a\n");
    assert_eq!(git(&sandbox.repo, &["rev-parse", "ocflow/t^"]), head_before);
    let subject = git(&sandbox.repo, &["log", "-1", "--format=%s", "ocflow/t"]);
    assert_eq!(subject.trim(), "Edit a and add b");
    let description =
        std::fs::read_to_string(sandbox.task_dir("t").join("pull_request.md")).unwrap();
    assert!(
        description.contains("## Task\n\nEdit a and add b"),
        "{description}"
    );
    assert!(description.contains("- dir/b.txt (added)"), "{description}");
    // Not an apply: the task still waits to be applied to the working tree.
    assert!(sandbox.status("t")["applied_at"].is_null());
    // The same name again: refused, the branch unchanged.
    let again = sandbox
        .ocflow()
        .args(["apply", "t", "--branch", "ocflow/t"])
        .output()
        .unwrap();
    assert_exit(&again, 2);
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );
    let bad = sandbox
        .ocflow()
        .args(["apply", "t", "--branch", "no..dots"])
        .output()
        .unwrap();
    assert_exit(&bad, 2);
    assert!(
        stderr(&bad).contains("not a valid branch name"),
        "{}",
        stderr(&bad)
    );
}
