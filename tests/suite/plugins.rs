//! Plugin operations (the ToolsRegistry): a Python function with a declared parameter schema in
//! a plugin folder named by `[plugins] folders` joins the built-in operations — the planner is
//! shown it, the validator checks its parameters and its role, the engine runs it and its
//! result is reported — and a plugin that fails to import is reported while the rest works.

use serde_json::{Value, json};

use super::fake_llm::{FakeLlm, chat};
use super::support::*;

const PLUGIN: &str = r#"
from open_codex_lib.registry import (
    Param,
    failure,
    operation,
    output_target,
    run_in_view,
    staged_file,
    success,
)

FILE = Param("file_path", "path", required=True, doc="file relative to the repository root")


@operation(doc="count the lines of a file", params=[FILE])
def count_lines(step, llm_config):
    rel = step.params["file_path"]
    with open(staged_file(step, rel), encoding="utf-8") as handle:
        lines = sum(1 for _ in handle)
    return success(step.operation, f"{rel} has {lines} lines", lines=lines)


@operation(
    doc="write a text, upper-cased, to a file",
    params=[FILE, Param("text", "string", required=True, doc="the text to write")],
    writes=["file_path"],
)
def shout(step, llm_config):
    rel = step.params["file_path"]
    with open(output_target(step, rel), "w", encoding="utf-8") as handle:
        handle.write(step.params["text"].upper())
    return success(step.operation, f"wrote {rel}", output_files=[rel])


@operation(
    doc="run a linter command",
    params=[Param("command", "command", required=True, doc="the linter")],
    runs_commands=True,
)
def lint(step, llm_config):
    outcome = run_in_view(step, step.params["command"])
    if outcome.exit_code != 0:
        return failure(step.operation, f"the linter failed: {outcome.stderr[-200:]}")
    return success(step.operation, "linted", stdout=outcome.stdout)
"#;

/// A sandbox whose workspace config loads `plugins/` (next to the config) holding `files`.
fn with_plugins(files: &[(&str, &str)]) -> Sandbox {
    let sandbox = Sandbox::new(&[("notes.txt", "one\ntwo\nthree\n")]);
    let folder = sandbox.workspace.join("plugins");
    std::fs::create_dir_all(&folder).unwrap();
    for (name, text) in files {
        std::fs::write(folder.join(name), text).unwrap();
    }
    std::fs::write(
        sandbox.workspace.join("ocflow.toml"),
        "[plugins]\nfolders = [\"plugins\"]\nentry_points = false\n",
    )
    .unwrap();
    sandbox
}

#[test]
fn a_plugin_operation_from_a_folder_is_planned_validated_run_and_reported() {
    let sandbox = with_plugins(&[("text_tools.py", PLUGIN)]);
    let plan = json!({"steps": [
        {"id": "count", "operation": "count_lines", "params": {"file_path": "notes.txt"}},
        {"id": "loud", "operation": "shout", "depends_on": ["count"],
         "params": {"file_path": "LOUD.txt", "text": "three lines"}},
        {"id": "lint", "operation": "lint", "depends_on": ["loud"],
         "params": {"command": "cat LOUD.txt notes.txt > lint.log; cat lint.log"}}
    ]});
    let llm = FakeLlm::in_order(vec![chat(&plan.to_string()), chat("Counted and shouted.")]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "count the lines of notes.txt"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let prompt = llm.bodies()[0].to_string();
    assert!(
        prompt.contains("`count_lines`: count the lines of a file"),
        "the planner is shown the plugin: {prompt}"
    );
    let schema = llm.bodies()[0]["response_format"].to_string();
    assert!(schema.contains("count_lines"), "{schema}");
    let count = sandbox.result("t", "count");
    assert_eq!(
        (count["status"].clone(), count["lines"].clone()),
        (json!("success"), json!(3))
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.task_dir("t").join("final_output/LOUD.txt")).unwrap(),
        "THREE LINES"
    );
    // A plugin that runs commands works in the view, every earlier change applied; what its
    // command wrote is captured.
    assert_eq!(
        std::fs::read_to_string(sandbox.task_dir("t").join("final_output/lint.log")).unwrap(),
        "THREE LINESone\ntwo\nthree\n"
    );
    assert!(
        sandbox.result("t", "lint")["stdout"]
            .as_str()
            .unwrap()
            .contains("THREE LINESone")
    );
    // Roles: the plugin's default role is the developer's, recorded like any other.
    assert_eq!(
        sandbox.step_status("t", "count")["role"],
        json!("developer")
    );
    let summary = std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap();
    assert!(
        summary.contains("- `count` count_lines (developer) — succeeded: notes.txt has 3 lines"),
        "{summary}"
    );
    let diff = sandbox
        .ocflow()
        .args(["diff", "t", "--stat"])
        .output()
        .unwrap();
    assert!(stdout(&diff).contains("LOUD.txt"), "{}", stdout(&diff));
    // `ocflow operations` lists it, as JSON too, with its parameters' types.
    let listed = sandbox
        .ocflow()
        .args(["--json", "operations"])
        .output()
        .unwrap();
    assert_exit(&listed, 0);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let shout = listed["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|op| op["name"] == json!("shout"))
        .cloned()
        .unwrap();
    assert_eq!(shout["writes"], json!(["file_path"]));
    assert_eq!(shout["params"][0]["type"], json!("path"));
}

#[test]
fn a_plugins_parameters_and_roles_are_validated_like_the_built_ins() {
    let sandbox = with_plugins(&[("text_tools.py", PLUGIN)]);
    let missing = sandbox.run(
        &json!([{"id": "count", "operation": "count_lines", "params": {}}]),
        "t",
    );
    assert_exit(&missing, 2);
    assert!(
        stderr(&missing).contains("file_path"),
        "{}",
        stderr(&missing)
    );
    let outside = sandbox.run(
        &json!([{"id": "count", "operation": "count_lines",
                 "params": {"file_path": "../../etc/passwd"}}]),
        "u",
    );
    assert_exit(&outside, 2);
    // A plugin that runs commands is a command for the roles: the coder may not use it.
    let coder = sandbox.run(
        &json!([{"id": "l", "operation": "lint", "role": "coder",
                 "params": {"command": "true"}}]),
        "v",
    );
    assert_exit(&coder, 2);
    assert!(
        stderr(&coder).contains("role `coder` may not run commands: `lint`"),
        "{}",
        stderr(&coder)
    );
}

#[test]
fn a_plugin_that_fails_to_import_is_reported_and_the_rest_works() {
    let sandbox = with_plugins(&[
        ("text_tools.py", PLUGIN),
        ("broken.py", "def oops(:\n"),
        ("needs_numpyish.py", "import no_such_module_here\n"),
    ]);
    // (Issue 37: a flow of reads alone delivers nothing; this one also writes what it read.)
    let flow = json!([
        {"id": "count", "operation": "count_lines", "params": {"file_path": "notes.txt"}},
        {"id": "read", "operation": "read_file", "params": {"file_path": "notes.txt"}},
        {"id": "copy", "operation": "write_file", "depends_on": ["read"],
         "params": {"file_path": "copy.txt", "content_from_step": "read"}}
    ]);
    let output = sandbox.run(&flow, "t");
    assert_exit(&output, 0);
    let err = stderr(&output);
    assert!(
        err.contains("broken.py was not loaded: SyntaxError"),
        "{err}"
    );
    assert!(
        err.contains("needs_numpyish.py was not loaded: ModuleNotFoundError"),
        "{err}"
    );
    assert_eq!(sandbox.result("t", "count")["lines"], json!(3));
    // The same as warning events for headless callers, and `operations` exits 1.
    let listed = sandbox.ocflow().arg("operations").output().unwrap();
    assert_exit(&listed, 1);
    assert!(stdout(&listed).contains("broken.py"), "{}", stdout(&listed));
    let json_run = sandbox
        .ocflow()
        .args(["--json", "run", "--task-id", "u", "--plan"])
        .arg(sandbox.flow(&flow))
        .output()
        .unwrap();
    assert_exit(&json_run, 0);
    let warnings: Vec<Value> = stdout(&json_run)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == json!("warning"))
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w["message"].as_str().unwrap().contains("broken.py")),
        "{warnings:?}"
    );
}

/// `diff` and `apply` load no plugin: they know the flow's operations from the catalogue the
/// task saved beside its flow. A plugin that runs commands is then a command there too, so a file
/// it left that git ignores is left out, as a built-in command's is.
#[test]
fn diff_and_apply_know_a_flows_plugins_from_its_saved_catalogue() {
    let sandbox = with_plugins(&[("text_tools.py", PLUGIN)]);
    std::fs::write(sandbox.repo.join(".gitignore"), "lint.log\n").unwrap();
    let flow = json!([
        {"id": "loud", "operation": "shout", "params": {"file_path": "LOUD.txt", "text": "hi"}},
        {"id": "lint", "operation": "lint", "depends_on": ["loud"],
         "params": {"command": "cat LOUD.txt > lint.log"}}
    ]);
    for task in ["t", "old"] {
        assert_exit(&sandbox.run(&flow, task), 0);
    }
    let saved = std::fs::read_to_string(sandbox.task_dir("t").join("operations.json")).unwrap();
    let saved: Value = serde_json::from_str(&saved).unwrap();
    let lint = saved["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|op| op["name"] == json!("lint"))
        .cloned()
        .unwrap();
    assert_eq!(
        (lint["runs_commands"].clone(), lint["builtin"].clone()),
        (json!(true), json!(false))
    );
    assert_eq!(saved["operations"][0]["name"], json!("read_file"));
    assert_eq!(saved["operations"][0]["builtin"], json!(true));
    // The plugins are not there for the commands that read the task.
    std::fs::remove_file(sandbox.workspace.join("ocflow.toml")).unwrap();
    let diff = sandbox
        .ocflow()
        .args(["diff", "t", "--stat"])
        .output()
        .unwrap();
    assert_exit(&diff, 0);
    assert!(stdout(&diff).contains("LOUD.txt"), "{}", stdout(&diff));
    assert!(!stdout(&diff).contains("lint.log"), "{}", stdout(&diff));
    let applied = sandbox.ocflow().args(["apply", "t"]).output().unwrap();
    assert_exit(&applied, 0);
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("LOUD.txt")).unwrap(),
        "HI"
    );
    assert!(!sandbox.repo.join("lint.log").exists());
    // A task saved before tasks kept their catalogue reads as it always did: the plugin's
    // command counts as a file step, and what it wrote is listed.
    std::fs::remove_file(sandbox.task_dir("old").join("operations.json")).unwrap();
    let old = sandbox
        .ocflow()
        .args(["diff", "old", "--stat"])
        .output()
        .unwrap();
    assert_exit(&old, 0);
    assert!(stdout(&old).contains("LOUD.txt"), "{}", stdout(&old));
    assert!(stdout(&old).contains("lint.log"), "{}", stdout(&old));
}

/// `resume` without the plugins a task was planned with: the flow still reads from the saved
/// catalogue (it used to be refused as naming unknown operations), the missing plugins are
/// named, and the finished plugin step is not run again.
#[test]
fn resume_reads_a_flow_whose_plugins_are_no_longer_loaded() {
    let sandbox = with_plugins(&[("text_tools.py", PLUGIN)]);
    let flow = json!([
        {"id": "loud", "operation": "shout", "params": {"file_path": "LOUD.txt", "text": "hi"}},
        {"id": "check", "operation": "execute_shell_command", "depends_on": ["loud"],
         "params": {"command": "exit 3"}}
    ]);
    assert_exit(&sandbox.run(&flow, "t"), 1);
    std::fs::remove_file(sandbox.workspace.join("ocflow.toml")).unwrap();
    let resumed = sandbox.ocflow().args(["resume", "t"]).output().unwrap();
    assert_exit(&resumed, 1);
    let err = stderr(&resumed);
    assert!(
        err.contains(
            "was planned with operations that are not loaded now: count_lines, lint, shout"
        ),
        "{err}"
    );
    assert!(!err.contains("unknown operation"), "{err}");
    assert_eq!(sandbox.step_status("t", "loud")["attempts"], json!(1));
    assert_eq!(
        std::fs::read_to_string(sandbox.task_dir("t").join("final_output/LOUD.txt")).unwrap(),
        "HI"
    );
}

/// A repository's own config may not load plugin code until the user trusts the repository.
#[test]
fn an_untrusted_repositorys_plugin_folder_is_not_loaded() {
    let sandbox = Sandbox::new(&[("notes.txt", "one\n")]);
    let own = sandbox.repo.join(".ocflow");
    std::fs::create_dir_all(own.join("plugins")).unwrap();
    std::fs::write(own.join("plugins/text_tools.py"), PLUGIN).unwrap();
    std::fs::write(
        own.join("ocflow.toml"),
        "[plugins]\nfolders = [\"plugins\"]\n",
    )
    .unwrap();
    let flow = json!([{"id": "count", "operation": "count_lines",
        "params": {"file_path": "notes.txt"}}]);
    let output = sandbox
        .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
        .arg("--repo")
        .arg(&sandbox.repo)
        .args(["run", "--task-id", "t", "--plan"])
        .arg(sandbox.flow(&flow))
        .output()
        .unwrap();
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(err.contains("plugins.folders"), "{err}");
    assert!(
        err.contains("unknown operation") || err.contains("not a known operation"),
        "{err}"
    );
}
