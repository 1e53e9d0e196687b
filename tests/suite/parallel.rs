//! Parallel flows: the same final files as one step at a time, concurrent writers refused,
//! failures while other branches run, output references.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::*;

fn run_jobs(sandbox: &Sandbox, flow: &Value, task_id: &str, jobs: &str) -> std::process::Output {
    let plan = sandbox.flow(flow);
    sandbox
        .ocflow()
        .args(["run", "--jobs", jobs, "--task-id", task_id, "--plan"])
        .arg(plan)
        .output()
        .unwrap()
}

fn shell(id: &str, command: &str, deps: &[&str]) -> Value {
    json!({"id": id, "operation": "execute_shell_command", "params": {"command": command},
           "depends_on": deps})
}

fn write(id: &str, path: &str, content: &str, deps: &[&str]) -> Value {
    json!({"id": id, "operation": "write_file", "params": {"file_path": path, "content": content},
           "depends_on": deps})
}

#[test]
fn diamond_and_wide_flows_give_the_same_files_with_one_job_and_eight() {
    let diamond = json!([
        write("a", "base.txt", "base\n", &[]),
        shell(
            "b",
            "sleep 0.2; cat base.txt > b.txt; echo b >> b.txt",
            &["a"]
        ),
        shell("c", "echo c > c.txt; echo changed > base.txt", &["a"]),
        shell("d", "cat b.txt c.txt base.txt > d.txt", &["b", "c"]),
    ]);
    let mut wide: Vec<Value> = (0..10)
        .map(|i| {
            write(
                &format!("w{i}"),
                &format!("w{i}.txt"),
                &format!("{i}\n"),
                &[],
            )
        })
        .collect();
    wide.extend((0..6).map(|i| {
        shell(
            &format!("s{i}"),
            &format!("sleep 0.{i}; echo {i} > shell{i}.txt; echo {i} > same.txt"),
            &[],
        )
    }));
    let wide = Value::Array(wide);
    for (name, flow) in [("diamond", diamond), ("wide", wide)] {
        let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
        assert_exit(&run_jobs(&sandbox, &flow, "one", "1"), 0);
        assert_exit(&run_jobs(&sandbox, &flow, "eight", "8"), 0);
        let one = text_tree(&sandbox.task_dir("one").join("final_output"));
        let eight = text_tree(&sandbox.task_dir("eight").join("final_output"));
        assert_eq!(one, eight, "{name}");
        if name == "diamond" {
            assert_eq!(eight["d.txt"], "base\nb\nc\nchanged\n");
        } else {
            assert_eq!(
                eight["same.txt"], "5\n",
                "the later step in flow order wins, whatever finished first"
            );
            assert_eq!(eight.len(), 17);
        }
    }
}

/// Each command marks that it started, then waits for all eight marks: they can only all
/// succeed when they run at once (one at a time, the first would wait alone and fail). How long
/// eight `sleep 1` take with --jobs 8 is measured by scripts/bench-parallel.
#[test]
fn eight_commands_run_at_once() {
    let sandbox = Sandbox::new(&[]);
    let marks = sandbox.shared().join("started");
    std::fs::create_dir_all(&marks).unwrap();
    let barrier = |i: usize| {
        format!(
            "touch {0}/s{i}; n=0; while [ \"$(ls {0} | wc -l)\" -lt 8 ]; do \
             n=$((n + 1)); [ $n -gt 1200 ] && exit 1; sleep 0.1; done",
            marks.display()
        )
    };
    let flow = Value::Array(
        (0..8)
            .map(|i| shell(&format!("s{i}"), &barrier(i), &[]))
            .collect(),
    );
    let output = run_jobs(&sandbox, &flow, "t", "8");
    assert_exit(&output, 0);
    let steps = sandbox.status("t")["steps"].clone();
    let succeeded = steps
        .as_array()
        .unwrap()
        .iter()
        .filter(|step| step["status"] == "succeeded")
        .count();
    assert_eq!(succeeded, 8, "{steps}");
}

#[test]
fn concurrent_writers_of_one_path_are_refused_until_one_depends_on_the_other() {
    let sandbox = Sandbox::new(&[]);
    let flow = json!([write("a", "x.txt", "1", &[]), write("b", "x.txt", "2", &[])]);
    let output = run_jobs(&sandbox, &flow, "t", "1");
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains(
            "step b: steps a and b may run at the same time and both write x.txt; \
             make one depend on the other [concurrency]"
        ),
        "{}",
        stderr(&output)
    );
    let ordered = json!([
        write("a", "x.txt", "1", &[]),
        write("b", "x.txt", "2", &["a"])
    ]);
    assert_exit(&run_jobs(&sandbox, &ordered, "t", "1"), 0);
}

#[test]
fn a_failure_in_one_branch_lets_running_steps_finish_and_resumes_correctly() {
    let sandbox = Sandbox::new(&[]);
    let marker = sandbox.shared().join("fixed");
    let flow = json!([
        shell(
            "a",
            &format!("sleep 0.2; test -f {}", marker.display()),
            &[]
        ),
        shell("b", "sleep 1.5; echo b > b.txt", &[]),
        write("c", "c.txt", "c", &["a"]),
        write("d", "d.txt", "d", &["b"]),
    ]);
    assert_exit(&run_jobs(&sandbox, &flow, "t", "4"), 1);
    let states = |sandbox: &Sandbox| -> Vec<(String, String, u64)> {
        sandbox.status("t")["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["id"].as_str().unwrap().into(),
                    s["status"].as_str().unwrap().into(),
                    s["attempts"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        states(&sandbox),
        vec![
            ("a".into(), "failed".into(), 1),
            ("b".into(), "succeeded".into(), 1),
            ("c".into(), "pending".into(), 0),
            ("d".into(), "pending".into(), 0)
        ],
        "b was running when a failed: it finished and was recorded; nothing new started"
    );
    std::fs::write(&marker, "").unwrap();
    assert_exit(
        &sandbox
            .ocflow()
            .args(["resume", "t", "--retry-failed", "--jobs", "4"])
            .output()
            .unwrap(),
        0,
    );
    assert_eq!(
        states(&sandbox),
        vec![
            ("a".into(), "succeeded".into(), 2),
            ("b".into(), "succeeded".into(), 1),
            ("c".into(), "succeeded".into(), 1),
            ("d".into(), "succeeded".into(), 1)
        ]
    );
    let files: Vec<String> = text_tree(&sandbox.task_dir("t").join("final_output"))
        .into_keys()
        .collect();
    assert_eq!(files, vec!["b.txt", "c.txt", "d.txt"]);
}

#[test]
fn status_shows_the_steps_running_at_once() {
    let sandbox = Sandbox::new(&[]);
    let marker = sandbox.shared().join("go");
    let wait = format!("while [ ! -f {} ]; do sleep 0.05; done", marker.display());
    let flow = json!([
        shell("x", &wait, &[]),
        shell("y", &wait, &[]),
        shell("z", &wait, &[])
    ]);
    let plan = sandbox.flow(&flow);
    let child = sandbox
        .ocflow()
        .args(["run", "--jobs", "3", "--task-id", "t", "--plan"])
        .arg(plan)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let table = loop {
        let output = sandbox.ocflow().args(["status", "t"]).output().unwrap();
        let table = stdout(&output);
        if table.contains("running now (3 at once): x, y, z") {
            break table;
        }
        assert!(
            Instant::now() < deadline,
            "never saw three steps running: {table}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    std::fs::write(&marker, "").unwrap();
    assert_exit(&child.wait_with_output().unwrap(), 0);
    assert!(
        table.lines().filter(|l| l.contains(" running ")).count() == 3,
        "{table}"
    );
}

#[test]
fn references_to_a_field_a_nested_field_a_missing_field_and_a_non_ancestor() {
    let sandbox = Sandbox::new(&[("a.txt", "hello\n"), ("dir/one.py", "x\n")]);
    let flow = json!([
        {"id": "r", "operation": "read_file", "params": {"file_path": "a.txt"}},
        {"id": "l", "operation": "list_files", "params": {"path": "dir", "pattern": "*.py"}},
        {"id": "use", "operation": "write_file", "depends_on": ["r", "l"],
         "params": {"file_path": "out.txt", "content":
             "@{outputs.r.size} bytes; first: @{outputs.l.files.0}; count @{outputs.l.count}"}}
    ]);
    assert_exit(&run_jobs(&sandbox, &flow, "t", "4"), 0);
    assert_eq!(
        std::fs::read_to_string(sandbox.task_dir("t").join("final_output/out.txt")).unwrap(),
        "6 bytes; first: dir/one.py; count 1"
    );

    let missing = json!([
        {"id": "r", "operation": "read_file", "params": {"file_path": "a.txt"}},
        {"id": "use", "operation": "write_file", "depends_on": "r",
         "params": {"file_path": "out.txt", "content": "@{outputs.r.data.functions}"}}
    ]);
    assert_exit(&run_jobs(&sandbox, &missing, "m", "4"), 1);
    let step = sandbox.step_status("m", "use");
    assert_eq!(step["status"], json!("failed"));
    assert!(
        step["message"].as_str().unwrap().contains(
            "@{outputs.r.data.functions} cannot be resolved: \
             the result of step r has no field `data`"
        ),
        "{step}"
    );

    let stranger = json!([
        {"id": "r", "operation": "read_file", "params": {"file_path": "a.txt"}},
        {"id": "use", "operation": "write_file",
         "params": {"file_path": "out.txt", "content": "@{outputs.r.content}"}}
    ]);
    // Issue 11: a reference to a non-ancestor implies the dependency, which is added and said;
    // with 4 jobs `use` still waits for `r`.
    let output = run_jobs(&sandbox, &stranger, "s", "4");
    assert_exit(&output, 0);
    assert!(
        stderr(&output).contains("step use reads step r but did not depend on it"),
        "{}",
        stderr(&output)
    );
    let written = sandbox.task_dir("s").join("final_output/out.txt");
    assert_eq!(
        std::fs::read_to_string(written).unwrap(),
        std::fs::read_to_string(sandbox.repo.join("a.txt")).unwrap()
    );
    // Unless that dependency would make a cycle: then it is refused as before.
    let cycle = json!([
        {"id": "r", "operation": "read_file", "depends_on": "use",
         "params": {"file_path": "a.txt"}},
        {"id": "use", "operation": "write_file",
         "params": {"file_path": "out.txt", "content": "@{outputs.r.content}"}}
    ]);
    let output = run_jobs(&sandbox, &cycle, "c", "4");
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("reads step `r`, which this step does not depend on"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn final_files_follow_the_flow_order_not_the_finishing_order() {
    let sandbox = Sandbox::new(&[]);
    let flow = json!([
        shell("slow_first", "sleep 0.6; echo first > same.txt", &[]),
        shell("fast_second", "echo second > same.txt", &[]),
    ]);
    assert_exit(&run_jobs(&sandbox, &flow, "one", "1"), 0);
    assert_exit(&run_jobs(&sandbox, &flow, "two", "2"), 0);
    for task in ["one", "two"] {
        assert_eq!(
            std::fs::read_to_string(sandbox.task_dir(task).join("final_output/same.txt")).unwrap(),
            "second\n",
            "{task}"
        );
    }
    let diff = stdout(&sandbox.ocflow().args(["diff", "two"]).output().unwrap());
    assert!(diff.contains("+second"), "{diff}");
}

#[test]
fn status_follow_shows_each_change_until_the_flow_stops() {
    let sandbox = Sandbox::new(&[]);
    let marker = sandbox.shared().join("go");
    let wait = format!("while [ ! -f {} ]; do sleep 0.05; done", marker.display());
    let flow = json!([
        shell("first", &wait, &[]),
        write("second", "s.txt", "s", &["first"])
    ]);
    let plan = sandbox.flow(&flow);
    let run = sandbox
        .ocflow()
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status_file = sandbox.task_dir("t").join("flow_status.json");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&status_file).is_ok_and(|t| t.contains("\"running\"")) {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut follower = sandbox
        .ocflow()
        .args(["--json", "status", "--follow", "t"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its first state is read before the flow is let go (the flow waits for the marker), so a
    // follower slow to start still sees it running.
    let mut reader = std::io::BufReader::new(follower.stdout.take().unwrap());
    let mut lines = String::new();
    std::io::BufRead::read_line(&mut reader, &mut lines).unwrap();
    std::fs::write(&marker, "").unwrap();
    assert_exit(&run.wait_with_output().unwrap(), 0);
    std::io::Read::read_to_string(&mut reader, &mut lines).unwrap();
    let output = follower.wait_with_output().unwrap();
    assert_exit(&output, 0);
    let states: Vec<String> = lines
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["state"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(states.len() >= 2, "{states:?}");
    assert_eq!(states.first().map(String::as_str), Some("running"));
    assert_eq!(states.last().map(String::as_str), Some("succeeded"));
}

/// A reference inside single quotes in a command reaches it as its value (it used to become
/// the literal `${OCFLOW_REF_1}`, since the shell expands nothing there); in double quotes and
/// bare, as before.
#[test]
fn a_reference_in_single_quotes_reaches_the_command_as_its_value() {
    let sandbox = Sandbox::new(&[("a.txt", "it's $HOME\n")]);
    let flow = json!([
        {"id": "r", "operation": "read_file", "params": {"file_path": "a.txt"}},
        {"id": "c", "operation": "execute_shell_command", "depends_on": ["r"],
         "params": {"command": "printf '%s|' '@{outputs.r.size}' 'x@{outputs.r.content}y' \
            \"@{outputs.r.size}\" @{outputs.r.size} > out.txt"}}
    ]);
    assert_exit(&sandbox.run(&flow, "t"), 0);
    assert_eq!(
        std::fs::read_to_string(sandbox.task_dir("t").join("final_output/out.txt")).unwrap(),
        "11|xit's $HOME\ny|11|11|"
    );
}

/// An apostrophe in a comment or a here-document is not a quote: a reference after it goes in
/// as it would have before quotes were followed.
#[test]
fn apostrophes_in_comments_and_here_documents_are_not_quotes() {
    let sandbox = Sandbox::new(&[("a.txt", "abc")]);
    let flow = json!([
        {"id": "r", "operation": "read_file", "params": {"file_path": "a.txt"}},
        {"id": "c", "operation": "execute_shell_command", "depends_on": ["r"],
         "params": {"command": "# don't log it\necho @{outputs.r.size} > one.txt\n\
            cat > two.txt <<EOF\nIt's: @{outputs.r.content}\nEOF"}}
    ]);
    assert_exit(&sandbox.run(&flow, "t"), 0);
    let out = sandbox.task_dir("t").join("final_output");
    assert_eq!(std::fs::read_to_string(out.join("one.txt")).unwrap(), "3\n");
    assert_eq!(
        std::fs::read_to_string(out.join("two.txt")).unwrap(),
        "It's: abc\n"
    );
}

/// Steps that ask the model may run at once; each gets the answer meant for it. The fake LLM
/// answers by what a request asks, so whichever step's request arrives first, and each step's
/// request is made exactly once.
#[test]
fn steps_asking_the_model_at_once_each_get_their_own_answer() {
    use super::fake_llm::{FakeLlm, Rule, chat};
    let files: Vec<(String, String)> = (0..4)
        .map(|i| (format!("m{i}.py"), format!("def f():\n    return {i}\n")))
        .collect();
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(path, content)| (path.as_str(), content.as_str()))
        .collect();
    let sandbox = Sandbox::new(&borrowed);
    let flow = Value::Array(
        (0..4)
            .map(|i| {
                json!({"id": format!("fix{i}"), "operation": "modify_code",
                       "params": {"file_path": format!("m{i}.py"),
                                  "instructions": format!("return 1{i} instead")}})
            })
            .collect(),
    );
    // The first matching rule answers: the summary's goes first, so that a step's rule never
    // takes it for what it says about the steps.
    let mut rules = vec![
        Rule::flow_summary()
            .reply(chat("Four files changed."))
            .times(1),
    ];
    rules.extend((0..4).map(|i| {
        Rule::prompt_contains(&format!("return 1{i} instead"))
            .named(&format!("fix{i}"))
            .reply(chat(&format!(
                "```python\ndef f():\n    return 1{i}\n```\n"
            )))
    }));
    let llm = FakeLlm::with_rules(rules);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--jobs", "4", "--task-id", "t", "--plan"])
        .arg(sandbox.flow(&flow))
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let written = text_tree(&sandbox.task_dir("t").join("final_output"));
    for i in 0..4 {
        assert_eq!(
            written[&format!("m{i}.py")],
            format!("def f():\n    return 1{i}\n"),
            "step fix{i} got another step's answer"
        );
        assert_eq!(llm.calls(&format!("fix{i}")), 1, "fix{i} asked once");
    }
    llm.verify();
}
