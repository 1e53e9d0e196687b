//! `apply` writes the flow's changes into the repository, and refuses when the repository
//! changed since the flow read it.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::*;

fn editing_flow() -> Value {
    json!({"task": "edit", "steps": [
        {"id": "edit", "operation": "write_file",
         "params": {"file_path": "a.txt", "content": "new a\n"}},
        {"id": "add", "operation": "write_file",
         "params": {"file_path": "dir/b.txt", "content": "b\n"}},
        {"id": "remove", "operation": "delete_file", "params": {"file_path": "gone.txt"}}
    ]})
}

#[test]
fn apply_writes_adds_and_deletes_then_knows_it_is_done() {
    let sandbox = Sandbox::new(&[
        ("a.txt", "old a\n"),
        ("gone.txt", "bye\n"),
        ("keep.txt", "keep\n"),
    ]);
    assert_exit(&sandbox.run(&editing_flow(), "t"), 0);
    let output = sandbox.ocflow().args(["apply", "t"]).output().unwrap();
    assert_exit(&output, 0);
    assert_eq!(
        text_tree(&sandbox.repo),
        [
            ("a.txt", "new a\n"),
            ("dir/b.txt", "b\n"),
            ("keep.txt", "keep\n")
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    );
    assert!(sandbox.status("t")["applied_at"].is_string());
    let again = sandbox.ocflow().args(["apply", "t"]).output().unwrap();
    assert_exit(&again, 0);
    assert!(
        stderr(&again).contains("already holds the changes"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn apply_refuses_after_the_repository_changed_unless_forced() {
    let sandbox = Sandbox::new(&[("a.txt", "old a\n"), ("gone.txt", "bye\n")]);
    assert_exit(&sandbox.run(&editing_flow(), "t"), 0);
    std::fs::write(sandbox.repo.join("a.txt"), "someone else's work\n").unwrap();
    let before = tree(&sandbox.repo);
    let refused = sandbox.ocflow().args(["apply", "t"]).output().unwrap();
    assert_exit(&refused, 2);
    let err = stderr(&refused);
    assert!(
        err.contains("the repository changed since the flow read these files")
            && err.contains("  a.txt")
            && err.contains("--force"),
        "{err}"
    );
    assert!(
        !err.contains("gone.txt"),
        "unchanged files are not listed: {err}"
    );
    assert_eq!(
        tree(&sandbox.repo),
        before,
        "nothing may be written when apply refuses"
    );

    assert_exit(
        &sandbox
            .ocflow()
            .args(["apply", "t", "--force"])
            .output()
            .unwrap(),
        0,
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("a.txt")).unwrap(),
        "new a\n"
    );
    assert!(!sandbox.repo.join("gone.txt").exists());
}

#[test]
fn run_with_apply_applies_a_successful_flow() {
    let sandbox = Sandbox::new(&[("a.txt", "old a\n"), ("gone.txt", "bye\n")]);
    let plan = sandbox.flow(&editing_flow());
    let output = sandbox
        .ocflow()
        .args(["run", "--apply", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("dir/b.txt")).unwrap(),
        "b\n"
    );
}

#[test]
fn a_failed_flow_is_not_applied() {
    let sandbox = Sandbox::new(&[("a.txt", "old a\n")]);
    let flow = json!([
        {"id": "edit", "operation": "write_file",
         "params": {"file_path": "a.txt", "content": "new\n"}},
        {"id": "fail", "operation": "execute_shell_command", "depends_on": "edit",
         "params": {"command": "exit 1"}}
    ]);
    assert_exit(&sandbox.run(&flow, "t"), 1);
    let output = sandbox.ocflow().args(["apply", "t"]).output().unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("is failed, not succeeded"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("a.txt")).unwrap(),
        "old a\n"
    );
}
