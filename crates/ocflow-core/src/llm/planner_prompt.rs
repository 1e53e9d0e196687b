//! The planner's first prompt, laid out for a server's prefix cache. vLLM's and llama.cpp's
//! caches reuse only an identical prefix of the serialised messages, so the prompt goes from
//! what never changes to what changes with every task: the system text and its example
//! (`prompts/plan_system.md`), the operations and roles, the answer's form, then the
//! repository's facts (its files, how it runs its tests), then what the failure memory recalls
//! for this task, the files the task names and the task itself, last (`prompts/plan_user.md`).
//! The repository's own instructions for agents go in the system message, after its fixed
//! text (`Planner::conventions`). Two tasks on one
//! repository share most of the prompt (`scripts/bench-prompts` measures how much).

use std::fs;
use std::path::Path;

use crate::flow::operations;
use crate::flow::roles::Roles;
use crate::flow::test_command::{self, TestCommand};
use ocflow_model::prompt_template;
use ocflow_model::repo_path::RepoPath;

const USER: &str = include_str!("../../../../prompts/plan_user.md");

/// Files listed in the prompt at most.
const MAX_LISTED_FILES: usize = 300;
/// The characters the map of the repository's definitions may take in the first prompt: about
/// 1,100 tokens (3.5 characters a token), a seventh of a small model's 8,192 (BENCHMARKS.md,
/// "The planner's map").
pub const MAP_BUDGET: usize = 4000;
/// How much of each file the task names is shown.
const MAX_NAMED_FILE_BYTES: usize = 12 * 1024;

/// What the first prompt is made of, beyond the registry's operations.
pub(crate) struct PromptParts<'a> {
    pub task: &'a str,
    pub repo: &'a Path,
    pub files: &'a [RepoPath],
    /// The files the task names, whose content is shown just before the task.
    pub named: &'a [RepoPath],
    pub test_commands: &'a [TestCommand],
    /// The map of the repository's definitions, the files most related to the task first
    /// (`open_codex_lib/repo_map.py`), or empty.
    pub repo_map: &'a str,
    /// The failure memory's section for this task (`planner::past_experience`), or empty.
    pub past_experience: &'a str,
    pub roles: &'a Roles,
}

/// The planner's first user message, fixed text first and the task last.
pub(crate) fn first_prompt(parts: &PromptParts) -> String {
    let operations = operations::prompt_catalogue();
    let roles = parts.roles.catalogue();
    prompt_template::fill_with(
        USER.trim(),
        &[
            ("operations", operations.trim_end()),
            ("roles", roles.trim_end()),
            ("files", &listed_files(parts.files)),
            (
                "test_commands",
                &test_command::for_planner(parts.test_commands),
            ),
            ("repo_map", &map_section(parts.repo_map)),
            ("past_experience", parts.past_experience),
            ("named_files", &named_contents(parts.repo, parts.named)),
            ("task", parts.task),
        ],
    )
}

/// The map's section of the prompt, after a blank line; nothing without a map.
fn map_section(map: &str) -> String {
    if map.trim().is_empty() {
        return String::new();
    }
    format!(
        "\nDefinitions in the repository (the files most related to the task first; a \
         `read_file` step shows a whole file):\n{}\n",
        map.trim_end()
    )
}

fn listed_files(files: &[RepoPath]) -> String {
    if files.is_empty() {
        return "(the repository is empty)".to_string();
    }
    let mut text: Vec<String> = files
        .iter()
        .take(MAX_LISTED_FILES)
        .map(|f| format!("- {f}"))
        .collect();
    if files.len() > MAX_LISTED_FILES {
        text.push(format!(
            "- … and {} more files",
            files.len() - MAX_LISTED_FILES
        ));
    }
    text.join("\n")
}

fn named_contents(repo: &Path, named: &[RepoPath]) -> String {
    named
        .iter()
        .filter_map(|path| {
            let bytes = fs::read(path.under(repo)).ok()?;
            let text = String::from_utf8(bytes).ok()?;
            let shown: String = text.chars().take(MAX_NAMED_FILE_BYTES).collect();
            let cut = if shown.len() < text.len() {
                "\n[… the rest is not shown]"
            } else {
                ""
            };
            Some(format!("\nContent of {path}:\n```\n{shown}{cut}\n```\n"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts<'a>(
        task: &'a str,
        files: &'a [RepoPath],
        past_experience: &'a str,
        roles: &'a Roles,
    ) -> PromptParts<'a> {
        PromptParts {
            task,
            repo: Path::new("/nonexistent"),
            files,
            named: &[],
            test_commands: &[],
            repo_map: "",
            past_experience,
            roles,
        }
    }

    #[test]
    fn fixed_text_comes_first_then_the_repositorys_facts_then_the_task() {
        let files = [RepoPath::parse("src/lib.rs").unwrap()];
        let memory = "--- Past experience on this repository ---\nRun `make check` first.\n\n";
        let roles = Roles::default();
        let prompt = first_prompt(&parts("Rename {{files}} in lib.rs", &files, memory, &roles));
        let at = |text: &str| {
            prompt
                .find(text)
                .unwrap_or_else(|| panic!("{text}: {prompt}"))
        };
        assert!(at("`modify_code`") < at("Roles ("));
        assert!(at("Roles (") < at("- src/lib.rs"));
        assert!(at("- src/lib.rs") < at("Past experience on this repository"));
        assert!(at("Run `make check`") < at("Task: "));
        // The user's words are not a template.
        assert!(
            prompt.ends_with("Task: Rename {{files}} in lib.rs"),
            "{prompt}"
        );
    }

    #[test]
    fn two_tasks_differ_only_after_the_repositorys_facts() {
        let files = [RepoPath::parse("a.py").unwrap()];
        let roles = Roles::default();
        let one = first_prompt(&parts("Fix a.py", &files, "", &roles));
        let two = first_prompt(&parts("Document a.py", &files, "", &roles));
        let common = one
            .chars()
            .zip(two.chars())
            .take_while(|(a, b)| a == b)
            .count();
        assert_eq!(&one[..common], one.trim_end_matches("Fix a.py"));
    }
}
