//! Why a step failed, in its own output: the failing tests the runner's output named and the
//! last lines the command printed (or of the step's log). Recovery shows the model all of it;
//! people get its first line of evidence under the step at the end of the run, in
//! `summary.md` and in the report. One reading for both, so both see the same cause.

use std::fs;
use std::path::Path;

use crate::task::state;
use crate::task::workspace::{self, TaskDir};
use ocflow_model::step_result::StepResult;

/// How much of an output is kept: its last lines, then its last bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tail {
    pub(crate) lines: usize,
    pub(crate) bytes: usize,
}

/// What the model is shown: enough to find the cause in a long log.
pub(crate) const FOR_THE_MODEL: Tail = Tail {
    lines: 60,
    bytes: 6000,
};
/// What a person is shown under the step: the last lines, where a command says why it
/// stopped (`npm error code EAI_AGAIN`).
pub(crate) const FOR_PEOPLE: Tail = Tail {
    lines: 6,
    bytes: 1000,
};

/// A failed step's evidence.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Evidence {
    /// `name — kind: message`, one per failing test the runner's output named, in its order.
    pub(crate) test_failures: Vec<String>,
    /// The tails of the command's `stdout` and `stderr`, each that is not blank, in that order.
    pub(crate) outputs: Vec<(&'static str, String)>,
    /// The tail of the step's log, when the result holds no output.
    pub(crate) log: Option<String>,
}

impl Evidence {
    /// The failing tests as a model is shown them: the first that fit in `size.bytes`
    /// together (and `size.lines` of them), each bounded to a quarter of the bytes, then how
    /// many more there are. A runner's 36 long list diffs must not fill the model's context
    /// (poker's recovery question overflowed it); the first failures say enough to start from.
    pub(crate) fn failures_within(&self, size: Tail) -> Vec<String> {
        let each = Tail {
            lines: size.lines.min(12),
            bytes: size.bytes / 4,
        };
        let mut shown: Vec<String> = Vec::new();
        let mut bytes = 0;
        for line in &self.test_failures {
            let line = bounded(line, each);
            if !shown.is_empty() && (bytes + line.len() > size.bytes || shown.len() == size.lines) {
                break;
            }
            bytes += line.len();
            shown.push(line);
        }
        let more = self.test_failures.len() - shown.len();
        if more > 0 {
            shown.push(format!("… and {more} more failing tests"));
        }
        shown
    }

    /// The cause for people: the first failing test, else stderr's last lines, else stdout's;
    /// `None` when the step printed nothing (its error message is then all there is).
    pub(crate) fn cause(&self) -> Option<Cause> {
        if let Some(first) = self.test_failures.first() {
            return Some(Cause {
                source: "its first failing test",
                text: bounded(first, FOR_PEOPLE),
            });
        }
        [
            ("stderr", "the end of its stderr"),
            ("stdout", "the end of its output"),
        ]
        .into_iter()
        .find_map(|(field, source)| {
            let (_, text) = self.outputs.iter().find(|(name, _)| *name == field)?;
            Some(Cause {
                source,
                text: tail(text, FOR_PEOPLE),
            })
        })
    }
}

/// A failed step's cause as people are shown it. The text is the command's own: untrusted,
/// it is made printable or escaped wherever it is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// Where the text comes from (`the end of its stderr`).
    pub source: &'static str,
    /// A few lines.
    pub text: String,
}

/// `text` with every path into the task's views written as the repository's own: a runner
/// prints `/home/me/repo/.ocflow/fix-k7m/_layers/view/test/parse.js:26:12` (or the same from
/// the repository's root, or the view itself), where the person and the model know
/// `test/parse.js:26:12`. A view is `_view`, `_view-N`, `_layers/view` or `_layers-N/view` in
/// the task's directory (named `task_id`).
pub(crate) fn as_repository_paths(text: &str, task_id: &str) -> String {
    if task_id.is_empty() || !text.contains(task_id) {
        return text.to_string();
    }
    let pattern = format!(
        r#"[^\s:'"`(\[=]*/{}/(?:_view(?:-[0-9]+)?|_layers(?:-[0-9]+)?/view)/"#,
        regex::escape(task_id)
    );
    match regex::Regex::new(&pattern) {
        Ok(prefix) => prefix.replace_all(text, "").into_owned(),
        Err(_) => text.to_string(),
    }
}

/// A step's evidence from its result (`result.json`'s tests and outputs) and its log, every
/// path into the task's views written as the repository's (`as_repository_paths`).
pub(crate) fn evidence(result: Option<&StepResult>, step_dir: &Path, size: Tail) -> Evidence {
    let task_id = step_dir
        .parent()
        .and_then(Path::file_name)
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ours = |text: &str| as_repository_paths(text, &task_id);
    let test_failures = result
        .and_then(|r| r.tests.as_ref())
        .map(|tests| {
            tests
                .failures
                .iter()
                .map(|f| {
                    let or_unknown = |text: &Option<String>| text.clone().unwrap_or("?".into());
                    let name = if f.name.is_empty() {
                        "?"
                    } else {
                        f.name.as_str()
                    };
                    let (kind, message) = (or_unknown(&f.error_type), or_unknown(&f.message));
                    ours(&format!("{name} — {kind}: {message}"))
                })
                .collect()
        })
        .unwrap_or_default();
    let outputs: Vec<(&'static str, String)> = ["stdout", "stderr"]
        .into_iter()
        .filter_map(|field| {
            let text = result.and_then(|r| r.text(field))?;
            (!text.trim().is_empty()).then(|| (field, tail(&ours(text), size)))
        })
        .collect();
    let log = outputs
        .is_empty()
        .then(|| {
            let log = fs::read_to_string(step_dir.join(workspace::STEP_LOG_FILE)).ok()?;
            (!log.trim().is_empty()).then(|| tail(&ours(&log), size))
        })
        .flatten();
    Evidence {
        test_failures,
        outputs,
        log,
    }
}

/// The cause of a failed step, for people, read from its task directory; `None` when its
/// result holds neither failing tests nor output.
pub fn for_people(task: &TaskDir, step: &str) -> Option<Cause> {
    let result = state::load_result(task, step).ok().flatten()?;
    evidence(Some(&result), &task.step_dir(step), FOR_PEOPLE).cause()
}

/// The last lines of a text, bounded in bytes.
fn tail(text: &str, size: Tail) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let kept = lines[lines.len().saturating_sub(size.lines)..].join("\n");
    bounded_from_the_end(kept, size.bytes)
}

/// The first lines of a text (a test's message), bounded in bytes.
fn bounded(text: &str, size: Tail) -> String {
    let mut kept = text.lines().take(size.lines).collect::<Vec<_>>().join("\n");
    if kept.len() > size.bytes {
        let end = (0..=size.bytes)
            .rev()
            .find(|i| kept.is_char_boundary(*i))
            .unwrap_or(0);
        kept.truncate(end);
        kept.push_str("[…]");
    }
    kept
}

fn bounded_from_the_end(text: String, bytes: usize) -> String {
    if text.len() <= bytes {
        return text;
    }
    let cut = text.len() - bytes;
    let start = (cut..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    format!("[…]{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_is_the_first_failing_test_then_stderr_then_stdout() {
        let outputs = vec![
            ("stdout", "ran 3".to_string()),
            ("stderr", "npm error code EAI_AGAIN".to_string()),
        ];
        let mut evidence = Evidence {
            test_failures: vec!["t::a — ValueError: x".into(), "t::b — ?: ?".into()],
            outputs,
            log: None,
        };
        let cause = |evidence: &Evidence| evidence.cause().map(|c| (c.source, c.text));
        assert_eq!(
            cause(&evidence),
            Some(("its first failing test", "t::a — ValueError: x".into()))
        );
        evidence.test_failures.clear();
        assert_eq!(
            cause(&evidence),
            Some(("the end of its stderr", "npm error code EAI_AGAIN".into()))
        );
        evidence.outputs.remove(1);
        assert_eq!(
            cause(&evidence),
            Some(("the end of its output", "ran 3".into()))
        );
        evidence.outputs.clear();
        assert_eq!(evidence.cause(), None);
    }

    #[test]
    fn paths_into_the_views_are_written_as_the_repositorys() {
        let said = "not ok 3 at Test.<anonymous> (/home/me/repo/.ocflow/fix-k7m/_layers/view/\
                    test/parse.js:26:12)\n  at .ocflow/fix-k7m/_view-2/lib/a.js:3:1\n\
                    File \"/tmp/ws/fix-k7m/_view/tests/test_cart.py\", line 9\n\
                    E   assert total == 12 (see /home/me/repo/tests/test_cart.py)";
        assert_eq!(
            as_repository_paths(said, "fix-k7m"),
            "not ok 3 at Test.<anonymous> (test/parse.js:26:12)\n  at lib/a.js:3:1\n\
             File \"tests/test_cart.py\", line 9\n\
             E   assert total == 12 (see /home/me/repo/tests/test_cart.py)"
        );
        // Another task's views, and text naming no view, are left as they are.
        let other = "/r/.ocflow/other/_view/a.py:1";
        assert_eq!(as_repository_paths(other, "fix-k7m"), other);
    }

    #[test]
    fn many_long_failures_are_shown_within_the_bytes_of_a_tail() {
        // A poker exercise's 36 failing tests, each with a list diff: 12.8 KB of messages
        // made a recovery prompt of 10,790 tokens against a context of 8,192.
        let message = "Lists differ: ['3S 4D 2S 6D 5C', '4S 5H 4C 8D 4H'] != ['3S 4D 2S 6D 5C']\n\
                       First list contains 1 additional elements.\n"
            .repeat(20);
        let failures: Vec<serde_json::Value> = (1..=36)
            .map(|n| {
                serde_json::json!({"name": format!("poker_test.py::PokerTest::test_{n}"),
                    "error_type": "AssertionError", "message": message})
            })
            .collect();
        let result: StepResult = serde_json::from_value(serde_json::json!({
            "status": "failure", "tests": {"failures": failures}
        }))
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        for size in [FOR_THE_MODEL, FOR_PEOPLE] {
            let found = evidence(Some(&result), &dir.path().join("check"), size);
            // All are kept (the failure memory names them); what is shown is bounded.
            assert_eq!(found.test_failures.len(), 36);
            let shown = found.failures_within(size);
            let bytes: usize = shown.iter().map(String::len).sum();
            assert!(
                bytes <= size.bytes + 200,
                "{bytes} bytes shown for {size:?}"
            );
            // The first failures are shown, and how many more there are is said.
            assert!(shown[0].starts_with("poker_test.py::PokerTest::test_1 — AssertionError"));
            let last = shown.last().unwrap();
            let more = 36 - (shown.len() - 1);
            assert_eq!(
                last,
                &format!("… and {more} more failing tests"),
                "{shown:?}"
            );
        }
    }

    #[test]
    fn a_tail_keeps_the_last_lines_within_its_bytes() {
        let text: String = (1..=10).map(|n| format!("line {n}\n")).collect();
        assert_eq!(
            tail(&text, FOR_PEOPLE),
            "line 5\nline 6\nline 7\nline 8\nline 9\nline 10"
        );
        let long = "é".repeat(800);
        let kept = tail(&long, FOR_PEOPLE);
        assert!(kept.starts_with("[…]") && kept.len() <= FOR_PEOPLE.bytes + "[…]".len());
        let message = bounded(&long, FOR_PEOPLE);
        assert!(message.ends_with("[…]") && message.len() <= FOR_PEOPLE.bytes + "[…]".len());
    }
}
