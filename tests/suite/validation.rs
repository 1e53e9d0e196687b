//! Every validation rule rejects its bad flow with exit 2, one line per problem naming the step
//! and the rule, before anything is written.

use serde_json::{Value, json};

use super::support::*;

fn write(id: &str, path: &str) -> Value {
    json!({"id": id, "operation": "write_file", "params": {"file_path": path, "content": "x"}})
}

/// Runs `flow` and checks it is refused with `expected` in the error and nothing created.
#[track_caller]
fn assert_refused(sandbox: &Sandbox, flow: &Value, expected: &[&str]) {
    let output = sandbox.run(flow, "bad");
    assert_exit(&output, 2);
    let err = stderr(&output);
    for fragment in expected {
        assert!(err.contains(fragment), "expected {fragment:?} in:\n{err}");
    }
    assert!(
        !sandbox.workspace.exists(),
        "the workspace was created for an invalid flow"
    );
}

#[test]
fn structure_rules() {
    let sandbox = Sandbox::new(&[("a.txt", "a")]);
    let plan = sandbox.root().join("flow.json");
    std::fs::write(&plan, "{not json").unwrap();
    let output = sandbox
        .ocflow()
        .args(["run", "--plan"])
        .arg(&plan)
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("not valid JSON"),
        "{}",
        stderr(&output)
    );

    assert_refused(
        &sandbox,
        &json!({"version": 7, "steps": [write("a", "a.txt")]}),
        &["unsupported flow version 7", "[version]"],
    );
    assert_refused(&sandbox, &json!({"steps": []}), &["the flow has no steps"]);
    assert_refused(
        &sandbox,
        &json!({"steps": [write("a", "x"), write("a", "y")]}),
        &["step a: the id is used by more than one step", "[id]"],
    );
    assert_refused(
        &sandbox,
        &json!([write("bad id!", "x")]),
        &["ids match", "[id]"],
    );
    assert_refused(
        &sandbox,
        &json!([write("Step1", "x"), write("step1", "y")]),
        &["step step1: the id is used by more than one step (ids are compared ignoring case)"],
    );
    assert_refused(
        &sandbox,
        &json!([write("Final_Output", "x")]),
        &["reserved", "[id]"],
    );
    assert_refused(
        &sandbox,
        &json!([write("final_output", "x")]),
        &["reserved", "[id]"],
    );
    assert_refused(
        &sandbox,
        &json!([{"id": "a", "operation": "launch_rockets"}]),
        &["step a: unknown operation `launch_rockets`", "[operation]"],
    );
    assert_refused(
        &sandbox,
        &json!([{"id": "a", "operation": "read_file",
                 "params": {"file_path": "a.txt", "colour": "red"}}]),
        &["has no parameter `colour`", "[params]"],
    );
    assert_refused(
        &sandbox,
        &json!([{"id": "a", "operation": "read_file"}]),
        &["read_file needs `file_path`", "[params]"],
    );
    assert_refused(
        &sandbox,
        &json!([{"id": "a", "operation": "read_file", "params": {"file_path": 3}}]),
        &["`file_path` must be a string", "[params]"],
    );
    assert_refused(
        &sandbox,
        &json!([{"id": "a", "operation": "execute_shell_command",
                 "params": {"command": "true", "timeout_seconds": "soon"}}]),
        &["must be an integer"],
    );
    assert_refused(
        &sandbox,
        &json!([{"id": "a", "operation": "write_file",
                 "params": {"file_path": "x", "content": "1", "instructions": "2"}}]),
        &["exactly one of content, content_from_step, instructions"],
    );
    assert_refused(
        &sandbox,
        &json!([{"id": "a", "operation": "read_file",
                 "params": {"file_path": "a.txt"}, "priority": 1}]),
        &["unknown field `priority`", "[format]"],
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let sandbox = Sandbox::new(&[]);
    let output = sandbox.run(
        &json!([{"id": "a", "operation": "nope"}, {"id": "b", "operation": "read_file"}]),
        "bad",
    );
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(
        err.contains("2 problem(s)") && err.contains("step a:") && err.contains("step b:"),
        "{err}"
    );
}

#[test]
fn dependency_rules() {
    let sandbox = Sandbox::new(&[]);
    let with_deps = |id: &str, deps: Value| {
        let mut step = write(id, &format!("{id}.txt"));
        step["depends_on"] = deps;
        step
    };
    // (Issue 37: a name that is no step and needs no guess — the step itself, an operation's
    // or a function's name — is dropped with a note, where these two were refused; a slip of a
    // real id is still refused, naming it.)
    let accepted = Sandbox::new(&[]);
    let ghost = accepted.run(
        &json!([
            with_deps("a", json!("ghost")),
            with_deps("b", json!(["b", "write_file"]))
        ]),
        "dropped",
    );
    assert_exit(&ghost, 0);
    let said = stderr(&ghost);
    assert!(
        said.contains("step a named `ghost` in depends_on, which is no step of the flow")
            && said.contains("step b named itself in depends_on: the entry was dropped")
            && said.contains("step b named `write_file` in depends_on"),
        "{said}"
    );
    assert_refused(
        &sandbox,
        &json!([
            with_deps("first", json!([])),
            with_deps("b", json!("frist"))
        ]),
        &[
            "step b: depends_on names `frist`, which is not a step of this flow (did you mean \
           `first`?) [dependencies]",
        ],
    );
    assert_refused(
        &sandbox,
        &json!([
            with_deps("a", json!("c")),
            with_deps("b", json!("a")),
            with_deps("c", json!("b"))
        ]),
        &["dependency cycle: a -> c -> b -> a", "[cycle]"],
    );
}

#[test]
fn reference_rules() {
    let sandbox = Sandbox::new(&[("a.txt", "a")]);
    let read = json!({"id": "r", "operation": "read_file", "params": {"file_path": "a.txt"}});
    // A reference that would need a dependency making a cycle is still refused.
    assert_refused(
        &sandbox,
        &json!([{"id": "r", "operation": "read_file", "depends_on": ["w"],
                 "params": {"file_path": "a.txt"}},
                {"id": "w", "operation": "write_file",
                 "params": {"file_path": "b.txt", "content_from_step": "r"}}]),
        &[
            "step w: `content_from_step` reads step `r`, which this step does not depend on; \
             add it to depends_on [reference]",
        ],
    );
    assert_refused(
        &sandbox,
        &json!([{"id": "w", "operation": "write_file",
                 "params": {"file_path": "b.txt", "content_from_step": "nowhere"}}]),
        &["names `nowhere`, which is not a step of this flow"],
    );
    assert_refused(
        &sandbox,
        &json!([read, {"id": "w", "operation": "write_file", "depends_on": "r",
                       "params": {"file_path": "b.txt", "content": "@{outputs.r}"}}]),
        &["malformed reference"],
    );
    assert_refused(
        &sandbox,
        &json!([read, {"id": "w", "operation": "write_file", "depends_on": "r",
                       "params": {"file_path": "@{outputs.r.content}", "content": "x"}}]),
        &[
            "`file_path` holds a reference; paths must be written out",
            "[path]",
        ],
    );
}

/// Seed 002's refactor example reads an earlier step (`content_from_step`, or seed 004's
/// `@{outputs.…}`) without listing it in `depends_on`: the dependency is implied, added, and
/// said — it used to be refused.
#[test]
fn a_dependency_a_reference_implies_is_added_and_said() {
    for params in [
        json!({"file_path": "b.txt", "content_from_step": "r"}),
        json!({"file_path": "b.txt", "content": "@{outputs.r.content}"}),
    ] {
        let sandbox = Sandbox::new(&[("a.txt", "from a")]);
        let flow = json!([
            {"id": "r", "operation": "read_file", "params": {"file_path": "a.txt"}},
            {"id": "w", "operation": "write_file", "params": params}
        ]);
        let output = sandbox.run(&flow, "implied");
        assert_exit(&output, 0);
        assert!(
            stderr(&output).contains(
                "step w reads step r but did not depend on it: \
                                      the dependency was added"
            ),
            "{}",
            stderr(&output)
        );
        let saved = read_json(&sandbox.task_dir("implied").join("flow.json"));
        let w = &saved["steps"][1];
        assert_eq!(w["depends_on"], json!(["r"]), "{saved}");
        assert_eq!(sandbox.step_status("implied", "w")["status"], "succeeded");
        let written = sandbox.task_dir("implied").join("final_output/b.txt");
        assert_eq!(std::fs::read_to_string(written).unwrap(), "from a");
    }
}

#[test]
fn path_rules() {
    let sandbox = Sandbox::new(&[("a.txt", "a")]);
    let secrets = sandbox.root().join("repo-secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("key.pem"), "secret").unwrap();
    std::os::unix::fs::symlink(&secrets, sandbox.repo.join("shortcut")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", sandbox.repo.join("passwd")).unwrap();
    std::fs::create_dir_all(sandbox.repo.join(".git/hooks")).unwrap();
    for (path, expected) in [
        ("../outside.txt", "contains `..`"),
        ("notes/../../outside.txt", "contains `..`"),
        ("/etc/passwd", "is absolute"),
        ("~/.ssh/id_rsa", "starts with `~`"),
        (".git/hooks/pre-commit", "goes through `.git`"),
        (
            ".GIT/hooks/pre-commit",
            "`.GIT` (which is `.git` on a case-insensitive",
        ),
        (
            "lib/Node_Modules/x.js",
            "`Node_Modules` (which is `node_modules`",
        ),
        ("lib/node_modules/x.js", "goes through `node_modules`"),
        ("shortcut/key.pem", "outside the repository"),
        ("passwd", "outside the repository"),
    ] {
        assert_refused(&sandbox, &json!([write("a", path)]), &[expected, "[path]"]);
    }
}

#[test]
fn a_workspace_inside_the_repository_is_out_of_reach() {
    let sandbox = Sandbox::new(&[("a.txt", "a")]);
    let workspace = sandbox.repo.join("flows");
    let plan = sandbox.flow(&json!([write("a", "flows/t/flow_status.json")]));
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ocflow"))
        .arg("--repo")
        .arg(&sandbox.repo)
        .arg("--workspace")
        .arg(&workspace)
        .args(["run", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("which flows may not touch"),
        "{}",
        stderr(&output)
    );
    assert!(!workspace.exists());
}

#[test]
fn size_limits() {
    let sandbox = Sandbox::new(&[]);
    let steps: Vec<Value> = (0..1001).map(|i| write(&format!("s{i}"), "x")).collect();
    assert_refused(
        &sandbox,
        &Value::Array(steps),
        &["the flow has 1001 steps; the limit is 1000", "[limits]"],
    );
    let huge = "x".repeat(1024 * 1024 + 1);
    assert_refused(
        &sandbox,
        &json!([{"id": "a", "operation": "write_file",
                 "params": {"file_path": "x", "content": huge}}]),
        &["`content` is 1048577 bytes", "[limits]"],
    );
}

/// Issue 25: every problem of a flow at once, as README promises: a step's unknown role is
/// reported with another step's missing parameter, not only after it is fixed.
#[test]
fn role_problems_come_with_parameter_problems() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let flow = json!({"task": "edit", "steps": [
        {"id": "w", "operation": "write_file", "params": {"content": "x"}},
        {"id": "r", "operation": "read_file", "role": "wizard",
         "params": {"file_path": "a.txt"}}]});
    let output = sandbox.run(&flow, "t");
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(err.contains("file_path"), "{err}");
    assert!(err.contains("role `wizard` is not a known role"), "{err}");
}
