//! Approvals (issue 31 §2): a flow that waits for a person — headless (`approval_needed`, state
//! `waiting`, exit 3, then `ocflow approve` / `ocflow reject`) and at a real terminal (tmux:
//! yes, no, and an edit in `$EDITOR`).

use std::process::{Output, Stdio};

use serde_json::{Value, json};

use super::support::*;

/// Two file steps: what they write shows whether the flow ran.
fn two_steps() -> Value {
    json!({"task": "write two files", "steps": [
        {"id": "one", "operation": "write_file",
         "params": {"file_path": "one.txt", "content": "1\n"}},
        {"id": "two", "operation": "write_file", "depends_on": "one",
         "params": {"file_path": "two.txt", "content": "2\n"}}
    ]})
}

/// `ocflow --json run --approve plan` with no terminal: it must wait, not run.
fn run_waiting(sandbox: &Sandbox, task_id: &str, extra: &[&str]) -> Output {
    let plan = sandbox.flow(&two_steps());
    sandbox
        .ocflow()
        .args(["--json", "run", "--approve", "plan", "--task-id", task_id])
        .args(extra)
        .arg("--plan")
        .arg(plan)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The JSON events of an output, by type.
fn events(output: &Output, kind: &str) -> Vec<Value> {
    stdout(output)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == kind)
        .collect()
}

/// The journal's records of one type.
fn journaled(sandbox: &Sandbox, task_id: &str, kind: &str) -> Vec<Value> {
    let journal = sandbox.task_dir(task_id).join("journal.jsonl");
    std::fs::read_to_string(journal)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == kind)
        .collect()
}

#[test]
fn headless_plan_approval_waits_with_exit_3_and_approve_runs_it() {
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    let output = run_waiting(&sandbox, "t", &[]);
    assert_exit(&output, 3);
    let needed = events(&output, "approval_needed");
    assert_eq!(needed.len(), 1, "{}", stdout(&output));
    assert_eq!(needed[0]["kind"], "plan");
    assert_eq!(needed[0]["approve"], "ocflow approve t");
    let subject = needed[0]["subject"].as_str().unwrap();
    assert!(subject.contains("one write_file") && subject.contains("two write_file"));
    let status = sandbox.status("t");
    assert_eq!(status["state"], "waiting");
    assert_eq!(status["approval"]["kind"], "plan");
    // Nothing ran while it waits: no step started, and a plain resume will not run it.
    assert!(journaled(&sandbox, "t", "step_started").is_empty());
    let resumed = sandbox.ocflow().args(["resume", "t"]).output().unwrap();
    assert_exit(&resumed, 2);
    assert!(
        stderr(&resumed).contains("ocflow approve t"),
        "{}",
        stderr(&resumed)
    );
    // `ocflow wait` says it waits, with the same exit code.
    let waited = sandbox.ocflow().args(["wait", "t"]).output().unwrap();
    assert_exit(&waited, 3);

    let approved = sandbox.ocflow().args(["approve", "t"]).output().unwrap();
    assert_exit(&approved, 0);
    let status = sandbox.status("t");
    assert_eq!(status["state"], "succeeded");
    assert!(status.get("approval").is_none(), "{status}");
    assert_eq!(sandbox.step_status("t", "two")["status"], "succeeded");
    let answers = journaled(&sandbox, "t", "approval_answered");
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["answer"], "approved");
    assert_eq!(answers[0]["by"], "command");
    // Approved once: a second approve has nothing to answer.
    let again = sandbox.ocflow().args(["approve", "t"]).output().unwrap();
    assert_exit(&again, 2);
    assert!(stderr(&again).contains("not waiting"), "{}", stderr(&again));
}

#[test]
fn headless_plan_approval_with_apply_applies_once_approved() {
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    let output = run_waiting(&sandbox, "t", &["--apply"]);
    assert_exit(&output, 3);
    assert!(!sandbox.repo.join("one.txt").exists());
    let approved = sandbox.ocflow().args(["approve", "t"]).output().unwrap();
    assert_exit(&approved, 0);
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("two.txt")).unwrap(),
        "2\n"
    );
}

#[test]
fn reject_ends_a_waiting_flow_failed_with_the_reason() {
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    assert_exit(&run_waiting(&sandbox, "t", &[]), 3);
    let rejected = sandbox
        .ocflow()
        .args(["reject", "t", "--reason", "too broad"])
        .output()
        .unwrap();
    assert_exit(&rejected, 0);
    let status = sandbox.status("t");
    assert_eq!(status["state"], "failed");
    let message = status["message"].as_str().unwrap();
    assert!(message.contains("too broad"), "{message}");
    let answers = journaled(&sandbox, "t", "approval_answered");
    assert_eq!(answers[0]["answer"], "rejected");
    assert_eq!(answers[0]["reason"], "too broad");
    let finished = journaled(&sandbox, "t", "flow_finished");
    assert_eq!(finished.len(), 1);
    assert_eq!(finished[0]["state"], "failed");
    assert!(journaled(&sandbox, "t", "step_started").is_empty());
    // Rejected: nothing to approve any more.
    assert_exit(
        &sandbox.ocflow().args(["approve", "t"]).output().unwrap(),
        2,
    );
}

#[test]
fn a_repository_config_adds_approvals_but_cannot_take_the_user_s_away() {
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    // The user always wants to see the plan; the repository's untrusted config says no.
    let user = sandbox.root().join("user-config/ocflow/config.toml");
    let text = std::fs::read_to_string(&user).unwrap();
    std::fs::write(&user, format!("{text}[approve]\nplan = true\n")).unwrap();
    let plan = sandbox.flow(&two_steps());
    let own = sandbox.repo.join(".ocflow");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::write(own.join("ocflow.toml"), "[approve]\nplan = false\n").unwrap();
    let output = sandbox
        .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
        .arg("--repo")
        .arg(&sandbox.repo)
        .args(["--json", "run", "--task-id", "t", "--plan"])
        .arg(&plan)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_exit(&output, 3);
    let warned = events(&output, "warning");
    assert!(
        warned
            .iter()
            .any(|w| w["message"].as_str().unwrap().contains("approve.* = false")),
        "{}",
        stdout(&output)
    );
    // A repository's own `plan = true` adds the approval the user did not ask for.
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    let own = sandbox.repo.join(".ocflow");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::write(own.join("ocflow.toml"), "[approve]\nplan = true\n").unwrap();
    let plan = sandbox.flow(&two_steps());
    let output = sandbox
        .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
        .arg("--repo")
        .arg(&sandbox.repo)
        .args(["--json", "run", "--task-id", "t", "--plan"])
        .arg(&plan)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_exit(&output, 3);
}
