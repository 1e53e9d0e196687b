//! The operation declared once: an operation the library declares in its `operations.json`, and
//! nowhere else, reaches the planner's catalogue, the validator, the role defaults, the step's
//! instructions and the library's dispatch. The host is pointed at a copy of the library holding
//! the changed file with `--python-dir`, as a user points it at another library.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::fake_llm::{FakeLlm, chat};
use super::support::*;

/// Copies the bundled library (without its caches) into `to/open_codex_lib`.
fn copy_library(to: &Path) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/open_codex_lib");
    let package = to.join("open_codex_lib");
    for entry in walkdir::WalkDir::new(&from) {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(&from).unwrap();
        if rel.components().any(|c| c.as_os_str() == "__pycache__") {
            continue;
        }
        let target = package.join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
    package
}

/// A library whose operations.json also declares `peek_file`: `read_file`'s function under
/// another name, with its own doc, goal line and default role, and the reviewer may use it.
fn library_with_peek_file(root: &Path) -> PathBuf {
    let lib = root.join("lib");
    let package = copy_library(&lib);
    let file = package.join("operations.json");
    let mut declared: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    declared["operations"].as_array_mut().unwrap().push(json!({
        "name": "peek_file",
        "doc": "show a file's text to the next steps",
        "implementation": "files:read_file",
        "params": [{"name": "file_path", "type": "path", "required": true,
                    "doc": "file relative to the repository root"}],
        "default_role": "reviewer",
        "goal": [{"text": "Peek at `{file_path}`."}]
    }));
    declared["roles"]["reviewer"]
        .as_array_mut()
        .unwrap()
        .push(json!("peek_file"));
    std::fs::write(&file, serde_json::to_string_pretty(&declared).unwrap()).unwrap();
    lib
}

#[test]
fn an_operation_declared_only_in_operations_json_is_planned_validated_and_run() {
    let sandbox = Sandbox::new(&[("notes.txt", "one\ntwo\n")]);
    let lib = library_with_peek_file(sandbox.root());

    // The planner's catalogue, as `ocflow operations` prints it.
    let listed = sandbox
        .ocflow()
        .arg("--python-dir")
        .arg(&lib)
        .arg("operations")
        .output()
        .unwrap();
    assert_exit(&listed, 0);
    assert!(
        stdout(&listed).contains(
            "- `peek_file`: show a file's text to the next steps\n    file_path* (a string): \
             file relative to the repository root"
        ),
        "{}",
        stdout(&listed)
    );

    // The validator: a parameter it does not declare is refused, before anything runs.
    let bad = sandbox.flow(&json!({"steps": [{"id": "peek", "operation": "peek_file",
        "params": {"file_path": "notes.txt", "lines": 3}}]}));
    let refused = sandbox
        .ocflow()
        .arg("--python-dir")
        .arg(&lib)
        .args(["run", "--task-id", "bad", "--plan"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_exit(&refused, 2);
    assert!(stderr(&refused).contains("lines"), "{}", stderr(&refused));
    assert!(!sandbox.task_dir("bad").join("peek").exists());

    // Planned (the planner's prompt lists it), validated, given its declared role and goal
    // line, and run by the library.
    // (Issue 37: a plan of reads alone delivers nothing and is asked again: this one copies.)
    let plan = json!({"steps": [
        {"id": "peek", "operation": "peek_file", "params": {"file_path": "notes.txt"}},
        {"id": "copy", "operation": "write_file", "depends_on": ["peek"],
         "params": {"file_path": "copy.txt", "content_from_step": "peek"}}
    ]});
    let llm = FakeLlm::in_order(vec![chat(&plan.to_string()), chat("Copied notes.txt.")]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .arg("--python-dir")
        .arg(&lib)
        .args(["run", "--task-id", "t", "Copy notes.txt to copy.txt"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let prompt = llm.bodies()[0].to_string();
    assert!(
        prompt.contains("`peek_file`: show a file's text to the next steps"),
        "{prompt}"
    );
    assert_eq!(sandbox.step_status("t", "peek")["role"], json!("reviewer"));
    let instructions = std::fs::read_to_string(
        sandbox
            .task_dir("t")
            .join("peek/open_codex_instructions.md"),
    )
    .unwrap();
    assert!(
        instructions.contains("Peek at `notes.txt`."),
        "{instructions}"
    );
    let result = sandbox.result("t", "peek");
    assert_eq!(
        (result["status"].clone(), result["content"].clone()),
        (json!("success"), json!("one\ntwo\n"))
    );
}

#[test]
fn a_library_without_a_registry_keeps_the_compiled_in_operations() {
    // A `--codex-lib` module of its own: no registry, no operations.json beside it. The host's
    // operations are then the ones compiled in, which are the bundled library's file.
    let sandbox = Sandbox::new(&[]);
    let other = sandbox.root().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(
        other.join("plain_lib.py"),
        "def execute_operation(path, llm_config):\n    return {'status': 'success'}\n",
    )
    .unwrap();
    let listed = sandbox
        .ocflow()
        .arg("--python-dir")
        .arg(&other)
        .args(["--codex-lib", "plain_lib", "--json", "operations"])
        .output()
        .unwrap();
    assert_exit(&listed, 0);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let names: Vec<&str> = listed["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|op| op["name"].as_str().unwrap())
        .collect();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/open_codex_lib/operations.json");
    let declared: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let declared_names: Vec<&str> = declared["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|op| op["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, declared_names);
    assert_eq!(names.len(), 14);
}
