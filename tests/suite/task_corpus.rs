//! Issue 37: no list of English words gates a task or a success. Real tasks as people wrote them
//! — commit subjects and issue titles of real projects, each line with its source
//! (`tests/corpus/repository_tasks.jsonl`) — all reach the model; tasks really outside a
//! repository (`tests/corpus/outside_tasks.jsonl`: phone, pay, order, post and wait) never end
//! `succeeded`, even when a model plans them anyway, as a real 0.5B model did.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use super::fake_llm::{FakeLlm, Rule, chat, last_user_message};
use super::support::*;

/// Processes run at once: the machine has few cores, and each run starts Python.
const AT_ONCE: usize = 4;

/// The `task` of every line of a corpus file.
fn corpus(name: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let entry: Value = serde_json::from_str(line).unwrap();
            assert!(
                entry["source"].as_str().is_some_and(|s| !s.is_empty()),
                "{line}"
            );
            entry["task"].as_str().unwrap().to_string()
        })
        .collect()
}

/// Runs `run(i)` for every index below `count`, `AT_ONCE` at a time.
fn each_at_once(count: usize, run: &(dyn Fn(usize) -> Output + Sync)) -> Vec<Output> {
    let mut outputs: Vec<Option<Output>> = (0..count).map(|_| None).collect();
    for (chunk, slots) in outputs.chunks_mut(AT_ONCE).enumerate() {
        std::thread::scope(|scope| {
            for (offset, slot) in slots.iter_mut().enumerate() {
                scope.spawn(move || *slot = Some(run(chunk * AT_ONCE + offset)));
            }
        });
    }
    outputs.into_iter().map(Option::unwrap).collect()
}

/// The task of a planner request: its prompt ends with it.
fn task_of(body: &Value) -> Option<String> {
    let prompt = last_user_message(body);
    prompt
        .rsplit_once("\nTask: ")
        .map(|(_, task)| task.to_string())
}

#[test]
fn every_ordinary_task_reaches_the_model() {
    let tasks = corpus("repository_tasks.jsonl");
    assert!(tasks.len() >= 150, "{} tasks", tasks.len());
    let sandbox = Sandbox::new(&[("notes.md", "# Notes\n")]);
    let plan = json!({"deliverables": {"files": ["notes.md"]}, "steps": [
        {"id": "note", "operation": "write_file",
         "params": {"file_path": "notes.md", "content": "# Notes\n\nDone.\n"}}]});
    let llm = FakeLlm::with_rules(vec![Rule::planner().reply(chat(&plan.to_string()))]);
    let outputs = each_at_once(tasks.len(), &|i| {
        sandbox
            .ocflow_llm(&llm.base_url())
            .args(["plan", "--task-id", &format!("t{i}"), &tasks[i]])
            .output()
            .unwrap()
    });
    let refused: Vec<(&String, String)> = tasks
        .iter()
        .zip(&outputs)
        .filter(|(_, output)| output.status.code() != Some(0))
        .map(|(task, output)| (task, stderr(output)))
        .collect();
    assert!(refused.is_empty(), "refused: {refused:#?}");
    let asked: BTreeSet<String> = llm.bodies().iter().filter_map(task_of).collect();
    let missing: Vec<&String> = tasks.iter().filter(|t| !asked.contains(*t)).collect();
    assert!(missing.is_empty(), "never asked the model: {missing:#?}");
}

#[test]
fn no_task_outside_a_repository_ends_succeeded_whatever_the_model_plans() {
    let tasks = corpus("outside_tasks.jsonl");
    assert!(tasks.len() >= 15, "{} tasks", tasks.len());
    let sandbox = Sandbox::new(&[
        ("report.csv", "name,total\nalice,3\n"),
        ("CHANGELOG.md", "# Changes\n"),
    ]);
    // What a model that does not refuse plans: a read (Qwen2.5-Coder-0.5B's answer), a command
    // that tries to reach out (no network in a step), a closing message of its own words, a
    // command that passes (the 0.5B's plan for "email utils.py": run a function of it), tests.
    let plans = [
        json!({"steps": [{"id": "show", "operation": "execute_shell_command",
            "params": {"command": "cat report.csv"}}]}),
        json!({"steps": [{"id": "check", "operation": "run_tests",
            "params": {"command": "test -s report.csv"}}]}),
        json!({"steps": [{"id": "read_report", "operation": "read_file",
            "params": {"file_path": "report.csv"}}]}),
        json!({"steps": [{"id": "send", "operation": "execute_shell_command",
            "params": {"command": "curl -fsS -m 5 -X POST https://hooks.example.com/notify \
                -d @report.csv"}}]}),
        json!({"steps": [{"id": "done", "operation": "generate_summary",
            "params": {"message": "Done: it was sent and confirmed."}}]}),
    ];
    let mut rules: Vec<Rule> = tasks
        .iter()
        .enumerate()
        .map(|(i, task)| {
            Rule::planner()
                .and_conversation_contains(task)
                .reply(chat(&plans[i % plans.len()].to_string()))
        })
        .collect();
    // Those plans touch none of the files a task names, or deliver nothing: asked then what the
    // task asks for, the model says a change or an answer (ocflow would plan it on the named
    // file), never a refusal.
    rules.extend(tasks.iter().enumerate().map(|(i, task)| {
        let choice = ["change", "answer"][i % 2];
        Rule::plan_shape()
            .and_conversation_contains(task)
            .reply(chat(&json!({"choice": choice}).to_string()))
    }));
    let abort = json!({"strategy": "abort", "reason": "nothing in the repository can do it"});
    rules.push(Rule::recovery().reply(chat(&abort.to_string())));
    rules.push(Rule::flow_summary().reply(chat("Done: it was sent and confirmed.")));
    rules.push(Rule::reflection().reply(chat("Nothing to learn.")));
    let llm = FakeLlm::with_rules(rules);
    let outputs = each_at_once(tasks.len(), &|i| {
        sandbox
            .ocflow_llm(&llm.base_url())
            .args(["--json", "run", "--task-id", &format!("o{i}"), &tasks[i]])
            .output()
            .unwrap()
    });
    let chosen = llm
        .bodies()
        .iter()
        .filter(|b| last_user_message(b).contains("Say what the task asks for"))
        .count();
    assert!(chosen > 0, "no task named a file ocflow could plan on");
    for (i, (task, output)) in tasks.iter().zip(&outputs).enumerate() {
        assert_ne!(output.status.code(), Some(0), "{task}: {}", stderr(output));
        let state = sandbox.status(&format!("o{i}"))["state"].clone();
        assert!(
            state == json!("failed") || state == json!("no_change"),
            "{task}: {state}\n{}",
            stderr(output)
        );
    }
}
