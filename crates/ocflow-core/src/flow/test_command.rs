//! How a repository runs its tests, as the planner is told it: the library's guess
//! (`find_test_commands` in `open_codex_lib/testing_commands.py`, read from `package.json`'s
//! `test` script, `go.mod`, `pom.xml`, `build.gradle`, `Cargo.toml`, pytest's configuration, a
//! `Makefile`'s `test` target), asked through the bridge (`Bridge::test_commands`). A
//! `run_tests` step without a command runs the first of the same list, so the planner and the
//! step never disagree. And the command a task itself names to run its tests with, which a
//! planned flow must then pass at its end (`named_in_task`).

use serde::Deserialize;

/// One way the repository runs its tests: the command, and where it was found.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TestCommand {
    /// The shell command (`npm test`).
    pub(crate) command: String,
    /// Where it was read, for the planner and people (`package.json's test script: tape …`).
    pub(crate) found_in: String,
}

/// The commands as the planner's prompt gives them (empty when none was found). The first is
/// what `run_tests` runs when a step gives no command.
pub(crate) fn for_planner(commands: &[TestCommand]) -> String {
    if commands.is_empty() {
        return String::new();
    }
    let listed: Vec<String> = commands
        .iter()
        .map(|c| format!("- `{}` ({})", c.command, c.found_in))
        .collect();
    format!(
        "\nHow this repository runs its tests (give run_tests this command; a run_tests step \
         without one runs the first):\n{}\n",
        listed.join("\n")
    )
}

/// Programs a command named in a task may start with.
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

/// Where a task says what command follows, when it does not quote it.
const MARKERS: &[&str] = &[
    "tests with:",
    "tests with",
    "test with:",
    "run:",
    "by running",
    "using:",
];

/// The command the task says to run its tests with, if it names one: quoted (`` `npm test` ``)
/// or after "tests with:", "run:" …, up to the end of the command — the end of its sentence,
/// never the next one ("… -t . Do not edit anything under tests/").
pub(crate) fn named_in_task(task: &str) -> Option<String> {
    let prose = without_fenced_blocks(task);
    let task = prose.as_str();
    // Inline code only: a span across lines is no command the task names.
    let quoted = task
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| !span.contains('\n'))
        .map(str::trim)
        .find(|span| starts_with_runner(span));
    if let Some(command) = quoted {
        return Some(command.to_string());
    }
    let lower = task.to_lowercase();
    MARKERS.iter().find_map(|marker| {
        let at = lower.find(marker)?;
        let rest = task.get(at + marker.len()..)?;
        let command = up_to_its_end(rest.lines().next().unwrap_or(""));
        starts_with_runner(&command).then_some(command)
    })
}

/// `text` without its fenced code blocks (```` ``` ```` or `~~~` fences, CommonMark's): code a
/// task shows (Exercism's instructions show ```` ```python ```` examples) is no command it names
/// to run its tests with; an unclosed fence runs to the end.
fn without_fenced_blocks(text: &str) -> String {
    let mut kept = Vec::new();
    let mut fence: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|c| *c == '`' || *c == '~')
            .collect();
        let opens = marker.len() >= 3
            && marker
                .chars()
                .all(|c| c == marker.chars().next().unwrap_or('`'));
        match &fence {
            Some(open)
                if opens
                    && marker.starts_with(open.as_str())
                    && trimmed[marker.len()..].trim().is_empty() =>
            {
                fence = None
            }
            Some(_) => {}
            None if opens => fence = Some(marker),
            None => kept.push(line),
        }
    }
    kept.join("\n")
}

/// The words of `line` that belong to the command: up to a word that ends its sentence (a full
/// stop, `;` or `,` on a word: `tests.`), or before a capitalised word that starts the next one
/// after a bare `.` (which is the command's own argument: `-t . Do not …`).
fn up_to_its_end(line: &str) -> String {
    let mut words: Vec<&str> = Vec::new();
    for word in line.split_whitespace() {
        let after_bare_dot = words.last() == Some(&".");
        if after_bare_dot && word.chars().next().is_some_and(char::is_uppercase) {
            break;
        }
        let ends = word.len() > 1 && word.ends_with(['.', ';', ',']);
        if ends {
            words.push(&word[..word.len() - 1]);
            break;
        }
        words.push(word);
    }
    words.join(" ")
}

/// The command that runs one test file a task names, where its runner takes a file: pytest
/// for Python (it runs unittest's tests too), `go test` for a Go package's tests.
pub(crate) fn for_test_file(path: &str) -> Option<String> {
    if path.ends_with(".py") {
        return Some(format!("python3 -m pytest -q {path}"));
    }
    if path.ends_with("_test.go") {
        let dir = path.rsplit_once('/').map_or(".", |(dir, _)| dir);
        return Some(format!("go test ./{}", dir.trim_start_matches("./")).replace("././", "./"));
    }
    None
}

fn starts_with_runner(text: &str) -> bool {
    text.split_whitespace()
        .next()
        .is_some_and(|word| RUNNERS.contains(&word))
}

/// Whether a path is a test by the test runners' own naming (`tests/…`, `test_x.py`,
/// `x_test.go`, `x.test.js`, `x.spec.ts`, `x_spec.rb`).
pub(crate) fn is_test_file(path: &str) -> bool {
    let mut parts = path.split('/').rev();
    let name = parts.next().unwrap_or(path).to_ascii_lowercase();
    let in_test_dir =
        parts.any(|dir| matches!(dir, "test" | "tests" | "__tests__" | "spec" | "specs"));
    let stem = name.split('.').next().unwrap_or(&name);
    in_test_dir
        || stem.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_spec")
        || name.contains(".test.")
        || name.contains(".spec.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_planner_is_given_every_command_with_where_it_was_found() {
        let commands = [
            TestCommand {
                command: "npm test".into(),
                found_in: "package.json's test script: node --test".into(),
            },
            TestCommand {
                command: "python3 -m pytest -q".into(),
                found_in: "pytest.ini".into(),
            },
        ];
        let listed = for_planner(&commands);
        assert!(
            listed.contains(
                "- `npm test` (package.json's test script: node --test)\n\
                 - `python3 -m pytest -q` (pytest.ini)"
            ),
            "{listed}"
        );
        assert_eq!(for_planner(&[]), "");
    }

    #[test]
    fn the_command_a_task_names_ends_where_the_command_does() {
        let cases = [
            (
                "Fix moving_average. Then run the tests with: python3 -m unittest discover -s \
                 tests -t .",
                Some("python3 -m unittest discover -s tests -t ."),
            ),
            // A real 0.5B run: the next sentence is no part of the command.
            (
                "Fix it; run the tests with: python3 -m unittest discover -s tests -t . Do not \
                 edit anything under tests/",
                Some("python3 -m unittest discover -s tests -t ."),
            ),
            ("Fix it, then run `npm test` to check", Some("npm test")),
            (
                "Check the build by running make check. Then stop.",
                Some("make check"),
            ),
            (
                "run: pytest -q tests/test_cart.py, and fix what fails",
                Some("pytest -q tests/test_cart.py"),
            ),
            ("fix the tests with care.", None),
            // Exercism's hamming instructions (exercism/python): an example in a fenced block,
            // its info string `python` no runner named by the task.
            (
                "To raise a `ValueError` with a message, write the message as an argument to the \
                 `exception` type:\n\n```python\n# When the sequences being passed are not the \
                 same length.\nraise ValueError(\"Strands must be of equal length.\")\n```\n\n\
                 Use the above instructions to modify the supplied files: hamming.py.",
                None,
            ),
            (
                "~~~~exercism/note\nRun `python3 -m pytest -q` first.\n~~~~\nFix it.",
                None,
            ),
            (
                "```sh\npytest -q\n```\nFix it, then run `npm test` to check",
                Some("npm test"),
            ),
            // A span across lines is no inline code.
            ("see `python\nfoo` and fix it", None),
        ];
        for (task, want) in cases {
            assert_eq!(named_in_task(task).as_deref(), want, "{task}");
        }
    }
}
