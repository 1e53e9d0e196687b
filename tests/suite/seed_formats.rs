//! The other seeds' plan formats (issue 30 §5): seed 004's `stepId`, `sub_task_input`,
//! `isFinalAnswer` and `result_data`, and seed 000's `tasks` with `required_role`, are read as
//! ocflow's own fields; the flow's answer (a step marked final, else its `generate_summary`)
//! heads the summary and is in `flow_finished`.

use serde_json::{Value, json};

use super::fake_llm::*;
use super::support::*;

fn events(output: &std::process::Output) -> Vec<Value> {
    stdout(output)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

fn finished(output: &std::process::Output) -> Value {
    events(output)
        .into_iter()
        .find(|e| e["type"] == "flow_finished")
        .expect("a flow_finished event")
}

fn summary(sandbox: &Sandbox) -> String {
    std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap()
}

#[test]
fn seed_004s_plan_is_understood_at_the_first_answer_and_its_final_answer_heads_the_summary() {
    let sandbox = Sandbox::new(&[("notes.txt", "ship on Friday")]);
    let plan = json!({"steps": [
        {"stepId": "read",
         "sub_task_input": {"operation": "read_file", "params": {"file_path": "notes.txt"}}},
        {"stepId": "answer", "operation": "generate_summary", "isFinalAnswer": true,
         "dependencies": ["read"],
         "sub_task_input": {"message": "The notes say: @{outputs.read.result_data}"}}
    ]});
    let llm = FakeLlm::with_rules(vec![
        Rule::planner()
            .reply(chat(&format!("```json\n{plan}\n```")))
            .times(1),
        Rule::flow_summary().reply(chat("The notes were read.")),
    ]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["--json", "run", "--task-id", "t", "What do notes.txt say?"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    llm.verify();
    let flow = read_json(&sandbox.task_dir("t").join("flow.json"));
    assert_eq!(
        flow["steps"],
        json!([
            {"id": "read", "operation": "read_file", "role": "developer",
             "params": {"file_path": "notes.txt"}},
            {"id": "answer", "operation": "generate_summary", "role": "reviewer",
             "params": {"message": "The notes say: @{outputs.read.content}"},
             "depends_on": ["read"], "final_answer": true}
        ]),
        "{flow}"
    );
    let answer = "The notes say: ship on Friday";
    assert_eq!(
        finished(&output)["final_answer"],
        json!({"step": "answer", "text": answer})
    );
    let text = summary(&sandbox);
    let heading = format!("## Answer (step `answer`)\n\n{answer}\n");
    let at = text.find(&heading).expect(&text);
    assert!(
        at < text.find("## Steps").unwrap(),
        "the answer comes before the facts:\n{text}"
    );
}

#[test]
fn seed_000s_task_list_with_required_roles_runs_as_a_flow() {
    let sandbox = Sandbox::new(&[]);
    let plan = json!({
        "user_instruction": "Create a greeting and check it",
        "parsed_intent": {"goal": "a greeting"},
        "tasks": [
            {"task_id": "task_1", "description": "write the greeting", "required_role": "developer",
             "operation": "write_file", "status": "PENDING", "dependencies": [],
             "params": {"file_path": "hello.txt", "content": "hello\n"}},
            {"task_id": "task_2", "description": "check it", "required_role": "tester",
             "operation": "execute_shell_command", "dependencies": ["task_1"],
             "params": {"command": "grep -q hello hello.txt"}}
        ]
    });
    let output = sandbox.run(&plan, "t");
    assert_exit(&output, 0);
    let flow = read_json(&sandbox.task_dir("t").join("flow.json"));
    assert_eq!(flow["task"], json!("Create a greeting and check it"));
    let steps: Vec<(Value, Value, Value)> = flow["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].clone(), s["role"].clone(), s["depends_on"].clone()))
        .collect();
    assert_eq!(
        steps,
        vec![
            (json!("task_1"), json!("developer"), Value::Null),
            (json!("task_2"), json!("tester"), json!(["task_1"])),
        ]
    );
    assert_eq!(
        sandbox.step_status("t", "task_2")["status"],
        json!("succeeded")
    );
    // A role the crew does not have is refused like any role.
    let mut wrong = plan.clone();
    wrong["tasks"][1]["required_role"] = json!("QualityAssuranceAgent");
    let refused = sandbox.run(&wrong, "u");
    assert_exit(&refused, 2);
    assert!(
        stderr(&refused).contains("QualityAssuranceAgent"),
        "{}",
        stderr(&refused)
    );
}

/// Issue 37 §6: seed 000's `ExecutionPlan` as its document prints it — tasks with only a
/// `description` and a `required_role` of the crew's (one with the QA agent's
/// `raw_instruction`) — was refused with 11 problems. Each described task is a model step that
/// answers in text (`ask_model`), its role's name kept in its instructions; the QA step is
/// given what the step before it produced and its criteria. Text changes no file: the flow
/// delivers nothing, and says so.
#[test]
fn seed_000s_printed_execution_plan_runs_as_described_model_steps() {
    let sandbox = Sandbox::new(&[("input.txt", "some text\n")]);
    let qa = json!({"content_to_qa": "output_from_task_4",
                    "qa_criteria": "Ensure output is valid text."});
    let plan = json!({
        "user_instruction": "Create a CLI tool that reads a file, processes its content, and \
                             writes to another file, then QA the output.",
        "parsed_intent": {"goal": "Create a CLI tool with file I/O and QA"},
        "tasks": [
            {"task_id": "task_1", "description": "Plan the CLI tool features",
             "required_role": "SoftwarePlanner", "dependencies": []},
            {"task_id": "task_2",
             "description": "Implement the file reading part: read file 'input.txt'",
             "required_role": "PythonDeveloper", "dependencies": ["task_1"]},
            {"task_id": "task_3", "description": "Implement the core logic for processing content.",
             "required_role": "PythonDeveloper", "dependencies": ["task_2"]},
            {"task_id": "task_4", "description": "Implement file writing part: write file \
                                                  'output.txt' with processed content.",
             "required_role": "PythonDeveloper", "dependencies": ["task_3"]},
            {"task_id": "task_5", "description": "QA the generated 'output.txt' file.",
             "required_role": "QualityAssuranceAgent", "raw_instruction": qa.to_string(),
             "dependencies": ["task_4"]}
        ]
    });
    let llm = FakeLlm::with_rules(vec![
        Rule::prompt_contains("Your part: As QualityAssuranceAgent: QA the generated")
            .named("qa")
            .reply(chat("The output is valid text."))
            .times(1),
        Rule::prompt_contains("Your part: As ")
            .named("crew")
            .reply(chat(
                "```python\nprint(open('input.txt').read().upper())\n```",
            ))
            .times(4),
        Rule::flow_summary().reply(chat("The crew answered in text.")),
    ]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["--json", "run", "--task-id", "t", "--plan"])
        .arg(sandbox.flow(&plan))
        .output()
        .unwrap();
    llm.verify();
    let flow = read_json(&sandbox.task_dir("t").join("flow.json"));
    let first = &flow["steps"][0];
    assert_eq!(first["operation"], json!("ask_model"), "{flow}");
    assert_eq!(
        first["params"]["instructions"],
        json!("As SoftwarePlanner: Plan the CLI tool features"),
        "{flow}"
    );
    let states: Vec<Value> = sandbox.status("t")["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].clone())
        .collect();
    assert_eq!(states, vec![json!("succeeded"); 5]);
    // The QA step saw task_4's answer and the criteria.
    let qa_prompt = llm
        .bodies()
        .iter()
        .map(last_user_message)
        .find(|m| m.contains("As QualityAssuranceAgent"))
        .unwrap();
    assert!(
        qa_prompt.contains("task_4 ask_model (success)")
            && qa_prompt.contains("print(open('input.txt')")
            && qa_prompt.contains("Ensure output is valid text."),
        "{qa_prompt}"
    );
    // Text is no change: nothing was delivered, and the flow says so.
    assert_ne!(finished(&output)["state"], json!("succeeded"));
    assert!(
        !sandbox
            .task_dir("t")
            .join("final_output/output.txt")
            .exists()
    );
}

#[test]
fn a_final_answer_flag_that_is_not_true_or_false_is_refused() {
    let sandbox = Sandbox::new(&[("a.txt", "a")]);
    let output = sandbox.run(
        &json!([{"stepId": "r", "operation": "read_file", "isFinalAnswer": "yes",
                 "params": {"file_path": "a.txt"}}]),
        "t",
    );
    assert_exit(&output, 2);
    assert!(
        stderr(&output)
            .contains("`final_answer` (seed 004's `isFinalAnswer`) must be true or false"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_generate_summary_steps_text_reaches_the_user() {
    let sandbox = Sandbox::new(&[("a.txt", "alpha\n")]);
    let flow = json!([
        {"id": "read", "operation": "read_file", "params": {"file_path": "a.txt"}},
        {"id": "sum", "operation": "generate_summary", "depends_on": ["read"]}
    ]);
    let said = "a.txt holds the single word alpha.";
    let llm = FakeLlm::with_rules(vec![
        Rule::flow_summary().reply(chat("Done.")),
        Rule::conversation_contains("You summarise what an automated coding flow did")
            .reply(chat(said))
            .times(1),
    ]);
    let plan = sandbox.flow(&flow);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["--json", "run", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    llm.verify();
    assert_eq!(
        finished(&output)["final_answer"],
        json!({"step": "sum", "text": said})
    );
    assert!(
        summary(&sandbox).contains(&format!("## Answer (step `sum`)\n\n{said}\n")),
        "{}",
        summary(&sandbox)
    );
}

/// Seed 002 lets the orchestrator choose the model "when it invokes open_codex_lib": a step
/// names a profile, or a model on the default endpoint, without a role for it; both are
/// checked like a role's profile. A profile no step uses cannot fail a run (`broken`).
#[test]
fn a_step_names_its_profile_or_its_model_without_a_role() {
    let sandbox = Sandbox::new(&[("a.py", "A = 1\n"), ("b.py", "B = 1\n")]);
    let main = FakeLlm::with_rules(vec![
        Rule::flow_summary().reply(chat("Both changed.")),
        Rule::prompt_contains("make B two")
            .reply(chat("```python\nB = 2\n```\n"))
            .times(1),
    ]);
    let small = FakeLlm::in_order(vec![chat("```python\nA = 2\n```\n")]);
    std::fs::create_dir_all(&sandbox.workspace).unwrap();
    std::fs::write(
        sandbox.workspace.join("ocflow.toml"),
        format!(
            "[llm]\nmax_attempts = 1\n\n[llm.profiles.small]\nbase_url = \"{}\"\n\
             model = \"small-model\"\n\n[llm.profiles.broken]\nbase_url = \"ftp://x\"\n\
             model = \"b\"\n",
            small.base_url()
        ),
    )
    .unwrap();
    let flow = |profile: &str, model: &str| {
        json!([
            {"id": "a", "operation": "modify_code", "profile": profile,
             "params": {"file_path": "a.py", "instructions": "make A two"}},
            {"id": "b", "operation": "modify_code", "model": model,
             "params": {"file_path": "b.py", "instructions": "make B two"}}
        ])
    };
    let plan = sandbox.flow(&flow("small", "other-model"));
    let output = sandbox
        .ocflow_llm(&main.base_url())
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    main.verify();
    let small_bodies = small.bodies();
    assert_eq!(small_bodies.len(), 1);
    assert_eq!(small_bodies[0]["model"], json!("small-model"));
    let b = main
        .bodies()
        .into_iter()
        .find(|body| last_user_message(body).contains("make B two"))
        .unwrap();
    assert_eq!(
        b["model"],
        json!("other-model"),
        "the default endpoint, that model"
    );
    assert_eq!(sandbox.step_status("t", "a")["profile"], json!("small"));
    assert_eq!(sandbox.step_status("t", "b")["profile"], json!("default"));
    assert!(sandbox.status("t")["tokens_by_profile"]["small"].is_object());

    // Checked before anything runs, as a role's profile is.
    for (profile, model, said) in [
        (
            "nope",
            "m",
            "profile `nope` is not a model profile (defined: broken, default, small)",
        ),
        (
            "broken",
            "m",
            "profile `broken` cannot be asked: [llm.profiles.broken] base_url \"ftp://x\" must \
             start with http:// or https://",
        ),
        (
            "small",
            "two words",
            "model \"two words\": a model's name is 1 to 200 printable characters",
        ),
    ] {
        let plan = sandbox.flow(&flow(profile, model));
        let refused = sandbox
            .ocflow_llm(&main.base_url())
            .args(["run", "--task-id", "bad", "--plan"])
            .arg(plan)
            .output()
            .unwrap();
        assert_exit(&refused, 2);
        assert!(stderr(&refused).contains(said), "{}", stderr(&refused));
    }
}
