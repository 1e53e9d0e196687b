//! OpenHands' conventions: its agent starts in the workspace root, not in the repository, and
//! its `LLM_MODEL` carries LiteLLM's provider prefix.

use serde_json::json;

use super::fake_llm::{FakeLlm, chat};
use super::support::*;

/// `ocflow` run from `dir`, without `--repo`.
fn ocflow_in(sandbox: &Sandbox, dir: &std::path::Path) -> std::process::Command {
    let mut command = sandbox.command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"));
    command
        .current_dir(dir)
        .arg("--workspace")
        .arg(&sandbox.workspace);
    command
}

#[test]
fn the_repository_is_found_as_git_finds_it_or_refused_by_name() {
    let sandbox = Sandbox::new(&[("src/a.txt", "a\n")]);
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&sandbox.repo)
        .status()
        .unwrap();
    assert!(init.success());
    let plan = sandbox.flow(&json!([{"id": "r", "operation": "read_file",
        "params": {"file_path": "src/a.txt"}}]));
    // From a sub-folder: the repository is its root, not the sub-folder.
    let output = ocflow_in(&sandbox, &sandbox.repo.join("src"))
        .args(["run", "--task-id", "t", "--plan"])
        .arg(&plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(
        sandbox.status("t")["repo"],
        json!(sandbox.repo.display().to_string())
    );
    // From a directory in no repository: refused, naming --repo; nothing is created.
    let outside = sandbox.root().join("not-a-repo");
    std::fs::create_dir_all(&outside).unwrap();
    let output = ocflow_in(&sandbox, &outside)
        .args(["run", "--task-id", "u", "--plan"])
        .arg(&plan)
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("--repo DIR"),
        "{}",
        stderr(&output)
    );
    assert!(!sandbox.task_dir("u").exists());
}

#[test]
fn a_provider_prefix_is_taken_off_and_a_slashed_model_name_kept() {
    for (asked, sent) in [
        ("openai/gpt-4o", "gpt-4o"),
        (
            "hosted_vllm/mistralai/Devstral-Small-2505",
            "mistralai/Devstral-Small-2505",
        ),
        (
            "mistralai/Devstral-Small-2505",
            "mistralai/Devstral-Small-2505",
        ),
    ] {
        let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
        let plan = json!({"steps": [{"id": "r", "operation": "read_file",
            "params": {"file_path": "a.txt"}}]});
        let llm = FakeLlm::start(vec![chat(&plan.to_string()), chat("Read a.txt.")]);
        let output = sandbox
            .ocflow()
            .args([
                "--base-url",
                &llm.base_url(),
                "run",
                "--task-id",
                "t",
                "Read a.txt",
            ])
            .env("LLM_MODEL", asked)
            .output()
            .unwrap();
        assert_exit(&output, 0);
        assert_eq!(llm.bodies()[0]["model"], json!(sent), "{asked}");
        let said = stderr(&output).contains(&format!("the model is sent as `{sent}`"));
        assert_eq!(said, asked != sent, "{asked}: {}", stderr(&output));
    }
}
