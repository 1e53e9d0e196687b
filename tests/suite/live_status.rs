//! `flow_status.json` as the live state (issue 28 §3): while a flow runs, the file itself (not
//! `ocflow status`, which replays the journal onto it) shows each step's start and end within
//! a second of the journal, and after a `kill -9` it shows every step the journal had finished
//! a second before.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::*;

/// How far the file may trail the journal.
const LAG: Duration = Duration::from_secs(1);
/// How often the reader looks: the lag is measured to this precision.
const POLL: Duration = Duration::from_millis(20);

/// What one reader polling a task's journal and status file saw, and when.
#[derive(Default)]
struct Watcher {
    /// Bytes of the journal read so far (whole lines only).
    journal_read: usize,
    /// When each step's `step_started` line was first seen in the journal.
    journal_started: BTreeMap<String, Instant>,
    /// When each step's succeeded `step_finished` line was first seen in the journal.
    journal_finished: BTreeMap<String, Instant>,
    /// When the file first showed each step started (running or beyond).
    file_started: BTreeMap<String, Instant>,
    /// When the file first showed each step succeeded.
    file_finished: BTreeMap<String, Instant>,
    /// Steps the file showed `running`, and in how many looks.
    file_running: BTreeMap<String, usize>,
    /// The file last parsed (its inode and change time: each write is a new file renamed over
    /// it), so that a look costs a parse only when it changed: a slow reader would add its own
    /// delay to the lag it measures.
    file_seen: Option<(u64, i64, i64)>,
    /// Its steps' states then.
    file_states: Vec<(String, String)>,
}

impl Watcher {
    /// One look: the journal's new lines, then the file (a write is atomic: the file is always
    /// whole).
    fn poll(&mut self, task: &Path) {
        let now = Instant::now();
        if let Ok(bytes) = std::fs::read(task.join("journal.jsonl")) {
            let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            for line in bytes[self.journal_read.min(whole)..whole].split(|b| *b == b'\n') {
                let Ok(record) = serde_json::from_slice::<Value>(line) else {
                    continue;
                };
                let step = record["step"].as_str().unwrap_or("").to_string();
                match record["type"].as_str() {
                    Some("step_started") => {
                        self.journal_started.entry(step).or_insert(now);
                    }
                    Some("step_finished") if record["status"] == "succeeded" => {
                        self.journal_finished.entry(step).or_insert(now);
                    }
                    _ => {}
                }
            }
            self.journal_read = whole;
        }
        let path = task.join("flow_status.json");
        let Ok(meta) = std::fs::metadata(&path) else {
            return;
        };
        let identity = (meta.ino(), meta.ctime(), meta.ctime_nsec());
        if self.file_seen != Some(identity) {
            let Some(status) = read_status_file(task) else {
                return;
            };
            self.file_seen = Some(identity);
            self.file_states = status["steps"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|step| {
                    let id = step["id"].as_str().unwrap_or("").to_string();
                    (id, step["status"].as_str().unwrap_or("").to_string())
                })
                .collect();
        }
        for (id, state) in &self.file_states {
            let (id, state) = (id.clone(), state.as_str());
            if state != "pending" {
                self.file_started.entry(id.clone()).or_insert(now);
            }
            if state == "running" {
                *self.file_running.entry(id.clone()).or_default() += 1;
            }
            if state == "succeeded" {
                self.file_finished.entry(id).or_insert(now);
            }
        }
    }

    /// Polls until the child ends.
    fn watch(&mut self, task: &Path, child: &mut Child) {
        while child.try_wait().unwrap().is_none() {
            self.poll(task);
            std::thread::sleep(POLL);
        }
    }
}

/// `flow_status.json` as it is on disk, without the journal replayed; `None` before it exists.
fn read_status_file(task: &Path) -> Option<Value> {
    let text = std::fs::read(task.join("flow_status.json")).ok()?;
    Some(serde_json::from_slice(&text).expect("the status file is always whole JSON"))
}

/// The largest delay between the journal showing a change and the file showing it, by step;
/// a change the file never showed counts as `never`.
fn lags(journal: &BTreeMap<String, Instant>, file: &BTreeMap<String, Instant>, never: Instant) {
    for (step, seen) in journal {
        let shown = file.get(step).copied().unwrap_or(never);
        let lag = shown.saturating_duration_since(*seen);
        assert!(
            lag <= LAG,
            "step {step}: the status file showed it {lag:?} after the journal (at most {LAG:?})"
        );
    }
}

fn spawn_run(sandbox: &Sandbox, plan: &PathBuf) -> Child {
    sandbox
        .ocflow()
        .args(["run", "--jobs", "1", "--task-id", "t", "--plan"])
        .arg(plan)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The reader: during a 3-second step, the file showed it pending and none of the 5
/// steps finished before it, for the whole 3 s. Now it shows the step running, and each
/// finished step, within a second of the journal.
#[test]
fn the_status_file_shows_a_running_step_and_each_finished_one_within_a_second() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let mut steps: Vec<Value> = (0..5)
        .map(|i| {
            json!({"id": format!("w{i}"), "operation": "write_file",
                   "params": {"file_path": format!("w{i}.txt"), "content": format!("{i}\n")}})
        })
        .collect();
    steps.push(json!({"id": "slow", "operation": "execute_shell_command",
        "depends_on": ["w0", "w1", "w2", "w3", "w4"], "params": {"command": "sleep 3"}}));
    steps.push(
        json!({"id": "last", "operation": "write_file", "depends_on": ["slow"],
        "params": {"file_path": "last.txt", "content": "last\n"}}),
    );
    let plan = sandbox.flow(&Value::Array(steps));
    let task = sandbox.task_dir("t");
    let mut child = spawn_run(&sandbox, &plan);
    let mut watcher = Watcher::default();
    watcher.watch(&task, &mut child);
    let ended = Instant::now();
    assert!(child.wait().unwrap().success());
    watcher.poll(&task);

    assert_eq!(watcher.journal_finished.len(), 7, "every step ran");
    // Seen running for most of its 3 s (every 20 ms: well over 50 looks), not only at the end.
    let looks = watcher.file_running.get("slow").copied().unwrap_or(0);
    assert!(
        looks >= 50,
        "the file showed `slow` running in {looks} looks"
    );
    lags(&watcher.journal_started, &watcher.file_started, ended);
    lags(&watcher.journal_finished, &watcher.file_finished, ended);
}

/// A flow whose status is large (1000 steps, the most a flow may have: the file is rewritten by
/// time, not at each change) killed with SIGKILL while it runs: the file never showed a step the
/// journal had finished as pending for more than a second before the kill, and with the journal
/// replayed (`ocflow status`) it shows exactly what the journal holds.
///
/// Every tenth step sleeps 50 ms, so the flow lasts at least 5 s on any machine and the kill at
/// 2.5 s always lands while it runs (on a fast CI machine, 1000 file writes alone ended first).
#[test]
fn after_a_kill_the_status_file_is_at_most_a_second_behind_the_journal() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let steps: Vec<Value> = (0..1000)
        .map(|i| {
            let mut step = if i % 10 == 9 {
                json!({"id": format!("s{i}"), "operation": "execute_shell_command",
                    "params": {"command": "sleep 0.05"}})
            } else {
                json!({"id": format!("s{i}"), "operation": "write_file",
                    "params": {"file_path": format!("out/f{i}.txt"), "content": format!("{i}\n")}})
            };
            if i > 0 {
                step["depends_on"] = json!([format!("s{}", i - 1)]);
            }
            step
        })
        .collect();
    let plan = sandbox.flow(&Value::Array(steps));
    let task = sandbox.task_dir("t");
    let mut child = spawn_run(&sandbox, &plan);
    let mut watcher = Watcher::default();
    // Killed 2.5 s after its first step started: long enough for several rewrites by time.
    let mut started = None;
    while child.try_wait().unwrap().is_none() {
        watcher.poll(&task);
        if started.is_none() && !watcher.journal_started.is_empty() {
            started = Some(Instant::now());
        }
        if started.is_some_and(|at| at.elapsed() >= Duration::from_millis(2500)) {
            break;
        }
        std::thread::sleep(POLL);
    }
    child.kill().unwrap();
    let killed = Instant::now();
    child.wait().unwrap();
    let finished = watcher.journal_finished.len();
    assert!(
        (20..1000).contains(&finished),
        "killed while it ran ({finished} steps finished in the journal)"
    );
    let status = read_status_file(&task).unwrap();
    let shown: Vec<&str> = status["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["status"] == "succeeded")
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    for (step, seen) in &watcher.journal_finished {
        if killed.duration_since(*seen) > LAG {
            assert!(
                shown.contains(&step.as_str()),
                "step {step} finished in the journal {:?} before the kill, the file shows it \
                 pending ({} of {finished} shown)",
                killed.duration_since(*seen),
                shown.len()
            );
        }
    }
    lags(&watcher.journal_finished, &watcher.file_finished, killed);
    // Lines appended after the last look count too: read the journal once more.
    watcher.poll(&task);
    let replayed = sandbox.status("t");
    let succeeded: Vec<String> = replayed["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["status"] == "succeeded")
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    let journaled: Vec<String> = watcher.journal_finished.keys().cloned().collect();
    let mut sorted = succeeded.clone();
    sorted.sort();
    assert_eq!(sorted, journaled);
}
