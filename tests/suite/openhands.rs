//! OpenHands' conventions: its agent starts in the workspace root, not in the repository, and
//! its `LLM_MODEL` carries LiteLLM's provider prefix; the skill it reads, put in place by
//! `ocflow skill --install`.

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
    // (Issue 37: a flow of reads alone delivers nothing and ends `no_change`: this one writes.)
    let plan = sandbox.flow(&json!([{"id": "r", "operation": "write_file",
        "params": {"file_path": "src/b.txt", "content": "b\n"}}]));
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
        // (Issue 37: a plan of reads alone delivers nothing and is asked again: this one writes.)
        let plan = json!({"steps": [{"id": "w", "operation": "write_file",
            "params": {"file_path": "b.txt", "content": "b\n"}}]});
        let llm = FakeLlm::in_order(vec![chat(&plan.to_string()), chat("Wrote b.txt.")]);
        let output = sandbox
            .ocflow()
            .args([
                "--base-url",
                &llm.base_url(),
                "run",
                "--task-id",
                "t",
                "Write b.txt",
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

#[test]
fn a_workspace_that_holds_the_repository_works() {
    // OpenHands' layout: the repository under /workspace, and ocflow's tasks there too.
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let workspace = sandbox.root();
    let flow = json!([
        {"id": "w", "operation": "write_file", "params": {"file_path": "b.txt", "content": "b\n"}},
        {"id": "sh", "operation": "execute_shell_command", "depends_on": "w",
         "params": {"command": "cat b.txt > c.txt"}}
    ]);
    let plan = sandbox.flow(&flow);
    let ocflow = |args: &[&str]| {
        sandbox
            .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
            .arg("--repo")
            .arg(&sandbox.repo)
            .arg("--workspace")
            .arg(workspace)
            .args(args)
            .output()
            .unwrap()
    };
    let run = ocflow(&["run", "--task-id", "t", "--plan", plan.to_str().unwrap()]);
    assert_exit(&run, 0);
    let apply = ocflow(&["apply", "t"]);
    assert_exit(&apply, 0);
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("c.txt")).unwrap(),
        "b\n"
    );
    // A task directory may still never be the one holding the repository.
    let clash = ocflow(&["run", "--task-id", "repo", "--plan", plan.to_str().unwrap()]);
    assert_exit(&clash, 2);
}

/// `ocflow skill` without a repository, from any directory.
fn skill_command(sandbox: &Sandbox, dir: &std::path::Path) -> std::process::Command {
    let mut command = sandbox.command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"));
    command.current_dir(dir).arg("skill");
    command
}

#[test]
fn the_skill_is_in_openhands_format_and_the_binary_carries_it() {
    let sandbox = Sandbox::new(&[]);
    let output = skill_command(&sandbox, sandbox.root()).output().unwrap();
    assert_exit(&output, 0);
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("skills/ocflow/SKILL.md");
    let text = stdout(&output);
    assert_eq!(text, std::fs::read_to_string(shipped).unwrap());
    // Front matter: `name` equal to the folder's, a description, the trigger word.
    let front = text
        .strip_prefix("---\n")
        .and_then(|rest| rest.split_once("\n---\n"))
        .map(|(front, _)| front)
        .expect("front matter between --- lines");
    let lines: Vec<&str> = front.lines().collect();
    assert!(lines.contains(&"name: ocflow"), "{front}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("description: ") && l.len() > 60),
        "{front}"
    );
    let triggers = lines
        .iter()
        .position(|l| *l == "triggers:")
        .expect("triggers");
    assert_eq!(lines[triggers + 1], "- ocflow", "{front}");
    // What an agent must know: --json, a long timeout, the final event, apply.
    for needed in [
        "--json",
        "timeout",
        "flow_finished",
        "ocflow apply",
        "heartbeat",
    ] {
        assert!(text.contains(needed), "the skill never says {needed}");
    }
    let output = skill_command(&sandbox, sandbox.root())
        .arg("--json")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let line: serde_json::Value = serde_json::from_str(stdout(&output).trim_end()).unwrap();
    assert_eq!(line["text"], json!(text));
}

#[test]
fn skill_install_writes_where_openhands_reads_and_loses_nothing() {
    let sandbox = Sandbox::new(&[]);
    let workspace = sandbox.root().join("oh-workspace");
    std::fs::create_dir(&workspace).unwrap();
    let install = |dir: &str, force: bool| {
        let mut command = skill_command(&sandbox, &workspace);
        command.args(["--install", dir]);
        if force {
            command.arg("--force");
        }
        command.output().unwrap()
    };
    let output = install(".", false);
    assert_exit(&output, 0);
    let path = workspace.join(".agents/skills/ocflow/SKILL.md");
    let skill = std::fs::read_to_string(&path).unwrap();
    assert!(skill.starts_with("---\nname: ocflow\n"), "{skill}");
    assert!(
        stderr(&output).contains("installed the OpenHands skill"),
        "{}",
        stderr(&output)
    );
    assert_exit(&install(".", false), 0);

    // The user's own edits are not overwritten without --force, and kept with it.
    std::fs::write(&path, "my notes").unwrap();
    let output = install(".", false);
    assert_exit(&output, 2);
    assert!(stderr(&output).contains("--force"), "{}", stderr(&output));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "my notes");
    assert_exit(&install(".", true), 0);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), skill);
    assert_eq!(
        std::fs::read_to_string(path.with_file_name("SKILL.md.bak")).unwrap(),
        "my notes"
    );

    // A cloned repository's `.agents` pointing elsewhere is not followed.
    let elsewhere = sandbox.root().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let cloned = workspace.join("cloned");
    std::fs::create_dir(&cloned).unwrap();
    std::os::unix::fs::symlink(&elsewhere, cloned.join(".agents")).unwrap();
    let output = install("cloned", false);
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("is a symlink"),
        "{}",
        stderr(&output)
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);

    let output = install("missing", false);
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("not a directory"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn the_model_prefix_warning_is_said_once_a_session() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    // (Issue 37: a flow of reads alone ends `no_change`: this one writes.)
    let plan = sandbox.flow(&json!([{"id": "w", "operation": "write_file",
        "params": {"file_path": "b.txt", "content": "b\n"}}]));
    let run = |task_id: &str| {
        sandbox
            .ocflow()
            .args([
                "--json",
                "--base-url",
                "http://127.0.0.1:9/v1",
                "run",
                "--task-id",
            ])
            .arg(task_id)
            .arg("--plan")
            .arg(&plan)
            .env("LLM_MODEL", "openai/gpt-4o")
            .output()
            .unwrap()
    };
    let warnings = |output: &std::process::Output| {
        stdout(output)
            .lines()
            .filter(|line| line.contains("\"type\":\"warning\"") && line.contains("gpt-4o"))
            .count()
    };
    let first = run("first");
    assert_exit(&first, 0);
    assert_eq!(warnings(&first), 1, "{}", stdout(&first));
    let second = run("second");
    assert_exit(&second, 0);
    assert_eq!(warnings(&second), 0, "{}", stdout(&second));
}

/// The shell commands of the skill's ```bash blocks, as written, in order (comments off).
fn skill_commands() -> Vec<String> {
    let skill = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("skills/ocflow/SKILL.md"),
    )
    .unwrap();
    let mut commands = Vec::new();
    let mut in_bash = false;
    for line in skill.lines() {
        match line.trim() {
            "```bash" => in_bash = true,
            "```" => in_bash = false,
            text if in_bash && !text.is_empty() => {
                let command = text.split("   #").next().unwrap().trim();
                commands.push(command.to_string());
            }
            _ => {}
        }
    }
    commands
}

#[test]
fn the_skills_commands_all_succeed_as_written_from_the_workspace_root() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let workspace_root = sandbox.root();
    let write = |file: &str| {
        chat(
            &json!([{"id": "w", "operation": "write_file",
            "params": {"file_path": file, "content": "new\n"}}])
            .to_string(),
        )
    };
    let llm = super::fake_llm::FakeLlm::with_rules(vec![
        super::fake_llm::Rule::planner().replies_in_order(vec![
            write("a.txt"),
            write("b.txt"),
            write("c.txt"),
        ]),
        super::fake_llm::Rule::flow_summary().reply(chat("Wrote the file.")),
    ]);
    // `ocflow` on the PATH, as an installed one is.
    let bin = sandbox.root().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_ocflow"), bin.join("ocflow")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let commands = skill_commands();
    assert!(commands.len() >= 7, "{commands:?}");
    assert!(
        commands
            .iter()
            .filter(|c| c.contains("ocflow run") || c.contains("ocflow resume"))
            .all(|c| ["LLM_API_KEY=", "LLM_BASE_URL=", "LLM_MODEL="]
                .iter()
                .all(|v| c.contains(v))),
        "every command that may ask the LLM names all three settings: {commands:?}"
    );
    let mut task_id = String::new();
    for written in commands {
        let command = written
            .replace(
                "/workspace/project/REPO",
                &sandbox.repo.display().to_string(),
            )
            .replace("TASK_ID", &task_id);
        let output = sandbox
            .command_like_ocflow("sh")
            .arg("-c")
            .arg(&command)
            .current_dir(workspace_root)
            .env("PATH", &path)
            .env("LLM_API_KEY", "sk-skill")
            .env("LLM_BASE_URL", llm.base_url())
            .env("LLM_MODEL", "openai/m")
            .output()
            .unwrap();
        assert_exit(&output, 0);
        if let Some(started) = stdout(&output)
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .find(|event| event["type"] == json!("flow_started"))
        {
            task_id = started["task_id"].as_str().unwrap().to_string();
        }
        assert!(!task_id.is_empty(), "{written}: no task id yet");
    }
    // The detached run too had the key (handed over through a pipe, not its environment).
    let requests = llm.requests();
    assert_eq!(requests.len(), 4);
    for request in requests {
        let header = request.headers.get("authorization").unwrap();
        assert_eq!(header.to_str().unwrap(), "Bearer sk-skill");
    }
    // The last flow (the detached one) was applied from the workspace root.
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("b.txt")).unwrap(),
        "new\n"
    );
}
