//! Honest with small models: their real answers (`../shared/notes/small-models.md`), replayed
//! through the fake server, never become a success they are not.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::fake_llm::{FakeLlm, Reply, Rule, chat, last_user_message};
use super::support::*;

const FIX_TASK: &str =
    "Fix calculate_metrics in utils.py: it crashes with ZeroDivisionError on an empty list";

/// Gemma-3-270M's answer to every task: the planning prompt's own example, byte for byte.
const GEMMA_EXAMPLE: &str = r#"{"version": 1, "task": "<the task>", "steps": [
  {"id": "write_hello", "operation": "write_file",
   "params": {"file_path": "hello.py", "content": "def greet():\n    print(\"Hello\")\n"}},
  {"id": "check", "operation": "execute_shell_command", "depends_on": ["write_hello"],
   "params": {"command": "python3 -c 'import hello; hello.greet()'"}}
 ]}"#;

fn utils_repo() -> Sandbox {
    Sandbox::new(&[(
        "utils.py",
        "def calculate_metrics(values):\n    return sum(values) / len(values)\n",
    )])
}

fn run_task(sandbox: &Sandbox, llm: &FakeLlm, task: &str) -> std::process::Output {
    sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", task])
        .output()
        .unwrap()
}

/// The example copied twice: the same answer twice ends the re-asks; nothing runs, the flow
/// fails, the summary never says it succeeded, and the task stays the user's.
#[test]
fn the_prompts_example_copied_is_never_run() {
    let sandbox = utils_repo();
    // Asked then what the task asks for (ocflow would plan on utils.py), Gemma gives the example
    // a third time: no choice, and the planning's failure stands.
    let llm = FakeLlm::in_order(vec![
        chat(GEMMA_EXAMPLE),
        chat(GEMMA_EXAMPLE),
        chat(GEMMA_EXAMPLE),
    ]);
    let output = run_task(&sandbox, &llm, FIX_TASK);
    assert_exit(&output, 1);
    let status = sandbox.status("t");
    assert_eq!(status["state"], json!("failed"));
    assert_eq!(status["task"], json!(FIX_TASK));
    let message = status["message"].as_str().unwrap();
    assert!(message.contains("the same answer again"), "{message}");
    assert!(!sandbox.task_dir("t").join("final_output/hello.py").exists());
    let problems = std::fs::read_to_string(
        sandbox
            .task_dir("t")
            .join("planning/plan-answer-1.problems.txt"),
    )
    .unwrap();
    assert!(
        problems.contains("this is the example from the instructions"),
        "{problems}"
    );
    let summary = std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap();
    assert!(summary.contains(FIX_TASK), "{summary}");
    assert!(
        !summary.contains("<the task>") && !summary.contains("succeeded"),
        "{summary}"
    );
}

/// A plan that touches none of the files the task names is told so once; when it stays, the
/// flow fails with that reason (a new hello.py is never the fix for utils.py).
#[test]
fn an_unrelated_plan_fails_the_flow_with_the_reason() {
    let sandbox = utils_repo();
    let unrelated = |name: &str| {
        json!({"steps": [{"id": "w", "operation": "write_file",
            "params": {"file_path": name, "content": "x = 1\n"}}]})
        .to_string()
    };
    // Asked what the task asks for, the model answers with a plan again: no choice.
    let llm = FakeLlm::in_order(vec![
        chat(&unrelated("hello.py")),
        chat(&unrelated("other.py")),
        chat(&unrelated("other.py")),
    ]);
    let output = run_task(&sandbox, &llm, FIX_TASK);
    assert_exit(&output, 1);
    let message = sandbox.status("t")["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("does not fit the task")
            && message.contains("touches none of the files the task names (utils.py)"),
        "{message}"
    );
    assert_eq!(sandbox.status("t")["steps"], json!([]));
    let second = llm.bodies()[1].to_string();
    assert!(
        second.contains("touches none of the files"),
        "the model was told"
    );
}

/// The real Qwen2.5-Coder-0.5B, asked to "Explain in ANALYSIS.md …", wrote its explanation into
/// `analysis_report.txt` and the flow succeeded (scripts/bench-real-model, run 6: a false
/// success). A new file named like the one the task names, which does not exist yet, is the
/// task's file renamed: the model is told, once; its plan for the named file then runs, and one
/// that keeps the other name never becomes a success.
#[test]
fn a_file_the_task_names_written_under_another_name_is_asked_again() {
    const TASK: &str = "Explain in ANALYSIS.md what calculate_metrics in utils.py returns";
    let write = |path: &str| {
        json!({"steps": [
            {"id": "read", "operation": "read_file", "params": {"file_path": "utils.py"}},
            {"id": "write", "operation": "write_file", "depends_on": ["read"],
             "params": {"file_path": path,
                        "content": "calculate_metrics returns the mean of the values.\n"}}]})
        .to_string()
    };
    let sandbox = Sandbox::new(&[
        (
            "utils.py",
            "def calculate_metrics(values):\n    return sum(values) / len(values)\n",
        ),
        ("README.md", "utils\n"),
    ]);
    let llm = FakeLlm::in_order(vec![
        chat(&write("analysis_report.txt")),
        chat(&write("ANALYSIS.md")),
    ]);
    let output = run_task(&sandbox, &llm, TASK);
    assert_exit(&output, 0);
    let second = last_user_message(&llm.bodies_except_reproduction()[1]);
    assert!(
        second.contains(
            "the task names ANALYSIS.md, which does not exist yet, and the flow writes \
             analysis_report.txt instead"
        ),
        "{second}"
    );
    assert!(
        sandbox
            .task_dir("t")
            .join("final_output/ANALYSIS.md")
            .is_file()
    );
    // Kept: planning fails with the reason, and nothing is written or called done.
    let sandbox = Sandbox::new(&[
        ("utils.py", "def calculate_metrics(v):\n    return v\n"),
        ("README.md", "utils\n"),
    ]);
    let llm = FakeLlm::in_order(vec![
        chat(&write("analysis_report.txt")),
        chat(&write("analysis_report.txt")),
    ]);
    let output = run_task(&sandbox, &llm, TASK);
    assert_exit(&output, 1);
    let status = sandbox.status("t");
    assert_eq!(status["state"], json!("failed"));
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("writes analysis_report.txt instead"),
        "{message}"
    );
}

/// The real 0.5B's other plan for the same task (run 5): an answer alone, ANALYSIS.md never
/// written, and the flow succeeded. A task that names a file the repository lacks, and a plan that
/// writes no file: only the model knows whether the task asks for the file or only asks a
/// question, so it is asked once, and its answer stands.
#[test]
fn a_plan_that_writes_no_file_the_task_names_is_asked_about_once() {
    const TASK: &str = "Explain in ANALYSIS.md what calculate_metrics in utils.py returns";
    let answer_only = json!({"steps": [
        {"id": "explain", "operation": "analyze_code", "final_answer": true,
         "params": {"file_path": "utils.py", "query": "What does calculate_metrics return?"}}]})
    .to_string();
    let writes = json!({"steps": [
        {"id": "read", "operation": "read_file", "params": {"file_path": "utils.py"}},
        {"id": "write", "operation": "write_file", "depends_on": ["read"],
         "params": {"file_path": "ANALYSIS.md",
                    "content": "calculate_metrics returns the mean of the values.\n"}}]})
    .to_string();
    let repo = || {
        Sandbox::new(&[
            (
                "utils.py",
                "def calculate_metrics(values):\n    return sum(values) / len(values)\n",
            ),
            ("README.md", "utils\n"),
        ])
    };
    // Asked, the model writes the file.
    let sandbox = repo();
    let llm = FakeLlm::in_order(vec![chat(&answer_only), chat(&writes)]);
    let output = run_task(&sandbox, &llm, TASK);
    assert_exit(&output, 0);
    let asked = last_user_message(&llm.bodies_except_reproduction()[1]);
    assert!(
        asked.contains(
            "the task names ANALYSIS.md, which does not exist yet, and the flow \
                        writes no file"
        ),
        "{asked}"
    );
    assert!(
        sandbox
            .task_dir("t")
            .join("final_output/ANALYSIS.md")
            .is_file()
    );
    // Asked, the model gives the same plan again: a question, answered; its plan stands.
    let sandbox = repo();
    let analysis = json!({"summary": "It returns the mean.", "findings": []}).to_string();
    let llm = FakeLlm::in_order(vec![
        chat(&answer_only),
        chat(&answer_only),
        chat(&analysis),
    ]);
    let output = run_task(&sandbox, &llm, TASK);
    let status = sandbox.status("t");
    assert_eq!(status["steps"][0]["id"], json!("explain"), "{status}");
    assert!(
        !status["message"]
            .as_str()
            .unwrap_or_default()
            .contains("same answer again"),
        "{status}: {}",
        stderr(&output)
    );
}

/// The model's `task` field never replaces the user's task.
#[test]
fn the_users_task_is_the_task() {
    let sandbox = utils_repo();
    // (Issue 24: a plan that only reads is no longer a plan for a fix, so this one writes.)
    let plan = json!({"version": 1, "task": "<the task>", "steps": [{"id": "r",
        "operation": "read_file", "params": {"file_path": "utils.py"}}, {"id": "w",
        "operation": "write_file", "depends_on": ["r"], "params": {"file_path": "utils.py",
        "content": "def calculate_metrics(values):\n    return sum(values) / \
                    max(len(values), 1)\n"}}]});
    let llm = FakeLlm::in_order(vec![chat(&plan.to_string()), chat("Read utils.py.")]);
    assert_exit(&run_task(&sandbox, &llm, FIX_TASK), 0);
    assert_eq!(sandbox.status("t")["task"], json!(FIX_TASK));
    let flow = read_json(&sandbox.task_dir("t").join("flow.json"));
    assert_eq!(flow["task"], json!(FIX_TASK));
}

fn spawn(sandbox: &Sandbox, llm: &FakeLlm) -> Child {
    sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", FIX_TASK])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// SIGINT and SIGTERM during a long planning call end it within a second (they used to do
/// nothing for minutes); the task shows in `status` and `resume` plans it again.
#[test]
fn a_signal_during_planning_stops_it_at_once_and_resume_plans_again() {
    for signal in [rustix::process::Signal::INT, rustix::process::Signal::TERM] {
        let sandbox = utils_repo();
        let llm = FakeLlm::in_order(vec![Reply::Slow {
            delay: Duration::from_secs(60),
        }]);
        let child = spawn(&sandbox, &llm);
        let deadline = Instant::now() + Duration::from_secs(20);
        while llm.requests().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!llm.requests().is_empty(), "planning never started");
        let pid = rustix::process::Pid::from_child(&child);
        let sent = Instant::now();
        rustix::process::kill_process(pid, signal).unwrap();
        let output = child.wait_with_output().unwrap();
        // Liveness only: the model's answer is 60 s away, so ending well before it is the
        // behaviour; how soon is measured by scripts/bench-responsiveness.
        assert!(
            sent.elapsed() < Duration::from_secs(45),
            "the signal waited for the model: {:?}",
            sent.elapsed()
        );
        assert_eq!(output.status.code(), Some(130), "{}", stderr(&output));
        let status = sandbox
            .ocflow()
            .args(["--json", "status", "t"])
            .output()
            .unwrap();
        assert_exit(&status, 0);
        let status: Value = serde_json::from_str(&stdout(&status)).unwrap();
        assert_eq!(status["state"], json!("interrupted"), "{status}");

        // A plan that changes the file (issue 24: one that only reads is no fix).
        let plan = json!({"steps": [{"id": "r", "operation": "read_file",
            "params": {"file_path": "utils.py"}}, {"id": "w", "operation": "write_file",
            "depends_on": ["r"], "params": {"file_path": "utils.py", "content": "x = 1\n"}}]});
        let llm = FakeLlm::in_order(vec![chat(&plan.to_string()), chat("Wrote it.")]);
        let resumed = sandbox
            .ocflow_llm(&llm.base_url())
            .args(["resume", "t"])
            .output()
            .unwrap();
        assert_exit(&resumed, 0);
        assert_eq!(sandbox.status("t")["state"], json!("succeeded"));
    }
}

/// SmolLM2's summary of a failed flow said it succeeded and named a file it never made: the
/// facts now come first, and its false claims are marked, never shown as true.
#[test]
fn a_summary_never_says_a_failed_flow_succeeded() {
    let sandbox = utils_repo();
    let flow = json!([
        // (Issue 37: content that drops the file's functions is refused; this keeps them.)
        {"id": "rename", "operation": "write_file",
         "params": {"file_path": "utils.py", "content": "def calculate_metrics(values):\n    \
            return 0\n\n\ndef kebabize(word):\n    return word\n"}},
        {"id": "test", "operation": "execute_shell_command", "depends_on": ["rename"],
         "params": {"command": "exit 1"}}
    ]);
    let smol = "The flow succeeded. Files changed: - utils.py (modified) - kebabize.py (created)";
    let llm = FakeLlm::in_order(vec![chat(smol)]);
    let plan = sandbox.flow(&flow);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--no-recovery", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 1);
    let summary = std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap();
    let facts = summary.find("The flow `t` failed.").expect("the facts");
    let words = summary
        .find("## The model's summary")
        .expect("the model's part, labelled");
    assert!(facts < words, "the facts come first:\n{summary}");
    assert!(
        summary.contains("~~The flow succeeded.~~ *(not so: the flow failed)*"),
        "{summary}"
    );
    assert!(
        summary.contains("this flow did not change kebabize.py"),
        "{summary}"
    );
    let unmarked = summary.replace("~~The flow succeeded.~~", "");
    assert!(!unmarked.contains("The flow succeeded"), "{summary}");
}

/// SmolLM2's recovery answers (an object where a strategy name belongs, twice the same): the
/// re-ask says in plain words what `strategy` must be (it used to pass on serde's "unknown
/// variant `name` … at line 3 column 10"), the same answer twice ends the re-asks, and every
/// call is counted (it said `recovery_calls: 0` after 3 calls).
#[test]
fn unusable_recovery_answers_are_re_asked_plainly_and_counted() {
    let sandbox = utils_repo();
    std::fs::create_dir_all(&sandbox.workspace).unwrap();
    std::fs::write(
        sandbox.workspace.join("ocflow.toml"),
        "[llm]\nmax_attempts = 1\n",
    )
    .unwrap();
    let smol = concat!(
        r#"{"strategy": {"name": "test_function", "description": "This is a test function "#,
        r#"that tests the `assert` statement.", "type": "test_function"},"#,
        "\n",
        r#" "reason": "The reason for using this approach is to provide a way to modify "#,
        r#"steps in a step-by-step manner"}"#
    );
    let llm = FakeLlm::in_order(vec![chat(smol), chat(smol), chat("Nothing worked.")]);
    let flow = json!([{"id": "test", "operation": "execute_shell_command",
        "params": {"command": "exit 1"}}]);
    let plan = sandbox.flow(&flow);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 1);
    let bodies = llm.bodies();
    let reask = super::fake_llm::last_user_message(&bodies[1]);
    assert!(
        reask.contains("`strategy` must be one of these strings: \"retry\"")
            && reask.contains("not an object"),
        "{reask}"
    );
    assert!(
        !reask.contains("unknown variant") && !reask.contains("line 3 column"),
        "{reask}"
    );
    let status = sandbox.status("t");
    assert_eq!(status["recovery_calls"], json!(2), "{status}");
    let step = sandbox.step_status("t", "test");
    let message = step["message"].as_str().unwrap_or_default().to_string()
        + &std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap();
    assert!(message.contains("the same answer again"), "{message}");
    let temperatures: Vec<f64> = bodies[..2]
        .iter()
        .map(|b| b["temperature"].as_f64().unwrap_or(0.0))
        .collect();
    assert!(temperatures[1] > temperatures[0], "{temperatures:?}");
}

/// SmolLM2 answered a code fix twice with the same broken line: the re-ask goes out warmer
/// (through ocflow's own LLM bridge), and the same answer twice ends the step at once, saying
/// so; utils.py is never written.
#[test]
fn the_same_broken_code_twice_ends_the_step_and_re_asks_go_warmer() {
    let sandbox = utils_repo();
    let broken = "```python\ndef calculate_metrics(values):\n    t = sum(values)\n    \
                  return {\"total\": t, \"mean\": t, \"variance\": s / len(values}}\n```";
    let llm = FakeLlm::in_order(vec![chat(broken), chat(broken)]);
    let flow = json!([{"id": "fix", "operation": "modify_code",
        "params": {"file_path": "utils.py", "instructions": "return zeros for an empty list"}}]);
    let plan = sandbox.flow(&flow);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--no-recovery", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 1);
    let step = sandbox.step_status("t", "fix");
    let message = step["message"].as_str().unwrap_or_default();
    assert!(message.contains("the same answer again"), "{step}");
    let temperatures: Vec<f64> = llm.bodies()[..2]
        .iter()
        .map(|b| b["temperature"].as_f64().unwrap())
        .collect();
    assert!(temperatures[1] > temperatures[0], "{temperatures:?}");
    assert!(!sandbox.task_dir("t").join("final_output/utils.py").exists());
}

/// Gemma under json_object answered `{}` to the planner three times (small-models.md §3): the
/// second identical answer ends the re-asks, so a slow CPU model is not asked a third time.
#[test]
fn the_same_empty_plan_twice_ends_planning_early() {
    let sandbox = utils_repo();
    let llm = FakeLlm::in_order(vec![chat("{}\n"), chat("{}\n"), chat("{}\n")]);
    let output = run_task(&sandbox, &llm, FIX_TASK);
    assert_exit(&output, 1);
    // Two plans, then one short question (what the task asks for, to plan it on utils.py),
    // answered `{}` again: no choice.
    assert_eq!(llm.requests().len(), 3, "asked for a plan only twice");
    assert!(last_user_message(&llm.bodies()[2]).contains("Say what the task asks for"));
    let message = sandbox.status("t")["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("the flow needs a `steps` array")
            && message.contains("the same answer again"),
        "{message}"
    );
}

/// A signal while the model writes the summary (Gemma took 23–115 s a summary) ends the wait
/// at once: the summary is written from the journal and the finished flow stays finished.
#[test]
fn a_signal_during_the_summary_writes_it_from_the_journal_at_once() {
    let sandbox = utils_repo();
    let llm = FakeLlm::in_order(vec![Reply::Slow {
        delay: Duration::from_secs(60),
    }]);
    // (Issue 37: a flow of reads alone ends `no_change`; this one changes the file.)
    let fixed = "def calculate_metrics(values):\n    return sum(values) / max(len(values), 1)\n";
    let flow = json!([{"id": "w", "operation": "write_file",
        "params": {"file_path": "utils.py", "content": fixed}}]);
    let plan = sandbox.flow(&flow);
    let child = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while llm.requests().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !llm.requests().is_empty(),
        "the summary was never asked for"
    );
    let sent = Instant::now();
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::INT,
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    // Liveness only: the model's answer is 60 s away, so ending well before it is the
    // behaviour; how soon is measured by scripts/bench-responsiveness.
    assert!(
        sent.elapsed() < Duration::from_secs(45),
        "the signal waited for the model: {:?}",
        sent.elapsed()
    );
    assert!(
        stderr(&output).contains("interrupted while the model wrote the summary"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        sandbox.status("t")["state"],
        json!("succeeded"),
        "{}",
        stderr(&output)
    );
    let summary = std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap();
    assert!(summary.contains("The flow `t` succeeded."), "{summary}");
    // The flow had finished: its outcome is the exit code, not the interrupt's 130.
    assert_eq!(output.status.code(), Some(0));
}

const FIX_MATHX: &str = "Fix moving_average in mathx.py: it drops the last window, e.g. \
                         moving_average([1, 2, 3, 4], 2) must be [1.5, 2.5, 3.5]. Then run the \
                         tests with: python3 -m unittest discover -s tests -t .";

/// Qwen2.5-Coder-0.5B's whole plan for FIX_MATHX, word for word.
const QWEN_READ_ONLY_PLAN: &str = concat!(
    r#"{"steps": [ {"id": "read_file", "operation": "read_file", "#,
    r#""params": {"file_path": "mathx.py"}}]}"#
);

fn mathx_repo() -> Sandbox {
    Sandbox::new(&[
        (
            "mathx.py",
            "def moving_average(values, window):\n    return [sum(values[i:i + window]) / \
             window for i in range(len(values) - window)]\n",
        ),
        ("tests/__init__.py", ""),
        (
            "tests/test_mathx.py",
            "import unittest\nfrom mathx import moving_average\n\n\n\
             class T(unittest.TestCase):\n    def test_last_window(self):\n        \
             self.assertEqual(moving_average([1, 2, 3, 4], 2), [1.5, 2.5, 3.5])\n",
        ),
    ])
}

/// Issue 24: a plan that only reads, for a task that asks for a fix, is re-asked with the
/// reason; when the model insists, planning fails honestly: never `succeeded`, exit 0. (Issue
/// 37: the reason is that the plan delivers nothing, whatever the task says.)
#[test]
fn a_plan_that_only_reads_for_a_fix_is_reasked_then_fails() {
    let sandbox = mathx_repo();
    let llm = FakeLlm::in_order(vec![chat(QWEN_READ_ONLY_PLAN), chat(QWEN_READ_ONLY_PLAN)]);
    let output = run_task(&sandbox, &llm, FIX_MATHX);
    assert_exit(&output, 1);
    let status = sandbox.status("t");
    assert_ne!(status["state"], json!("succeeded"));
    // (Issue 37: the reason is the evidence, what the plan delivers, not the task's words.)
    let second = llm.bodies()[1].to_string();
    assert!(second.contains("the plan delivers nothing"), "{second}");
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("mathx.py")).unwrap(),
        mathx_repo_source()
    );
}

fn mathx_repo_source() -> String {
    std::fs::read_to_string(mathx_repo().repo.join("mathx.py")).unwrap()
}

/// Issue 24: the test command the task names must be run by the plan. (Issue 37: it is one of
/// the flow's deliverables: a plan that never runs it gets a step that does, after the change,
/// without asking the model again; this test said the model was asked again.)
#[test]
fn the_test_command_the_task_names_must_pass_at_the_end() {
    let sandbox = mathx_repo();
    let fixed = "def moving_average(values, window):\n    return [sum(values[i:i + window]) / \
                 window for i in range(len(values) - window + 1)]\n";
    let without_tests = json!({"steps": [
        {"id": "fix", "operation": "write_file",
         "params": {"file_path": "mathx.py", "content": fixed}}]});
    let llm = FakeLlm::in_order(vec![
        chat(&without_tests.to_string()),
        chat("Fixed moving_average; the tests pass."),
    ]);
    let output = run_task(&sandbox, &llm, FIX_MATHX);
    assert_exit(&output, 0);
    assert_eq!(llm.requests().len(), 2, "planned once, then the summary");
    let check = sandbox.step_status("t", "check");
    assert_eq!(check["status"], json!("succeeded"));
    let flow = read_json(&sandbox.task_dir("t").join("flow.json"));
    let step = flow["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "check")
        .unwrap();
    assert_eq!(
        (
            step["params"]["command"].clone(),
            step["depends_on"].clone()
        ),
        (
            json!("python3 -m unittest discover -s tests -t ."),
            json!(["fix"])
        )
    );
    let met: Vec<(String, bool)> = sandbox.status("t")["deliverables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["what"].as_str().unwrap().to_string(),
                d["met"] == json!(true),
            )
        })
        .collect();
    assert!(
        met.contains(&(
            "python3 -m unittest discover -s tests -t .".to_string(),
            true
        )),
        "{met:?}"
    );
}

/// Issue 37: the test command is read up to its end, not into the next sentence (a real task
/// said "… -t . Do not edit anything under tests/"), and when the change breaks it, the flow
/// fails however its steps went.
#[test]
fn a_change_that_fails_the_named_tests_is_never_a_success() {
    let sandbox = mathx_repo();
    let still_wrong = "def moving_average(values, window):\n    return [sum(values[i:i + window]) \
                       / window for i in range(len(values) - window)] + [0]\n";
    let plan = json!({"steps": [
        {"id": "fix", "operation": "write_file",
         "params": {"file_path": "mathx.py", "content": still_wrong}}]});
    let llm = FakeLlm::in_order(vec![chat(&plan.to_string()), chat("Fixed it.")]);
    let task = "Fix moving_average in mathx.py; run the tests with: python3 -m unittest discover \
                -s tests -t . Do not edit anything under tests/";
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--no-recovery", "--task-id", "t", task])
        .output()
        .unwrap();
    assert_exit(&output, 1);
    let status = sandbox.status("t");
    assert_eq!(status["state"], json!("failed"));
    assert_eq!(
        sandbox.step_status("t", "check")["status"],
        json!("failed"),
        "{status}"
    );
}

/// Issue 24: a task no operation can do is said to be outside what ocflow does. (Issue 37:
/// the model says so, never a list of words: it refuses with its reason, exit 2, no flow; this
/// test said no model was asked. A model that plans it anyway cannot make it a success.)
#[test]
fn a_task_to_reach_a_person_is_refused_by_the_model_and_never_succeeds() {
    let task = "Email report.csv to alice@example.com and confirm that she received it.";
    let sandbox = Sandbox::new(&[("report.csv", "a,b\n1,2\n")]);
    let refusal = json!({"refuse": "it asks to email a person and confirm she received it"});
    let llm = FakeLlm::in_order(vec![chat(&refusal.to_string())]);
    let output = run_task(&sandbox, &llm, task);
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("the model refused the task: it asks to email a person"),
        "{}",
        stderr(&output)
    );
    let status = sandbox.status("t");
    assert_eq!(
        (status["state"].clone(), status["steps"].clone()),
        (json!("failed"), json!([]))
    );
    // Planned anyway, as Qwen2.5-Coder-0.5B did (one read_file): never a success.
    let sandbox = Sandbox::new(&[("report.csv", "a,b\n1,2\n")]);
    let read = json!({"steps": [{"id": "read_report", "operation": "read_file",
        "params": {"file_path": "report.csv"}}]});
    let llm = FakeLlm::in_order(vec![chat(&read.to_string()), chat(&read.to_string())]);
    let output = run_task(&sandbox, &llm, task);
    assert_exit(&output, 1);
    assert_ne!(sandbox.status("t")["state"], json!("succeeded"));
}

/// Issue 24: a flow whose steps all succeed but only read, for a task that asks for a change,
/// ends `no_change` with the reason and exit 1 — never `succeeded`. (Issue 37: whatever the
/// task asks.)
#[test]
fn a_flow_that_did_nothing_the_task_asked_ends_no_change() {
    let sandbox = mathx_repo();
    let flow = json!({"task": FIX_MATHX, "steps": [{"id": "read_file",
        "operation": "read_file", "params": {"file_path": "mathx.py"}}]});
    let output = sandbox.run(&flow, "t");
    assert_exit(&output, 1);
    // Nothing failed: the advice is a new plan, not `resume --retry-failed`.
    let ending = stdout(&output);
    assert!(
        ending.contains("plan again, naming the change") && !ending.contains("--retry-failed"),
        "{ending}"
    );
    let status = sandbox.status("t");
    assert_eq!(status["state"], json!("no_change"));
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("not done: the flow delivered nothing"),
        "{status}"
    );
    let summary = std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap();
    assert!(
        summary.contains("finished without doing anything the task asked"),
        "{summary}"
    );
    // (Issue 37: nor does a read answer a question: the task's words decide nothing, and this
    // test said a task asking only for an answer could read and stop. The answer must come from
    // a step that answers from the file.)
    let explain = json!({"task": "Explain what mathx.py does", "steps": [{"id": "r",
        "operation": "read_file", "params": {"file_path": "mathx.py"}}]});
    assert_exit(&sandbox.run(&explain, "e"), 1);
    assert_eq!(sandbox.status("e")["state"], json!("no_change"));
}

/// Issue 24: the model's summary of a flow that only read mathx.py claimed a fix and no failed
/// tests (Qwen2.5-Coder wrote "Failed tests: - None"), and another "read" the report from an
/// e-mail address: each claim is struck through in summary.md beside the fact, listed in
/// `flow_finished`, and the true sentences are left alone.
#[test]
fn the_models_false_claims_are_marked_and_listed_in_flow_finished() {
    let sandbox = mathx_repo();
    let flow = json!({"task": FIX_MATHX, "steps": [{"id": "read_file",
        "operation": "read_file", "params": {"file_path": "mathx.py"}}]});
    let qwen = "The flow read mathx.py. Fixed moving_average in mathx.py.\n\nFailed tests:\n\
                - None\n\nThe email report.csv file was successfully read from \
                Alice@example.com.";
    let llm = FakeLlm::in_order(vec![chat(qwen)]);
    let plan = sandbox.flow(&flow);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["--json", "run", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 1);
    let summary = std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap();
    assert!(
        summary.contains(
            "The flow read mathx.py. ~~Fixed moving_average in mathx.py.~~ *(not so: this flow \
             did not change mathx.py)*"
        ),
        "{summary}"
    );
    assert!(
        summary.contains(
            "Failed tests:\n- ~~None~~ *(not so: no step of this flow ran the tests or any \
             command)*"
        ),
        "{summary}"
    );
    assert!(
        summary.contains("~~The email report.csv file was successfully read from"),
        "{summary}"
    );
    let finished: Value = stdout(&output)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "flow_finished")
        .expect("flow_finished");
    let claims: Vec<(&str, &str)> = finished["contradicted_claims"]
        .as_array()
        .expect("the claims")
        .iter()
        .map(|c| (c["claim"].as_str().unwrap(), c["fact"].as_str().unwrap()))
        .collect();
    assert_eq!(
        claims,
        vec![
            (
                "Fixed moving_average in mathx.py.",
                "this flow did not change mathx.py"
            ),
            ("None", "no step of this flow ran the tests or any command"),
            (
                "The email report.csv file was successfully read from Alice@example.com.",
                "no step of this flow sent or received anything (it ran no command)"
            ),
        ]
    );
    assert_eq!(finished["summary_text"].as_str().unwrap(), summary);
}

/// Issue 37: a question is answered by a step given the file, printed first at the terminal,
/// and the summary's model is told not to answer it (it never saw the file: a real 0.5B
/// model's summary said summarize() "returns an empty list", which is false). A plan that only
/// reads, as that model's was, gives no answer and never succeeds.
#[test]
fn a_question_is_answered_from_the_file_never_by_the_summary() {
    use super::fake_llm::Rule;
    let stats = "def summarize(values):\n    if not values:\n        return None\n    \
                 return {'min': min(values), 'max': max(values)}\n";
    let question = "What does summarize() in stats.py return for an empty list? Explain; do not \
                    change any file.";
    let sandbox = Sandbox::new(&[("stats.py", stats)]);
    let plan = json!({"deliverables": {"answer": question},
        "steps": [{"id": "explain", "operation": "analyze_code",
            "params": {"file_path": "stats.py", "query": question}}]});
    let analysis = json!({"summary": "For an empty list summarize() returns None (line 3).",
        "findings": []});
    let llm = FakeLlm::with_rules(vec![
        Rule::planner().reply(chat(&plan.to_string())),
        Rule::conversation_contains("You review source code").reply(chat(&analysis.to_string())),
        Rule::flow_summary().reply(chat("The flow analysed stats.py.")),
    ]);
    let output = run_task(&sandbox, &llm, question);
    assert_exit(&output, 0);
    let shown = stdout(&output);
    assert!(
        shown.trim_start().starts_with(
            "answer (step explain):\n  For an empty list \
                                         summarize() returns None (line 3)."
        ),
        "{shown}"
    );
    assert!(shown.contains("✓ answer to"), "{shown}");
    let asked = llm
        .bodies()
        .iter()
        .map(|b| b.to_string())
        .find(|b| b.contains("Write a concise summary"))
        .expect("the summary was asked");
    assert!(asked.contains("do not answer the task yourself"), "{asked}");
    assert!(
        sandbox
            .task_dir("t")
            .join("final_output")
            .read_dir()
            .unwrap()
            .next()
            .is_none()
    );
    // Qwen2.5-Coder-0.5B's plan for it: one read_file. Asked again, the same: no answer.
    let sandbox = Sandbox::new(&[("stats.py", stats)]);
    let read = json!({"steps": [{"id": "read_file", "operation": "read_file",
        "params": {"file_path": "stats.py"}}]});
    let llm = FakeLlm::in_order(vec![chat(&read.to_string()), chat(&read.to_string())]);
    let output = run_task(&sandbox, &llm, question);
    assert_exit(&output, 1);
    assert_ne!(sandbox.status("t")["state"], json!("succeeded"));
}

/// Issue 37: an answer about what code does is given the code's run as evidence. A real
/// Qwen2.5-Coder-0.5B read stats.py and answered that summarize([]) "returns a dictionary with
/// the smallest, largest, and mean" (it returns None), and every other check held. Once the plan
/// is valid the model is asked for a command whose output shows the answer; it runs before the
/// answer's step, on the repository as it is, and the step is given what it printed.
#[test]
fn a_questions_answer_is_given_the_codes_output_to_agree_with() {
    use super::fake_llm::Rule;
    let stats = "def summarize(values):\n    if not values:\n        return None\n    \
                 return {'min': min(values), 'max': max(values)}\n";
    let question = "What does summarize() in stats.py return for an empty list?";
    let sandbox = Sandbox::new(&[("stats.py", stats)]);
    let plan = json!({"deliverables": {"answer": question},
        "steps": [{"id": "explain", "operation": "analyze_code",
            "params": {"file_path": "stats.py", "query": question}}]});
    let shown = "python3 -c \"from stats import summarize; print(repr(summarize([])))\"";
    let analysis = json!({"summary": "It returns None.", "findings": []});
    let llm = FakeLlm::with_rules(vec![
        Rule::planner().reply(chat(&plan.to_string())),
        Rule::evidence().reply(chat(&json!({"command": shown}).to_string())),
        Rule::conversation_contains("You review source code").reply(chat(&analysis.to_string())),
        Rule::flow_summary().reply(chat("The flow analysed stats.py.")),
    ]);
    let output = run_task(&sandbox, &llm, question);
    assert_exit(&output, 0);
    let flow: Value = read_json(&sandbox.task_dir("t").join("flow.json"));
    let explain = flow["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "explain")
        .unwrap();
    assert_eq!(explain["params"]["evidence_from_step"], "evidence");
    assert_eq!(explain["depends_on"], json!(["evidence"]));
    let asked = llm
        .bodies()
        .iter()
        .map(last_user_message)
        .find(|m| m.contains("This is the file stats.py"))
        .expect("the answer's step asked the model");
    assert!(
        asked.contains("printed:\n```\nNone\n(exit code 0)\n```"),
        "{asked}"
    );
    assert!(asked.contains("Your answer must agree with what it printed"));
    assert_eq!(sandbox.status("t")["state"], "succeeded");
}

/// Issue 37: Qwen2.5-Coder-0.5B planned QuixBugs' gcd fix as one `modify_code` and no test run,
/// and its rewrite ended `succeeded` with the tests failing. The test file the task names is
/// now a check that must pass after the change: the same plan and rewrite fail, and the right
/// rewrite succeeds.
#[test]
fn a_fix_that_leaves_the_named_test_failing_is_never_a_success() {
    use super::fake_llm::Rule;
    let task = "Fix the bug in python_programs/gcd.py so that python_testcases/test_gcd.py passes.";
    let files = [
        ("python_programs/__init__.py", ""),
        (
            "python_programs/gcd.py",
            "def gcd(a, b):\n    if b == 0:\n        return a\n    else:\n        \
             return gcd(a % b, b)\n",
        ),
        ("python_testcases/__init__.py", ""),
        (
            "python_testcases/test_gcd.py",
            "from python_programs.gcd import gcd\n\n\ndef test_gcd():\n    \
             assert gcd(35, 21) == 7\n",
        ),
    ];
    let plan = json!({"steps": [{"id": "fix_gcd", "operation": "modify_code",
        "params": {"file_path": "python_programs/gcd.py", "instructions": "fix the bug"}}]});
    let run = |rewrite: &str| {
        let sandbox = Sandbox::new(&files);
        let llm = FakeLlm::with_rules(vec![
            Rule::planner().reply(chat(&plan.to_string())),
            Rule::prompt_contains("fix the bug").reply(chat(&format!("```python\n{rewrite}```\n"))),
            Rule::flow_summary().reply(chat("gcd is fixed.")),
        ]);
        let output = sandbox
            .ocflow_llm(&llm.base_url())
            .args(["run", "--no-recovery", "--task-id", "t", task])
            .output()
            .unwrap();
        (sandbox, output)
    };
    // The 0.5B's kind of answer: a change that keeps the bug (the recursion never ends).
    let (sandbox, output) = run(
        "def gcd(a, b):\n    if b == 0:\n        return a\n    return gcd(a % b, b)  # fixed\n",
    );
    assert_exit(&output, 1);
    assert_eq!(sandbox.status("t")["state"], json!("failed"));
    let check = sandbox.step_status("t", "check");
    assert_eq!(check["status"], json!("failed"), "{check}");
    let (sandbox, output) =
        run("def gcd(a, b):\n    if b == 0:\n        return a\n    return gcd(b, a % b)\n");
    assert_exit(&output, 0);
    assert_eq!(
        sandbox.step_status("t", "check")["status"],
        json!("succeeded")
    );
}

/// Issue 37: the bench's `fix` ended `succeeded` with a real Qwen2.5-Coder-0.5B's rewrite that
/// still divided by zero: the task names no test, and a changed file was all the evidence. The
/// model is now asked, after its plan, for a command that fails now and must pass after the
/// change (`prompts/reproduce.md`); a step runs it before any change and a check after.
fn reproduced(fix: &str, reproduction: &str) -> (Sandbox, FakeLlm, std::process::Output) {
    let abort = json!({"strategy": "abort", "reason": "the check still fails"});
    reproduced_with(fix, reproduction, abort)
}

fn reproduced_with(
    fix: &str,
    reproduction: &str,
    recovery: Value,
) -> (Sandbox, FakeLlm, std::process::Output) {
    let sandbox = utils_repo();
    let plan = json!({"steps": [{"id": "fix", "operation": "write_file",
        "params": {"file_path": "utils.py", "content": fix}}]});
    let abort = recovery;
    let llm = FakeLlm::with_rules(vec![
        Rule::reproduction()
            .reply(chat(&json!({"command": reproduction}).to_string()))
            .times(1),
        Rule::planner().reply(chat(&plan.to_string())).times(1),
        Rule::recovery().reply(chat(&abort.to_string())),
        Rule::reflection().reply(chat("The fix did not handle an empty list.")),
        Rule::flow_summary().reply(chat("Changed utils.py.")),
    ]);
    let output = run_task(&sandbox, &llm, FIX_TASK);
    (sandbox, llm, output)
}

const STILL_DIVIDES: &str =
    "def calculate_metrics(values):\n    total = sum(values)\n    return total / len(values)\n";
const EMPTY_CRASHES: &str =
    "python3 -c \"from utils import calculate_metrics as c; assert c([]) == 0\"";

/// The deliverable of `command`, `null` when the flow has none.
fn command_check_of(sandbox: &Sandbox, command: &str) -> Value {
    let status = sandbox.status("t");
    status["deliverables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == json!("command") && d["what"] == json!(command))
        .cloned()
        .unwrap_or(Value::Null)
}

/// The deliverable of the reproduced command (a recovery may leave a rewritten check, `true`,
/// beside it).
fn command_check(sandbox: &Sandbox) -> Value {
    let status = sandbox.status("t");
    status["deliverables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == json!("command") && d["what"] != json!("true"))
        .cloned()
        .unwrap_or_else(|| panic!("no command deliverable: {status}"))
}

#[test]
fn a_change_that_does_not_fix_the_problem_fails_on_the_models_reproduction() {
    let (sandbox, _llm, output) = reproduced(STILL_DIVIDES, EMPTY_CRASHES);
    assert_exit(&output, 1);
    let status = sandbox.status("t");
    assert_eq!(status["state"], json!("failed"), "{status}");
    let flow = read_json(&sandbox.task_dir("t").join("flow.json"));
    let steps = flow["steps"].as_array().unwrap();
    let step = |id: &str| steps.iter().find(|s| s["id"] == json!(id)).unwrap().clone();
    // Before any change, on the repository as it was; the check after the change.
    assert_eq!(step("reproduce")["operation"], json!("reproduce"));
    assert!(step("reproduce").get("depends_on").is_none(), "{flow}");
    assert_eq!(step("check")["depends_on"], json!(["fix"]), "{flow}");
    assert_eq!(
        flow["deliverables"]["commands"][0]["reproduced_by"],
        json!("reproduce"),
        "{flow}"
    );
    let check = command_check(&sandbox);
    assert_eq!(check["met"], json!(false), "{check}");
}

#[test]
fn a_fix_passes_the_command_that_failed_before_it() {
    let fixed = "def calculate_metrics(values):\n    if not values:\n        return 0\n    \
                 return sum(values) / len(values)\n";
    let (sandbox, _llm, output) = reproduced(fixed, EMPTY_CRASHES);
    assert_exit(&output, 0);
    assert_eq!(sandbox.status("t")["state"], json!("succeeded"));
    let check = command_check(&sandbox);
    assert_eq!(check["met"], json!(true), "{check}");
    let detail = check["detail"].as_str().unwrap();
    assert!(
        detail.contains("it failed before the change (step reproduce, exit code 1)")
            && detail.contains("passed in step check"),
        "{detail}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("step reproduce was added to run `python3 -c")
            && stderr.contains("done when: utils.py changed; `python3 -c")
            && stderr.contains("fails before the change and passes after it"),
        "{stderr}"
    );
}

/// A reproduction that shows nothing leaves the change unshown: the flow fails, saying so.
/// (Issue 37's bench, second run: a real Qwen2.5-Coder-0.5B answered `import math; assert
/// math.isclose(0, 0)`, which passes before any change, for a fix that still divided by zero;
/// taken as "shows no fix", the flow ended a false success. This test first said so.)
#[test]
fn a_reproduction_that_shows_nothing_leaves_the_change_unshown() {
    let passes = "python3 -c 'import math; assert math.isclose(0, 0)'";
    let (sandbox, _llm, output) = reproduced(STILL_DIVIDES, passes);
    assert_exit(&output, 1);
    assert_eq!(sandbox.status("t")["state"], json!("failed"));
    let check = command_check(&sandbox);
    assert_eq!(check["met"], json!(false), "{check}");
    let detail = check["detail"].as_str().unwrap().to_string();
    assert!(
        detail.contains("the problem was never shown before the change")
            && detail.contains("the command passes before any change"),
        "{detail}"
    );
}

/// An answer that is no shell command is asked again once with the reason; given twice, the
/// change would be checked by nothing, and the flow stops before it runs, saying what to add
/// to the task (exit 2). (The 0.5B wrote `calculate_metrics([])`, then a whole function in an
/// unclosed `python3 -c '…`: the bench's third run ended a false success on files alone.)
#[test]
fn a_change_nothing_can_check_is_not_run() {
    let sandbox = utils_repo();
    let plan = json!({"steps": [{"id": "fix", "operation": "write_file",
        "params": {"file_path": "utils.py", "content": STILL_DIVIDES}}]});
    let junk = json!({"command": "calculate_metrics([])"}).to_string();
    let llm = FakeLlm::with_rules(vec![
        Rule::reproduction().reply(chat(&junk)).times(2),
        Rule::planner().reply(chat(&plan.to_string())).times(1),
    ]);
    let output = run_task(&sandbox, &llm, FIX_TASK);
    assert_exit(&output, 2);
    let message = sandbox.status("t")["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("nothing would check the change")
            && message.contains("`calculate_metrics([])` is not a shell command")
            && message.contains("so that tests/test_x.py passes"),
        "{message}"
    );
    let again = last_user_message(&llm.bodies()[2]);
    assert!(again.contains("That cannot show the problem"), "{again}");
    assert_eq!(sandbox.status("t")["steps"], json!([]));
}

/// A reproduction that shows nothing is a failed step, so a recovery may give it a command that
/// does: the change is then shown by it.
#[test]
fn a_recovery_may_give_the_reproduction_a_command_that_shows_the_problem() {
    let fixed = "def calculate_metrics(values):\n    if not values:\n        return 0\n    \
                 return sum(values) / len(values)\n";
    let better = json!({"strategy": "modify", "reason": "that command passed already",
        "step": {"id": "reproduce", "params": {"command": EMPTY_CRASHES}}});
    let passes = "python3 -c 'import math; assert math.isclose(0, 0)'";
    let (sandbox, _llm, output) = reproduced_with(fixed, passes, better);
    assert_exit(&output, 0);
    assert_eq!(sandbox.status("t")["state"], json!("succeeded"));
    let check = command_check_of(&sandbox, EMPTY_CRASHES);
    assert_eq!(check["met"], json!(true), "{check}");
    assert!(
        check["detail"]
            .as_str()
            .unwrap()
            .contains("it failed before the change (step reproduce"),
        "{check}"
    );
}

/// A recovery that rewrites the check's command until it passes does not make the change
/// shown: the deliverable is its command, not whatever its step ends up running.
#[test]
fn a_check_rewritten_to_pass_shows_nothing() {
    let cheat = json!({"strategy": "modify", "reason": "the check is too strict",
        "step": {"id": "check", "params": {"command": "true"}}});
    let (sandbox, _llm, output) = reproduced_with(STILL_DIVIDES, EMPTY_CRASHES, cheat);
    assert_exit(&output, 1);
    let status = sandbox.status("t");
    assert_eq!(status["state"], json!("failed"), "{status}");
    // The revision keeps the reproduced command, run again by a step of its own.
    let check = command_check(&sandbox);
    assert_eq!(check["what"], json!(EMPTY_CRASHES), "{check}");
    assert_eq!(check["met"], json!(false), "{check}");
    let flow = read_json(&sandbox.task_dir("t").join("flow.json"));
    let reproduced = flow["deliverables"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["reproduced_by"] == json!("reproduce"))
        .cloned();
    assert_eq!(
        reproduced.map(|c| c["step"].clone()),
        Some(json!("check_2")),
        "{flow}"
    );
}

/// An Exercism-like exercise: a stub and its tests, which fail on the stub.
fn exercise_repo() -> Sandbox {
    Sandbox::new(&[
        ("double.py", "def double(n):\n    pass\n"),
        (
            "double_test.py",
            "import unittest\n\nfrom double import double\n\n\n\
             class DoubleTest(unittest.TestCase):\n    \
             def test_two(self):\n        self.assertEqual(double(2), 4)\n",
        ),
    ])
}

/// Issue 41's first eval: a real Qwen2.5-Coder-0.5B's reproductions of two Exercism exercises
/// passed on the stubs (`python3 -c 'print(f(x))'` exits 0 on a function that returns None), so
/// their flows failed at the `reproduce` step although one change solved its exercise. The
/// repository's own tests fail on the stub: the reproduction falls back to them, and the check
/// after the change runs them.
fn exercise(fix: &str) -> (Sandbox, std::process::Output) {
    exercise_planned(json!({"steps": [{"id": "fix", "operation": "write_file",
        "params": {"file_path": "double.py", "content": fix}}]}))
}

fn exercise_planned(plan: Value) -> (Sandbox, std::process::Output) {
    let sandbox = exercise_repo();
    let llm = FakeLlm::with_rules(vec![
        Rule::reproduction()
            .reply(chat(
                &json!({"command": "python3 -c 'from double import double; print(double(2))'"})
                    .to_string(),
            ))
            .times(1),
        Rule::planner().reply(chat(&plan.to_string())).times(1),
        Rule::recovery().reply(chat(
            &json!({"strategy": "abort", "reason": "the tests still fail"}).to_string(),
        )),
        Rule::reflection().reply(chat("The stub still returns None.")),
        Rule::flow_summary().reply(chat("Implemented double.")),
    ]);
    let output = run_task(&sandbox, &llm, "Implement double(n) in double.py: twice n.");
    (sandbox, output)
}

#[test]
fn a_reproduction_that_shows_nothing_falls_back_to_the_repositorys_failing_tests() {
    let (sandbox, output) = exercise("def double(n):\n    return n * 2\n");
    assert_exit(&output, 0);
    assert_eq!(sandbox.status("t")["state"], json!("succeeded"));
    let flow = read_json(&sandbox.task_dir("t").join("flow.json"));
    let steps = flow["steps"].as_array().unwrap();
    let step = |id: &str| steps.iter().find(|s| s["id"] == json!(id)).unwrap().clone();
    assert_eq!(
        step("reproduce")["params"]["fallback_command"],
        json!("python3 -m pytest -q"),
        "{flow}"
    );
    assert_eq!(
        step("check")["params"]["command_from_step"],
        json!("reproduce"),
        "{flow}"
    );
    let check = command_check(&sandbox);
    assert_eq!(check["met"], json!(true), "{check}");
    let detail = check["detail"].as_str().unwrap();
    assert!(
        detail.contains("the repository's tests `python3 -m pytest -q` failed before the change")
            && detail.contains("showed nothing"),
        "{detail}"
    );
    // The check ran the tests, not the model's command.
    let result = sandbox.result("t", "check");
    assert_eq!(result["command"], json!("python3 -m pytest -q"), "{result}");
}

#[test]
fn a_change_the_repositorys_tests_still_reject_fails_after_the_fallback() {
    let (sandbox, output) = exercise("def double(n):\n    return n + 1  # doubled\n");
    assert_exit(&output, 1);
    assert_eq!(sandbox.status("t")["state"], json!("failed"));
    let check = command_check(&sandbox);
    assert_eq!(check["met"], json!(false), "{check}");
}

/// The tests that stood in for the model's reproduction are no evidence once the flow changed
/// them: a plan that rewrites the failing test to pass (and the code wrongly) is not done.
#[test]
fn tests_the_flow_changed_cannot_show_the_problem_solved() {
    let (sandbox, output) = exercise_planned(json!({"steps": [
        {"id": "fix", "operation": "write_file",
         "params": {"file_path": "double.py", "content": "def double(n):\n    return n + 1\n"}},
        // The test's expectation rewritten to the wrong code's answer.
        {"id": "test", "operation": "write_file",
         "params": {"file_path": "double_test.py",
                    "content": "import unittest\n\nfrom double import double\n\n\n\
                                class DoubleTest(unittest.TestCase):\n    \
                                def test_two(self):\n        self.assertEqual(double(2), 3)\n"}},
    ]}));
    assert_exit(&output, 1);
    assert_ne!(sandbox.status("t")["state"], json!("succeeded"));
    let check = command_check(&sandbox);
    assert_eq!(check["met"], json!(false), "{check}");
    let detail = check["detail"].as_str().unwrap();
    assert!(
        detail.contains("the flow changed tests (double_test.py)"),
        "{detail}\n{}\n{}",
        sandbox.status("t"),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Issue 41's eval: a real Qwen2.5-Coder-0.5B's reproduction for Exercism's poker was twice no
/// shell command (`python3 -c 'import poker; poker.best_hands([...]')`), which stopped the flow
/// before it ran, asking the user to name a test — in a repository whose tests fail on the stub.
/// The repository's tests now stand in for it.
#[test]
fn the_repositorys_tests_stand_in_for_a_reproduction_the_model_cannot_write() {
    let sandbox = exercise_repo();
    let plan = json!({"steps": [{"id": "fix", "operation": "write_file",
        "params": {"file_path": "double.py", "content": "def double(n):\n    return n * 2\n"}}]});
    let unusable = json!({"command": "python3 -c 'from double import double; double(2)')"});
    let llm = FakeLlm::with_rules(vec![
        Rule::reproduction().reply(chat(&unusable.to_string())),
        Rule::planner().reply(chat(&plan.to_string())).times(1),
        Rule::flow_summary().reply(chat("Implemented double.")),
    ]);
    let output = run_task(&sandbox, &llm, "Implement double(n) in double.py: twice n.");
    assert_exit(&output, 0);
    assert_eq!(sandbox.status("t")["state"], json!("succeeded"));
    let flow = read_json(&sandbox.task_dir("t").join("flow.json"));
    let steps = flow["steps"].as_array().unwrap();
    let reproduce = steps
        .iter()
        .find(|s| s["id"] == json!("reproduce"))
        .unwrap();
    assert_eq!(
        reproduce["params"]["command"],
        json!("python3 -m pytest -q"),
        "{flow}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no usable reproduction from the model")
            && stderr.contains("the repository's tests `python3 -m pytest -q` stand in for it"),
        "{stderr}"
    );
    let check = command_check(&sandbox);
    assert_eq!(check["met"], json!(true), "{check}");
}

/// Issue 41's eval: for five of ten Exercism exercises a real Qwen2.5-Coder-0.5B planned one
/// `read_file` of `.docs/instructions.md`, told that its flow touched none of the files the task
/// names it gave the same plan again, and planning failed. The re-ask now shows a plan on the
/// named file in the answer's own form, for a change and for a question (a hint in the prompt:
/// the model still chooses); copied, it runs and is judged by the same evidence as any plan.
#[test]
fn a_plan_on_none_of_the_named_files_is_shown_one_that_is() {
    let sandbox = exercise_repo();
    std::fs::create_dir_all(sandbox.repo.join(".docs")).unwrap();
    std::fs::write(
        sandbox.repo.join(".docs/instructions.md"),
        "Double a number.\n",
    )
    .unwrap();
    let read_only = json!({"steps": [{"id": "read_strands", "operation": "read_file",
        "params": {"file_path": ".docs/instructions.md"}}]});
    let task = "# Instructions\n\nDouble a number.\n\nUse the above instructions to modify the \
                supplied files: double.py. Keep and implement the existing function or class \
                stubs, they will be called from unit tests.";
    // The task in one line: a code step's model sees its instructions, not the task.
    let one_line = task.split_whitespace().collect::<Vec<_>>().join(" ");
    let shown = json!({"steps": [{"id": "change_double", "operation": "modify_code",
        "params": {"file_path": "double.py", "instructions": one_line}}]})
    .to_string();
    let llm = FakeLlm::with_rules(vec![
        Rule::planner().replies_in_order(vec![chat(&read_only.to_string()), chat(&shown)]),
        Rule::prompt_contains("Change to make:\n# Instructions Double a number.")
            .reply(chat("```python\ndef double(n):\n    return n * 2\n```\n")),
        Rule::flow_summary().reply(chat("Implemented double.")),
    ]);
    let output = run_task(&sandbox, &llm, task);
    let reask = last_user_message(&llm.bodies()[1]);
    let question = json!({"steps": [{"id": "answer_double", "operation": "analyze_code",
        "params": {"file_path": "double.py", "query": one_line}, "final_answer": true}]})
    .to_string();
    assert!(
        reask.contains(&shown) && reask.contains(&question),
        "{reask}"
    );
    // A task no change can do is still the model's to refuse.
    assert!(reask.contains(r#"{"refuse": "why"}"#), "{reask}");
    assert_exit(&output, 0);
    assert_eq!(sandbox.status("t")["state"], json!("succeeded"));
    // Judged as any plan: the repository's tests, which must pass after it, pass.
    let check = command_check(&sandbox);
    assert_eq!(check["met"], json!(true), "{check}");
}

/// A model that says no command can show the change (`{"command": null}`) left it checked by
/// nothing but its files: a wrong rewrite of an exercise's stub ended `succeeded` beside the
/// repository's failing tests. The repository's tests now must pass after such a change.
#[test]
fn a_change_the_model_gives_no_reproduction_for_must_pass_the_repositorys_tests() {
    let run = |fix: &str| {
        let sandbox = exercise_repo();
        let plan = json!({"steps": [{"id": "fix", "operation": "write_file",
            "params": {"file_path": "double.py", "content": fix}}]});
        let llm = FakeLlm::with_rules(vec![
            Rule::reproduction().reply(chat(r#"{"command": null}"#)),
            Rule::planner().reply(chat(&plan.to_string())).times(1),
            Rule::recovery().reply(chat(
                &json!({"strategy": "abort", "reason": "the tests still fail"}).to_string(),
            )),
            Rule::reflection().reply(chat("The stub is still wrong.")),
            Rule::flow_summary().reply(chat("Implemented double.")),
        ]);
        let output = run_task(&sandbox, &llm, "Implement double(n) in double.py: twice n.");
        (sandbox, output)
    };
    let (sandbox, output) = run("def double(n):\n    return n + 1\n");
    assert_exit(&output, 1);
    assert_ne!(sandbox.status("t")["state"], json!("succeeded"));
    let check = command_check_of(&sandbox, "python3 -m pytest -q");
    assert_eq!(check["met"], json!(false), "{check}");
    let (sandbox, output) = run("def double(n):\n    return n * 2\n");
    assert_exit(&output, 0);
    let check = command_check_of(&sandbox, "python3 -m pytest -q");
    assert_eq!(check["met"], json!(true), "{check}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the repository's tests `python3 -m pytest -q` must pass after the change"),
        "{stderr}"
    );
    // pytest's cache, which marks itself ignored, is no change of the flow's.
    let diff = sandbox.ocflow().args(["diff", "t"]).output().unwrap();
    let diff = String::from_utf8_lossy(&diff.stdout);
    assert!(
        diff.contains("b/double.py") && !diff.contains(".pytest_cache"),
        "{diff}"
    );
}

/// An answer given evidence must state it: the real 0.5B's kind of answer ("a dictionary with
/// the smallest, largest and mean") beside `None` printed by the code is asked again once with
/// what was printed, and one that still does not state it leaves the answer unmet. The check
/// compares the answer with the code's output (the words and values on its last line), not with
/// any list of words.
#[test]
fn an_answer_that_contradicts_the_codes_output_is_never_a_success() {
    use super::fake_llm::Rule;
    let stats = "def summarize(values):\n    if not values:\n        return None\n    \
                 return {'min': min(values), 'max': max(values)}\n";
    let question = "What does summarize() in stats.py return for an empty list?";
    let plan = json!({"deliverables": {"answer": question},
        "steps": [{"id": "explain", "operation": "analyze_code",
            "params": {"file_path": "stats.py", "query": question}}]});
    let shown = "python3 -c \"from stats import summarize; print(repr(summarize([])))\"";
    let wrong = json!({"summary": "It returns a dictionary with the smallest, largest and mean.",
        "findings": []});
    let right = json!({"summary": "For an empty list it returns None.", "findings": []});
    let run = |answers: Vec<Value>| {
        let sandbox = Sandbox::new(&[("stats.py", stats)]);
        let llm = FakeLlm::with_rules(vec![
            Rule::planner().reply(chat(&plan.to_string())),
            Rule::evidence().reply(chat(&json!({"command": shown}).to_string())),
            Rule::conversation_contains("You review source code")
                .replies_in_order(answers.iter().map(|a| chat(&a.to_string())).collect()),
            Rule::flow_summary().reply(chat("The flow analysed stats.py.")),
            Rule::recovery().reply(chat(r#"{"strategy": "abort", "reason": "wrong"}"#)),
            Rule::reflection().reply(chat("The answer was wrong.")),
        ]);
        let output = run_task(&sandbox, &llm, question);
        (sandbox, llm, output)
    };
    let (sandbox, llm, output) = run(vec![wrong.clone(), right]);
    assert_exit(&output, 0);
    let again = llm
        .bodies()
        .iter()
        .map(last_user_message)
        .find(|m| m.contains("does not state what the command printed"))
        .expect("asked again with what was printed");
    assert!(again.contains("None"), "{again}");
    assert_eq!(sandbox.status("t")["state"], "succeeded");
    let (sandbox, _llm, output) = run(vec![wrong.clone(), wrong]);
    assert_exit(&output, 1);
    let status = sandbox.status("t");
    assert_ne!(status["state"], json!("succeeded"), "{status}");
    let answer = status["deliverables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == json!("answer"))
        .cloned()
        .unwrap();
    assert_eq!(answer["met"], json!(false), "{answer}");
    assert!(
        answer["detail"]
            .as_str()
            .unwrap()
            .contains("does not state what the code printed (`None`)"),
        "{answer}"
    );
}

/// The repository's tests required of such a change stay required: a recovery that rewrites
/// the check into a command that passes, or a plan that rewrites the test to the wrong code's
/// answer, shows nothing.
#[test]
fn the_repositorys_tests_stay_required_whatever_a_recovery_or_the_plan_does() {
    let run = |plan: Value, recovery: Value| {
        let sandbox = exercise_repo();
        let llm = FakeLlm::with_rules(vec![
            Rule::reproduction().reply(chat(r#"{"command": null}"#)),
            Rule::planner().reply(chat(&plan.to_string())).times(1),
            Rule::recovery().reply(chat(&recovery.to_string())),
            Rule::reflection().reply(chat("The stub is still wrong.")),
            Rule::flow_summary().reply(chat("Implemented double.")),
        ]);
        let output = run_task(&sandbox, &llm, "Implement double(n) in double.py: twice n.");
        (sandbox, output)
    };
    let wrong = json!({"steps": [{"id": "fix", "operation": "write_file",
        "params": {"file_path": "double.py", "content": "def double(n):\n    return n + 1\n"}}]});
    let cheat = json!({"strategy": "modify", "reason": "the tests are too strict",
        "step": {"id": "check", "params": {"command": "python3 -c 'import double'"}}});
    let (sandbox, output) = run(wrong, cheat);
    assert_exit(&output, 1);
    assert_ne!(sandbox.status("t")["state"], json!("succeeded"));
    let check = command_check_of(&sandbox, "python3 -m pytest -q");
    assert_eq!(check["met"], json!(false), "{check}");
    // The test rewritten to the wrong code's answer.
    let rewritten = json!({"steps": [
        {"id": "fix", "operation": "write_file",
         "params": {"file_path": "double.py", "content": "def double(n):\n    return n + 1\n"}},
        {"id": "test", "operation": "write_file",
         "params": {"file_path": "double_test.py",
                    "content": "import unittest\n\nfrom double import double\n\n\n\
                                class DoubleTest(unittest.TestCase):\n    \
                                def test_two(self):\n        self.assertEqual(double(2), 3)\n"}},
    ]});
    let abort = json!({"strategy": "abort", "reason": "no"});
    let (sandbox, output) = run(rewritten, abort.clone());
    assert_exit(&output, 1);
    assert_ne!(sandbox.status("t")["state"], json!("succeeded"));
    let check = command_check_of(&sandbox, "python3 -m pytest -q");
    assert_eq!(check["met"], json!(false), "{check}");
    assert!(
        check["detail"]
            .as_str()
            .unwrap()
            .contains("the flow changed tests (double_test.py)"),
        "{check}"
    );
    // A test the flow adds is the task's own ("add tests for …"): no reason to doubt the pass.
    let added = json!({"steps": [
        {"id": "fix", "operation": "write_file",
         "params": {"file_path": "double.py", "content": "def double(n):\n    return n * 2\n"}},
        {"id": "more", "operation": "write_file",
         "params": {"file_path": "more_test.py",
                    "content": "from double import double\n\n\ndef test_zero():\n    \
                                assert double(0) == 0\n"}},
    ]});
    let (sandbox, output) = run(added, abort);
    assert_exit(&output, 0);
    let check = command_check_of(&sandbox, "python3 -m pytest -q");
    assert_eq!(check["met"], json!(true), "{check}");
}

/// Issue 41's eval: for most Exercism exercises a real Qwen2.5-Coder-0.5B never gave a plan that
/// could be used (`read_file .docs/instructions.md`, the same plan again when told, a plan cut
/// off three times), so its flows failed before any step while the same model, asked for the
/// file alone, solved some. When no plan of the model's can be used and the task names files,
/// the model is asked one short question, what the task asks for, and ocflow plans that on the
/// named files with the whole task; the plan is judged by the same evidence as any.
fn unplannable(choice: &str, code: &str) -> (Sandbox, FakeLlm, std::process::Output) {
    let sandbox = exercise_repo();
    let read_only = json!({"steps": [{"id": "read_instructions", "operation": "read_file",
        "params": {"file_path": "double.py"}}]});
    let llm = FakeLlm::with_rules(vec![
        Rule::planner().replies_in_order(vec![
            chat(&read_only.to_string()),
            chat(&read_only.to_string()),
        ]),
        Rule::plan_shape().reply(chat(choice)).times(1),
        Rule::prompt_contains("Change to make:\n# Instructions\n\nDouble a number.")
            .reply(chat(&format!("```python\n{code}```\n"))),
        Rule::recovery().reply(chat(r#"{"strategy": "abort", "reason": "still failing"}"#)),
        Rule::reflection().reply(chat("The change was wrong.")),
        Rule::flow_summary().reply(chat("Implemented double.")),
    ]);
    let task = "# Instructions\n\nDouble a number.\n\nUse the above instructions to modify the \
                supplied files: double.py. Keep and implement the existing function or class \
                stubs, they will be called from unit tests.";
    let output = run_task(&sandbox, &llm, task);
    (sandbox, llm, output)
}

#[test]
fn a_model_that_cannot_plan_is_asked_what_the_task_asks_and_ocflow_plans_it() {
    let (sandbox, llm, output) = unplannable(
        r#"{"choice": "change"}"#,
        "def double(n):\n    return n * 2\n",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_exit(&output, 0);
    assert_eq!(sandbox.status("t")["state"], json!("succeeded"), "{stderr}");
    assert!(
        stderr.contains("the model's plans could not be used")
            && stderr.contains("so ocflow planned a modify_code of double.py"),
        "{stderr}"
    );
    // The question names the files and carries the task; nothing else of the planner's.
    let asked = llm
        .bodies()
        .iter()
        .map(last_user_message)
        .find(|m| m.contains("Say what the task asks for"))
        .unwrap();
    assert!(
        asked.contains("names these files of the repository: double.py")
            && asked.contains("Double a number."),
        "{asked}"
    );
    let planning = sandbox.task_dir("t").join("planning");
    assert!(planning.join("shape-answer.md").is_file());
    let flow = read_json(&sandbox.task_dir("t").join("flow.json"));
    let change = flow["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["operation"] == json!("modify_code"))
        .cloned()
        .unwrap();
    assert_eq!(change["params"]["file_path"], json!("double.py"), "{flow}");
    // Evidence, not the plan's maker, decides: the repository's tests pass after it.
    let check = command_check_of(&sandbox, "python3 -m pytest -q");
    assert_eq!(check["met"], json!(true), "{check}");
}

#[test]
fn a_change_ocflow_planned_for_the_model_is_judged_by_the_same_evidence() {
    let (sandbox, _llm, output) = unplannable(
        r#"{"choice": "change"}"#,
        "def double(n):\n    return n + 1\n",
    );
    assert_exit(&output, 1);
    assert_ne!(sandbox.status("t")["state"], json!("succeeded"));
    let check = command_check_of(&sandbox, "python3 -m pytest -q");
    assert_eq!(check["met"], json!(false), "{check}");
}

/// The model keeps the choice of a refusal, and an answer that is no choice leaves the
/// planning's own failure standing: ocflow never guesses what a task asks for.
#[test]
fn the_model_still_decides_what_a_task_it_cannot_plan_asks_for() {
    let (sandbox, _llm, output) = unplannable(
        r#"{"choice": "refuse", "why": "it needs a phone"}"#,
        "def double(n):\n    return n * 2\n",
    );
    assert_exit(&output, 2);
    let message = sandbox.status("t")["message"].as_str().unwrap().to_string();
    assert!(message.contains("it needs a phone"), "{message}");
    assert_eq!(sandbox.status("t")["steps"], json!([]));
    let (sandbox, _llm, output) = unplannable(
        r#"{"choice": "maybe"}"#,
        "def double(n):\n    return n * 2\n",
    );
    assert_exit(&output, 1);
    let message = sandbox.status("t")["message"].as_str().unwrap().to_string();
    assert!(message.contains("the same answer again"), "{message}");
    assert_eq!(sandbox.status("t")["steps"], json!([]));
}

/// ocflow plans no question for the model: an answer checked only by a command of the model's
/// choosing could "answer" a task no repository can do (an independent review made "Call the
/// customer … CHANGELOG.md" succeed that way, with `tail -n 1 CHANGELOG.md` as its evidence).
/// The planning's failure stands.
#[test]
fn a_question_the_model_cannot_plan_is_not_planned_for_it() {
    let stats = "def summarize(values):\n    if not values:\n        return None\n    \
                 return {'min': min(values), 'max': max(values)}\n";
    let question = "What does summarize() in stats.py return for an empty list?";
    let sandbox = Sandbox::new(&[("stats.py", stats)]);
    let read = json!({"steps": [{"id": "read_file", "operation": "read_file",
        "params": {"file_path": "stats.py"}}]});
    let llm = FakeLlm::with_rules(vec![
        Rule::planner().replies_in_order(vec![chat(&read.to_string()), chat(&read.to_string())]),
        Rule::plan_shape()
            .reply(chat(r#"{"choice": "answer"}"#))
            .times(1),
        Rule::flow_summary().reply(chat("The flow analysed stats.py.")),
    ]);
    let output = run_task(&sandbox, &llm, question);
    assert_exit(&output, 1);
    let status = sandbox.status("t");
    assert_eq!(status["state"], json!("failed"), "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("the same answer again"),
        "{status}"
    );
    assert_eq!(status["steps"], json!([]));
}

/// Without tests in the repository, the model's reproduction must show the problem of the
/// change ocflow planned for it, as of any; with none, the planning's failure stands.
#[test]
fn without_tests_a_change_ocflow_plans_needs_the_models_reproduction() {
    let run = |reproduction: &str| {
        let sandbox = Sandbox::new(&[("double.py", "def double(n):\n    pass\n")]);
        let read = json!({"steps": [{"id": "read", "operation": "read_file",
            "params": {"file_path": "double.py"}}]});
        let llm = FakeLlm::with_rules(vec![
            Rule::reproduction().reply(chat(reproduction)),
            Rule::planner()
                .replies_in_order(vec![chat(&read.to_string()), chat(&read.to_string())]),
            Rule::plan_shape()
                .reply(chat(r#"{"choice": "change"}"#))
                .times(1),
            Rule::prompt_contains("Change to make:\nImplement double(n)")
                .reply(chat("```python\ndef double(n):\n    return n * 2\n```\n")),
            Rule::flow_summary().reply(chat("Implemented double.")),
        ]);
        let output = run_task(&sandbox, &llm, "Implement double(n) in double.py: twice n.");
        (sandbox, output)
    };
    let shown = json!({"command":
        "python3 -c 'from double import double; assert double(2) == 4'"});
    let (sandbox, output) = run(&shown.to_string());
    assert_exit(&output, 0);
    let flow = read_json(&sandbox.task_dir("t").join("flow.json"));
    assert!(
        flow["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["operation"] == json!("reproduce")),
        "{flow}"
    );
    assert_eq!(sandbox.status("t")["state"], json!("succeeded"));
    let (sandbox, output) = run(r#"{"command": null}"#);
    assert_exit(&output, 1);
    assert_eq!(sandbox.status("t")["steps"], json!([]));
}

/// The repository's tests standing in for a reproduction the model could not write show
/// nothing once the flow changed them: a plan that rewrites the failing test to pass is not done.
#[test]
fn tests_standing_in_for_a_reproduction_cannot_be_edited_into_passing() {
    let sandbox = exercise_repo();
    let plan = json!({"steps": [
        {"id": "fix", "operation": "write_file",
         "params": {"file_path": "double.py", "content": "def double(n):\n    return n + 1\n"}},
        {"id": "test", "operation": "write_file",
         "params": {"file_path": "double_test.py",
                    "content": "import unittest\n\nfrom double import double\n\n\n\
                                class DoubleTest(unittest.TestCase):\n    \
                                def test_two(self):\n        self.assertEqual(double(2), 3)\n"}},
    ]});
    let unusable = json!({"command": "python3 -c 'from double import double; double(2)')"});
    let llm = FakeLlm::with_rules(vec![
        Rule::reproduction().reply(chat(&unusable.to_string())),
        Rule::planner().reply(chat(&plan.to_string())).times(1),
        Rule::recovery().reply(chat(r#"{"strategy": "abort", "reason": "no"}"#)),
        Rule::reflection().reply(chat("The test was rewritten.")),
        Rule::flow_summary().reply(chat("Implemented double.")),
    ]);
    let output = run_task(&sandbox, &llm, "Implement double(n) in double.py: twice n.");
    assert_exit(&output, 1);
    assert_ne!(sandbox.status("t")["state"], json!("succeeded"));
    let check = command_check_of(&sandbox, "python3 -m pytest -q");
    assert_eq!(check["met"], json!(false), "{check}");
    assert!(
        check["detail"]
            .as_str()
            .unwrap()
            .contains("the flow changed tests (double_test.py)"),
        "{check}"
    );
}

/// Issue 41's eval: markdown's plans were cut off at the planner's token limit three times, each
/// answer the costliest call of the flow on a CPU (resistor-color's three plans repeated the
/// same step ids). Where ocflow can plan the change itself, the same problem twice ends the
/// re-asks; the change is then planned for the model as when its plans do not fit.
#[test]
fn the_same_problem_twice_goes_to_the_plan_ocflow_makes() {
    let sandbox = exercise_repo();
    let cut = || Reply::Chat {
        content: r#"{"steps": [{"id": "read", "operation": "read_file", "params": {"#.into(),
        usage: (100, 1536),
        finish_reason: "length",
    };
    let llm = FakeLlm::with_rules(vec![
        Rule::planner().replies_in_order(vec![cut(), cut()]),
        Rule::plan_shape()
            .reply(chat(r#"{"choice": "change"}"#))
            .times(1),
        Rule::prompt_contains("Change to make:\nImplement double(n)")
            .reply(chat("```python\ndef double(n):\n    return n * 2\n```\n")),
        Rule::flow_summary().reply(chat("Implemented double.")),
    ]);
    let output = run_task(&sandbox, &llm, "Implement double(n) in double.py: twice n.");
    assert_exit(&output, 0);
    assert_eq!(llm.calls("planner"), 2, "asked for a plan twice");
    let planning = sandbox.task_dir("t").join("planning");
    assert!(!planning.join("plan-answer-3.md").exists());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the model's plans could not be used (the answer was cut off"),
        "{stderr}"
    );
    assert_eq!(sandbox.status("t")["state"], json!("succeeded"));
}

/// The eval's markdown: a refactoring exercise whose tests already pass. The change ocflow plans
/// for the model waits for its reproduction; the tests showing no problem, the coder is never
/// asked, and the exercise is left as it was (before, the change ran beside the reproduction
/// and broke a test no check could then show).
#[test]
fn a_change_ocflow_plans_waits_for_tests_that_show_a_problem() {
    let sandbox = Sandbox::new(&[
        ("double.py", "def double(n):\n    return n + n\n"),
        (
            "double_test.py",
            "from double import double\n\n\ndef test_two():\n    assert double(2) == 4\n",
        ),
    ]);
    let read = json!({"steps": [{"id": "read", "operation": "read_file",
        "params": {"file_path": "double.py"}}]});
    let llm = FakeLlm::with_rules(vec![
        Rule::planner().replies_in_order(vec![chat(&read.to_string()), chat(&read.to_string())]),
        Rule::plan_shape()
            .reply(chat(r#"{"choice": "change"}"#))
            .times(1),
        Rule::prompt_contains("Change to make:").times(0),
        Rule::recovery().reply(chat(
            r#"{"strategy": "abort", "reason": "nothing to show"}"#,
        )),
        Rule::reflection().reply(chat("The tests already passed.")),
        Rule::flow_summary().reply(chat("Nothing changed.")),
    ]);
    let output = run_task(
        &sandbox,
        &llm,
        "Refactor double.py: make double read better.",
    );
    assert_exit(&output, 1);
    let status = sandbox.status("t");
    assert_ne!(status["state"], json!("succeeded"), "{status}");
    let change = status["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["operation"] == json!("modify_code"))
        .cloned()
        .unwrap();
    assert_ne!(change["status"], json!("succeeded"), "{status}");
    assert!(
        !sandbox
            .task_dir("t")
            .join("final_output/double.py")
            .exists()
    );
    llm.verify();
}
