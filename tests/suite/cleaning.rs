//! Housekeeping (issue 40 §2): `ocflow list` says how much disk each task holds, `ocflow clean`
//! removes the tasks a user is done with (or the ones named), `--dry-run` only says so, and the
//! end of a run says when the workspace has grown large.

use serde_json::{Value, json};

use super::support::*;

fn write(id: &str, path: &str) -> Value {
    json!({"version": 1, "task": format!("write {path}"), "steps": [
        {"id": id, "operation": "write_file", "params": {"file_path": path, "content": "x\n"}}]})
}

fn failing() -> Value {
    json!({"version": 1, "task": "a check that fails", "steps": [
        {"id": "check", "operation": "execute_shell_command", "params": {"command": "exit 3"}}]})
}

/// A workspace of four tasks: `applied` (succeeded, its change written), `unapplied`
/// (succeeded, its change waiting for review), `failed`, and `paused` (resumable).
fn four_tasks() -> Sandbox {
    let sandbox = Sandbox::new(&[("README.md", "hello\n")]);
    assert_exit(&sandbox.run(&write("w", "a.txt"), "applied"), 0);
    assert_exit(
        &sandbox
            .ocflow()
            .args(["apply", "applied"])
            .output()
            .unwrap(),
        0,
    );
    assert_exit(&sandbox.run(&write("w", "b.txt"), "unapplied"), 0);
    assert_exit(&sandbox.run(&failing(), "failed"), 1);
    // A paused flow, as a budget leaves it: resumable, so never removed unless named.
    assert_exit(&sandbox.run(&write("w", "c.txt"), "paused"), 0);
    let status = sandbox.task_dir("paused").join("flow_status.json");
    let mut saved = read_json(&status);
    saved["state"] = json!("paused");
    std::fs::write(&status, saved.to_string()).unwrap();
    sandbox
}

fn tasks_left(sandbox: &Sandbox) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(sandbox.task_dir("x").parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("flow_status.json").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    ids.sort();
    ids
}

#[test]
fn list_says_how_much_disk_each_task_holds() {
    let sandbox = Sandbox::new(&[("README.md", "hello\n")]);
    assert_exit(&sandbox.run(&write("w", "a.txt"), "t1"), 0);
    let output = sandbox.ocflow().args(["--json", "list"]).output().unwrap();
    assert_exit(&output, 0);
    let line: Value = serde_json::from_str(stdout(&output).lines().next().unwrap()).unwrap();
    let bytes = line["bytes"].as_u64().unwrap();
    // At least the snapshot, the status and the journal; not a whole disk.
    assert!((1_000..50_000_000).contains(&bytes), "{line}");
    let output = sandbox.ocflow().arg("list").output().unwrap();
    let table = stdout(&output);
    assert!(table.contains("SIZE"), "{table}");
    assert!(
        stderr(&output).contains("1 task(s) hold"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn clean_removes_the_tasks_a_user_is_done_with_and_keeps_the_rest() {
    let sandbox = four_tasks();
    let all = ["applied", "failed", "paused", "unapplied"].map(String::from);
    // A dry run says what would go and removes nothing.
    let output = sandbox
        .ocflow()
        .args(["clean", "--dry-run"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let said = stdout(&output);
    assert!(
        said.contains("would remove applied") && said.contains("would remove failed"),
        "{said}"
    );
    assert!(
        !said.contains("remove unapplied") && !said.contains("remove paused"),
        "{said}"
    );
    assert_eq!(tasks_left(&sandbox), all);
    // Then for real: the applied and the failed go; the change waiting for review and the
    // resumable flow stay.
    let output = sandbox.ocflow().args(["--json", "clean"]).output().unwrap();
    assert_exit(&output, 0);
    let lines: Vec<Value> = stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let removed: Vec<&str> = lines
        .iter()
        .filter(|l| l["type"] == "task_removed")
        .map(|l| l["task_id"].as_str().unwrap())
        .collect();
    assert_eq!(removed, ["applied", "failed"], "{lines:?}");
    let total = lines.iter().find(|l| l["type"] == "cleaned").unwrap();
    assert!(total["bytes"].as_u64().unwrap() > 0, "{total}");
    assert_eq!(tasks_left(&sandbox), ["paused", "unapplied"]);
    // The repository keeps what was applied.
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("a.txt")).unwrap(),
        "x\n"
    );
    // `--unapplied` lets the unreviewed change go too; a resumable flow goes only by its name.
    let output = sandbox
        .ocflow()
        .args(["clean", "--unapplied"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(tasks_left(&sandbox), ["paused"]);
    let output = sandbox.ocflow().args(["clean", "paused"]).output().unwrap();
    assert_exit(&output, 0);
    assert!(tasks_left(&sandbox).is_empty());
    // Nothing left: said, not an error.
    let output = sandbox.ocflow().arg("clean").output().unwrap();
    assert_exit(&output, 0);
    assert!(
        stderr(&output).contains("nothing to remove"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn clean_keeps_recent_tasks_with_older_than_and_never_removes_a_running_one() {
    let sandbox = four_tasks();
    let output = sandbox
        .ocflow()
        .args(["clean", "--older-than", "1d"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(tasks_left(&sandbox).len(), 4);
    // A task whose lock is held (its ocflow still runs) is refused by name, and left.
    let lock = sandbox.task_dir("failed").join(".lock");
    let mut holder = std::process::Command::new("flock")
        .arg(&lock)
        .args(["sleep", "30"])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let output = sandbox.ocflow().args(["clean", "failed"]).output().unwrap();
    let _ = holder.kill();
    let _ = holder.wait();
    assert_exit(&output, 1);
    assert!(
        stderr(&output).contains("failed is in use"),
        "{}",
        stderr(&output)
    );
    assert!(sandbox.task_dir("failed").is_dir());
    // A name that is no task is the caller's to fix.
    let output = sandbox.ocflow().args(["clean", "nosuch"]).output().unwrap();
    assert_exit(&output, 2);
}
