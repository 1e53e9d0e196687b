//! `ocflow eval SUITE.jsonl --out DIR`: runs a suite of tasks as a batch (locally or on Ray,
//! `DIR/flows/`), then scores each finished flow by its task's check in a fresh copy of the
//! repository (`scoring.rs`), and keeps one line per scored task in `DIR/results.jsonl` and the
//! totals in `DIR/summary.md`. Run again with the same `--out`, it skips the scored tasks and
//! the batch resumes the unfinished flows. The flows run without the failure memory unless
//! `--memory`: a task solved by what an earlier one taught is not the model's.

pub(crate) mod scoring;
pub(crate) mod suite;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::exit::ExitCode;
use ocflow_model::llm::Usage;
use ocflow_model::output::{print_stdout, say};

use crate::cli::args::{BatchArgs, EvalArgs};
use crate::cli::batch;
use crate::cli::config::Config;
use scoring::Scored;

const RESULTS_FILE: &str = "results.jsonl";
const SUMMARY_FILE: &str = "summary.md";

pub(crate) async fn eval(config: &Config, args: EvalArgs) -> Result<ExitCode> {
    let suite = suite::read(&args.suite).map_err(Error::Usage)?;
    let out = std::path::absolute(&args.out).io_context(|| format!("{}", args.out.display()))?;
    std::fs::create_dir_all(&out).map_err(|err| {
        Error::Usage(format!(
            "--out {}: cannot make it ({err}); give a directory the eval may write",
            args.out.display()
        ))
    })?;
    let tasks = out.join("tasks.jsonl");
    std::fs::write(&tasks, &suite.tasks).io_context(|| format!("writing {}", tasks.display()))?;
    let flows = out.join("flows");
    let mut fleet = args.fleet.clone();
    fleet.no_memory = !args.memory;
    let ran = batch::batch(
        config,
        BatchArgs {
            tasks,
            out: flows.clone(),
            fleet,
            apply: false,
            forwarded: args.forwarded.clone(),
        },
    )
    .await?;
    if ran == ExitCode::Interrupted {
        return Ok(ran);
    }
    let finished = batch::results::load(&flows);
    let results_path = out.join(RESULTS_FILE);
    let mut scored = load(&results_path);
    let timeout = Duration::from_secs(args.check_timeout);
    for (id, check) in &suite.checks {
        let Some(result) = finished.get(id).filter(|_| !scored.contains_key(id)) else {
            continue;
        };
        let dir = scoring::check_dir(&out, id);
        let one = scoring::score(result, check, &dir, timeout);
        // Only the log and the verdict stay: the copy is the repository again.
        let _ = std::fs::remove_dir_all(dir.join("repo"));
        let _ = std::fs::remove_dir_all(dir.join("tmp"));
        if !config.json {
            say(&format!("ocflow: eval: {}", verdict(&one)));
        }
        batch::results::append_line(&results_path, &one)
            .map_err(|err| Error::Usage(err.to_string()))?;
        scored.insert(id.clone(), one);
    }
    let text = summary(&suite.checks.keys().cloned().collect::<Vec<_>>(), &scored);
    let summary_path = out.join(SUMMARY_FILE);
    std::fs::write(&summary_path, &text)
        .io_context(|| format!("writing {}", summary_path.display()))?;
    print_stdout(&text);
    let unscored = suite.checks.len() - scored.len();
    Ok(if ran == ExitCode::Paused && unscored > 0 {
        ExitCode::Paused
    } else if unscored > 0 || scored.values().any(|s| s.problem.is_some()) {
        ExitCode::Failure
    } else {
        ExitCode::Success
    })
}

/// The scored tasks of an earlier run with this `--out`, by id (a torn last line left out: that
/// task is scored again).
fn load(path: &Path) -> BTreeMap<String, Scored> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return BTreeMap::new();
    };
    text.lines()
        .filter_map(|line| serde_json::from_str::<Scored>(line).ok())
        .map(|scored| (scored.id.clone(), scored))
        .collect()
}

/// One task's verdict on a line.
fn verdict(scored: &Scored) -> String {
    let judged = match (&scored.problem, scored.solved, scored.timed_out) {
        (Some(problem), _, _) => format!("not judged ({problem})"),
        (None, true, _) => "solved".to_string(),
        (None, false, true) => "not solved (the check ran out of time)".to_string(),
        (None, false, false) => format!(
            "not solved (the check exited {})",
            scored
                .check_exit
                .map_or("by a signal".into(), |c| c.to_string())
        ),
    };
    let false_success = if scored.false_success {
        " — FALSE SUCCESS: the flow said it succeeded"
    } else {
        ""
    };
    format!(
        "{}: {judged}; the flow {}{false_success}",
        scored.id, scored.state
    )
}

/// The eval's totals and its table of tasks, as Markdown.
fn summary(ids: &[String], scored: &BTreeMap<String, Scored>) -> String {
    let solved: Vec<&Scored> = scored.values().filter(|s| s.solved).collect();
    let false_successes: Vec<&str> = scored
        .values()
        .filter(|s| s.false_success)
        .map(|s| s.id.as_str())
        .collect();
    let mut tokens = Usage::default();
    let mut wall_ms = 0;
    for one in scored.values() {
        tokens.add(&one.tokens);
        wall_ms += one.duration_ms;
    }
    let per_solved = |total: u64| {
        if solved.is_empty() {
            "-".to_string()
        } else {
            (total / solved.len() as u64).to_string()
        }
    };
    let mut text = format!(
        "# ocflow eval\n\n{} of {} task(s) solved ({} scored); false successes: {}{}\n\n\
         tokens: {} ({} per solved task); flow time: {:.1} s ({} ms per solved task)\n\n\
         | task | solved | flow | check | false success |\n|---|---|---|---|---|\n",
        solved.len(),
        ids.len(),
        scored.len(),
        false_successes.len(),
        if false_successes.is_empty() {
            String::new()
        } else {
            format!(" ({})", false_successes.join(", "))
        },
        tokens.total_tokens,
        per_solved(tokens.total_tokens),
        wall_ms as f64 / 1000.0,
        per_solved(wall_ms),
    );
    for id in ids {
        match scored.get(id) {
            Some(one) => text.push_str(&format!(
                "| {id} | {} | {} | {} | {} |\n",
                if one.solved { "yes" } else { "no" },
                one.state,
                match (&one.problem, one.timed_out) {
                    (Some(_), _) => "not run".to_string(),
                    (None, true) => "timed out".to_string(),
                    (None, false) => one
                        .check_exit
                        .map_or("killed".into(), |c| format!("exit {c}")),
                },
                if one.false_success { "**yes**" } else { "no" },
            )),
            None => text.push_str(&format!("| {id} | - | unfinished | - | - |\n")),
        }
    }
    text
}
