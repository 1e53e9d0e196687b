//! Command steps see the repository's installed dependencies (issue 25 §1): `npm test`, `npx`
//! and `.venv/bin/python` run with the repository's own `node_modules/` and `.venv/`, read-only
//! (bound, not copied) where the sandbox has namespaces, copied (and said so) where no mount is
//! possible; nothing a command does there reaches the user's tree or the diff. A package that
//! is not installed is named at once, not after a registry timeout.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::*;

const TINY_INDEX: &str = "module.exports = { answer: 42 };\n";

/// A JavaScript project whose test needs the installed package `tiny` (with a program,
/// `tiny-check`, for npx), and a Python virtual environment holding the module `tinyvenv`.
fn project() -> Sandbox {
    let sandbox = Sandbox::new(&[
        (
            "package.json",
            r#"{"name": "demo", "version": "1.0.0", "scripts": {"test": "node test/check.js"}}"#,
        ),
        (
            "test/check.js",
            "const tiny = require('tiny');\nif (tiny.answer !== 42) process.exit(1);\n\
             console.log('tiny answers');\n",
        ),
        (
            "node_modules/tiny/package.json",
            r#"{"name": "tiny", "version": "1.0.0", "main": "index.js",
                "bin": {"tiny-check": "bin.js"}}"#,
        ),
        ("node_modules/tiny/index.js", TINY_INDEX),
        // Ignored, not excluded: in the snapshot like any ignored file.
        (".gitignore", "vendor/\nnode_modules/\n.venv/\n"),
        ("vendor/autoload.php", "<?php // composer\n"),
        (
            "node_modules/tiny/bin.js",
            "#!/usr/bin/env node\nconsole.log('tiny ok ' + require('./index.js').answer);\n",
        ),
    ]);
    let repo = &sandbox.repo;
    let bin = repo.join("node_modules/tiny/bin.js");
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(repo.join("node_modules/.bin")).unwrap();
    std::os::unix::fs::symlink("../tiny/bin.js", repo.join("node_modules/.bin/tiny-check"))
        .unwrap();
    // A real virtual environment, as `python3 -m venv .venv` makes it for a project.
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip", ".venv"])
        .current_dir(repo)
        .status()
        .unwrap();
    assert!(made.success(), "python3 -m venv failed");
    let lib = repo.join(".venv/lib");
    let python = std::fs::read_dir(&lib).unwrap().next().unwrap().unwrap();
    std::fs::write(
        python.path().join("site-packages/tinyvenv.py"),
        "ANSWER = 42\n",
    )
    .unwrap();
    sandbox
}

fn flow() -> Value {
    let shell = |id: &str, command: &str| {
        let params = json!({ "command": command });
        json!({"id": id, "operation": "execute_shell_command", "params": params})
    };
    json!([
        // No command: `npm test`, found from package.json.
        {"id": "tests", "operation": "run_tests", "params": {}},
        shell("npx", "npx tiny-check"),
        shell("venv", ".venv/bin/python -c 'import tinyvenv; print(tinyvenv.ANSWER)'"),
        shell("vendor", "cat vendor/autoload.php"),
        shell(
            "write",
            "if echo 'module.exports = 7;' > node_modules/tiny/index.js 2>/dev/null; \
             then echo WROTE; else echo REFUSED; fi; \
             if touch .venv/planted 2>/dev/null; then echo WROTE; else echo REFUSED; fi"
        ),
        // What the last command wrote there is gone, unless the view holds a copy.
        json!({"id": "after", "operation": "execute_shell_command", "depends_on": ["write"],
               "params": {"command": "cat node_modules/tiny/index.js"}}),
    ])
}

/// How a step sees the dependencies.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shown {
    /// Through an overlay of the step's own: writable, thrown away with the step.
    Layer,
    /// Bound read-only.
    ReadOnly,
    /// Copied into the view (no mount possible): writable, kept by the view.
    Copy,
}

/// Runs the project's flow with `config` (sandbox lines) and `flags`; the steps see the
/// dependencies as `shown`.
fn check(config: &str, flags: &[&str], shown: Shown) {
    let sandbox = project();
    sandbox.configure_sandbox(config);
    let plan = sandbox.flow(&flow());
    let output = sandbox
        .ocflow()
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .args(flags)
        .output()
        .unwrap();
    let what = format!("{config} {flags:?}");
    assert_exit(&output, 0);
    let tests = sandbox.result("t", "tests");
    assert_eq!(tests["command"], "npm test", "{what}");
    assert!(
        tests["stdout"].as_str().unwrap().contains("tiny answers"),
        "{what}: {tests}"
    );
    let npx = sandbox.result("t", "npx");
    assert_eq!(npx["stdout"], "tiny ok 42\n", "{what}");
    assert_eq!(sandbox.result("t", "venv")["stdout"], "42\n", "{what}");
    let vendor = sandbox.result("t", "vendor");
    assert_eq!(vendor["stdout"], "<?php // composer\n", "{what}");
    let write = sandbox.result("t", "write");
    let expected = match shown {
        Shown::ReadOnly => "REFUSED\nREFUSED\n",
        Shown::Layer | Shown::Copy => "WROTE\nWROTE\n",
    };
    assert_eq!(write["stdout"], expected, "{what}: {write}");
    assert_eq!(write["output_files"], json!([]), "{what}: {write}");
    let after = match shown {
        Shown::Copy => "module.exports = 7;\n",
        Shown::Layer | Shown::ReadOnly => TINY_INDEX,
    };
    assert_eq!(sandbox.result("t", "after")["stdout"], after, "{what}");
    // The user's tree is as it was, and nothing of it is in the diff.
    let repo = &sandbox.repo;
    let index = std::fs::read_to_string(repo.join("node_modules/tiny/index.js")).unwrap();
    assert_eq!(index, TINY_INDEX, "{what}");
    assert!(!repo.join(".venv/planted").exists(), "{what}");
    let final_files = text_tree(&sandbox.task_dir("t").join("final_output"));
    assert!(final_files.is_empty(), "{what}: {final_files:?}");
    let warned = stderr(&output).contains(
        "command steps see copies of the repository's .venv/, node_modules/ (no namespaces to \
         bind them read-only here): each view copies them once",
    );
    assert_eq!(warned, shown == Shown::Copy, "{what}: {}", stderr(&output));
}

#[test]
fn command_steps_see_the_repositorys_installed_dependencies_without_copies() {
    // Where overlays work, through a layer of the step's own; else read-only.
    check("overlay = true", &[], Shown::Layer);
    let bound = if namespaces_available() {
        Shown::ReadOnly
    } else {
        Shown::Copy
    };
    check("overlay = false", &[], bound);
}

#[test]
fn without_namespaces_views_get_copies_and_the_flow_says_so() {
    check("namespaces = false\noverlay = false", &[], Shown::Copy);
    check("", &["--no-sandbox"], Shown::Copy);
}

#[test]
fn a_package_that_is_not_installed_is_named_at_once() {
    let sandbox = project();
    // An npm cache of the test's own, so no package is there to install offline.
    let cache = sandbox.root().join("npm-cache");
    let plan = sandbox.flow(&json!([
        {"id": "tape", "operation": "run_tests", "params": {"command": "npx tape 'test/*.js'"}}
    ]));
    let started = Instant::now();
    let output = sandbox
        .ocflow()
        .env("npm_config_cache", &cache)
        .args(["run", "--no-recovery", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    // Liveness only: npx asking an unreachable registry waits for minutes.
    assert!(
        started.elapsed() < Duration::from_secs(90),
        "npx waited for the registry: {:?}",
        started.elapsed()
    );
    assert_ne!(output.status.code(), Some(0));
    let result = sandbox.result("t", "tape");
    let message = result["message"].as_str().unwrap();
    assert!(
        message.contains(
            "`tape` is not installed in node_modules: run `npm ci` in the repository, or \
             allow the network for this step"
        ),
        "{message}"
    );
}

/// Where bubblewrap cannot run (the start-up trial's fallback "without namespaces"), the
/// launcher binds the dependencies itself, read-only, in a mount namespace of its own.
#[test]
fn the_launcher_binds_dependencies_read_only_without_bubblewrap() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (repo, view) = (root.join("repo"), root.join("view"));
    std::fs::create_dir_all(repo.join("web/node_modules/p")).unwrap();
    std::fs::create_dir_all(&view).unwrap();
    std::fs::write(repo.join("web/node_modules/p/i.js"), "installed\n").unwrap();
    // An earlier command left a symlink where the repository has a directory: no mount point
    // is made through it.
    let outside = root.join("outside");
    std::fs::create_dir_all(repo.join("lib/node_modules")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, view.join("lib")).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ocflow"))
        .arg("sandbox-exec")
        .arg("--write")
        .arg(&view)
        .arg("--dependencies-from")
        .arg(&repo)
        .arg("--dependencies-into")
        .arg(&view)
        .args([
            "--dependency",
            "web/node_modules",
            "--dependency",
            "lib/node_modules",
        ])
        .args(["--", "/bin/sh", "-c"])
        .arg(
            "cat web/node_modules/p/i.js; \
             if echo x > web/node_modules/p/i.js; then echo WROTE; else echo REFUSED; fi; \
             echo mine > web/mine.txt",
        )
        .current_dir(&view)
        .output()
        .unwrap();
    assert_eq!(
        stdout(&output),
        "installed\nREFUSED\n",
        "{}",
        stderr(&output)
    );
    assert!(stderr(&output).contains("Read-only file system"));
    let installed = std::fs::read_to_string(repo.join("web/node_modules/p/i.js")).unwrap();
    assert_eq!(installed, "installed\n");
    // The rest of the view stays the command's to write; the mount point is left empty.
    assert_eq!(
        std::fs::read_to_string(view.join("web/mine.txt")).unwrap(),
        "mine\n"
    );
    assert_eq!(
        std::fs::read_dir(view.join("web/node_modules"))
            .unwrap()
            .count(),
        0
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}
