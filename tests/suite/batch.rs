//! `ocflow batch`: a fleet of real flows (child processes of the real binary) against the fake
//! LLM, which records the requests in flight; and the Ray engine's protocol against a small
//! fake runner standing in for `ocflow_ray`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::fake_llm::{FakeLlm, Reply, Rule};
use super::support::{Sandbox, assert_exit, git, read_json, stderr, stdout};

/// Each LLM answer takes this long: a flow (one step asking the model, then its summary) takes
/// about a second with its process's start.
const ANSWER: Duration = Duration::from_millis(400);

/// The fake LLM for the fleet: every step's and every summary's answer comes after `ANSWER`.
fn slow_llm() -> FakeLlm {
    FakeLlm::with_rules(vec![
        Rule::flow_summary().reply(Reply::SlowChat {
            content: "Changed m.py.".into(),
            delay: ANSWER,
        }),
        Rule::prompt_contains("return 1 instead").reply(Reply::SlowChat {
            content: "```python\ndef f():\n    return 1\n```\n".into(),
            delay: ANSWER,
        }),
    ])
}

/// `count` repositories (`repos/tN`) with a plan each, and TASKS.jsonl naming them.
fn fleet(sandbox: &Sandbox, count: usize) -> PathBuf {
    let root = sandbox.root();
    let plan = root.join("plan.json");
    let flow = json!([{"id": "fix", "operation": "modify_code",
        "params": {"file_path": "m.py", "instructions": "return 1 instead"}}]);
    fs::write(&plan, flow.to_string()).unwrap();
    let mut lines = String::new();
    for i in 0..count {
        let repo = root.join("repos").join(format!("t{i}"));
        fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q"]);
        fs::write(repo.join("m.py"), "def f():\n    return 0\n").unwrap();
        let line = json!({"id": format!("t{i}"), "task": format!("Fix f in t{i}"),
            "repo": format!("repos/t{i}"), "plan": "plan.json"});
        lines.push_str(&format!("{line}\n"));
    }
    let tasks = root.join("tasks.jsonl");
    fs::write(&tasks, lines).unwrap();
    tasks
}

/// `ocflow batch TASKS --out DIR` with the sandbox's environment and the fake LLM.
fn batch(sandbox: &Sandbox, llm: &FakeLlm, tasks: &Path, out: &Path) -> Command {
    let mut command = sandbox.command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"));
    command
        .args(["--base-url", &llm.base_url(), "--model", "m", "batch"])
        .arg(tasks)
        .arg("--out")
        .arg(out);
    command
}

/// `results.jsonl` by id.
fn results(out: &Path) -> BTreeMap<String, Value> {
    fs::read_to_string(out.join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .map(|result| (result["id"].as_str().unwrap().to_string(), result))
        .collect()
}

fn all_succeeded(out: &Path, count: usize) {
    let results = results(out);
    assert_eq!(results.len(), count, "{results:#?}");
    for (id, result) in &results {
        assert_eq!(result["state"], "succeeded", "{id}: {result}");
        assert_eq!(result["exit_code"], 0, "{id}: {result}");
        assert_eq!(result["files_changed"], 1, "{id}: {result}");
        let diff = fs::read_to_string(result["diff"].as_str().unwrap()).unwrap();
        assert!(diff.contains("+    return 1"), "{id}: {diff}");
        let task_dir = PathBuf::from(result["task_dir"].as_str().unwrap());
        assert_eq!(
            fs::read_to_string(task_dir.join("final_output/m.py")).unwrap(),
            "def f():\n    return 1\n"
        );
    }
}

/// Twelve flows of about a second each, six at once: all succeed, and the batch takes well
/// under what the twelve take one after another (their LLM answers alone: 12 × 2 × 400 ms).
#[test]
fn twelve_flows_six_at_once_all_succeed_in_well_under_the_serial_time() {
    let sandbox = Sandbox::new(&[]);
    let llm = slow_llm();
    let tasks = fleet(&sandbox, 12);
    let out = sandbox.root().join("out");
    let started = Instant::now();
    let output = batch(&sandbox, &llm, &tasks, &out)
        .args(["--flows", "6"])
        .output()
        .unwrap();
    let wall = started.elapsed();
    assert_exit(&output, 0);
    all_succeeded(&out, 12);
    // What the twelve took each, added up, is what they take one after another; the batch
    // ran about six at once, so its wall time is well under that (the machine's load slows
    // both alike).
    let serial: u64 = results(&out)
        .values()
        .map(|r| r["duration_ms"].as_u64().unwrap())
        .sum();
    let serial = Duration::from_millis(serial);
    assert!(
        wall * 5 / 2 < serial,
        "12 flows, 6 at once, took {wall:?}; one after another they take {serial:?}"
    );
    // Not slower than their LLM answers alone one after another (12 × 2 × 400 ms).
    assert!(wall < ANSWER * 24, "{wall:?}");
    // Flows overlapped: more than one request was in flight at once, never more than the
    // flows running.
    let most = llm.max_in_flight();
    assert!(
        (2..=6).contains(&most),
        "requests in flight at once: {most}"
    );
    let summary = fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        summary.contains("12 finished, 12 succeeded, 0 failed"),
        "{summary}"
    );
    assert!(
        stdout(&output).contains("# Batch summary"),
        "{}",
        stdout(&output)
    );
    llm.verify();
}

/// `--max-llm-requests 2`: however many flows run, the server never sees more than two
/// requests at once, and the gate reports the same.
#[test]
fn the_llm_cap_holds_across_the_batch() {
    let sandbox = Sandbox::new(&[]);
    let llm = slow_llm();
    let tasks = fleet(&sandbox, 12);
    let out = sandbox.root().join("out");
    let output = batch(&sandbox, &llm, &tasks, &out)
        .args(["--flows", "6", "--max-llm-requests", "2", "--json"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    all_succeeded(&out, 12);
    assert_eq!(
        llm.max_in_flight(),
        2,
        "the fake LLM saw more (or fewer) at once"
    );
    let events: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(events.first().unwrap()["type"], "batch_started");
    let finished = events.last().unwrap();
    assert_eq!(finished["type"], "batch_finished", "{finished}");
    assert_eq!(
        (&finished["succeeded"], &finished["max_llm_in_flight"]),
        (&json!(12), &json!(2))
    );
    // Every flow's events are there, tagged with its task id.
    for i in 0..12 {
        let id = format!("t{i}");
        let ends = events
            .iter()
            .filter(|e| e["type"] == "flow_finished" && e["task_id"] == id.as_str())
            .count();
        assert_eq!(ends, 1, "{id}'s flow_finished");
        assert!(
            events
                .iter()
                .any(|e| e["type"] == "step_started" && e["task_id"] == id.as_str())
        );
    }
    llm.verify();
}

/// The batch SIGKILLed half-way: its flows stop resumably (they get SIGTERM as their parent
/// dies), and the same command again finishes every flow; no step that had finished ran again.
#[test]
fn a_batch_killed_half_way_and_run_again_finishes_every_flow_and_runs_no_step_twice() {
    let sandbox = Sandbox::new(&[]);
    let llm = slow_llm();
    let tasks = fleet(&sandbox, 12);
    let out = sandbox.root().join("out");
    let mut child = batch(&sandbox, &llm, &tasks, &out)
        .args(["--flows", "6", "--json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once a flow has finished and another is caught running (the flows of one wave
    // end nearly together, so "three finished" alone may find none running on a slow machine).
    let running = |out: &Path| {
        let recorded = results(out);
        fs::read_dir(out.join("workspace")).is_ok_and(|dirs| {
            dirs.flatten().any(|dir| {
                let status = dir.path().join("flow_status.json");
                let id = dir.file_name().to_string_lossy().to_string();
                !recorded.contains_key(&id)
                    && status.exists()
                    && fs::read_to_string(&status)
                        .ok()
                        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
                        .is_some_and(|s| s["state"] == "running")
            })
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while results(&out).is_empty() || !running(&out) {
        assert!(Instant::now() < deadline, "no flow finished in time");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let finished_before = results(&out).len();
    assert!(finished_before < 12, "the batch was not killed half-way");
    // The orphaned flows stop on their own (SIGTERM as their parent died), saving their state.
    let workspace = out.join("workspace");
    let deadline = Instant::now() + Duration::from_secs(30);
    while processes_naming(&workspace) > 0 {
        assert!(Instant::now() < deadline, "orphaned flows did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        fs::read_dir(&workspace).unwrap().flatten().all(|dir| {
            let status = dir.path().join("flow_status.json");
            !status.exists() || read_json(&status)["state"] != "running"
        }),
        "a flow stopped by its parent's death is still marked running"
    );
    // A flow whose last step was answered as the kill came may still have finished.
    let recorded = results(&out);
    let state_of = |id: &str| {
        let status = workspace.join(id).join("flow_status.json");
        status.exists().then(|| read_json(&status)["state"].clone())
    };
    let ids: Vec<String> = (0..12).map(|i| format!("t{i}")).collect();
    let interrupted = ids
        .iter()
        .filter(|id| state_of(id) == Some(json!("interrupted")))
        .count();
    let states: Vec<_> = ids.iter().map(|id| (id.clone(), state_of(id))).collect();
    let finished_after = ids
        .iter()
        .filter(|id| !recorded.contains_key(*id) && state_of(id) == Some(json!("succeeded")))
        .count();
    let output = batch(&sandbox, &llm, &tasks, &out)
        .args(["--flows", "6", "--json"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    all_succeeded(&out, 12);
    let started: Value = serde_json::from_str(stdout(&output).lines().next().unwrap()).unwrap();
    assert_eq!(started["type"], "batch_started");
    assert_eq!(
        (&started["skipped"], &started["resumed"]),
        (
            &json!(finished_before + finished_after),
            &json!(interrupted)
        )
    );
    // Each step succeeded exactly once, and never started again after it had.
    for i in 0..12 {
        let journal = fs::read_to_string(workspace.join(format!("t{i}/journal.jsonl"))).unwrap();
        let events: Vec<Value> = journal
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let done = events
            .iter()
            .position(|e| e["type"] == "step_finished" && e["status"] == "succeeded")
            .unwrap_or_else(|| panic!("t{i}: no step succeeded:\n{journal}"));
        let succeeded = events
            .iter()
            .filter(|e| e["type"] == "step_finished" && e["status"] == "succeeded")
            .count();
        let restarted = events[done..].iter().any(|e| e["type"] == "step_started");
        assert!(
            succeeded == 1 && !restarted,
            "t{i} ran a finished step again:\n{journal}"
        );
    }
    assert!(
        interrupted > 0,
        "no flow was caught running by the kill: {states:?}"
    );
}

/// An invalid line and a duplicate id: refused with their line numbers before anything runs.
#[test]
fn an_invalid_line_or_a_duplicate_id_is_refused_before_anything_runs() {
    let sandbox = Sandbox::new(&[]);
    let llm = FakeLlm::with_rules(vec![]);
    let tasks = fleet(&sandbox, 2);
    let text = fs::read_to_string(&tasks).unwrap();
    fs::write(
        &tasks,
        format!(
            "{text}{{\"id\": \"t0\", \"task\": \"again\", \"repo\": \"repos/t1\"}}\n\
             {{\"id\": \"t9\", \"task\": \"x\"}}\n"
        ),
    )
    .unwrap();
    let out = sandbox.root().join("out");
    let output = batch(&sandbox, &llm, &tasks, &out).output().unwrap();
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(
        err.contains("line 3: the id \"t0\" is already used on line 1")
            && err.contains("line 4: missing field `repo`"),
        "{err}"
    );
    assert!(!out.exists(), "the batch created {}", out.display());
    assert!(llm.requests().is_empty());
}

/// The key stays in the driver: no flow's command line or environment holds it, nor any file
/// the batch writes; the LLM server gets it, added by the gate.
#[test]
fn the_key_never_reaches_a_flow_or_a_file() {
    const KEY: &str = "sk-batch-secret-4242";
    let sandbox = Sandbox::new(&[]);
    let llm = slow_llm();
    let tasks = fleet(&sandbox, 3);
    let out = sandbox.root().join("out");
    let mut child = batch(&sandbox, &llm, &tasks, &out)
        .env("OCFLOW_API_KEY", KEY)
        .args(["--flows", "3"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let batch_pid = child.id();
    let mut flows_seen = 0;
    while child.try_wait().unwrap().is_none() {
        for pid in children_of(batch_pid) {
            flows_seen += 1;
            for file in ["environ", "cmdline"] {
                let bytes = fs::read(format!("/proc/{pid}/{file}")).unwrap_or_default();
                let text = String::from_utf8_lossy(&bytes);
                assert!(!text.contains(KEY), "flow {pid}'s {file} holds the key");
            }
        }
        std::thread::sleep(Duration::from_millis(30));
    }
    let output = child.wait_with_output().unwrap();
    assert_exit(&output, 0);
    assert!(flows_seen > 0, "no flow was seen running");
    for entry in walkdir::WalkDir::new(&out).into_iter().flatten() {
        if entry.file_type().is_file() {
            let bytes = fs::read(entry.path()).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(KEY),
                "{} holds the key",
                entry.path().display()
            );
        }
    }
    let authorizations: Vec<String> = llm
        .requests()
        .iter()
        .map(|r| {
            r.headers
                .get("authorization")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(authorizations.len(), 6);
    assert!(
        authorizations.iter().all(|a| a == &format!("Bearer {KEY}")),
        "{authorizations:?}"
    );
}

/// How many processes have `dir` in their command line.
fn processes_naming(dir: &Path) -> usize {
    let needle = dir.display().to_string();
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter(|entry| {
            let bytes = fs::read(entry.path().join("cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&bytes).contains(&needle)
        })
        .count()
}

/// The processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            fs::read_to_string(format!("/proc/{child}/stat"))
                .ok()
                .and_then(|stat| {
                    // The fields after the command name, which may hold spaces, in parentheses.
                    let after = stat.rsplit_once(')')?.1.to_string();
                    after.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// A stand-in for `ocflow_ray` as `$VIRTUAL_ENV/bin/python`: it keeps the
/// request, runs each flow with the ocflow and argv it was given (as one Ray worker would), and
/// answers with the protocol's lines. `mode` `missing` answers as a runner without Ray does.
fn fake_ray_runner(dir: &Path, mode: &str) -> PathBuf {
    let venv = dir.join("venv");
    fs::create_dir_all(venv.join("bin")).unwrap();
    let script = venv.join("runner.py");
    fs::write(
        &script,
        format!(
            r#"import json, os, subprocess, sys
request = json.load(sys.stdin)
open({request:?}, "w").write(json.dumps(request))
if {crash}:
    sys.exit("ModuleNotFoundError: No module named 'ray'")
if {missing}:
    print(json.dumps({{"error": "ray is not installed in " + sys.executable,
                      "fix": "pip install ray"}}), flush=True)
    sys.exit(2)
if {refused}:
    for flow in request["flows"]:
        result = {{"exit_code": 2, "attempts": 1, "status": None, "summary": "", "diff": "",
                  "task_dir": None,
                  "stderr": "Cloning...\nocflow ray: cannot clone the repository\n\n"}}
        print(json.dumps({{"id": flow["id"], "result": result}}), flush=True)
    sys.exit(0)
for flow in request["flows"]:
    env = dict(os.environ, **flow["env"])
    # The repository, workspace and plan are fields: put in as the node sees them.
    where = ["--repo", flow["repo"]["path"], "--workspace", flow["workspace"]]
    plan = ["--plan", flow["plan"]] if flow["plan"] else []
    done = subprocess.run([request["ocflow"]] + where + flow["argv"] + plan, env=env,
                          capture_output=True, text=True, input=flow.get("stdin"))
    for line in done.stdout.splitlines():
        print(json.dumps({{"id": flow["id"], "event": json.loads(line)}}), flush=True)
    task_dir = os.path.join(flow["workspace"], flow["id"])
    status = json.load(open(os.path.join(task_dir, "flow_status.json")))
    result = {{"exit_code": done.returncode, "attempts": 1, "status": status,
              "summary": open(os.path.join(task_dir, "summary.md")).read(),
              "diff": open(os.path.join(task_dir, "changes.diff")).read(),
              "task_dir": task_dir}}
    print(json.dumps({{"id": flow["id"], "result": result}}), flush=True)
"#,
            request = dir.join("request.json").display().to_string(),
            missing = if mode == "missing" { "True" } else { "False" },
            crash = if mode == "crash" { "True" } else { "False" },
            refused = if mode == "refused" { "True" } else { "False" },
        ),
    )
    .unwrap();
    let python = venv.join("bin/python");
    fs::write(
        &python,
        format!("#!/bin/sh\nexec python3 {} \"$@\"\n", script.display()),
    )
    .unwrap();
    fs::set_permissions(&python, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    venv
}

/// `--engine ray`: the runner gets the batch on stdin as the protocol says (the gate and a
/// token in each flow's environment, never the key; `resume_argv` for Ray's retries), and what
/// it sends back becomes results, kept status, summary and diff.
#[test]
fn the_ray_engine_speaks_the_runners_protocol() {
    const KEY: &str = "sk-ray-secret-77";
    let sandbox = Sandbox::new(&[]);
    let llm = slow_llm();
    let tasks = fleet(&sandbox, 2);
    let out = sandbox.root().join("out");
    let venv = fake_ray_runner(sandbox.root(), "ok");
    let output = batch(&sandbox, &llm, &tasks, &out)
        .env("VIRTUAL_ENV", &venv)
        .env("OCFLOW_API_KEY", KEY)
        .args(["--engine", "ray", "--flows", "2", "--max-llm-requests", "1"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    all_succeeded(&out, 2);
    assert_eq!(llm.max_in_flight(), 1);
    let request = read_json(&sandbox.root().join("request.json"));
    assert_eq!(
        (
            &request["address"],
            &request["max_concurrent_flows"],
            &request["max_retries"]
        ),
        (&json!("auto"), &json!(2), &json!(3))
    );
    assert_eq!(
        request["ocflow"],
        json!(env!("CARGO_BIN_EXE_ocflow")),
        "{request:#}"
    );
    let flow = &request["flows"][0];
    assert_eq!(flow["id"], "t0");
    // A path flow's task directory: the runner relays its journal and resumes it there.
    assert_eq!(flow["task_dir"], json!(out.join("workspace").join("t0")));
    let repo = sandbox.root().join("repos/t0");
    assert_eq!(flow["repo"], json!({"path": repo}));
    // The repository and the workspace are fields, never options the runner must find.
    assert_eq!(flow["workspace"], json!(out.join("workspace")));
    for key in ["argv", "resume_argv"] {
        let argv = flow[key].to_string();
        assert!(
            !argv.contains("--repo") && !argv.contains("--workspace"),
            "{argv}"
        );
    }
    let token = flow["env"]["OCFLOW_API_KEY"].as_str().unwrap();
    assert!(
        token.starts_with("ocflow-batch-") && token != KEY,
        "{token}"
    );
    assert!(
        flow["env"]["OCFLOW_BASE_URL"]
            .as_str()
            .unwrap()
            .starts_with("http://")
    );
    let resume: Vec<&str> = flow["resume_argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(resume.ends_with(&["resume", "t0"]), "{resume:?}");
    // The task comes on the run's stdin (issue 38: a long one as an argument stopped the batch).
    assert_eq!(flow["argv"].as_array().unwrap().last(), Some(&json!("-")));
    assert_eq!(flow["stdin"], json!("Fix f in t0"));
    assert!(!request.to_string().contains(KEY));
    for id in ["t0", "t1"] {
        let kept = out.join("flows").join(id);
        assert_eq!(
            read_json(&kept.join("flow_status.json"))["state"],
            "succeeded"
        );
        assert_eq!(
            fs::read_to_string(kept.join("summary.md")).unwrap(),
            fs::read_to_string(out.join("workspace").join(id).join("summary.md")).unwrap()
        );
    }
}

/// A runner without Ray: the batch stops with the runner's error and its fix (exit 2).
#[test]
fn the_ray_engine_says_what_to_install_when_ray_is_missing() {
    let sandbox = Sandbox::new(&[]);
    let llm = FakeLlm::with_rules(vec![]);
    let tasks = fleet(&sandbox, 1);
    let out = sandbox.root().join("out");
    let venv = fake_ray_runner(sandbox.root(), "missing");
    let output: Output = batch(&sandbox, &llm, &tasks, &out)
        .env("VIRTUAL_ENV", &venv)
        .args(["--engine", "ray"])
        .output()
        .unwrap();
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(
        err.contains("--engine ray: ray is not installed in") && err.contains("pip install ray"),
        "{err}"
    );
    assert!(results(&out).is_empty());
}

/// A flow that cannot run fails alone: its line says why, the summary lists it, the others
/// succeed, and the batch exits 1.
#[test]
fn a_failed_flow_is_reported_with_its_reason_and_the_batch_exits_1() {
    let sandbox = Sandbox::new(&[]);
    let llm = slow_llm();
    let tasks = fleet(&sandbox, 2);
    let bad = sandbox.root().join("bad.json");
    fs::write(
        &bad,
        json!([{"id": "x", "operation": "no_such_operation", "params": {}}]).to_string(),
    )
    .unwrap();
    let text = fs::read_to_string(&tasks).unwrap();
    fs::write(
        &tasks,
        format!(
            "{text}{}\n",
            json!({"id": "bad", "task": "t", "repo": "repos/t0", "plan": "bad.json"})
        ),
    )
    .unwrap();
    let out = sandbox.root().join("out");
    let output = batch(&sandbox, &llm, &tasks, &out).output().unwrap();
    assert_exit(&output, 1);
    let results = results(&out);
    assert_eq!(results["t0"]["state"], "succeeded");
    assert_eq!(results["t1"]["state"], "succeeded");
    let failed = &results["bad"];
    assert_eq!(
        (&failed["state"], &failed["exit_code"]),
        (&json!("failed"), &json!(2))
    );
    let reason = failed["reason"].as_str().unwrap();
    assert!(reason.contains("no_such_operation"), "{reason}");
    let summary = fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        summary.contains("3 finished, 2 succeeded, 1 failed")
            && summary.contains("- bad (failed, exit 2): "),
        "{summary}"
    );
}

/// `--apply` writes each succeeded flow into its repository, all or nothing, and refuses a
/// repository that changed since its flow read it (exit 1; that flow waits for review).
#[test]
fn apply_writes_succeeded_flows_and_refuses_a_repository_that_changed() {
    let sandbox = Sandbox::new(&[]);
    let llm = slow_llm();
    let tasks = fleet(&sandbox, 2);
    let out = sandbox.root().join("out");
    assert_exit(&batch(&sandbox, &llm, &tasks, &out).output().unwrap(), 0);
    let repos = sandbox.root().join("repos");
    // Nothing is written without --apply.
    assert_eq!(
        fs::read_to_string(repos.join("t0/m.py")).unwrap(),
        "def f():\n    return 0\n"
    );
    fs::write(repos.join("t1/m.py"), "def f():\n    return 7\n").unwrap();
    // Every task finished: the second run only applies.
    let output = batch(&sandbox, &llm, &tasks, &out)
        .arg("--apply")
        .output()
        .unwrap();
    assert_exit(&output, 1);
    assert_eq!(
        fs::read_to_string(repos.join("t0/m.py")).unwrap(),
        "def f():\n    return 1\n"
    );
    assert_eq!(
        fs::read_to_string(repos.join("t1/m.py")).unwrap(),
        "def f():\n    return 7\n",
        "a repository that changed was overwritten"
    );
    let err = stderr(&output);
    assert!(err.contains("ocflow: applied task t0"), "{err}");
    assert!(
        err.contains("m.py") && !err.contains("applied task t1"),
        "{err}"
    );
}

/// `--branches PREFIX` commits each succeeded flow on a branch of its own repository
/// (`PREFIX/ID`), every working tree as it was, a pull request's description beside each.
#[test]
fn branches_put_each_succeeded_flow_on_a_branch_of_its_own() {
    let sandbox = Sandbox::new(&[]);
    let llm = slow_llm();
    let tasks = fleet(&sandbox, 2);
    let repos = sandbox.root().join("repos");
    for id in ["t0", "t1"] {
        git(&repos.join(id), &["add", "-A"]);
        git(&repos.join(id), &["commit", "-qm", "start"]);
    }
    let out = sandbox.root().join("out");
    let output = batch(&sandbox, &llm, &tasks, &out)
        .args(["--branches", "fix"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    for id in ["t0", "t1"] {
        let repo = repos.join(id);
        assert_eq!(
            git(&repo, &["show", &format!("fix/{id}:m.py")]),
            "def f():\n    return 1\n"
        );
        assert_eq!(git(&repo, &["status", "--porcelain"]), "");
        assert_eq!(
            fs::read_to_string(repo.join("m.py")).unwrap(),
            "def f():\n    return 0\n"
        );
        assert!(
            out.join("workspace")
                .join(id)
                .join("pull_request.md")
                .is_file()
        );
    }
}

/// Ctrl-C (SIGINT to the batch): no more flows start, the running ones stop resumably, the
/// batch exits 130; running it again finishes them all.
#[test]
fn ctrl_c_stops_every_flow_resumably() {
    let sandbox = Sandbox::new(&[]);
    let llm = slow_llm();
    let tasks = fleet(&sandbox, 8);
    let out = sandbox.root().join("out");
    let child = batch(&sandbox, &llm, &tasks, &out)
        .args(["--flows", "4"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once a flow of the second wave is asking the model (its step started, not finished).
    let workspace = out.join("workspace");
    let asking = || {
        let finished = results(&out);
        fs::read_dir(&workspace)
            .into_iter()
            .flatten()
            .flatten()
            .any(|dir| {
                let id = dir.file_name().to_string_lossy().into_owned();
                let journal =
                    fs::read_to_string(dir.path().join("journal.jsonl")).unwrap_or_default();
                !finished.is_empty()
                    && !finished.contains_key(&id)
                    && journal.contains("\"step_started\"")
                    && !journal.contains("\"step_finished\"")
            })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !asking() {
        assert!(
            Instant::now() < deadline,
            "no flow of the second wave began in time"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: a signal to the child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let output = child.wait_with_output().unwrap();
    assert_exit(&output, 130);
    assert_eq!(processes_naming(&workspace), 0, "a flow outlived the batch");
    let stopped = fs::read_dir(&workspace)
        .unwrap()
        .flatten()
        .filter(|dir| {
            let status = dir.path().join("flow_status.json");
            status.exists() && read_json(&status)["state"] == "interrupted"
        })
        .count();
    assert!(stopped > 0, "{}", stderr(&output));
    assert!(results(&out).len() < 8);
    let output = batch(&sandbox, &llm, &tasks, &out).output().unwrap();
    assert_exit(&output, 0);
    all_succeeded(&out, 8);
}

/// A task's own `base_url` is reached through the gate too (its own path prefix there), the
/// other tasks' requests going to the default endpoint.
#[test]
fn a_tasks_own_endpoint_gets_its_requests_through_the_gate() {
    let sandbox = Sandbox::new(&[]);
    let default = slow_llm();
    let own = slow_llm();
    let tasks = fleet(&sandbox, 2);
    let text = fs::read_to_string(&tasks).unwrap();
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines[1]["base_url"] = json!(own.base_url());
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    fs::write(&tasks, text).unwrap();
    let out = sandbox.root().join("out");
    let output = batch(&sandbox, &default, &tasks, &out)
        .env("OCFLOW_API_KEY", "sk-batch-default-7171")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    all_succeeded(&out, 2);
    // The key is the configured endpoint's: a URL the tasks file names never receives it.
    let authorized = |llm: &FakeLlm| {
        llm.requests()
            .iter()
            .filter(|r| r.headers.contains_key("authorization"))
            .count()
    };
    assert_eq!((authorized(&default), authorized(&own)), (2, 0));
    // The summary's requests (a code step's prompt shows the task too).
    let asked = |llm: &FakeLlm| {
        llm.bodies()
            .iter()
            .map(ToString::to_string)
            .filter(|b| b.contains("Fix f in t") && b.contains("Write a concise summary"))
            .map(|b| {
                if b.to_string().contains("Fix f in t1") {
                    "t1"
                } else {
                    "t0"
                }
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        asked(&default),
        ["t0"],
        "the default endpoint's summary requests"
    );
    assert_eq!(
        asked(&own),
        ["t1"],
        "the task's own endpoint's summary requests"
    );
    assert_eq!((default.requests().len(), own.requests().len()), (2, 2));
}

/// Tasks the LLM must plan, and no LLM configured: refused before anything runs, naming them.
#[test]
fn tasks_without_a_plan_and_no_llm_are_refused_up_front() {
    let sandbox = Sandbox::new(&[]);
    let root = sandbox.root();
    fs::create_dir_all(root.join("repos/a")).unwrap();
    git(&root.join("repos/a"), &["init", "-q"]);
    let tasks = root.join("tasks.jsonl");
    fs::write(
        &tasks,
        "{\"id\": \"a\", \"task\": \"Add a README\", \"repo\": \"repos/a\"}\n",
    )
    .unwrap();
    let out = root.join("out");
    let output = sandbox
        .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
        .arg("batch")
        .arg(&tasks)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("need the LLM to plan them: a"),
        "{}",
        stderr(&output)
    );
    assert!(!out.exists());
}

/// A runner that dies without a word of the protocol: the batch says so with its last lines
/// (exit 2), and records no result.
#[test]
fn the_ray_engine_shows_a_runners_last_words_when_it_dies() {
    let sandbox = Sandbox::new(&[]);
    let llm = FakeLlm::with_rules(vec![]);
    let tasks = fleet(&sandbox, 1);
    let out = sandbox.root().join("out");
    let venv = fake_ray_runner(sandbox.root(), "crash");
    let output = batch(&sandbox, &llm, &tasks, &out)
        .env("VIRTUAL_ENV", &venv)
        .args(["--engine", "ray"])
        .output()
        .unwrap();
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(
        err.contains("1 flow(s) unreported") && err.contains("No module named 'ray'"),
        "{err}"
    );
    assert!(results(&out).is_empty());
}

/// A flow a Ray worker could not start (no status came back) fails with the reason the runner
/// gave, the last line of its stderr, not a bare exit code.
#[test]
fn a_flow_the_ray_runner_could_not_start_fails_with_the_runners_reason() {
    let sandbox = Sandbox::new(&[]);
    let llm = FakeLlm::with_rules(vec![]);
    let tasks = fleet(&sandbox, 1);
    let out = sandbox.root().join("out");
    let venv = fake_ray_runner(sandbox.root(), "refused");
    let output = batch(&sandbox, &llm, &tasks, &out)
        .env("VIRTUAL_ENV", &venv)
        .args(["--engine", "ray"])
        .output()
        .unwrap();
    assert_exit(&output, 1);
    let result = &results(&out)["t0"];
    assert_eq!(
        (&result["state"], &result["exit_code"]),
        (&json!("failed"), &json!(2))
    );
    assert_eq!(
        result["reason"],
        json!("ocflow ray: cannot clone the repository")
    );
}

/// A budget on the batch is each flow's: a flow that reaches it pauses (no result line, the
/// batch exits 3), and the same batch run again with a higher budget resumes it to success,
/// each step's model call made once.
#[test]
fn a_budget_pauses_the_batchs_flows_and_a_higher_one_resumes_them() {
    let sandbox = Sandbox::new(&[]);
    let llm = FakeLlm::with_rules(vec![
        Rule::flow_summary().reply(super::fake_llm::chat("Changed m.py.")),
        Rule::prompt_contains("return 1 instead")
            .named("code")
            .reply(super::fake_llm::chat(
                "```python\ndef f():\n    return 1\n```\n",
            )),
    ]);
    let tasks = fleet(&sandbox, 3);
    let out = sandbox.root().join("out");
    // Less than one code call reserves (its prompt and its max_tokens): no flow may ask.
    let paused = batch(&sandbox, &llm, &tasks, &out)
        .args(["--flows", "3", "--max-tokens", "200"])
        .output()
        .unwrap();
    assert_exit(&paused, 3);
    assert!(results(&out).is_empty(), "{:#?}", results(&out));
    for i in 0..3 {
        let status = read_json(&out.join(format!("workspace/t{i}/flow_status.json")));
        assert_eq!(status["state"], "paused", "t{i}: {status}");
    }
    assert_eq!(llm.calls("code"), 0);
    let resumed = batch(&sandbox, &llm, &tasks, &out)
        .args(["--flows", "3", "--max-tokens", "100000"])
        .output()
        .unwrap();
    assert_exit(&resumed, 0);
    all_succeeded(&out, 3);
    assert_eq!(llm.calls("code"), 3, "one code answer per flow");
}

/// Issue 38: one task over 128 KiB stopped the whole batch ("Argument list too long": the task
/// was an argument of its flow). Tasks reach their flows on stdin: a 200 KB task runs, and one
/// over ocflow's 1 MiB limit fails alone, the others finishing.
#[test]
fn a_long_task_runs_and_one_too_long_fails_alone() {
    let sandbox = Sandbox::new(&[]);
    let llm = slow_llm();
    let tasks = fleet(&sandbox, 2);
    let text = fs::read_to_string(&tasks).unwrap();
    let long = "refactor ".repeat(200_000 / 9);
    let too_long = "x".repeat(1024 * 1024 + 1);
    fs::write(
        &tasks,
        format!(
            "{text}{}\n{}\n",
            json!({"id": "long", "task": long, "repo": "repos/t0", "plan": "plan.json"}),
            json!({"id": "huge", "task": too_long, "repo": "repos/t1", "plan": "plan.json"})
        ),
    )
    .unwrap();
    let out = sandbox.root().join("out");
    let output = batch(&sandbox, &llm, &tasks, &out).output().unwrap();
    assert_exit(&output, 1);
    let results = results(&out);
    for id in ["t0", "t1", "long"] {
        assert_eq!(results[id]["state"], "succeeded", "{id}: {}", results[id]);
    }
    let huge = &results["huge"];
    assert_eq!(huge["exit_code"], json!(2), "{huge}");
}

/// Issue 38: a tasks file's `"repo": "/etc"` ran, its snapshot held a copy of /etc/shadow, and
/// with `--apply` the batch wrote there. A repository must be a git work tree, as `ocflow run`
/// finds one, checked where a symlink leads; every such line is named before anything runs.
#[test]
fn a_tasks_file_naming_a_directory_that_is_no_work_tree_is_refused() {
    let sandbox = Sandbox::new(&[]);
    let llm = slow_llm();
    let root = sandbox.root();
    let plain = root.join("plain");
    fs::create_dir_all(&plain).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("link")).unwrap();
    let tasks = root.join("tasks.jsonl");
    fs::write(
        &tasks,
        format!(
            "{}\n{}\n{}\n",
            json!({"id": "etc", "task": "tidy", "repo": "/etc"}),
            json!({"id": "plain", "task": "tidy", "repo": "plain"}),
            json!({"id": "link", "task": "tidy", "repo": "link"})
        ),
    )
    .unwrap();
    let out = root.join("out");
    let output = batch(&sandbox, &llm, &tasks, &out).output().unwrap();
    assert_exit(&output, 2);
    let said = stderr(&output);
    for line in [
        "line 1: the repository /etc is not a git work tree",
        "line 2:",
        "line 3:",
    ] {
        assert!(said.contains(line), "{line}: {said}");
    }
    assert!(said.contains("where it leads: /etc"), "{said}");
    assert!(llm.requests().is_empty());
    assert!(!out.join("workspace").exists());
}
