//! Budgets across a whole flow (`--max-tokens`, `--max-cost`, `--max-time`): the flow pauses
//! (exit 3) before a call would exceed one, and `resume` with a higher limit continues where it
//! stopped, what was spent carried over and no step run twice.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::fake_llm::{FakeLlm, Reply, Rule, chat, chat_with_usage};
use super::support::*;

/// What the planner's answer reports it used: more than its estimate (its prompt's characters
/// over four and its `max_tokens`), so the budget lets it through and is spent by it.
const PLANNING: (u64, u64) = (30_000, 1_000);
/// What each step's one call reports it used: within its estimate (a short prompt and the
/// 1000 tokens of `max_tokens`), as a real endpoint's would be.
const STEP: (u64, u64) = (200, 800);

/// Small `max_tokens` for every purpose, so each call's estimate is near what it reports.
fn small_answers(sandbox: &Sandbox, more: &str) {
    let path = sandbox.root().join("user-config/ocflow/config.toml");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("[llm.planner]\nmax_tokens = 1000\n[llm.operations]\nmax_tokens = 1000\n");
    text.push_str(more);
    std::fs::write(path, text).unwrap();
}

fn files(n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("m{i}.py"), format!("def f():\n    return {i}\n")))
        .collect()
}

fn repository(n: usize) -> Sandbox {
    let files = files(n);
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    Sandbox::new(&borrowed)
}

fn fix(i: usize) -> Value {
    json!({"id": format!("fix{i}"), "operation": "modify_code",
           "params": {"file_path": format!("m{i}.py"),
                      "instructions": format!("return 1{i} instead")}})
}

fn fixed(i: usize) -> String {
    format!("```python\ndef f():\n    return 1{i}\n```\n")
}

/// The rules of a flow of `n` parallel edits: the summary's first (so a step's rule never
/// takes it), then the planner's, then each step's, counted under its id.
fn rules(n: usize, task: &str, step: Reply) -> Vec<Rule> {
    let plan = json!({"version": 1, "task": task, "steps": (0..n).map(fix).collect::<Vec<_>>()});
    let mut rules = vec![
        Rule::flow_summary().reply(chat("The files changed.")),
        Rule::planner().reply(chat_with_usage(
            &format!("```json\n{plan}\n```"),
            PLANNING.0,
            PLANNING.1,
        )),
    ];
    rules.extend((0..n).map(|i| {
        let reply = match &step {
            Reply::Chat { usage, .. } => chat_with_usage(&fixed(i), usage.0, usage.1),
            other => other.clone(),
        };
        Rule::prompt_contains(&format!("return 1{i} instead"))
            .named(&format!("fix{i}"))
            .reply(reply)
    }));
    rules
}

fn events(output: &std::process::Output) -> Vec<Value> {
    stdout(output)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

#[test]
fn a_token_budget_pauses_parallel_steps_and_a_higher_one_resumes_them_once_each() {
    let sandbox = repository(4);
    small_answers(&sandbox, "");
    let task = "Make every f return ten more";
    let llm = FakeLlm::with_rules(rules(4, task, chat_with_usage("", STEP.0, STEP.1)));
    let planning = PLANNING.0 + PLANNING.1;
    let step = STEP.0 + STEP.1;
    // Just above planning: room for about one step's call, not for two.
    let limit = planning + step + step / 2;
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args([
            "--json",
            "run",
            "--jobs",
            "4",
            "--task-id",
            "t",
            "--max-tokens",
        ])
        .arg(limit.to_string())
        .arg(task)
        .output()
        .unwrap();
    assert_exit(&output, 3);
    let status = sandbox.status("t");
    assert_eq!(status["state"], "paused", "{status}");
    assert_eq!(status["paused"]["kind"], "budget", "{status}");
    assert_eq!(status["paused"]["budget"], "tokens", "{status}");
    let spent = status["budget"]["spent"]["tokens"].as_u64().unwrap();
    assert!(
        spent <= limit + step,
        "overrun by more than one call: {spent} of {limit}"
    );
    let steps = status["steps"].as_array().unwrap();
    let succeeded: Vec<&Value> = steps
        .iter()
        .filter(|s| s["status"] == "succeeded")
        .collect();
    let pending = steps.iter().filter(|s| s["status"] == "pending").count();
    assert_eq!(succeeded.len(), 1, "one step's call fits: {status}");
    assert_eq!(pending, 3, "the others wait, none failed: {status}");
    assert_eq!(spent, planning + step, "{status}");
    // The stream: the thresholds, then the pause with its reason and how to go on.
    let events = events(&output);
    let percents: Vec<u64> = of_type(&events, "budget")
        .iter()
        .map(|e| e["percent"].as_u64().unwrap())
        .collect();
    assert_eq!(percents, vec![50, 80, 100], "{}", stdout(&output));
    let paused = of_type(&events, "flow_paused");
    assert_eq!(paused.len(), 1, "{}", stdout(&output));
    let message = paused[0]["message"].as_str().unwrap();
    assert!(
        message.contains("the token budget is spent")
            && message.contains("`ocflow resume t --max-tokens …`"),
        "{message}"
    );
    assert!(
        of_type(&events, "flow_finished").is_empty(),
        "paused, not finished"
    );
    assert_eq!(llm.calls("flow summary"), 0, "no summary for a paused flow");
    // `status` and the report say it too.
    let shown = sandbox.ocflow().args(["status", "t"]).output().unwrap();
    let shown = stdout(&shown);
    assert!(
        shown.contains(&format!(
            "budget: {} tokens of {limit} tokens",
            planning + step
        )) && shown.contains("paused: the token budget is spent"),
        "{shown}"
    );
    let report = sandbox.ocflow().args(["report", "t"]).output().unwrap();
    assert_exit(&report, 0);
    let html = std::fs::read_to_string(stdout(&report).trim()).unwrap();
    assert!(html.contains("<dt>budget</dt>"), "{html}");

    // The same limit again would only pause again: refused, naming the flag, nothing run.
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["resume", "t"])
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output)
            .contains("give a higher limit to continue it: `ocflow resume t --max-tokens N`"),
        "{}",
        stderr(&output)
    );
    assert_eq!(sandbox.status("t")["state"], "paused");
    // A higher limit: the three others run, the one that succeeded does not run again.
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["--json", "resume", "t", "--max-tokens", "100000"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let written = text_tree(&sandbox.task_dir("t").join("final_output"));
    for i in 0..4 {
        assert_eq!(
            written[&format!("m{i}.py")],
            format!("def f():\n    return 1{i}\n")
        );
        assert_eq!(
            llm.calls(&format!("fix{i}")),
            1,
            "fix{i} asked once over both runs"
        );
    }
    assert_eq!(llm.calls("planner"), 1);
    let status = sandbox.status("t");
    assert_eq!(status["state"], "succeeded", "{status}");
    assert!(status.get("paused").is_none(), "{status}");
    // Carried over: planning, four steps and the summary (100 + 10).
    assert_eq!(
        status["budget"]["spent"]["tokens"],
        json!(planning + 4 * step + 110),
        "{status}"
    );
    assert_eq!(status["budget"]["limits"]["max_tokens"], json!(100_000));
    let finished = of_type(&events_of(&output), "flow_finished")[0].clone();
    assert_eq!(
        finished["budget"]["spent"], status["budget"]["spent"],
        "{finished}"
    );
    llm.verify();
}

/// `--max-calls` (the budget-kind recipe of CONTRIBUTING.md, followed): planning (its plan and
/// the reproduction question) fits in 2; the flow pauses before a third call, says which budget
/// and how to go on, and `resume` with a higher limit runs the steps once each, the calls
/// carried over.
#[test]
fn a_calls_budget_pauses_before_one_more_call_and_a_higher_one_resumes() {
    let sandbox = repository(3);
    small_answers(&sandbox, "");
    let task = "Make every f return ten more";
    let llm = FakeLlm::with_rules(rules(3, task, chat_with_usage("", STEP.0, STEP.1)));
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args([
            "--json",
            "run",
            "--jobs",
            "1",
            "--task-id",
            "t",
            "--max-calls",
            "2",
        ])
        .arg(task)
        .output()
        .unwrap();
    assert_exit(&output, 3);
    let status = sandbox.status("t");
    assert_eq!(status["paused"]["budget"], "calls", "{status}");
    assert_eq!(status["budget"]["spent"]["calls"], json!(2), "{status}");
    assert_eq!(
        status["budget"]["limits"]["max_calls"],
        json!(2),
        "{status}"
    );
    let paused = of_type(&events(&output), "flow_paused")[0].clone();
    let message = paused["message"].as_str().unwrap();
    assert!(
        message.contains("the call budget is spent: 2 calls of 2 calls")
            && message.contains("`ocflow resume t --max-calls …`"),
        "{message}"
    );
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["resume", "t", "--max-calls", "10"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    for i in 0..3 {
        assert_eq!(llm.calls(&format!("fix{i}")), 1, "fix{i} asked once");
    }
    // Planning (two calls), three steps and the summary, over both runs.
    let status = sandbox.status("t");
    assert_eq!(status["budget"]["spent"]["calls"], json!(6), "{status}");
}

fn events_of(output: &std::process::Output) -> Vec<Value> {
    events(output)
}

#[test]
fn a_time_budget_pauses_a_flow_stuck_on_a_slow_server_and_resume_finishes_it() {
    let sandbox = repository(1);
    small_answers(&sandbox, "");
    let slow = Reply::Slow {
        delay: Duration::from_secs(120),
    };
    let rules = vec![
        Rule::flow_summary().reply(chat("Changed.")),
        Rule::prompt_contains("return 10 instead")
            .named("fix0")
            .replies_in_order(vec![slow, chat(&fixed(0))]),
    ];
    let llm = FakeLlm::with_rules(rules);
    let plan = sandbox.flow(&json!([fix(0)]));
    let started = Instant::now();
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--max-time", "5s", "--plan"])
        .arg(&plan)
        .output()
        .unwrap();
    assert_exit(&output, 3);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "a hang check: the call was not cancelled"
    );
    let status = sandbox.status("t");
    assert_eq!(status["state"], "paused", "{status}");
    assert_eq!(status["paused"]["budget"], "time", "{status}");
    assert_eq!(sandbox.step_status("t", "fix0")["status"], "pending");
    let run_ms = status["budget"]["spent"]["run_ms"].as_u64().unwrap();
    assert!(run_ms >= 5000, "{status}");
    assert!(
        stdout(&output).contains("‖ paused") && stdout(&output).contains("--max-time"),
        "{}",
        stdout(&output)
    );
    // A limit not above the one that stopped it would pause again at once: refused, nothing
    // sent; a higher one finishes, the time spent carried over.
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["resume", "t", "--max-time", "1s"])
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("`ocflow resume t --max-time N`"),
        "{}",
        stderr(&output)
    );
    assert_eq!(llm.calls("fix0"), 1, "no call sent past the time budget");
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["resume", "t", "--max-time", "10m"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(llm.calls("fix0"), 2);
    let status = sandbox.status("t");
    assert!(status["budget"]["spent"]["run_ms"].as_u64().unwrap() >= run_ms);
}

#[test]
fn a_cost_budget_counts_the_price_table_and_says_once_which_models_have_no_price() {
    let sandbox = repository(3);
    // $1000 a million tokens: each step's 1000 tokens cost $1, and its estimate a little more.
    small_answers(
        &sandbox,
        "[prices.\"m\"]\nper_mtok_in = 1000.0\nper_mtok_out = 1000.0\n",
    );
    let task = "Make every f return ten more";
    let llm = FakeLlm::with_rules(rules(3, task, chat_with_usage("", STEP.0, STEP.1)));
    let flow: Vec<Value> = (0..3)
        .map(|i| {
            let mut step = fix(i);
            if i > 0 {
                step["depends_on"] = json!([format!("fix{}", i - 1)]);
            }
            step
        })
        .collect();
    let plan = sandbox.flow(&Value::Array(flow));
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--max-cost", "1.5", "--plan"])
        .arg(&plan)
        .output()
        .unwrap();
    assert_exit(&output, 3);
    let status = sandbox.status("t");
    assert_eq!(status["paused"]["budget"], "cost", "{status}");
    let cost = status["budget"]["spent"]["cost_usd"].as_f64().unwrap();
    assert!((cost - 1.0).abs() < 1e-9, "one step's call: {status}");
    assert_eq!(sandbox.step_status("t", "fix0")["status"], "succeeded");
    assert!(
        !stderr(&output).contains("no price is known"),
        "{}",
        stderr(&output)
    );

    // Without a price, calls cost nothing toward the budget, and that is said once.
    let other = repository(1);
    small_answers(&other, "");
    let llm = FakeLlm::with_rules(rules(1, task, chat_with_usage("", STEP.0, STEP.1)));
    let output = other
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--max-cost", "0.01", "--plan"])
        .arg(other.flow(&json!([fix(0)])))
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(
        stderr(&output)
            .matches("no price is known for the model(s) m")
            .count(),
        1,
        "{}",
        stderr(&output)
    );
    assert_eq!(other.status("t")["budget"]["spent"]["cost_usd"], json!(0.0));
}

#[test]
fn bad_budget_flags_are_refused_with_the_form_to_use() {
    let sandbox = Sandbox::new(&[]);
    for (flag, value, says) in [
        (
            "--max-time",
            "5 parsecs",
            "write it like 90s, 5m, 1h or 1h30m",
        ),
        ("--max-cost", "0", "write it like 0.50 or 2"),
        ("--max-tokens", "many", "invalid digit"),
    ] {
        let output = sandbox
            .ocflow()
            .args(["run", flag, value, "a task"])
            .output()
            .unwrap();
        assert_exit(&output, 2);
        assert!(
            stderr(&output).contains(says),
            "{flag}: {}",
            stderr(&output)
        );
    }
}

/// `[budget]` is the flags' own type: the same checks, the same words; a key it does not know is
/// an error naming the keys it does (a misspelt limit never leaves a flow without one).
#[test]
fn a_configs_budget_is_checked_as_the_flags_are() {
    for (config, says) in [
        (
            "[budget]\nmax_time = \"5 parsecs\"\n",
            "write it like 90s, 5m, 1h or 1h30m",
        ),
        ("[budget]\nmax_cost = 0.0\n", "write it like 0.50 or 2"),
        (
            "[budget]\nmax_token = 100\n",
            "unknown key `max_token`, expected one of max_tokens, max_cost, max_time, max_calls",
        ),
    ] {
        let sandbox = Sandbox::new(&[]);
        small_answers(&sandbox, config);
        let output = sandbox
            .ocflow()
            .args(["run", "--max-tokens", "5", "a task"])
            .output()
            .unwrap();
        assert_exit(&output, 2);
        let err = stderr(&output);
        assert!(
            err.contains(says) && err.contains("config.toml"),
            "{config}: {err}"
        );
    }
}

/// A repository's own config (untrusted) may lower the user's budget, never raise it, and may
/// not set prices (a price of 0 would lift a cost budget): `[budget]` takes the lower of the
/// two, and the prices are ignored, and said.
#[test]
fn an_untrusted_repository_may_lower_a_budget_but_not_raise_it_nor_set_prices() {
    let run = |user: &str, repository: &str| {
        let sandbox = repository_with_config(repository);
        small_answers(&sandbox, user);
        let llm = FakeLlm::with_rules(rules(1, "t", chat_with_usage("", STEP.0, STEP.1)));
        let plan = sandbox.flow(&json!([fix(0)]));
        let output = sandbox
            .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
            .arg("--repo")
            .arg(&sandbox.repo)
            .args(["--base-url", &llm.base_url(), "--model", "m"])
            .args(["run", "--task-id", "t", "--plan"])
            .arg(plan)
            .output()
            .unwrap();
        let status: Value = read_json(&sandbox.repo.join(".ocflow/t/flow_status.json"));
        (output, status)
    };
    // Lowered: 10 tokens cannot pay for the step's call.
    let (output, status) = run(
        "[budget]\nmax_tokens = 100000\n",
        "[budget]\nmax_tokens = 10\n",
    );
    assert_exit(&output, 3);
    assert_eq!(
        status["budget"]["limits"]["max_tokens"],
        json!(10),
        "{status}"
    );
    // Not raised: the user's 10 holds.
    let (output, status) = run(
        "[budget]\nmax_tokens = 10\n",
        "[budget]\nmax_tokens = 100000\n",
    );
    assert_exit(&output, 3);
    assert_eq!(
        status["budget"]["limits"]["max_tokens"],
        json!(10),
        "{status}"
    );
    // Prices are the user's to set.
    let (output, status) = run(
        "[budget]\nmax_cost = 100.0\n",
        "[prices.\"m\"]\nper_mtok_in = 0.0\nper_mtok_out = 0.0\n",
    );
    assert_exit(&output, 0);
    let err = stderr(&output);
    assert!(
        err.contains("sets prices,") && err.contains("no price is known"),
        "{err}"
    );
    assert_eq!(
        status["budget"]["limits"]["max_cost_usd"],
        json!(100.0),
        "{status}"
    );
}

/// A repository with one file to fix and its own `.ocflow/ocflow.toml` holding `config`.
fn repository_with_config(config: &str) -> Sandbox {
    let sandbox = repository(1);
    let own = sandbox.repo.join(".ocflow");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::write(own.join("ocflow.toml"), config).unwrap();
    sandbox
}

/// A budget too small for the planner's call pauses the task before it has a flow; `resume`
/// with a higher limit plans it (once) and runs it.
#[test]
fn a_budget_spent_before_planning_pauses_and_resume_plans_the_task() {
    let sandbox = repository(1);
    small_answers(&sandbox, "");
    let task = "Make f return ten more";
    let llm = FakeLlm::with_rules(rules(1, task, chat_with_usage("", STEP.0, STEP.1)));
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args([
            "--json",
            "run",
            "--task-id",
            "t",
            "--max-tokens",
            "100",
            task,
        ])
        .output()
        .unwrap();
    assert_exit(&output, 3);
    assert_eq!(
        llm.calls("planner"),
        0,
        "the planner's call does not fit: never sent"
    );
    let status = sandbox.status("t");
    assert_eq!(status["state"], "paused", "{status}");
    assert_eq!(status["steps"], json!([]), "{status}");
    let events = events(&output);
    let paused = of_type(&events, "flow_paused");
    assert!(
        paused[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("paused while planning: the token budget is spent: 0 tokens of 100"),
        "{}",
        stdout(&output)
    );
    assert_eq!(of_type(&events, "budget")[0]["percent"], json!(100));
    // Issue 38: the same limit again was planned again and paused again, where README says it
    // is refused: refused, as for a flow paused after planning.
    let again = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["resume", "t"])
        .output()
        .unwrap();
    assert_exit(&again, 2);
    assert!(
        stderr(&again).contains("give a higher limit to continue it"),
        "{}",
        stderr(&again)
    );
    assert_eq!(llm.calls("planner"), 0);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["resume", "t", "--max-tokens", "100000"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!((llm.calls("planner"), llm.calls("fix0")), (1, 1));
    let status = sandbox.status("t");
    assert_eq!(status["state"], "succeeded", "{status}");
    assert_eq!(
        status["budget"]["limits"]["max_tokens"],
        json!(100_000),
        "{status}"
    );
}

/// A step that failed when the budget cannot pay for the recovery's question: the recovery
/// stays pending (the flow pauses, it does not fail), and `resume` asks it once.
#[test]
fn a_recovery_the_budget_cannot_pay_for_waits_for_the_resume() {
    let sandbox = Sandbox::new(&[]);
    small_answers(&sandbox, "");
    let modify = json!({"strategy": "modify", "reason": "wrong command",
        "step": {"id": "s", "params": {"command": "echo fixed > fixed.txt"}}});
    let llm = FakeLlm::with_rules(vec![
        Rule::flow_summary().reply(chat("Fixed.")),
        // The flow needed recovery, so it ends with the reflection's call.
        Rule::reflection().reply(chat("The command was wrong. Changing it fixed the step.")),
        Rule::recovery().reply(chat(&modify.to_string())),
    ]);
    let plan = sandbox.flow(&json!([{"id": "s", "operation": "execute_shell_command",
        "params": {"command": "exit 3"}}]));
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--max-tokens", "50", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 3);
    assert_eq!(llm.calls("recovery"), 0);
    let status = sandbox.status("t");
    assert_eq!(status["state"], "paused", "{status}");
    assert_eq!(status["pending_recovery"]["step"], "s", "{status}");
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["resume", "t", "--max-tokens", "100000"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(llm.calls("recovery"), 1);
    assert_eq!(
        std::fs::read_to_string(sandbox.task_dir("t").join("final_output/fixed.txt")).unwrap(),
        "fixed\n"
    );
}

#[test]
fn parallel_steps_wait_for_each_other_s_reservations_instead_of_pausing_below_the_limit() {
    // Each step's call reserves its prompt and its whole `max_tokens` (2500) but uses 1000:
    // the room left after planning (8000) takes two reservations at a time, and every call's
    // use and the summary's. A call kept out only by the others' reservations waits for them
    // to answer; it used to stop the flow far below its limit, and a resume with the same
    // limit stopped it again.
    let sandbox = repository(4);
    small_answers(&sandbox, "");
    let path = sandbox.root().join("user-config/ocflow/config.toml");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "[llm.operations]\nmax_tokens = 1000\n",
        "[llm.operations]\nmax_tokens = 2500\n",
    );
    std::fs::write(&path, text).unwrap();
    let task = "Make every f return ten more";
    let llm = FakeLlm::with_rules(rules(4, task, chat_with_usage("", STEP.0, STEP.1)));
    let planning = PLANNING.0 + PLANNING.1;
    let step = STEP.0 + STEP.1;
    let limit = planning + 8 * step;
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args([
            "--json",
            "run",
            "--jobs",
            "4",
            "--task-id",
            "t",
            "--max-tokens",
        ])
        .arg(limit.to_string())
        .arg(task)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let status = sandbox.status("t");
    assert_eq!(status["state"], "succeeded", "{status}");
    for i in 0..4 {
        assert_eq!(
            llm.calls(&format!("fix{i}")),
            1,
            "fix{i} asked once: {status}"
        );
    }
    let spent = status["budget"]["spent"]["tokens"].as_u64().unwrap();
    assert!(
        spent >= planning + 4 * step && spent <= limit,
        "{spent} of {limit}"
    );
    assert!(
        of_type(&events(&output), "flow_paused").is_empty(),
        "{}",
        stdout(&output)
    );
}

/// Issue 38: a server that reports no usage (none, 0, or a negative number) let every call of a
/// flow through a token budget, "0 tokens of 9000". Such a call is counted at least at the
/// estimate of what was sent and received, so the budget binds as with an honest server.
#[test]
fn a_server_that_reports_no_usage_still_spends_the_budget() {
    for usage in [
        Value::Null,
        json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}),
        json!({"prompt_tokens": -5, "completion_tokens": -1, "total_tokens": -6}),
    ] {
        let n = 8;
        let sandbox = repository(n);
        small_answers(&sandbox, "");
        let rules: Vec<Rule> = (0..n)
            .map(|i| {
                let mut body = json!({
                    "id": "chatcmpl-test", "object": "chat.completion", "created": 0,
                    "model": "fake-model",
                    "choices": [{"index": 0, "message": {"role": "assistant",
                        "content": fixed(i)}, "finish_reason": "stop"}]});
                if !usage.is_null() {
                    body["usage"] = usage.clone();
                }
                Rule::prompt_contains(&format!("return 1{i} instead"))
                    .named(&format!("fix{i}"))
                    .reply(Reply::Raw {
                        status: 200,
                        body: body.to_string(),
                        headers: vec![],
                    })
            })
            .collect();
        let llm = FakeLlm::with_rules(rules);
        let plan = sandbox.flow(&json!((0..n).map(fix).collect::<Vec<_>>()));
        // Each call reserves about 1.2k tokens (its prompt and 1000 to answer) and uses about
        // 200: room for a few calls under 1800, never for 8 unless none is counted.
        let output = sandbox
            .ocflow_llm(&llm.base_url())
            .args([
                "run",
                "--jobs",
                "1",
                "--task-id",
                "t",
                "--max-tokens",
                "1800",
            ])
            .arg("--plan")
            .arg(&plan)
            .output()
            .unwrap();
        assert_exit(&output, 3);
        let status = sandbox.status("t");
        let spent = status["budget"]["spent"]["tokens"].as_u64().unwrap();
        let ran = status["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["status"] == "succeeded")
            .count();
        assert!(
            ran >= 1 && ran < n,
            "{usage}: {ran} of {n} steps ran: {status}"
        );
        assert!(
            spent > 0 && spent <= 1800,
            "{usage}: spent {spent}: {status}"
        );
    }
}

/// Issue 38: `resume` of a paused flow with no LLM configured (as an OpenHands terminal has
/// none) turned it `failed`. Refused now, naming the setting, the flow left paused; with the
/// settings it goes on.
#[test]
fn resuming_a_paused_flow_without_llm_settings_is_refused_and_changes_nothing() {
    let n = 3;
    let sandbox = repository(n);
    small_answers(&sandbox, "");
    let rules: Vec<Rule> = (0..n)
        .map(|i| {
            Rule::prompt_contains(&format!("return 1{i} instead"))
                .named(&format!("fix{i}"))
                .reply(chat_with_usage(&fixed(i), STEP.0, STEP.1))
        })
        .chain([Rule::flow_summary().reply(chat("The files changed."))])
        .collect();
    let llm = FakeLlm::with_rules(rules);
    let plan = sandbox.flow(&json!((0..n).map(fix).collect::<Vec<_>>()));
    let paused = sandbox
        .ocflow_llm(&llm.base_url())
        .args([
            "run",
            "--jobs",
            "1",
            "--task-id",
            "t",
            "--max-tokens",
            "1500",
        ])
        .arg("--plan")
        .arg(&plan)
        .output()
        .unwrap();
    assert_exit(&paused, 3);
    let before = std::fs::read(sandbox.task_dir("t").join("flow_status.json")).unwrap();
    let refused = sandbox
        .ocflow()
        .args(["resume", "t", "--max-tokens", "100000"])
        .output()
        .unwrap();
    assert_exit(&refused, 2);
    let said = stderr(&refused);
    assert!(
        said.contains("task t is paused and its step fix1 calls the model")
            && said.contains("nothing was changed")
            && said.contains("OCFLOW_BASE_URL"),
        "{said}"
    );
    let after = std::fs::read(sandbox.task_dir("t").join("flow_status.json")).unwrap();
    assert_eq!(before, after, "the status was changed");
    let resumed = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["resume", "t", "--max-tokens", "100000"])
        .output()
        .unwrap();
    assert_exit(&resumed, 0);
}

/// Issue 38: a budget smaller than one call's `max_tokens` paused the flow before any call ("0
/// tokens of 3000 tokens, and the next call may use 8397"). The call now asks for what the
/// budget has left (never below 512 tokens), and the flow pauses only when even that cannot be
/// paid.
#[test]
fn a_call_asks_for_what_the_budget_has_left_instead_of_pausing() {
    let sandbox = repository(1);
    small_answers(&sandbox, "");
    // Calls may ask for 8000 tokens, the budget has 3000.
    let path = sandbox.root().join("user-config/ocflow/config.toml");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "[llm.operations]\nmax_tokens = 1000",
        "[llm.operations]\nmax_tokens = 8000",
    );
    std::fs::write(&path, text).unwrap();
    let llm = FakeLlm::with_rules(vec![
        Rule::prompt_contains("return 10 instead")
            .named("fix0")
            .reply(chat_with_usage(&fixed(0), STEP.0, STEP.1)),
        Rule::flow_summary().reply(chat("f returns 10.")),
    ]);
    let plan = sandbox.flow(&json!([fix(0)]));
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--max-tokens", "3000", "--plan"])
        .arg(&plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let asked = llm
        .bodies()
        .iter()
        .find(|b| b.to_string().contains("return 10 instead"))
        .map(|b| b["max_tokens"].as_u64().unwrap())
        .unwrap();
    assert!((512..3000).contains(&asked), "asked for {asked} tokens");
    // Nothing left even for a short answer: paused, never sent.
    let poor = repository(1);
    small_answers(&poor, "");
    let output = poor
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--max-tokens", "300", "--plan"])
        .arg(poor.flow(&json!([fix(0)])))
        .output()
        .unwrap();
    assert_exit(&output, 3);
}
