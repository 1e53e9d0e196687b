//! Whole flows through the real binary and the real library: what lands in every file.

use std::collections::BTreeMap;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::*;

/// The status without the fields that change from run to run (times, paths).
fn stable(mut status: Value) -> Value {
    // What confines command steps depends on the machine: present, and said in words.
    let sandbox = status
        .as_object_mut()
        .unwrap()
        .remove("sandbox")
        .unwrap_or_default();
    assert!(
        sandbox.as_str().is_some_and(|s| s.contains("network off")),
        "{sandbox}"
    );
    for key in [
        "created_at",
        "updated_at",
        "finished_at",
        "repo",
        "journal_offset",
    ] {
        status.as_object_mut().unwrap().remove(key);
    }
    for step in status["steps"].as_array_mut().unwrap() {
        for key in ["started_at", "finished_at", "duration_ms"] {
            step.as_object_mut().unwrap().remove(key);
        }
    }
    status
}

fn no_tokens() -> Value {
    json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "calls": 0})
}

fn multi_step_flow() -> Value {
    json!({
        "version": 1,
        "task": "write, read, count and copy",
        "steps": [
            {"id": "w1", "operation": "write_file",
             "params": {"file_path": "./notes/data.txt", "content": "alpha\nbeta\n"}},
            {"id": "r1", "operation": "read_file",
             "params": {"file_path": "notes/data.txt"}, "depends_on": "w1"},
            {"id": "sh", "operation": "execute_shell_command", "depends_on": ["w1"],
             "params": {"command":
                 "wc -l < notes/data.txt | tr -d ' ' > notes/count.txt && rm old.txt"}},
            {"id": "w2", "operation": "write_file",
             "params": {"file_path": "copy.txt", "content_from_step": "r1"}, "depends_on": ["r1"]},
            {"id": "sum", "operation": "generate_summary", "depends_on": ["sh", "w2"],
             "params": {"message": "exit @{outputs.sh.exit_code}, @{outputs.r1.size} bytes read"}}
        ]
    })
}

#[test]
fn multi_step_flow_leaves_every_file_as_specified() {
    let sandbox = Sandbox::new(&[("old.txt", "old\n"), ("keep.txt", "keep\n")]);
    let repo_before = tree(&sandbox.repo);
    // One at a time, so that the sequence numbers (the order of completion) are known.
    let plan = sandbox.flow(&multi_step_flow());
    let output = sandbox
        .ocflow()
        .args(["run", "--jobs", "1", "--task-id", "multi", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);

    let task = sandbox.task_dir("multi");
    assert_eq!(
        text_tree(&task.join("final_output")),
        BTreeMap::from([
            ("copy.txt".to_string(), "alpha\nbeta\n".to_string()),
            ("notes/count.txt".to_string(), "2\n".to_string()),
            ("notes/data.txt".to_string(), "alpha\nbeta\n".to_string()),
        ])
    );
    assert_eq!(
        tree(&sandbox.repo),
        repo_before,
        "the repository must not change before apply"
    );

    let step = |id: &str,
                operation: &str,
                sequence: u64,
                outputs: Value,
                deleted: Value,
                message: &str| {
        // Issue 14: every step's role is recorded (here the default for its operation).
        let role = match operation {
            "write_file" => "coder",
            "execute_shell_command" => "tester",
            "generate_summary" => "reviewer",
            _ => "developer",
        };
        let mut step = json!({"id": id, "operation": operation, "role": role,
                              "status": "succeeded", "attempts": 1, "sequence": sequence,
                              "output_files": outputs, "deleted_files": deleted,
                              "message": message});
        // Issue 28 §2: a step's empty lists and zero tokens are left out of the file.
        let fields = step.as_object_mut().unwrap();
        fields.retain(|_, value| value.as_array().is_none_or(|list| !list.is_empty()));
        step
    };
    assert_eq!(
        stable(sandbox.status("multi")),
        json!({
            "version": 1, "task_id": "multi", "task": "write, read, count and copy", "revision": 1,
            "state": "succeeded",
            // Issue 37: what done means, as the end found it (inferred: the flow names none).
            "deliverables": [
                {"kind": "file", "what": "copy.txt", "met": true,
                 "detail": "changed by step w2", "inferred": true},
                {"kind": "file", "what": "notes/count.txt", "met": true,
                 "detail": "changed by step sh", "inferred": true},
                {"kind": "file", "what": "notes/data.txt", "met": true,
                 "detail": "changed by step w1", "inferred": true},
                {"kind": "file", "what": "old.txt", "met": true,
                 "detail": "deleted by step sh", "inferred": true},
                {"kind": "command",
                 "what": "wc -l < notes/data.txt | tr -d ' ' > notes/count.txt && rm old.txt",
                 "met": true, "detail": "passed in step sh", "inferred": true},
                // Seed 004's closing step: a text made of the results of steps that read.
                {"kind": "answer", "what": "write, read, count and copy", "met": true,
                 "detail": "answered by step sum from notes/data.txt, copy.txt",
                 "inferred": true},
            ],
            "tokens": no_tokens(), "recovery_calls": 0, "replans": 0, "last_sequence": 5,
            "steps": [
                step("w1", "write_file", 1, json!(["notes/data.txt"]), json!([]),
                     "wrote 11 bytes to notes/data.txt from params.content"),
                step("r1", "read_file", 2, json!([]), json!([]), "read notes/data.txt (11 bytes)"),
                step("sh", "execute_shell_command", 3,
                     json!(["notes/count.txt"]), json!(["old.txt"]), "command exited with code 0"),
                step("w2", "write_file", 4, json!(["copy.txt"]), json!([]),
                     "wrote 11 bytes to copy.txt from the result of r1"),
                step("sum", "generate_summary", 5, json!([]), json!([]),
                     "summary taken from params.message"),
            ]
        })
    );

    for id in ["w1", "r1", "sh", "w2", "sum"] {
        let dir = task.join(id);
        for name in [
            "open_codex_instructions.md",
            "result.json",
            "step.log",
            "input",
            "output",
        ] {
            assert!(dir.join(name).exists(), "{id}/{name} is missing");
        }
    }
    assert_eq!(
        text_tree(&task.join("r1/input")),
        BTreeMap::from([("notes/data.txt".to_string(), "alpha\nbeta\n".to_string())])
    );
    assert_eq!(
        text_tree(&task.join("w2/output")),
        BTreeMap::from([("copy.txt".to_string(), "alpha\nbeta\n".to_string())])
    );
    assert_eq!(
        text_tree(&task.join("sh/output")),
        BTreeMap::from([("notes/count.txt".to_string(), "2\n".to_string())])
    );

    let read = sandbox.result("multi", "r1");
    assert_eq!(
        (
            read["status"].clone(),
            read["content"].clone(),
            read["size"].clone()
        ),
        (json!("success"), json!("alpha\nbeta\n"), json!(11))
    );
    let shell = sandbox.result("multi", "sh");
    assert_eq!(
        (shell["exit_code"].clone(), shell["timed_out"].clone()),
        (json!(0), json!(false))
    );
    assert_eq!(
        sandbox.result("multi", "sum")["summary"],
        json!("exit 0, 11 bytes read")
    );

    let instructions = std::fs::read_to_string(task.join("w2/open_codex_instructions.md")).unwrap();
    assert!(
        instructions.contains("Write `copy.txt` with the content produced by step `r1`."),
        "{instructions}"
    );
    assert!(instructions.contains("```json ocflow-step"));

    let journal = std::fs::read_to_string(task.join("journal.jsonl")).unwrap();
    let types: Vec<String> = journal
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(types.first().map(String::as_str), Some("flow_started"));
    assert_eq!(types.last().map(String::as_str), Some("flow_finished"));
    assert_eq!(types.iter().filter(|t| *t == "step_finished").count(), 5);

    let summary = std::fs::read_to_string(task.join("summary.md")).unwrap();
    assert!(
        summary.contains("- `old.txt` (deleted)") && summary.contains("- `copy.txt` (added)"),
        "{summary}"
    );

    let diff = sandbox.ocflow().args(["diff", "multi"]).output().unwrap();
    assert_exit(&diff, 0);
    let diff = stdout(&diff);
    assert!(
        diff.contains("--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-old\n"),
        "{diff}"
    );
    assert!(
        diff.contains("+++ b/notes/count.txt\n@@ -0,0 +1 @@\n+2\n"),
        "{diff}"
    );
}

#[test]
fn a_step_sees_only_the_changes_of_steps_it_depends_on() {
    let sandbox = Sandbox::new(&[("a.txt", "original\n")]);
    let flow = json!({"task": "isolation", "steps": [
        {"id": "change", "operation": "write_file",
         "params": {"file_path": "a.txt", "content": "changed\n"}},
        {"id": "independent", "operation": "read_file", "params": {"file_path": "a.txt"}},
        {"id": "dependent", "operation": "read_file",
         "params": {"file_path": "a.txt"}, "depends_on": "change"},
        {"id": "shell_independent", "operation": "execute_shell_command",
         "params": {"command": "cat a.txt"}},
        {"id": "shell_dependent", "operation": "execute_shell_command",
         "params": {"command": "cat a.txt"}, "depends_on": "change"}
    ]});
    let output = sandbox.run(&flow, "iso");
    assert_exit(&output, 0);
    assert_eq!(
        sandbox.result("iso", "independent")["content"],
        json!("original\n")
    );
    assert_eq!(
        sandbox.result("iso", "dependent")["content"],
        json!("changed\n")
    );
    assert_eq!(
        sandbox.result("iso", "shell_independent")["stdout"],
        json!("original\n")
    );
    assert_eq!(
        sandbox.result("iso", "shell_dependent")["stdout"],
        json!("changed\n")
    );
}

/// Issue 39 §5: a task that holds a placeholder's spelling stays the user's words in a step's
/// instructions. Chained replaces put the task in first and a later `{{params}}` rewrote it.
#[test]
fn a_task_that_says_a_placeholder_stays_as_written_in_the_instructions() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let task = "Replace {{params}} and {{step_json}} in a.txt";
    let flow = json!({"task": task, "steps": [
        {"id": "peek", "operation": "write_file",
         "params": {"file_path": "a.txt", "content": "b\n"}}
    ]});
    let output = sandbox.run(&flow, "braces");
    assert_exit(&output, 0);
    let text = std::fs::read_to_string(
        sandbox
            .task_dir("braces")
            .join("peek/open_codex_instructions.md"),
    )
    .unwrap();
    assert!(
        text.contains(&format!("**Task of the flow:** {task}\n")),
        "{text}"
    );
    assert_eq!(text.matches("```json ocflow-step").count(), 1, "{text}");
}

/// The Context section of a step's instructions file.
fn instructions_context(sandbox: &Sandbox, task: &str, step: &str) -> String {
    let path = sandbox
        .task_dir(task)
        .join(step)
        .join("open_codex_instructions.md");
    let text = std::fs::read_to_string(path).unwrap();
    let start = text.find("## Context\n").unwrap() + "## Context\n".len();
    let end = start + text[start..].find("\n## Parameters").unwrap();
    text[start..end].trim_end().to_string()
}

/// Issue 28 §2: a step's instructions name its direct dependencies (the steps its parameters
/// read among them), each with where its result and its own instructions are, never the whole
/// chain, so the file's size does not grow with the flow's depth.
#[test]
fn instructions_name_direct_dependencies_and_stay_bounded_along_a_chain() {
    let sandbox = Sandbox::new(&[("README.md", "readme\n")]);
    let mut steps: Vec<Value> = (0..30)
        .map(|i| {
            json!({"id": format!("s{i}"), "operation": "write_file",
                   "params": {"file_path": format!("out/{i}.txt"), "content": format!("{i}\n")}})
        })
        .collect();
    for (i, step) in steps.iter_mut().enumerate().skip(1) {
        step["depends_on"] = json!(format!("s{}", i - 1));
    }
    // The last step reads a field of the first one: a reference to a step far up the chain.
    steps[29]["params"]["content"] = json!("@{outputs.s0.status}\n");
    let output = sandbox.run(&json!({"task": "a chain", "steps": steps}), "chain");
    assert_exit(&output, 0);

    let entry = |id: &str, message: &str| {
        format!(
            "  - `{id}` (write_file): {message}; result `../{id}/result.json`, output \
             `../{id}/output`, instructions `../{id}/open_codex_instructions.md`"
        )
    };
    assert_eq!(
        instructions_context(&sandbox, "chain", "s29"),
        [
            "- Role: coder".to_string(),
            "- Steps this one depends on:".to_string(),
            entry("s28", "wrote 3 bytes to out/28.txt from params.content"),
            // Validation made the step it reads a dependency, so it is listed too.
            entry("s0", "wrote 2 bytes to out/0.txt from params.content"),
        ]
        .join("\n")
    );
    assert_eq!(
        instructions_context(&sandbox, "chain", "s0"),
        "- Role: coder\n- This step depends on no other step."
    );
    // Step 25 of the chain says as much as step 2: one dependency each (before, step 25 listed
    // all 25 steps above it).
    let size = |id: &str| {
        let path = sandbox
            .task_dir("chain")
            .join(id)
            .join("open_codex_instructions.md");
        std::fs::metadata(path).unwrap().len()
    };
    assert!(
        size("s25") <= size("s2") + 20,
        "{} > {} + 20",
        size("s25"),
        size("s2")
    );
    assert_eq!(
        sandbox.result("chain", "s29")["message"],
        json!("wrote 8 bytes to out/29.txt from params.content")
    );
}

#[test]
fn a_failing_command_fails_the_flow_and_its_changes_are_not_kept() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let flow = json!({"task": "fails", "steps": [
        {"id": "bad", "operation": "execute_shell_command",
         "params": {"command": "echo junk > junk.txt; exit 3"}},
        {"id": "after", "operation": "read_file",
         "params": {"file_path": "a.txt"}, "depends_on": "bad"}
    ]});
    let output = sandbox.run(&flow, "fails");
    assert_exit(&output, 1);
    let status = sandbox.status("fails");
    assert_eq!(status["state"], json!("failed"));
    assert_eq!(
        sandbox.step_status("fails", "bad")["status"],
        json!("failed")
    );
    assert_eq!(
        sandbox.step_status("fails", "bad")["error"]["kind"],
        json!("failure")
    );
    assert_eq!(
        sandbox.step_status("fails", "after")["status"],
        json!("pending")
    );
    assert_eq!(
        tree(&sandbox.task_dir("fails").join("final_output")),
        BTreeMap::new()
    );
    let summary = std::fs::read_to_string(sandbox.task_dir("fails").join("summary.md")).unwrap();
    assert!(
        summary.contains("## Why it failed") && summary.contains("Not run: after"),
        "{summary}"
    );
}

#[test]
fn json_mode_prints_one_event_per_line_on_stdout() {
    let sandbox = Sandbox::new(&[]);
    let plan = sandbox.flow(&json!([{"id": "w", "operation": "write_file",
        "params": {"file_path": "x.txt", "content": "x"}}]));
    let output = sandbox
        .ocflow()
        .args(["--json", "run", "--task-id", "j", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let events: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        vec![
            "flow_started",
            "flow_planned",
            "snapshot_taken",
            "step_started",
            "step_finished",
            "flow_finished"
        ]
    );
    assert_eq!(events[0]["task_id"], json!("j"));
    assert_eq!(events[5]["changed_files"], json!(["x.txt"]));
}

#[test]
fn the_bundled_example_flow_runs_on_the_sample_repository() {
    let sandbox = Sandbox::new(&[]);
    let sample = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample-repo");
    for (path, content) in tree(&sample) {
        let file = sandbox.repo.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, content).unwrap();
    }
    let plan = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/refactor-flow.json");
    let output = sandbox
        .ocflow()
        .args(["run", "--task-id", "example", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let tests = sandbox.result("example", "run_tests");
    assert_eq!(tests["exit_code"], json!(0), "{tests}");
    let changed: Vec<String> = text_tree(&sandbox.task_dir("example").join("final_output"))
        .into_keys()
        .collect();
    assert_eq!(changed, vec!["tests/test_empty.py", "utils.py"]);
}

#[test]
fn a_command_cannot_carry_symlinks_or_git_files_out_of_the_view() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let flow = json!([{"id": "sneaky", "operation": "execute_shell_command", "params": {"command":
        "mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit && ln -s /etc/passwd passwd \
         && ln -s a.txt alias && echo ok > fine.txt"}}]);
    assert_exit(&sandbox.run(&flow, "t"), 0);
    let result = sandbox.result("t", "sneaky");
    assert_eq!(result["output_files"], json!(["fine.txt"]));
    assert_eq!(result["ignored_files"], json!(["alias", "passwd"]));
    assert_eq!(
        text_tree(&sandbox.task_dir("t").join("final_output")),
        BTreeMap::from([("fine.txt".to_string(), "ok\n".to_string())])
    );
}

#[test]
fn an_instructions_file_runs_alone_with_python() {
    let sandbox = Sandbox::new(&[("a.txt", "alone\n")]);
    // (Issue 37: a flow of one read delivers nothing: `no_change`, exit 1, where it said
    // `succeeded`; its step's instructions are what this test runs alone.)
    assert_exit(
        &sandbox.run(
            &json!([{"id": "r", "operation": "read_file", "params": {"file_path": "a.txt"}}]),
            "t",
        ),
        1,
    );
    assert_eq!(sandbox.step_status("t", "r")["status"], json!("succeeded"));
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    let output = std::process::Command::new("python3")
        .args(["-m", "open_codex_lib"])
        .arg(sandbox.task_dir("t").join("r/open_codex_instructions.md"))
        .env("PYTHONPATH", python)
        .current_dir(sandbox.root())
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let result: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        (result["status"].clone(), result["content"].clone()),
        (json!("success"), json!("alone\n"))
    );
}

#[test]
fn repository_text_reaches_a_command_as_data_never_as_code() {
    let sandbox = Sandbox::new(&[("notes.txt", "\"; touch pwned; echo \"")]);
    let flow = json!([
        {"id": "r", "operation": "read_file", "params": {"file_path": "notes.txt"}},
        {"id": "echo", "operation": "execute_shell_command", "depends_on": "r",
         "params": {"command": "printf '%s' \"@{outputs.r.content}\" > out.txt"}}
    ]);
    assert_exit(&sandbox.run(&flow, "t"), 0);
    assert_eq!(
        text_tree(&sandbox.task_dir("t").join("final_output")),
        BTreeMap::from([(
            "out.txt".to_string(),
            "\"; touch pwned; echo \"".to_string()
        )])
    );
    let instructions = std::fs::read_to_string(
        sandbox
            .task_dir("t")
            .join("echo/open_codex_instructions.md"),
    )
    .unwrap();
    assert!(
        instructions.contains("\"command\": \"printf '%s' \\\"${OCFLOW_REF_1}\\\" > out.txt\""),
        "{instructions}"
    );
}

#[test]
fn a_path_can_change_between_file_and_directory() {
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    let flow = json!([
        {"id": "dir", "operation": "write_file",
         "params": {"file_path": "a/b.txt", "content": "b\n"}},
        {"id": "file", "operation": "execute_shell_command", "depends_on": "dir",
         "params": {"command": "rm -r a && echo file > a"}},
        {"id": "back", "operation": "execute_shell_command", "depends_on": "file",
         "params": {"command": "rm a && mkdir a && echo c > a/c.txt"}},
        {"id": "sibling", "operation": "execute_shell_command", "depends_on": "dir",
         "params": {"command": "cat a/b.txt"}}
    ]);
    assert_exit(&sandbox.run(&flow, "t"), 0);
    assert_eq!(sandbox.result("t", "sibling")["stdout"], json!("b\n"));
    assert_eq!(
        text_tree(&sandbox.task_dir("t").join("final_output")),
        BTreeMap::from([("a/c.txt".to_string(), "c\n".to_string())])
    );
    assert_exit(&sandbox.ocflow().args(["apply", "t"]).output().unwrap(), 0);
    assert_eq!(
        text_tree(&sandbox.repo),
        BTreeMap::from([
            ("a/c.txt".to_string(), "c\n".to_string()),
            ("keep.txt".to_string(), "k\n".to_string())
        ])
    );
}

#[test]
fn a_command_cannot_write_into_a_workspace_inside_the_repository() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let workspace = sandbox.repo.join("flows");
    let plan = sandbox.flow(
        &json!([{"id": "sneak", "operation": "execute_shell_command",
                 "params": {"command":
                     "mkdir -p flows && echo 'codex_lib = \"evil\"' > flows/ocflow.toml \
                      && echo ok > ok.txt"}}]),
    );
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ocflow"))
        .arg("--repo")
        .arg(&sandbox.repo)
        .arg("--workspace")
        .arg(&workspace)
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .env("XDG_STATE_HOME", sandbox.state_home())
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let result = read_json(&workspace.join("t/sneak/result.json"));
    assert_eq!(result["output_files"], json!(["ok.txt"]));
    assert_eq!(result["ignored_files"], json!(["flows/ocflow.toml"]));
}

#[test]
fn a_symlink_replaced_by_a_file_is_reviewed_but_never_applied_through() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let outside = sandbox.root().join("outside.txt");
    std::fs::write(&outside, "outside\n").unwrap();
    std::os::unix::fs::symlink(&outside, sandbox.repo.join("current")).unwrap();
    let flow = json!([{"id": "swap", "operation": "execute_shell_command",
        "params": {"command": "rm current && echo v2 > current"}}]);
    assert_exit(&sandbox.run(&flow, "t"), 0);
    let diff = sandbox.ocflow().args(["diff", "t"]).output().unwrap();
    assert_exit(&diff, 0);
    assert!(stdout(&diff).contains("+v2"), "{}", stdout(&diff));
    let apply = sandbox
        .ocflow()
        .args(["apply", "t", "--force"])
        .output()
        .unwrap();
    assert_exit(&apply, 2);
    assert!(
        stderr(&apply).contains("outside the repository"),
        "{}",
        stderr(&apply)
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "outside\n");
}

#[test]
fn commands_write_only_in_their_view_when_the_kernel_has_landlock() {
    let landlock = std::process::Command::new(env!("CARGO_BIN_EXE_ocflow"))
        .args(["sandbox-exec", "--probe"])
        .output()
        .unwrap();
    // The probe's first line is what Landlock enforces (the second, whether overlays mount).
    let enforced = stdout(&landlock).lines().next() == Some("landlock");
    for (sandboxed, flag) in [(true, None), (false, Some("--no-sandbox"))] {
        let (_dir, repo, workspace) = sandbox_outside_tmp();
        let command = format!(
            "echo evil > {}/evil.txt; echo out > ../../outside.txt; echo ok > fine.txt",
            repo.display()
        );
        let plan = workspace.parent().unwrap().join("flow.json");
        let flow = json!([{"id": "c", "operation": "execute_shell_command",
            "params": {"command": command}}]);
        std::fs::write(&plan, flow.to_string()).unwrap();
        let mut run = std::process::Command::new(env!("CARGO_BIN_EXE_ocflow"));
        run.arg("--repo")
            .arg(&repo)
            .arg("--workspace")
            .arg(&workspace)
            .args(["run", "--task-id", "t"])
            // Its own task index, not the user's.
            .env(
                "XDG_STATE_HOME",
                workspace.parent().unwrap().join("user-state"),
            );
        if let Some(flag) = flag {
            run.arg(flag);
        }
        let output = run.arg("--plan").arg(&plan).output().unwrap();
        assert_exit(&output, 0);
        let result = read_json(&workspace.join("t/c/result.json"));
        assert_eq!(result["output_files"], json!(["fine.txt"]));
        let namespaces = namespaces_available();
        let confined = sandboxed && (enforced || namespaces);
        let kind = match (sandboxed, namespaces, enforced) {
            (false, _, _) => "none",
            (true, true, true) => "namespaces+landlock",
            (true, true, false) => "namespaces",
            (true, false, true) => "landlock",
            (true, false, false) => "none",
        };
        assert_eq!(result["sandbox"], json!(kind));
        assert_eq!(
            repo.join("evil.txt").exists(),
            !confined,
            "the repository was written: sandboxed={sandboxed}"
        );
        assert_eq!(workspace.join("outside.txt").exists(), !confined);
        if confined {
            // Landlock says "Permission denied"; a read-only mount, "Read-only file system".
            let stderr = result["stderr"].as_str().unwrap();
            assert!(
                stderr.contains("Permission denied") || stderr.contains("Read-only file system"),
                "{result}"
            );
        }
    }
}

/// git in a command's view never reaches the user's repository. Before issue 40 §5 the view had
/// no `.git` and git said "not a git repository"; now the view shows the repository's `.git`
/// read-only (its own top level is the view; what git writes there is the step's, see
/// `views.rs`): updated with that issue.
#[test]
fn a_repository_in_tmp_stays_protected_and_git_does_not_find_it_from_the_view() {
    let landlock = std::process::Command::new(env!("CARGO_BIN_EXE_ocflow"))
        .args(["sandbox-exec", "--probe"])
        .output()
        .unwrap();
    let enforced = stdout(&landlock).trim().starts_with("landlock");
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    assert!(
        std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(&sandbox.repo)
            .status()
            .unwrap()
            .success()
    );
    let command = format!(
        "git rev-parse --show-toplevel 2>&1 | head -1; echo evil > {}/evil.txt; \
         echo t > \"$TMPDIR/x\" && echo tmp-ok",
        sandbox.repo.display()
    );
    // The default workspace, inside the repository, as most users have it.
    let plan = sandbox.flow(
        &json!([{"id": "c", "operation": "execute_shell_command", "params": {"command": command}}]),
    );
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ocflow"))
        .arg("--repo")
        .arg(&sandbox.repo)
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .env("XDG_CONFIG_HOME", sandbox.root().join("user-config"))
        .env("XDG_STATE_HOME", sandbox.state_home())
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let result = read_json(&sandbox.repo.join(".ocflow/t/c/result.json"));
    let out = result["stdout"].as_str().unwrap();
    let top = out.lines().next().unwrap_or("");
    assert_ne!(
        top,
        sandbox.repo.display().to_string(),
        "git found the user's repository from the view: {out}"
    );
    assert!(
        top.contains(".ocflow/t/_"),
        "git's top level is the view: {out}"
    );
    assert!(out.contains("tmp-ok"), "{result}");
    assert_eq!(
        sandbox.repo.join("evil.txt").exists(),
        !enforced,
        "{result}"
    );
}

/// The repository's ignore rules: what git ignores is not listed for the planner, not read or
/// written by file steps, and not carried into the diff or the apply from what a command left
/// behind (a `.pytest_cache/`); command views still hold it, for builds and tests.
#[test]
fn what_git_ignores_stays_out_of_prompts_diffs_and_applies() {
    use super::fake_llm::{FakeLlm, chat};
    let sandbox = Sandbox::new(&[
        (".gitignore", "secret.env\n.pytest_cache/\nvenv/\nbuild/\n"),
        ("secret.env", "TOKEN=hunter2\n"),
        ("venv/bin/tool", "#!/bin/sh\n"),
        ("build/out.o", "object\n"),
        ("src/a.py", "x = 1\n"),
    ]);
    let plan = json!({"steps": [{"id": "w", "operation": "write_file",
        "params": {"file_path": "src/b.py", "content": "y = 2\n"}}]});
    let llm = FakeLlm::in_order(vec![chat(&plan.to_string()), chat("Wrote src/b.py.")]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["plan", "add src/b.py"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let prompt = llm.bodies()[0].to_string();
    assert!(prompt.contains("src/a.py"), "{prompt}");
    for hidden in ["secret.env", "venv/bin/tool", "build/out.o"] {
        assert!(!prompt.contains(hidden), "{hidden} reached the planner");
    }

    let read_secret = json!([{"id": "r", "operation": "read_file",
        "params": {"file_path": "secret.env"}}]);
    let refused = sandbox.run(&read_secret, "r");
    assert_exit(&refused, 2);
    assert!(
        stderr(&refused).contains("`secret.env` in .gitignore"),
        "{}",
        stderr(&refused)
    );

    let command = json!([{"id": "c", "operation": "execute_shell_command",
        "params": {"command": "test -f venv/bin/tool && mkdir -p .pytest_cache && \
            echo cache > .pytest_cache/v && echo z = 3 > src/c.py && rm build/out.o"}}]);
    assert_exit(&sandbox.run(&command, "t"), 0);
    let diff = sandbox
        .ocflow()
        .args(["--json", "diff", "t"])
        .output()
        .unwrap();
    assert_exit(&diff, 0);
    let line: Value = serde_json::from_str(stdout(&diff).trim()).unwrap();
    assert_eq!(
        line["files"],
        json!([{"path": "src/c.py", "kind": "added"}])
    );
    assert_eq!(line["ignored"], json!([".pytest_cache/v", "build/out.o"]));
    assert_exit(&sandbox.ocflow().args(["apply", "t"]).output().unwrap(), 0);
    assert!(sandbox.repo.join("src/c.py").is_file());
    assert!(!sandbox.repo.join(".pytest_cache").exists());
    // An ignored file a command deleted (`make clean`) is not deleted from the repository.
    assert!(sandbox.repo.join("build/out.o").is_file());
}

/// An ignore file a command made applies as git applies it: to the new files below it (pytest's
/// cache marks itself ignored with `*`), never to a file the repository has — a `.gitignore`
/// template listing `lib/` does not hide a change to the tracked `lib/util.py`.
#[test]
fn an_ignore_file_a_command_made_leaves_out_only_new_files() {
    let sandbox = Sandbox::new(&[("lib/util.py", "x = 1\n")]);
    let command = json!([{"id": "c", "operation": "execute_shell_command",
        "params": {"command": "mkdir -p .pytest_cache/v \
            && printf '*\\n' > .pytest_cache/.gitignore && echo 1 > .pytest_cache/v/nodeids \
            && printf 'lib/\\n' > .gitignore \
            && echo 'x = 2' > lib/util.py && echo y > lib/new.txt"}}]);
    assert_exit(&sandbox.run(&command, "t"), 0);
    let diff = sandbox
        .ocflow()
        .args(["--json", "diff", "t"])
        .output()
        .unwrap();
    assert_exit(&diff, 0);
    let line: Value = serde_json::from_str(stdout(&diff).trim()).unwrap();
    assert_eq!(
        line["files"],
        json!([{"path": ".gitignore", "kind": "added"},
               {"path": "lib/util.py", "kind": "modified"}]),
        "{line}"
    );
    assert_eq!(
        line["ignored"],
        json!([
            ".pytest_cache/.gitignore",
            ".pytest_cache/v/nodeids",
            "lib/new.txt"
        ]),
        "{line}"
    );
}

/// Content that is not UTF-8 travels byte for byte between steps (`content_from_step`), and a
/// reference, which carries only text, refuses it by name (a 3000-byte file used to become
/// 5420 bytes of U+FFFD, and the step succeeded).
#[test]
fn binary_content_travels_byte_exact_or_is_refused_by_name() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let blob: Vec<u8> = (0..3000u32).map(|i| (i * 131 % 256) as u8).collect();
    assert!(std::str::from_utf8(&blob).is_err());
    std::fs::write(sandbox.repo.join("blob.bin"), &blob).unwrap();
    let copy = json!([
        {"id": "r", "operation": "read_file", "params": {"file_path": "blob.bin"}},
        {"id": "w", "operation": "write_file", "depends_on": ["r"],
         "params": {"file_path": "copy.bin", "content_from_step": "r"}}
    ]);
    assert_exit(&sandbox.run(&copy, "t"), 0);
    let copied = std::fs::read(sandbox.task_dir("t").join("final_output/copy.bin")).unwrap();
    assert_eq!(copied.len(), 3000);
    assert!(copied == blob, "the bytes changed on the way");

    let by_reference = json!([
        {"id": "r", "operation": "read_file", "params": {"file_path": "blob.bin"}},
        {"id": "w", "operation": "write_file", "depends_on": ["r"],
         "params": {"file_path": "copy.bin", "content": "@{outputs.r.content}"}}
    ]);
    assert_exit(&sandbox.run(&by_reference, "u"), 1);
    let step = sandbox.step_status("u", "w");
    assert_eq!(step["status"], json!("failed"));
    let message = step["message"].as_str().unwrap();
    assert!(
        message.contains("not UTF-8 text") && message.contains("content_from_step"),
        "{message}"
    );
    assert!(!sandbox.task_dir("u").join("final_output/copy.bin").exists());
}
