//! Copied views without namespaces (issue 28 §6): command steps running at once each get a
//! view of their own, views are reused by later steps instead of copied again, and a reused
//! view shows exactly the step's ancestors' changes: none of another branch's leftovers.

use serde_json::{Value, json};

use super::support::*;

fn shell(id: &str, command: &str, deps: &[String]) -> Value {
    json!({"id": id, "operation": "execute_shell_command", "params": {"command": command},
           "depends_on": deps})
}

/// `a` writes a base file; four branches `b{i}` wait for each other (so they run at once),
/// check that no sibling's file is there and leave one of their own; `c{i}` after each sees
/// only its own branch's; `y`, after `a` alone, runs in a view some branch used and sees none
/// of theirs; `d`, after all, sees all of them.
fn flow(marks: &std::path::Path) -> Value {
    let a = vec!["a".to_string()];
    let mut steps = vec![shell("a", "echo base > base.txt", &[])];
    for i in 0..4 {
        let barrier = format!(
            "touch {0}/b{i}; n=0; while [ \"$(ls {0} | wc -l)\" -lt 4 ]; do \
             n=$((n + 1)); [ $n -gt 1200 ] && exit 1; sleep 0.1; done",
            marks.display()
        );
        steps.push(shell(
            &format!("b{i}"),
            &format!(
                "{barrier}; test -z \"$(ls | grep leftover)\" && grep -q base base.txt && \
                 pwd > where{i}.txt && echo {i} > leftover{i}.txt"
            ),
            &a,
        ));
        steps.push(shell(
            &format!("c{i}"),
            &format!(
                "test \"$(ls | grep leftover)\" = leftover{i}.txt && test ! -e where{}.txt \
                 && echo {i} > c{i}.txt",
                (i + 1) % 4
            ),
            &[format!("b{i}")],
        ));
    }
    steps.push(shell(
        "y",
        "test -z \"$(ls | grep -e leftover -e where -e '^c[0-9]')\" && grep -q base base.txt \
         && echo clean > y.txt",
        &a,
    ));
    let all: Vec<String> = (0..4)
        .map(|i| format!("c{i}"))
        .chain(["y".to_string()])
        .collect();
    steps.push(shell(
        "d",
        "ls | grep -e leftover -e '^c[0-9]' -e '^y' > seen.txt",
        &all,
    ));
    Value::Array(steps)
}

#[test]
fn steps_at_once_get_views_of_their_own_and_a_reused_view_shows_only_ancestors_changes() {
    for (name, namespaces_off) in [("namespaces = false", true), ("--no-sandbox", false)] {
        let sandbox = Sandbox::new(&[("keep.txt", "k\n")]);
        if namespaces_off {
            sandbox.configure_sandbox("namespaces = false");
        }
        let marks = sandbox.shared().join("started");
        std::fs::create_dir_all(&marks).unwrap();
        let plan = sandbox.flow(&flow(&marks));
        let mut command = sandbox.ocflow();
        command.args(["run", "--jobs", "4", "--task-id", "t", "--plan"]);
        command.arg(plan);
        if !namespaces_off {
            command.arg("--no-sandbox");
        }
        let output = command.output().unwrap();
        assert_exit(&output, 0);
        let task = sandbox.task_dir("t");
        for step in ["a", "b0", "c0", "y", "d"] {
            assert_eq!(sandbox.result("t", step)["view"], json!("copy"), "{name}");
        }
        // Four branches at once: four views, each a different directory, and no fifth for
        // the eight steps after them.
        let finals = text_tree(&task.join("final_output"));
        let places: std::collections::BTreeSet<&String> =
            (0..4).map(|i| &finals[&format!("where{i}.txt")]).collect();
        assert_eq!(places.len(), 4, "{name}: {places:?}");
        let views = std::fs::read_dir(&task)
            .unwrap()
            .filter(|entry| {
                let name = entry.as_ref().unwrap().file_name();
                name.to_str().unwrap().starts_with("_view")
            })
            .count();
        assert_eq!(views, 4, "{name}");
        assert_eq!(finals["y.txt"], "clean\n", "{name}");
        assert_eq!(
            finals["seen.txt"],
            "c0.txt\nc1.txt\nc2.txt\nc3.txt\nleftover0.txt\nleftover1.txt\nleftover2.txt\n\
             leftover3.txt\ny.txt\n",
            "{name}"
        );
    }
}
