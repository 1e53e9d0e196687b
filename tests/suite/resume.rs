//! Crashes, interrupts, failures and concurrent runs: the state stays true and `resume`
//! finishes the work without redoing what was done.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::*;

/// A shell command that notes its pid next to `marker`, waits until `marker` exists (at most
/// 60 s), then writes `file`.
fn gated(marker: &Path, file: &str) -> String {
    format!(
        "echo $$ > {}.pid; i=0; while [ ! -f {} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); \
         done; echo done > {file}",
        marker.display(),
        marker.display()
    )
}

fn gated_flow(marker: &Path) -> Value {
    json!({"task": "gated", "steps": [
        {"id": "first", "operation": "write_file",
         "params": {"file_path": "first.txt", "content": "1\n"}},
        {"id": "wait", "operation": "execute_shell_command", "depends_on": "first",
         "params": {"command": gated(marker, "waited.txt")}},
        {"id": "last", "operation": "write_file", "depends_on": "wait",
         "params": {"file_path": "last.txt", "content": "3\n"}}
    ]})
}

fn spawn_run(sandbox: &Sandbox, flow: &Value, task_id: &str) -> Child {
    let plan = sandbox.flow(flow);
    sandbox
        .ocflow()
        .args(["run", "--task-id", task_id, "--plan"])
        .arg(plan)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until the status shows `step` running (as `ocflow status` tells it: the status file
/// with the journal's later events replayed).
fn wait_until_running(sandbox: &Sandbox, task_id: &str, step: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let output = sandbox
            .ocflow()
            .args(["--json", "status", task_id])
            .output()
            .unwrap();
        if let Ok(status) = serde_json::from_slice::<Value>(&output.stdout)
            && status["steps"].as_array().is_some_and(|steps| {
                steps
                    .iter()
                    .any(|s| s["id"] == step && s["status"] == "running")
            })
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("step {step} never started running");
}

/// Waits until `path` exists with content (the command writes it once it has started).
fn wait_for_file(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(text) = std::fs::read_to_string(path)
            && !text.trim().is_empty()
        {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{} never appeared", path.display());
}

fn attempts(sandbox: &Sandbox, task_id: &str) -> Vec<(String, String, u64)> {
    sandbox.status(task_id)["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_string(),
                s["status"].as_str().unwrap().to_string(),
                s["attempts"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn sigkill_during_a_step_then_resume_finishes_without_redoing_work() {
    let reference = Sandbox::new(&[("a.txt", "a\n")]);
    let marker = reference.shared().join("marker");
    std::fs::write(&marker, "").unwrap();
    assert_exit(&reference.run(&gated_flow(&marker), "t"), 0);

    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    // Without namespaces a killed ocflow's command goes on running; resume must stop it.
    // (With them it dies with ocflow: see the next test.)
    sandbox.configure_sandbox("namespaces = false");
    let marker = sandbox.shared().join("marker");
    let mut child = spawn_run(&sandbox, &gated_flow(&marker), "t");
    wait_until_running(&sandbox, "t", "wait");
    wait_for_file(&marker.with_extension("pid"));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(
        attempts(&sandbox, "t"),
        vec![
            ("first".into(), "succeeded".into(), 1),
            ("wait".into(), "running".into(), 1),
            ("last".into(), "pending".into(), 0)
        ]
    );

    // Following a flow whose ocflow is gone does not wait forever.
    let follow = sandbox
        .ocflow()
        .args(["status", "--follow", "t"])
        .output()
        .unwrap();
    assert_exit(&follow, 1);
    assert!(
        stderr(&follow).contains("task t is not running (its ocflow stopped)"),
        "{}",
        stderr(&follow)
    );

    // The killed run's command is still waiting (it runs in its own session): resume stops it.
    // It is paused first so that it cannot finish on its own once the marker exists.
    let orphan = wait_for_file(&marker.with_extension("pid"))
        .trim()
        .to_string();
    assert!(std::path::Path::new(&format!("/proc/{orphan}")).exists());
    send_signal(orphan.parse().unwrap(), "STOP");
    // A person's shell looking around in the view is not ocflow's to stop.
    let mut bystander = std::process::Command::new("sleep")
        .arg("30")
        .current_dir(sandbox.task_dir("t").join("_view"))
        .spawn()
        .unwrap();
    std::fs::write(&marker, "").unwrap();
    let output = sandbox.ocflow().arg("resume").output().unwrap();
    assert!(
        bystander.try_wait().unwrap().is_none(),
        "resume killed a process it did not start"
    );
    bystander.kill().unwrap();
    bystander.wait().unwrap();
    assert_exit(&output, 0);
    assert!(
        stderr(&output).contains("stopped 1 command(s) left running in this task"),
        "{}",
        stderr(&output)
    );
    let state = std::fs::read_to_string(format!("/proc/{orphan}/stat")).unwrap_or_default();
    assert!(
        state.is_empty() || state.contains(") Z "),
        "the orphan {orphan} still runs: {state}"
    );
    assert_eq!(
        attempts(&sandbox, "t"),
        vec![
            ("first".into(), "succeeded".into(), 1),
            ("wait".into(), "succeeded".into(), 2),
            ("last".into(), "succeeded".into(), 1)
        ]
    );
    assert_eq!(
        tree(&sandbox.task_dir("t").join("final_output")),
        tree(&reference.task_dir("t").join("final_output"))
    );
    assert_eq!(
        text_tree(&sandbox.task_dir("t").join("final_output")).len(),
        3
    );
    assert_eq!(tree(&sandbox.repo).len(), 1, "the repository is untouched");
}

#[test]
fn with_namespaces_a_killed_ocflow_takes_its_commands_with_it() {
    if !require(Component::Bubblewrap) {
        return;
    }
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let marker = sandbox.shared().join("marker");
    let mut child = spawn_run(&sandbox, &gated_flow(&marker), "t");
    wait_until_running(&sandbox, "t", "wait");
    wait_for_file(&marker.with_extension("pid"));
    let command = gated(&marker, "waited.txt");
    assert!(running(&["/bin/sh", "-c", &command]));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while running(&["/bin/sh", "-c", &command]) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !running(&["/bin/sh", "-c", &command]),
        "the command outlived ocflow"
    );
    std::fs::write(&marker, "").unwrap();
    let output = sandbox.ocflow().arg("resume").output().unwrap();
    assert_exit(&output, 0);
    assert_eq!(
        attempts(&sandbox, "t"),
        vec![
            ("first".into(), "succeeded".into(), 1),
            ("wait".into(), "succeeded".into(), 2),
            ("last".into(), "succeeded".into(), 1)
        ]
    );
}

#[test]
fn sigterm_saves_the_state_exits_130_and_resume_continues() {
    let sandbox = Sandbox::new(&[]);
    let marker = sandbox.shared().join("marker");
    let child = spawn_run(&sandbox, &gated_flow(&marker), "t");
    wait_until_running(&sandbox, "t", "wait");
    let started = Instant::now();
    send_signal(child.id(), "TERM");
    let output = child.wait_with_output().unwrap();
    assert_exit(&output, 130);
    // Liveness only (the command waits for a marker that never comes): how soon a signal
    // ends a run is measured by scripts/bench-responsiveness.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the interrupt took {:?}",
        started.elapsed()
    );
    assert!(
        stderr(&output).contains("ocflow resume t"),
        "{}",
        stderr(&output)
    );
    assert_eq!(sandbox.status("t")["state"], json!("interrupted"));
    assert_eq!(sandbox.step_status("t", "wait")["status"], json!("pending"));

    std::fs::write(&marker, "").unwrap();
    assert_exit(&sandbox.ocflow().args(["resume", "t"]).output().unwrap(), 0);
    assert_eq!(sandbox.status("t")["state"], json!("succeeded"));
    assert_eq!(sandbox.step_status("t", "first")["attempts"], json!(1));
}

#[test]
fn any_stop_signal_through_a_wrapper_stops_the_commands_and_saves_the_state() {
    // `timeout 60 ocflow …` forwards the signal it gets to ocflow; with or without namespaces,
    // and for INT, TERM and HUP alike, the step's command must stop and the state be saved.
    for (namespaces, signal) in [
        ("true", "INT"),
        ("false", "INT"),
        ("false", "TERM"),
        ("false", "HUP"),
    ] {
        let sandbox = Sandbox::new(&[]);
        sandbox.configure_sandbox(&format!("namespaces = {namespaces}"));
        let marker = sandbox.shared().join("marker");
        let plan = sandbox.flow(&gated_flow(&marker));
        let template = sandbox.ocflow();
        let mut wrapper = sandbox.command_like_ocflow("timeout");
        wrapper
            .arg("60")
            .arg(template.get_program())
            .args(template.get_args());
        let child = wrapper
            .args(["run", "--task-id", "t", "--plan"])
            .arg(plan)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_until_running(&sandbox, "t", "wait");
        wait_for_file(&marker.with_extension("pid"));
        let command = gated(&marker, "waited.txt");
        assert!(running(&["/bin/sh", "-c", &command]));
        send_signal(child.id(), signal);
        let output = child.wait_with_output().unwrap();
        assert_exit(&output, 130);
        let deadline = Instant::now() + Duration::from_secs(5);
        while running(&["/bin/sh", "-c", &command]) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            !running(&["/bin/sh", "-c", &command]),
            "SIG{signal} with namespaces = {namespaces}: the command goes on"
        );
        assert_eq!(
            sandbox.status("t")["state"],
            json!("interrupted"),
            "SIG{signal}"
        );
    }
}

/// Sends a signal with the `kill` command.
fn send_signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_second_run_or_resume_of_a_running_task_is_refused() {
    let sandbox = Sandbox::new(&[]);
    let marker = sandbox.shared().join("marker");
    let child = spawn_run(&sandbox, &gated_flow(&marker), "t");
    wait_until_running(&sandbox, "t", "wait");

    let second = sandbox.ocflow().args(["resume", "t"]).output().unwrap();
    assert_exit(&second, 2);
    assert!(
        stderr(&second).contains("task t is locked by another ocflow run"),
        "{}",
        stderr(&second)
    );
    let third = sandbox.run(&gated_flow(&marker), "t");
    assert_exit(&third, 2);
    assert!(
        stderr(&third).contains("task t already exists"),
        "{}",
        stderr(&third)
    );

    std::fs::write(&marker, "").unwrap();
    let first = child.wait_with_output().unwrap();
    assert_exit(&first, 0);
    assert_eq!(sandbox.step_status("t", "wait")["attempts"], json!(1));
}

#[test]
fn concurrent_runs_of_one_task_let_exactly_one_proceed() {
    let sandbox = Sandbox::new(&[]);
    let marker = sandbox.shared().join("marker");
    std::fs::write(&marker, "").unwrap();
    let children: Vec<Child> = (0..4)
        .map(|_| spawn_run(&sandbox, &gated_flow(&marker), "same"))
        .collect();
    let mut codes: Vec<i32> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap().status.code().unwrap())
        .collect();
    codes.sort();
    assert_eq!(codes, vec![0, 2, 2, 2]);
    assert_eq!(sandbox.status("same")["state"], json!("succeeded"));
}

#[test]
fn resume_stops_at_a_failed_step_unless_asked_to_retry_it() {
    let sandbox = Sandbox::new(&[]);
    let marker = sandbox.shared().join("marker");
    let flow = json!({"task": "retry", "steps": [
        {"id": "check", "operation": "execute_shell_command",
         "params": {"command": format!("test -f {}", marker.display())}},
        {"id": "after", "operation": "write_file", "depends_on": "check",
         "params": {"file_path": "after.txt", "content": "ok"}}
    ]});
    assert_exit(&sandbox.run(&flow, "t"), 1);
    let refused = sandbox.ocflow().args(["resume", "t"]).output().unwrap();
    assert_exit(&refused, 1);
    assert!(
        stderr(&refused).contains("--retry-failed"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(sandbox.step_status("t", "check")["attempts"], json!(1));

    std::fs::write(&marker, "").unwrap();
    assert_exit(
        &sandbox
            .ocflow()
            .args(["resume", "t", "--retry-failed"])
            .output()
            .unwrap(),
        0,
    );
    assert_eq!(
        attempts(&sandbox, "t"),
        vec![
            ("check".into(), "succeeded".into(), 2),
            ("after".into(), "succeeded".into(), 1)
        ]
    );
}

#[test]
fn a_status_file_of_an_unknown_version_or_shape_is_refused() {
    let sandbox = Sandbox::new(&[]);
    let flow = json!([{"id": "w", "operation": "write_file",
        "params": {"file_path": "x", "content": "x"}}]);
    let marker_flow =
        json!([{"id": "w", "operation": "execute_shell_command", "params": {"command": "false"}}]);
    assert_exit(&sandbox.run(&flow, "done"), 0);
    assert_exit(&sandbox.run(&marker_flow, "t"), 1);
    let path = sandbox.task_dir("t").join("flow_status.json");
    let mut status = sandbox.status("t");
    status["version"] = json!(99);
    std::fs::write(&path, status.to_string()).unwrap();
    for args in [vec!["resume", "t", "--retry-failed"], vec!["status", "t"]] {
        let output = sandbox.ocflow().args(&args).output().unwrap();
        assert_exit(&output, 2);
        assert!(
            stderr(&output).contains("status format version 99 is not supported"),
            "{}",
            stderr(&output)
        );
    }
    std::fs::write(&path, "{\"version\": 1, \"steps\": \"nonsense\"}").unwrap();
    let output = sandbox
        .ocflow()
        .args(["resume", "t", "--retry-failed"])
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("edited or damaged outside ocflow"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn repeated_kills_at_random_moments_end_with_the_same_files_and_no_finished_step_run_again() {
    let mut steps = Vec::new();
    for i in 0..10 {
        let deps: Vec<String> = if i == 0 {
            vec![]
        } else {
            vec![format!("s{}", i - 1)]
        };
        if i % 2 == 0 {
            steps.push(
                json!({"id": format!("s{i}"), "operation": "write_file", "depends_on": deps,
                       "params": {"file_path": format!("f{i}.txt"), "content": format!("{i}\n")}}),
            );
        } else {
            let command = format!(
                "sleep 0.05; cat f{}.txt > g{i}.txt; echo {i} >> g{i}.txt",
                i - 1
            );
            steps.push(
                json!({"id": format!("s{i}"), "operation": "execute_shell_command",
                       "depends_on": deps, "params": {"command": command}}),
            );
        }
    }
    let flow = Value::Array(steps);
    let reference = Sandbox::new(&[("a.txt", "a\n")]);
    assert_exit(&reference.run(&flow, "t"), 0);

    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let plan = sandbox.flow(&flow);
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut finished_before: Vec<(String, u64)> = Vec::new();
    let mut first = true;
    for round in 0..30u64 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // Later rounds wait longer, and the last ones are not killed at all, so the flow ends
        // even on a slow machine where ocflow needs long to start.
        let delay = Duration::from_millis(30 + seed % 250 + round * 40);
        let mut command = sandbox.ocflow();
        if first {
            command.args(["run", "--task-id", "t", "--plan"]).arg(&plan);
        } else {
            command.args(["resume", "t"]);
        }
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        if round < 20 {
            std::thread::sleep(delay);
            if child.try_wait().unwrap().is_none() {
                child.kill().unwrap();
            }
        }
        child.wait().unwrap();
        let task = sandbox.task_dir("t");
        if !task.join("flow_status.json").exists() && !task.join("flow.json").exists() {
            // Killed before the flow was written: the same run command starts it again.
            continue;
        }
        first = false;
        if !task.join("flow_status.json").exists() {
            continue; // flow.json without a status: resume takes it from there
        }
        let status = sandbox.status("t");
        // Steps recorded as finished must never run again.
        for (id, attempts) in &finished_before {
            assert_eq!(
                sandbox.step_status("t", id)["attempts"].as_u64().unwrap(),
                *attempts,
                "step {id} ran again"
            );
        }
        finished_before = status["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["status"] == "succeeded")
            .map(|s| {
                (
                    s["id"].as_str().unwrap().to_string(),
                    s["attempts"].as_u64().unwrap(),
                )
            })
            .collect();
        if status["state"] == "succeeded" {
            break;
        }
    }
    assert_eq!(
        sandbox.status("t")["state"],
        json!("succeeded"),
        "never finished"
    );
    assert_eq!(
        tree(&sandbox.task_dir("t").join("final_output")),
        tree(&reference.task_dir("t").join("final_output"))
    );
}

/// A succeeded step's directory deleted after the run (a damaged workspace): diff and apply
/// refuse, naming the step and what to do, and write nothing; resume runs the step again and
/// says so (it used to fail every time with a raw "No such file or directory", while apply
/// silently wrote the other files).
#[test]
fn a_step_whose_recorded_outputs_vanished_is_refused_by_apply_and_run_again_by_resume() {
    let sandbox = Sandbox::new(&[("keep.txt", "keep\n")]);
    let flow = json!([
        {"id": "a", "operation": "write_file", "params": {"file_path": "a.txt", "content": "a\n"}},
        {"id": "b", "operation": "write_file", "params": {"file_path": "b.txt", "content": "b\n"}},
        {"id": "c", "operation": "read_file", "depends_on": ["b"],
         "params": {"file_path": "b.txt"}}
    ]);
    assert_exit(&sandbox.run(&flow, "t"), 0);
    let task = sandbox.task_dir("t");
    std::fs::remove_dir_all(task.join("b")).unwrap();
    std::fs::remove_file(task.join("final_output/b.txt")).unwrap();
    let before = tree(&sandbox.repo);
    for command in ["apply", "diff"] {
        let output = sandbox.ocflow().args([command, "t"]).output().unwrap();
        assert_exit(&output, 2);
        let err = stderr(&output);
        assert!(
            err.contains("step b") && err.contains("b.txt") && err.contains("ocflow resume t"),
            "{command}: {err}"
        );
    }
    assert_eq!(tree(&sandbox.repo), before, "nothing was applied");

    let resumed = sandbox.ocflow().args(["resume", "t"]).output().unwrap();
    assert_exit(&resumed, 0);
    let err = stderr(&resumed);
    assert!(
        err.contains("step b") && err.contains("runs again"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(task.join("final_output/b.txt")).unwrap(),
        "b\n"
    );
    assert_eq!(sandbox.step_status("t", "b")["attempts"], json!(2));
    assert_eq!(sandbox.step_status("t", "a")["attempts"], json!(1));
    let applied = sandbox.ocflow().args(["apply", "t"]).output().unwrap();
    assert_exit(&applied, 0);
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("b.txt")).unwrap(),
        "b\n"
    );
}

/// The disk fills up while the repository is copied: the partial copy is removed (it used to
/// stay, keeping the disk full) and the status says why and what to do (it used to say
/// `running`, with no message). A 1 MiB file system (bubblewrap's sized tmpfs) holds the
/// workspace; the repository holds 3 MB.
#[test]
fn a_disk_full_during_the_snapshot_is_cleaned_up_and_recorded() {
    if !require(Component::Bubblewrap) {
        return;
    }
    let sandbox = Sandbox::new(&[("small.txt", "s\n")]);
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(sandbox.repo.join("big.bin"), big).unwrap();
    std::fs::create_dir_all(&sandbox.workspace).unwrap();
    let plan = sandbox.flow(&json!([{"id": "w", "operation": "write_file",
        "params": {"file_path": "b.txt", "content": "b\n"}}]));
    let ocflow = sandbox.ocflow();
    let args: Vec<String> = ocflow
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .chain(["run", "--task-id", "t", "--plan"].map(String::from))
        .chain([plan.display().to_string()])
        .collect();
    let task = sandbox.task_dir("t");
    let script = format!(
        "\"$0\" \"$@\"; code=$?; echo '--ls'; ls -a {task}; echo '--status'; \
         cat {task}/flow_status.json; exit $code",
        task = task.display()
    );
    let mut command = sandbox.command_like_ocflow("bwrap");
    command
        .args(["--dev-bind", "/", "/", "--size", "1048576", "--tmpfs"])
        .arg(&sandbox.workspace)
        .args(["sh", "-c", &script, env!("CARGO_BIN_EXE_ocflow")])
        .args(&args);
    let output = command.output().unwrap();
    assert_exit(&output, 1);
    let out = stdout(&output);
    let listing = out
        .split("--ls")
        .nth(1)
        .unwrap()
        .split("--status")
        .next()
        .unwrap();
    assert!(
        !listing.contains("_snapshot"),
        "the partial copy stays: {listing}"
    );
    let status: Value = serde_json::from_str(out.split("--status").nth(1).unwrap()).unwrap();
    assert_eq!(status["state"], json!("failed"), "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(message.contains("No space left on device"), "{message}");
    assert!(message.contains("ocflow resume t"), "{message}");
}

/// A kill after the starting status (no steps yet) but after flow.json was written: `resume`
/// runs the flow it has, without an LLM (it tried to plan again and needed one).
#[test]
fn a_kill_between_the_starting_status_and_the_flow_resumes_the_flow() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let flow = json!({"task": "write", "steps": [{"id": "w", "operation": "write_file",
        "params": {"file_path": "b.txt", "content": "b\n"}}]});
    assert_exit(&sandbox.run(&flow, "t"), 0);
    let path = sandbox.task_dir("t").join("flow_status.json");
    let mut status: Value = read_json(&path);
    status["steps"] = json!([]);
    status["state"] = json!("running");
    status["message"] = json!("starting");
    status["journal_offset"] = json!(0);
    std::fs::write(&path, serde_json::to_string(&status).unwrap()).unwrap();
    std::fs::write(sandbox.task_dir("t").join("journal.jsonl"), "").unwrap();
    let resumed = sandbox.ocflow().args(["resume", "t"]).output().unwrap();
    assert_exit(&resumed, 0);
    assert_eq!(sandbox.step_status("t", "w")["status"], json!("succeeded"));
}

/// After a `kill -9` of ocflow the saved state still says `running`; `status` and `list` used
/// to repeat it until someone resumed. No process holds the task's lock any more, so they show
/// the flow as interrupted with the command that continues it, without rewriting the saved
/// status (`saved_state` keeps what the file says).
#[test]
fn a_flow_whose_ocflow_was_killed_is_shown_interrupted_with_the_resume_command() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let marker = sandbox.shared().join("marker");
    let mut child = spawn_run(&sandbox, &gated_flow(&marker), "t");
    wait_until_running(&sandbox, "t", "wait");
    // While ocflow lives, the flow is running and no hint is given.
    let alive = sandbox.status("t");
    assert_eq!(alive["state"], json!("running"), "{alive}");
    assert_eq!(alive.get("resume_command"), None, "{alive}");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let saved = read_json(&sandbox.task_dir("t").join("flow_status.json"));
    assert_eq!(saved["state"], json!("running"));

    let status = sandbox.status("t");
    assert_eq!(status["state"], json!("interrupted"), "{status}");
    assert_eq!(status["saved_state"], json!("running"), "{status}");
    assert_eq!(
        status["resume_command"],
        json!("ocflow resume t"),
        "{status}"
    );
    let text = sandbox.ocflow().args(["status", "t"]).output().unwrap();
    assert_exit(&text, 0);
    let shown = stdout(&text) + &stderr(&text);
    assert!(shown.contains("[interrupted]"), "{shown}");
    assert!(!shown.contains("running now"), "{shown}");
    assert!(shown.contains("`ocflow resume t`"), "{shown}");

    let list = sandbox.ocflow().args(["--json", "list"]).output().unwrap();
    assert_exit(&list, 0);
    let line: Value = serde_json::from_str(stdout(&list).trim()).unwrap();
    assert_eq!(line["state"], json!("interrupted"), "{line}");
    assert_eq!(line["resume_command"], json!("ocflow resume t"), "{line}");
    let list = sandbox.ocflow().arg("list").output().unwrap();
    assert_exit(&list, 0);
    let shown = stdout(&list) + &stderr(&list);
    let row = stdout(&list)
        .lines()
        .find(|l| l.starts_with("t "))
        .unwrap_or("")
        .to_string();
    assert!(row.contains("interrupted"), "{shown}");
    assert!(shown.contains("`ocflow resume t`"), "{shown}");
    // The file is as the killed run left it: showing is not rewriting.
    assert_eq!(
        read_json(&sandbox.task_dir("t").join("flow_status.json")),
        saved
    );

    std::fs::write(&marker, "").unwrap();
    assert_exit(&sandbox.ocflow().args(["resume", "t"]).output().unwrap(), 0);
    let done = sandbox.status("t");
    assert_eq!(done["state"], json!("succeeded"));
    assert_eq!(done.get("resume_command"), None, "{done}");
}

/// A tmpfs of `size` mounted on `dir` for one test, unmounted when dropped; `None` (with the
/// reason printed) where this process may not mount.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(dir: &Path, size: &str) -> Option<SmallDisk> {
        std::fs::create_dir_all(dir).unwrap();
        let output = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output();
        match output {
            Ok(output) if output.status.success() => Some(SmallDisk(dir.to_path_buf())),
            Ok(output) => {
                skip(&format!(
                    "cannot mount a tmpfs here: {}",
                    stderr(&output).trim()
                ));
                None
            }
            Err(err) => {
                skip(&format!("cannot run mount: {err}"));
                None
            }
        }
    }

    /// Gives the file system more room (what a person freeing space does).
    fn grow(&self, size: &str) {
        let status = std::process::Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Every path under `dir` whose name is `name`.
fn named(dir: &Path, name: &str) -> Vec<String> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_name() == name)
        .map(|e| e.path().display().to_string())
        .collect()
}

/// A command fills the workspace's disk. It used to leave the flow `running` with no reason
/// (saving the result failed too) and its written layer on the disk. Now the step fails with
/// the reason, what it wrote is dropped (the disk has room again, so the state is saved), and
/// once the disk has more room `resume` runs the step again and finishes: in both views.
#[test]
fn a_command_that_fills_the_disk_fails_its_step_frees_its_layer_and_resume_finishes() {
    for overlay in [true, false] {
        let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
        if !overlay {
            sandbox.configure_sandbox("overlay = false");
        }
        let Some(disk) = SmallDisk::mount(&sandbox.workspace, "8m") else {
            return;
        };
        let flow = json!({"task": "fill", "steps": [
            {"id": "fill", "operation": "execute_shell_command",
             "params": {"command": "dd if=/dev/zero of=big bs=1M count=16"}},
            {"id": "after", "operation": "write_file", "depends_on": "fill",
             "params": {"file_path": "b.txt", "content": "b\n"}}
        ]});
        let output = sandbox.run(&flow, "t");
        assert_exit(&output, 1);
        let status = sandbox.status("t");
        let saved = read_json(&sandbox.task_dir("t").join("flow_status.json"));
        assert_eq!(
            saved["state"],
            json!("failed"),
            "overlay {overlay}: {saved}"
        );
        assert_eq!(
            status["state"],
            json!("failed"),
            "overlay {overlay}: {status}"
        );
        let step = sandbox.step_status("t", "fill");
        assert_eq!(step["status"], json!("failed"), "{step}");
        let message = step["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("no space left on the workspace's disk"),
            "overlay {overlay}: {step}"
        );
        assert!(message.contains("ocflow resume t"), "{message}");
        let task = sandbox.task_dir("t");
        assert_eq!(
            named(&task, "upper"),
            Vec::<String>::new(),
            "overlay {overlay}"
        );
        assert_eq!(
            named(&task, "big"),
            Vec::<String>::new(),
            "overlay {overlay}"
        );

        disk.grow("64m");
        let resumed = sandbox.ocflow().args(["resume", "t"]).output().unwrap();
        assert_exit(&resumed, 0);
        assert_eq!(sandbox.status("t")["state"], json!("succeeded"));
        let out = task.join("final_output");
        assert_eq!(std::fs::metadata(out.join("big")).unwrap().len(), 16 << 20);
        assert_eq!(std::fs::read_to_string(out.join("b.txt")).unwrap(), "b\n");
        drop(disk);
    }
}

/// Waits until the journal holds an event of `kind` (its `"type"`), as a caller watching the
/// task would.
fn wait_for_event(sandbox: &Sandbox, task_id: &str, kind: &str) {
    let journal = sandbox.task_dir(task_id).join("journal.jsonl");
    let wanted = format!("\"type\":\"{kind}\"");
    let deadline = Instant::now() + Duration::from_secs(300);
    while Instant::now() < deadline {
        if std::fs::read_to_string(&journal).is_ok_and(|text| text.contains(&wanted)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("no {kind} event in {}", journal.display());
}

/// A SIGTERM that came while a large result was captured or published used to wait for the
/// end of it (5.7 minutes for 100,000 files), and when it came while the flow's end rebuilt
/// `final_output/`, the flow was then recorded `succeeded`. Every long loop now checks for the
/// signal: ocflow exits 130 (within 2 s here: scripts/bench-responsiveness measures it), the
/// flow is saved as interrupted, and `resume`
/// finishes it. Sent while the command's files are captured and flushed (the command's last act
/// is to write a marker), while the step's outputs are published (its `step_finished` is in the
/// journal; publishing 8,000 files takes 2 s or more here), and while the flow's end rebuilds
/// `final_output/` (the published files vanish again).
#[test]
fn sigterm_while_a_large_result_is_captured_or_published_stops_within_seconds() {
    const FILES: usize = 8_000;
    let write_many = |marker: &Path| {
        format!(
            "python3 -c \"import os\nfor i in range({FILES}):\n    d = 'gen/%02d' % (i % 40)\n    \
             os.makedirs(d, exist_ok=True)\n    open('%s/%d.txt' % (d, i), 'w').write(str(i))\"; \
             echo done > {}",
            marker.display()
        )
    };
    for phase in ["capture", "publish", "finish"] {
        let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
        let marker = sandbox.shared().join("written");
        let flow = json!({"task": "many", "steps": [
            {"id": "many", "operation": "execute_shell_command",
             "params": {"command": write_many(&marker)}}
        ]});
        let mut child = spawn_run(&sandbox, &flow, "t");
        let published = sandbox.task_dir("t").join("final_output");
        // The first and the last of the step's outputs in the order they are published.
        let names: Vec<String> = (0..FILES)
            .map(|i| format!("gen/{:02}/{i}.txt", i % 40))
            .collect();
        let first = published.join(names.iter().min().unwrap());
        let last = published.join(names.iter().max().unwrap());
        // On a loaded machine flushing thousands of files takes long: wait up to 5 minutes.
        let wait_until = |done: &dyn Fn() -> bool, what: &str| {
            let deadline = Instant::now() + Duration::from_secs(300);
            while !done() {
                assert!(Instant::now() < deadline, "{phase}: {what} never happened");
                std::thread::sleep(Duration::from_millis(2));
            }
        };
        match phase {
            "capture" => wait_until(&|| marker.exists(), "the command's end"),
            "publish" => wait_for_event(&sandbox, "t", "step_finished"),
            _ => {
                wait_until(&|| last.exists(), "the step's publishing");
                wait_until(
                    &|| !first.exists() || !last.exists(),
                    "the rebuild at the end",
                );
            }
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "{phase}: ocflow ended before the signal; make FILES larger"
        );
        let started = Instant::now();
        send_signal(child.id(), "TERM");
        let output = child.wait_with_output().unwrap();
        let took = started.elapsed();
        assert_exit(&output, 130);
        // Liveness only: the states below tell an interrupted flush from a finished one; how
        // soon the signal ends it is measured by scripts/bench-responsiveness.
        assert!(
            took < Duration::from_secs(60),
            "{phase}: the signal took {took:?}"
        );
        let status = sandbox.status("t");
        assert_eq!(status["state"], json!("interrupted"), "{phase}: {status}");
        let step = sandbox.step_status("t", "many");
        let expected = if phase == "capture" {
            "pending"
        } else {
            "succeeded"
        };
        assert_eq!(step["status"], json!(expected), "{phase}: {step}");

        let resumed = sandbox.ocflow().args(["resume", "t"]).output().unwrap();
        assert_exit(&resumed, 0);
        assert_eq!(sandbox.status("t")["state"], json!("succeeded"), "{phase}");
        let published = tree(&sandbox.task_dir("t").join("final_output"));
        assert_eq!(published.len(), FILES, "{phase}");
        assert_eq!(published["gen/07/1287.txt"], b"1287", "{phase}");
    }
}

/// The disk is not quite full after the command (1.5 MiB are left, more than the check after a
/// command looks for), but the step's `result.json`, naming 12,000 long file names, does not
/// fit (nor, in a copied view, the copy of its outputs). That ENOSPC, met while the outputs are
/// captured or the result saved, is the step's too: what the command wrote is dropped (the
/// view set back, the captured outputs removed), the failure is saved with the reason, and the
/// disk has its room again. It used to leave the step pending and the disk full.
#[test]
fn a_result_the_full_disk_cannot_hold_fails_its_step_and_gives_the_space_back() {
    for overlay in [true, false] {
        let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
        sandbox.configure_sandbox(&format!("overlay = {overlay}"));
        let Some(disk) = SmallDisk::mount(&sandbox.workspace, "8m") else {
            return;
        };
        let command = "python3 -c \"import os\nos.makedirs('gen')\nfor i in range(12000):\n    \
                       open('gen/%05d' % i + 'x' * 240, 'w').close()\ns = os.statvfs('.')\n\
                       free = s.f_bavail * s.f_frsize\n\
                       open('filler', 'wb').write(b'0' * (free - 1536 * 1024))\"; exit 1";
        let flow = json!([{"id": "fill", "operation": "execute_shell_command",
                           "params": {"command": command}}]);
        let output = sandbox.run(&flow, "t");
        assert_exit(&output, 1);
        let saved = read_json(&sandbox.task_dir("t").join("flow_status.json"));
        assert_eq!(
            saved["state"],
            json!("failed"),
            "overlay {overlay}: {saved}"
        );
        let step = sandbox.step_status("t", "fill");
        assert_eq!(
            step["error"]["kind"],
            json!("no_space"),
            "overlay {overlay}: {step}"
        );
        let message = step["error"]["message"].as_str().unwrap_or_default();
        // Where it surfaced: saving the result (layers link the outputs), or copying the
        // outputs out of the copied view.
        let surfaced = if overlay { "result.json" } else { "copying" };
        assert!(message.contains(surfaced), "{message}");
        assert!(message.contains("No space left on device"), "{message}");
        let task = sandbox.task_dir("t");
        assert_eq!(
            named(&task, "filler"),
            Vec::<String>::new(),
            "overlay {overlay}"
        );
        let free = std::process::Command::new("df")
            .args(["--output=avail", "-k"])
            .arg(&sandbox.workspace)
            .output()
            .unwrap();
        let free: u64 = stdout(&free)
            .lines()
            .nth(1)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(free > 6 * 1024, "overlay {overlay}: {free} KiB free");
        drop(disk);
    }
}

#[test]
fn resume_stops_a_killed_run_s_daemon_that_cleared_its_environment() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    sandbox.configure_sandbox("namespaces = false");
    let marker = sandbox.shared().join("marker");
    // The daemon carries no marker and works outside the task: only its cgroup tells it.
    let daemon = "cd / && setsid sh -c '(exec env -i sleep 336 &)' </dev/null >/dev/null 2>&1";
    let flow = json!([{"id": "wait", "operation": "execute_shell_command",
        "params": {"command": format!("[ -f {m} ] || {daemon}; {}", gated(&marker, "w.txt"),
                                      m = marker.display())}}]);
    let mut child = spawn_run(&sandbox, &flow, "t");
    wait_for_file(&marker.with_extension("pid"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !running(&["sleep", "336"]) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(running(&["sleep", "336"]), "the daemon never started");
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::write(&marker, "").unwrap();
    let output = sandbox.ocflow().arg("resume").output().unwrap();
    assert_exit(&output, 0);
    let survived = running(&["sleep", "336"]);
    if survived {
        let _ = std::process::Command::new("pkill")
            .args(["-x", "-f", "sleep 336"])
            .status();
    }
    let result = sandbox.result("t", "wait");
    // Where no cgroup can be made the layers say so, and the daemon is out of ocflow's reach.
    let held = result["sandbox_layers"]["processes"]
        .as_str()
        .unwrap()
        .ends_with("(cgroup)");
    assert_eq!(survived, !held, "{result}");
}

/// A journal event of a newer version (a newer ocflow went on with the task) is refused by name,
/// not skipped as a torn line: the state it records would be missing from what this ocflow
/// shows and resumes.
#[test]
fn a_journal_event_of_a_newer_version_is_refused_by_name() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let flow = json!([{"id": "w", "operation": "write_file",
        "params": {"file_path": "b.txt", "content": "b\n"}}]);
    assert_exit(&sandbox.run(&flow, "t"), 0);
    let journal = sandbox.task_dir("t").join("journal.jsonl");
    let mut text = std::fs::read_to_string(&journal).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let mut newer = last.clone();
    newer["version"] = json!(2);
    text.push_str(&format!("{newer}\n"));
    std::fs::write(&journal, text).unwrap();
    let status = sandbox.ocflow().args(["status", "t"]).output().unwrap();
    assert_exit(&status, 2);
    assert!(
        stderr(&status).contains(
            "journal.jsonl: a journal event of version 2 was written by a newer ocflow (this \
             one reads version 1): use that version of ocflow for this task"
        ),
        "{}",
        stderr(&status)
    );
    // A torn last line is still skipped, as a crash leaves it.
    let text = std::fs::read_to_string(&journal).unwrap();
    let (kept, _) = text.trim_end().rsplit_once('\n').unwrap();
    std::fs::write(&journal, format!("{kept}\n{{\"version\":1,\"ts\":")).unwrap();
    assert_exit(&sandbox.ocflow().args(["status", "t"]).output().unwrap(), 0);
}
