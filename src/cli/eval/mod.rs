//! `ocflow eval SUITE.jsonl --out DIR` (or a directory of Exercism exercises, `exercism.rs`):
//! runs a suite of tasks as a batch (locally or on Ray,
//! `DIR/flows/`), then scores each finished flow by its task's check in a fresh copy of the
//! repository (`scoring.rs`), and keeps one line per scored task in `DIR/results.jsonl` and the
//! totals in `DIR/summary.md`. Run again with the same `--out`, it skips the scored tasks and
//! the batch resumes the unfinished flows. The flows run without the failure memory unless
//! `--memory`: a task solved by what an earlier one taught is not the model's.

pub(crate) mod baseline;
pub(crate) mod estimate;
pub(crate) mod exercism;
pub(crate) mod page;
pub(crate) mod scoring;
pub(crate) mod suite;
pub(crate) mod swebench;
pub(crate) mod unchanged;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::event::{Event, Record};
use ocflow_model::exit::ExitCode;
use ocflow_model::llm::Usage;
use ocflow_model::output::{print_stdout, say};
use ocflow_model::status::now;

use crate::cli::args::{BatchArgs, EvalArgs};
use crate::cli::batch;
use crate::cli::config::Config;
use crate::cli::launch;
use baseline::BaselineScore;
use scoring::Scored;

const RESULTS_FILE: &str = "results.jsonl";
const BASELINE_FILE: &str = "baseline.jsonl";
const SUMMARY_FILE: &str = "summary.md";
const PAGE_FILE: &str = "report.html";

pub(crate) async fn eval(config: &Config, args: EvalArgs) -> Result<ExitCode> {
    let out = std::path::absolute(&args.out).io_context(|| format!("{}", args.out.display()))?;
    std::fs::create_dir_all(&out).map_err(|err| {
        Error::Usage(format!(
            "--out {}: cannot make it ({err}); give a directory the eval may write",
            args.out.display()
        ))
    })?;
    // A directory is a set of Exercism exercises, and SWE-bench instances are cloned at their
    // base commits: each made a suite under --out.
    let swe_bench = swebench::is_instances(&args.suite);
    let suite_path = if args.suite.is_dir() {
        exercism::suite(&args.suite, &out).map_err(Error::Usage)?
    } else if swe_bench {
        swebench::suite(&args.suite, &out).map_err(Error::Usage)?
    } else {
        args.suite.clone()
    };
    let mut suite = suite::read(&suite_path).map_err(Error::Usage)?;
    let results_path = out.join(RESULTS_FILE);
    let earlier: BTreeMap<String, Scored> = load(&results_path);
    let timeout = Duration::from_secs(args.check_timeout);
    let told = |text: &str, event: Event| tell(config, text, event);
    let left_out = unchanged::leave_out(config, &told, &mut suite, &earlier, &out, timeout)?;
    let estimate = estimate::before(&suite.checks, &earlier);
    if estimate.tasks > 0 && !config.json {
        say(&format!(
            "ocflow: eval: estimate before the run: about {} tokens for {} task(s), {} a task \
             (from {})",
            estimate.total,
            estimate.tasks,
            estimate.total / estimate.tasks as u64,
            estimate.basis
        ));
    }
    let tasks = out.join("tasks.jsonl");
    std::fs::write(&tasks, suite.tasks_file())
        .io_context(|| format!("writing {}", tasks.display()))?;
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
            branches: args.branches.clone(),
            forwarded: args.forwarded.clone(),
        },
    )
    .await?;
    if ran == ExitCode::Interrupted {
        return Ok(ran);
    }
    let finished = batch::results::load(&flows);
    let mut scored = earlier.clone();
    for (id, check) in &suite.checks {
        let Some(result) = finished.get(id).filter(|_| !scored.contains_key(id)) else {
            continue;
        };
        let dir = scoring::check_dir(&out, id);
        let one = scoring::score(result, check, &dir, timeout);
        // Only the log and the verdict stay: the copy is the repository again.
        let _ = std::fs::remove_dir_all(dir.join("repo"));
        let _ = std::fs::remove_dir_all(dir.join("tmp"));
        tell(
            config,
            &format!("ocflow: eval: {}", verdict(&one)),
            Event::EvalScored {
                id: id.clone(),
                by: "ocflow".into(),
                solved: one.solved,
                false_success: one.false_success,
                problem: one.problem.clone(),
            },
        );
        batch::results::append_line(&results_path, &one)
            .map_err(|err| Error::Usage(err.to_string()))?;
        scored.insert(id.clone(), one);
    }
    if swe_bench {
        let model = config
            .require_llm()
            .map_or_else(|_| "ocflow".to_string(), |llm| llm.planner.model.clone());
        let path =
            swebench::write_predictions(&out, finished.values(), &model).map_err(Error::Usage)?;
        say(&format!(
            "ocflow: eval: predictions for the SWE-bench harness in {}",
            path.display()
        ));
    }
    let mut baselines = if args.baseline {
        self::baselines(config, &suite, &out, timeout).await?
    } else {
        load(&out.join(BASELINE_FILE))
    };
    // The report is of this suite's tasks: a line of an earlier run for a task no longer in it
    // (left out, or taken out of the suite) counts for neither side.
    scored.retain(|id, _| suite.checks.contains_key(id));
    baselines.retain(|id, _| suite.checks.contains_key(id));
    let ids: Vec<String> = suite.checks.keys().cloned().collect();
    let mut text = summary(&ids, &scored, &baselines);
    text.push_str(&unchanged::said(&left_out));
    let spent: u64 = scored
        .iter()
        .filter(|(id, _)| !earlier.contains_key(*id))
        .map(|(_, s)| s.tokens.total_tokens)
        .sum();
    if estimate.tasks > 0 && estimate.total > 0 {
        text.push_str(&format!(
            "\nEstimated before this run: {} tokens for {} task(s) (from {}); they spent {} \
             ({:.2} of the estimate).\n",
            estimate.total,
            estimate.tasks,
            estimate.basis,
            spent,
            spent as f64 / estimate.total as f64
        ));
    }
    let summary_path = out.join(SUMMARY_FILE);
    std::fs::write(&summary_path, &text)
        .io_context(|| format!("writing {}", summary_path.display()))?;
    let page_path = out.join(PAGE_FILE);
    std::fs::write(&page_path, page::render(&ids, &scored, &baselines))
        .io_context(|| format!("writing {}", page_path.display()))?;
    let event = Event::EvalFinished {
        tasks: ids.len(),
        solved: scored.values().filter(|s| s.solved).count(),
        false_successes: scored.values().filter(|s| s.false_success).count(),
        baseline_solved: (!baselines.is_empty())
            .then(|| baselines.values().filter(|b| b.solved).count()),
        summary: summary_path.clone(),
    };
    if config.json {
        tell(config, "", event);
    } else {
        print_stdout(&text);
    }
    let unscored = ids.iter().filter(|id| !scored.contains_key(*id)).count();
    Ok(if ran == ExitCode::Paused && unscored > 0 {
        ExitCode::Paused
    } else if unscored > 0 || scored.values().any(|s| s.problem.is_some()) {
        ExitCode::Failure
    } else {
        ExitCode::Success
    })
}

/// The model alone on every task not yet asked (`baseline.jsonl`), one task after another.
async fn baselines(
    config: &Config,
    suite: &suite::Suite,
    out: &Path,
    timeout: Duration,
) -> Result<BTreeMap<String, BaselineScore>> {
    let path = out.join(BASELINE_FILE);
    let mut known: BTreeMap<String, BaselineScore> = load(&path);
    let llm = launch::require_llm(config)?;
    let settings = config.require_llm()?.operations.clone();
    for (id, check) in &suite.checks {
        if known.contains_key(id) {
            continue;
        }
        let dir = scoring::check_dir(out, id).join("baseline");
        let one = baseline::run(&llm, &settings, id, check, &dir, timeout).await;
        let _ = std::fs::remove_dir_all(dir.join("repo"));
        let _ = std::fs::remove_dir_all(dir.join("tmp"));
        let said = match (&one.problem, one.solved, one.solved_first_try) {
            (Some(problem), _, _) => format!("not judged ({problem})"),
            (None, true, true) => "solved at the first try".into(),
            (None, true, false) => "solved at the second try".into(),
            (None, false, _) => "not solved".into(),
        };
        tell(
            config,
            &format!("ocflow: eval: {id}: the model alone: {said}"),
            Event::EvalScored {
                id: id.clone(),
                by: "baseline".into(),
                solved: one.solved,
                false_success: false,
                problem: one.problem.clone(),
            },
        );
        batch::results::append_line(&path, &one).map_err(|err| Error::Usage(err.to_string()))?;
        known.insert(id.clone(), one);
    }
    Ok(known)
}

/// The lines of an earlier run with this `--out` (`results.jsonl`, `baseline.jsonl`), by id (a
/// torn last line left out: that task is scored again).
fn load<T: serde::de::DeserializeOwned + HasId>(path: &Path) -> BTreeMap<String, T> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return BTreeMap::new();
    };
    text.lines()
        .filter_map(|line| serde_json::from_str::<T>(line).ok())
        .map(|line| (line.id().to_string(), line))
        .collect()
}

/// A scored line, kept by its task's id.
trait HasId {
    fn id(&self) -> &str;
}

impl HasId for Scored {
    fn id(&self) -> &str {
        &self.id
    }
}

impl HasId for BaselineScore {
    fn id(&self) -> &str {
        &self.id
    }
}

/// Says `text` at a terminal, or prints `event` as a JSON line with `--json`.
fn tell(config: &Config, text: &str, event: Event) {
    if config.json {
        if let Ok(line) = serde_json::to_string(&Record::now(now(), event)) {
            print_stdout(&format!("{line}\n"));
        }
    } else {
        say(text);
    }
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

/// The eval's totals and its table of tasks, as Markdown; with the model alone beside the flows
/// where it was asked.
fn summary(
    ids: &[String],
    scored: &BTreeMap<String, Scored>,
    baselines: &BTreeMap<String, BaselineScore>,
) -> String {
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
        "# ocflow eval\n\n{} of {} task(s) solved ({} scored; {} before any recovery); false \
         successes: {}{}\n\n\
         tokens: {} ({} per solved task); flow time: {:.1} s ({} ms per solved task)\n\n\
         {}| task | solved | flow | recoveries | check | false success |{}\n\
         |---|---|---|---|---|---|{}\n",
        solved.len(),
        ids.len(),
        scored.len(),
        solved.iter().filter(|s| s.solved_before_recovery).count(),
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
        baseline_totals(ids.len(), baselines),
        if baselines.is_empty() {
            ""
        } else {
            " model alone |"
        },
        if baselines.is_empty() { "" } else { "---|" },
    );
    for id in ids {
        match scored.get(id) {
            Some(one) => text.push_str(&format!(
                "| {id} | {} | {} | {} | {} | {} |{}\n",
                if one.solved { "yes" } else { "no" },
                one.state,
                one.recoveries,
                match (&one.problem, one.timed_out) {
                    (Some(_), _) => "not run".to_string(),
                    (None, true) => "timed out".to_string(),
                    (None, false) => one
                        .check_exit
                        .map_or("killed".into(), |c| format!("exit {c}")),
                },
                if one.false_success { "**yes**" } else { "no" },
                baseline_cell(baselines, id),
            )),
            None => text.push_str(&format!(
                "| {id} | - | unfinished | - | - | - |{}\n",
                baseline_cell(baselines, id)
            )),
        }
    }
    text
}

/// The model alone's totals, a paragraph; nothing when it was not asked.
fn baseline_totals(tasks: usize, baselines: &BTreeMap<String, BaselineScore>) -> String {
    if baselines.is_empty() {
        return String::new();
    }
    let solved = baselines.values().filter(|b| b.solved).count();
    let first = baselines.values().filter(|b| b.solved_first_try).count();
    let mut tokens = Usage::default();
    let mut wall_ms = 0;
    for one in baselines.values() {
        tokens.add(&one.tokens);
        wall_ms += one.wall_ms;
    }
    let per = |total: u64| {
        if solved == 0 {
            "-".to_string()
        } else {
            (total / solved as u64).to_string()
        }
    };
    format!(
        "the model alone (the same model, asked once with the files, then again with the \
         check's output): {solved} of {tasks} solved ({first} at the first try); tokens: {} \
         ({} per solved task); time: {:.1} s ({} ms per solved task)\n\n",
        tokens.total_tokens,
        per(tokens.total_tokens),
        wall_ms as f64 / 1000.0,
        per(wall_ms),
    )
}

/// The model alone's cell of a task's row; nothing when it was not asked.
fn baseline_cell(baselines: &BTreeMap<String, BaselineScore>, id: &str) -> String {
    if baselines.is_empty() {
        return String::new();
    }
    match baselines.get(id) {
        Some(one) if one.problem.is_some() => " not judged |".into(),
        Some(one) if one.solved_first_try => " solved (1st try) |".into(),
        Some(one) if one.solved => " solved (2nd try) |".into(),
        Some(_) => " no |".into(),
        None => " - |".into(),
    }
}
