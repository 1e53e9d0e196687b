//! How a repository runs its tests, as the planner is told it: the library's guess
//! (`find_test_commands` in `open_codex_lib/testing_commands.py`, read from `package.json`'s
//! `test` script, `go.mod`, `pom.xml`, `build.gradle`, `Cargo.toml`, pytest's configuration, a
//! `Makefile`'s `test` target), asked through the bridge (`Bridge::test_commands`). A
//! `run_tests` step without a command runs the first of the same list, so the planner and the
//! step never disagree.

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
}
