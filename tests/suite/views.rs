//! Command steps' views through an overlay (issue 15): the command's changes are read from the
//! overlay's upper directory — deletions as whiteouts, a directory deleted and made again as an
//! opaque one — and carried into the view, so later steps see them; the result says which way
//! ran, and the files are the same as with the copy-and-compare fallback.

use serde_json::{Value, json};

use super::support::*;

fn flow() -> Value {
    let shell = |id: &str, command: &str, after: &[&str]| {
        json!({"id": id, "operation": "execute_shell_command", "depends_on": after,
               "params": {"command": command}})
    };
    json!([
        shell(
            "edit",
            "echo changed > keep.txt && rm gone.txt && mkdir -p new/deep && \
                       echo n > new/deep/n.txt && mkdir -p node_modules/pkg node_modules/gone && \
                       echo dep > node_modules/pkg/index.js && echo g > node_modules/gone/x.js",
            &[]
        ),
        shell(
            "swap",
            "rm -r dir && mkdir dir && echo fresh > dir/fresh.txt && rm file && \
                       mkdir file && echo inside > file/inside.txt",
            &["edit"]
        ),
        shell(
            "later",
            "cat node_modules/pkg/index.js > seen.txt && ls dir > listing.txt && \
                        test ! -e gone.txt",
            &["swap"]
        ),
        // A directory made again with a file of the same name and content: no change to it.
        shell(
            "remake",
            "rm -r new && mkdir -p new/deep && echo n > new/deep/n.txt && echo m > new/m.txt",
            &["later"]
        ),
        // A file in a carried directory changed, then read by the next command.
        shell(
            "deps",
            "echo more >> node_modules/pkg/index.js && rm -r node_modules/gone",
            &["remake"]
        ),
        shell(
            "deps_seen",
            "cat node_modules/pkg/index.js > deps.txt && test ! -e node_modules/gone && \
             cat file/inside.txt > inside.txt",
            &["deps"]
        ),
        // The test command found from the view's files, and a JUnit report the command wrote.
        json!({"id": "detected", "operation": "run_tests", "depends_on": ["deps_seen"],
               "params": {}}),
        json!({"id": "junit", "operation": "run_tests", "depends_on": ["detected"],
               "params": {"command": "mkdir -p reports && printf '%s' '<testsuite name=\"s\" \
                tests=\"2\" failures=\"1\"><testcase name=\"ok\"/><testcase name=\"bad\">\
                <failure message=\"boom\"/></testcase></testsuite>' > reports/junit.xml"}}),
        // `mv` copies a directory the view already had when the kernel refuses to rename it.
        shell(
            "moved",
            "mv new renamed && ls renamed > moved.txt",
            &["junit"]
        ),
        // A Rust crate made by the command: its `target` is a build directory, never captured.
        shell(
            "cargo",
            "mkdir -p crate/target/debug && echo '[package]' > crate/Cargo.toml && \
             echo built > crate/target/debug/app",
            &["moved"]
        ),
        // A directory emptied, not removed, is still there for the next command; a file
        // replaced by a symlink is ignored, not deleted.
        shell(
            "emptied",
            "rm emptied/* && ln -sf keep.txt linked.txt",
            &["cargo"]
        ),
        shell(
            "refill",
            "cp keep.txt emptied/ && ls emptied > refilled.txt",
            &["emptied"]
        ),
        // A directory removed by one command and made again by the next holds only what the
        // second put there.
        shell("dropped", "rm -r tests", &["refill"]),
        shell(
            "remade_dir",
            "mkdir tests && echo x > tests/new.txt",
            &["dropped"]
        ),
        shell("listed", "ls tests > tests_listing.txt", &["remade_dir"])
    ])
}

const STEPS: [&str; 15] = [
    "edit",
    "swap",
    "later",
    "remake",
    "deps",
    "deps_seen",
    "detected",
    "junit",
    "moved",
    "cargo",
    "emptied",
    "refill",
    "dropped",
    "remade_dir",
    "listed",
];

fn run(overlay: bool) -> (Sandbox, Vec<Value>) {
    let sandbox = Sandbox::new(&[
        ("keep.txt", "keep\n"),
        ("gone.txt", "gone\n"),
        ("dir/old.txt", "old\n"),
        ("dir/sub/older.txt", "older\n"),
        ("file", "a file\n"),
        ("tests/test_a.py", "def test_a():\n    assert True\n"),
        ("emptied/a.txt", "a\n"),
        ("emptied/b.txt", "b\n"),
        ("linked.txt", "a file, then a link\n"),
    ]);
    // Forced either way: by default only views of 2000 files or more use the overlay.
    sandbox.configure_sandbox(if overlay {
        "overlay = true"
    } else {
        "overlay = false"
    });
    assert_exit(&sandbox.run(&flow(), "t"), 0);
    let results = STEPS.iter().map(|step| sandbox.result("t", step)).collect();
    (sandbox, results)
}

#[test]
fn an_overlay_view_captures_what_the_copy_captures() {
    // Without namespaces the copy-and-compare view is the only one.
    if !require(Component::Bubblewrap) {
        return;
    }
    let (overlaid, with) = run(true);
    let (copied, without) = run(false);
    for (a, b) in with.iter().zip(&without) {
        assert_eq!(a["view"], json!("overlay"), "{a}");
        assert_eq!(b["view"], json!("copy"), "{b}");
        for field in [
            "output_files",
            "deleted_files",
            "ignored_files",
            "status",
            "tests",
        ] {
            assert_eq!(a[field], b[field], "{field}: {a} vs {b}");
        }
    }
    assert_eq!(
        with[0]["output_files"],
        json!(["keep.txt", "new/deep/n.txt"])
    );
    assert_eq!(with[0]["deleted_files"], json!(["gone.txt"]));
    assert_eq!(
        with[1]["deleted_files"],
        json!(["dir/old.txt", "dir/sub/older.txt", "file"])
    );
    assert_eq!(
        with[1]["output_files"],
        json!(["dir/fresh.txt", "file/inside.txt"])
    );
    assert_eq!(with[2]["output_files"], json!(["listing.txt", "seen.txt"]));
    let final_files = |sandbox: &Sandbox| text_tree(&sandbox.task_dir("t").join("final_output"));
    assert_eq!(final_files(&overlaid), final_files(&copied));
    assert_eq!(final_files(&overlaid)["seen.txt"], "dep\n");
    assert_eq!(final_files(&overlaid)["listing.txt"], "fresh.txt\n");
    assert_eq!(final_files(&overlaid)["deps.txt"], "dep\nmore\n");
    assert_eq!(final_files(&overlaid)["inside.txt"], "inside\n");
    assert_eq!(final_files(&overlaid)["moved.txt"], "deep\nm.txt\n");
    assert_eq!(with[9]["output_files"], json!(["crate/Cargo.toml"]));
    assert_eq!(
        with[10]["deleted_files"],
        json!(["emptied/a.txt", "emptied/b.txt"])
    );
    // A symlink a command made is reported once, by the step that made it, in either view.
    assert_eq!(with[10]["ignored_files"], json!(["linked.txt"]));
    assert!(with[11..].iter().all(|r| r["ignored_files"].is_null()));
    assert_eq!(final_files(&overlaid)["refilled.txt"], "keep.txt\n");
    assert_eq!(final_files(&overlaid)["tests_listing.txt"], "new.txt\n");
    assert_eq!(with[6]["status"], json!("success"), "{}", with[6]);
    assert_eq!(with[6]["tests"]["passed"], json!(1), "{}", with[6]);
    assert_eq!(with[7]["tests"]["failed"], json!(1), "{}", with[7]);
    assert_eq!(
        with[7]["tests"]["report_files"],
        json!(["reports/junit.xml"]),
        "{}",
        with[7]
    );
    // Nothing of the overlay is left in the step directories.
    let task = overlaid.task_dir("t");
    for step in STEPS {
        let dir = task.join(step);
        assert!(!dir.join("upper").exists() && !dir.join("work").exists());
    }
    // No copy of the repository: beside the snapshot, the view holds only files steps changed
    // and what commands left in build directories.
    assert!(!task.join("_view").exists());
    let changed: Vec<&str> = with
        .iter()
        .flat_map(|result| result["output_files"].as_array().unwrap())
        .map(|file| file.as_str().unwrap())
        .collect();
    let changes = task.join("_layers/changes");
    for entry in walkdir::WalkDir::new(&changes) {
        let entry = entry.unwrap();
        let path = entry
            .path()
            .strip_prefix(&changes)
            .unwrap()
            .to_str()
            .unwrap();
        let built = ["node_modules/", "crate/target/", ".pytest_cache/"]
            .iter()
            .any(|dir| path.starts_with(dir));
        if entry.file_type().is_file() && !built {
            assert!(changed.contains(&path), "{path} is in the view's layer");
        }
    }
}

#[test]
fn a_command_the_overlay_refuses_a_rename_runs_again_in_a_copy() {
    // Without namespaces the copy-and-compare view is the only one.
    if !require(Component::Bubblewrap) {
        return;
    }
    let sandbox = Sandbox::new(&[("pkg/mod.py", "x = 1\n"), ("pkg/sub/deep.py", "y = 2\n")]);
    // Not the step's fault: it runs again even when it may not be retried.
    let config = sandbox.root().join("user-config/ocflow/config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("{text}\n[recovery]\nmax_attempts_per_step = 1\n"),
    )
    .unwrap();
    // Python's os.rename does not copy when the kernel refuses (EXDEV), as `mv` does.
    let flow = json!([{"id": "rename", "operation": "execute_shell_command",
        "params": {"command": "python3 -c \"import os; os.rename('pkg', 'lib')\""}}]);
    let output = sandbox.run(&flow, "t");
    assert_exit(&output, 0);
    let result = sandbox.result("t", "rename");
    assert_eq!(result["view"], json!("copy"), "{result}");
    assert_eq!(
        result["output_files"],
        json!(["lib/mod.py", "lib/sub/deep.py"])
    );
    assert_eq!(
        result["deleted_files"],
        json!(["pkg/mod.py", "pkg/sub/deep.py"])
    );
    let step = sandbox.step_status("t", "rename");
    assert_eq!(step["attempts"], json!(2), "{step}");
}

#[test]
fn a_workspace_where_overlays_are_refused_gets_copies() {
    // Without namespaces the copy-and-compare view is the only one.
    if !require(Component::Bubblewrap) {
        return;
    }
    // The workspace on an overlay (as in a container's root file system), which overlayfs
    // refuses as an upper directory, while /tmp, where ocflow probes first, takes one.
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let layers = sandbox.root().join("container");
    for dir in ["lower", "upper", "work", "root"] {
        std::fs::create_dir_all(layers.join(dir)).unwrap();
    }
    let flow = sandbox.flow(&json!([{"id": "edit", "operation": "execute_shell_command",
        "params": {"command": "echo b > a.txt"}}]));
    let mount = format!(
        "mount -t overlay overlay -o userxattr,lowerdir={0}/lower,upperdir={0}/upper,\
         workdir={0}/work {0}/root || exit 99; exec \"$@\"",
        layers.display()
    );
    let output = sandbox
        .command_like_ocflow("unshare")
        .args([
            "-Urm",
            "sh",
            "-c",
            &mount,
            "sh",
            env!("CARGO_BIN_EXE_ocflow"),
            "--json",
        ])
        .arg("--repo")
        .arg(&sandbox.repo)
        .arg("--workspace")
        .arg(layers.join("root"))
        .args(["run", "--task-id", "t", "--plan"])
        .arg(flow)
        .output()
        .unwrap();
    if output.status.code() == Some(99) {
        skip("cannot mount an overlay in a user namespace here");
        return;
    }
    assert_exit(&output, 0);
    // What the run wrote in its workspace is in the overlay's upper directory.
    let result: Value = serde_json::from_str(
        &std::fs::read_to_string(layers.join("upper/t/edit/result.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(result["view"], json!("copy"), "{result}");
    // Nor can the caches' overlays be mounted there: the step's caches are its own.
    assert_eq!(
        result["sandbox_layers"]["caches"],
        json!("private"),
        "{result}"
    );
    assert_eq!(result["output_files"], json!(["a.txt"]));
    assert!(
        stdout(&output).contains("overlays do not work"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn a_file_a_view_shows_again_is_newer_than_what_a_command_built_from_another_version() {
    // Without namespaces the copy-and-compare view is the only one.
    if !require(Component::Bubblewrap) {
        return;
    }
    // `build` edits src.txt and "builds" after it; `check`, which does not depend on it, runs
    // next in the same view and sees src.txt as the snapshot has it again. Build tools compare
    // timestamps: the file put back must be newer than the build, as in a copied view, or
    // make and cargo would reuse what was built from the other version.
    let flow = json!([
        {"id": "build", "operation": "execute_shell_command", "params": {"command":
            "echo edited >> src.txt && sleep 0.05 && mkdir -p target && touch target/built"}},
        {"id": "check", "operation": "execute_shell_command", "params": {"command":
            "if test src.txt -nt target/built; then echo newer > newer.txt; \
             else echo older > newer.txt; fi"}}
    ]);
    for overlay in [false, true] {
        let sandbox = Sandbox::new(&[("src.txt", "source\n"), ("Cargo.toml", "[package]\n")]);
        sandbox.configure_sandbox(&format!("overlay = {overlay}"));
        let plan = sandbox.flow(&flow);
        let output = sandbox
            .ocflow()
            .args(["run", "--jobs", "1", "--task-id", "t", "--plan"])
            .arg(plan)
            .output()
            .unwrap();
        assert_exit(&output, 0);
        let newer = std::fs::read_to_string(sandbox.task_dir("t").join("check/output/newer.txt"));
        assert_eq!(newer.unwrap(), "newer\n", "overlay = {overlay}");
    }
}

/// A command makes a file 3000 directories deep (6001 bytes of path, beyond what a flow keeps
/// and what the kernel opens in one path). The view made of layers dropped it silently (the
/// step succeeded with no output); the copied view stopped the whole flow with "File name too
/// long". Both now fail the step, naming the path's length and depth, and the flow is saved.
#[test]
fn a_file_too_deep_to_keep_fails_its_step_the_same_way_in_both_views() {
    let deep = "python3 -c \"import os\nfor i in range(3000):\n    os.mkdir('d'); os.chdir('d')\n\
                open('f', 'w').write('x')\"";
    let mut messages = Vec::new();
    for overlay in [true, false] {
        let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
        sandbox.configure_sandbox(&format!("overlay = {overlay}"));
        let flow = json!([
            {"id": "deep", "operation": "execute_shell_command", "params": {"command": deep}},
            {"id": "after", "operation": "write_file", "depends_on": "deep",
             "params": {"file_path": "b.txt", "content": "b\n"}}
        ]);
        let output = sandbox.run(&flow, "t");
        assert_exit(&output, 1);
        let step = sandbox.step_status("t", "deep");
        assert_eq!(step["status"], json!("failed"), "overlay {overlay}: {step}");
        let result = sandbox.result("t", "deep");
        let view = if overlay { "overlay" } else { "copy" };
        if result["view"] != json!(view) {
            skip(&format!(
                "the {view} view is not available here ({})",
                result["view"]
            ));
            continue;
        }
        let message = step["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        for expected in [
            "d/d/d/",
            "/d/f",
            "6001 bytes",
            "3000 directories deep",
            "1024 bytes",
        ] {
            assert!(
                message.contains(expected),
                "overlay {overlay}: {expected}: {message}"
            );
        }
        assert_eq!(result["output_files"], json!([]), "{result}");
        assert_eq!(sandbox.status("t")["state"], json!("failed"));
        messages.push(message);
    }
    if messages.len() == 2 {
        assert_eq!(messages[0], messages[1], "the two views answer alike");
    }
}

/// Issue 40 §1 and §5. A command step sees the repository's build directory (`target/` beside
/// a `Cargo.toml`) through a layer the view keeps from step to step: the repository's build is
/// reused, a later step sees what an earlier one built, the repository's `target/` never
/// changes, and the flow keeps none of it after its end. It sees the repository's `.git` too,
/// read-only: git works as in the user's shell, and what it writes goes with the step.
#[test]
fn a_command_sees_the_repositorys_build_and_git_and_the_flow_keeps_neither() {
    if !require(Component::Bubblewrap) {
        return;
    }
    let sandbox = Sandbox::new(&[
        ("Cargo.toml", "[package]\nname = \"x\"\n"),
        ("src/lib.rs", "pub fn f() {}\n"),
        ("target/debug/old", "built by the user\n"),
    ]);
    git(&sandbox.repo, &["init", "-q"]);
    std::fs::write(sandbox.repo.join(".gitignore"), "target/\n").unwrap();
    git(&sandbox.repo, &["add", "-A"]);
    git(&sandbox.repo, &["commit", "-qm", "the user's commit"]);
    let head = std::fs::read_to_string(sandbox.repo.join(".git/HEAD")).unwrap();
    sandbox.configure_sandbox("overlay = true");
    let flow = json!([
        {"id": "build", "operation": "execute_shell_command", "params": {"command":
            "cat target/debug/old > seen.txt && echo new > target/debug/new && \
             rm target/debug/old && git log --format=%s > log.txt && \
             git status --short -- src Cargo.toml .gitignore > status.txt && \
             git tag made-in-a-step"}},
        {"id": "again", "operation": "execute_shell_command", "depends_on": ["build"],
         "params": {"command": "cat target/debug/new > again.txt && \
             if test -e target/debug/old; then echo shown > old.txt; fi"}}
    ]);
    let plan = sandbox.flow(&flow);
    let output = sandbox
        .ocflow()
        .args(["run", "--jobs", "1", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let task = sandbox.task_dir("t");
    let read = |path: &str| std::fs::read_to_string(task.join(path)).unwrap();
    assert_eq!(read("build/output/seen.txt"), "built by the user\n");
    assert_eq!(read("build/output/log.txt"), "the user's commit\n");
    assert_eq!(
        read("build/output/status.txt"),
        "",
        "the view is the commit"
    );
    // The second step sees what the first built and deleted, in the view's build layer.
    assert_eq!(read("again/output/again.txt"), "new\n");
    assert!(!task.join("again/output/old.txt").exists());
    // Nothing of it is captured, nor reaches the repository.
    let result = sandbox.result("t", "build");
    assert_eq!(
        result["output_files"],
        json!(["log.txt", "seen.txt", "status.txt"])
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("target/debug/old")).unwrap(),
        "built by the user\n"
    );
    assert!(!sandbox.repo.join("target/debug/new").exists());
    assert!(!sandbox.repo.join(".git/refs/tags/made-in-a-step").exists());
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join(".git/HEAD")).unwrap(),
        head
    );
    // The flow's end removed the build layers: the task keeps no build.
    let kept: Vec<_> = walkdir::WalkDir::new(&task)
        .into_iter()
        .flatten()
        .filter(|e| e.file_name() == "new")
        .map(|e| e.path().display().to_string())
        .collect();
    assert!(kept.is_empty(), "{kept:?}");
}
