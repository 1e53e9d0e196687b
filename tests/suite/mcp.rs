//! `ocflow mcp` driven by a real MCP client (the Python `mcp` package's stdio client,
//! `mcp_client.py`), as OpenHands would: the server started with the key in its environment,
//! a flow started by one call and polled by others, the diff read and applied.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use super::fake_llm::{FakeLlm, Rule, chat, status};
use super::support::*;

const KEY: &str = "sk-mcp-test-3d7c1f";

/// Runs `mcp_client.py SCENARIO` against `ocflow mcp` for `sandbox`; the server's environment
/// is only what an agent's MCP config gives it (the key, the test's user config).
fn client(sandbox: &Sandbox, llm: &FakeLlm, scenario: &str, task: &str) -> Value {
    let flags = ["--base-url", &llm.base_url(), "--model", "m"].map(String::from);
    client_with(sandbox, scenario, json!({"task": task}), json!({}), &flags)
}

/// Runs `mcp_client.py SCENARIO` with `args` (the scenario's own), the server started with
/// `flags` and, besides the key and the test's user config, the variables in `env`.
pub(super) fn client_with(
    sandbox: &Sandbox,
    scenario: &str,
    mut args: Value,
    env: Value,
    flags: &[String],
) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/suite/mcp_client.py");
    let mut server_env = json!({
        "OCFLOW_API_KEY": KEY,
        "XDG_CONFIG_HOME": sandbox.root().join("user-config"),
        "XDG_STATE_HOME": sandbox.state_home(),
    });
    for (name, value) in env.as_object().unwrap() {
        server_env[name] = value.clone();
    }
    if server_env["OCFLOW_API_KEY"].is_null() {
        server_env.as_object_mut().unwrap().remove("OCFLOW_API_KEY");
    }
    args["env"] = server_env;
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
        .args(flags)
        .arg("mcp")
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
            "ocflow_approve",
            "ocflow_diff",
            "ocflow_plan",
            "ocflow_run",
            "ocflow_status"
        ])
    );
    // The guide lists exactly the tools the binary serves.
    let guide = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/openhands-and-mcp.md"),
    )
    .unwrap();
    let listed = guide
        .split("`ocflow mcp` serves the")
        .nth(1)
        .and_then(|rest| rest.split(" over stdio").next())
        .unwrap_or_default();
    let mut named: Vec<&str> = listed
        .split('`')
        .filter(|word| word.starts_with("ocflow_"))
        .collect();
    named.sort_unstable();
    assert_eq!(
        json!(named),
        report["tools"],
        "docs/openhands-and-mcp.md: {listed}"
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

/// Issue 27: an agent polling with `wait_seconds` is answered at the flow's changes (a step
/// started or finished, the end), not every second, and no two answers are the same while the
/// flow runs, so OpenHands never stops the conversation as stuck (after 4 identical answers).
#[test]
fn a_client_waiting_on_status_gets_a_handful_of_answers_never_two_the_same() {
    let sandbox = Sandbox::new(&[("README.md", "# demo\n")]);
    let plan = json!({"steps": [
        {"id": "slow", "operation": "execute_shell_command", "params": {"command": "sleep 6"}},
        {"id": "w", "operation": "write_file", "depends_on": ["slow"],
         "params": {"file_path": "hello.txt", "content": "hi\n"}}]});
    let llm = FakeLlm::in_order(vec![chat(&plan.to_string()), chat("Slept, then wrote.")]);
    let flags = ["--base-url", &llm.base_url(), "--model", "m"].map(String::from);
    let args = json!({"task": "sleep then add hello.txt", "wait_seconds": 30});
    let report = client_with(&sandbox, "long_poll", args, json!({}), &flags);
    assert_eq!(report["run"]["is_error"], json!(false), "{}", report["run"]);

    let polls = report["polls"].as_array().unwrap();
    let last = &polls.last().unwrap()["value"];
    assert_eq!(last["running"], json!(false), "{last}");
    assert_eq!(last["status"]["state"], json!("succeeded"), "{last}");
    assert_eq!(last["finished"]["type"], json!("flow_finished"), "{last}");
    // The flow took 6 s and more; polled every 0.3 s it answered some twenty times, here only
    // at its changes.
    assert!(report["seconds"].as_f64().unwrap() >= 6.0, "{report}");
    assert!(
        (2..=8).contains(&polls.len()),
        "{} answers: {report:#}",
        polls.len()
    );
    assert!(
        polls.iter().any(|p| p["seconds"].as_f64().unwrap() >= 3.0),
        "no call waited for a change: {report:#}"
    );
    // Polls without waiting, while the slow step runs, still differ: the elapsed time moves.
    let quick = report["quick"].as_array().unwrap();
    assert_eq!(quick.len(), 2, "{report:#}");
    let mut answers: Vec<&Value> = polls.iter().chain(quick).map(|p| &p["value"]).collect();
    let running = &quick[0]["value"]["status"]["running_steps"][0];
    assert_eq!(running["id"], json!("slow"), "{running}");
    assert!(running["elapsed_seconds"].as_f64().is_some(), "{running}");
    answers.sort_by_key(|a| a.to_string());
    for pair in answers.windows(2) {
        assert_ne!(pair[0], pair[1], "two answers were the same");
    }
    for poll in polls.iter().chain(quick) {
        assert!(poll["bytes"].as_u64().unwrap() <= 2048, "{poll}");
    }
}

/// Issue 27: a 120-step flow's status answers in at most 2 KB (it was 66 KB, every poll);
/// `detail: true` gives every step; without a task id, the latest flow is meant; a flow that
/// ended is answered at once however long the call may wait.
#[test]
fn a_long_flow_s_status_is_compact_and_the_task_id_optional() {
    let sandbox = Sandbox::new(&[("README.md", "# demo\n")]);
    let steps: Vec<Value> = (0..120)
        .map(|n| {
            json!({"id": format!("write-file-number-{n:03}"), "operation": "write_file",
                "params": {"file_path": format!("generated/file-{n:03}.txt"),
                    "content": format!("file {n}\n")}})
        })
        .collect();
    assert_exit(&sandbox.run(&json!({"steps": steps}), "long"), 0);

    let report = client_with(
        &sandbox,
        "status",
        json!({"task_id": "long"}),
        json!({}),
        &[],
    );
    let compact = &report["compact"];
    assert_eq!(compact["is_error"], json!(false), "{compact}");
    assert!(compact["bytes"].as_u64().unwrap() <= 2048, "{compact}");
    let status = &compact["value"]["status"];
    assert_eq!(status["task_id"], json!("long"));
    assert_eq!(status["state"], json!("succeeded"));
    assert_eq!(status["steps"]["total"], json!(120), "{status}");
    assert_eq!(status["steps"]["succeeded"], json!(120), "{status}");
    assert!(
        compact["value"]["next"]
            .as_str()
            .unwrap()
            .contains("ocflow_diff")
    );

    let detail = &report["detail"];
    assert_eq!(detail["is_error"], json!(false), "{detail}");
    let steps = detail["value"]["status"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 120);
    assert!(detail["bytes"].as_u64().unwrap() > 20_000, "{detail}");

    let latest = &report["latest"];
    assert_eq!(latest["is_error"], json!(false), "{latest}");
    assert_eq!(latest["value"]["status"]["task_id"], json!("long"));

    let waited = &report["waited"];
    assert_eq!(waited["value"]["status"]["state"], json!("succeeded"));
    assert!(waited["seconds"].as_f64().unwrap() < 10.0, "{waited}");
}

/// Issue 27: the server takes the LLM settings from its own environment (`LLM_*`), as the
/// command line does, with no flags in its MCP config.
#[test]
fn the_server_takes_the_llm_settings_from_its_environment() {
    let sandbox = Sandbox::new(&[("README.md", "# demo\n")]);
    let plan = json!({"steps": [{"id": "w", "operation": "write_file",
        "params": {"file_path": "hello.txt", "content": "hi\n"}}]});
    let llm = FakeLlm::in_order(vec![chat(&plan.to_string()), chat("Wrote hello.txt.")]);
    let env = json!({"OCFLOW_API_KEY": null, "LLM_API_KEY": KEY, "LLM_BASE_URL": llm.base_url(),
        "LLM_MODEL": "m"});
    let args = json!({"task": "add hello.txt", "wait_seconds": 30});
    let report = client_with(&sandbox, "long_poll", args, env, &[]);
    let last = &report["polls"].as_array().unwrap().last().unwrap()["value"];
    assert_eq!(last["status"]["state"], json!("succeeded"), "{report:#}");
    assert_key_used(&llm);
    let model = llm.bodies()[0]["model"].clone();
    assert_eq!(model, json!("m"));
}

/// Issue 27: a refused key reaches the caller as an `error` event with a code and a hint, in
/// `--json` and over MCP, not only as a failed `flow_finished`.
#[test]
fn an_unauthorized_key_is_an_error_event_with_a_hint() {
    let sandbox = Sandbox::new(&[("README.md", "# demo\n")]);
    let refused = status(401, r#"{"error": {"message": "bad key", "type": "auth"}}"#);

    let llm = FakeLlm::in_order(vec![refused.clone()]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .env("OCFLOW_API_KEY", KEY)
        .args(["--json", "run", "add hello.txt"])
        .output()
        .unwrap();
    assert_exit(&output, 2);
    let text = stdout(&output);
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], json!("error"), "{text}");
    assert_eq!(last["code"], json!("llm"), "{text}");
    assert_eq!(last["exit_code"], json!(2), "{text}");
    assert!(last["message"].as_str().unwrap().contains("401"), "{text}");
    assert!(last["hint"].as_str().unwrap().contains("API key"), "{text}");

    let llm = FakeLlm::in_order(vec![refused]);
    let flags = ["--base-url", &llm.base_url(), "--model", "m"].map(String::from);
    let args = json!({"task": "add hello.txt", "wait_seconds": 30});
    let report = client_with(&sandbox, "long_poll", args, json!({}), &flags);
    let last = &report["polls"].as_array().unwrap().last().unwrap()["value"];
    assert_eq!(last["status"]["state"], json!("failed"), "{report:#}");
    assert_eq!(last["exit_code"], json!(2), "{last}");
    assert_eq!(last["error"]["code"], json!("llm"), "{last}");
    assert!(
        last["error"]["hint"].as_str().unwrap().contains("API key"),
        "{last}"
    );
    assert!(last["next"].as_str().unwrap().contains("API key"), "{last}");
}

/// Issue 27: a key refused after planning, in a step's own call, reaches `ocflow_status` as the
/// `error` with its code and hint, and the next call names the fix and the resume.
#[test]
fn a_key_refused_in_a_step_reaches_the_status_as_an_error() {
    let sandbox = Sandbox::new(&[("utils.py", "x = 1\n")]);
    let plan = json!({"steps": [{"id": "edit", "operation": "modify_code",
        "params": {"file_path": "utils.py", "instructions": "rename x to y"}}]});
    let refused = status(401, r#"{"error": {"message": "bad key", "type": "auth"}}"#);
    let llm = FakeLlm::with_rules(vec![
        Rule::planner().reply(chat(&plan.to_string())).times(1),
        Rule::recovery().times(0),
        Rule::flow_summary().times(0),
        Rule::prompt_contains("rename x to y")
            .named("step")
            .reply(refused)
            .times(1),
    ]);
    let flags = ["--base-url", &llm.base_url(), "--model", "m"].map(String::from);
    let args = json!({"task": "rename x to y in utils.py", "wait_seconds": 30});
    let report = client_with(&sandbox, "long_poll", args, json!({}), &flags);
    let last = &report["polls"].as_array().unwrap().last().unwrap()["value"];
    assert_eq!(last["status"]["state"], json!("failed"), "{report:#}");
    assert_eq!(last["exit_code"], json!(1), "{last}");
    assert_eq!(last["error"]["code"], json!("llm"), "{last}");
    assert_eq!(last["error"]["exit_code"], json!(1), "{last}");
    assert!(
        last["error"]["hint"].as_str().unwrap().contains("API key"),
        "{last}"
    );
    let next = last["next"].as_str().unwrap();
    assert!(
        next.contains("API key") && next.contains("ocflow resume"),
        "{last}"
    );
    llm.verify();
}

/// Issue 31: a budget given to `ocflow_run` holds; the flow it pauses is `paused` (exit 3), and
/// the next call says which limit to raise.
#[test]
fn a_budget_given_over_mcp_pauses_the_flow_and_says_how_to_continue() {
    let sandbox = Sandbox::new(&[("utils.py", "x = 1\n")]);
    let llm = FakeLlm::with_rules(vec![Rule::planner().times(0)]);
    let flags = ["--base-url", &llm.base_url(), "--model", "m"].map(String::from);
    let args = json!({"task": "rename x to y in utils.py", "wait_seconds": 30,
        "run": {"max_tokens": 10}});
    let report = client_with(&sandbox, "long_poll", args, json!({}), &flags);
    let last = &report["polls"].as_array().unwrap().last().unwrap()["value"];
    assert_eq!(last["status"]["state"], json!("paused"), "{report:#}");
    assert_eq!(last["exit_code"], json!(3), "{last}");
    let next = last["next"].as_str().unwrap();
    assert!(next.contains("--max-tokens"), "{last}");
    llm.verify();
}
