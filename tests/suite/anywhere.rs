//! A task id (or a task directory) names its task from any directory, through the user's task
//! index; `ocflow list --all` shows every repository's tasks; `run --detach` + `wait`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::*;

fn edit_flow(file: &str) -> Value {
    json!({"task": "write a file", "steps": [{"id": "w", "operation": "write_file",
        "params": {"file_path": file, "content": "new\n"}}]})
}

/// `ocflow` with the test's environment and no `--repo` or `--workspace`, started in `dir`.
fn ocflow_in(sandbox: &Sandbox, dir: &Path) -> Command {
    let mut command = sandbox.command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"));
    command.current_dir(dir);
    command
}

/// A directory beside the repository that is in no repository.
fn elsewhere(sandbox: &Sandbox) -> PathBuf {
    let dir = sandbox.root().join("elsewhere");
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn json_lines(output: &std::process::Output) -> Vec<Value> {
    stdout(output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn status_diff_and_apply_by_id_or_directory_from_an_unrelated_directory() {
    let sandbox = Sandbox::new(&[("a.txt", "old\n")]);
    let output = sandbox.run(&edit_flow("a.txt"), "far-away");
    assert_exit(&output, 0);
    let away = elsewhere(&sandbox);

    let status = ocflow_in(&sandbox, &away)
        .args(["--json", "status", "far-away"])
        .output()
        .unwrap();
    assert_exit(&status, 0);
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["state"], json!("succeeded"));
    // A unique beginning of the id, and the task directory itself, name it too.
    let by_prefix = ocflow_in(&sandbox, &away)
        .args(["--json", "status", "far"])
        .output()
        .unwrap();
    assert_exit(&by_prefix, 0);
    let by_dir = ocflow_in(&sandbox, &away)
        .args(["--json", "diff"])
        .arg(sandbox.task_dir("far-away"))
        .output()
        .unwrap();
    assert_exit(&by_dir, 0);
    let diff = ocflow_in(&sandbox, &away)
        .args(["--json", "diff", "far-away"])
        .output()
        .unwrap();
    assert_exit(&diff, 0);
    assert_eq!(json_lines(&diff), json_lines(&by_dir));
    assert_eq!(
        json_lines(&diff)[0]["files"],
        json!([{"path": "a.txt", "kind": "modified"}])
    );
    let apply = ocflow_in(&sandbox, &away)
        .args(["apply", "far-away"])
        .output()
        .unwrap();
    assert_exit(&apply, 0);
    assert_eq!(
        fs::read_to_string(sandbox.repo.join("a.txt")).unwrap(),
        "new\n"
    );
    for command in [["report", "far-away"], ["undo", "far-away"]] {
        let output = ocflow_in(&sandbox, &away).args(command).output().unwrap();
        assert_exit(&output, 0);
    }
    assert_eq!(
        fs::read_to_string(sandbox.repo.join("a.txt")).unwrap(),
        "old\n"
    );

    // The index holds ids and paths, nothing of the task's words.
    let index = fs::read_to_string(sandbox.state_home().join("ocflow/tasks.json")).unwrap();
    assert!(index.contains("far-away"), "{index}");
    assert!(!index.contains("write a file"), "{index}");
}

#[test]
fn list_all_ambiguous_ids_stale_entries_and_the_current_repository_first() {
    let sandbox = Sandbox::new(&[("a.txt", "old\n")]);
    let away = elsewhere(&sandbox);
    // A second repository, a git one with its default workspace, holding the same task id.
    let second = sandbox.root().join("second");
    fs::create_dir_all(&second).unwrap();
    fs::write(second.join("b.txt"), "b\n").unwrap();
    let init = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&second)
        .output()
        .unwrap();
    assert!(init.status.success());
    assert_exit(&sandbox.run(&edit_flow("a.txt"), "twin"), 0);
    let plan = sandbox.flow(&edit_flow("b.txt"));
    let run = ocflow_in(&sandbox, &second)
        .args(["run", "--task-id", "twin", "--plan"])
        .arg(&plan)
        .output()
        .unwrap();
    assert_exit(&run, 0);

    let listed = ocflow_in(&sandbox, &away)
        .args(["--json", "list", "--all"])
        .output()
        .unwrap();
    assert_exit(&listed, 0);
    let mut repos: Vec<String> = json_lines(&listed)
        .iter()
        .map(|line| {
            assert_eq!(line["task_id"], json!("twin"));
            assert_eq!(line["state"], json!("succeeded"));
            line["repo"].as_str().unwrap().to_string()
        })
        .collect();
    repos.sort();
    assert_eq!(
        repos,
        [
            sandbox.repo.display().to_string(),
            second.display().to_string()
        ]
    );

    // From elsewhere the id is ambiguous: refused, naming both repositories.
    let ambiguous = ocflow_in(&sandbox, &away)
        .args(["status", "twin"])
        .output()
        .unwrap();
    assert_exit(&ambiguous, 2);
    let said = stderr(&ambiguous);
    assert!(said.contains(&sandbox.repo.display().to_string()), "{said}");
    assert!(said.contains(&second.display().to_string()), "{said}");
    // Inside the second repository, its own task wins.
    let own = ocflow_in(&sandbox, &second)
        .args(["--json", "diff", "twin"])
        .output()
        .unwrap();
    assert_exit(&own, 0);
    assert_eq!(
        json_lines(&own)[0]["files"],
        json!([{"path": "b.txt", "kind": "modified"}])
    );

    // A deleted task directory is dropped from the index: the id is no longer ambiguous.
    fs::remove_dir_all(second.join(".ocflow/twin")).unwrap();
    let single = ocflow_in(&sandbox, &away)
        .args(["--json", "status", "twin"])
        .output()
        .unwrap();
    assert_exit(&single, 0);
    let listed = ocflow_in(&sandbox, &away)
        .args(["--json", "list", "--all"])
        .output()
        .unwrap();
    assert_eq!(json_lines(&listed).len(), 1);
    let index = fs::read_to_string(sandbox.state_home().join("ocflow/tasks.json")).unwrap();
    assert!(!index.contains(&second.display().to_string()), "{index}");
}

#[test]
fn next_lines_name_commands_that_work_anywhere() {
    let sandbox = Sandbox::new(&[("a.txt", "old\n")]);
    let output = sandbox.run(&edit_flow("a.txt"), "next-lines");
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("ocflow diff next-lines "),
        "{}",
        stdout(&output)
    );
    // Without the index, the lines carry the repository and the workspace.
    let plan = sandbox.flow(&edit_flow("a.txt"));
    let off = sandbox
        .ocflow()
        .env("OCFLOW_TASK_INDEX", "off")
        .args(["run", "--task-id", "unindexed", "--plan"])
        .arg(&plan)
        .output()
        .unwrap();
    assert_exit(&off, 0);
    let text = stdout(&off);
    let expected = format!(
        "ocflow diff unindexed --repo {} --workspace {}",
        sandbox.repo.display(),
        sandbox.workspace.display()
    );
    assert!(text.contains(&expected), "{text}");
    let index = fs::read_to_string(sandbox.state_home().join("ocflow/tasks.json")).unwrap();
    assert!(!index.contains("unindexed"), "{index}");
}

/// A flow whose command step waits until `marker` exists (at most 60 s).
fn gated_flow(marker: &Path, exit: u8) -> Value {
    json!({"task": "gated", "steps": [
        {"id": "wait", "operation": "execute_shell_command",
         "params": {"command": format!(
            "i=0; while [ ! -f {0} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; \
             echo done > waited.txt; exit {exit}", marker.display())}}
    ]})
}

fn started_task_id(output: &std::process::Output) -> String {
    let lines = json_lines(output);
    assert_eq!(lines.len(), 1, "{}", stdout(output));
    assert_eq!(lines[0]["type"], json!("flow_started"));
    lines[0]["task_id"].as_str().unwrap().to_string()
}

#[test]
fn a_detached_run_returns_at_once_and_wait_gets_its_exit_code() {
    let sandbox = Sandbox::new(&[("a.txt", "old\n")]);
    let marker = sandbox.shared().join("go");
    let plan = sandbox.flow(&gated_flow(&marker, 0));
    let started = Instant::now();
    let output = sandbox
        .ocflow()
        .env("LLM_API_KEY", "sk-detached-secret")
        .args(["--json", "run", "--detach", "--plan"])
        .arg(&plan)
        .output()
        .unwrap();
    let took = started.elapsed();
    assert_exit(&output, 0);
    assert!(took < Duration::from_secs(3), "run --detach took {took:?}");
    let id = started_task_id(&output);
    let task_dir = sandbox.task_dir(&id);
    // The key went through a pipe: neither the detached run's argv nor its environment has it.
    let pid = fs::read_to_string(task_dir.join("detached.pid")).unwrap();
    let proc_dir = PathBuf::from(format!("/proc/{}", pid.trim()));
    let cmdline = fs::read(proc_dir.join("cmdline")).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains("sk-detached"));
    if let Ok(environ) = fs::read(proc_dir.join("environ")) {
        assert!(!String::from_utf8_lossy(&environ).contains("sk-detached"));
    }

    let away = elsewhere(&sandbox);
    let early = ocflow_in(&sandbox, &away)
        .args(["wait", &id, "--timeout", "0.5"])
        .output()
        .unwrap();
    assert_exit(&early, 124);
    // `status --follow` follows it too, from anywhere, once it has saved its status.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !task_dir.join("flow_status.json").is_file() {
        assert!(
            Instant::now() < deadline,
            "the detached run saved no status"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let follow = ocflow_in(&sandbox, &away)
        .args(["--json", "status", "--follow", &id])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    fs::write(&marker, "").unwrap();
    let waited = ocflow_in(&sandbox, &away)
        .args(["wait", &id, "--timeout", "60"])
        .output()
        .unwrap();
    assert_exit(&waited, 0);
    let followed = follow.wait_with_output().unwrap();
    assert_exit(&followed, 0);
    let last = stdout(&followed).lines().last().unwrap().to_string();
    assert_eq!(
        serde_json::from_str::<Value>(&last).unwrap()["state"],
        json!("succeeded")
    );
    assert_eq!(sandbox.status(&id)["state"], json!("succeeded"));
    let log = fs::read_to_string(task_dir.join("detached.log")).unwrap();
    assert!(log.contains("\"flow_finished\""), "{log}");

    // A failing flow: `wait` exits 1, as the run did.
    let failing = sandbox.flow(&gated_flow(&marker, 3));
    let output = sandbox
        .ocflow()
        .args(["--json", "run", "--detach", "--no-recovery", "--plan"])
        .arg(&failing)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let id = started_task_id(&output);
    let waited = ocflow_in(&sandbox, &away)
        .args(["wait", &id])
        .output()
        .unwrap();
    assert_exit(&waited, 1);
}

#[test]
fn a_detached_run_survives_a_hang_up_of_its_callers_process_group() {
    use std::os::unix::process::CommandExt;
    let sandbox = Sandbox::new(&[("a.txt", "old\n")]);
    let marker = sandbox.shared().join("go");
    let plan = sandbox.flow(&gated_flow(&marker, 0));
    let id_file = sandbox.root().join("id");
    let lingering = sandbox.root().join("lingering");
    // A terminal's shell: it starts the detached run, then lingers until it is hung up on.
    // (Hung up only once it lingers: a hang-up while `run --detach` itself was still ending
    // raced with the shell under load, and the shell sometimes outlived it.)
    let mut shell = sandbox.command_like_ocflow("sh");
    shell
        .arg("-c")
        .arg(format!(
            "\"$0\" --repo {} --workspace {} run --detach --task-id hung-up --plan {} > {}; \
             touch {}; sleep 60",
            sandbox.repo.display(),
            sandbox.workspace.display(),
            plan.display(),
            id_file.display(),
            lingering.display()
        ))
        .arg(env!("CARGO_BIN_EXE_ocflow"))
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // A terminal's shell dies of a hang-up; one started under `nohup` (a CI script run that
    // way) inherits SIGHUP ignored and would outlive it: the default is put back.
    // SAFETY: signal(2) is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        shell.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut shell = shell.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while fs::read_to_string(&id_file).unwrap_or_default().trim() != "hung-up"
        || !lingering.exists()
    {
        assert!(Instant::now() < deadline, "the detached run never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    // `sleep` is started once `touch` is done: let the shell reach it.
    std::thread::sleep(Duration::from_millis(200));
    let group = rustix::process::Pid::from_raw(shell.id() as i32).unwrap();
    rustix::process::kill_process_group(group, rustix::process::Signal::HUP).unwrap();
    let status = shell.wait().unwrap();
    assert!(!status.success(), "the shell outlived its hang-up");
    fs::write(&marker, "").unwrap();
    let waited = ocflow_in(&sandbox, &elsewhere(&sandbox))
        .args(["wait", "hung-up", "--timeout", "60"])
        .output()
        .unwrap();
    assert_exit(&waited, 0);
    assert_eq!(sandbox.status("hung-up")["state"], json!("succeeded"));
}
