//! The step contract (docs/step-contract.md) as the host keeps it, checked on real flows: the
//! step block it writes, the earlier results each operation is given, and `result.json`.

use std::fs;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::*;

/// The fenced block of docs/step-contract.md whose info string is `json <name>`.
fn contract_block(name: &str) -> Value {
    let text = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/step-contract.md"
    ))
    .unwrap();
    let opening = format!("```json {name}\n");
    let start = text.find(&opening).unwrap() + opening.len();
    let end = start + text[start..].find("\n```").unwrap();
    serde_json::from_str(&text[start..end]).unwrap()
}

/// The step block of a step's instructions file.
fn step_block(sandbox: &Sandbox, task: &str, step: &str) -> Value {
    let path = sandbox
        .task_dir(task)
        .join(step)
        .join("open_codex_instructions.md");
    let text = fs::read_to_string(path).unwrap();
    let start = text.find("```json ocflow-step\n").unwrap() + "```json ocflow-step\n".len();
    let end = start + text[start..].find("\n```").unwrap();
    serde_json::from_str(&text[start..end]).unwrap()
}

fn three_steps_then_a_summary() -> Value {
    json!({"version": 1, "task": "three steps, then a summary", "steps": [
        {"id": "a", "operation": "write_file", "params": {"file_path": "a.txt", "content": "A\n"}},
        {"id": "b", "operation": "read_file", "params": {"file_path": "a.txt"}, "depends_on": "a"},
        {"id": "c", "operation": "execute_shell_command", "depends_on": "a",
         "params": {"command": "cat a.txt > c.txt"}},
        {"id": "summary", "operation": "generate_summary", "depends_on": ["b", "c"]}
    ]})
}

#[test]
fn a_summary_after_three_steps_reports_all_three_results() {
    let sandbox = Sandbox::new(&[("README.md", "readme\n")]);
    let output = sandbox.run(&three_steps_then_a_summary(), "t");
    assert_exit(&output, 0);
    // Every ancestor, in flow order, is handed to the library...
    let block = step_block(&sandbox, "t", "summary");
    let earlier: Vec<&String> = block["steps"].as_object().unwrap().keys().collect();
    assert_eq!(earlier, ["a", "b", "c"]);
    let b = json!({"result": "../b/result.json", "output_dir": "../b/output"});
    assert_eq!(block["steps"]["b"], b);
    // ...and the summary reports each of them.
    let result = sandbox.result("t", "summary");
    assert_eq!(
        result["message"],
        json!("summary built from 3 earlier step result(s)")
    );
    let summary = result["summary"].as_str().unwrap();
    for line in [
        "- a write_file (success): wrote 2 bytes to a.txt from params.content",
        "- b read_file (success): read a.txt (2 bytes)",
        "- c execute_shell_command (success): command exited with code 0",
    ] {
        assert!(summary.contains(line), "{line:?} missing from:\n{summary}");
    }
}

#[test]
fn a_step_that_names_its_source_gets_only_that_result() {
    let sandbox = Sandbox::new(&[("README.md", "readme\n")]);
    let mut flow = three_steps_then_a_summary();
    flow["steps"][3]["params"] = json!({"changes_from_step": "c"});
    flow["steps"].as_array_mut().unwrap().push(json!(
        {"id": "copy", "operation": "write_file", "depends_on": ["b", "c"],
         "params": {"file_path": "copy.txt", "content_from_step": "b"}}));
    assert_exit(&sandbox.run(&flow, "t"), 0);
    let named = |step: &str| -> Vec<String> {
        step_block(&sandbox, "t", step)["steps"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    assert_eq!(named("summary"), ["c"]);
    assert_eq!(named("copy"), ["b"]);
    assert_eq!(named("c"), Vec::<String>::new());
}

#[test]
fn the_host_writes_the_documented_step_block_and_results() {
    let sandbox = Sandbox::new(&[("README.md", "readme\n")]);
    assert_exit(&sandbox.run(&three_steps_then_a_summary(), "t"), 0);
    let documented = contract_block("step-contract:instructions");
    let documented: Vec<&String> = documented.as_object().unwrap().keys().collect();
    // `env` and `sandbox` are left out when empty; everything else is always there, in order.
    for step in ["a", "b", "c", "summary"] {
        let block = step_block(&sandbox, "t", step);
        let written: Vec<&String> = block.as_object().unwrap().keys().collect();
        let expected: Vec<&String> = documented
            .iter()
            .copied()
            .filter(|key| !matches!(key.as_str(), "env" | "sandbox") || written.contains(key))
            .collect();
        assert_eq!(written, expected, "step {step}");
    }
    let results = contract_block("step-contract:results");
    let steps = [
        ("a", "write_file"),
        ("b", "read_file"),
        ("c", "execute_shell_command"),
    ];
    for (step, operation) in steps {
        let result = sandbox.result("t", step);
        assert_eq!(result["version"], json!(1), "step {step}");
        let fields = results["common"]
            .as_array()
            .unwrap()
            .iter()
            .chain(results["operations"][operation].as_array().unwrap());
        for field in fields {
            let field = field.as_str().unwrap();
            assert!(
                result.get(field).is_some(),
                "step {step} lacks `{field}`: {result}"
            );
        }
    }
}

#[test]
fn saved_files_of_an_unknown_version_are_refused() {
    let sandbox = Sandbox::new(&[("README.md", "readme\n")]);
    let go = sandbox.shared().join("go");
    let flow = json!([
        {"id": "a", "operation": "write_file", "params": {"file_path": "a.txt", "content": "A"}},
        {"id": "b", "operation": "execute_shell_command", "depends_on": "a",
         "params": {"command": format!("test -f {}", go.display())}},
        {"id": "c", "operation": "generate_summary", "depends_on": "b",
         "params": {"message": "a wrote @{outputs.a.bytes} bytes"}}
    ]);
    assert_exit(&sandbox.run(&flow, "t"), 1);
    // A result.json of another version is not read as if it were this one's.
    let result = sandbox.task_dir("t").join("a").join("result.json");
    let mut value = read_json(&result);
    value["version"] = json!(9);
    fs::write(&result, value.to_string()).unwrap();
    fs::write(&go, "").unwrap();
    let resumed = sandbox
        .ocflow()
        .args(["resume", "t", "--retry-failed"])
        .output()
        .unwrap();
    assert_exit(&resumed, 1);
    let message = sandbox.step_status("t", "c")["message"].clone();
    assert!(
        message
            .as_str()
            .unwrap()
            .contains("result format version 9 is not supported"),
        "{message}"
    );
    // Nor a flow.json of another version.
    let flow_file = sandbox.task_dir("t").join("flow.json");
    let mut saved = read_json(&flow_file);
    saved["version"] = json!(7);
    fs::write(&flow_file, saved.to_string()).unwrap();
    let diff = sandbox.ocflow().args(["diff", "t"]).output().unwrap();
    assert_exit(&diff, 2);
    assert!(
        stderr(&diff).contains("flow format version 7 is not supported"),
        "{}",
        stderr(&diff)
    );
}
