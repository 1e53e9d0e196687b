//! Any repository, not only Python (issue 16): the JavaScript case a user met — the model's
//! first rewrite of `math.js` drops a closing brace, ocflow wrote it and the `npm test` step
//! was "not recognised as pytest or cargo test output" — now ends with the broken answer
//! re-asked with the parser's line, the valid one written once, and the failing test named in
//! the step's result; the planner is told the repository's test command.

use serde_json::json;

use super::fake_llm::{FakeLlm, chat, last_user_message};
use super::support::*;

const MATH: &str = "export function add(a, b) {\n  return a - b;\n}\n";
const BROKEN: &str = "export function add(a, b) {\n  return a + b;\n";
const FIXED: &str = "export function add(a, b) {\n  return a + b;\n}\n\nexport function mul(a, b) \
                     {\n  return a + b;\n}\n";
const TEST: &str = "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\n\
                    import { add, mul } from '../math.js';\n\n\
                    test('add adds', () => {\n  assert.equal(add(2, 3), 5);\n});\n\n\
                    test('mul multiplies', () => {\n  assert.equal(mul(2, 3), 6);\n});\n";

#[test]
fn a_javascript_rewrite_is_parsed_before_it_is_written_and_node_test_failures_are_named() {
    if !require(Component::Node) {
        return;
    }
    let sandbox = Sandbox::new(&[
        ("math.js", MATH),
        ("test/math.test.js", TEST),
        (
            "package.json",
            "{\"type\": \"module\", \"scripts\": {\"test\": \"node --test\"}}\n",
        ),
    ]);
    let plan = json!({"steps": [
        {"id": "fix", "operation": "modify_code",
         "params": {"file_path": "math.js", "instructions": "make add add, and add mul"}},
        {"id": "test", "operation": "run_tests", "depends_on": ["fix"],
         "params": {"command": "npm test"}}
    ]});
    let llm = FakeLlm::in_order(vec![
        chat(&plan.to_string()),
        chat(&format!("```javascript\n{BROKEN}```\n")),
        chat(&format!("```javascript\n{FIXED}```\n")),
        chat("add is fixed; mul is still wrong."),
    ]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args([
            "run",
            "--no-recovery",
            "--task-id",
            "t",
            "fix add in math.js",
        ])
        .output()
        .unwrap();
    assert_exit(&output, 1);
    let bodies = llm.bodies_except_reproduction();
    let planning = last_user_message(&bodies[0]);
    assert!(
        planning.contains("- `npm test` (package.json's test script: node --test)"),
        "{planning}"
    );
    let reask = last_user_message(&bodies[2]);
    assert!(
        reask.contains("does not parse as JavaScript") && reask.contains("line "),
        "{reask}"
    );
    let fix = sandbox.result("t", "fix");
    assert_eq!(fix["status"], json!("success"), "{fix}");
    assert_eq!(
        fix["syntax_check"],
        json!({"language": "javascript", "checked": true})
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.task_dir("t").join("fix/output/math.js")).unwrap(),
        FIXED,
        "the broken answer is never written"
    );
    let tests = sandbox.result("t", "test");
    assert_eq!(tests["status"], json!("failure"), "{tests}");
    assert_eq!(tests["tests"]["framework"], json!("node"), "{tests}");
    assert_eq!(
        (
            tests["tests"]["passed"].clone(),
            tests["tests"]["failed"].clone()
        ),
        (json!(1), json!(1)),
        "{tests}"
    );
    let failure = &tests["tests"]["failures"][0];
    assert!(
        failure["name"].as_str().unwrap().contains("mul multiplies"),
        "{failure}"
    );
    assert!(
        failure["message"].as_str().unwrap().contains('5')
            && failure["message"].as_str().unwrap().contains('6'),
        "{failure}"
    );
}
