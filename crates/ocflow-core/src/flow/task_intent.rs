//! What a task asks for, read from its words: a change (any imperative that is not "explain",
//! "read", "list" …), or only an answer; a test command it names; or something outside what
//! ocflow does (sending email, reaching a person). The planner holds a plan to it, and a flow
//! that did nothing for a task that asked for a change does not end `succeeded`.

use crate::flow::operations;
use ocflow_model::flow::Flow;

/// Verbs that ask only for an answer, not a change.
const READ_ONLY: &[&str] = &[
    "explain",
    "read",
    "show",
    "list",
    "summarise",
    "summarize",
    "describe",
    "analyse",
    "analyze",
    "review",
    "find",
    "tell",
    "inspect",
    "look",
    "audit",
    "count",
    "compare",
    "what",
    "why",
    "how",
    "where",
    "which",
    "who",
    "is",
    "are",
    "does",
    "do",
    "can",
];

/// Words a task may begin a clause with before its verb.
const POLITE: &[&str] = &["please", "now", "then", "also", "and", "first", "finally"];

/// Verbs of reaching people, which no operation does.
const REACHING_PEOPLE: &[&str] = &[
    "email", "e-mail", "mail", "text", "phone", "call", "tweet", "sms", "fax", "ping", "notify",
];

/// Programs a named test command may start with.
const RUNNERS: &[&str] = &[
    "pytest",
    "python",
    "python3",
    "npm",
    "npx",
    "yarn",
    "pnpm",
    "go",
    "cargo",
    "make",
    "mvn",
    "./mvnw",
    "gradle",
    "./gradlew",
    "node",
    "tox",
    "nox",
    "uv",
    "poetry",
    "bundle",
    "rake",
    "rspec",
    "dotnet",
    "ctest",
    "bash",
    "sh",
    "deno",
    "bun",
    "jest",
    "vitest",
    "tape",
    "phpunit",
    "mix",
    "swift",
    "julia",
    "ruby",
    "perl",
    "prove",
];

/// Whether the task asks for a change (a file written or a command run), not only an answer.
pub(crate) fn asks_for_change(task: &str) -> bool {
    let trimmed = task.trim();
    if trimmed.is_empty() {
        return false;
    }
    let verbs: Vec<String> = clauses(trimmed).filter_map(|c| first_verb(&c)).collect();
    let Some(first) = verbs.first() else {
        return true;
    };
    if READ_ONLY.contains(&first.as_str()) || trimmed.ends_with('?') {
        // "Read utils.py and fix the bug": a later clause may still ask for a change.
        return verbs
            .iter()
            .skip(1)
            .any(|verb| !READ_ONLY.contains(&verb.as_str()));
    }
    true
}

/// Why the task is outside what ocflow does, when it asks to reach a person: sending email,
/// a message or a call, or confirming that someone received something.
pub fn outside_scope(task: &str) -> Option<String> {
    let lower = task.to_lowercase();
    let reaching = clauses(&lower)
        .filter_map(|c| first_verb(&c))
        .find(|verb| REACHING_PEOPLE.contains(&verb.as_str()));
    let sends_to_address = lower.contains("send ")
        && lower.split_whitespace().any(|word| {
            let word = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '@' && c != '.');
            word.contains('@') && word.rsplit('@').next().is_some_and(|d| d.contains('.'))
        });
    let confirms_receipt = ["received it", "receives it", "got it", "read it"]
        .iter()
        .any(|phrase| lower.contains(phrase))
        && ["confirm", "make sure", "check", "verify"]
            .iter()
            .any(|word| lower.contains(word));
    let what = match (reaching, sends_to_address, confirms_receipt) {
        (Some(verb), _, _) => format!("to {verb} someone"),
        (None, true, _) => "to send something to an address".to_string(),
        (None, false, true) => "to confirm that someone received something".to_string(),
        (None, false, false) => return None,
    };
    Some(format!(
        "the task asks {what}, which is outside what ocflow does: it changes files and runs \
         commands in the repository, and cannot send messages or reach a person. Ask for the \
         change to the repository instead (for example a script that sends it)"
    ))
}

/// The command the task says to run its tests with, if it names one ("run the tests with:
/// python3 -m unittest discover -s tests -t .", "run `npm test`").
pub(crate) fn named_test_command(task: &str) -> Option<String> {
    let quoted = task
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::trim)
        .find(|span| starts_with_runner(span));
    if let Some(command) = quoted {
        return Some(command.to_string());
    }
    let lower = task.to_lowercase();
    for marker in [
        "tests with:",
        "tests with",
        "test with:",
        "run:",
        "by running",
        "using:",
    ] {
        if let Some(at) = lower.find(marker) {
            let rest = &task[at + marker.len()..];
            let line = rest.lines().next().unwrap_or("").trim();
            // A full stop after a word ends the sentence; " ." is the command's own argument.
            let command = match line.strip_suffix('.') {
                Some(stripped) if !stripped.ends_with(' ') => stripped,
                _ => line,
            };
            if starts_with_runner(command) {
                return Some(command.trim().to_string());
            }
        }
    }
    None
}

/// Why `flow` cannot do `task`: it only reads where the task asks for a change, or never runs
/// the test command the task names.
pub(crate) fn plan_misses_task(flow: &Flow, task: &str) -> Option<String> {
    if asks_for_change(task) {
        let acts = flow.steps.iter().any(|step| {
            operations::find(&step.operation)
                .is_some_and(|op| op.runs_commands || !op.writes.is_empty())
        });
        if !acts {
            return Some(
                "the plan only reads files; nothing in it makes the change the task asks for: \
                 add the steps that change the files (modify_code, write_file …) and run what \
                 the task says to run"
                    .into(),
            );
        }
    }
    if let Some(command) = named_test_command(task) {
        let wanted = normalize(&command);
        let runs = flow.steps.iter().any(|step| {
            step.params
                .get("command")
                .and_then(serde_json::Value::as_str)
                .map(normalize)
                .is_some_and(|given| given.contains(&wanted) || wanted.contains(&given))
        });
        if !runs {
            return Some(format!(
                "the task says to run `{command}`, and no step runs it: add a run_tests step \
                 with \"command\": \"{command}\" after the change"
            ));
        }
    }
    None
}

fn starts_with_runner(text: &str) -> bool {
    text.split_whitespace()
        .next()
        .is_some_and(|word| RUNNERS.contains(&word))
}

/// A command with its spaces collapsed and `python3` read as `python`.
fn normalize(command: &str) -> String {
    command
        .split_whitespace()
        .map(|word| if word == "python3" { "python" } else { word })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The task's clauses: its sentences (a full stop inside `mathx.py` ends none), and the parts
/// joined by "then" or "and".
fn clauses(task: &str) -> impl Iterator<Item = String> + '_ {
    let mut sentences = Vec::new();
    let mut current = String::new();
    let mut chars = task.chars().peekable();
    while let Some(c) = chars.next() {
        let ends = matches!(c, '.' | ';' | '!' | '?' | ':' | '\n')
            && chars.peek().is_none_or(|next| next.is_whitespace());
        if ends {
            sentences.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    sentences.push(current);
    sentences
        .into_iter()
        .flat_map(|sentence| {
            sentence
                .split(" then ")
                .flat_map(|part| part.split(" and "))
                .map(|part| part.trim().to_string())
                .collect::<Vec<_>>()
        })
        .filter(|part| !part.is_empty())
}

/// The clause's first word that is not a politeness, lowercased.
fn first_verb(clause: &str) -> Option<String> {
    clause
        .split_whitespace()
        .map(|word| {
            word.trim_matches(|c: char| !c.is_alphanumeric() && c != '-')
                .to_lowercase()
        })
        .find(|word| !word.is_empty() && !POLITE.contains(&word.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIX: &str = "Fix moving_average in mathx.py: it drops the last window, e.g. \
                       moving_average([1, 2, 3, 4], 2) must be [1.5, 2.5, 3.5]. Then run the \
                       tests with: python3 -m unittest discover -s tests -t .";

    #[test]
    fn a_change_is_told_from_a_question() {
        for task in [
            FIX,
            "add input validation to api.py",
            "Read utils.py and fix the bug",
        ] {
            assert!(asks_for_change(task), "{task}");
        }
        for task in [
            "Explain what utils.py does",
            "summarise the README",
            "list the functions in app.py",
            "What does parse() return?",
        ] {
            assert!(!asks_for_change(task), "{task}");
        }
    }

    #[test]
    fn the_test_command_a_task_names_is_found() {
        assert_eq!(
            named_test_command(FIX).as_deref(),
            Some("python3 -m unittest discover -s tests -t .")
        );
        assert_eq!(
            named_test_command("fix it, then run `npm test` to check").as_deref(),
            Some("npm test")
        );
        assert_eq!(named_test_command("fix the tests with care."), None);
    }

    #[test]
    fn reaching_a_person_is_outside_what_ocflow_does() {
        let task = "Email report.csv to alice@example.com and confirm that she received it.";
        assert!(outside_scope(task).is_some_and(|why| why.contains("outside what ocflow does")));
        for task in [
            FIX,
            "Add a function that emails the report to the admin",
            "Send a Slack message from the CI script when the build fails",
        ] {
            assert_eq!(outside_scope(task), None, "{task}");
        }
    }
}
