//! Lifecycle hooks (issue 42): the user's commands at a flow's points, given the event as JSON
//! on stdin; a non-zero exit blocks the point with its stderr as the reason — a step fails (a
//! recovery would see it), an apply writes nothing — journaled as `hook_blocked`. A
//! repository's own config may not add one until trusted.

use serde_json::json;

use super::support::*;

fn configure_hooks(sandbox: &Sandbox, hooks: &str) {
    let path = sandbox.root().join("user-config/ocflow/config.toml");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&format!("\n[hooks]\n{hooks}\n"));
    std::fs::write(path, text).unwrap();
}

#[test]
fn hooks_see_each_point_and_block_a_step_and_an_apply_with_their_reason() {
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    let shared = sandbox.root().join("shared");
    configure_hooks(
        &sandbox,
        &format!(
            "before_step = [\"grep -q '\\\"step\\\":\\\"b\\\"' && \
             {{ echo 'no b today' >&2; exit 1; }} || true\"]\n\
             after_step = [\"cat >> {0}/after.jsonl && echo >> {0}/after.jsonl\"]\n\
             flow_end = [\"cat > {0}/end.json\"]\n\
             before_apply = [\"echo 'applies wait for review' >&2; exit 1\"]\n",
            shared.display()
        ),
    );
    let flow = json!([
        {"id": "a", "operation": "write_file", "params": {"file_path": "a.txt", "content": "a\n"}},
        {"id": "b", "operation": "write_file", "params": {"file_path": "b.txt", "content": "b\n"}}
    ]);
    let output = sandbox
        .ocflow()
        .args(["run", "--no-recovery", "--task-id", "t", "--plan"])
        .arg(sandbox.flow(&flow))
        .output()
        .unwrap();
    assert_exit(&output, 1);
    let status = sandbox.status("t");
    let step = |id: &str| {
        status["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(step("a")["status"], "succeeded");
    assert_eq!(step("b")["status"], "failed");
    let error = step("b")["error"].to_string();
    assert!(
        error.contains("no b today") && error.contains("before_step"),
        "{error}"
    );
    // after_step was told the step that succeeded; flow_end the end.
    let after = std::fs::read_to_string(shared.join("after.jsonl")).unwrap();
    let told: serde_json::Value = serde_json::from_str(after.lines().next().unwrap()).unwrap();
    assert_eq!(
        (&told["hook"], &told["step"]),
        (&json!("after_step"), &json!("a"))
    );
    assert_eq!(told["output_files"], json!(["a.txt"]));
    let end: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(shared.join("end.json")).unwrap()).unwrap();
    assert_eq!(
        (&end["hook"], &end["state"]),
        (&json!("flow_end"), &json!("failed"))
    );
    let journal = std::fs::read_to_string(sandbox.task_dir("t").join("journal.jsonl")).unwrap();
    assert!(journal.contains("\"hook_blocked\""), "{journal}");

    // A flow that succeeds: its apply is blocked by the before_apply hook; nothing written.
    let one = json!([{"id": "a", "operation": "write_file",
        "params": {"file_path": "a.txt", "content": "a\n"}}]);
    assert_exit(&sandbox.run(&one, "t2"), 0);
    let apply = sandbox.ocflow().args(["apply", "t2"]).output().unwrap();
    assert_exit(&apply, 2);
    assert!(
        stderr(&apply).contains("applies wait for review"),
        "{}",
        stderr(&apply)
    );
    assert!(!sandbox.repo.join("a.txt").exists());
}

#[test]
fn an_untrusted_repository_cannot_add_a_hook() {
    let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
    let marker = sandbox.root().join("shared/ran");
    let own = sandbox.repo.join(".ocflow");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::write(
        own.join("ocflow.toml"),
        format!("[hooks]\nbefore_step = [\"touch {}\"]\n", marker.display()),
    )
    .unwrap();
    let flow = json!([{"id": "a", "operation": "write_file",
        "params": {"file_path": "a.txt", "content": "a\n"}}]);
    let output = sandbox
        .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
        .arg("--repo")
        .arg(&sandbox.repo)
        .args(["run", "--task-id", "t", "--plan"])
        .arg(sandbox.flow(&flow))
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert!(stderr(&output).contains("hooks"), "{}", stderr(&output));
    assert!(!marker.exists(), "the repository's hook ran");
}
