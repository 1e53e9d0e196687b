//! The files a task names. Those the repository has, by path or by a file name only one file
//! has (`named`): the planner shows them and checks that a plan touches one. And those it
//! lacks (`missing`), which a task names only to have them made: a plan that writes, instead, a
//! new file of a name like one of them renamed what the task asked for (`renamed`), and is asked
//! again. Mechanical evidence from the task's own words, never a judgement of what it asks.

use std::collections::HashSet;

use ocflow_model::flow::Flow;
use ocflow_model::repo_path::RepoPath;

use crate::flow::deliverables;

/// At most this many named files are shown to the planner.
pub const MAX_NAMED_FILES: usize = 3;

/// The path-like words of a task, each with whether a `(` follows it (a call, `res.json()`,
/// not a file). Words end at white space and at quotes, brackets, commas and semicolons; a
/// sentence's full stop or colon is not part of them.
fn words(task: &str) -> impl Iterator<Item = (&str, bool)> {
    let split = |c: char| c.is_whitespace() || ",;`\"'()<>[]{}".contains(c);
    let mut at = 0;
    std::iter::from_fn(move || {
        let rest = &task[at..];
        let start = rest.find(|c: char| !split(c))?;
        let len = rest[start..].find(split).unwrap_or(rest.len() - start);
        let raw = &rest[start..start + len];
        at += start + len;
        let called = task[at..].starts_with('(');
        Some((raw.trim_end_matches(['.', ':', '!', '?']), called))
    })
}

/// Files the task mentions that the repository has, by path or by unique file name.
pub fn named(task: &str, files: &[RepoPath]) -> Vec<RepoPath> {
    let mut named = Vec::new();
    for (word, _) in words(task) {
        if !word.contains('.') || word.is_empty() {
            continue;
        }
        let exact = files.iter().find(|f| f.as_str() == word);
        let by_name: Vec<&RepoPath> = files
            .iter()
            .filter(|f| f.as_str().rsplit('/').next() == Some(word))
            .collect();
        let found = exact.or(if by_name.len() == 1 {
            by_name.first().copied()
        } else {
            None
        });
        if let Some(path) = found
            && !named.contains(path)
        {
            named.push(path.clone());
        }
        if named.len() == MAX_NAMED_FILES {
            break;
        }
    }
    named
}

/// Files the task names that the repository lacks: a word that is a relative path whose file
/// name has a stem and an extension the repository's own files use (`ANALYSIS.md` where a
/// `README.md` is), and that is not a call (`res.json()`), an address, a glob or a version,
/// nor the name of a file the repository has anywhere.
pub fn missing(task: &str, files: &[RepoPath]) -> Vec<RepoPath> {
    let extension = |name: &str| {
        let (stem, ext) = name.rsplit_once('.')?;
        (!stem.is_empty() && !ext.is_empty() && ext.chars().all(|c| c.is_ascii_alphanumeric()))
            .then(|| ext.to_ascii_lowercase())
    };
    let file_name = |path: &str| path.rsplit('/').next().unwrap_or(path).to_string();
    let extensions: HashSet<String> = files
        .iter()
        .filter_map(|f| extension(&file_name(f.as_str())))
        .collect();
    // Compared without case: `history.md` names the repository's `History.md`.
    let names: HashSet<String> = files
        .iter()
        .map(|f| file_name(f.as_str()).to_lowercase())
        .collect();
    let mut missing: Vec<RepoPath> = Vec::new();
    for (word, called) in words(task) {
        let word = word.strip_prefix("./").unwrap_or(word);
        let name = file_name(word);
        let plain = !called && !word.contains("://") && !word.contains(['@', '*', '$', '=']);
        let Some(ext) = extension(&name).filter(|ext| plain && !ext.chars().all(char::is_numeric))
        else {
            continue;
        };
        let Ok(path) = RepoPath::parse(word) else {
            continue;
        };
        if extensions.contains(&ext)
            && !names.contains(&name.to_lowercase())
            && !missing.contains(&path)
        {
            missing.push(path);
        }
    }
    missing
}

/// A file the task names and the repository lacks that the flow does not write, while it
/// writes a new file whose name shares a word with it (`analysis_report.txt` for the task's
/// `ANALYSIS.md`): the task's file, and the flow's.
pub fn renamed(flow: &Flow, missing: &[RepoPath], files: &[RepoPath]) -> Option<(String, String)> {
    let written: Vec<RepoPath> = deliverables::file_writes(flow)
        .into_iter()
        .filter_map(|(_, path)| RepoPath::parse(path.strip_prefix("./").unwrap_or(&path)).ok())
        .collect();
    let made: Vec<&RepoPath> = written.iter().filter(|p| !files.contains(p)).collect();
    let words_of = |path: &RepoPath| -> HashSet<String> {
        let name = path.as_str().rsplit('/').next().unwrap_or(path.as_str());
        let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
        stem.split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() >= 4)
            .map(str::to_lowercase)
            .collect()
    };
    missing
        .iter()
        .filter(|asked| !written.contains(asked))
        .find_map(|asked| {
            let words = words_of(asked);
            let instead = made
                .iter()
                .find(|new| !missing.contains(new) && !words_of(new).is_disjoint(&words))?;
            Some((asked.as_str().to_string(), instead.as_str().to_string()))
        })
}

/// A file the task names and the repository lacks, when the flow writes no file at all and runs
/// no command that could (an answer alone, say).
pub fn unwritten<'a>(flow: &Flow, missing: &'a [RepoPath]) -> Option<&'a RepoPath> {
    let writes = !deliverables::file_writes(flow).is_empty();
    let runs_commands = flow
        .steps
        .iter()
        .any(|s| crate::flow::operations::find(&s.operation).is_some_and(|op| op.runs_commands));
    (!writes && !runs_commands)
        .then(|| missing.first())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(list: &[&str]) -> Vec<RepoPath> {
        list.iter().map(|f| RepoPath::parse(f).unwrap()).collect()
    }

    fn strs(list: &[RepoPath]) -> Vec<&str> {
        list.iter().map(RepoPath::as_str).collect()
    }

    #[test]
    fn the_task_names_files_by_path_or_unique_name() {
        let files = paths(&["src/utils.py", "README.md", "a/x.py", "b/x.py"]);
        let named = named(
            "Refactor calculate_metrics in utils.py, see README.md and x.py.",
            &files,
        );
        assert_eq!(strs(&named), ["src/utils.py", "README.md"]);
    }

    #[test]
    fn a_missing_file_is_a_path_with_an_extension_the_repository_uses() {
        let files = paths(&["utils.py", "README.md", "package.json", "lib/app.js"]);
        let missing = |task: &str| strs(&missing(task, &files)).join(" ");
        assert_eq!(
            missing("Explain in ANALYSIS.md what calculate_metrics in utils.py returns."),
            "ANALYSIS.md"
        );
        assert_eq!(
            missing("Split utils.py into ./math_utils.py and docs/notes.md"),
            "math_utils.py docs/notes.md"
        );
        // Not files: calls, member chains of no extension the repository uses, versions,
        // addresses, globs, and files the repository has under another directory.
        for task in [
            "res.json() drops the charset; fix res.send",
            "Upgrade to version 3.11 and Python 3.12",
            "Email app.js to alice@example.com",
            "Fetch from https://api.example.com/v1.json",
            "Lint every *.js file",
            "self.items is empty in Cart.total",
            "see app.js for the router",
        ] {
            assert_eq!(missing(task), "", "{task}");
        }
    }

    #[test]
    fn a_flow_that_writes_nothing_leaves_the_missing_file_unwritten() {
        let files = paths(&["utils.py", "README.md"]);
        let missing = missing(
            "Explain in ANALYSIS.md what calculate_metrics returns",
            &files,
        );
        let answer: Flow = serde_json::from_value(json!({"version": 1, "task": "t", "steps": [
            {"id": "a", "operation": "analyze_code",
             "params": {"file_path": "utils.py", "query": "what does it return?"}}]}))
        .unwrap();
        assert_eq!(
            unwritten(&answer, &missing).map(RepoPath::as_str),
            Some("ANALYSIS.md")
        );
        let command: Flow = serde_json::from_value(json!({"version": 1, "task": "t", "steps": [
            {"id": "c", "operation": "execute_shell_command",
             "params": {"command": "echo x > ANALYSIS.md"}}]}))
        .unwrap();
        assert_eq!(
            unwritten(&command, &missing),
            None,
            "a command may write it"
        );
        assert_eq!(unwritten(&answer, &[]), None);
    }

    #[test]
    fn a_new_file_named_like_the_missing_one_is_a_rename() {
        let files = paths(&["utils.py", "README.md"]);
        let flow = |path: &str| -> Flow {
            serde_json::from_value(json!({"version": 1, "task": "t", "steps": [
                {"id": "w", "operation": "write_file",
                 "params": {"file_path": path, "content": "x"}}]}))
            .unwrap()
        };
        let missing = missing(
            "Explain in ANALYSIS.md what calculate_metrics returns",
            &files,
        );
        assert_eq!(
            renamed(&flow("analysis_report.txt"), &missing, &files),
            Some(("ANALYSIS.md".into(), "analysis_report.txt".into()))
        );
        // The file the task names, an unrelated new file, or an existing one: no rename.
        assert_eq!(renamed(&flow("ANALYSIS.md"), &missing, &files), None);
        assert_eq!(renamed(&flow("docs/summary.md"), &missing, &files), None);
        assert_eq!(renamed(&flow("README.md"), &missing, &files), None);
    }
}
