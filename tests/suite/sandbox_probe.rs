//! When the sandbox probe is waited for (issue 28 §4): a `run` that plans with the LLM asks
//! the planner while the probe still runs, and meets the probe once planned, before any step.
//! The probe is made slow by a real cause, a `bwrap` on `PATH` that holds until released, not
//! by a hook in ocflow.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use super::fake_llm::*;
use super::support::*;

const TASK: &str = "Create notes.txt saying hello";

/// A `bwrap` in `dir/held-bin` that waits for `dir/release` (at most 20 s, then leaves
/// `dir/timed-out`) and then runs the command after its options, without namespaces, as the
/// stand-ins of the sandbox tests do. Each call leaves a line in `dir/calls`.
fn held_bwrap(dir: &Path) -> PathBuf {
    let bin = dir.join("held-bin");
    fs::create_dir_all(&bin).unwrap();
    let d = dir.display();
    let script = format!(
        "#!/bin/sh\necho called >> '{d}/calls'\ni=0\n\
         while [ ! -e '{d}/release' ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done\n\
         [ -e '{d}/release' ] || touch '{d}/timed-out'\n\
         for a in \"$@\"; do shift; [ \"$a\" = \"--\" ] && break; done\nexec \"$@\"\n"
    );
    fs::write(bin.join("bwrap"), script).unwrap();
    fs::set_permissions(bin.join("bwrap"), fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// `PATH` with `bin` first.
fn path_with(bin: &Path) -> std::ffi::OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(std::env::split_paths(&path)))
        .unwrap()
}

#[test]
fn a_planned_run_asks_the_planner_while_the_sandbox_probe_still_runs() {
    let sandbox = Sandbox::new(&[("README.md", "# demo\n")]);
    let held = sandbox.root().join("held");
    fs::create_dir_all(&held).unwrap();
    let bin = held_bwrap(&held);
    let plan = json!({"version": 1, "task": TASK, "steps": [
        {"id": "write_notes", "operation": "write_file",
         "params": {"file_path": "notes.txt", "content": "hello\n"}}
    ]});
    let llm = FakeLlm::in_order(vec![
        chat(&format!("```json\n{plan}\n```")),
        chat("Created notes.txt."),
    ]);
    let child = sandbox
        .ocflow_llm(&llm.base_url())
        .env("PATH", path_with(&bin))
        .env("OPENAI_API_KEY", "sk-test")
        .args(["run", "--task-id", "t", TASK])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The planner is asked while bubblewrap's check is held: before, the command waited for
    // the probe first, and the planner was asked only once the stand-in gave up (20 s).
    let started = Instant::now();
    while llm.requests().is_empty() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let asked_while_held = !held.join("timed-out").exists();
    let probe_began = held.join("calls").exists();
    fs::write(held.join("release"), "").unwrap();
    let output = child.wait_with_output().unwrap();
    assert_exit(&output, 0);
    assert!(
        probe_began,
        "the probe had begun (its bubblewrap check was called)"
    );
    assert!(
        asked_while_held,
        "the planner was asked only after the sandbox probe ended"
    );
    assert!(!held.join("timed-out").exists());
    // The flow ran, confined as probed: the probe's answer was taken once planned.
    assert_eq!(
        fs::read_to_string(sandbox.task_dir("t").join("final_output/notes.txt")).unwrap(),
        "hello\n"
    );
    let status: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(sandbox.task_dir("t").join("flow_status.json")).unwrap(),
    )
    .unwrap();
    let line = status["sandbox"].as_str().unwrap_or_default().to_string();
    assert!(!line.is_empty() && !line.starts_with("none"), "{status}");
    assert_eq!(llm.requests().len(), 2, "one plan, one summary");
}

#[test]
fn a_given_flows_llm_step_starts_while_the_probe_runs_and_its_command_step_waits() {
    let sandbox = Sandbox::new(&[("m.py", "def f():\n    return 0\n")]);
    let held = sandbox.root().join("held");
    fs::create_dir_all(&held).unwrap();
    let bin = held_bwrap(&held);
    let plan = sandbox.flow(&json!([
        {"id": "fix", "operation": "modify_code",
         "params": {"file_path": "m.py", "instructions": "return 1 instead"}},
        {"id": "check", "operation": "execute_shell_command", "depends_on": ["fix"],
         "params": {"command": "cat m.py"}},
    ]));
    // The summary's rule first: its prompt carries the step's instructions too.
    let llm = FakeLlm::with_rules(vec![
        Rule::flow_summary().reply(chat("Changed m.py.")),
        Rule::prompt_contains("return 1 instead")
            .named("fix")
            .reply(chat("```python\ndef f():\n    return 1\n```\n")),
    ]);
    let child = sandbox
        .ocflow_llm(&llm.base_url())
        .env("PATH", path_with(&bin))
        .env("OPENAI_API_KEY", "sk-test")
        .args(["run", "--task-id", "t", "--plan"])
        .arg(&plan)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The LLM step asks the model while bubblewrap's check is held: before, the flow's start
    // waited for the probe, and the step asked only once the stand-in gave up (20 s).
    let started = Instant::now();
    while llm.calls("fix") == 0 && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let asked_while_held = !held.join("timed-out").exists();
    // The command step waits for the probe: it has not started while the probe is held.
    std::thread::sleep(Duration::from_millis(300));
    let check_started = sandbox.task_dir("t").join("check").exists();
    fs::write(held.join("release"), "").unwrap();
    let output = child.wait_with_output().unwrap();
    assert_exit(&output, 0);
    assert!(
        asked_while_held,
        "the LLM step started only after the sandbox probe ended"
    );
    assert!(
        !check_started,
        "the command step started before the probe ended"
    );
    assert!(!held.join("timed-out").exists());
    assert_eq!(llm.calls("fix"), 1);
    assert!(
        sandbox.result("t", "check")["stdout"]
            .as_str()
            .unwrap()
            .contains("return 1"),
        "{}",
        sandbox.result("t", "check")
    );
    // Said as before: what confines the command steps, in the status.
    let status: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(sandbox.task_dir("t").join("flow_status.json")).unwrap(),
    )
    .unwrap();
    let line = status["sandbox"].as_str().unwrap_or_default().to_string();
    assert!(!line.is_empty() && !line.starts_with("none"), "{status}");
}

#[test]
fn a_probe_that_fails_stops_a_given_flow_before_its_command_step_and_resume_runs_it() {
    // A real failure: the probe's trial launch cannot start the sandbox launcher, because the
    // ocflow executable it runs (a copy, this one) lost its execute bit while the probe was
    // held, after the LLM step had started.
    let sandbox = Sandbox::new(&[("m.py", "def f():\n    return 0\n")]);
    let held = sandbox.root().join("held");
    fs::create_dir_all(&held).unwrap();
    let bin = held_bwrap(&held);
    let exe = sandbox.root().join("ocflow-copy");
    fs::copy(env!("CARGO_BIN_EXE_ocflow"), &exe).unwrap();
    let plan = sandbox.flow(&json!([
        {"id": "fix", "operation": "modify_code",
         "params": {"file_path": "m.py", "instructions": "return 1 instead"}},
        {"id": "check", "operation": "execute_shell_command", "depends_on": ["fix"],
         "params": {"command": "cat m.py"}},
    ]));
    let llm = FakeLlm::with_rules(vec![
        Rule::flow_summary().reply(chat("Changed m.py.")),
        Rule::prompt_contains("return 1 instead")
            .named("fix")
            .reply(chat("```python\ndef f():\n    return 1\n```\n")),
    ]);
    let mut command = sandbox.command_like_ocflow(&exe);
    command
        .env("PATH", path_with(&bin))
        .env("OPENAI_API_KEY", "sk-test")
        .arg("--repo")
        .arg(&sandbox.repo)
        .arg("--workspace")
        .arg(&sandbox.workspace)
        .args(["--base-url", &llm.base_url(), "--model", "m"]);
    let child = command
        .args(["run", "--task-id", "t", "--plan"])
        .arg(&plan)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while llm.calls("fix") == 0 && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    fs::set_permissions(&exe, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(held.join("release"), "").unwrap();
    let output = child.wait_with_output().unwrap();
    assert_exit(&output, 2);
    let said = stderr(&output);
    assert!(
        said.contains("the sandbox launcher cannot run a command here")
            && said.contains("run with --no-sandbox"),
        "{said}"
    );
    assert!(
        !sandbox.task_dir("t").join("check").exists(),
        "no command step started"
    );
    // Resumable: once the launcher can run, the flow goes on from its finished LLM step.
    fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).unwrap();
    let mut resume = sandbox.command_like_ocflow(&exe);
    let output = resume
        .env("PATH", path_with(&bin))
        .env("OPENAI_API_KEY", "sk-test")
        .arg("--repo")
        .arg(&sandbox.repo)
        .arg("--workspace")
        .arg(&sandbox.workspace)
        .args(["--base-url", &llm.base_url(), "--model", "m", "resume", "t"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(llm.calls("fix"), 1, "the LLM step was not run again");
    assert!(
        sandbox.result("t", "check")["stdout"]
            .as_str()
            .unwrap()
            .contains("return 1")
    );
}

/// Issue 41 §6: a flow given with `--plan` whose steps run no command never probes the sandbox
/// (the probe was a fifth of a one-step flow's CPU, and its end waited for it): bubblewrap is
/// never called, and the status says the sandbox was not probed.
#[test]
fn a_given_flow_without_a_command_step_never_probes_the_sandbox() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let held = sandbox.root().join("held");
    fs::create_dir_all(&held).unwrap();
    let bin = held_bwrap(&held);
    let plan = sandbox.flow(&json!([
        {"id": "w", "operation": "write_file",
         "params": {"file_path": "b.txt", "content": "b\n"}},
    ]));
    let started = Instant::now();
    let output = sandbox
        .ocflow()
        .env("PATH", path_with(&bin))
        .args(["run", "--task-id", "t", "--plan"])
        .arg(&plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    // A held probe would have kept the flow's end waiting 20 s.
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(!held.join("calls").exists(), "bubblewrap was called");
    assert_eq!(
        sandbox.status("t")["sandbox"],
        json!("not probed: the flow had no command step")
    );
}
