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
        let events = events(&output);
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
    let events = events(&output);
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
    for args in [vec!["status", "t"], vec!["diff", "t"], vec!["apply", "t"]] {
        let output = sandbox.ocflow().arg("--json").args(&args).output().unwrap();
        assert_exit(&output, 0);
        let lines = events(&output);
        assert!(!lines.is_empty(), "{args:?} printed nothing");
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
