//! What a batch leaves in `--out`: `results.jsonl`, one line per task as it finishes (appended
//! and fsynced, so a killed batch loses none and a second run skips those tasks), the diffs
//! under `diffs/`, and `summary.md` with the totals, the slowest tasks and the failed ones.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use ocflow_model::llm::Usage;
use ocflow_model::output::printable;
use serde::{Deserialize, Serialize};

use crate::cli::batch::llm_gate::GateStats;

/// `results.jsonl`, in `--out`.
pub(crate) const RESULTS_FILE: &str = "results.jsonl";
/// `summary.md`, in `--out`.
pub(crate) const SUMMARY_FILE: &str = "summary.md";

/// One finished task: a line of `results.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TaskResult {
    /// The task's id (TASKS.jsonl's `id`).
    pub(crate) id: String,
    /// `succeeded`, `failed` or `no_change` (the flow's final state).
    pub(crate) state: String,
    /// The flow's task directory (for the Ray engine with a cloned repository: where the
    /// driver saved its status, summary and diff).
    pub(crate) task_dir: PathBuf,
    /// The exit code of the flow's process.
    pub(crate) exit_code: i32,
    /// Tokens the flow used.
    pub(crate) tokens: Usage,
    /// How long the flow ran in the batch run that finished it.
    pub(crate) duration_ms: u64,
    /// How many repository files the flow changed.
    pub(crate) files_changed: usize,
    /// The flow's unified diff (`diffs/ID.diff` in `--out`), absent when nothing changed.
    pub(crate) diff: Option<PathBuf>,
    /// Why the flow did not succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
}

impl TaskResult {
    pub(crate) fn succeeded(&self) -> bool {
        self.state == "succeeded"
    }
}

/// Why a result could not be kept.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}: {source}")]
pub(crate) struct ResultsError {
    pub(crate) path: PathBuf,
    pub(crate) source: std::io::Error,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ResultsError + '_ {
    move |source| ResultsError {
        path: path.to_path_buf(),
        source,
    }
}

/// The results of an earlier run of the batch with this `--out`, by id. A torn last line (the
/// batch was killed as it wrote) is left out: that task runs again, as `resume`.
pub(crate) fn load(out: &Path) -> BTreeMap<String, TaskResult> {
    let Ok(text) = std::fs::read_to_string(out.join(RESULTS_FILE)) else {
        return BTreeMap::new();
    };
    text.lines()
        .filter_map(|line| serde_json::from_str::<TaskResult>(line).ok())
        .map(|result| (result.id.clone(), result))
        .collect()
}

/// Appends `result` to `results.jsonl` and waits until it is on disk.
pub(crate) fn append(out: &Path, result: &TaskResult) -> Result<(), ResultsError> {
    append_line(&out.join(RESULTS_FILE), result)
}

/// Appends `value` as one JSON line to the file at `path` and waits until it is on disk.
pub(crate) fn append_line(path: &Path, value: &impl Serialize) -> Result<(), ResultsError> {
    let path = path.to_path_buf();
    let mut file = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(&path)
        .map_err(io(&path))?;
    // A line torn by a kill would glue itself to this one: end it first.
    let length = file.metadata().map_err(io(&path))?.len();
    let mut line = String::new();
    if length > 0 {
        let mut last = [0u8; 1];
        file.seek(SeekFrom::Start(length - 1)).map_err(io(&path))?;
        file.read_exact(&mut last).map_err(io(&path))?;
        if last[0] != b'\n' {
            line.push('\n');
        }
    }
    let json = serde_json::to_string(value).map_err(|err| io(&path)(std::io::Error::other(err)))?;
    line.push_str(&json);
    line.push('\n');
    file.write_all(line.as_bytes()).map_err(io(&path))?;
    file.sync_all().map_err(io(&path))
}

/// Keeps a flow's diff as `diffs/ID.diff` in `--out`; `None` when it is empty.
pub(crate) fn save_diff(out: &Path, id: &str, diff: &str) -> Result<Option<PathBuf>, ResultsError> {
    if diff.trim().is_empty() {
        return Ok(None);
    }
    let dir = out.join("diffs");
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let path = dir.join(format!("{id}.diff"));
    std::fs::write(&path, diff).map_err(io(&path))?;
    Ok(Some(path))
}

/// The files a unified diff changes (its `+++ b/` and deleted `--- a/` headers).
pub(crate) fn files_in_diff(diff: &str) -> usize {
    diff.lines()
        .filter(|line| line.starts_with("diff --git ") || line.starts_with("diff -"))
        .count()
        .max(diff.lines().filter(|line| line.starts_with("+++ ")).count())
}

/// The figures of one run of the batch.
#[derive(Debug, Clone)]
pub(crate) struct RunFigures {
    /// Wall time of this run.
    pub(crate) wall_ms: u64,
    /// Flows this run finished (the others were skipped, or are left to resume).
    pub(crate) finished_now: usize,
    /// Tasks left unfinished (interrupted); the next run resumes them.
    pub(crate) unfinished: usize,
    pub(crate) gate: Option<GateStats>,
    pub(crate) engine: &'static str,
}

/// `summary.md`: the totals over every task of the batch, this run's pace, the slowest tasks
/// and the failed ones with their reasons.
pub(crate) fn summary(results: &BTreeMap<String, TaskResult>, figures: &RunFigures) -> String {
    let succeeded = results.values().filter(|r| r.succeeded()).count();
    let failed = results.len() - succeeded;
    let mut tokens = Usage::default();
    for result in results.values() {
        tokens.add(&result.tokens);
    }
    let hours = figures.wall_ms as f64 / 3_600_000.0;
    let per_hour = if hours > 0.0 {
        figures.finished_now as f64 / hours
    } else {
        0.0
    };
    let mut text = format!(
        "# Batch summary\n\n\
         - engine: {}\n\
         - tasks: {} finished, {succeeded} succeeded, {failed} failed, {} left to resume\n\
         - tokens: {} ({} prompt, {} completion, {} requests)\n\
         - wall time of this run: {:.1} s, {} flow(s) finished: {per_hour:.0} flows per hour\n",
        figures.engine,
        results.len(),
        figures.unfinished,
        tokens.total_tokens,
        tokens.prompt_tokens,
        tokens.completion_tokens,
        tokens.calls,
        figures.wall_ms as f64 / 1000.0,
        figures.finished_now,
    );
    if let Some(gate) = figures.gate {
        text.push_str(&format!(
            "- LLM requests through the gate: {}; in flight at once: max {}, mean {:.2}\n",
            gate.requests, gate.max_in_flight, gate.mean_in_flight
        ));
    }
    let mut slowest: Vec<&TaskResult> = results.values().collect();
    slowest.sort_by_key(|r| std::cmp::Reverse(r.duration_ms));
    text.push_str("\n## Slowest tasks\n\n");
    for result in slowest.iter().take(5) {
        text.push_str(&format!(
            "- {}: {:.1} s, {}\n",
            result.id,
            result.duration_ms as f64 / 1000.0,
            result.state
        ));
    }
    let failures: Vec<&TaskResult> = results.values().filter(|r| !r.succeeded()).collect();
    if !failures.is_empty() {
        text.push_str("\n## Failed tasks\n\n");
        for result in failures {
            // A reason comes from the model or a command: never let it drive a terminal.
            let reason = result.reason.as_deref().unwrap_or("no reason recorded");
            text.push_str(&format!(
                "- {} ({}, exit {}): {}\n",
                result.id,
                result.state,
                result.exit_code,
                printable(reason)
            ));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: &str, state: &str, duration_ms: u64) -> TaskResult {
        TaskResult {
            id: id.into(),
            state: state.into(),
            task_dir: PathBuf::from("/w").join(id),
            exit_code: if state == "succeeded" { 0 } else { 1 },
            tokens: Usage {
                prompt_tokens: 10,
                completion_tokens: 2,
                total_tokens: 12,
                calls: 1,
                ..Usage::default()
            },
            duration_ms,
            files_changed: 1,
            diff: None,
            reason: (state != "succeeded").then(|| "step x failed: \x1b[2Jboom".into()),
        }
    }

    /// A line torn by a kill is skipped on reading and does not swallow the next one.
    #[test]
    fn a_torn_last_line_is_left_out_and_ended_before_the_next() {
        let dir = tempfile::tempdir().unwrap();
        append(dir.path(), &result("a", "succeeded", 5)).unwrap();
        let path = dir.path().join(RESULTS_FILE);
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"{\"id\": \"b\", \"sta").unwrap();
        assert_eq!(load(dir.path()).keys().collect::<Vec<_>>(), ["a"]);
        append(dir.path(), &result("c", "failed", 7)).unwrap();
        assert_eq!(load(dir.path()).keys().collect::<Vec<_>>(), ["a", "c"]);
    }

    #[test]
    fn the_summary_gives_totals_the_slowest_and_failures_escaped() {
        let results: BTreeMap<String, TaskResult> =
            [result("a", "succeeded", 1000), result("b", "failed", 3000)]
                .into_iter()
                .map(|r| (r.id.clone(), r))
                .collect();
        let text = summary(
            &results,
            &RunFigures {
                wall_ms: 3600,
                finished_now: 2,
                unfinished: 0,
                gate: Some(GateStats {
                    requests: 4,
                    max_in_flight: 2,
                    mean_in_flight: 1.5,
                }),
                engine: "local",
            },
        );
        assert!(text.contains("2 finished, 1 succeeded, 1 failed"), "{text}");
        assert!(text.contains("tokens: 24"), "{text}");
        assert!(text.contains("2000 flows per hour"), "{text}");
        assert!(text.contains("max 2, mean 1.50"), "{text}");
        assert!(text.find("- b: 3.0 s").unwrap() < text.find("- a: 1.0 s").unwrap());
        assert!(!text.contains('\x1b'), "{text}");
        assert!(text.contains("b (failed, exit 1): step x failed"), "{text}");
    }
}
