//! Roles with enforced permissions: built-in ones and `[roles.NAME]` in `ocflow.toml`; a step
//! its role may not take is refused for hand-written flows, plans and recovery alike; the role
//! of every step is in the status, the journal, `ocflow status` and the summary.

use serde_json::{Value, json};

use super::fake_llm::{FakeLlm, chat};
use super::support::*;

fn shell(id: &str, role: &str) -> Value {
    json!({"id": id, "operation": "execute_shell_command", "role": role,
           "params": {"command": "echo hi"}})
}

#[test]
fn a_role_that_may_not_run_commands_makes_the_flow_invalid() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let output = sandbox.run(&json!([shell("lint", "coder")]), "t");
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(
        err.contains("step lint: role `coder` may not run commands: `execute_shell_command`"),
        "{err}"
    );
    assert!(!sandbox.task_dir("t").join("flow.json").exists());
    let unknown = sandbox.run(&json!([shell("lint", "wizard")]), "u");
    assert_exit(&unknown, 2);
    assert!(
        stderr(&unknown).contains(
            "role `wizard` is not a known role; known roles: coder, \
                                   developer, planner, reviewer, tester"
        ),
        "{}",
        stderr(&unknown)
    );
}

/// A user role from `ocflow.toml`, and a built-in one replaced; every step's role is recorded
/// (defaults by operation for steps without one).
#[test]
fn configured_roles_are_used_and_every_steps_role_is_recorded() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    std::fs::create_dir_all(&sandbox.workspace).unwrap();
    std::fs::write(
        sandbox.workspace.join("ocflow.toml"),
        "[roles.linter]\ngoal = \"runs the linters\"\noperations = [\"execute_shell_command\"]\n\n\
         [roles.coder]\noperations = [\"write_file\"]\n",
    )
    .unwrap();
    let flow = json!([
        shell("lint", "linter"),
        {"id": "w", "operation": "write_file", "params": {"file_path": "b.txt", "content": "b"}},
        {"id": "r", "operation": "read_file", "params": {"file_path": "a.txt"}}
    ]);
    assert_exit(&sandbox.run(&flow, "t"), 0);
    let roles: Vec<Value> = ["lint", "w", "r"]
        .iter()
        .map(|s| sandbox.step_status("t", s)["role"].clone())
        .collect();
    assert_eq!(
        roles,
        vec![json!("linter"), json!("coder"), json!("developer")]
    );
    let journal = std::fs::read_to_string(sandbox.task_dir("t").join("journal.jsonl")).unwrap();
    let started = journal
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == json!("step_started") && e["step"] == json!("lint"))
        .unwrap();
    assert_eq!(started["role"], json!("linter"), "{journal}");
    let table = sandbox.ocflow().args(["status", "t"]).output().unwrap();
    let row = stdout(&table)
        .lines()
        .find(|l| l.starts_with("lint"))
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(row, "lint execute_shell_command linter");
    let summary = std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap();
    assert!(
        summary.contains("- `lint` execute_shell_command (linter)"),
        "{summary}"
    );
    // The replaced coder may no longer modify code.
    let modify = json!([{"id": "m", "operation": "modify_code", "role": "coder",
        "params": {"file_path": "a.txt", "instructions": "x"}}]);
    let output = sandbox.run(&modify, "u");
    assert_exit(&output, 2);
    assert!(stderr(&output).contains("role `coder` may not use this operation"));
}

/// The planner is shown the roles; a plan giving a command to a role that may not run one is
/// re-asked with the problem.
#[test]
fn the_planner_sees_the_roles_and_a_plan_breaking_them_is_re_asked() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    // (Issue 37: the plan says the command passing is what it delivers: a model's passing
    // command delivers nothing of its own.)
    let lint = |role: &str| {
        json!({"deliverables": {"commands": ["wc -l a.txt"]},
            "steps": [{"id": "lint", "operation": "execute_shell_command", "role": role,
            "params": {"command": "wc -l a.txt"}}]})
    };
    let (bad, good) = (lint("reviewer"), lint("tester"));
    let llm = FakeLlm::in_order(vec![
        chat(&bad.to_string()),
        chat(&good.to_string()),
        chat("Ran the linter."),
    ]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "lint a.txt"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let bodies = llm.bodies();
    let prompt = bodies[0].to_string();
    assert!(
        prompt.contains("Roles (give every step a `role`"),
        "{prompt}"
    );
    assert!(
        prompt.contains("- `tester`: writes and runs the tests"),
        "{prompt}"
    );
    let reask = super::fake_llm::last_user_message(&bodies[1]);
    assert!(
        reask.contains("role `reviewer` may not run commands"),
        "{reask}"
    );
    assert_eq!(sandbox.step_status("t", "lint")["role"], json!("tester"));
}

/// A recovery that gives a new step to a role without the permission is refused.
#[test]
fn a_recovery_giving_a_step_to_a_role_without_permission_is_refused() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    std::fs::create_dir_all(&sandbox.workspace).unwrap();
    std::fs::write(
        sandbox.workspace.join("ocflow.toml"),
        "[llm]\nmax_attempts = 1\n",
    )
    .unwrap();
    let flow = json!([{"id": "b", "operation": "execute_shell_command",
        "params": {"command": "exit 1"}}]);
    let alternative = |role: &str| {
        chat(
            &json!({"strategy": "alternative", "reason": "another way",
                "steps": [shell("c", role)]})
            .to_string(),
        )
    };
    let llm = FakeLlm::in_order(vec![
        alternative("reviewer"),
        alternative("tester"),
        chat("ok"),
    ]);
    let plan = sandbox.flow(&flow);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let reask = super::fake_llm::last_user_message(&llm.bodies()[1]);
    assert!(
        reask.contains("role `reviewer` may not run commands"),
        "{reask}"
    );
    assert_eq!(sandbox.step_status("t", "c")["role"], json!("tester"));
}

/// A repository's own config may not let a role open the network until the user trusts it.
#[test]
fn an_untrusted_repositorys_role_cannot_open_the_network() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let own = sandbox.repo.join(".ocflow");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::write(
        own.join("ocflow.toml"),
        "[roles.fetcher]\noperations = [\"execute_shell_command\"]\nnetwork = true\n",
    )
    .unwrap();
    let flow = json!([{"id": "get", "operation": "execute_shell_command", "role": "fetcher",
        "params": {"command": "echo hi", "network": true}}]);
    let plan = sandbox.flow(&flow);
    let output = sandbox
        .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
        .arg("--repo")
        .arg(&sandbox.repo)
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(err.contains("roles.*.network = true"), "{err}");
    assert!(
        err.contains("role `fetcher` may not open the network"),
        "{err}"
    );
}
