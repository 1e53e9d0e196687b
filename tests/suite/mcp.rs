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
        "XDG_STATE_HOME": sandbox.state_home(),
    }});
    // In a file, as a long task does not fit on a command line; outside the sandbox, whose
    // every file is searched for the key.
    let args_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(args_file.path(), args.to_string()).unwrap();
    let output = Command::new("python3")
        .arg(script)
        .arg(scenario)
        .arg(args_file.path())
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
    let llm = FakeLlm::in_order(vec![chat(&plan.to_string()), chat("Wrote hello.txt.")]);
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
    let llm = FakeLlm::in_order(vec![chat(&plan.to_string())]);
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
    let llm = FakeLlm::in_order(vec![chat(&plan.to_string())]);
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

/// `ocflow mcp` spoken to line by line, as a careless or hostile client would: its answers come
/// back through a channel so a missing one is a timeout, not a hung test.
struct RawSession {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    answers: std::sync::mpsc::Receiver<Value>,
}

impl RawSession {
    fn start(sandbox: &Sandbox) -> RawSession {
        use std::io::BufRead;
        let mut child = sandbox
            .ocflow()
            .env("OCFLOW_API_KEY", KEY)
            .arg("mcp")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
                if sender.send(value).is_err() {
                    break;
                }
            }
        });
        let mut session = RawSession {
            stdin: child.stdin.take(),
            child,
            answers,
        };
        session.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"}}})
            .to_string()
            .as_bytes(),
        );
        assert_eq!(session.answer()["id"], json!(1));
        session.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        session
    }

    /// Writes `line` and a newline.
    fn send(&mut self, line: &[u8]) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn answer(&self) -> Value {
        self.answers
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the server did not answer")
    }

    /// The server still serves: `tools/list` is answered.
    fn assert_serving(&mut self, id: u64) {
        self.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})
                .to_string()
                .as_bytes(),
        );
        let answer = self.answer();
        assert_eq!(answer["id"], json!(id), "{answer}");
        assert!(answer["result"]["tools"].as_array().is_some(), "{answer}");
    }
}

impl Drop for RawSession {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// A line that is not JSON, or not UTF-8, is answered with a JSON-RPC parse error (-32700, id
/// null), and the server goes on serving (it used to answer nothing).
#[test]
fn a_line_that_is_not_json_gets_a_parse_error() {
    let sandbox = Sandbox::new(&[("README.md", "# demo\n")]);
    let mut session = RawSession::start(&sandbox);
    for line in [
        &b"this is not json"[..],
        b"\xff\xfe{\"a\": 1}",
        b"{\"jsonrpc\": \"2.0\", \"id\"",
    ] {
        session.send(line);
        let answer = session.answer();
        assert_eq!(answer["jsonrpc"], json!("2.0"), "{answer}");
        assert_eq!(answer["id"], Value::Null, "{answer}");
        assert_eq!(answer["error"]["code"], json!(-32700), "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("parse error"),
            "{answer}"
        );
    }
    session.assert_serving(2);
}

/// A 60 MB request line is refused with an error (-32600) that names the limit, carrying the
/// request's id when it can be read from the line's start; the server goes on serving.
#[test]
fn an_oversize_request_gets_an_error() {
    let sandbox = Sandbox::new(&[("README.md", "# demo\n")]);
    let mut session = RawSession::start(&sandbox);
    let task = "x".repeat(60 * 1024 * 1024);
    let request = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "ocflow_plan", "arguments": {"task": task}}});
    session.send(request.to_string().as_bytes());
    let answer = session.answer();
    assert_eq!(answer["id"], json!(7), "{answer}");
    assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("8 MiB"), "{message}");
    session.assert_serving(8);
}

/// A task longer than one argument may be (128 KiB on Linux) reaches the child whole: it goes
/// through the child's stdin, not its command line ("Argument list too long" before).
#[test]
fn a_long_task_reaches_the_planner_whole() {
    let sandbox = Sandbox::new(&[("README.md", "# demo\n")]);
    // (Issue 24: a plan for a change must change something.)
    let plan = json!({"steps": [{"id": "r", "operation": "write_file",
        "params": {"file_path": "README.md", "content": "# Demo\n"}}]});
    let llm = FakeLlm::in_order(vec![chat(&plan.to_string())]);
    let task = format!("add a title{}", " and keep it short".repeat(12_000));
    assert!(task.len() > 200 * 1024);
    let report = client(&sandbox, &llm, "plan", &task);
    assert_eq!(
        report["plan"]["is_error"],
        json!(false),
        "{}",
        report["plan"]
    );
    let asked = llm.bodies()[0].to_string();
    assert!(
        asked.contains(&task),
        "the task did not reach the planner whole"
    );
}
