//! Prompts a server can cache (issue 28 §5): vLLM's and llama.cpp's prefix caches reuse only an
//! identical prefix of the serialised messages, so every prompt puts its fixed text first and
//! what changes between requests last. Measured on what the fake server received; tokens
//! approximated as words and single punctuation marks (as `scripts/bench-prompts` counts).

use serde_json::{Value, json};

use super::fake_llm::*;
use super::support::*;

const UTILS: &str = "def calculate_metrics(values):\n    t = 0\n    for v in values:\n        \
                     t = t + v\n    m = t / len(values)\n    return {\"total\": t, \"mean\": m}\n";

/// Approximate tokens: words and single punctuation marks.
fn approx_tokens(text: &str) -> usize {
    let mut count = 0;
    let mut in_word = false;
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' {
            if !in_word {
                count += 1;
            }
            in_word = true;
        } else {
            in_word = false;
            if !c.is_whitespace() {
                count += 1;
            }
        }
    }
    count
}

/// The messages of a request as they go over the wire.
fn serialised(body: &Value) -> String {
    body["messages"].to_string()
}

/// The share, in approximate tokens, of the longer of `a` and `b` that is their common prefix.
fn shared_share(a: &str, b: &str) -> f64 {
    let common = a
        .char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((at, _), _)| at);
    let longer = approx_tokens(a).max(approx_tokens(b));
    approx_tokens(&a[..common]) as f64 / longer as f64
}

fn sample_repo() -> Sandbox {
    Sandbox::new(&[
        ("utils.py", UTILS),
        (
            "README.md",
            "# sample\n\nA tiny project: `calculate_metrics` in utils.py.\n",
        ),
        ("tests/__init__.py", ""),
        (
            "tests/test_utils.py",
            "import unittest\n\nfrom utils import calculate_metrics\n\n\n\
             class T(unittest.TestCase):\n    def test_total(self):\n        \
             self.assertEqual(calculate_metrics([1])[\"total\"], 1)\n",
        ),
    ])
}

fn modify_plan(instructions: &str) -> Reply {
    chat(
        &json!({"steps": [{"id": "edit", "operation": "modify_code",
            "params": {"file_path": "utils.py", "instructions": instructions}}]})
        .to_string(),
    )
}

/// Two tasks on one repository: at least 80 % of the planner's prompt is a prefix both share
/// (the system text, the operations, the rules, the repository's facts), and the task comes
/// after all of it.
#[test]
fn two_tasks_on_one_repository_share_most_of_the_planner_prompt() {
    let sandbox = sample_repo();
    let tasks = [
        "Fix calculate_metrics in utils.py: it crashes with ZeroDivisionError on an empty list",
        "Add a function median(values) to utils.py that returns the median of a list",
    ];
    let llm = FakeLlm::with_rules(vec![
        Rule::planner()
            .and_prompt_contains("ZeroDivisionError")
            .reply(modify_plan("Return zeros for an empty list"))
            .times(1),
        Rule::planner()
            .and_prompt_contains("median")
            .reply(modify_plan("Add a function median(values)"))
            .times(1),
    ]);
    for task in tasks {
        let output = sandbox
            .ocflow_llm(&llm.base_url())
            .args(["plan", task])
            .output()
            .unwrap();
        assert_exit(&output, 0);
    }
    let bodies = llm.bodies_except_reproduction();
    assert_eq!(bodies.len(), 2);
    let (a, b) = (serialised(&bodies[0]), serialised(&bodies[1]));
    let share = shared_share(&a, &b);
    assert!(
        share >= 0.8,
        "only {:.0} % of the planner prompt is shared between two tasks:\n{a}",
        share * 100.0
    );
    // Fixed text, then the repository's facts, then the task: the prompt ends with the task.
    let prompt = last_user_message(&bodies[0]);
    let at = |text: &str| {
        prompt
            .find(text)
            .unwrap_or_else(|| panic!("{text:?} is not in the prompt:\n{prompt}"))
    };
    assert!(
        at("`modify_code`") < at("- tests/test_utils.py"),
        "{prompt}"
    );
    assert!(at("- tests/test_utils.py") < at(tasks[0]), "{prompt}");
    assert!(prompt.trim_end().ends_with(tasks[0]), "{prompt}");
}

/// The part of `a` after the prefix it shares with `b`.
fn after_shared_prefix<'a>(a: &'a str, b: &str) -> &'a str {
    let common = a
        .char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((at, _), _)| at);
    &a[common..]
}

/// Two modify_code steps of one flow: their prompts share a prefix holding the whole system
/// message, and after it comes the step's own content (its file, path and change) with at
/// most one short line of fixed text (a reminder of the answer's form).
#[test]
fn the_modify_code_prompts_of_one_flow_share_their_prefix() {
    let sandbox = Sandbox::new(&[("a.py", "x = 1\n"), ("b.py", "y = 2\n")]);
    let flow = json!({"version": 1, "task": "change a and b", "steps": [
        {"id": "a", "operation": "modify_code",
         "params": {"file_path": "a.py", "instructions": "set x to 3"}},
        {"id": "b", "operation": "modify_code",
         "params": {"file_path": "b.py", "instructions": "set y to 4"}}]});
    let llm = FakeLlm::with_rules(vec![
        Rule::prompt_contains("set x to 3")
            .reply(chat("```python\nx = 3\n```"))
            .times(1),
        Rule::prompt_contains("set y to 4")
            .reply(chat("```python\ny = 4\n```"))
            .times(1),
        Rule::flow_summary().reply(chat("Changed a and b.")),
    ]);
    let plan = sandbox.flow(&flow);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let bodies: Vec<Value> = llm
        .bodies()
        .into_iter()
        .filter(|body| last_user_message(body).contains("set "))
        .collect();
    assert_eq!(bodies.len(), 2);
    // The messages as the model reads them: unescaped, each after its role.
    let read = |body: &Value| -> String {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                format!(
                    "{}: {}\n",
                    m["role"].as_str().unwrap(),
                    m["content"].as_str().unwrap()
                )
            })
            .collect()
    };
    let (a, b) = (read(&bodies[0]), read(&bodies[1]));
    let system = bodies[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        a[..a.len() - after_shared_prefix(&a, &b).len()].contains(system),
        "the system message is not shared:\n{a}\n{b}"
    );
    let own = [
        "a.py",
        "b.py",
        "x = 1",
        "y = 2",
        "set x to 3",
        "set y to 4",
        "python",
    ];
    for (prompt, other) in [(&a, &b), (&b, &a)] {
        let fixed = own.iter().fold(
            after_shared_prefix(prompt, other).to_string(),
            |tail, text| tail.replace(text, ""),
        );
        let words = fixed
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .count();
        assert!(
            words <= 20,
            "{words} words of fixed text after the step's own content begins ({fixed:?}); \
             {:.0} % of the prompt is shared:\n{prompt}",
            shared_share(&serialised(&bodies[0]), &serialised(&bodies[1])) * 100.0
        );
    }
}
/// A completion whose usage says how many of its prompt tokens the server's cache gave.
fn cached_completion(content: &str, prompt: u64, cached: u64) -> Reply {
    let body = json!({
        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": 10,
                  "total_tokens": prompt + 10,
                  "prompt_tokens_details": {"cached_tokens": cached}}
    });
    Reply::Raw {
        status: 200,
        body: body.to_string(),
        headers: Vec::new(),
    }
}

/// Cached prompt tokens a server reports are counted per step and for the flow, kept in
/// flow_status.json and the journal, and shown by `status` and the report.
#[test]
fn cached_prompt_tokens_a_server_reports_are_counted_and_shown() {
    let sandbox = Sandbox::new(&[("a.py", "x = 1\n")]);
    let flow = json!({"version": 1, "task": "change a", "steps": [
        {"id": "a", "operation": "modify_code",
         "params": {"file_path": "a.py", "instructions": "set x to 3"}}]});
    let llm = FakeLlm::with_rules(vec![
        Rule::prompt_contains("set x to 3")
            .reply(cached_completion("```python\nx = 3\n```", 300, 256))
            .times(1),
        Rule::flow_summary().reply(cached_completion("Changed a.", 100, 64)),
    ]);
    let plan = sandbox.flow(&flow);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let status = sandbox.status("t");
    assert_eq!(
        status["steps"][0]["tokens"]["cached_prompt_tokens"],
        json!(256)
    );
    assert_eq!(status["tokens"]["prompt_tokens"], json!(400));
    assert_eq!(status["tokens"]["cached_prompt_tokens"], json!(320));
    let journal = std::fs::read_to_string(sandbox.task_dir("t").join("journal.jsonl")).unwrap();
    assert!(
        journal.contains("\"cached_prompt_tokens\":256"),
        "{journal}"
    );
    let shown = sandbox.ocflow().args(["status", "t"]).output().unwrap();
    assert_exit(&shown, 0);
    let text = stdout(&shown);
    assert!(
        text.contains("prompt 400, 320 of them cached by the server"),
        "{text}"
    );
    let report = sandbox.ocflow().args(["report", "t"]).output().unwrap();
    assert_exit(&report, 0);
    let page = std::fs::read_to_string(stdout(&report).trim()).unwrap();
    assert!(page.contains("320 of them cached by the server"), "{page}");
}

/// The recovery prompts of two failed steps share everything up to the failure: the
/// strategies, the operations and the answer's form come first, the failure's facts last.
#[test]
fn recovery_prompts_put_the_failure_after_the_fixed_text() {
    let sandbox = Sandbox::new(&[]);
    std::fs::create_dir_all(&sandbox.workspace).unwrap();
    std::fs::write(
        sandbox.workspace.join("ocflow.toml"),
        "[llm]\nmax_attempts = 1\n",
    )
    .unwrap();
    let flow = json!({"version": 1, "task": "two commands", "steps": [
        {"id": "one", "operation": "execute_shell_command", "params": {"command": "exit 3"}},
        {"id": "two", "operation": "execute_shell_command", "params": {"command": "exit 4"}}]});
    let abort = chat(&json!({"strategy": "abort", "reason": "needs a human"}).to_string());
    let llm = FakeLlm::with_rules(vec![
        Rule::recovery().reply(abort),
        Rule::flow_summary().reply(chat("Both failed.")),
        // The flow needed recovery, so it ends with the reflection's call.
        Rule::reflection().reply(chat("One failed. Nothing fixed it.")),
    ]);
    let plan = sandbox.flow(&flow);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 1);
    let prompts: Vec<String> = llm
        .bodies()
        .iter()
        .map(last_user_message)
        .filter(|m| m.contains("Choose ONE strategy"))
        .collect();
    assert!(!prompts.is_empty());
    let prompt = &prompts[0];
    let at = |text: &str| {
        prompt
            .find(text)
            .unwrap_or_else(|| panic!("{text:?} is not in the prompt:\n{prompt}"))
    };
    let facts = at("Task of the flow:");
    for fixed in [
        "Choose ONE strategy",
        "`modify_code`",
        "Answer with one JSON object",
    ] {
        assert!(
            at(fixed) < facts,
            "{fixed:?} comes after the failure:\n{prompt}"
        );
    }
    assert!(at("The failed step (attempt") > facts, "{prompt}");
}
