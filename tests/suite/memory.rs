//! The failure memory (issue 30 §2 and §4) against the fake LLM: the same failure run twice on
//! fresh clones of one repository — the second run's planner is shown what fixed the first,
//! so its first code answer is right and it needs no recovery; eight flows writing the memory
//! at once; `ocflow memory list|show|forget`, `--no-memory` and `--no-reflect`.

use std::path::Path;
use std::process::{Output, Stdio};

use serde_json::{Value, json};

use super::fake_llm::*;
use super::support::*;

const TASK: &str = "Make halve in calc.py return whole numbers";
const TEST: &str = "from calc import halve\n\n\ndef test_halve():\n    assert halve(7) == 3\n";
const STUB: &str = "def halve(n):\n    raise NotImplementedError\n";
const WRONG: &str = "def halve(n):\n    return n / 2\n";
const RIGHT: &str = "def halve(n):\n    return n // 2\n";
/// The words of the fix the first run's recovery found, which the second run must be shown.
const FIX: &str = "floor division";
/// What opens the memory's section in a prompt.
const SECTION: &str = "Past experience on this repository";

fn plan(instructions: &str) -> String {
    json!({"version": 1, "task": TASK, "steps": [
        {"id": "code", "operation": "modify_code",
         "params": {"file_path": "calc.py", "instructions": instructions}},
        {"id": "test", "operation": "run_tests", "depends_on": ["code"],
         "params": {"command": "python3 -m pytest -q -p no:cacheprovider"}}
    ]})
    .to_string()
}

fn code(text: &str) -> Reply {
    chat(&format!("```python\n{text}```\n"))
}

/// The model of both runs: a planner that follows what the memory says when its prompt
/// carries it, a coder right only when told the fix, and a recovery that finds it.
fn model() -> FakeLlm {
    FakeLlm::with_rules(vec![
        Rule::flow_summary().reply(chat("halve now returns whole numbers.")),
        Rule::reflection().reply(chat(
            "Root cause: halve used true division, which returns a float. Fix: use floor \
                 division (//) in halve.",
        )),
        Rule::recovery().reply(chat(
            &json!({"strategy": "modify", "reason": "halve returns a float",
                    "step": {"id": "code", "operation": "modify_code", "params": {
                        "file_path": "calc.py",
                        "instructions": "Use floor division (//) so halve returns whole numbers"}}})
            .to_string(),
        )),
        Rule::planner()
            .and_prompt_contains(SECTION)
            .and_prompt_contains(FIX)
            .named("planner told the fix")
            .reply(chat(&plan(
                "Make halve return whole numbers with floor division (//), as the past \
                 experience says",
            ))),
        Rule::planner().reply(chat(&plan("Make halve return whole numbers"))),
        Rule::prompt_contains(FIX)
            .named("code, told the fix")
            .reply(code(RIGHT)),
        Rule::prompt_contains("Make halve return whole numbers")
            .named("code, not told")
            .reply(code(WRONG)),
    ])
}

/// A sandbox whose repository is a git repository with one commit.
fn committed(files: &[(&str, &str)]) -> Sandbox {
    let sandbox = Sandbox::new(files);
    git(&sandbox.repo, &["init", "-q"]);
    git(&sandbox.repo, &["add", "-A"]);
    git(&sandbox.repo, &["commit", "-q", "-m", "first"]);
    sandbox
}

/// `ocflow run TASK` in `sandbox` against `llm`, remembering in `state` (the user's state
/// directory, shared by the runs of one test).
fn run_task(sandbox: &Sandbox, state: &Path, llm: &FakeLlm, extra: &[&str]) -> Output {
    sandbox
        .ocflow_llm(&llm.base_url())
        .env("XDG_STATE_HOME", state)
        .args(["run", "--task-id", "t"])
        .args(extra)
        .arg(TASK)
        .output()
        .unwrap()
}

fn memories(sandbox: &Sandbox, state: &Path) -> Vec<Value> {
    let output = sandbox
        .ocflow()
        .env("XDG_STATE_HOME", state)
        .args(["--json", "memory", "list"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    serde_json::from_str::<Value>(&stdout(&output))
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn prompt_bytes(llm: &FakeLlm) -> usize {
    llm.bodies()
        .iter()
        .flat_map(|body| body["messages"].as_array().cloned().unwrap_or_default())
        .map(|message| message["content"].as_str().map_or(0, str::len))
        .sum()
}

#[test]
fn the_second_run_of_a_failure_is_fixed_by_what_the_first_learned() {
    let first = committed(&[("calc.py", STUB), ("test_calc.py", TEST)]);
    let state = first.state_home();
    let llm = model();
    let output = run_task(&first, &state, &llm, &[]);
    assert_exit(&output, 0);
    // The first run needed a recovery round: the coder was not told the fix at first, nor
    // at its try shown the failing test, taken before the model is asked.
    assert_eq!(llm.calls("recovery"), 1);
    assert_eq!(llm.calls("code, not told"), 2);
    assert_eq!(llm.calls("code, told the fix"), 1);
    assert_eq!(llm.calls("reflection"), 1);
    assert_eq!(llm.calls("planner told the fix"), 0);
    let status = first.status("t");
    assert_eq!(status.get("memories_used"), None, "nothing to recall yet");
    let summary = std::fs::read_to_string(first.task_dir("t").join("summary.md")).unwrap();
    assert!(
        summary.contains("## What was learned (the model's reflection)\n\nRoot cause: halve used")
            && summary.contains(FIX),
        "{summary}"
    );
    let remembered = memories(&first, &state);
    assert_eq!(remembered.len(), 1, "{remembered:?}");
    let memory = &remembered[0];
    assert_eq!(memory["step"], json!("test"));
    assert_eq!(memory["operation"], json!("run_tests"));
    assert_eq!(memory["strategy"], json!("modify"));
    assert_eq!(memory["outcome"], json!("fixed"));
    assert_eq!(memory["tests"], json!(["test_calc.py::test_halve"]));
    assert!(
        memory["fix"]
            .as_str()
            .unwrap()
            .contains("Use floor division (//)"),
        "{memory}"
    );
    assert!(
        memory["lesson"]
            .as_str()
            .unwrap()
            .starts_with("Root cause: halve used true division"),
        "{memory}"
    );
    // Issue 37: the flow's tests passed after the fix, so its lesson is a fact.
    assert_eq!(memory["lesson_checked"], json!(true), "{memory}");
    // Normalised: no path of the run, no number of the failure.
    let stored = memory.to_string();
    assert!(
        !stored.contains(&first.root().display().to_string()),
        "{stored}"
    );
    assert!(!stored.contains("3.5"), "{stored}");
    assert!(
        memory["error_lines"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("assert N == N")),
        "{memory}"
    );
    let first_tokens = status["tokens"].clone();

    // A fresh clone of the same repository, elsewhere, with the same user's memory.
    let second = Sandbox::new(&[]);
    std::fs::remove_dir_all(&second.repo).unwrap();
    git(
        second.root(),
        &["clone", "-q", first.repo.to_str().unwrap(), "repo"],
    );
    let again = model();
    let output = run_task(&second, &state, &again, &[]);
    assert_exit(&output, 0);
    assert_eq!(again.calls("planner told the fix"), 1);
    assert_eq!(again.calls("code, told the fix"), 1);
    assert_eq!(
        again.calls("code, not told"),
        0,
        "the first code answer is right"
    );
    assert_eq!(again.calls("recovery"), 0);
    assert_eq!(
        again.calls("reflection"),
        0,
        "no recovery, nothing to reflect on"
    );
    let planner_prompt = again
        .bodies()
        .iter()
        .map(last_user_message)
        .find(|m| m.contains(SECTION))
        .unwrap();
    assert!(
        // After the fixed text (kept first for servers' prefix caches), before the task.
        planner_prompt.find("Available operations").unwrap()
            < planner_prompt.find(SECTION).unwrap()
            && planner_prompt.contains(&format!("- memory #{}: step `test`", memory["id"]))
            && planner_prompt.contains("(this fixed it)")
            && planner_prompt
                .find("--- End of past experience ---")
                .unwrap()
                < planner_prompt.rfind("\nTask: ").unwrap(),
        "{planner_prompt}"
    );
    let status = second.status("t");
    assert_eq!(status["memories_used"], json!([memory["id"]]));
    assert_eq!(
        std::fs::read_to_string(second.task_dir("t").join("final_output/calc.py")).unwrap(),
        RIGHT
    );
    let second_tokens = status["tokens"].clone();
    let (calls_1, calls_2) = (llm.bodies().len(), again.bodies().len());
    assert!(calls_2 < calls_1, "{calls_2} calls, then {calls_1}");
    assert!(
        second_tokens["total_tokens"].as_u64() < first_tokens["total_tokens"].as_u64(),
        "{first_tokens} then {second_tokens}"
    );
    // The figures of the note (issue 30): calls, tokens and prompt bytes of each run.
    eprintln!(
        "memory: first run {calls_1} LLM calls, {} tokens, {} prompt bytes; second run \
         {calls_2} calls, {} tokens, {} prompt bytes",
        first_tokens["total_tokens"],
        prompt_bytes(&llm),
        second_tokens["total_tokens"],
        prompt_bytes(&again)
    );
    // The control: a third clone run with --no-memory is not told, and needs recovery again.
    let third = Sandbox::new(&[]);
    std::fs::remove_dir_all(&third.repo).unwrap();
    git(
        third.root(),
        &["clone", "-q", first.repo.to_str().unwrap(), "repo"],
    );
    let unaided = model();
    assert_exit(&run_task(&third, &state, &unaided, &["--no-memory"]), 0);
    assert_eq!(unaided.calls("planner told the fix"), 0);
    assert_eq!(
        unaided.calls("code, not told"),
        2,
        "its first try and the one before recovery"
    );
    assert_eq!(unaided.calls("recovery"), 1);
    assert_eq!(third.status("t").get("memories_used"), None);
    assert_eq!(
        memories(&first, &state).len(),
        1,
        "--no-memory writes nothing"
    );
    // The report names the memories the flow used.
    let report = second
        .ocflow()
        .env("XDG_STATE_HOME", &state)
        .args(["report", "t"])
        .output()
        .unwrap();
    assert_exit(&report, 0);
    let page = std::fs::read_to_string(second.task_dir("t").join("report.html")).unwrap();
    assert!(
        page.contains(&format!("memory #{}", memory["id"])),
        "the report names the memory used"
    );
}

/// A flow whose only step fails with an assertion-like error, and whose recovery aborts.
fn failing_flow(sandbox: &Sandbox) -> std::path::PathBuf {
    sandbox.flow(
        &json!({"version": 1, "task": "check the numbers", "steps": [
            {"id": "check", "operation": "execute_shell_command",
             "params": {"command": "echo 'E   AssertionError: expected 3, got 3.5' >&2; exit 3"}}
        ]}),
    )
}

fn aborting_model(reflections: Option<usize>) -> FakeLlm {
    let reflection =
        Rule::reflection().reply(chat("Root cause: the numbers differ. Fix: none was found."));
    let reflection = match reflections {
        Some(n) => reflection.times(n),
        None => reflection,
    };
    FakeLlm::with_rules(vec![
        Rule::flow_summary().reply(chat("The check failed.")),
        reflection,
        Rule::recovery().reply(chat(
            &json!({"strategy": "abort", "reason": "the numbers are wrong"}).to_string(),
        )),
    ])
}

#[test]
fn eight_flows_write_the_memory_at_once() {
    let sandbox = committed(&[("numbers.txt", "3\n")]);
    let llm = aborting_model(Some(8));
    let plan = failing_flow(&sandbox);
    let children: Vec<_> = (0..8)
        .map(|n| {
            sandbox
                .ocflow_llm(&llm.base_url())
                .args(["run", "--task-id", &format!("t{n}"), "--plan"])
                .arg(&plan)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert_exit(&output, 1);
        let said = stderr(&output);
        assert!(
            !said.contains("locked")
                && !said.contains("failure memory")
                && !said.contains("not remembered"),
            "no memory problem is said: {said}"
        );
    }
    let state = sandbox.state_home();
    let remembered = memories(&sandbox, &state);
    let mut flows: Vec<String> = remembered
        .iter()
        .map(|m| m["task_id"].as_str().unwrap().to_string())
        .collect();
    flows.sort();
    let expected: Vec<String> = (0..8).map(|n| format!("t{n}")).collect();
    assert_eq!(flows, expected);
    for memory in &remembered {
        assert_eq!(memory["outcome"], json!("not_fixed"), "{memory}");
        assert_eq!(memory["strategy"], json!("abort"), "{memory}");
        assert_eq!(
            memory["error_lines"][0],
            json!("E AssertionError: expected N, got N"),
            "{memory}"
        );
        assert!(memory["lesson"].as_str().unwrap().starts_with("Root cause"));
    }
}

#[test]
fn memory_is_listed_shown_forgotten_and_not_used_when_told() {
    let sandbox = committed(&[("numbers.txt", "3\n")]);
    let state = sandbox.state_home();
    let database = state.join("ocflow/memory.sqlite");
    // One reflection in all: the second flow runs with --no-reflect.
    let llm = aborting_model(Some(1));
    let plan = failing_flow(&sandbox);
    let run = |id: &str, extra: &[&str]| {
        sandbox
            .ocflow_llm(&llm.base_url())
            .args(["run", "--task-id", id])
            .args(extra)
            .arg("--plan")
            .arg(&plan)
            .output()
            .unwrap()
    };
    assert_exit(&run("t1", &["--no-memory"]), 1);
    assert!(
        !database.exists(),
        "--no-memory: the memory is not even opened"
    );
    let summary = std::fs::read_to_string(sandbox.task_dir("t1").join("summary.md")).unwrap();
    assert!(summary.contains("## What was learned"), "{summary}");
    assert_exit(&run("t2", &["--no-reflect"]), 1);
    let summary = std::fs::read_to_string(sandbox.task_dir("t2").join("summary.md")).unwrap();
    assert!(!summary.contains("## What was learned"), "{summary}");
    let remembered = memories(&sandbox, &state);
    assert_eq!(remembered.len(), 1);
    let id = remembered[0]["id"].as_i64().unwrap();
    assert_eq!(remembered[0]["task_id"], json!("t2"));
    assert_eq!(remembered[0]["lesson"], Value::Null);
    // The same failure again: its recovery is told which strategy did not end it before.
    assert_exit(&run("t3", &["--no-reflect"]), 1);
    let recovery = llm
        .bodies()
        .iter()
        .map(last_user_message)
        .rfind(|m| m.contains("Choose ONE strategy"))
        .unwrap();
    assert!(
        recovery.contains(&format!(
            "Strategies that did NOT end this same failure before: `abort` (memory #{id})"
        )) && recovery.contains(&format!("- memory #{id}: step `check`")),
        "{recovery}"
    );
    assert_eq!(sandbox.status("t3")["memories_used"], json!([id]));
    let newest = memories(&sandbox, &state)[0]["id"].as_i64().unwrap();

    let memory = |args: &[&str]| {
        sandbox
            .ocflow()
            .env("XDG_STATE_HOME", &state)
            .arg("memory")
            .args(args)
            .output()
            .unwrap()
    };
    let shown = memory(&["show", &id.to_string()]);
    assert_exit(&shown, 0);
    let text = stdout(&shown);
    assert!(
        text.starts_with(&format!("memory #{id}"))
            && text.contains("step: check (execute_shell_command)")
            && text.contains("then: abort the numbers are wrong"),
        "{text}"
    );
    let listed = memory(&["list"]);
    assert_exit(&listed, 0);
    let lines = stdout(&listed);
    assert!(
        lines.starts_with(&format!("#{newest}  ")) && lines.contains(&format!("\n#{id}  ")),
        "newest first: {lines}"
    );
    // An id that is not there: exit 2, saying where the ids are.
    let missing = memory(&["show", "999"]);
    assert_exit(&missing, 2);
    assert!(
        stderr(&missing).contains("no memory #999 of this repository; `ocflow memory list`"),
        "{}",
        stderr(&missing)
    );
    assert_exit(&memory(&["forget", &id.to_string()]), 0);
    let left = memories(&sandbox, &state);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["id"], json!(newest));
    let forgotten = memory(&["forget", "--all"]);
    assert_exit(&forgotten, 0);
    assert!(
        stderr(&forgotten).contains("forgot 1 failure(s)"),
        "{}",
        stderr(&forgotten)
    );
    assert!(memories(&sandbox, &state).is_empty());
    // Neither an id nor --all: clap's usage error.
    assert_exit(&memory(&["forget"]), 2);
}

/// A memory file that is not a database: flows go on without it, saying so; `ocflow memory`
/// refuses it with exit 2, naming the file.
#[test]
fn a_damaged_memory_is_said_and_never_stops_a_flow() {
    let sandbox = committed(&[("numbers.txt", "3\n")]);
    let state = sandbox.state_home();
    let database = state.join("ocflow/memory.sqlite");
    std::fs::create_dir_all(database.parent().unwrap()).unwrap();
    std::fs::write(
        &database,
        "not a database at all, just some words ".repeat(200),
    )
    .unwrap();
    let llm = aborting_model(Some(1));
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--plan"])
        .arg(failing_flow(&sandbox))
        .output()
        .unwrap();
    assert_exit(&output, 1);
    assert!(
        stderr(&output).contains("recovery goes on without the failure memory"),
        "{}",
        stderr(&output)
    );
    assert_eq!(llm.calls("recovery"), 1, "recovery was still asked");
    let listed = sandbox
        .ocflow()
        .env("XDG_STATE_HOME", &state)
        .args(["memory", "list"])
        .output()
        .unwrap();
    assert_exit(&listed, 2);
    assert!(
        stderr(&listed).contains(&format!("the failure memory {}", database.display())),
        "{}",
        stderr(&listed)
    );
}
