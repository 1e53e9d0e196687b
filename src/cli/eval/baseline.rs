//! The model alone (`ocflow eval --baseline`): the same model and endpoint as the flows' code
//! operations, asked once per task with the task and the files it needs, answering every file
//! it changes whole (Aider's "whole" form); its answer is written into a fresh copy of the
//! repository and judged by the same check. A second try is given the check's output, as
//! Aider's benchmark does. Nothing here plans, recovers or runs a step: it is what the flows
//! are measured against.

use std::path::Path;
use std::time::{Duration, Instant};

use ocflow_core::flow::task_files;
use ocflow_core::llm::client::Llm;
use ocflow_model::llm::{ChatRequest, Message, ModelSettings, Usage};
use ocflow_model::repo_path::RepoPath;
use serde::{Deserialize, Serialize};

use crate::cli::eval::scoring::{self, CheckRun};
use crate::cli::eval::suite::Check;

/// Tries: the answer, then one more given the check's output.
const TRIES: usize = 2;
/// How much of the check's output the second try is shown (its end).
const SHOWN_OUTPUT: usize = 4000;

const SYSTEM: &str = "You are an expert programmer. Change the files you are given so that the \
task is done. Answer with every file you change, whole: its path alone on a line, then a fenced \
code block holding its complete new content. Change nothing else; say nothing else.";

/// How the model alone did on one task: a line of the eval's `baseline.jsonl`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct BaselineScore {
    pub(crate) id: String,
    /// The check passed after the first answer.
    pub(crate) solved_first_try: bool,
    /// The check passed after the first or the second answer.
    pub(crate) solved: bool,
    pub(crate) tokens: Usage,
    pub(crate) wall_ms: u64,
    /// The files its answers wrote.
    pub(crate) files: Vec<String>,
    /// Why it could not be judged (no file to show it, a call that failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) problem: Option<String>,
}

/// Asks the model alone about task `id`, in `dir` (its fresh copy and the check's log).
pub(crate) async fn run(
    llm: &Llm,
    settings: &ModelSettings,
    id: &str,
    task: &Check,
    dir: &Path,
    timeout: Duration,
) -> BaselineScore {
    let started = Instant::now();
    let mut score = BaselineScore {
        id: id.to_string(),
        ..BaselineScore::default()
    };
    let repo = dir.join("repo");
    let outcome = ask(llm, settings, task, dir, &repo, timeout, &mut score).await;
    if let Err(problem) = outcome {
        score.problem = Some(problem);
    }
    score.wall_ms = started.elapsed().as_millis() as u64;
    score
}

async fn ask(
    llm: &Llm,
    settings: &ModelSettings,
    task: &Check,
    dir: &Path,
    repo: &Path,
    timeout: Duration,
    score: &mut BaselineScore,
) -> Result<(), String> {
    scoring::fresh_copy(&task.repo, repo)?;
    let shown = shown_files(task, repo)?;
    let mut messages = vec![
        Message::system(SYSTEM),
        Message::user(first_prompt(&task.task, repo, &shown)),
    ];
    for attempt in 1..=TRIES {
        let request = ChatRequest {
            purpose: "baseline".into(),
            settings: settings.for_answer(attempt),
            messages: messages.clone(),
            json: false,
            schema: None,
            optional: false,
        };
        let answer = llm.chat(&request).await.map_err(|err| err.to_string())?;
        score.tokens.add(&answer.usage);
        for (path, content) in answered_files(&answer.content) {
            let target = path.under(repo);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|err| err.to_string())?;
            }
            std::fs::write(&target, content).map_err(|err| err.to_string())?;
            if !score.files.contains(&path.to_string()) {
                score.files.push(path.to_string());
            }
        }
        let run: CheckRun = scoring::run_check(&task.command, repo, dir, timeout)?;
        if run.code == Some(0) {
            score.solved = true;
            score.solved_first_try = attempt == 1;
            return Ok(());
        }
        messages.push(Message::assistant(answer.content));
        messages.push(Message::user(format!(
            "The check `{}` fails with:\n```\n{}\n```\nFix the files; answer the same way.",
            task.command,
            last_chars(&run.output, SHOWN_OUTPUT)
        )));
    }
    Ok(())
}

/// The files the model is shown: the suite's, else those the task names.
fn shown_files(task: &Check, repo: &Path) -> Result<Vec<RepoPath>, String> {
    if !task.files.is_empty() {
        return task
            .files
            .iter()
            .map(|f| RepoPath::parse(f).map_err(|err| format!("\"files\": {err}")))
            .collect();
    }
    let listed = ocflow_core::llm::planner::list_files(repo, &[]);
    let named = task_files::named(&task.task, &listed);
    if named.is_empty() {
        return Err(
            "the task names no file of the repository: give the suite line \"files\", the files \
             the model alone is shown"
                .into(),
        );
    }
    Ok(named)
}

fn first_prompt(task: &str, repo: &Path, files: &[RepoPath]) -> String {
    let mut text = String::new();
    for path in files {
        let content = std::fs::read_to_string(path.under(repo)).unwrap_or_default();
        text.push_str(&format!("{path}\n```\n{content}```\n\n"));
    }
    format!("{text}Task: {task}")
}

/// The files an answer gives whole: a path alone on a line (perhaps in backticks or bold),
/// then a fenced block.
fn answered_files(answer: &str) -> Vec<(RepoPath, String)> {
    let lines: Vec<&str> = answer.lines().collect();
    let mut found = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let fence = lines[index].trim_start().starts_with("```");
        let path = index
            .checked_sub(1)
            .map(|before| lines[before].trim().trim_matches(['`', '*', ':', ' ']))
            .and_then(|name| RepoPath::parse(name).ok())
            .filter(|p| !p.as_str().is_empty() && p.as_str().contains('.'));
        if !(fence && path.is_some()) {
            index += 1;
            continue;
        }
        let end = (index + 1..lines.len()).find(|&i| lines[i].trim_start().starts_with("```"));
        let Some(end) = end else {
            break;
        };
        let mut body = lines[index + 1..end].join("\n");
        body.push('\n');
        found.extend(path.map(|p| (p, body)));
        index = end + 1;
    }
    found
}

fn last_chars(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut start = text.len() - limit;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_gives_each_file_whole_after_its_path() {
        let answer = "Here you are.\n\ncalc.py\n```python\ndef add(a, b):\n    return a + b\n```\n\
                      **src/util.py**\n```\nX = 1\n```\n```\nno path above\n```\n";
        let files = answered_files(answer);
        let names: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, ["calc.py", "src/util.py"]);
        assert_eq!(files[0].1, "def add(a, b):\n    return a + b\n");
        assert!(answered_files("```\n../etc/passwd\n```").is_empty());
    }
}
