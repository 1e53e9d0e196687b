//! An installed ocflow runs away from its build tree: copied elsewhere, started from an empty
//! directory with the minimal PATH of a sandbox (`/usr/bin:/bin`), where the first `python3`
//! is not the one it was built against.

use std::process::Command;

use serde_json::json;

use super::support::*;

#[test]
fn a_copied_binary_runs_from_an_empty_directory_with_a_minimal_path() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let bin = sandbox.root().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let ocflow = bin.join("ocflow");
    std::fs::copy(env!("CARGO_BIN_EXE_ocflow"), &ocflow).unwrap();
    let empty = sandbox.root().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let plan = sandbox.flow(&json!([
        {"id": "w", "operation": "write_file", "params": {"file_path": "b.txt", "content": "b\n"}},
        {"id": "check", "operation": "execute_shell_command", "depends_on": ["w"],
         "params": {"command": "cat b.txt"}}
    ]));
    let output = Command::new(&ocflow)
        .current_dir(&empty)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", sandbox.root())
        .env("XDG_CONFIG_HOME", sandbox.root().join("user-config"))
        .arg("--repo")
        .arg(&sandbox.repo)
        .arg("--workspace")
        .arg(&sandbox.workspace)
        .args(["--json", "run", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert!(
        !stderr(&output).contains("Traceback"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        sandbox.step_status("t", "check")["status"],
        json!("succeeded")
    );
    let finished = stdout(&output)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|event| event["type"] == "flow_finished")
        .expect("a flow_finished event");
    assert_eq!(finished["state"], json!("succeeded"), "{finished}");
}
