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

/// A dangling symlink pointing out of the repository: refused at validation, and at apply when
/// planted after the run — before anything is written.
#[test]
fn a_dangling_symlink_out_of_the_repository_is_refused_at_validation_and_at_apply() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let outside = sandbox.root().join("outside-nowhere");
    std::os::unix::fs::symlink(&outside, sandbox.repo.join("dlink")).unwrap();
    let through_link = json!([
        {"id": "a", "operation": "write_file", "params": {"file_path": "aaa.txt", "content": "x"}},
        {"id": "d", "operation": "write_file",
         "params": {"file_path": "dlink/x.txt", "content": "x"}}
    ]);
    let refused = sandbox.run(&through_link, "v");
    assert_exit(&refused, 2);
    assert!(stderr(&refused).contains("dlink"), "{}", stderr(&refused));
    assert!(!outside.exists());

    let into_dir = json!([
        {"id": "a", "operation": "write_file", "params": {"file_path": "aaa.txt", "content": "x"}},
        {"id": "d", "operation": "write_file", "params": {"file_path": "d/x.txt", "content": "x"}}
    ]);
    assert_exit(&sandbox.run(&into_dir, "t"), 0);
    std::os::unix::fs::symlink(&outside, sandbox.repo.join("d")).unwrap();
    let before = tree(&sandbox.repo);
    let output = sandbox.ocflow().args(["apply", "t"]).output().unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("not applying anything"),
        "{}",
        stderr(&output)
    );
    assert_eq!(tree(&sandbox.repo), before, "nothing was written");
    assert!(!outside.exists());
}

/// A file planted where the flow needs a directory stops the apply before any write (it used
/// to write the other files, then fail).
#[test]
fn a_file_where_a_directory_must_be_stops_the_apply_before_any_write() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let flow = json!([
        {"id": "a", "operation": "write_file", "params": {"file_path": "aaa.txt", "content": "x"}},
        {"id": "p", "operation": "write_file", "params": {"file_path": "p/x.txt", "content": "x"}}
    ]);
    assert_exit(&sandbox.run(&flow, "t"), 0);
    std::fs::write(sandbox.repo.join("p"), "a file\n").unwrap();
    let before = tree(&sandbox.repo);
    let output = sandbox.ocflow().args(["apply", "t"]).output().unwrap();
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(err.contains("p/x.txt (needs p to be a directory)"), "{err}");
    assert_eq!(tree(&sandbox.repo), before, "nothing was written");
}

/// `apply TASK --repo OTHER` used to write into the task's own repository, silently.
#[test]
fn apply_into_another_repository_than_the_tasks_is_refused() {
    let sandbox = Sandbox::new(&[("a.txt", "old a\n"), ("gone.txt", "bye\n")]);
    assert_exit(&sandbox.run(&editing_flow(), "t"), 0);
    let other = sandbox.root().join("other");
    std::fs::create_dir(&other).unwrap();
    let before = tree(&sandbox.repo);
    let output = sandbox
        .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
        .arg("--repo")
        .arg(&other)
        .arg("--workspace")
        .arg(&sandbox.workspace)
        .args(["apply", "t"])
        .output()
        .unwrap();
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(err.contains("was made from the repository"), "{err}");
    assert_eq!(tree(&sandbox.repo), before);
    assert!(tree(&other).is_empty());
}
