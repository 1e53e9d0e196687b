//! Recovery against the fake LLM: each strategy end to end, test-and-fix, the caps and the
//! stuck rule, a crash during recovery, and proposals refused by validation.

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::fake_llm::*;
use super::support::*;

/// A sandbox whose LLM calls are not retried (a missing scripted summary fails fast and the
/// journal summary is written).
fn sandbox(files: &[(&str, &str)], recovery: &str) -> Sandbox {
    let sandbox = Sandbox::new(files);
    std::fs::create_dir_all(&sandbox.workspace).unwrap();
    std::fs::write(
        sandbox.workspace.join("ocflow.toml"),
        format!("[llm]\nmax_attempts = 1\n[recovery]\n{recovery}\n"),
    )
    .unwrap();
    sandbox
}

fn run_flow(sandbox: &Sandbox, llm: &FakeLlm, flow: &Value) -> Output {
    let plan = sandbox.flow(flow);
    sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap()
}

fn strategy(value: Value) -> Reply {
    chat(&value.to_string())
}

fn shell(id: &str, command: &str, deps: &[&str]) -> Value {
    json!({"id": id, "operation": "execute_shell_command", "params": {"command": command},
           "depends_on": deps})
}

fn recovery_prompts(llm: &FakeLlm) -> Vec<String> {
    llm.bodies()
        .iter()
        .map(last_user_message)
        .filter(|m| m.contains("Choose ONE strategy") || m.contains("That answer cannot be used"))
        .collect()
}

fn summary(sandbox: &Sandbox) -> String {
    std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap()
}

#[test]
fn retry_runs_the_same_step_again() {
    let sandbox = sandbox(&[], "");
    let flag = sandbox.shared().join("flag");
    let command = format!(
        "if [ -f {0} ]; then echo ok; else touch {0}; exit 1; fi",
        flag.display()
    );
    let llm = FakeLlm::in_order(vec![strategy(
        json!({"strategy": "retry", "reason": "it looks flaky"}),
    )]);
    assert_exit(
        &run_flow(&sandbox, &llm, &json!([shell("s", &command, &[])])),
        0,
    );
    let step = sandbox.step_status("t", "s");
    assert_eq!(
        (step["status"].clone(), step["attempts"].clone()),
        (json!("succeeded"), json!(2))
    );
    assert_eq!(step["recoveries"][0]["strategy"], json!("retry"));
    assert_eq!(step["recoveries"][0]["reason"], json!("it looks flaky"));
    assert_eq!(sandbox.status("t")["recovery_calls"], json!(1));
    let prompt = &recovery_prompts(&llm)[0];
    assert!(
        prompt.contains("\"id\":\"s\"") && prompt.contains("command exited with code 1"),
        "{prompt}"
    );
    let journal = std::fs::read_to_string(sandbox.task_dir("t").join("journal.jsonl")).unwrap();
    assert!(
        journal.contains("\"type\":\"recovery_decided\"")
            && journal.contains("\"strategy\":\"retry\"")
    );
}

#[test]
fn modify_changes_the_failed_step_in_a_new_revision() {
    let sandbox = sandbox(&[], "");
    let llm = FakeLlm::in_order(vec![strategy(
        json!({"strategy": "modify", "reason": "wrong command",
        "step": {"id": "s", "params": {"command": "echo fixed > fixed.txt"}}}),
    )]);
    assert_exit(
        &run_flow(&sandbox, &llm, &json!([shell("s", "exit 3", &[])])),
        0,
    );
    let task = sandbox.task_dir("t");
    assert_eq!(sandbox.status("t")["revision"], json!(2));
    assert_eq!(
        read_json(&task.join("flow.r1.json"))["steps"][0]["params"]["command"],
        json!("exit 3")
    );
    assert_eq!(
        read_json(&task.join("flow.json"))["steps"][0]["params"]["command"],
        json!("echo fixed > fixed.txt")
    );
    assert_eq!(
        std::fs::read_to_string(task.join("final_output/fixed.txt")).unwrap(),
        "fixed\n"
    );
    assert_eq!(
        sandbox.step_status("t", "s")["recoveries"][0]["revision"],
        json!(2)
    );
}

const BUGGY: &str = "def add(a, b):\n    return a - b\n";
const FIXED: &str = "def add(a, b):\n    return a + b\n";

#[test]
fn a_failing_test_is_fixed_by_modifying_the_code_and_then_passes() {
    let sandbox = sandbox(
        &[(
            "test_calc.py",
            "from calc import add\n\ndef test_add():\n    assert add(2, 2) == 4\n",
        )],
        "",
    );
    let flow = json!([
        {"id": "write_code", "operation": "write_file",
         "params": {"file_path": "calc.py", "content": BUGGY}},
        {"id": "test", "operation": "run_tests", "depends_on": "write_code",
         "params": {"command": "python3 -m pytest -q -p no:cacheprovider"}}
    ]);
    let llm = FakeLlm::in_order(vec![strategy(
        json!({"strategy": "modify", "reason": "add subtracts",
        "step": {"id": "write_code", "params": {"file_path": "calc.py", "content": FIXED}}}),
    )]);
    assert_exit(&run_flow(&sandbox, &llm, &flow), 0);
    let prompt = &recovery_prompts(&llm)[0];
    assert!(
        prompt.contains("- test_calc.py::test_add — AssertionError: assert 0 == 4"),
        "the structured failure reaches the prompt: {prompt}"
    );
    assert_eq!(sandbox.step_status("t", "write_code")["attempts"], json!(2));
    assert_eq!(sandbox.step_status("t", "test")["attempts"], json!(2));
    assert_eq!(sandbox.result("t", "test")["tests"]["passed"], json!(1));
    assert_eq!(
        std::fs::read_to_string(sandbox.task_dir("t").join("final_output/calc.py")).unwrap(),
        FIXED
    );
}

#[test]
fn alternative_replaces_the_failed_step_and_rewires_its_dependents() {
    let sandbox = sandbox(&[], "");
    let flow = json!([shell("a", "exit 1", &[]), {"id": "b", "operation": "write_file",
        "depends_on": "a", "params": {"file_path": "b.txt", "content": "b"}}]);
    let llm = FakeLlm::in_order(vec![strategy(
        json!({"strategy": "alternative", "reason": "write it directly",
        "steps": [{"id": "a2", "operation": "write_file",
                   "params": {"file_path": "alt.txt", "content": "alt"}}]}),
    )]);
    assert_exit(&run_flow(&sandbox, &llm, &flow), 0);
    assert_eq!(sandbox.step_status("t", "a")["status"], json!("skipped"));
    assert!(
        sandbox.step_status("t", "a")["message"]
            .as_str()
            .unwrap()
            .starts_with("replaced in revision 2")
    );
    assert_eq!(sandbox.step_status("t", "a2")["status"], json!("succeeded"));
    let current = read_json(&sandbox.task_dir("t").join("flow.json"));
    assert_eq!(
        current["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].clone())
            .collect::<Vec<_>>(),
        vec![json!("b"), json!("a2")]
    );
    assert_eq!(current["steps"][0]["depends_on"], json!(["a2"]));
    let files: Vec<String> = text_tree(&sandbox.task_dir("t").join("final_output"))
        .into_keys()
        .collect();
    assert_eq!(files, vec!["alt.txt", "b.txt"]);
}

#[test]
fn skip_skips_the_step_and_what_needs_it_and_says_why() {
    let sandbox = sandbox(&[], "");
    let flow = json!([
        shell("a", "exit 1", &[]),
        {"id": "b", "operation": "write_file", "depends_on": "a",
         "params": {"file_path": "b.txt", "content": "b"}},
        {"id": "c", "operation": "write_file", "params": {"file_path": "c.txt", "content": "c"}}
    ]);
    let llm = FakeLlm::in_order(vec![strategy(
        json!({"strategy": "skip", "reason": "optional check"}),
    )]);
    assert_exit(&run_flow(&sandbox, &llm, &flow), 0);
    assert_eq!(
        sandbox.step_status("t", "a")["message"],
        json!("skipped by recovery: optional check")
    );
    assert_eq!(sandbox.step_status("t", "b")["status"], json!("skipped"));
    assert_eq!(
        sandbox.step_status("t", "b")["message"],
        json!("skipped: it needs the outputs of the skipped step a")
    );
    assert_eq!(sandbox.step_status("t", "c")["status"], json!("succeeded"));
    assert!(
        summary(&sandbox).contains(
            "- `b` write_file (coder) — skipped: skipped: it needs the outputs of the skipped \
             step a"
        ),
        "{}",
        summary(&sandbox)
    );
}

#[test]
fn replan_replaces_the_remaining_steps_in_a_new_revision() {
    let sandbox = sandbox(&[], "");
    let flow = json!([
        {"id": "a", "operation": "write_file", "params": {"file_path": "a.txt", "content": "a"}},
        {"id": "b", "operation": "execute_shell_command", "depends_on": "a",
         "params": {"command": "exit 1"}},
        {"id": "c", "operation": "write_file", "depends_on": "b",
         "params": {"file_path": "c.txt", "content": "c"}}
    ]);
    let llm = FakeLlm::in_order(vec![strategy(
        json!({"strategy": "replan", "reason": "another way",
        "steps": [{"id": "d", "operation": "write_file", "depends_on": ["a"],
                   "params": {"file_path": "d.txt", "content": "d"}}]}),
    )]);
    assert_exit(&run_flow(&sandbox, &llm, &flow), 0);
    let status = sandbox.status("t");
    assert_eq!(
        (status["revision"].clone(), status["replans"].clone()),
        (json!(2), json!(1))
    );
    assert_eq!(
        sandbox.step_status("t", "a")["attempts"],
        json!(1),
        "completed steps are kept"
    );
    for dropped in ["b", "c"] {
        assert_eq!(
            sandbox.step_status("t", dropped)["status"],
            json!("skipped")
        );
        assert_eq!(
            sandbox.step_status("t", dropped)["message"],
            json!("dropped by revision 2")
        );
    }
    let files: Vec<String> = text_tree(&sandbox.task_dir("t").join("final_output"))
        .into_keys()
        .collect();
    assert_eq!(files, vec!["a.txt", "d.txt"]);
    assert!(sandbox.task_dir("t").join("flow.r2.json").is_file());
}

#[test]
fn abort_fails_the_flow_with_the_reason_in_the_summary() {
    let sandbox = sandbox(&[], "");
    let llm = FakeLlm::in_order(vec![strategy(
        json!({"strategy": "abort", "reason": "the repository has no tests to fix"}),
    )]);
    assert_exit(
        &run_flow(&sandbox, &llm, &json!([shell("a", "exit 1", &[])])),
        1,
    );
    assert_eq!(sandbox.status("t")["state"], json!("failed"));
    assert!(
        summary(&sandbox)
            .contains("recovery aborted the flow at step a: the repository has no tests to fix"),
        "{}",
        summary(&sandbox)
    );
}

#[test]
fn the_attempts_cap_stops_recovery() {
    let sandbox = sandbox(&[], "max_attempts_per_step = 3");
    let modify = |code: u32| {
        strategy(json!({"strategy": "modify", "reason": "try another exit",
            "step": {"id": "a", "params": {"command": format!("exit {code}")}}}))
    };
    let llm = FakeLlm::in_order(vec![modify(4), modify(5), modify(6)]);
    assert_exit(
        &run_flow(&sandbox, &llm, &json!([shell("a", "exit 1", &[])])),
        1,
    );
    assert_eq!(sandbox.step_status("t", "a")["attempts"], json!(3));
    assert_eq!(
        recovery_prompts(&llm).len(),
        2,
        "the cap is checked before asking"
    );
    assert!(
        summary(&sandbox).contains("step a has failed 3 time(s), the most allowed per step"),
        "{}",
        summary(&sandbox)
    );
}

#[test]
fn the_revisions_cap_stops_recovery() {
    let sandbox = sandbox(&[], "max_revisions = 1");
    let replan = |id: &str| {
        strategy(
            json!({"strategy": "replan", "reason": "again", "steps": [shell(id, "exit 1", &[])]}),
        )
    };
    let llm = FakeLlm::in_order(vec![replan("b"), replan("c")]);
    assert_exit(
        &run_flow(&sandbox, &llm, &json!([shell("a", "exit 1", &[])])),
        1,
    );
    assert_eq!(sandbox.status("t")["replans"], json!(1));
    assert!(
        summary(&sandbox)
            .contains("the flow has been replanned 1 time(s), the most allowed (max_revisions)"),
        "{}",
        summary(&sandbox)
    );
}

#[test]
fn the_same_strategy_twice_is_stuck() {
    let sandbox = sandbox(&[], "");
    let retry = || strategy(json!({"strategy": "retry", "reason": "again"}));
    let llm = FakeLlm::in_order(vec![retry(), retry()]);
    assert_exit(
        &run_flow(&sandbox, &llm, &json!([shell("a", "exit 1", &[])])),
        1,
    );
    assert_eq!(sandbox.step_status("t", "a")["attempts"], json!(2));
    assert!(
        summary(&sandbox).contains(
            "recovery is stuck: the LLM proposed `retry` with the same parameters \
             for step a a second time"
        ),
        "{}",
        summary(&sandbox)
    );
}

#[test]
fn an_alternative_writing_outside_the_repository_is_refused_by_validation() {
    let sandbox = sandbox(&[], "");
    let outside = strategy(json!({"strategy": "alternative", "reason": "x",
        "steps": [{"id": "evil", "operation": "write_file",
                   "params": {"file_path": "../evil.txt", "content": "x"}}]}));
    let destructive = strategy(json!({"strategy": "alternative", "reason": "x",
        "steps": [shell("wipe", "rm -rf ~", &[])]}));
    let abort = strategy(json!({"strategy": "abort", "reason": "nothing safe to do"}));
    let llm = FakeLlm::in_order(vec![outside, destructive, abort]);
    assert_exit(
        &run_flow(&sandbox, &llm, &json!([shell("a", "exit 1", &[])])),
        1,
    );
    let prompts = recovery_prompts(&llm);
    assert_eq!(prompts.len(), 3);
    assert!(
        prompts[1].contains("step evil: `file_path`: \"../evil.txt\" contains `..`"),
        "{}",
        prompts[1]
    );
    assert!(
        prompts[2].contains(
            "step wipe: the command is refused (destructive): `rm -r ~` deletes a tree outside \
             the repository"
        ),
        "{}",
        prompts[2]
    );
    assert!(!sandbox.root().join("evil.txt").exists());
    assert!(summary(&sandbox).contains("nothing safe to do"));
}

#[test]
fn a_timeout_marked_retryable_is_retried_without_an_llm() {
    let sandbox = Sandbox::new(&[]);
    let flag = sandbox.shared().join("slow-once");
    let command = format!(
        "if [ -f {0} ]; then echo ok; else touch {0}; sleep 60; fi",
        flag.display()
    );
    // 5 s: the sandbox's start counts in the timeout, and takes hundreds of ms on a loaded
    // machine; the retry's `echo` must end within it.
    let flow = json!([{"id": "s", "operation": "execute_shell_command",
        "params": {"command": command, "timeout_seconds": 5, "retryable": true}}]);
    let output = sandbox.run(&flow, "t");
    assert_exit(&output, 0);
    let step = sandbox.step_status("t", "s");
    assert_eq!(
        (step["attempts"].clone(), step["auto_retries"].clone()),
        (json!(2), json!(1))
    );
    assert!(
        stderr(&output).contains("s: transient failure, retry 1"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_kill_during_recovery_is_resumed() {
    let sandbox = sandbox(&[], "");
    let slow = FakeLlm::in_order(vec![Reply::SlowChat {
        content: json!({"strategy": "retry", "reason": "slow"}).to_string(),
        delay: Duration::from_secs(60),
    }]);
    let plan = sandbox.flow(&json!([shell("a", "exit 1", &[])]));
    let mut child = sandbox
        .ocflow_llm(&slow.base_url())
        .args(["run", "--task-id", "t", "--plan"])
        .arg(&plan)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status_file = sandbox.task_dir("t").join("flow_status.json");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&status_file).is_ok_and(|t| t.contains("\"pending_recovery\"")) {
        assert!(Instant::now() < deadline, "recovery never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200)); // the request is in flight
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(sandbox.status("t")["pending_recovery"]["step"], json!("a"));

    let llm = FakeLlm::in_order(vec![strategy(
        json!({"strategy": "modify", "reason": "make it pass",
        "step": {"id": "a", "params": {"command": "true"}}}),
    )]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["resume", "t"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let step = sandbox.step_status("t", "a");
    assert_eq!(
        (step["status"].clone(), step["attempts"].clone()),
        (json!("succeeded"), json!(2))
    );
    assert_eq!(step["recoveries"].as_array().unwrap().len(), 1);
    assert!(sandbox.status("t").get("pending_recovery").is_none());
}

#[test]
fn resume_recover_starts_a_new_recovery_round() {
    let sandbox = sandbox(&[], "");
    let flag = sandbox.shared().join("fixed");
    let command = format!("test -f {}", flag.display());
    let llm = FakeLlm::in_order(vec![strategy(
        json!({"strategy": "abort", "reason": "needs a human"}),
    )]);
    assert_exit(
        &run_flow(&sandbox, &llm, &json!([shell("a", &command, &[])])),
        1,
    );
    std::fs::write(&flag, "").unwrap();
    let llm = FakeLlm::in_order(vec![strategy(
        json!({"strategy": "retry", "reason": "the human fixed it"}),
    )]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["resume", "t", "--recover"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let step = sandbox.step_status("t", "a");
    assert_eq!(
        step["recoveries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["strategy"].clone())
            .collect::<Vec<_>>(),
        vec![json!("abort"), json!("retry")]
    );
    assert_eq!(sandbox.status("t")["state"], json!("succeeded"));
}

/// `resume --retry-failed` runs the failed step again as it says, with an LLM configured too
/// (it used to ask the LLM for a new recovery instead, and the step never re-ran).
#[test]
fn resume_retry_failed_runs_the_failed_step_again_without_asking_the_llm() {
    let sandbox = sandbox(&[], "");
    let flag = sandbox.shared().join("fixed");
    let command = format!("test -f {}", flag.display());
    let llm = FakeLlm::in_order(vec![strategy(
        json!({"strategy": "abort", "reason": "needs a human"}),
    )]);
    assert_exit(
        &run_flow(&sandbox, &llm, &json!([shell("a", &command, &[])])),
        1,
    );
    std::fs::write(&flag, "").unwrap();
    let llm = FakeLlm::with_rules(vec![
        Rule::recovery().times(0),
        Rule::flow_summary()
            .reply(chat("The check passed once fixed."))
            .times(1),
    ]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["resume", "t", "--retry-failed"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let step = sandbox.step_status("t", "a");
    assert_eq!(step["attempts"], json!(2));
    assert_eq!(
        step["recoveries"].as_array().unwrap().len(),
        1,
        "no new recovery"
    );
    assert!(
        recovery_prompts(&llm).is_empty(),
        "the LLM was asked to recover"
    );
    assert_eq!(sandbox.status("t")["state"], json!("succeeded"));
}

#[test]
fn a_failure_queued_behind_a_replan_that_dropped_it_is_not_recovered() {
    let sandbox = sandbox(&[], "");
    let flow = json!([
        shell("a", "sleep 0.2; exit 1", &[]),
        shell("b", "sleep 0.3; exit 1", &[])
    ]);
    // Both steps fail while running at once: the first failure's recovery replans, and is the
    // only recovery asked for. The flow summary is refused, as with the other tests here.
    let llm = FakeLlm::with_rules(vec![
        Rule::recovery()
            .reply(strategy(
                json!({"strategy": "replan", "reason": "do it differently",
                "steps": [{"id": "c", "operation": "write_file",
                           "params": {"file_path": "c.txt", "content": "c"}}]}),
            ))
            .times(1),
        Rule::flow_summary()
            .reply(status(500, "no summary in this test"))
            .times(1),
        // A flow that recovered ends with the reflection's call (issue 30 §4), refused too.
        Rule::reflection()
            .reply(status(500, "no reflection in this test"))
            .times(1),
    ]);
    let plan = sandbox.flow(&flow);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--jobs", "2", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(
        recovery_prompts(&llm).len(),
        1,
        "b was dropped by the replan: no recovery for it"
    );
    assert_eq!(sandbox.step_status("t", "b")["status"], json!("skipped"));
    assert_eq!(sandbox.step_status("t", "c")["status"], json!("succeeded"));
}

/// A replan's new steps rewrite a file a finished step wrote, without depending on it: they
/// come after every finished step (it has already run), so this is no race. It used to be
/// refused as "steps fix and fix_again may run at the same time".
#[test]
fn a_replan_may_rewrite_what_a_finished_step_wrote() {
    let sandbox = sandbox(&[("m.py", "x = 1\n")], "");
    let flow = json!([
        {"id": "fix", "operation": "write_file",
         "params": {"file_path": "m.py", "content": "x = 2\n"}},
        {"id": "test", "operation": "execute_shell_command", "depends_on": "fix",
         "params": {"command": "grep -q 'x = 3' m.py"}}
    ]);
    let llm = FakeLlm::in_order(vec![strategy(
        json!({"strategy": "replan", "reason": "3, not 2",
        "steps": [
            {"id": "fix_again", "operation": "write_file",
             "params": {"file_path": "m.py", "content": "x = 3\n"}},
            {"id": "test_again", "operation": "execute_shell_command", "depends_on": "fix_again",
             "params": {"command": "grep -q 'x = 3' m.py"}}
        ]}),
    )]);
    let output = run_flow(&sandbox, &llm, &flow);
    assert_exit(&output, 0);
    assert_eq!(
        sandbox.step_status("t", "test_again")["status"],
        json!("succeeded")
    );
    let revised = read_json(&sandbox.task_dir("t").join("flow.r2.json"));
    assert_eq!(revised["steps"][1]["id"], json!("fix_again"));
    assert_eq!(revised["steps"][1]["depends_on"], json!(["fix"]));
    assert_eq!(
        std::fs::read_to_string(sandbox.task_dir("t").join("final_output/m.py")).unwrap(),
        "x = 3\n"
    );
}

/// A git-ignored `.env` printed by a failing command does not reach the LLM: the recovery
/// request carries markers where its lines and the key were, and a note saying so.
#[test]
fn a_git_ignored_env_printed_by_a_command_is_redacted_from_the_recovery_prompt() {
    let key = "sk-live-0123456789abcdefghijKLMN";
    let env = format!("OPENAI_API_KEY={key}\nDB_HOST=db7.internal.example\n");
    let sandbox = sandbox(&[(".gitignore", ".env\n"), (".env", &env)], "");
    let llm = FakeLlm::in_order(vec![strategy(
        json!({"strategy": "abort", "reason": "the configuration is wrong"}),
    )]);
    let flow = json!([shell(
        "a",
        "cat .env; echo token ghp_abcdefghijklmnopqrstuvwxyz0123; exit 1",
        &[]
    )]);
    assert_exit(&run_flow(&sandbox, &llm, &flow), 1);
    // The command did print them: what follows is redaction, not a command that saw nothing.
    let stdout = sandbox.result("t", "a")["stdout"].to_string();
    assert!(
        stdout.contains(key) && stdout.contains("db7.internal"),
        "{stdout}"
    );

    let prompts = recovery_prompts(&llm);
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    let prompt = &prompts[0];
    for secret in [
        key,
        "OPENAI_API_KEY=sk-",
        "db7.internal.example",
        "ghp_abcdefghij",
    ] {
        assert!(
            !prompt.contains(secret),
            "{secret} reached the LLM:\n{prompt}"
        );
    }
    assert!(
        prompt.contains("[redacted: content of git-ignored .env]"),
        "{prompt}"
    );
    assert!(prompt.contains("[redacted: looks like a key]"), "{prompt}");
    assert!(prompt.contains("Note from ocflow"), "{prompt}");
    for body in llm.bodies() {
        let body = body.to_string();
        assert!(
            !body.contains(key) && !body.contains("db7.internal"),
            "{body}"
        );
    }
}

/// Issue 25: a replan whose new steps reuse ids of the flow (`fix`, `test`) is not refused:
/// the new steps get fresh ids (`fix_2`, `test_2`), their dependencies follow, and it is said.
#[test]
fn a_replan_reusing_step_ids_gets_fresh_ids_and_says_so() {
    let sandbox = sandbox(&[], "");
    let flow = json!([
        {"id": "fix", "operation": "write_file",
         "params": {"file_path": "a.txt", "content": "wrong"}},
        {"id": "test", "operation": "execute_shell_command", "depends_on": "fix",
         "params": {"command": "grep -q right a.txt"}}
    ]);
    let llm = FakeLlm::in_order(vec![strategy(
        json!({"strategy": "replan", "reason": "again",
        "steps": [
            {"id": "fix", "operation": "write_file",
             "params": {"file_path": "a.txt", "content": "right"}},
            {"id": "test", "operation": "execute_shell_command", "depends_on": ["fix"],
             "params": {"command": "grep -q right a.txt"}}]}),
    )]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["--json", "run", "--task-id", "t", "--plan"])
        .arg(sandbox.flow(&flow))
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(
        sandbox.step_status("t", "fix_2")["status"],
        json!("succeeded")
    );
    assert_eq!(
        sandbox.step_status("t", "test_2")["status"],
        json!("succeeded")
    );
    let revised = read_json(&sandbox.task_dir("t").join("flow.json"));
    let test_2 = revised["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "test_2")
        .cloned()
        .unwrap();
    assert_eq!(test_2["depends_on"], json!(["fix_2"]));
    let said = stdout(&output);
    assert!(
        said.contains("it runs as `fix_2`") && said.contains("\"type\":\"warning\""),
        "{said}"
    );
}
