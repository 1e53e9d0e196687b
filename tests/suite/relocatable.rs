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
    let mut command = Command::new(&ocflow);
    command
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
        .arg(plan);
    let output = run_copied_binary(command);
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

/// Copies `from` into `to`, recursively (a clone's `python/` folder, without the test's caches).
fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let relative = entry.path().strip_prefix(from).unwrap();
        let name = relative.to_string_lossy();
        if name.contains("__pycache__") || name.contains(".pytest_cache") {
            continue;
        }
        let target = to.join(relative);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn a_pip_installed_library_is_found_through_the_interpreters_own_paths() {
    // As after `cargo install` and `pip install ./python` in a virtual environment, then the
    // clone deleted: no bundled python/ folder anywhere ocflow looks (an empty one is named).
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let clone = sandbox.root().join("clone-python");
    copy_tree(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python"),
        &clone,
    );
    let venv = sandbox.root().join("venv");
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());
    let pip = Command::new(venv.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
        ])
        .arg(&clone)
        .output()
        .unwrap();
    assert!(pip.status.success(), "{}", stderr(&pip));
    std::fs::remove_dir_all(&clone).unwrap();
    let no_bundled_library = sandbox.root().join("no-python-dir");
    std::fs::create_dir(&no_bundled_library).unwrap();

    let bin = sandbox.root().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let ocflow = bin.join("ocflow");
    std::fs::copy(env!("CARGO_BIN_EXE_ocflow"), &ocflow).unwrap();
    let plan = sandbox.flow(&json!([
        {"id": "w", "operation": "write_file", "params": {"file_path": "b.txt", "content": "b\n"}}
    ]));
    let mut command = Command::new(&ocflow);
    command
        .current_dir(&bin)
        .env_clear()
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", venv.join("bin").display()),
        )
        .env("VIRTUAL_ENV", &venv)
        .env("HOME", sandbox.root())
        .env("XDG_CONFIG_HOME", sandbox.root().join("user-config"))
        .env("OCFLOW_PYTHON_DIR", &no_bundled_library)
        .arg("--repo")
        .arg(&sandbox.repo)
        .arg("--workspace")
        .arg(&sandbox.workspace)
        .args(["--json", "run", "--task-id", "t", "--plan"])
        .arg(plan);
    let output = run_copied_binary(command);
    assert_exit(&output, 0);
    let started = stdout(&output)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|event| event["type"] == "flow_started")
        .expect("a flow_started event");
    let library = started["library"].as_str().unwrap();
    let site = venv.join("lib");
    assert!(
        library.contains(&format!("from {}", site.display())),
        "the library came from the virtual environment: {library}"
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.task_dir("t").join("final_output/b.txt")).unwrap(),
        "b\n"
    );
}

/// Runs a binary the test has just copied. Another test's thread may fork while the copy's file
/// is still open for writing, and its child holds that descriptor until it execs: starting the
/// copy then fails with "Text file busy" (ETXTBSY) for a moment, so it is tried again.
fn run_copied_binary(mut command: Command) -> std::process::Output {
    for _ in 0..50 {
        match command.output() {
            Err(err) if err.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            result => return result.unwrap(),
        }
    }
    panic!("the copied binary stayed busy (ETXTBSY) for 5 s");
}
