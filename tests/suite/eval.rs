//! `ocflow eval` (issue 41): a suite's flows run as a batch, each scored by its task's check in a
//! fresh copy of the repository — solved or not, and a flow that said it succeeded while its
//! check fails counted as a false success. The flows here are given as plans (no model): one
//! right fix, one wrong fix the flow calls a success, one flow that fails.

use std::fs;
use std::path::Path;

use serde_json::{Value, json};

use super::support::{Sandbox, assert_exit, git, git_succeeds, stderr, stdout};

const BUGGY: &str = "def add(a, b):\n    return a - b\n";
const TEST: &str = "import unittest\n\nfrom calc import add\n\n\n\
                    class AddTest(unittest.TestCase):\n    def test_add(self):\n        \
                    self.assertEqual(add(2, 3), 5)\n";

fn plan(root: &Path, name: &str, steps: Value) -> String {
    let path = root.join(format!("{name}.json"));
    fs::write(&path, steps.to_string()).unwrap();
    format!("{name}.json")
}

fn write_calc(body: &str) -> Value {
    let content = format!("def add(a, b):\n    {body}\n");
    json!([{"id": "fix", "operation": "write_file",
            "params": {"file_path": "calc.py", "content": content}}])
}

fn scored(out: &Path) -> Vec<Value> {
    fs::read_to_string(out.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn each_flow_is_scored_by_its_check_and_a_false_success_is_named() {
    let sandbox = Sandbox::new(&[("calc.py", BUGGY), ("test_calc.py", TEST)]);
    let root = sandbox.root();
    git(&sandbox.repo, &["init", "-q"]);
    let check = "python3 -m unittest -q test_calc";
    let lines = [
        ("right", plan(root, "right", write_calc("return a + b"))),
        ("wrong", plan(root, "wrong", write_calc("return a * b"))),
        (
            "broken",
            plan(
                root,
                "broken",
                json!([{"id": "c", "operation": "execute_shell_command",
                        "params": {"command": "exit 1"}}]),
            ),
        ),
    ];
    let mut suite = String::new();
    for (id, plan) in &lines {
        let line = json!({"id": id, "task": "Fix add in calc.py", "repo": "repo",
                          "plan": plan, "check": check});
        suite.push_str(&format!("{line}\n"));
    }
    fs::write(root.join("suite.jsonl"), suite).unwrap();
    let out = root.join("eval");
    let eval = |json: bool| {
        let mut command = sandbox.command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"));
        if json {
            command.arg("--json");
        }
        command
            .current_dir(root)
            .arg("eval")
            .arg(root.join("suite.jsonl"))
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    let output = eval(false);
    assert_exit(&output, 0);
    let results = scored(&out);
    let by_id = |id: &str| results.iter().find(|r| r["id"] == id).unwrap().clone();
    assert_eq!(results.len(), 3, "{results:?}");
    let right = by_id("right");
    assert_eq!(
        (right["solved"].clone(), right["false_success"].clone()),
        (json!(true), json!(false))
    );
    assert_eq!(right["state"], "succeeded");
    // Solved as planned: no recovery was asked for.
    assert_eq!(
        (
            right["recoveries"].clone(),
            right["solved_before_recovery"].clone()
        ),
        (json!(0), json!(true))
    );
    let wrong = by_id("wrong");
    assert_eq!(wrong["state"], "succeeded", "the flow delivered its file");
    assert_eq!(
        (wrong["solved"].clone(), wrong["false_success"].clone()),
        (json!(false), json!(true))
    );
    assert_eq!(wrong["check_exit"], 1);
    assert!(
        wrong["check_output"]
            .as_str()
            .unwrap()
            .contains("AssertionError"),
        "{wrong}"
    );
    let broken = by_id("broken");
    assert_eq!(broken["state"], "failed");
    assert_eq!(
        (broken["solved"].clone(), broken["false_success"].clone()),
        (json!(false), json!(false))
    );
    // The model never sees the check; the user's repository is never changed.
    let tasks = fs::read_to_string(out.join("tasks.jsonl")).unwrap();
    assert!(!tasks.contains("unittest"), "{tasks}");
    assert_eq!(
        fs::read_to_string(sandbox.repo.join("calc.py")).unwrap(),
        BUGGY
    );
    let summary = fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        summary.contains("1 of 3 task(s) solved (3 scored; 1 before any recovery)"),
        "{summary}"
    );
    assert!(summary.contains("false successes: 1 (wrong)"), "{summary}");
    // An estimate is said before the run and set against what was spent (no model here).
    assert!(stderr(&output).contains("estimate before the run: about"));
    assert!(summary.contains("Estimated before this run:"), "{summary}");
    assert!(
        summary.contains("they spent 0 (0.00 of the estimate)"),
        "{summary}"
    );
    assert!(stdout(&output).contains("| wrong | no | succeeded | 0 | exit 1 | **yes** |"));
    let said = "wrong: not solved (the check exited 1); the flow succeeded — FALSE SUCCESS";
    assert!(stderr(&output).contains(said), "{}", stderr(&output));
    // Again with the same --out: nothing runs or is scored twice; with --json, the totals come
    // as an event.
    let again = eval(true);
    assert_exit(&again, 0);
    assert_eq!(scored(&out).len(), 3);
    let events: Vec<Value> = stdout(&again)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(
        !events.iter().any(|e| e["type"] == "eval_scored"),
        "{events:?}"
    );
    let finished = events
        .iter()
        .find(|e| e["type"] == "eval_finished")
        .unwrap();
    assert_eq!(
        (
            &finished["tasks"],
            &finished["solved"],
            &finished["false_successes"]
        ),
        (&json!(3), &json!(1), &json!(1))
    );
}

/// Issue 41's random ten counted Exercism's markdown, a refactoring whose stub passes its
/// tests: the model alone "solved" it by changing nothing. A task whose check passes on the
/// repository as it is has nothing to solve: it is left out of the eval, for the flows and the
/// model alone, and the report says so; a suite of only such tasks is refused.
#[test]
fn a_task_whose_check_passes_before_any_change_is_left_out() {
    let sandbox = Sandbox::new(&[("calc.py", BUGGY), ("test_calc.py", TEST)]);
    let root = sandbox.root();
    let done = root.join("done");
    fs::create_dir_all(&done).unwrap();
    fs::write(done.join("calc.py"), "def add(a, b):\n    return a + b\n").unwrap();
    fs::write(done.join("test_calc.py"), TEST).unwrap();
    git(&sandbox.repo, &["init", "-q"]);
    git(&done, &["init", "-q"]);
    let check = "python3 -m unittest -q test_calc";
    let fix = plan(root, "fix", write_calc("return a + b"));
    let suite = [
        json!({"id": "fix", "task": "Fix add in calc.py", "repo": "repo", "plan": fix,
               "check": check}),
        json!({"id": "done", "task": "Fix add in calc.py", "repo": "done", "plan": fix,
               "check": check}),
    ];
    let write_suite = |lines: &[Value]| {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        fs::write(root.join("suite.jsonl"), text).unwrap();
    };
    write_suite(&suite);
    let out = root.join("eval");
    let eval = || {
        sandbox
            .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
            .current_dir(root)
            .arg("eval")
            .arg(root.join("suite.jsonl"))
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    let output = eval();
    assert_exit(&output, 0);
    let results = scored(&out);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(
        (results[0]["id"].clone(), results[0]["solved"].clone()),
        (json!("fix"), json!(true))
    );
    let tasks = fs::read_to_string(out.join("tasks.jsonl")).unwrap();
    assert!(!tasks.contains("\"done\""), "{tasks}");
    assert!(
        stderr(&output).contains("done: its check passes before any change: left out"),
        "{}",
        stderr(&output)
    );
    let summary = fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("1 of 1 task(s) solved"), "{summary}");
    assert!(
        summary
            .contains("Left out, their check passing before any change (nothing to solve): done."),
        "{summary}"
    );
    // Nothing left to solve: refused, and said why.
    write_suite(&suite[1..]);
    let output = eval();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("every task's check passes before any change (done)"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_suite_line_without_a_check_is_refused_before_anything_runs() {
    let sandbox = Sandbox::new(&[("calc.py", BUGGY)]);
    let root = sandbox.root();
    fs::write(
        root.join("suite.jsonl"),
        "{\"id\": \"a\", \"task\": \"Fix add\", \"repo\": \"repo\"}\n",
    )
    .unwrap();
    let output = sandbox
        .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
        .arg("eval")
        .arg(root.join("suite.jsonl"))
        .arg("--out")
        .arg(root.join("eval"))
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("line 1: no \"check\""),
        "{}",
        stderr(&output)
    );
    assert!(!root.join("eval/flows").exists(), "nothing ran");
}

/// `--baseline`: the model alone is asked with the task and its files and answers the file
/// whole; its first answer fails the check, the second (given the check's output) passes. The
/// flows and the model alone stand side by side in the summary.
#[test]
fn the_model_alone_is_asked_twice_and_judged_by_the_same_check() {
    use super::fake_llm::{FakeLlm, Rule, chat};
    let sandbox = Sandbox::new(&[("calc.py", BUGGY), ("test_calc.py", TEST)]);
    let root = sandbox.root();
    git(&sandbox.repo, &["init", "-q"]);
    let right = plan(root, "right", write_calc("return a + b"));
    let line = json!({"id": "add", "task": "Fix add in calc.py", "repo": "repo", "plan": right,
                      "check": "python3 -m unittest -q test_calc", "files": ["calc.py"]});
    fs::write(root.join("suite.jsonl"), format!("{line}\n")).unwrap();
    let llm = FakeLlm::with_rules(vec![
        Rule::flow_summary().reply(chat("Fixed add.")),
        Rule::prompt_contains("Task: Fix add in calc.py").replies_in_order(vec![chat(
            "calc.py\n```python\ndef add(a, b):\n    return a * b\n```\n",
        )]),
        Rule::prompt_contains("fails with:").replies_in_order(vec![chat(
            "calc.py\n```python\ndef add(a, b):\n    return a + b\n```\n",
        )]),
    ]);
    let out = root.join("eval");
    let output = sandbox
        .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
        .args(["--base-url", &llm.base_url(), "--model", "m", "eval"])
        .arg(root.join("suite.jsonl"))
        .arg("--out")
        .arg(&out)
        .arg("--baseline")
        .env("OPENAI_API_KEY", "sk-test")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let baseline: Value = serde_json::from_str(
        fs::read_to_string(out.join("baseline.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(baseline["solved"], true, "{baseline}");
    assert_eq!(baseline["solved_first_try"], false, "{baseline}");
    assert_eq!(baseline["files"], json!(["calc.py"]));
    // The model alone saw the file and the task; the second ask, the check's output.
    let bodies = llm.bodies();
    let asked: Vec<String> = bodies
        .iter()
        .map(super::fake_llm::last_user_message)
        .filter(|m| m.contains("\n\nTask: Fix add") || m.starts_with("The check"))
        .collect();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[0].contains("calc.py\n```\ndef add(a, b):\n    return a - b\n```"));
    assert!(asked[1].contains("AssertionError: 6 != 5"), "{}", asked[1]);
    assert!(!asked[1].contains("Permission denied"), "{}", asked[1]);
    let summary = fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("the model alone"), "{summary}");
    assert!(
        summary.contains("1 of 1 solved (0 at the first try)"),
        "{summary}"
    );
    assert!(
        summary.contains("| add | yes | succeeded | 0 | exit 0 | no | solved (2nd try) |"),
        "{summary}"
    );
    // The user's repository is never written.
    assert_eq!(
        fs::read_to_string(sandbox.repo.join("calc.py")).unwrap(),
        BUGGY
    );
}

/// A flow solved by the coder's try (its change failed the tests, it was shown them and wrote
/// the code again) was not solved before any recovery, though no recovery question was asked:
/// it is the baseline's "solved at the second try", and the summary counts it so.
#[test]
fn a_task_solved_by_the_coders_try_is_not_solved_before_recovery() {
    use super::fake_llm::{FakeLlm, Rule, chat};
    let sandbox = Sandbox::new(&[("calc.py", BUGGY), ("test_calc.py", TEST)]);
    let root = sandbox.root();
    git(&sandbox.repo, &["init", "-q"]);
    let steps = json!([
        {"id": "fix", "operation": "modify_code",
         "params": {"file_path": "calc.py", "instructions": "make add return the sum"}},
        {"id": "test", "operation": "run_tests", "depends_on": ["fix"],
         "params": {"command": "python3 -m pytest -q -p no:cacheprovider"}}
    ]);
    let line = json!({"id": "add", "task": "Fix add in calc.py", "repo": "repo",
                      "plan": plan(root, "coder", steps),
                      "check": "python3 -m unittest -q test_calc"});
    fs::write(root.join("suite.jsonl"), format!("{line}\n")).unwrap();
    let code = |body: &str| chat(&format!("```python\ndef add(a, b):\n    {body}\n```\n"));
    let llm = FakeLlm::with_rules(vec![
        Rule::flow_summary().reply(chat("Fixed add.")),
        Rule::prompt_contains("## Why this runs again").reply(code("return a + b")),
        Rule::prompt_contains("make add return the sum").reply(code("return a * b")),
    ]);
    let out = root.join("eval");
    let output = sandbox
        .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
        .args(["--base-url", &llm.base_url(), "--model", "m", "eval"])
        .arg(root.join("suite.jsonl"))
        .arg("--out")
        .arg(&out)
        .env("OPENAI_API_KEY", "sk-test")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let add = scored(&out).remove(0);
    assert_eq!(
        (add["solved"].clone(), add["state"].clone()),
        (json!(true), json!("succeeded"))
    );
    assert_eq!(
        (
            add["recoveries"].clone(),
            add["solved_before_recovery"].clone()
        ),
        (json!(1), json!(false)),
        "{add}"
    );
    let summary = fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        summary.contains("1 of 1 task(s) solved (1 scored; 0 before any recovery)"),
        "{summary}"
    );
}

/// A directory of Exercism exercises (the project's own, in the layout Aider's benchmark uses)
/// is a suite: each exercise a repository of its own without `.meta/` (the example solution),
/// its tests the check, put back as they were before they run. The fake model's plan solves
/// `double` and writes a wrong `greet`, which its one-example reproduction cannot tell from a
/// right one (a false success); the model alone solves `greet` at its first answer and never
/// `double`. (Until the repository's tests checked a change the model gave no reproduction
/// for, `greet` had none and its files alone made it a success: the reproduction was added.)
#[test]
fn a_directory_of_exercism_exercises_is_a_suite() {
    use super::fake_llm::{FakeLlm, Rule, chat};
    let sandbox = Sandbox::new(&[("unused.txt", "")]);
    let exercises = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/exercism");
    let write = |path: &str, content: &str| {
        json!({"version": 1, "task": "t", "steps": [{"id": "w", "operation": "write_file",
            "params": {"file_path": path, "content": content}}]})
        .to_string()
    };
    let llm = FakeLlm::with_rules(vec![
        Rule::planner()
            .and_prompt_contains("- double.py")
            .reply(chat(&write(
                "double.py",
                "def double(number):\n    return number * 2\n",
            ))),
        Rule::planner()
            .and_prompt_contains("- greet.py")
            .reply(chat(&write(
                "greet.py",
                "def greet(name):\n    return name\n",
            ))),
        Rule::reproduction()
            .and_conversation_contains("- greet.py")
            .reply(chat(
                &json!({"command": "python3 -c 'import greet; assert greet.greet(\"Ada\")'"})
                    .to_string(),
            )),
        Rule::flow_summary().reply(chat("Done.")),
        Rule::prompt_contains("greet.py\n```").reply(chat(
            "greet.py\n```python\ndef greet(name):\n    return f\"Hello, {name}!\"\n```\n",
        )),
        Rule::prompt_contains("double.py\n```").reply(chat(
            "double.py\n```python\ndef double(number):\n    return 0\n```\n",
        )),
        Rule::prompt_contains("fails with:").reply(chat(
            "double.py\n```python\ndef double(number):\n    return 1\n```\n",
        )),
    ]);
    let out = sandbox.root().join("eval");
    let output = sandbox
        .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
        .args(["--base-url", &llm.base_url(), "--model", "m", "eval"])
        .arg(&exercises)
        .arg("--out")
        .arg(&out)
        .arg("--baseline")
        .env("OPENAI_API_KEY", "sk-test")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let repo = out.join("exercism/repos/greet");
    assert!(repo.join("greet_test.py").is_file() && repo.join(".git").is_dir());
    assert!(
        !repo.join(".meta").exists(),
        "the example solution stays out"
    );
    let instructions = fs::read_to_string(repo.join(".docs/instructions.md")).unwrap();
    assert!(
        instructions.contains("Greet nobody else."),
        "the appended instructions too"
    );
    let summary = fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("1 of 2 task(s) solved"), "{summary}");
    assert!(summary.contains("false successes: 1 (greet)"), "{summary}");
    assert!(
        summary.contains("1 of 2 solved (1 at the first try)"),
        "{summary}"
    );
    assert!(
        summary.contains("| double | yes | succeeded | 0 | exit 0 | no | no |"),
        "{summary}"
    );
    assert!(
        summary.contains("| greet | no | succeeded | 0 | exit 1 | **yes** | solved (1st try) |"),
        "{summary}"
    );
    // The page: both charts, the table linking each flow.
    let page = fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        page.contains("1 of 2 task(s) solved by ocflow, 1 by the model alone"),
        "{page}"
    );
    assert!(page.contains("<figcaption>tokens per solved task</figcaption>"));
    assert!(page.contains("<a href=\"flows/workspace/greet/summary.md\">greet</a>"));
    assert!(
        out.join("flows/workspace/greet/summary.md").is_file(),
        "the link leads somewhere"
    );
    assert!(page.contains("<td>FALSE SUCCESS</td>"));
    // The exercises themselves are never written.
    let stub = fs::read_to_string(exercises.join("double/double.py")).unwrap();
    assert_eq!(stub, "def double(number):\n    pass\n");
}

/// A SWE-bench-shaped instance (repository, base commit, problem statement, test command) is
/// cloned at its base commit, solved by a flow, scored by its test command, and its patch
/// written to `predictions.jsonl` as the official harness reads it.
#[test]
fn swe_bench_instances_give_predictions_the_harness_reads() {
    use super::fake_llm::{FakeLlm, Rule, chat};
    let sandbox = Sandbox::new(&[("calc.py", BUGGY), ("test_calc.py", TEST)]);
    let root = sandbox.root();
    let git = |args: &[&str]| git(&sandbox.repo, args).trim().to_string();
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "base"]);
    let base = git(&["rev-parse", "HEAD"]);
    // A later commit the instance must not see.
    fs::write(sandbox.repo.join("later.txt"), "after the base\n").unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-qm", "later"]);
    let instance = json!({"instance_id": "calc__calc-1", "repo": "repo", "base_commit": base,
        "problem_statement": "add(2, 3) returns -1 instead of 5.",
        "test_command": "python3 -m unittest -q test_calc",
        "FAIL_TO_PASS": ["test_calc.AddTest.test_add"]});
    fs::write(root.join("instances.jsonl"), format!("{instance}\n")).unwrap();
    let plan = json!({"version": 1, "task": "t", "steps": [{"id": "w", "operation": "write_file",
        "params": {"file_path": "calc.py", "content": "def add(a, b):\n    return a + b\n"}}]});
    let llm = FakeLlm::with_rules(vec![
        Rule::planner().reply(chat(&plan.to_string())),
        Rule::flow_summary().reply(chat("Fixed add.")),
    ]);
    let out = root.join("eval");
    let output = sandbox
        .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
        .args(["--base-url", &llm.base_url(), "--model", "m", "eval"])
        .arg(root.join("instances.jsonl"))
        .arg("--out")
        .arg(&out)
        .env("OPENAI_API_KEY", "sk-test")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let clone = out.join("swebench/repos/calc__calc-1");
    assert!(
        !clone.join("later.txt").exists(),
        "the clone is at the base commit"
    );
    let prediction: Value = serde_json::from_str(
        fs::read_to_string(out.join("predictions.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(prediction["instance_id"], "calc__calc-1");
    assert_eq!(prediction["model_name_or_path"], "m");
    let patch = prediction["model_patch"].as_str().unwrap();
    assert!(
        patch.starts_with("diff --git a/calc.py b/calc.py"),
        "{patch}"
    );
    assert!(patch.contains("+    return a + b"), "{patch}");
    // The patch applies to the base commit as the harness applies it.
    let check = std::process::Command::new("git")
        .args(["apply", "--check", "-"])
        .current_dir(&clone)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(patch.as_bytes())?;
            child.wait()
        })
        .unwrap();
    assert!(check.success());
    assert_eq!(scored(&out)[0]["solved"], true);
}

/// `--branches PREFIX`: each succeeded flow of the suite is committed on a branch of its own
/// (`PREFIX/ID`), the repository's working tree as it was; a failed flow gets none; the scores
/// are those of a run without it.
#[test]
fn branches_put_each_succeeded_flow_of_a_suite_on_a_branch() {
    let sandbox = Sandbox::new(&[("calc.py", BUGGY), ("test_calc.py", TEST)]);
    let root = sandbox.root();
    for args in [
        &["init", "-q"][..],
        &["add", "-A"],
        &["commit", "-qm", "start"],
    ] {
        git(&sandbox.repo, args);
    }
    let mut suite = String::new();
    for (id, steps) in [
        ("right", write_calc("return a + b")),
        (
            "broken",
            json!([{"id": "c", "operation": "execute_shell_command",
                           "params": {"command": "exit 1"}}]),
        ),
    ] {
        let check = "python3 -m unittest -q test_calc";
        let line = json!({"id": id, "task": "Fix add in calc.py", "repo": "repo",
                          "plan": plan(root, id, steps), "check": check});
        suite.push_str(&format!("{line}\n"));
    }
    fs::write(root.join("suite.jsonl"), suite).unwrap();
    let out = root.join("eval");
    let output = sandbox
        .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
        .current_dir(root)
        .arg("eval")
        .arg(root.join("suite.jsonl"))
        .args(["--branches", "evalfix", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(
        git(&sandbox.repo, &["show", "evalfix/right:calc.py"]),
        "def add(a, b):\n    return a + b\n"
    );
    let broken = ["rev-parse", "--verify", "-q", "evalfix/broken"];
    assert!(!git_succeeds(&sandbox.repo, &broken));
    assert_eq!(git(&sandbox.repo, &["status", "--porcelain"]), "");
    assert_eq!(
        fs::read_to_string(sandbox.repo.join("calc.py")).unwrap(),
        BUGGY
    );
    let right = scored(&out)
        .into_iter()
        .find(|r| r["id"] == "right")
        .unwrap();
    assert_eq!(right["solved"], json!(true), "{right}");
}
