//! Planning and the LLM client against a fake OpenAI-compatible server: extraction, re-asks,
//! retries and their bounds, response_format fallback, the key, token accounting.

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::fake_llm::*;
use super::support::*;

const TASK: &str = "Create notes.txt saying hello";

fn write_plan() -> String {
    json!({"version": 1, "task": TASK, "steps": [
        {"id": "write_notes", "operation": "write_file",
         "params": {"file_path": "notes.txt", "content": "hello\n"}}
    ]})
    .to_string()
}

/// `ocflow run TASK` against `llm`, with `extra` arguments before `run`.
fn run_task(sandbox: &Sandbox, llm: &FakeLlm, extra: &[&str]) -> Output {
    sandbox
        .ocflow()
        .args(["--base-url", &llm.base_url(), "--model", "fake-model"])
        .args(extra)
        .args(["run", "--task-id", "t", TASK])
        .env("OPENAI_API_KEY", "sk-test")
        .output()
        .unwrap()
}

/// Settings for the retry tests, in the workspace's ocflow.toml.
fn llm_settings(sandbox: &Sandbox, toml: &str) {
    std::fs::create_dir_all(&sandbox.workspace).unwrap();
    std::fs::write(
        sandbox.workspace.join("ocflow.toml"),
        format!("[llm]\n{toml}\n"),
    )
    .unwrap();
}

#[test]
fn a_plan_wrapped_in_prose_and_fences_is_extracted_and_run() {
    let sandbox = Sandbox::new(&[("README.md", "# demo\n")]);
    let plan = format!(
        "Sure! Here is the plan:\n\n```json\n{}\n```\n\nLet me know if you need more.",
        write_plan()
    );
    let llm = FakeLlm::in_order(vec![chat(&plan), chat("Created notes.txt.")]);
    let output = run_task(&sandbox, &llm, &[]);
    assert_exit(&output, 0);
    assert_eq!(
        std::fs::read_to_string(sandbox.task_dir("t").join("final_output/notes.txt")).unwrap(),
        "hello\n"
    );
    let bodies = llm.bodies();
    assert_eq!(bodies.len(), 2, "one plan, one summary");
    let prompt = last_user_message(&bodies[0]);
    assert!(
        prompt.contains("Task: Create notes.txt saying hello") && prompt.contains("- README.md"),
        "{prompt}"
    );
    assert!(
        prompt.contains("`modify_code`")
            && prompt.contains("file_path*: file relative to the repository root"),
        "the operations come from the registry: {prompt}"
    );
    // Issue 13: the plan's JSON Schema is asked for first (constrained decoding).
    assert_eq!(bodies[0]["response_format"]["type"], json!("json_schema"));
    let summary = std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap();
    // Issue 13: the facts come first, the model's words after, labelled.
    assert!(
        summary.starts_with("# Create notes.txt saying hello\n\nThe flow `t` succeeded.")
            && summary.contains(
                "## The model's summary (its words; the facts are above)\n\nCreated notes.txt."
            ),
        "{summary}"
    );
    assert!(
        sandbox
            .task_dir("t")
            .join("planning/plan-answer-1.md")
            .is_file()
    );
}

#[test]
fn an_invalid_plan_is_asked_again_once_with_the_exact_problems() {
    let sandbox = Sandbox::new(&[]);
    let invalid =
        json!({"steps": [{"id": "x", "operation": "frobnicate", "params": {}}]}).to_string();
    let llm = FakeLlm::in_order(vec![chat(&invalid), chat(&write_plan()), chat("done")]);
    assert_exit(&run_task(&sandbox, &llm, &[]), 0);
    let bodies = llm.bodies();
    assert_eq!(bodies.len(), 3);
    let reask = last_user_message(&bodies[1]);
    assert!(
        reask.contains("step x: unknown operation `frobnicate`"),
        "{reask}"
    );
    assert_eq!(
        bodies[1]["messages"].as_array().unwrap().len(),
        4,
        "system, task, the bad answer, the problems"
    );
    assert_eq!(sandbox.status("t")["state"], json!("succeeded"));
}

#[test]
fn three_invalid_plans_fail_the_flow_with_every_answer_saved() {
    let sandbox = Sandbox::new(&[]);
    let llm = FakeLlm::in_order(vec![
        chat("I cannot do that."),
        chat("[]"),
        chat("{\"steps\": [{\"id\": \"a\"}]}"),
    ]);
    let output = run_task(&sandbox, &llm, &[]);
    assert_exit(&output, 1);
    assert_eq!(llm.requests().len(), 3);
    let planning = sandbox.task_dir("t").join("planning");
    for n in 1..=3 {
        assert!(
            planning.join(format!("plan-answer-{n}.md")).is_file(),
            "answer {n} not saved"
        );
    }
    assert_eq!(
        std::fs::read_to_string(planning.join("plan-answer-1.md")).unwrap(),
        "I cannot do that."
    );
    let status = sandbox.status("t");
    assert_eq!(status["state"], json!("failed"));
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("no valid flow after 3 answer(s)"),
        "{status}"
    );
    let summary = std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap();
    assert!(summary.contains("planning failed"), "{summary}");
}

#[test]
fn a_truncated_plan_is_never_acted_on() {
    let sandbox = Sandbox::new(&[]);
    let cut = Reply::Chat {
        content: write_plan(),
        usage: (10, 10),
        finish_reason: "length",
    };
    let llm = FakeLlm::in_order(vec![cut, chat(&write_plan()), chat("done")]);
    assert_exit(&run_task(&sandbox, &llm, &[]), 0);
    let reask = last_user_message(&llm.bodies()[1]);
    assert!(reask.contains("the answer was cut off"), "{reask}");
}

#[test]
fn rate_limits_are_retried_after_the_time_asked() {
    let sandbox = Sandbox::new(&[]);
    let limited = Reply::Raw {
        status: 429,
        body: json!({"error": {
            "message": "slow down", "type": "rate_limit_error", "param": null, "code": null
        }})
        .to_string(),
        headers: vec![("retry-after", "1".into())],
    };
    let llm = FakeLlm::in_order(vec![limited, chat(&write_plan()), chat("done")]);
    let started = Instant::now();
    assert_exit(&run_task(&sandbox, &llm, &[]), 0);
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "Retry-After was not honoured: {:?}",
        started.elapsed()
    );
    assert_eq!(llm.requests().len(), 3);
}

#[test]
fn a_huge_retry_after_is_capped_and_server_errors_are_retried_within_bounds() {
    let sandbox = Sandbox::new(&[]);
    llm_settings(&sandbox, "max_attempts = 3");
    let huge = Reply::Raw {
        status: 503,
        body: "overloaded".into(),
        headers: vec![("retry-after", "99999".into())],
    };
    // A 500 to the first `json_schema` request is read as the endpoint refusing that form
    // (llama-cpp-python's answer): probing costs no attempt (issue 24), so three more errors
    // use up the three attempts.
    let llm = FakeLlm::in_order(vec![
        huge,
        status(500, "oops"),
        status(503, "overloaded again"),
        status(502, "bad gateway"),
        chat(&write_plan()),
    ]);
    let started = Instant::now();
    let output = run_task(&sandbox, &llm, &[]);
    assert_exit(&output, 1);
    // Liveness only (Retry-After asked for 99,999 s): the capped waits' length is measured by
    // scripts/bench-responsiveness.
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "the Retry-After was obeyed: {:?}",
        started.elapsed()
    );
    assert_eq!(llm.requests().len(), 4, "max_attempts bounds the retries");
    assert!(
        stderr(&output).contains("gave up after 3 attempt(s)")
            && stderr(&output).contains("bad gateway"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_malformed_body_is_retried_then_reported() {
    let sandbox = Sandbox::new(&[]);
    llm_settings(&sandbox, "max_attempts = 2");
    let llm = FakeLlm::in_order(vec![
        status(200, "<html>proxy error</html>"),
        status(200, "{\"no\": \"choices\"}"),
    ]);
    let output = run_task(&sandbox, &llm, &[]);
    assert_exit(&output, 1);
    assert_eq!(llm.requests().len(), 2);
    assert!(
        stderr(&output).contains("choices[0].message.content"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_server_that_never_answers_times_out() {
    let sandbox = Sandbox::new(&[]);
    llm_settings(&sandbox, "max_attempts = 1\nrequest_timeout_seconds = 1");
    let llm = FakeLlm::in_order(vec![Reply::Slow {
        delay: Duration::from_secs(30),
    }]);
    let started = Instant::now();
    let output = run_task(&sandbox, &llm, &[]);
    assert_exit(&output, 1);
    // Liveness only (the server answers after 30 s); the message below names the timeout.
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the request timeout did not end the wait: {:?}",
        started.elapsed()
    );
    // Issue 24: the message says which setting gives the model more time.
    assert!(
        stderr(&output).contains("within the request timeout of 1 s")
            && stderr(&output).contains("raise request_timeout_seconds under [llm] in ocflow.toml"),
        "{}",
        stderr(&output)
    );
}

/// A profile's own time limit is the setting its timeout message names.
#[test]
fn a_profiles_timeout_names_the_profiles_setting() {
    let sandbox = Sandbox::new(&[]);
    let llm = FakeLlm::in_order(vec![Reply::Slow {
        delay: Duration::from_secs(30),
    }]);
    llm_settings(
        &sandbox,
        &format!(
            "max_attempts = 1\nplanner_profile = \"cpu\"\n\n[llm.profiles.cpu]\nbase_url = \
             \"{}\"\nmodel = \"m\"\nrequest_timeout_seconds = 1",
            llm.base_url()
        ),
    );
    let output = run_task(&sandbox, &llm, &[]);
    assert_exit(&output, 1);
    assert!(
        stderr(&output).contains(
            "within the request timeout of 1 s: a slow model (one on a CPU) needs more; raise \
             request_timeout_seconds under [llm.profiles.cpu] in ocflow.toml"
        ),
        "{}",
        stderr(&output)
    );
}

#[test]
fn an_endpoint_rejecting_response_format_gets_plain_prompting_for_the_rest_of_the_run() {
    let sandbox = Sandbox::new(&[]);
    let invalid = json!([{"id": "x", "operation": "nope"}]).to_string();
    let llm =
        FakeLlm::rejecting_response_format(vec![chat(&invalid), chat(&write_plan()), chat("done")]);
    assert_exit(&run_task(&sandbox, &llm, &[]), 0);
    let forms: Vec<String> = llm
        .bodies()
        .iter()
        .map(|b| match b.get("response_format") {
            None => "none".to_string(),
            Some(f) if f.get("schema").is_some() => format!("{} with schema", f["type"]),
            Some(f) => f["type"].to_string(),
        })
        .collect();
    // Each form is tried once, best first, on the first request; the rest of the run asks
    // plainly (three forms refused, then the three answers of the run).
    assert_eq!(
        forms,
        vec![
            "\"json_schema\"",
            "\"json_object\" with schema",
            "\"json_object\"",
            "none",
            "none",
            "none"
        ],
    );
}

/// llama-cpp-python's server answers `json_schema` with a 500 but enforces a schema given in
/// `json_object`: that form is found once and used for every JSON answer after; the plan's
/// schema comes from the operations' registry, and the journal says which form was used.
#[test]
fn a_server_refusing_json_schema_gets_the_schema_inside_json_object() {
    let sandbox = Sandbox::new(&[]);
    let llm = FakeLlm::refusing_json_schema(vec![chat(&write_plan()), chat("done")]);
    let output = sandbox
        .ocflow()
        .args(["--base-url", &llm.base_url(), "--model", "fake-model"])
        .args(["--json", "run", "--task-id", "t", TASK])
        .env("OPENAI_API_KEY", "sk-test")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let bodies = llm.bodies();
    assert_eq!(bodies[0]["response_format"]["type"], json!("json_schema"));
    let schema = &bodies[0]["response_format"]["json_schema"]["schema"];
    let operations: Vec<&str> = schema["properties"]["steps"]["items"]["anyOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["properties"]["operation"]["const"].as_str().unwrap())
        .collect();
    assert!(
        operations.contains(&"modify_code") && operations.contains(&"run_tests"),
        "{operations:?}"
    );
    assert_eq!(bodies[1]["response_format"]["type"], json!("json_object"));
    assert_eq!(&bodies[1]["response_format"]["schema"], schema);
    // A valid JSON Schema that a valid plan meets, and a plan with a bad id or an absolute
    // path does not (checked by Python's jsonschema, as an endpoint would).
    let check = |plan: &str| {
        std::process::Command::new("python3")
            .args([
                "-c",
                concat!(
                    "import json, sys, jsonschema\n",
                    "schema = json.loads(sys.argv[1])\n",
                    "jsonschema.Draft202012Validator.check_schema(schema)\n",
                    "jsonschema.validate(json.loads(sys.argv[2]), schema)\n",
                ),
            ])
            .arg(schema.to_string())
            .arg(plan)
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(
        check(&write_plan()),
        "a valid plan is refused by the schema"
    );
    let bad_id = write_plan().replace("write_notes", ",<the task>");
    let absolute = write_plan().replace("notes.txt", "/home/user/notes.txt");
    assert!(!check(&bad_id) && !check(&absolute));
    let with_deliverables = write_plan().replacen(
        "\"steps\"",
        "\"deliverables\": {\"files\": [\"notes.txt\"], \"commands\": [\"make test\"]}, \"steps\"",
        1,
    );
    // Issue 37: a flow says what done means, and may refuse its task after its steps (a refusal
    // offered as an answer of its own had a real 0.5B model refuse every doable task).
    assert!(check(&with_deliverables), "{with_deliverables}");
    let refusing = write_plan().replacen("{", "{\"refuse\": \"it asks to phone someone\", ", 1);
    assert!(check(&refusing), "{refusing}");
    assert!(!check(r#"{"refuse": "it asks to phone someone"}"#));
    assert!(
        bodies[2].get("response_format").is_none(),
        "the summary is prose"
    );
    let planned = stdout(&output)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == json!("flow_planned"))
        .unwrap();
    assert_eq!(planned["answer_form"], json!("json_object with a schema"));
}

#[test]
fn an_unauthorized_key_says_what_to_check_without_showing_the_key() {
    let sandbox = Sandbox::new(&[]);
    let unauthorized = json!({"error": {
        "message": "invalid key sk-test", "type": "auth", "param": null, "code": null
    }});
    let llm = FakeLlm::in_order(vec![status(401, &unauthorized.to_string())]);
    let output = run_task(&sandbox, &llm, &[]);
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(
        err.contains(
            "check the API key (OCFLOW_API_KEY, OPENAI_API_KEY or LLM_API_KEY) and the base URL"
        ),
        "{err}"
    );
    assert!(!err.contains("sk-test"), "{err}");
    assert_eq!(llm.requests().len(), 1, "401 is not retried");
}

#[test]
fn token_totals_are_the_sums_the_server_reported() {
    let sandbox = Sandbox::new(&[]);
    let plan = json!({"steps": [
        {"id": "gen", "operation": "generate_summary", "params": {}},
        {"id": "w", "operation": "write_file", "params": {"file_path": "a.txt", "content": "a"}}
    ]})
    .to_string();
    let llm = FakeLlm::in_order(vec![
        chat_with_usage(&plan, 321, 45),
        chat_with_usage("the steps did things", 70, 7),
        chat_with_usage("summary", 11, 2),
    ]);
    assert_exit(&run_task(&sandbox, &llm, &[]), 0);
    let status = sandbox.status("t");
    assert_eq!(
        status["tokens"],
        json!({"prompt_tokens": 402, "completion_tokens": 54, "total_tokens": 456, "calls": 3})
    );
    assert_eq!(
        sandbox.step_status("t", "gen")["tokens"],
        json!({"prompt_tokens": 70, "completion_tokens": 7, "total_tokens": 77, "calls": 1})
    );
    let table = stdout(&sandbox.ocflow().args(["status", "t"]).output().unwrap());
    assert!(
        table.contains("tokens 456 (prompt 402, completion 54) in 3 LLM call(s)"),
        "{table}"
    );
}

/// Seed 002's planning prompt teaches `modify_code(file_path, instructions_for_llm)` and
/// `analyze_code(file_path, analysis_query)`; a model keeping those names is understood at its
/// first answer, and its `generate_summary` reading a step it does not list gets the dependency.
#[test]
fn the_seeds_vocabulary_is_understood_at_the_first_answer() {
    let sandbox = Sandbox::new(&[("utils.py", "x = 1\n")]);
    let plan = json!([
        {"operation": "read_file", "params": {"file_path": "utils.py"}, "id": "step1"},
        {"operation": "modify_code", "depends_on": "step1", "id": "step2",
         "params": {"file_path": "utils.py", "instructions_for_llm": "rename x to y"}},
        {"operation": "analyze_code", "depends_on": "step2", "id": "step3",
         "params": {"file_path": "utils.py", "analysis_query": "is x still used?"}},
        {"operation": "generate_summary", "params": {"changes_from_step": "step2"}, "id": "step4"}
    ]);
    let llm = FakeLlm::in_order(vec![chat(&format!("```json\n{plan}\n```"))]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["plan", TASK])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(
        llm.bodies_except_reproduction().len(),
        1,
        "planning asked again: {}",
        stderr(&output)
    );
    let flow: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let params = |index: usize| flow["steps"][index]["params"].clone();
    assert_eq!(params(1)["instructions"], json!("rename x to y"), "{flow}");
    assert_eq!(params(2)["query"], json!("is x still used?"), "{flow}");
    assert_eq!(flow["steps"][3]["depends_on"], json!(["step2"]), "{flow}");
    assert!(
        stderr(&output).contains("step step4 reads step step2 but did not depend on it"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn plan_prints_the_validated_flow() {
    let sandbox = Sandbox::new(&[]);
    let llm = FakeLlm::in_order(vec![chat(&format!("```json\n{}\n```", write_plan()))]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["plan", TASK])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let flow: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(flow["steps"][0]["id"], json!("write_notes"));
    assert_eq!(flow["version"], json!(1));
}

#[test]
fn the_key_reaches_nothing_but_the_authorization_header() {
    let canary = "sk-canary-5f1e2d3c4b5a";
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let plan = json!({"steps": [
        {"id": "look", "operation": "execute_shell_command",
         // The parent's environment, or why it cannot be read (under the overlay's user
         // namespace the launcher's parent is out of the command's reach).
         "params": {"command": "env > env.txt; (tr '\\0' '\\n' < /proc/$PPID/environ) \
                                > parent_env.txt 2>&1; echo done"}}
    ]})
    .to_string();
    let llm = FakeLlm::in_order(vec![chat(&plan), chat("summary")]);
    let output = sandbox
        .ocflow()
        .args([
            "--json",
            "--base-url",
            &llm.base_url(),
            "--model",
            "m",
            "run",
            "--task-id",
            "t",
            TASK,
        ])
        .env("OPENAI_API_KEY", canary)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert!(!stdout(&output).contains(canary) && !stderr(&output).contains(canary));
    let files = tree(&sandbox.workspace);
    assert!(
        files.contains_key("t/final_output/parent_env.txt")
            && files.contains_key("t/final_output/env.txt")
    );
    for (path, bytes) in &files {
        assert!(
            !String::from_utf8_lossy(bytes).contains(canary),
            "the key leaked into {path}"
        );
    }
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    for request in requests {
        assert_eq!(
            request
                .headers
                .get("authorization")
                .unwrap()
                .to_str()
                .unwrap(),
            format!("Bearer {canary}")
        );
        for (name, value) in request.headers.iter() {
            assert!(name == "authorization" || !value.to_str().unwrap_or("").contains(canary));
        }
        assert!(!String::from_utf8_lossy(&request.body).contains(canary));
    }
}

#[test]
fn the_key_can_come_from_a_file_only_its_owner_reads_or_from_a_command() {
    use std::os::unix::fs::PermissionsExt;
    let canary = "sk-canary-file-8e7d";
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let key_file = sandbox.root().join("key");
    // A command step trying to read the key file sees nothing there (with namespaces). (Issue
    // 37: the plan says its command is what it delivers, or a model's passing command would
    // deliver nothing of its own.)
    let plan =
        json!({"deliverables": {"commands": [format!("cat {} || true", key_file.display())]},
        "steps": [{"id": "read", "operation": "read_file",
        "params": {"file_path": "a.txt"}},
        {"id": "peek", "operation": "execute_shell_command",
         "params": {"command": format!("cat {} || true", key_file.display())}}]})
        .to_string();
    std::fs::write(&key_file, format!("{canary}\n")).unwrap();
    let run = |llm: &FakeLlm, key_file: Option<&std::path::Path>, task_id: &str| {
        let mut command = sandbox.ocflow();
        command.args([
            "--base-url",
            &llm.base_url(),
            "--model",
            "m",
            "run",
            "--task-id",
        ]);
        command.args([task_id, TASK]);
        if let Some(path) = key_file {
            command.env("OCFLOW_API_KEY_FILE", path);
        }
        command.output().unwrap()
    };
    // A key file others may read is refused, naming the fix.
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let llm = FakeLlm::in_order(vec![chat(&plan), chat("summary")]);
    let refused = run(&llm, Some(&key_file), "refused");
    assert_exit(&refused, 2);
    assert!(
        stderr(&refused).contains("chmod 600"),
        "{}",
        stderr(&refused)
    );
    assert!(llm.requests().is_empty());
    // Only its owner may read it: used, and no environment of any process ever held it.
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let output = run(&llm, Some(&key_file), "t");
    assert_exit(&output, 0);
    let authorization = |llm: &FakeLlm| -> Vec<String> {
        let requests = llm.requests();
        let headers = requests
            .iter()
            .map(|r| r.headers.get("authorization").unwrap());
        headers.map(|h| h.to_str().unwrap().to_string()).collect()
    };
    assert_eq!(authorization(&llm), vec![format!("Bearer {canary}"); 2]);
    if namespaces_available() {
        let peek = sandbox.result("t", "peek");
        assert!(!peek["stdout"].as_str().unwrap().contains(canary), "{peek}");
    }
    // Or a command prints it (from the user's own config), run once per ocflow run.
    let counter = sandbox.shared().join("asked");
    sandbox.configure_sandbox("");
    let config = sandbox.root().join("user-config/ocflow/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "[llm]\napi_key_command = \"echo x >> {}; cat {}\"\n",
        counter.display(),
        key_file.display()
    ));
    std::fs::write(&config, text).unwrap();
    let llm = FakeLlm::in_order(vec![chat(&plan), chat("summary")]);
    assert_exit(&run(&llm, None, "command"), 0);
    assert_eq!(authorization(&llm), vec![format!("Bearer {canary}"); 2]);
    assert_eq!(
        std::fs::read_to_string(&counter).unwrap(),
        "x\n",
        "asked once"
    );
}

const UTILS: &str = concat!(
    "def calculate_metrics(values):\n",
    "    t = 0\n",
    "    for v in values:\n",
    "        t = t + v\n",
    "    return {\"total\": t, \"mean\": t / len(values)}\n",
);
const FIXED: &str = concat!(
    "def calculate_metrics(values):\n",
    "    \"\"\"Total and mean of values; zeros for an empty list.\"\"\"\n",
    "    if not values:\n",
    "        return {\"total\": 0, \"mean\": 0.0}\n",
    "    total = sum(values)\n",
    "    return {\"total\": total, \"mean\": total / len(values)}\n",
);

/// Seed 002's example flow, word for word: string `depends_on`, a `generate_summary` that reads
/// step2 without depending on it.
#[test]
fn the_seeds_example_flow_runs() {
    let sandbox = Sandbox::new(&[("utils.py", UTILS)]);
    let plan = sandbox.flow(&json!([
        {"operation": "read_file", "params": {"file_path": "utils.py"}, "id": "step1"},
        {"operation": "refactor_function", "params": {"file_path": "utils.py",
            "function_name": "calculate_metrics",
            "instructions": "improve readability, add div zero error handling"},
         "depends_on": "step1", "id": "step2"},
        {"operation": "write_file", "params": {"file_path": "utils.py",
            "content_from_step": "step2"}, "depends_on": "step2", "id": "step3"},
        {"operation": "generate_summary", "params": {"changes_from_step": "step2"}, "id": "step4"}
    ]));
    let llm = FakeLlm::in_order(vec![
        chat(&format!("```python\n{FIXED}```\n")),
        chat("calculate_metrics is easier to read and handles an empty list."),
    ]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t"])
        .arg("--plan")
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert!(
        stderr(&output).contains("step step4 reads step step2 but did not depend on it"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.task_dir("t").join("final_output/utils.py")).unwrap(),
        FIXED
    );
    let answer = sandbox.task_dir("t").join("step4/llm-answer-1.md");
    let summary = std::fs::read_to_string(answer).unwrap();
    assert!(summary.contains("easier to read"), "{summary}");
    let prompt = last_user_message(&llm.bodies()[1]);
    assert!(prompt.contains("rewrote utils.py"), "{prompt}");
}

#[test]
fn a_planned_flow_modifies_code_runs_the_tests_and_summarises() {
    let sandbox = Sandbox::new(&[
        ("utils.py", UTILS),
        (
            "test_utils.py",
            concat!(
                "from utils import calculate_metrics\n",
                "\n",
                "def test_empty():\n",
                "    assert calculate_metrics([]) == {\"total\": 0, \"mean\": 0.0}\n",
            ),
        ),
    ]);
    let task = "Make calculate_metrics in utils.py handle an empty list";
    let plan = json!({"version": 1, "task": task, "steps": [
        {"id": "read", "operation": "read_file", "params": {"file_path": "utils.py"}},
        {"id": "fix", "operation": "modify_code", "depends_on": ["read"],
         "params": {"file_path": "utils.py", "instructions": "return zeros for an empty list"}},
        {"id": "test", "operation": "run_tests", "depends_on": ["fix"],
         "params": {"command": "python3 -m pytest -q -p no:cacheprovider"}}
    ]});
    let code_answer = format!("Here is the updated file:\n\n```python\n{FIXED}```\n");
    let llm = FakeLlm::in_order(vec![
        chat(&format!("```json\n{plan}\n```")),
        chat(&code_answer),
        chat("calculate_metrics now handles an empty list; the tests pass."),
    ]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", task])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(
        std::fs::read_to_string(sandbox.task_dir("t").join("final_output/utils.py")).unwrap(),
        FIXED
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("utils.py")).unwrap(),
        UTILS,
        "the repository is untouched until apply"
    );
    let tests = sandbox.result("t", "test");
    assert_eq!(
        (
            tests["tests"]["passed"].clone(),
            tests["tests"]["failed"].clone()
        ),
        (json!(1), json!(0)),
        "{tests}"
    );
    // (Issue 37: the question for a reproduction that follows the plan is left out.)
    let bodies = llm.bodies_except_reproduction();
    assert_eq!(bodies.len(), 3);
    let edit_prompt = last_user_message(&bodies[1]);
    assert!(
        edit_prompt.contains(UTILS.trim_end())
            && edit_prompt.contains("return zeros for an empty list"),
        "{edit_prompt}"
    );
    assert_eq!(bodies[1]["model"], json!("m"));
    assert_eq!(sandbox.step_status("t", "fix")["tokens"]["calls"], json!(1));
    let summary = std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap();
    assert!(
        summary.contains("calculate_metrics now handles an empty list")
            && summary.contains("- `utils.py` (modified)"),
        "{summary}"
    );
}

#[test]
fn a_failing_summary_call_falls_back_to_the_journal_summary() {
    let sandbox = Sandbox::new(&[]);
    let too_long = json!({"error": {
        "message": "context too long", "type": "x", "param": null, "code": null
    }});
    let llm = FakeLlm::in_order(vec![
        chat(&write_plan()),
        status(400, &too_long.to_string()),
    ]);
    let output = run_task(&sandbox, &llm, &[]);
    assert_exit(&output, 0);
    assert!(
        stderr(&output).contains("the LLM summary failed"),
        "{}",
        stderr(&output)
    );
    let summary = std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap();
    assert!(
        summary.contains("The flow `t` succeeded.") && summary.contains("- `notes.txt` (added)"),
        "{summary}"
    );
}

#[test]
fn the_demo_runs_offline_from_its_recording() {
    let sandbox = Sandbox::new(&[]);
    let output = sandbox.ocflow().arg("demo").output().unwrap();
    assert_exit(&output, 0);
    let out = stdout(&output);
    assert!(
        out.contains(
            "+    \"\"\"Total, mean and variance of `values`; all zero for an empty list.\"\"\""
        ),
        "{out}"
    );
    assert!(
        out.contains("calculate_metrics in `utils.py` is now readable"),
        "{out}"
    );
    assert!(
        stderr(&output).contains("tests passed: 2 passed, 0 failed"),
        "{}",
        stderr(&output)
    );
    // It makes its own repository: from a directory outside any, without --repo, too.
    let elsewhere = sandbox.root().join("not-a-repository");
    std::fs::create_dir(&elsewhere).unwrap();
    let output = sandbox
        .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
        .current_dir(&elsewhere)
        .arg("demo")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("calculate_metrics in `utils.py` is now readable"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_recorded_run_replays_without_the_server_and_an_unknown_request_fails_clearly() {
    let sandbox = Sandbox::new(&[]);
    let recording = sandbox.root().join("rec.jsonl");
    let llm = FakeLlm::in_order(vec![chat(&write_plan()), chat("done")]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["--record"])
        .arg(&recording)
        .args(["run", "--task-id", "recorded", TASK])
        .env("OPENAI_API_KEY", "sk-recorded-key")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let text = std::fs::read_to_string(&recording).unwrap();
    assert_eq!(text.lines().count(), 2);
    assert!(!text.contains("sk-recorded-key"));
    drop(llm);

    let replayed = sandbox
        .ocflow()
        .arg("--replay")
        .arg(&recording)
        .args(["run", "--task-id", "replayed", TASK])
        .output()
        .unwrap();
    assert_exit(&replayed, 0);
    assert_eq!(
        tree(&sandbox.task_dir("replayed").join("final_output")),
        tree(&sandbox.task_dir("recorded").join("final_output"))
    );
    assert_eq!(
        sandbox.status("replayed")["tokens"],
        sandbox.status("recorded")["tokens"]
    );

    let other = sandbox
        .ocflow()
        .arg("--replay")
        .arg(&recording)
        .args(["run", "--task-id", "other", "Something else entirely"])
        .output()
        .unwrap();
    assert_exit(&other, 1);
    assert!(
        stderr(&other).contains("has no answer for this planner request")
            && stderr(&other).contains("--record"),
        "{}",
        stderr(&other)
    );
}

#[test]
fn a_redirecting_endpoint_is_not_followed_with_the_key() {
    let sandbox = Sandbox::new(&[]);
    let elsewhere = FakeLlm::in_order(vec![chat(&write_plan())]);
    let redirect = Reply::Raw {
        status: 307,
        body: String::new(),
        headers: vec![(
            "location",
            format!("{}/chat/completions", elsewhere.base_url()),
        )],
    };
    let llm = FakeLlm::in_order(vec![redirect]);
    let output = run_task(&sandbox, &llm, &[]);
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("does not follow redirects with your key"),
        "{}",
        stderr(&output)
    );
    assert!(
        elsewhere.requests().is_empty(),
        "the other host was never contacted"
    );
}

#[test]
fn parallel_steps_hitting_a_rate_limit_back_off_and_the_flow_completes() {
    let sandbox = Sandbox::new(&[]);
    let steps: Vec<Value> = (0..6)
        .map(|i| json!({"id": format!("g{i}"), "operation": "generate_summary", "params": {}}))
        .collect();
    let plan = sandbox.flow(&Value::Array(steps));
    let limited = || Reply::Raw {
        status: 429,
        body: json!({"error": {
            "message": "slow down", "type": "rate_limit_error", "param": null, "code": null
        }})
        .to_string(),
        headers: vec![],
    };
    // The six steps ask the same question at once: the first six asks are limited, whichever
    // step they come from, and the six retries get through.
    let mut replies: Vec<Reply> = (0..6).map(|_| limited()).collect();
    replies.extend((0..6).map(|_| chat("ok")));
    let llm = FakeLlm::with_rules(vec![
        Rule::flow_summary().reply(chat("ok")).times(1),
        Rule::prompt_contains("What the steps did:")
            .named("summary steps")
            .replies_in_order(replies)
            .times(12),
    ]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--jobs", "6", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    // (Issue 37: six summaries of nothing deliver nothing: the flow ends `no_change`, exit 1,
    // where it said `succeeded`; every step succeeded after its rate limits.)
    assert_exit(&output, 1);
    assert_eq!(sandbox.status("t")["state"], json!("no_change"));
    assert_eq!(
        llm.requests().len(),
        13,
        "six limited, six retried, one summary"
    );
    assert_eq!(
        (llm.calls("summary steps"), llm.calls("flow summary")),
        (12, 1)
    );
    for i in 0..6 {
        let step = sandbox.step_status("t", &format!("g{i}"));
        assert_eq!(step["status"], json!("succeeded"));
        assert_eq!(
            step["attempts"],
            json!(1),
            "retried inside the client, not as a new attempt"
        );
    }
}

/// The retry budget counts from the first attempt and ends every wait, the request in flight
/// included: a server that accepts and never answers used to be waited for a whole request
/// timeout past the budget (361 s against 300 s). Settings where the budget cannot hold one
/// full attempt are said at start-up.
#[test]
fn the_retry_budget_ends_every_wait_and_a_budget_shorter_than_one_request_is_reported() {
    let sandbox = Sandbox::new(&[]);
    llm_settings(
        &sandbox,
        "max_attempts = 5\nrequest_timeout_seconds = 30\nmax_retry_seconds = 2",
    );
    let llm = FakeLlm::in_order(vec![Reply::Slow {
        delay: Duration::from_secs(60),
    }]);
    let started = Instant::now();
    let output = run_task(&sandbox, &llm, &[]);
    assert_exit(&output, 1);
    // Liveness only: one request timeout (30 s) is what the budget must cut short; how close to
    // the 2 s budget the run ends is measured by scripts/bench-responsiveness.
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "took {:?}, a request timeout past the 2 s budget",
        started.elapsed()
    );
    let err = stderr(&output);
    assert!(
        err.contains("max_retry_seconds (2 s) is shorter than request_timeout_seconds (30 s)"),
        "{err}"
    );
    assert!(err.contains("retry budget of 2 s"), "{err}");
    assert!(err.contains("check the server"), "{err}");
}

/// Issue 24: llama-cpp-python's 500 to `json_schema` used up one of README's two attempts, so
/// one busy moment after it failed the run. Probing is not trying: the refusal costs none.
#[test]
fn a_refused_json_schema_costs_no_attempt() {
    let sandbox = Sandbox::new(&[]);
    llm_settings(&sandbox, "max_attempts = 2");
    let llm =
        FakeLlm::refusing_json_schema(vec![status(503, "busy"), chat(&write_plan()), chat("done")]);
    let output = run_task(&sandbox, &llm, &[]);
    assert_exit(&output, 0);
    let forms: Vec<Value> = llm
        .bodies()
        .iter()
        .map(|b| b["response_format"]["type"].clone())
        .collect();
    assert_eq!(
        forms,
        vec![
            json!("json_schema"),
            json!("json_object"),
            json!("json_object"),
            Value::Null
        ],
        "refused, busy, the plan, the summary"
    );
}

/// `ocflow run TASK --task-id ID` against `llm`.
fn run_named(sandbox: &Sandbox, llm: &FakeLlm, id: &str) -> Output {
    sandbox
        .ocflow()
        .args(["--base-url", &llm.base_url(), "--model", "fake-model"])
        .args(["run", "--task-id", id, TASK])
        .env("OPENAI_API_KEY", "sk-test-remembered")
        .output()
        .unwrap()
}

/// Issue 24: every ocflow process probed the endpoint again. The form that worked is
/// remembered per base URL in the user's state directory for a day: the second run of a batch
/// sends no `json_schema` request; an entry older than a day is probed again. The key is not
/// in the file.
#[test]
fn the_answer_form_is_remembered_per_endpoint_for_a_day() {
    let sandbox = Sandbox::new(&[]);
    let replies = (0..3)
        .flat_map(|_| [chat(&write_plan()), chat("done")])
        .collect();
    let llm = FakeLlm::refusing_json_schema(replies);
    let schema_requests = |llm: &FakeLlm| -> usize {
        llm.bodies()
            .iter()
            .filter(|b| b["response_format"]["type"] == json!("json_schema"))
            .count()
    };
    assert_exit(&run_named(&sandbox, &llm, "first"), 0);
    assert_eq!(schema_requests(&llm), 1, "the first run probes");
    let file = sandbox.state_home().join("ocflow/answer-forms.json");
    let text = std::fs::read_to_string(&file).unwrap();
    let stored: Value = serde_json::from_str(&text).unwrap();
    let entry = &stored["endpoints"][llm.base_url()];
    assert_eq!(entry["form"], json!("json_object with a schema"), "{text}");
    assert!(!text.contains("sk-test"), "{text}");

    let before = llm.bodies().len();
    assert_exit(&run_named(&sandbox, &llm, "second"), 0);
    assert_eq!(schema_requests(&llm), 1, "the second run does not probe");
    let second = &llm.bodies()[before];
    assert_eq!(second["response_format"]["type"], json!("json_object"));
    assert!(second["response_format"]["schema"].is_object());
    let journal =
        std::fs::read_to_string(sandbox.task_dir("second").join("journal.jsonl")).unwrap();
    assert!(
        journal.contains("\"answer_form\":\"json_object with a schema\""),
        "{journal}"
    );

    // A day and a second later the entry is stale: the endpoint is probed again.
    let mut stale = stored.clone();
    let day_ago = entry["probed_at"].as_u64().unwrap() - 24 * 60 * 60 - 1;
    stale["endpoints"][llm.base_url()]["probed_at"] = json!(day_ago);
    std::fs::write(&file, stale.to_string()).unwrap();
    assert_exit(&run_named(&sandbox, &llm, "third"), 0);
    assert_eq!(schema_requests(&llm), 2, "a stale entry is probed again");
    let again: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert!(
        again["endpoints"][llm.base_url()]["probed_at"]
            .as_u64()
            .unwrap()
            > day_ago
    );
}

/// The events of a `--json` run, one per stdout line.
fn events_of(output: &Output) -> Vec<Value> {
    stdout(output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// A flow whose only step asks the model to edit `utils.py`.
fn edit_flow(sandbox: &Sandbox) -> std::path::PathBuf {
    sandbox.flow(&json!([{"id": "edit", "operation": "modify_code",
        "params": {"file_path": "utils.py", "instructions": "rename x to y"}}]))
}

/// Issue 27: a key refused after planning (a step's own call) ends the flow at once with an
/// `error` event after `flow_finished`, carrying the LLM error's code and hint; recovery and the
/// summary do not call the dead endpoint again; the step stays resumable, and a plain `resume`
/// runs it once the key works.
#[test]
fn a_key_refused_in_a_step_is_an_error_event_and_resume_continues_once_fixed() {
    let sandbox = Sandbox::new(&[("utils.py", "x = 1\n")]);
    let plan = edit_flow(&sandbox);
    let refused = status(401, r#"{"error": {"message": "bad key", "type": "auth"}}"#);
    // Recovery and the summary show the step's instructions too: their rules come first.
    let dead = || {
        FakeLlm::with_rules(vec![
            Rule::recovery().times(0),
            Rule::flow_summary().times(0),
            Rule::prompt_contains("rename x to y")
                .named("step")
                .reply(refused.clone())
                .times(1),
        ])
    };
    let llm = dead();
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .env("OCFLOW_API_KEY", "sk-dead")
        .args(["--json", "run", "--task-id", "t", "--plan"])
        .arg(&plan)
        .output()
        .unwrap();
    assert_exit(&output, 1);
    llm.verify();
    let events = events_of(&output);
    let [.., finished, error] = events.as_slice() else {
        panic!("too few events: {}", stdout(&output));
    };
    assert_eq!(finished["type"], json!("flow_finished"), "{finished}");
    assert_eq!(finished["state"], json!("failed"), "{finished}");
    assert_eq!(error["type"], json!("error"), "{error}");
    assert_eq!(error["code"], json!("llm"), "{error}");
    assert_eq!(error["exit_code"], json!(1), "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("401"),
        "{error}"
    );
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("ocflow resume t"),
        "{error}"
    );
    assert!(
        error["hint"].as_str().unwrap().contains("API key"),
        "{error}"
    );
    assert!(!stdout(&output).contains("sk-dead"));
    assert_eq!(sandbox.status("t")["recovery_calls"], json!(0));
    let step = sandbox.step_status("t", "edit");
    assert_eq!(step["error"]["kind"], json!("llm_unusable"), "{step}");

    // Still refused: a plain resume runs the step again, and the end of the run names the fix
    // once, at a terminal.
    let llm = dead();
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .env("OCFLOW_API_KEY", "sk-dead")
        .args(["resume", "t"])
        .output()
        .unwrap();
    assert_exit(&output, 1);
    llm.verify();
    let shown = stdout(&output);
    assert_eq!(shown.matches("check the base URL").count(), 1, "{shown}");
    assert!(shown.contains("ocflow resume t"), "{shown}");

    // The key fixed: the same plain resume finishes the flow.
    let llm = FakeLlm::with_rules(vec![
        Rule::recovery().times(0),
        Rule::flow_summary().reply(chat("Renamed x to y.")),
        Rule::prompt_contains("rename x to y")
            .named("step")
            .reply(chat("```python\ny = 1\n```"))
            .times(1),
    ]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .env("OCFLOW_API_KEY", "sk-good")
        .args(["resume", "t"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    llm.verify();
    assert_eq!(
        std::fs::read_to_string(sandbox.task_dir("t").join("final_output/utils.py")).unwrap(),
        "y = 1\n"
    );
}

/// Issue 27: `resume` of a task whose planning failed plans again; a key still refused is the
/// same `error` event as the first run's.
#[test]
fn resume_that_plans_again_with_a_refused_key_is_an_error_event() {
    let sandbox = Sandbox::new(&[("README.md", "# demo\n")]);
    let refused = status(401, r#"{"error": {"message": "bad key", "type": "auth"}}"#);
    let llm = FakeLlm::in_order(vec![refused.clone(), refused]);
    for args in [
        vec!["--json", "run", "--task-id", "t", TASK],
        vec!["--json", "resume", "t"],
    ] {
        let output = sandbox
            .ocflow_llm(&llm.base_url())
            .env("OCFLOW_API_KEY", "sk-dead")
            .args(&args)
            .output()
            .unwrap();
        assert_exit(&output, 2);
        let events = events_of(&output);
        let last = events.last().unwrap();
        assert_eq!(last["type"], json!("error"), "{args:?}: {last}");
        assert_eq!(last["code"], json!("llm"), "{args:?}: {last}");
        assert!(last["hint"].as_str().unwrap().contains("API key"), "{last}");
    }
    assert_eq!(llm.requests().len(), 2, "one planning call a run");
}

/// Issue 27: a step that failed on its own, whose recovery call the model refuses, ends the
/// flow with the same `error` event; the recovery is asked once and the summary not at all.
#[test]
fn a_key_refused_to_recovery_is_an_error_event_and_asked_once() {
    let sandbox = Sandbox::new(&[("README.md", "# demo\n")]);
    let plan = sandbox.flow(
        &json!([{"id": "check", "operation": "execute_shell_command",
        "params": {"command": "exit 3"}}]),
    );
    let refused = status(401, r#"{"error": {"message": "bad key", "type": "auth"}}"#);
    let llm = FakeLlm::with_rules(vec![
        Rule::recovery().reply(refused).times(1),
        Rule::flow_summary().times(0),
    ]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .env("OCFLOW_API_KEY", "sk-dead")
        .args(["--json", "run", "--task-id", "t", "--plan"])
        .arg(&plan)
        .output()
        .unwrap();
    assert_exit(&output, 1);
    llm.verify();
    let events = events_of(&output);
    let [.., finished, error] = events.as_slice() else {
        panic!("too few events: {}", stdout(&output));
    };
    assert_eq!(finished["state"], json!("failed"), "{finished}");
    assert_eq!(
        (error["type"].clone(), error["code"].clone()),
        (json!("error"), json!("llm")),
        "{error}"
    );
    assert!(
        error["hint"].as_str().unwrap().contains("API key"),
        "{error}"
    );
}

/// Issue 27: an endpoint nobody answers at, once every retry is spent (the step's and
/// recovery's), is the `error` event too, with the hint of a transient failure.
#[test]
fn an_endpoint_that_never_answers_is_an_error_event_once_retries_are_spent() {
    let sandbox = Sandbox::new(&[("utils.py", "x = 1\n")]);
    std::fs::create_dir_all(&sandbox.workspace).unwrap();
    std::fs::write(
        sandbox.workspace.join("ocflow.toml"),
        "[llm]\nmax_attempts = 1\n[recovery]\nmax_transient_retries = 0\n",
    )
    .unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let output = sandbox
        .ocflow_llm(&base_url)
        .env("OCFLOW_API_KEY", "sk-test")
        .args(["--json", "run", "--task-id", "t", "--plan"])
        .arg(edit_flow(&sandbox))
        .output()
        .unwrap();
    assert_exit(&output, 1);
    let events = events_of(&output);
    let [.., finished, error] = events.as_slice() else {
        panic!("too few events: {}", stdout(&output));
    };
    assert_eq!(finished["state"], json!("failed"), "{finished}");
    assert_eq!(
        (error["type"].clone(), error["code"].clone()),
        (json!("error"), json!("llm")),
        "{error}"
    );
    assert!(
        error["hint"].as_str().unwrap().contains("may answer later"),
        "{error}"
    );
}
