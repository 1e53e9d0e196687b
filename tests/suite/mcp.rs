//! `ocflow mcp` driven by a real MCP client (the Python `mcp` package's stdio client,
//! `mcp_client.py`), as OpenHands would: the server started with the key in its environment,
//! a flow started by one call and polled by others, the diff read and applied.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use super::fake_llm::{FakeLlm, chat};
use super::support::*;

const KEY: &str = "sk-mcp-test-3d7c1f";

/// Runs `mcp_client.py SCENARIO` against `ocflow mcp` for `sandbox`; the server's environment
/// is only what an agent's MCP config gives it (the key, the test's user config).
fn client(sandbox: &Sandbox, llm: &FakeLlm, scenario: &str, task: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/suite/mcp_client.py");
    let args = json!({"task": task, "env": {
        "OCFLOW_API_KEY": KEY,
        "XDG_CONFIG_HOME": sandbox.root().join("user-config"),
    }});
    let output = Command::new("python3")
        .arg(script)
        .arg(scenario)
        .arg(args.to_string())
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_ocflow"))
        .arg("--repo")
        .arg(&sandbox.repo)
        .arg("--workspace")
        .arg(&sandbox.workspace)
        .args(["--base-url", &llm.base_url(), "--model", "m", "mcp"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the MCP client failed:\n{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    let report = stdout(&output);
    assert!(!report.contains(KEY), "the key reached a tool's result");
    serde_json::from_str(&report).unwrap()
}

/// The key reached the LLM on every request: handed to each child through a pipe.
fn assert_key_used(llm: &FakeLlm) {
    let requests = llm.requests();
    assert!(!requests.is_empty());
    for request in requests {
        let header = request.headers.get("authorization").unwrap();
        assert_eq!(header.to_str().unwrap(), format!("Bearer {KEY}"));
    }
}

#[test]
fn an_mcp_client_starts_a_flow_polls_it_reads_the_diff_and_applies_it() {
    let sandbox = Sandbox::new(&[("README.md", "# demo\n")]);
    let plan = json!({"steps": [{"id": "w", "operation": "write_file",
        "params": {"file_path": "hello.txt", "content": "hi\n"}}]});
    let llm = FakeLlm::start(vec![chat(&plan.to_string()), chat("Wrote hello.txt.")]);
    let report = client(&sandbox, &llm, "flow", "add hello.txt");

    assert_eq!(report["server"]["name"], json!("ocflow"));
    assert!(
        report["server"]["instructions"]
            .as_str()
            .unwrap()
            .contains("ocflow_status")
    );
    assert_eq!(
        report["tools"],
        json!([
            "ocflow_apply",
            "ocflow_diff",
            "ocflow_plan",
            "ocflow_run",
            "ocflow_status"
        ])
    );
    let run_schema = &report["schemas"]["ocflow_run"]["properties"];
    assert!(run_schema.get("task").is_some() && run_schema.get("repo").is_some());

    // Started in the background: the call answers with the task id while the flow runs.
    let run = &report["run"];
    assert_eq!(run["is_error"], json!(false), "{run}");
    let task_id = run["value"]["task_id"].as_str().unwrap();
    assert_eq!(run["value"]["running"], json!(true));

    // Polled to its end: the outcome and the summary are in the last status.
    let last = report["polls"].as_array().unwrap().last().unwrap();
    assert_eq!(last["is_error"], json!(false), "{last}");
    let value = &last["value"];
    assert_eq!(value["running"], json!(false));
    assert_eq!(value["exit_code"], json!(0));
    assert_eq!(value["status"]["state"], json!("succeeded"));
    assert_eq!(value["finished"]["type"], json!("flow_finished"));
    assert_eq!(value["finished"]["task_id"], json!(task_id));
    assert!(
        value["finished"]["summary_text"]
            .as_str()
            .unwrap()
            .contains("Wrote hello.txt.")
    );

    let diff = &report["diff"]["value"]["output"][0];
    assert_eq!(diff["type"], json!("diff"));
    assert_eq!(
        diff["files"],
        json!([{"path": "hello.txt", "kind": "added"}])
    );
    assert!(diff["diff"].as_str().unwrap().contains("+hi"));

    assert_eq!(
        report["apply"]["is_error"],
        json!(false),
        "{}",
        report["apply"]
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("hello.txt")).unwrap(),
        "hi\n"
    );
    let applied = &report["apply"]["value"]["output"];
    assert!(
        applied
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == json!("changes_applied")),
        "{applied}"
    );

    // Errors come back as tool errors carrying ocflow's error event, hint included.
    let unknown = &report["unknown"];
    assert_eq!(unknown["is_error"], json!(true));
    assert_eq!(unknown["value"]["exit_code"], json!(2));
    let error = &unknown["value"]["output"][0];
    assert_eq!(error["type"], json!("error"));
    assert!(error["message"].as_str().unwrap().contains("no-such-task"));
    assert_eq!(report["neither"]["is_error"], json!(true));

    assert_key_used(&llm);
    for (path, bytes) in tree(sandbox.root()) {
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(KEY), "the key reached {path}");
    }
}

#[test]
fn ending_the_session_interrupts_running_flows_and_leaves_them_resumable() {
    let sandbox = Sandbox::new(&[("README.md", "# demo\n")]);
    let plan = json!({"steps": [{"id": "wait", "operation": "execute_shell_command",
        "params": {"command": "sleep 60"}}]});
    let llm = FakeLlm::start(vec![chat(&plan.to_string())]);
    let started = std::time::Instant::now();
    let report = client(&sandbox, &llm, "start_and_leave", "wait a minute");
    let task_id = report["run"]["value"]["task_id"].as_str().unwrap();
    // The step's state is recorded by the time the server has exited.
    let status = sandbox.status(task_id);
    assert_eq!(status["state"], json!("interrupted"), "{status}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(40),
        "the flow was interrupted, not waited for"
    );
    assert_key_used(&llm);
}

#[test]
fn a_plan_comes_back_as_the_validated_flow() {
    let sandbox = Sandbox::new(&[("README.md", "# demo\n")]);
    // The seed's vocabulary, accepted as from the command line.
    let plan = json!({"steps": [{"id": "fix", "operation": "modify_code",
        "params": {"file_path": "README.md", "instructions_for_llm": "add a title"}}]});
    let llm = FakeLlm::start(vec![chat(&plan.to_string())]);
    let report = client(&sandbox, &llm, "plan", "add a title");
    let plan = &report["plan"];
    assert_eq!(plan["is_error"], json!(false), "{plan}");
    let flow = &plan["value"]["output"][0];
    assert_eq!(flow["steps"][0]["id"], json!("fix"));
    assert_eq!(
        flow["steps"][0]["params"]["instructions"],
        json!("add a title")
    );
    // Planning only: the repository is as it was.
    assert_eq!(
        text_tree(&sandbox.repo).keys().collect::<Vec<_>>(),
        vec!["README.md"]
    );
}
