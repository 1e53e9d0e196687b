//! The `--json` stream as a headless caller reads it (OpenHands reads only stdout, or both
//! merged): every outcome is an event on stdout, errors included, each line one JSON object
//! with the event format's version.

use serde_json::{Value, json};

use super::support::*;

fn events(output: &std::process::Output) -> Vec<Value> {
    stdout(output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect()
}

/// The events on stdout, each checked against `docs/events.schema.json` (generated from the
/// Rust types) with Python's `jsonschema`, as a caller in another language would check them.
fn valid_events(output: &std::process::Output) -> Vec<Value> {
    let events = events(output);
    assert_valid(&events);
    events
}

#[track_caller]
fn assert_valid(events: &[Value]) {
    use std::io::Write;
    let schema = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/events.schema.json");
    let mut child = std::process::Command::new("python3")
        .args(["-c", VALIDATE])
        .arg(schema)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    for event in events {
        writeln!(input, "{event}").unwrap();
    }
    drop(input);
    let result = child.wait_with_output().unwrap();
    assert!(
        result.status.success(),
        "an event does not match docs/events.schema.json:\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&result.stdout).trim(),
        events.len().to_string(),
        "the validator did not see every event"
    );
}

/// Validates each stdin line against the schema given as the argument; prints the count.
const VALIDATE: &str = "
import json, sys, jsonschema
validator = jsonschema.Draft202012Validator(json.load(open(sys.argv[1])))
count = 0
for line in sys.stdin:
    event = json.loads(line)
    for error in validator.iter_errors(event):
        sys.exit(f'{error.message} in {line}')
    count += 1
print(count)
";

#[test]
fn errors_before_any_flow_reach_stdout_as_error_events() {
    let sandbox = Sandbox::new(&[]);
    let bad = sandbox.flow(&json!([{"id": "a", "operation": "nonsense"}]));
    let cases: Vec<(Vec<String>, &str, u8)> = vec![
        (
            vec!["run".into(), "--plan".into(), bad.display().to_string()],
            "invalid_flow",
            2,
        ),
        (
            vec!["run".into(), "a task, but no LLM configured".into()],
            "usage",
            2,
        ),
        (vec!["status".into(), "no-such-task".into()], "usage", 2),
    ];
    for (args, code, exit_code) in cases {
        let output = sandbox.ocflow().arg("--json").args(&args).output().unwrap();
        assert_exit(&output, i32::from(exit_code));
        let events = valid_events(&output);
        let last = events
            .last()
            .unwrap_or_else(|| panic!("{args:?}: stdout is empty"));
        assert_eq!(last["type"], json!("error"), "{args:?}: {last}");
        assert_eq!(last["code"], json!(code), "{args:?}: {last}");
        assert_eq!(last["exit_code"], json!(exit_code));
        assert_eq!(last["version"], json!(1));
        assert!(!last["message"].as_str().unwrap().is_empty());
    }
    // Without --json, stdout stays empty: the error is for people, on stderr.
    let output = sandbox
        .ocflow()
        .args(["status", "no-such-task"])
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).contains("no task \"no-such-task\""),
        "{}",
        stderr(&output)
    );
}

#[test]
fn flow_finished_says_why_with_the_summary_text_and_the_tokens() {
    let sandbox = Sandbox::new(&[]);
    let flow = json!([{"id": "boom", "operation": "execute_shell_command",
        "params": {"command": "echo broken >&2; exit 3"}}]);
    let plan = sandbox.flow(&flow);
    let output = sandbox
        .ocflow()
        .args(["--json", "run", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 1);
    let events = valid_events(&output);
    let finished = events
        .iter()
        .find(|e| e["type"] == json!("flow_finished"))
        .unwrap();
    assert_eq!(finished["state"], json!("failed"));
    assert_eq!(
        finished["reason"],
        json!("step boom failed: command exited with code 3")
    );
    let text = finished["summary_text"].as_str().unwrap();
    let on_disk = std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap();
    assert_eq!(text, on_disk);
    assert_eq!(finished["tokens"]["calls"], json!(0));
    assert_eq!(finished.get("diff"), None, "nothing changed, so no diff");
    assert!(
        events.iter().all(|e| e["version"] == json!(1)),
        "every event has the version"
    );
}

#[test]
fn every_json_output_of_every_command_is_json_lines() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let flow = json!([{"id": "w", "operation": "write_file",
        "params": {"file_path": "a.txt", "content": "b\n"}}]);
    let plan = sandbox.flow(&flow);
    let run = sandbox
        .ocflow()
        .args(["--json", "run", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&run, 0);
    for args in [
        vec!["status", "t"],
        vec!["diff", "t"],
        vec!["list"],
        vec!["report", "t"],
        vec!["apply", "t"],
        vec!["undo", "t"],
    ] {
        let output = sandbox.ocflow().arg("--json").args(&args).output().unwrap();
        assert_exit(&output, 0);
        let lines = events(&output);
        assert!(!lines.is_empty(), "{args:?} printed nothing");
        for line in &lines {
            assert_eq!(line["version"], json!(1), "{args:?}: {line}");
        }
        if args[0] == "diff" {
            assert_eq!(lines.len(), 1);
            assert_eq!(
                lines[0]["files"],
                json!([{"path": "a.txt", "kind": "modified"}])
            );
            assert!(lines[0]["diff"].as_str().unwrap().contains("+b"));
        }
        if args[0] == "status" {
            assert_eq!(lines[0]["state"], json!("succeeded"));
        }
    }
}

/// Reads a child's merged output the way OpenHands' terminal does: it gives up after 30 s
/// without a new byte. Returns the output, or `None` when it gave up.
fn read_like_openhands(mut child: std::process::Child) -> Option<String> {
    use std::io::Read;
    use std::sync::mpsc;
    use std::time::Duration;
    let mut out = child.stdout.take().unwrap();
    let (sender, chunks) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(n) = out.read(&mut buffer) {
            if n == 0 || sender.send(buffer[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    loop {
        match chunks.recv_timeout(Duration::from_secs(30)) {
            Ok(chunk) => seen.extend(chunk),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                return None;
            }
        }
    }
    child.wait().unwrap();
    Some(String::from_utf8_lossy(&seen).into_owned())
}

#[test]
fn a_slow_model_keeps_the_stream_alive_for_a_reader_that_gives_up_after_30_s_of_silence() {
    use super::fake_llm::{FakeLlm, Reply};
    use std::time::Duration;
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    // (Issue 37: a plan of reads alone delivers nothing and is asked again: this one writes.)
    let plan = json!({"steps": [{"id": "write", "operation": "write_file",
        "params": {"file_path": "b.txt", "content": "b\n"}}]});
    let llm = FakeLlm::in_order(vec![
        Reply::SlowChat {
            content: plan.to_string(),
            delay: Duration::from_secs(60),
        },
        Reply::SlowChat {
            content: "Wrote b.txt.".into(),
            delay: Duration::from_secs(1),
        },
    ]);
    // No TTY, stdout and stderr merged into one pipe, as OpenHands' terminal sees them.
    let merged = std::process::Command::new("sh")
        .arg("-c")
        .arg("exec \"$@\" 2>&1")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_ocflow"))
        .args(["--repo"])
        .arg(&sandbox.repo)
        .arg("--workspace")
        .arg(&sandbox.workspace)
        .args([
            "--json",
            "--base-url",
            &llm.base_url(),
            "--model",
            "m",
            "run",
            "--task-id",
            "t",
        ])
        .arg("Write b.txt")
        .env("XDG_CONFIG_HOME", sandbox.root().join("user-config"))
        .env("XDG_STATE_HOME", sandbox.state_home())
        .env_remove("OCFLOW_BASE_URL")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let output = read_like_openhands(merged).expect("the reader gave up: 30 s of silence");
    // Merged: stderr's lines for people are not JSON; every JSON line is an event.
    let events: Vec<Value> = output
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .collect();
    assert_valid(&events);
    let beats: Vec<&Value> = events
        .iter()
        .filter(|event| event["type"] == json!("heartbeat"))
        .collect();
    assert!(beats.len() >= 3, "{output}");
    assert_eq!(beats[0]["stage"], json!("planning"));
    assert!(output.contains("\"type\":\"flow_finished\""), "{output}");
    assert_eq!(sandbox.status("t")["state"], json!("succeeded"));
}

/// The events of a whole life — a warning, steps, a failure, a resume, an apply, an error —
/// each match the schema, and the kinds a caller meets most are all among them.
#[test]
fn every_kind_of_event_matches_the_published_schema() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let mut seen = Vec::new();
    let run = |args: &[&str], flow: Option<&Value>| {
        let mut command = sandbox.ocflow();
        command.arg("--json").args(args);
        if let Some(flow) = flow {
            command.arg("--plan").arg(sandbox.flow(flow));
        }
        let output = command.output().unwrap();
        valid_events(&output)
    };
    // `w` reads `r` without depending on it: a warning, then the flow.
    let good = json!([
        {"id": "r", "operation": "read_file", "params": {"file_path": "a.txt"}},
        {"id": "w", "operation": "write_file",
         "params": {"file_path": "b.txt", "content_from_step": "r"}}
    ]);
    seen.extend(run(&["run", "--task-id", "good"], Some(&good)));
    // Where the diff is: written when the flow ended.
    let finished = seen.iter().find(|e| e["type"] == "flow_finished").unwrap();
    let diff = std::fs::read_to_string(finished["diff"].as_str().unwrap()).unwrap();
    assert!(
        diff.contains("+++ b/b.txt") && diff.contains("+a"),
        "{diff}"
    );
    seen.extend(run(&["apply", "good"], None));
    let bad = json!([{"id": "boom", "operation": "execute_shell_command",
                      "params": {"command": "exit 3"}}]);
    seen.extend(run(&["run", "--task-id", "bad"], Some(&bad)));
    seen.extend(run(&["resume", "--retry-failed", "bad"], None));
    seen.extend(run(&["status", "no-such-task"], None));
    for kind in [
        "warning",
        "flow_started",
        "flow_planned",
        "snapshot_taken",
        "step_started",
        "step_finished",
        "flow_finished",
        "changes_applied",
        "flow_resumed",
        "error",
    ] {
        assert!(
            seen.iter().any(|e| e["type"].as_str() == Some(kind)),
            "no {kind} event in {seen:?}"
        );
    }
}
