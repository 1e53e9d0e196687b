//! Issue 40 §6: the planner is shown a map of the repository's definitions, the files most
//! related to the task first. The task names no file ("Cart.total() is wrong when a tax rate is
//! set"); the place (`billing/tax.py`, where `with_tax` multiplies instead of adding) is found
//! in the map before the hundreds of unrelated files, and the map stays within its budget.

use serde_json::json;

use super::fake_llm::*;
use super::support::*;

const TASK: &str = "Cart.total() is wrong when a tax rate is set: test_total_with_tax fails. \
                    Find the cause and fix it.";

#[test]
fn the_planner_sees_where_the_tasks_names_are_defined_first() {
    let mut files: Vec<(String, String)> = vec![
        ("billing/__init__.py".into(), String::new()),
        (
            "billing/tax.py".into(),
            "def with_tax(amount, rate):\n    return amount * rate\n".into(),
        ),
        (
            "billing/cart.py".into(),
            "from billing.tax import with_tax\n\n\nclass Cart:\n    def total(self):\n        \
             return with_tax(sum(self.items), self.tax_rate)\n"
                .into(),
        ),
        (
            "tests/test_cart.py".into(),
            "def test_total_with_tax():\n    assert True\n".into(),
        ),
    ];
    // Six hundred files of unrelated code, with their own definitions.
    for n in 0..600 {
        files.push((
            format!("pkg{}/module_{n}.py", n % 20),
            format!(
                "def render_widget_{n}(canvas):\n    return canvas\n\n\n\
                 class Layout{n}:\n    pass\n"
            ),
        ));
    }
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let sandbox = Sandbox::new(&borrowed);
    let plan = json!({"version": 1, "task": TASK, "steps": [
        {"id": "fix", "operation": "modify_code", "params": {"file_path": "billing/tax.py",
         "instructions": "return the amount plus its tax"}}
    ]});
    let llm = FakeLlm::in_order(vec![chat(&plan.to_string())]);
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["plan", "--task-id", "t", TASK])
        .env("OPENAI_API_KEY", "sk-test")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let prompt = last_user_message(&llm.bodies()[0]);
    let (_, map) = prompt
        .split_once("Definitions in the repository")
        .unwrap_or_else(|| panic!("no map in the prompt:\n{prompt}"));
    let map = map.split("\n\n").next().unwrap();
    let place = |needle: &str| {
        map.find(needle)
            .unwrap_or_else(|| panic!("{needle} is not in the map:\n{map}"))
    };
    // The files holding the task's names come before any unrelated one.
    let first_unrelated = map.find("pkg").unwrap_or(map.len());
    for related in [
        "billing/tax.py:\n  def with_tax(amount, rate)",
        "billing/cart.py:",
        "tests/test_cart.py:",
    ] {
        assert!(
            place(related) < first_unrelated,
            "{related} after others:\n{map}"
        );
    }
    // Within its budget (4,000 characters), cut at a file's end or marked as cut.
    assert!(map.len() <= 4100, "{} characters", map.len());
    assert!(
        map.contains("render_widget_"),
        "the rest follows while it fits"
    );
}
