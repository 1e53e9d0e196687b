//! How a repository runs its tests is guessed once: the command the planner is told first is
//! the command a `run_tests` step without one runs (issue 25: for a repository with both
//! `package.json` and `pytest.ini` the planner was told `npm test` while the step ran pytest).

use serde_json::json;

use super::fake_llm::*;
use super::support::*;

const TASK: &str = "Run the repository's tests";

/// The commands the planner's prompt lists under "How this repository runs its tests".
fn commands_told(prompt: &str) -> Vec<String> {
    let (_, rest) = prompt
        .split_once("How this repository runs its tests")
        .unwrap_or_else(|| panic!("no test commands in the prompt:\n{prompt}"));
    rest.lines()
        .skip(1)
        .take_while(|line| line.starts_with("- `"))
        .map(|line| line[3..].split('`').next().unwrap().to_string())
        .collect()
}

/// A layout's name, its files, and the command both must agree on.
type Layout<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);

#[test]
fn the_planner_is_told_first_the_command_run_tests_runs_without_one() {
    let npm = r#"{"scripts": {"test": "node -e 0"}}"#;
    let layouts: &[Layout] = &[
        (
            "package.json and pytest.ini",
            &[("package.json", npm), ("pytest.ini", "[pytest]\n")],
            "npm test",
        ),
        (
            "pnpm",
            &[("package.json", npm), ("pnpm-lock.yaml", "")],
            "pnpm test",
        ),
        (
            "Cargo.toml and pytest in pyproject.toml",
            &[
                ("Cargo.toml", "[package]\n"),
                ("pyproject.toml", "[tool.pytest.ini_options]\n"),
            ],
            "cargo test",
        ),
        (
            "a Makefile",
            &[("Makefile", "test:\n\ttrue\n")],
            "make test",
        ),
        (
            "Python tests only",
            &[("tests/test_a.py", "def test_a():\n    pass\n")],
            "python3 -m pytest -q",
        ),
    ];
    for (layout, files, expected) in layouts {
        let sandbox = Sandbox::new(files);
        let plan = json!({"version": 1, "task": TASK, "steps": [
            {"id": "tests", "operation": "run_tests", "params": {}}
        ]});
        let llm = FakeLlm::in_order(vec![chat(&plan.to_string()), chat("Ran the tests.")]);
        let output = sandbox
            .ocflow_llm(&llm.base_url())
            .args(["run", "--no-recovery", "--task-id", "t", TASK])
            .env("OPENAI_API_KEY", "sk-test")
            .output()
            .unwrap();
        let told = commands_told(&last_user_message(&llm.bodies()[0]));
        assert_eq!(
            told.first().map(String::as_str),
            Some(*expected),
            "{layout}"
        );
        let result = sandbox.result("t", "tests");
        assert_eq!(
            result["command"],
            json!(expected),
            "{layout}: the step ran another command than the planner was told first\n{}",
            stderr(&output)
        );
    }
}

/// The project's own environment (issue 40 §4): with pytest installed in its `.venv`, the
/// planner is told `.venv/bin/python -m pytest -q` first, and a `run_tests` step the model left
/// without a command runs exactly that, in a view that shows the `.venv` only to the command.
#[test]
fn the_projects_own_environment_runs_its_tests() {
    const EXPECTED: &str = ".venv/bin/python -m pytest -q";
    let sandbox = Sandbox::new(&[
        ("pyproject.toml", "[tool.pytest.ini_options]\n"),
        ("tests/test_a.py", "def test_a():\n    pass\n"),
        (".venv/lib/python3.12/site-packages/pytest/__init__.py", ""),
        // The project's interpreter: here the system's, as a virtual environment's often is.
        (".venv/bin/python", "#!/bin/sh\nexec python3 \"$@\"\n"),
    ]);
    let python = sandbox.repo.join(".venv/bin/python");
    std::fs::set_permissions(&python, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let plan = json!({"version": 1, "task": TASK, "steps": [
        {"id": "tests", "operation": "run_tests", "params": {}}
    ]});
    let llm = FakeLlm::in_order(vec![chat(&plan.to_string()), chat("Ran the tests.")]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--no-recovery", "--task-id", "t", TASK])
        .output()
        .unwrap();
    let told = commands_told(&last_user_message(&llm.bodies()[0]));
    assert_eq!(told.first().map(String::as_str), Some(EXPECTED), "{told:?}");
    let result = sandbox.result("t", "tests");
    assert_eq!(result["command"], json!(EXPECTED), "{}", stderr(&output));
    assert_eq!(result["tests"]["passed"], json!(1), "{result}");
}
