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

/// tmux on a socket of its own (as in terminal.rs), so a test never touches anyone's sessions.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts `sh script` in a new session; `None` when tmux cannot start.
    fn start(script: &std::path::Path) -> Option<Tmux> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() % 1_000_000_000);
        let socket = format!("ocflow-approve-{}-{nanos}", std::process::id());
        let started = std::process::Command::new("tmux")
            .args([
                "-L",
                &socket,
                "new-session",
                "-d",
                "-s",
                "t",
                "-x",
                "120",
                "-y",
                "50",
            ])
            .arg(format!("sh {}", script.display()))
            .status();
        match started {
            Ok(status) if status.success() => Some(Tmux { socket }),
            _ => None,
        }
    }

    fn screen(&self) -> String {
        let output = std::process::Command::new("tmux")
            .args([
                "-L",
                &self.socket,
                "capture-pane",
                "-p",
                "-t",
                "t",
                "-S",
                "-200",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The screen once it shows `what` `times` times (or after 60 s: the caller's assertion
    /// then says what was on it).
    fn wait_for(&self, what: &str, times: usize) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if screen.matches(what).count() >= times || std::time::Instant::now() > deadline {
                return screen;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Types `line` and Enter, as a person answers.
    fn answer(&self, line: &str) {
        std::process::Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", "-t", "t", line, "Enter"])
            .status()
            .unwrap();
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

/// A script that runs `ocflow run --approve plan` on the two-step flow from a shell, as a
/// person would, then says its exit code.
fn terminal_script(sandbox: &Sandbox, extra_env: &str) -> std::path::PathBuf {
    terminal_script_with(sandbox, extra_env, "--approve plan")
}

/// The same with `options` in place of `--approve plan`.
fn terminal_script_with(sandbox: &Sandbox, extra_env: &str, options: &str) -> std::path::PathBuf {
    let plan = sandbox.flow(&two_steps());
    let template = sandbox.ocflow();
    let mut lines = vec!["#!/bin/sh".to_string()];
    for (name, value) in template.get_envs() {
        let name = name.to_string_lossy();
        match value {
            Some(value) => lines.push(format!("export {name}='{}'", value.to_string_lossy())),
            None => lines.push(format!("unset {name}")),
        }
    }
    lines.push(extra_env.to_string());
    let args: Vec<String> = template
        .get_args()
        .map(|a| format!("'{}'", a.to_string_lossy()))
        .collect();
    lines.push(format!(
        "'{}' {} run {options} --task-id t --plan '{}'",
        env!("CARGO_BIN_EXE_ocflow"),
        args.join(" "),
        plan.display()
    ));
    lines.push("echo __EXIT_$?__".into());
    lines.push("sleep 60".into());
    let path = sandbox.root().join("run.sh");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

const PROMPT: &str = "run this plan? [y]es, [n]o, [e]dit";

#[test]
fn at_a_terminal_yes_runs_the_plan_shown() {
    if !require(Component::Tmux) {
        return;
    }
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    let tmux = Tmux::start(&terminal_script(&sandbox, "")).unwrap();
    let screen = tmux.wait_for(PROMPT, 1);
    assert!(screen.contains("the plan, 2 step(s):"), "{screen}");
    assert!(screen.contains("2. two write_file two.txt"), "{screen}");
    // Nothing runs before the answer.
    assert!(journaled(&sandbox, "t", "step_started").is_empty());
    assert_eq!(sandbox.status("t")["state"], "waiting");
    tmux.answer("y");
    let screen = tmux.wait_for("__EXIT_", 1);
    assert!(screen.contains("__EXIT_0__"), "{screen}");
    assert_eq!(sandbox.status("t")["state"], "succeeded");
    let answers = journaled(&sandbox, "t", "approval_answered");
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["answer"], "approved");
    assert_eq!(answers[0]["by"], "terminal");
}

#[test]
fn at_a_terminal_no_ends_the_flow_without_running_a_step() {
    if !require(Component::Tmux) {
        return;
    }
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    let tmux = Tmux::start(&terminal_script(&sandbox, "")).unwrap();
    tmux.wait_for(PROMPT, 1);
    // A word that is no answer is asked again.
    tmux.answer("maybe");
    let screen = tmux.wait_for(PROMPT, 2);
    assert!(screen.contains("is not an answer"), "{screen}");
    tmux.answer("n");
    let screen = tmux.wait_for("__EXIT_", 1);
    assert!(screen.contains("__EXIT_1__"), "{screen}");
    let status = sandbox.status("t");
    assert_eq!(status["state"], "failed");
    assert!(journaled(&sandbox, "t", "step_started").is_empty());
    assert_eq!(
        journaled(&sandbox, "t", "approval_answered")[0]["answer"],
        "rejected"
    );
}

#[test]
fn at_a_terminal_an_edit_is_validated_again_and_the_edited_plan_runs() {
    if !require(Component::Tmux) {
        return;
    }
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    // The editor's first save is not a flow at all; its second renames a file the flow writes.
    let editor = sandbox.root().join("edit.sh");
    let marker = sandbox.root().join("edited-once");
    std::fs::write(
        &editor,
        format!(
            "#!/bin/sh\nif [ ! -f {m} ]; then touch {m}; echo 'not a flow' > \"$1\"; \
             else sed -i 's/two.txt/three.txt/' \"$1\"; fi\n",
            m = marker.display()
        ),
    )
    .unwrap();
    let env = format!("export EDITOR='sh {}'", editor.display());
    let tmux = Tmux::start(&terminal_script(&sandbox, &env)).unwrap();
    tmux.wait_for(PROMPT, 1);
    tmux.answer("e");
    let screen = tmux.wait_for(PROMPT, 2);
    assert!(screen.contains("the edited flow is not valid"), "{screen}");
    tmux.answer("e");
    let screen = tmux.wait_for(PROMPT, 3);
    assert!(screen.contains("2. two write_file three.txt"), "{screen}");
    tmux.answer("y");
    let screen = tmux.wait_for("__EXIT_", 1);
    assert!(screen.contains("__EXIT_0__"), "{screen}");
    let result = sandbox.result("t", "two");
    assert!(result.to_string().contains("three.txt"), "{result}");
    let flow = read_json(&sandbox.task_dir("t").join("flow.json"));
    assert_eq!(flow["steps"][1]["params"]["file_path"], "three.txt");
    let answers: Vec<Value> = journaled(&sandbox, "t", "approval_answered")
        .into_iter()
        .map(|a| a["answer"].clone())
        .collect();
    assert_eq!(answers, [json!("edited"), json!("approved")]);
}

/// `ocflow --json run --apply --approve apply` with no terminal.
fn run_until_apply(sandbox: &Sandbox, approve: &str) -> Output {
    let plan = sandbox.flow(&two_steps());
    sandbox
        .ocflow()
        .args([
            "--json",
            "run",
            "--apply",
            "--approve",
            approve,
            "--task-id",
            "t",
            "--plan",
        ])
        .arg(plan)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn approve_apply_writes_the_changes_only_after_a_yes() {
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    let output = run_until_apply(&sandbox, "apply");
    assert_exit(&output, 3);
    let needed = events(&output, "approval_needed");
    assert_eq!(needed.len(), 1, "{}", stdout(&output));
    assert_eq!(needed[0]["kind"], "apply");
    // The flow ran; its changes wait.
    assert_eq!(sandbox.step_status("t", "two")["status"], "succeeded");
    assert!(!sandbox.repo.join("one.txt").exists());
    assert_eq!(sandbox.status("t")["state"], "waiting");
    // `ocflow apply` does not go round the question.
    let applied = sandbox.ocflow().args(["apply", "t"]).output().unwrap();
    assert_exit(&applied, 2);
    assert!(
        stderr(&applied).contains("ocflow approve t"),
        "{}",
        stderr(&applied)
    );
    assert!(!sandbox.repo.join("one.txt").exists());
    let approved = sandbox.ocflow().args(["approve", "t"]).output().unwrap();
    assert_exit(&approved, 0);
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("one.txt")).unwrap(),
        "1\n"
    );
    let status = sandbox.status("t");
    assert_eq!(status["state"], "succeeded");
    assert!(status["applied_at"].is_string(), "{status}");
}

#[test]
fn a_rejected_apply_leaves_the_flow_succeeded_and_the_repository_untouched() {
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    assert_exit(&run_until_apply(&sandbox, "apply"), 3);
    let rejected = sandbox.ocflow().args(["reject", "t"]).output().unwrap();
    assert_exit(&rejected, 0);
    assert!(!sandbox.repo.join("one.txt").exists());
    let status = sandbox.status("t");
    assert_eq!(status["state"], "succeeded");
    assert!(status.get("applied_at").is_none(), "{status}");
    // The person may still apply it by hand later.
    assert_exit(&sandbox.ocflow().args(["apply", "t"]).output().unwrap(), 0);
    assert!(sandbox.repo.join("two.txt").exists());
}

#[test]
fn plan_and_apply_approvals_are_both_asked_headless() {
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    assert_exit(&run_until_apply(&sandbox, "plan,apply"), 3);
    assert_eq!(sandbox.status("t")["approval"]["kind"], "plan");
    // The plan's yes runs the flow, which then waits again for its apply.
    let approved = sandbox
        .ocflow()
        .args(["--json", "approve", "t"])
        .output()
        .unwrap();
    assert_exit(&approved, 3);
    assert_eq!(events(&approved, "approval_needed")[0]["kind"], "apply");
    assert!(!sandbox.repo.join("one.txt").exists());
    assert_exit(
        &sandbox.ocflow().args(["approve", "t"]).output().unwrap(),
        0,
    );
    assert!(sandbox.repo.join("one.txt").exists());
}

#[test]
fn at_a_terminal_the_apply_is_asked_and_a_yes_writes_it() {
    if !require(Component::Tmux) {
        return;
    }
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    let script = terminal_script_with(&sandbox, "", "--apply --approve apply");
    let tmux = Tmux::start(&script).unwrap();
    let screen = tmux.wait_for("into the repository? [y]es, [n]o", 1);
    assert!(screen.contains("write the 2 changed file(s)"), "{screen}");
    assert!(!sandbox.repo.join("one.txt").exists());
    tmux.answer("y");
    let screen = tmux.wait_for("__EXIT_", 1);
    assert!(screen.contains("__EXIT_0__"), "{screen}");
    assert!(sandbox.repo.join("two.txt").exists());
}

#[test]
fn an_mcp_client_approves_one_waiting_plan_and_rejects_another() {
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    let plan = sandbox.flow(&two_steps());
    let args = json!({"plan": plan});
    let report = super::mcp::client_with(&sandbox, "approve", args, json!({}), &[]);
    assert!(!report["run"]["is_error"].as_bool().unwrap(), "{report}");
    let task_id = report["run"]["value"]["task_id"].as_str().unwrap();
    // The flow waits, and the status says what for and what to call.
    let waiting = &report["waiting"].as_array().unwrap().last().unwrap()["value"];
    assert_eq!(waiting["status"]["state"], "waiting", "{report}");
    assert_eq!(waiting["status"]["approval"]["kind"], "plan");
    assert_eq!(waiting["exit_code"], 3);
    assert!(waiting["next"].as_str().unwrap().contains("ocflow_approve"));
    // Nothing ran while it waited.
    assert_eq!(waiting["status"]["steps"]["pending"], 2);
    // Approved, it runs in the background to its end.
    assert!(
        !report["approve"]["is_error"].as_bool().unwrap(),
        "{report}"
    );
    assert_eq!(report["approve"]["value"]["task_id"], task_id);
    let approved = &report["approved"].as_array().unwrap().last().unwrap()["value"];
    assert_eq!(approved["status"]["state"], "succeeded", "{report}");
    assert_eq!(approved["exit_code"], 0);
    let answers = journaled(&sandbox, task_id, "approval_answered");
    assert_eq!(answers[0]["answer"], "approved");
    assert_eq!(answers[0]["by"], "mcp");
    // The other one is rejected with its reason.
    assert!(!report["reject"]["is_error"].as_bool().unwrap(), "{report}");
    assert_eq!(
        report["rejected"]["value"]["status"]["state"], "failed",
        "{report}"
    );
    let other = report["other"].as_str().unwrap();
    let answers = journaled(&sandbox, other, "approval_answered");
    assert_eq!(answers[0]["reason"], "not this one");
    assert_eq!(answers[0]["by"], "mcp");
}

/// A flow whose one command the policy flags as destructive (harmless here: the step's view
/// of a repository with no git).
fn destructive_flow() -> Value {
    json!({"task": "start over", "steps": [
        {"id": "reset", "operation": "execute_shell_command",
         "params": {"command": "git reset --hard HEAD || echo reset > reset.txt"}}
    ]})
}

#[test]
fn approve_risky_asks_before_a_destructive_command_and_runs_it_on_a_yes() {
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    let plan = sandbox.flow(&destructive_flow());
    let output = sandbox
        .ocflow()
        .args([
            "--json",
            "run",
            "--approve",
            "risky",
            "--task-id",
            "t",
            "--plan",
        ])
        .arg(&plan)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_exit(&output, 3);
    let needed = events(&output, "approval_needed");
    assert_eq!(needed.len(), 1, "{}", stdout(&output));
    assert_eq!(needed[0]["kind"], "risky");
    assert_eq!(needed[0]["step"], "reset");
    assert!(
        needed[0]["subject"]
            .as_str()
            .unwrap()
            .contains("destructive")
    );
    assert!(journaled(&sandbox, "t", "step_started").is_empty());
    assert_exit(
        &sandbox.ocflow().args(["approve", "t"]).output().unwrap(),
        0,
    );
    assert_eq!(sandbox.step_status("t", "reset")["status"], "succeeded");
    let answers = journaled(&sandbox, "t", "approval_answered");
    assert_eq!(answers[0]["kind"], "risky");
    assert_eq!(answers[0]["step"], "reset");
    assert_eq!(answers[0]["answer"], "approved");
}

#[test]
fn a_flow_without_flagged_commands_is_not_asked_about_under_approve_risky() {
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    let plan = sandbox.flow(&two_steps());
    let output = sandbox
        .ocflow()
        .args([
            "--json",
            "run",
            "--approve",
            "risky",
            "--task-id",
            "t",
            "--plan",
        ])
        .arg(&plan)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert!(events(&output, "approval_needed").is_empty());
}

#[test]
fn a_planned_destructive_command_is_asked_about_instead_of_refused() {
    use super::fake_llm::{FakeLlm, chat};
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    let plan = json!({"steps": destructive_flow()["steps"]});
    let llm = FakeLlm::in_order(vec![chat(&plan.to_string()), chat("Reset.")]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args([
            "--json",
            "run",
            "--approve",
            "risky",
            "--task-id",
            "t",
            "start over",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_exit(&output, 3);
    // One answer from the planner: the flagged command was not sent back to be replaced.
    assert_eq!(llm.requests().len(), 1);
    assert_eq!(events(&output, "approval_needed")[0]["kind"], "risky");
    let rejected = sandbox.ocflow().args(["reject", "t"]).output().unwrap();
    assert_exit(&rejected, 0);
    assert_eq!(sandbox.status("t")["state"], "failed");
    assert!(journaled(&sandbox, "t", "step_started").is_empty());
}

#[test]
fn approve_risky_holds_a_recovery_that_replaces_a_step_until_a_yes() {
    use super::fake_llm::{FakeLlm, chat};
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    // A model call is tried once: the summary nobody scripted falls back to the journal's.
    std::fs::create_dir_all(&sandbox.workspace).unwrap();
    std::fs::write(
        sandbox.workspace.join("ocflow.toml"),
        "[llm]\nmax_attempts = 1\n",
    )
    .unwrap();
    let flow = json!({"task": "write b", "steps": [
        {"id": "a", "operation": "execute_shell_command", "params": {"command": "exit 1"}},
        {"id": "b", "operation": "write_file", "depends_on": "a",
         "params": {"file_path": "b.txt", "content": "b"}}
    ]});
    let decision = json!({"strategy": "alternative", "reason": "write it directly",
        "steps": [{"id": "a2", "operation": "write_file",
                   "params": {"file_path": "alt.txt", "content": "alt"}}]});
    let llm = FakeLlm::in_order(vec![chat(&decision.to_string())]);
    let plan = sandbox.flow(&flow);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args([
            "--json",
            "run",
            "--apply",
            "--approve",
            "risky",
            "--task-id",
            "t",
            "--plan",
        ])
        .arg(&plan)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_exit(&output, 3);
    let needed = events(&output, "approval_needed");
    assert_eq!(needed.len(), 1, "{}", stdout(&output));
    assert_eq!(needed[0]["kind"], "risky");
    assert_eq!(needed[0]["step"], "a");
    let subject = needed[0]["subject"].as_str().unwrap();
    assert!(
        subject.contains("alternative: write it directly"),
        "{subject}"
    );
    // Decided, not carried out: the flow is as it was, the decision kept for the yes.
    let status = sandbox.status("t");
    assert_eq!(status["state"], "waiting");
    assert!(
        status["pending_recovery"]["decision"].is_object(),
        "{status}"
    );
    assert!(sandbox.step_status("t", "a2").is_null());
    let approved = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["approve", "t"])
        .output()
        .unwrap();
    assert_exit(&approved, 0);
    assert_eq!(sandbox.step_status("t", "a2")["status"], "succeeded");
    assert_eq!(sandbox.step_status("t", "b")["status"], "succeeded");
    // The run's --apply holds across the question: the yes applied the changes.
    let applied = std::fs::read_to_string(sandbox.repo.join("alt.txt")).unwrap();
    assert_eq!(applied, "alt");
    // The model was asked for the strategy once; the yes carried out the saved one.
    let strategy_calls = llm
        .bodies()
        .iter()
        .filter(|b| super::fake_llm::last_user_message(b).contains("Choose ONE strategy"))
        .count();
    assert_eq!(strategy_calls, 1);
}

#[test]
fn at_a_terminal_a_destructive_command_is_asked_about_and_a_no_runs_nothing() {
    if !require(Component::Tmux) {
        return;
    }
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    let script = terminal_script_with(&sandbox, "", "--approve risky");
    // The script runs the flow file it wrote: the destructive one replaces the two steps.
    sandbox.flow(&destructive_flow());
    let tmux = Tmux::start(&script).unwrap();
    let screen = tmux.wait_for("run these commands? [y]es, [n]o", 1);
    assert!(screen.contains("risky: step reset"), "{screen}");
    assert!(screen.contains("destructive"), "{screen}");
    tmux.answer("n");
    let screen = tmux.wait_for("__EXIT_", 1);
    assert!(screen.contains("__EXIT_1__"), "{screen}");
    assert_eq!(sandbox.status("t")["state"], "failed");
    assert!(journaled(&sandbox, "t", "step_started").is_empty());
}

/// A flow that waits for its plan's approval keeps its budget: the limit given to `run` is in
/// the waiting status, and the approved run goes on under it.
#[test]
fn a_flow_waiting_for_approval_keeps_its_budget() {
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    let output = run_waiting(&sandbox, "t", &["--max-tokens", "5000"]);
    assert_exit(&output, 3);
    let status = sandbox.status("t");
    assert_eq!(status["budget"]["limits"]["max_tokens"], 5000, "{status}");
    let approved = sandbox.ocflow().args(["approve", "t"]).output().unwrap();
    assert_exit(&approved, 0);
    let status = sandbox.status("t");
    assert_eq!(status["budget"]["limits"]["max_tokens"], 5000, "{status}");
}

/// Issue 38: `approve` of a waiting flow whose steps call the model, with no LLM configured
/// (an OpenHands terminal has none), turned it `failed`. Refused now, naming the setting, the
/// flow still waiting; with the settings the approval runs it.
#[test]
fn approving_without_llm_settings_a_flow_that_needs_the_model_changes_nothing() {
    use super::fake_llm::{FakeLlm, Rule, chat};
    let sandbox = Sandbox::new(&[("a.py", "A = 1\n")]);
    let llm = FakeLlm::with_rules(vec![
        Rule::prompt_contains("make A two").reply(chat("```python\nA = 2\n```\n")),
        Rule::flow_summary().reply(chat("A is two.")),
    ]);
    let plan = sandbox.flow(&json!({"steps": [{"id": "edit", "operation": "modify_code",
        "params": {"file_path": "a.py", "instructions": "make A two"}}]}));
    let waiting = sandbox
        .ocflow_llm(&llm.base_url())
        .args([
            "--json",
            "run",
            "--approve",
            "plan",
            "--task-id",
            "t",
            "--plan",
        ])
        .arg(&plan)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_exit(&waiting, 3);
    let status_file = sandbox.task_dir("t").join("flow_status.json");
    let before = std::fs::read(&status_file).unwrap();
    let refused = sandbox.ocflow().args(["approve", "t"]).output().unwrap();
    assert_exit(&refused, 2);
    assert!(
        stderr(&refused).contains("task t is waiting and its step edit calls the model"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(std::fs::read(&status_file).unwrap(), before);
    let approved = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["approve", "t"])
        .output()
        .unwrap();
    assert_exit(&approved, 0);
    assert_eq!(sandbox.status("t")["state"], json!("succeeded"));
}

/// Issue 38: a flow continued by `ocflow approve` and interrupted during an LLM call ended in a
/// Rust panic (2 of 2). It stops as any interrupted flow does: exit 130, resumable, no panic.
#[test]
fn an_approved_flow_interrupted_during_a_model_call_stops_resumably() {
    use super::fake_llm::{FakeLlm, Reply, Rule, chat};
    use std::time::{Duration, Instant};
    let sandbox = Sandbox::new(&[("a.py", "A = 1\n")]);
    let llm = FakeLlm::with_rules(vec![
        Rule::prompt_contains("make A two").reply(Reply::SlowChat {
            content: "```python\nA = 2\n```\n".into(),
            delay: Duration::from_secs(30),
        }),
        Rule::flow_summary().reply(chat("A is two.")),
    ]);
    let plan = sandbox.flow(&json!({"steps": [{"id": "edit", "operation": "modify_code",
        "params": {"file_path": "a.py", "instructions": "make A two"}}]}));
    let waiting = sandbox
        .ocflow_llm(&llm.base_url())
        .args([
            "--json",
            "run",
            "--approve",
            "plan",
            "--task-id",
            "t",
            "--plan",
        ])
        .arg(&plan)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_exit(&waiting, 3);
    let child = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["approve", "t"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while llm.requests().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!llm.requests().is_empty(), "the step never asked the model");
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::INT,
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    let said = stderr(&output);
    assert!(!said.contains("panicked"), "{said}");
    assert_exit(&output, 130);
    assert_eq!(sandbox.status("t")["state"], json!("interrupted"), "{said}");
    // Resumed, it finishes.
    let llm = FakeLlm::with_rules(vec![
        Rule::prompt_contains("make A two").reply(chat("```python\nA = 2\n```\n")),
        Rule::flow_summary().reply(chat("A is two.")),
    ]);
    let resumed = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["resume", "t"])
        .output()
        .unwrap();
    assert_exit(&resumed, 0);
}
