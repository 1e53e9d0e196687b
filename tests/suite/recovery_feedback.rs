//! The coder sees the failing test (issue 30 §3): when a test step fails and recovery runs the
//! code step again (`modify`, or a `retry` naming it, or seed 002's prose answer), the code
//! step's request carries the failing tests' names, their assertion messages, the end of the
//! runner's output and the recovery's reason.

use serde_json::{Value, json};

use super::fake_llm::*;
use super::support::*;

const START: &str = "def add(a, b):\n    return 0\n";
const BUGGY: &str = "def add(a, b):\n    return a - b\n";
const FIXED: &str = "def add(a, b):\n    return a + b\n";
const TEST: &str = "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n";
const FAILING: &str = "test_calc.py::test_add — AssertionError: assert 0 == 4";
/// A check of the sum whose runner names no failing test: it says what is wrong and exits 1.
/// A failed step of this kind goes to the model first (no try of the coder's before it).
const CHECK: &str = "import sys\nfrom calc import add\n\ntotal = add(2, 2)\nif total != 4:\n    \
                     sys.exit(f\"add(2, 2) returned {total}, not 4\")\n";
/// What the check says of the wrong code.
const CHECK_SAYS: &str = "add(2, 2) returned 0, not 4";
const PYTEST: &str = "python3 -m pytest -q -p no:cacheprovider";
const CHECK_COMMAND: &str = "python3 check_calc.py";
/// Seed 002's recovery prompt asks for "your recommendation and reasoning": a paragraph.
const PARAGRAPH: &str = "The test fails because add subtracts its second argument instead of \
                         adding it. I recommend running the code change again so that add \
                         returns the sum, then running the tests.";

fn sandbox() -> Sandbox {
    let sandbox = Sandbox::new(&[
        ("calc.py", START),
        ("test_calc.py", TEST),
        ("check_calc.py", CHECK),
    ]);
    std::fs::create_dir_all(&sandbox.workspace).unwrap();
    std::fs::write(
        sandbox.workspace.join("ocflow.toml"),
        "[llm]\nmax_attempts = 1\n",
    )
    .unwrap();
    sandbox
}

/// The fix, then its test by `command`.
fn flow(command: &str) -> Value {
    json!([
        {"id": "fix", "operation": "modify_code",
         "params": {"file_path": "calc.py", "instructions": "make add return the sum"}},
        {"id": "test", "operation": "run_tests", "depends_on": ["fix"],
         "params": {"command": command}}
    ])
}

fn code(text: &str) -> Reply {
    chat(&format!("```python\n{text}```\n"))
}

/// The coder's rules: its first request gets the buggy code, the one that says why it runs
/// again gets the fix (so the flow succeeds only if the feedback reached it).
fn coder_rules() -> Vec<Rule> {
    vec![
        Rule::flow_summary().reply(chat("add now adds.")),
        // The flow needed recovery, so it ends with the reflection's call.
        Rule::reflection().reply(chat("The sum was wrong. The retry fixed it.")),
        Rule::prompt_contains("## Why this runs again")
            .named("coder, again")
            .reply(code(FIXED))
            .times(1),
        Rule::prompt_contains("make add return the sum")
            .named("coder, first")
            .reply(code(BUGGY))
            .times(1),
    ]
}

/// The flow tested by `command` (`PYTEST`, or `check_calc.py`, which names no failing test).
fn run(sandbox: &Sandbox, llm: &FakeLlm, command: &str) -> std::process::Output {
    let plan = sandbox.flow(&flow(command));
    sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap()
}

fn second_code_request(llm: &FakeLlm) -> String {
    let requests: Vec<String> = llm
        .bodies()
        .iter()
        .map(last_user_message)
        .filter(|m| m.contains("make add return the sum") || m.contains("add must add"))
        .collect();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert!(
        !requests[0].contains("Why this runs again"),
        "{}",
        requests[0]
    );
    requests[1].clone()
}

#[test]
fn modify_on_the_code_step_shows_the_coder_the_failing_test() {
    let sandbox = sandbox();
    let mut rules = vec![
        Rule::recovery()
            .replies_in_order(vec![
                // A retry may name only the failed step or one it depends on.
                chat(r#"{"strategy": "retry", "reason": "again", "step": {"id": "elsewhere"}}"#),
                chat(
                    &json!({"strategy": "modify", "reason": "add subtracts",
                            "step": {"id": "fix", "params": {"file_path": "calc.py",
                                     "instructions": "add must add"}}})
                    .to_string(),
                ),
            ])
            .times(2),
    ];
    rules.extend(coder_rules());
    let llm = FakeLlm::with_rules(rules);
    let output = run(&sandbox, &llm, CHECK_COMMAND);
    assert_exit(&output, 0);
    llm.verify();
    let again = second_code_request(&llm);
    for expected in [
        "step `test` failed",
        CHECK_SAYS,
        "What to change, as the error handler sees it: add subtracts",
        "add must add",
    ] {
        assert!(
            again.contains(expected),
            "{expected:?} missing from:\n{again}"
        );
    }
    let reask = llm
        .bodies()
        .iter()
        .map(last_user_message)
        .find(|m| m.contains("That answer cannot be used"))
        .unwrap();
    assert!(
        reask.contains("`retry` may run step test again or a step it depends on; `elsewhere`"),
        "{reask}"
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.task_dir("t").join("final_output/calc.py")).unwrap(),
        FIXED
    );
}

#[test]
fn seed_002s_prose_answer_is_a_retry_of_the_code_step_with_the_paragraph() {
    let sandbox = sandbox();
    let mut rules = vec![Rule::recovery().reply(chat(PARAGRAPH)).times(1)];
    rules.extend(coder_rules());
    let llm = FakeLlm::with_rules(rules);
    let output = run(&sandbox, &llm, CHECK_COMMAND);
    assert_exit(&output, 0);
    llm.verify();
    let again = second_code_request(&llm);
    assert!(again.contains(CHECK_SAYS), "{again}");
    assert!(again.contains(PARAGRAPH), "{again}");
    assert!(
        stderr(&output).contains("was a paragraph, not JSON: it is taken as the reason of a retry"),
        "{}",
        stderr(&output)
    );
    let test = sandbox.step_status("t", "test");
    assert_eq!(test["recoveries"][0]["strategy"], json!("retry"));
    assert_eq!(test["recoveries"][0]["reason"], json!(PARAGRAPH));
    assert_eq!(sandbox.step_status("t", "fix")["attempts"], json!(2));
    assert_eq!(test["attempts"], json!(2));
    assert_eq!(test["status"], json!("succeeded"));
}

/// Issue 37: seed 002's own prose answer, "3. Abort and report to user.", is an abort — it used
/// to be carried out as a retry. The coder is never asked again and the flow fails with it.
#[test]
fn seed_002s_prose_choice_to_abort_is_carried_out() {
    let sandbox = sandbox();
    let abort = "3. Abort and report to user. The test expects a sum and nothing in the flow \
                 can change it.";
    let llm = FakeLlm::with_rules(vec![
        Rule::recovery().reply(chat(abort)).times(1),
        Rule::flow_summary().reply(chat("The flow was aborted.")),
        Rule::reflection().reply(chat("The sum was wrong. Nothing fixed it.")),
        Rule::prompt_contains("make add return the sum")
            .named("coder, first")
            .reply(code(BUGGY))
            .times(1),
    ]);
    let output = run(&sandbox, &llm, CHECK_COMMAND);
    assert_exit(&output, 1);
    llm.verify();
    assert!(
        stderr(&output).contains("was a paragraph, not JSON: its choice, `abort`, is carried out"),
        "{}",
        stderr(&output)
    );
    let test = sandbox.step_status("t", "test");
    assert_eq!(test["recoveries"][0]["strategy"], json!("abort"));
    assert_eq!(sandbox.step_status("t", "fix")["attempts"], json!(1));
    assert_eq!(sandbox.status("t")["state"], json!("failed"));
}

/// Issue 41's eval: after a wrong first change, a real Qwen2.5-Coder-0.5B's recovery answers
/// were unusable (a `modify` of a step outside the failed one's reach, given twice) or a retry
/// of the failing check with the same parameters a second time (stuck): the flow failed where
/// the model alone, shown the failing tests once, gets its second try. When the model gives no
/// usable strategy for a failed test of code, the code step runs again once, shown the failing
/// test (Aider's second try, taken by ocflow), within the attempts allowed.
#[test]
fn a_failed_test_gets_the_coders_second_try_when_recovery_gives_no_strategy() {
    let unusable = chat(r#"{"strategy": "modify", "reason": "x", "step": {"id": "elsewhere"}}"#);
    for answers in [
        // Unusable, the same answer twice.
        vec![unusable.clone(), unusable],
        // A retry of the deterministic test, a second time.
        vec![
            chat(r#"{"strategy": "retry", "reason": "flaky"}"#),
            chat(r#"{"strategy": "retry", "reason": "flaky"}"#),
        ],
    ] {
        let sandbox = sandbox();
        let mut rules = vec![Rule::recovery().replies_in_order(answers)];
        rules.extend(coder_rules());
        let llm = FakeLlm::with_rules(rules);
        let output = run(&sandbox, &llm, CHECK_COMMAND);
        assert_exit(&output, 0);
        let again = second_code_request(&llm);
        assert!(again.contains(CHECK_SAYS), "{again}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("the model gave no usable recovery strategy")
                && stderr.contains("step fix runs again"),
            "{stderr}"
        );
        let test = sandbox.step_status("t", "test");
        assert_eq!(test["status"], json!("succeeded"), "{test}");
    }
}

/// Issue 41's eval: all-your-base's three recovery answers from a 0.5B model were each cut off
/// at the token limit (a `steps` list repeated until stopped), about a minute and a half each
/// on a CPU. Two answers in a row with the same problem end the re-asks, as they do the
/// planner's: the third answer (usable here, so the test can tell) is never asked for, and the
/// coder's try is taken instead.
#[test]
fn the_same_problem_twice_ends_the_recovery_answers() {
    let sandbox = sandbox();
    let cut = |filler: &str| Reply::Chat {
        content: format!(r#"{{"strategy": "modify", "reason": "{filler}", "steps": [{{"id": "#),
        usage: (100, 1535),
        finish_reason: "length",
    };
    let usable = chat(r#"{"strategy": "retry", "reason": "add must add", "step": {"id": "fix"}}"#);
    let mut rules = vec![Rule::recovery().replies_in_order(vec![cut("a"), cut("b"), usable])];
    rules.extend(coder_rules());
    let llm = FakeLlm::with_rules(rules);
    let output = run(&sandbox, &llm, CHECK_COMMAND);
    assert_exit(&output, 0);
    assert_eq!(sandbox.status("t")["recovery_calls"], json!(2));
    let answers = sandbox.task_dir("t").join("recovery");
    assert!(answers.join("test-round1-answer2.md").is_file());
    assert!(!answers.join("test-round1-answer3.md").exists());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no usable recovery strategy") && stderr.contains("step fix runs again"),
        "{stderr}"
    );
    let again = second_code_request(&llm);
    assert!(again.contains(CHECK_SAYS), "{again}");
}

/// Issue 41's eval: phone-number's plan ran its tests first and the change after, with no
/// dependency between them: the tests judged the starting code beside the change, and no
/// coder's try could follow them. A plan given with `--plan` (read for the first time) has its
/// tests wait for every change, wherever it wrote them, and says so.
#[test]
fn tests_a_plan_wrote_before_the_change_run_after_it() {
    let sandbox = sandbox();
    let plan = sandbox.flow(&json!([
        {"id": "test", "operation": "run_tests", "params": {"command": PYTEST}},
        {"id": "fix", "operation": "modify_code",
         "params": {"file_path": "calc.py", "instructions": "make add return the sum"}}
    ]));
    let llm = FakeLlm::with_rules(vec![
        Rule::flow_summary().reply(chat("add now adds.")),
        Rule::prompt_contains("make add return the sum").reply(code(FIXED)),
    ]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let test = sandbox.step_status("t", "test");
    assert_eq!(
        (test["status"].clone(), test["attempts"].clone()),
        (json!("succeeded"), json!(1)),
        "{test}"
    );
    assert_eq!(sandbox.status("t")["recovery_calls"], json!(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "step test runs a command that must pass at the end, and did not depend \
                         on step fix"
        ),
        "{stderr}"
    );
}

/// The second try is taken once: the same failure after it stops the flow, as before.
#[test]
fn the_coders_second_try_is_taken_once() {
    let sandbox = sandbox();
    let unusable = chat(r#"{"strategy": "modify", "reason": "x", "step": {"id": "elsewhere"}}"#);
    let llm = FakeLlm::with_rules(vec![
        Rule::recovery().reply(unusable),
        Rule::flow_summary().reply(chat("add still fails.")),
        Rule::reflection().reply(chat("The sum was wrong.")),
        Rule::prompt_contains("make add return the sum").reply(code(BUGGY)),
    ]);
    let output = run(&sandbox, &llm, PYTEST);
    assert_exit(&output, 1);
    let fix = sandbox.step_status("t", "fix");
    assert_eq!(fix["attempts"], json!(2), "{fix}");
    let message = sandbox.status("t")["message"].as_str().unwrap().to_string();
    assert!(message.contains("no usable recovery strategy"), "{message}");
}

/// ocflow never tells a step that writes tests to make them pass: when the nearest code step of
/// a failed test writes a test file, there is no second try of ocflow's own.
#[test]
fn the_second_try_never_rewrites_a_test() {
    let sandbox = sandbox();
    let plan = sandbox.flow(&json!([
        {"id": "fix", "operation": "modify_code",
         "params": {"file_path": "calc.py", "instructions": "make add return the sum"}},
        {"id": "more_tests", "operation": "modify_code", "depends_on": ["fix"],
         "params": {"file_path": "test_calc.py", "instructions": "add a test of add(1, 1)"}},
        {"id": "test", "operation": "run_tests", "depends_on": ["more_tests"],
         "params": {"command": "python3 -m pytest -q -p no:cacheprovider"}}
    ]));
    let unusable = chat(r#"{"strategy": "modify", "reason": "x", "step": {"id": "elsewhere"}}"#);
    let llm = FakeLlm::with_rules(vec![
        Rule::recovery().reply(unusable),
        Rule::flow_summary().reply(chat("add still fails.")),
        Rule::reflection().reply(chat("The sum was wrong.")),
        Rule::prompt_contains("add a test of add(1, 1)").reply(code(TEST)),
        Rule::prompt_contains("make add return the sum").reply(code(BUGGY)),
    ]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 1);
    let writer = sandbox.step_status("t", "more_tests");
    assert_eq!(writer["attempts"], json!(1), "{writer}");
    let message = sandbox.status("t")["message"].as_str().unwrap().to_string();
    assert!(message.contains("no usable recovery strategy"), "{message}");
}

/// Issue 41: tests of code that failed (their runner named them) get the coder's try, shown
/// them, before the model is asked for a strategy: the model alone gets its second try so in
/// Aider's protocol, and in the eval a small model's recovery answer cost minutes on a CPU and
/// was rarely usable. When that try fixes the code, the model is never asked.
#[test]
fn failing_tests_of_code_get_the_coders_try_before_the_model_is_asked() {
    let sandbox = sandbox();
    let abort = chat(r#"{"strategy": "abort", "reason": "nothing to do"}"#);
    let mut rules = vec![Rule::recovery().reply(abort).times(0)];
    rules.extend(coder_rules());
    let llm = FakeLlm::with_rules(rules);
    let output = run(&sandbox, &llm, PYTEST);
    assert_exit(&output, 0);
    llm.verify();
    let again = second_code_request(&llm);
    assert!(again.contains(FAILING), "{again}");
    assert!(!again.contains("as the error handler sees it"), "{again}");
    assert!(
        stderr(&output).contains("before the model is asked for a strategy: step fix runs again"),
        "{}",
        stderr(&output)
    );
    let test = sandbox.step_status("t", "test");
    assert_eq!(test["recoveries"][0]["strategy"], json!("retry"), "{test}");
    assert_eq!(test["status"], json!("succeeded"), "{test}");
    assert_eq!(sandbox.status("t")["recovery_calls"], json!(0));
    // Nothing was recovered by the model: no reflection on it either.
    assert_eq!(llm.calls("reflection"), 0);
}

/// The coder's try is ocflow's: when it fails too, a model that asks to run the code again,
/// with its reason, is carried out (not "stuck" on a strategy it never proposed before).
#[test]
fn after_the_coders_try_the_models_retry_of_the_code_is_carried_out() {
    let sandbox = sandbox();
    let llm = FakeLlm::with_rules(vec![
        Rule::recovery().reply(chat(PARAGRAPH)).times(1),
        Rule::flow_summary().reply(chat("add now adds.")),
        Rule::reflection().reply(chat("The sum was wrong. The retry fixed it.")),
        Rule::prompt_contains(PARAGRAPH)
            .named("coder, told why")
            .reply(code(FIXED))
            .times(1),
        Rule::prompt_contains("make add return the sum")
            .named("coder")
            .reply(code(BUGGY))
            .times(2),
    ]);
    let output = run(&sandbox, &llm, PYTEST);
    assert_exit(&output, 0);
    llm.verify();
    let test = sandbox.step_status("t", "test");
    let strategies: Vec<&str> = (test["recoveries"].as_array().unwrap().iter())
        .map(|r| r["strategy"].as_str().unwrap())
        .collect();
    assert_eq!(strategies, ["retry", "retry"], "{test}");
    assert_eq!(sandbox.step_status("t", "fix")["attempts"], json!(3));
}

/// The coder's try counts against the failed step's attempts like any recovery: a test step at
/// `max_attempts_per_step` is not run again for it.
#[test]
fn the_coders_try_stays_within_the_failed_steps_attempts() {
    let sandbox = sandbox();
    std::fs::write(
        sandbox.workspace.join("ocflow.toml"),
        "[llm]\nmax_attempts = 1\n[recovery]\nmax_attempts_per_step = 1\n",
    )
    .unwrap();
    let llm = FakeLlm::with_rules(vec![
        Rule::flow_summary().reply(chat("add still fails.")),
        Rule::prompt_contains("make add return the sum")
            .reply(code(BUGGY))
            .times(1),
    ]);
    let output = run(&sandbox, &llm, PYTEST);
    assert_exit(&output, 1);
    llm.verify();
    let message = sandbox.status("t")["message"].as_str().unwrap().to_string();
    assert!(message.contains("max_attempts_per_step"), "{message}");
}

/// Issue 41's eval: poker's recovery question (its 36 failing tests in whole) was longer than
/// the server's context, which refused it (HTTP 400), and the flow ended there. A question the
/// endpoint refuses leaves the coder's second try, a request of its own.
#[test]
fn the_coder_tries_again_when_the_endpoint_refuses_the_recovery_question() {
    let sandbox = sandbox();
    let refusal = status(
        400,
        &json!({"error": {"type": "invalid_request_error", "message":
            "This model's maximum context length is 8192 tokens. However, you requested 12326 \
             tokens (10790 in the messages, 1536 in the completion)."}})
        .to_string(),
    );
    // Refused however it is asked (the client asks again without its answer format).
    let mut rules = vec![Rule::recovery().reply(refusal)];
    rules.extend(coder_rules());
    let llm = FakeLlm::with_rules(rules);
    let output = run(&sandbox, &llm, CHECK_COMMAND);
    assert_exit(&output, 0);
    llm.verify();
    assert!(llm.calls("recovery") >= 1);
    let again = second_code_request(&llm);
    assert!(again.contains(CHECK_SAYS), "{again}");
    assert!(
        stderr(&output).contains("the question was refused"),
        "{}",
        stderr(&output)
    );
    assert_eq!(sandbox.status("t")["state"], json!("succeeded"));
}
