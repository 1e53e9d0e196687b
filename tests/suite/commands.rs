//! Status output, command steps' limits, and usage errors.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::*;

#[test]
fn status_shows_a_table_and_json() {
    let sandbox = Sandbox::new(&[]);
    let flow = json!([
        {"id": "hello", "operation": "write_file",
         "params": {"file_path": "h.txt", "content": "hi"}},
        {"id": "boom", "operation": "execute_shell_command",
         "params": {"command": "exit 4"}, "depends_on": "hello"},
        {"id": "never", "operation": "read_file",
         "params": {"file_path": "h.txt"}, "depends_on": "boom"}
    ]);
    assert_exit(&sandbox.run(&flow, "t"), 1);
    let table = sandbox.ocflow().arg("status").output().unwrap();
    assert_exit(&table, 0);
    let table = stdout(&table);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("task t  [failed]"), "{table}");
    let row = |id: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(id))
            .copied()
            .unwrap_or_default()
            .split_whitespace()
            .take(5)
            .collect::<Vec<_>>()
            .join(" ")
    };
    // Issue 14: each step's role (given by default here) has its column.
    assert_eq!(row("hello"), "hello write_file coder succeeded 1");
    assert_eq!(row("boom"), "boom execute_shell_command tester failed 1");
    assert_eq!(row("never"), "never read_file developer pending 0");

    let json = sandbox
        .ocflow()
        .args(["--json", "status", "t"])
        .output()
        .unwrap();
    assert_exit(&json, 0);
    let status: Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(status["state"], json!("failed"));
    assert_eq!(
        status["steps"][1]["message"],
        json!("command exited with code 4")
    );
}

/// The host sets every variable ocflow gives a command step (`engine/command_env.rs`): among
/// them bytecode caches off, as files in the view change within a second at the same size when
/// a step runs again, and a cache keyed on seconds and size would run stale code.
#[test]
fn a_command_step_never_writes_python_bytecode() {
    let sandbox = Sandbox::new(&[]);
    let flow = json!([{"id": "c", "operation": "execute_shell_command",
        "params": {"command": "printf '%s' \"$PYTHONDONTWRITEBYTECODE\""}}]);
    assert_exit(&sandbox.run(&flow, "t"), 0);
    assert_eq!(sandbox.result("t", "c")["stdout"], json!("1"));
}

#[test]
fn a_command_that_outlives_its_timeout_is_killed_with_its_children() {
    // Both sandboxes: namespaces (the child dies with its PID namespace) and Landlock alone
    // (the child dies with its process group).
    for (namespaces, seconds) in [("true", "301"), ("false", "302")] {
        let sandbox = Sandbox::new(&[]);
        sandbox.configure_sandbox(&format!("namespaces = {namespaces}"));
        let flow = json!([{"id": "hang", "operation": "execute_shell_command",
            "params": {"command": format!("sleep {seconds} & sleep 300"), "timeout_seconds": 1}}]);
        let started = Instant::now();
        let output = sandbox.run(&flow, "t");
        assert_exit(&output, 1);
        // Liveness only (the command sleeps 300 s): how soon past its timeout a command ends is
        // measured by scripts/bench-responsiveness.
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the timeout did not end the command: {:?}",
            started.elapsed()
        );
        let result = sandbox.result("t", "hang");
        assert_eq!(result["timed_out"], json!(true));
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            !running(&["sleep", seconds]),
            "the background child still runs"
        );
    }
}

#[test]
fn a_command_printing_megabytes_is_capped() {
    let sandbox = Sandbox::new(&[]);
    let plan = sandbox.flow(
        &json!([{"id": "flood", "operation": "execute_shell_command",
                 "params": {"command": "yes | head -c 5000000"}}]),
    );
    let output = sandbox
        .ocflow()
        .args([
            "run",
            "--max-output-bytes",
            "100000",
            "--task-id",
            "t",
            "--plan",
        ])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let result = sandbox.result("t", "flood");
    assert_eq!(result["truncated"], json!(true));
    let kept = result["stdout"].as_str().unwrap();
    assert!(kept.len() <= 100_200, "kept {} bytes", kept.len());
    assert!(kept.contains("bytes truncated"), "the cut is marked");
}

#[test]
fn run_without_an_endpoint_says_what_to_set() {
    let sandbox = Sandbox::new(&[]);
    let output = sandbox
        .ocflow()
        .args(["run", "do something"])
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("no LLM endpoint is configured: set OCFLOW_BASE_URL"),
        "{}",
        stderr(&output)
    );
    assert!(!sandbox.workspace.exists());
    let output = sandbox.ocflow().arg("run").output().unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("--plan FLOW.json"),
        "{}",
        stderr(&output)
    );
    let plan = sandbox.flow(&json!([{"id": "m", "operation": "modify_code",
        "params": {"file_path": "a.py", "instructions": "x"}}]));
    let output = sandbox
        .ocflow()
        .args(["run", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output)
            .contains("step m (modify_code) needs an LLM, and no LLM endpoint is configured"),
        "{}",
        stderr(&output)
    );
    assert!(!sandbox.workspace.exists());
}

#[test]
fn a_missing_repository_or_task_is_a_clear_usage_error() {
    let sandbox = Sandbox::new(&[]);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ocflow"))
        .args(["--repo", "/no/such/dir", "status"])
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("--repo /no/such/dir"),
        "{}",
        stderr(&output)
    );
    let output = sandbox.ocflow().args(["status", "ghost"]).output().unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("no task \"ghost\""),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_new_workspace_gets_the_template_and_its_settings_apply_below_flags() {
    let sandbox = Sandbox::new(&[]);
    let flow = json!([{"id": "flood", "operation": "execute_shell_command",
        "params": {"command": "yes | head -c 50000"}}]);
    assert_exit(&sandbox.run(&flow, "first"), 0);
    let template = std::fs::read_to_string(sandbox.workspace.join("ocflow.toml")).unwrap();
    assert!(
        template.contains("# max_output_bytes = 1048576"),
        "{template}"
    );
    assert_eq!(sandbox.result("first", "flood")["truncated"], json!(false));

    std::fs::write(
        sandbox.workspace.join("ocflow.toml"),
        "[limits]\nmax_output_bytes = 1000\n",
    )
    .unwrap();
    assert_exit(&sandbox.run(&flow, "from_file"), 0);
    assert!(
        sandbox.result("from_file", "flood")["stdout"]
            .as_str()
            .unwrap()
            .len()
            < 1200
    );

    let plan = sandbox.flow(&flow);
    let output = sandbox
        .ocflow()
        .args([
            "run",
            "--max-output-bytes",
            "20000",
            "--task-id",
            "from_flag",
            "--plan",
        ])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let kept = sandbox.result("from_flag", "flood")["stdout"]
        .as_str()
        .unwrap()
        .len();
    assert!((19_000..21_000).contains(&kept), "kept {kept}");

    std::fs::write(
        sandbox.workspace.join("ocflow.toml"),
        "[limits]\nmax_output_byte = 1000\n",
    )
    .unwrap();
    let output = sandbox.ocflow().args(["status"]).output().unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("ocflow.toml") && stderr(&output).contains("max_output_byte"),
        "{}",
        stderr(&output)
    );
}

/// The task can come from stdin (`-`) or a file; an empty one is refused (`ocflow run -` used
/// to send "-" as the task).
#[test]
fn the_task_comes_from_stdin_or_a_file() {
    use super::fake_llm::{FakeLlm, chat};
    use std::io::Write;
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    // (Issue 37: a plan of reads alone delivers nothing and is asked again; this one answers.)
    let plan = json!({"deliverables": {"answer": "How many words are in a.txt?"},
        "steps": [{"id": "r", "operation": "analyze_code",
        "params": {"file_path": "a.txt", "query": "How many words?"}}]});
    let llm = FakeLlm::in_order(vec![chat(&plan.to_string()), chat(&plan.to_string())]);
    let mut child = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["plan", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"count the words in a.txt\nand say how many\n")
        .unwrap();
    drop(stdin);
    assert_exit(&child.wait_with_output().unwrap(), 0);
    let file = sandbox.root().join("task.md");
    std::fs::write(&file, "  read a.txt from a file  \n").unwrap();
    let from_file = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["plan", "--task-file"])
        .arg(&file)
        .output()
        .unwrap();
    assert_exit(&from_file, 0);
    // Not the question for the answer's evidence a question's plan is followed by (issue 37;
    // this test counted every request before it was asked).
    let asked: Vec<String> = llm
        .bodies_except_reproduction()
        .iter()
        .map(|b| b.to_string())
        .collect();
    assert!(
        asked[0].contains("count the words in a.txt\\nand say how many"),
        "{}",
        asked[0]
    );
    assert!(asked[1].contains("read a.txt from a file"), "{}", asked[1]);

    let empty = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "-"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_exit(&empty, 2);
    assert!(
        stderr(&empty).contains("the task from stdin is empty"),
        "{}",
        stderr(&empty)
    );
}

/// A task over 1 MiB is refused before anything is sent to the LLM, from stdin or a file, with
/// an error that says where a long specification belongs (a 52 MB task used to be sent whole).
#[test]
fn a_task_over_one_mebibyte_is_refused() {
    use super::fake_llm::{FakeLlm, chat};
    use std::io::Write;
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let llm = FakeLlm::in_order(vec![chat("{}")]);
    let big = "x".repeat(1024 * 1024 + 1);
    let mut child = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // The refusal may come before the whole task is written: a closed pipe is expected.
    let _ = stdin.write_all(big.as_bytes());
    drop(stdin);
    let from_stdin = child.wait_with_output().unwrap();
    assert_exit(&from_stdin, 2);
    let message = stderr(&from_stdin);
    assert!(message.contains("over the 1 MiB limit"), "{message}");
    assert!(message.contains("--task-file"), "{message}");
    assert!(message.contains("in a file in the repository"), "{message}");

    let file = sandbox.root().join("spec.md");
    std::fs::write(&file, &big).unwrap();
    let from_file = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["plan", "--task-file"])
        .arg(&file)
        .output()
        .unwrap();
    assert_exit(&from_file, 2);
    assert!(
        stderr(&from_file).contains("over the 1 MiB limit"),
        "{}",
        stderr(&from_file)
    );
    assert!(llm.requests().is_empty(), "a refused task reached the LLM");

    // A flow file's task is held to the same limit.
    let flow = json!({"task": big, "steps": [{"id": "r", "operation": "read_file",
        "params": {"file_path": "a.txt"}}]});
    let from_flow = sandbox.run(&flow, "big");
    assert_exit(&from_flow, 2);
    assert!(
        stderr(&from_flow).contains("over the 1 MiB limit"),
        "{}",
        stderr(&from_flow)
    );

    // Exactly at the limit is a task like any other.
    std::fs::write(&file, "y".repeat(1024 * 1024)).unwrap();
    let at_limit = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["plan", "--task-file"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        !stderr(&at_limit).contains("1 MiB limit"),
        "{}",
        stderr(&at_limit)
    );
    let asked = llm.bodies();
    assert!(!asked.is_empty() && asked[0].to_string().contains(&"y".repeat(1024 * 1024)));
}

/// `--help` names the key's variables and keeps the global options apart; completions and the
/// manual page come from the same definition.
#[test]
fn help_completions_and_the_manual_page() {
    let sandbox = Sandbox::new(&[]);
    let help = sandbox.ocflow().arg("--help").output().unwrap();
    assert_exit(&help, 0);
    let text = stdout(&help);
    assert!(
        text.contains("OCFLOW_API_KEY (or OPENAI_API_KEY, LLM_API_KEY)"),
        "{text}"
    );
    let apply = sandbox.ocflow().args(["apply", "--help"]).output().unwrap();
    let text = stdout(&apply);
    let own = text.split("Global options:").next().unwrap();
    assert!(
        own.contains("--force") && !own.contains("--base-url"),
        "{text}"
    );
    for shell in ["bash", "zsh", "fish"] {
        let output = sandbox
            .ocflow()
            .args(["completions", shell])
            .output()
            .unwrap();
        assert_exit(&output, 0);
        assert!(stdout(&output).contains("resume"), "{shell}");
    }
    let man = sandbox.ocflow().arg("man").output().unwrap();
    assert_exit(&man, 0);
    assert!(stdout(&man).contains(".TH ocflow"), "{}", stdout(&man));
}

/// `ocflow list`: every task with its state; `diff --stat`: the files with their counts; a task
/// whose planning failed says so (it used to answer "flow.json: cannot read it").
#[test]
fn list_diff_stat_and_a_task_without_a_flow() {
    use super::fake_llm::{FakeLlm, status};
    let sandbox = Sandbox::new(&[("a.txt", "one\ntwo\n")]);
    let edit = json!([{"id": "w", "operation": "write_file",
        "params": {"file_path": "a.txt", "content": "one\nTWO\nthree\n"}}]);
    assert_exit(&sandbox.run(&edit, "edited"), 0);
    let boom = json!([{"id": "b", "operation": "execute_shell_command",
        "params": {"command": "exit 1"}}]);
    assert_exit(&sandbox.run(&boom, "broken"), 1);

    let list = sandbox.ocflow().arg("list").output().unwrap();
    assert_exit(&list, 0);
    let text = stdout(&list);
    let row = |id: &str| {
        text.lines()
            .find(|l| l.starts_with(id))
            .unwrap_or("")
            .to_string()
    };
    assert!(row("edited").contains("succeeded"), "{text}");
    assert!(row("broken").contains("failed"), "{text}");
    let json = sandbox.ocflow().args(["--json", "list"]).output().unwrap();
    let lines: Vec<Value> = stdout(&json)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|l| l["type"] == json!("task")));

    let stat = sandbox
        .ocflow()
        .args(["diff", "edited", "--stat"])
        .output()
        .unwrap();
    assert_exit(&stat, 0);
    let text = stdout(&stat);
    assert!(text.contains(" a.txt | +2 -1"), "{text}");
    assert!(
        text.contains("1 file(s) changed, 2 insertion(s)(+), 1 deletion(s)(-)"),
        "{text}"
    );

    let llm = FakeLlm::in_order(vec![status(401, "{\"error\": {\"message\": \"bad key\"}}")]);
    let planned = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "unplanned", "do something"])
        .output()
        .unwrap();
    assert_exit(&planned, 2);
    let output = sandbox
        .ocflow()
        .args(["diff", "unplanned"])
        .output()
        .unwrap();
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(
        err.contains("task unplanned has no flow (planning failed"),
        "{err}"
    );
    assert!(!err.contains("cannot read"), "{err}");
    // Resume plans it again (here without an LLM, which it then asks for).
    let output = sandbox
        .ocflow()
        .args(["resume", "unplanned"])
        .output()
        .unwrap();
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(err.contains("has no flow yet; planning it again"), "{err}");
    assert!(err.contains("no LLM endpoint is configured"), "{err}");
}

/// Task ids are short (the task's first word and three letters), and any unique beginning of
/// one names the task; an ambiguous one lists the candidates.
#[test]
fn short_task_ids_and_unique_prefixes() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    // (Issue 24: a flow for a task that asks for a change must do something: it writes.
    // Issue 37: and its write changes the file: one that wrote it back as it was delivered
    // nothing, and ends `no_change`.)
    let flow = json!({"task": "Refactor the greeting", "steps": [{"id": "r",
        "operation": "write_file", "params": {"file_path": "a.txt", "content": "b\n"}}]});
    let plan = sandbox.flow(&flow);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let output = sandbox
            .ocflow()
            .args(["--json", "run", "--plan"])
            .arg(&plan)
            .output()
            .unwrap();
        assert_exit(&output, 0);
        let started: Value = stdout(&output)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|e| e["type"] == json!("flow_started"))
            .unwrap();
        ids.push(started["task_id"].as_str().unwrap().to_string());
    }
    for id in &ids {
        assert!(id.starts_with("refactor-") && id.len() == 12, "{id}");
    }
    assert_ne!(ids[0], ids[1]);
    let unique = |id: &str, other: &str| {
        (1..=id.len())
            .map(|n| &id[..n])
            .find(|p| !other.starts_with(p))
            .unwrap()
            .to_string()
    };
    let prefix = unique(&ids[0], &ids[1]);
    let status = sandbox
        .ocflow()
        .args(["--json", "status", &prefix])
        .output()
        .unwrap();
    assert_exit(&status, 0);
    let status: Value = serde_json::from_str(&stdout(&status)).unwrap();
    assert_eq!(status["task_id"], json!(ids[0]));
    let ambiguous = sandbox
        .ocflow()
        .args(["status", "refactor"])
        .output()
        .unwrap();
    assert_exit(&ambiguous, 2);
    let err = stderr(&ambiguous);
    assert!(
        err.contains("begins several task ids") && err.contains(&ids[1]),
        "{err}"
    );
}

/// `ocflow doctor` says what this machine gives ocflow, each check with its fix: with an
/// endpoint that answers, nothing fails (exit 0) and the key's source is named, never the key;
/// without an endpoint, the endpoint check fails with the fix (exit 1).
#[test]
fn doctor_checks_the_machine_and_the_endpoint() {
    use super::fake_llm::{FakeLlm, chat};
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let llm = FakeLlm::in_order(vec![chat("OK")]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["--json", "doctor"])
        .env("OCFLOW_API_KEY", "sk-doctor-secret-0123456789")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert!(!stdout(&output).contains("sk-doctor-secret"));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let check = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} check in {report}"))
    };
    for name in [
        "python library",
        "syntax checks",
        "bubblewrap",
        "namespaces",
        "landlock",
        "udp",
    ] {
        assert_ne!(check(name)["verdict"], json!("fail"), "{name}: {report}");
    }
    assert_eq!(check("endpoint")["verdict"], json!("ok"), "{report}");
    assert!(
        check("endpoint")["found"]
            .as_str()
            .unwrap()
            .contains("model m answered")
    );
    assert_eq!(check("api key")["found"], json!("from OCFLOW_API_KEY"));
    assert_eq!(llm.requests().len(), 1, "one tiny request");

    let without = sandbox.ocflow().arg("doctor").output().unwrap();
    assert_exit(&without, 1);
    let text = stdout(&without);
    assert!(text.contains("✗ endpoint"), "{text}");
    assert!(text.contains("fix: set OCFLOW_BASE_URL"), "{text}");
}

/// Issue 25: `list` counts in FILES only what the diff shows (not what git ignores), and AGE is
/// the time since the run, not since the last write of its status (an apply, say).
#[test]
fn list_counts_the_diffs_files_and_ages_from_the_run() {
    let sandbox = Sandbox::new(&[(".gitignore", "build/\n"), ("a.txt", "a\n")]);
    let flow = json!({"task": "build it", "steps": [{"id": "b",
        "operation": "execute_shell_command", "params": {"command":
        "mkdir -p build && echo x > build/out.bin && echo y > build/more.bin && \
         echo b > a.txt"}}]});
    assert_exit(&sandbox.run(&flow, "t"), 0);
    // The run ended two hours ago; its status was written just now.
    let path = sandbox.task_dir("t").join("flow_status.json");
    let mut status: Value = read_json(&path);
    let earlier = (chrono::Utc::now() - chrono::Duration::hours(2)).to_rfc3339();
    status["created_at"] = json!(earlier);
    status["finished_at"] = json!(earlier);
    std::fs::write(&path, serde_json::to_string(&status).unwrap()).unwrap();
    let list = sandbox.ocflow().arg("list").output().unwrap();
    assert_exit(&list, 0);
    let text = stdout(&list);
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("t "))
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(row.get(2..5), Some(&["2", "h", "1"][..]), "{text}");
}

/// Issue 38: in a linked worktree (`.git` is a file naming the repository's git directory) the
/// default workspace `.ocflow/` was not kept out of git: `git status` showed it, and a plain
/// `git add -A` took it in. The repository's common `info/exclude` now lists it.
#[test]
fn the_default_workspace_is_kept_out_of_git_in_a_linked_worktree() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let git = |dir: &std::path::Path, args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&sandbox.repo, &["init", "-q"]);
    git(&sandbox.repo, &["add", "-A"]);
    git(&sandbox.repo, &["commit", "-qm", "start"]);
    let worktree = sandbox.root().join("wt");
    git(
        &sandbox.repo,
        &["worktree", "add", "-q", worktree.to_str().unwrap()],
    );
    let flow = json!([{"id": "w", "operation": "write_file",
        "params": {"file_path": "b.txt", "content": "b\n"}}]);
    let plan = sandbox.flow(&flow);
    let output = sandbox
        .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
        .arg("--repo")
        .arg(&worktree)
        .args(["run", "--task-id", "t", "--plan"])
        .arg(&plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert!(worktree.join(".ocflow/t/flow.json").is_file());
    let seen = git(
        &worktree,
        &["status", "--porcelain", "--untracked-files=all"],
    );
    assert!(!seen.contains(".ocflow"), "{seen}");
}

/// Issue 38: `--repo /etc` ran (its snapshot held a copy of /etc/shadow, and `apply` would write
/// there). The system's own directories are refused as a repository, nothing made.
#[test]
fn a_system_directory_is_refused_as_a_repository() {
    let sandbox = Sandbox::new(&[]);
    let plan = sandbox.flow(&json!([{"id": "w", "operation": "write_file",
        "params": {"file_path": "x.txt", "content": "x\n"}}]));
    for dir in ["/etc", "/etc/ssl", "/", "/usr"] {
        let output = sandbox
            .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
            .args(["--repo", dir, "--workspace"])
            .arg(&sandbox.workspace)
            .args(["run", "--task-id", "t", "--plan"])
            .arg(&plan)
            .output()
            .unwrap();
        assert_exit(&output, 2);
        assert!(
            stderr(&output).contains("is not a project's repository"),
            "{dir}: {}",
            stderr(&output)
        );
        assert!(!sandbox.workspace.exists(), "{dir}");
    }
}
