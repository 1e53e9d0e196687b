//! `ocflow memory`: the failure memory of this repository, as people and scripts see it —
//! `list` (newest first), `show ID` (one failure, whole), `forget ID` and `forget --all`.
//! The memory is the user's own state (`$XDG_STATE_HOME/ocflow/memory.sqlite`); its texts came
//! from commands and models, so they are made printable before a terminal sees them.

use serde_json::{Value, json};

use crate::cli::args::{MemoryAction, MemoryArgs};
use crate::cli::config::Config;
use crate::cli::user_state;
use ocflow_core::engine::memory::Memory;
use ocflow_core::engine::memory_store::{MemoryError, MemoryStore, Remembered};
use ocflow_core::flow::path_rules::canonical_or_absolute;
use ocflow_model::error::{Error, Result};
use ocflow_model::exit::ExitCode;
use ocflow_model::output::{print_stdout, printable, say};

pub(crate) fn memory(config: &Config, args: MemoryArgs) -> Result<ExitCode> {
    let state = user_state::dir().ok_or_else(|| {
        Error::Usage("no state directory for the failure memory: set HOME or XDG_STATE_HOME".into())
    })?;
    let memory = Memory::for_repository(
        &state,
        &config.repo,
        &canonical_or_absolute(&config.workspace),
    );
    let mut store = memory.open().map_err(bad_file)?;
    match args.action {
        MemoryAction::List => {
            let listed = store.list(Some(memory.repo_key())).map_err(bad_file)?;
            if config.json {
                let all: Vec<Value> = listed.iter().map(as_json).collect();
                print_stdout(&format!("{}\n", Value::Array(all)));
            } else if listed.is_empty() {
                say(&format!(
                    "ocflow: no failure remembered of this repository ({})",
                    printable(memory.repo_key())
                ));
            } else {
                let lines: String = listed.iter().map(line_of).collect();
                print_stdout(&lines);
            }
        }
        MemoryAction::Show { id } => {
            let remembered = of_this_repository(&store, &memory, id)?;
            if config.json {
                print_stdout(&format!("{}\n", as_json(&remembered)));
            } else {
                print_stdout(&whole(&remembered));
            }
        }
        MemoryAction::Forget { id: Some(id), .. } => {
            of_this_repository(&store, &memory, id)?;
            store.forget(id).map_err(bad_file)?;
            say(&format!("ocflow: forgot memory #{id}"));
        }
        MemoryAction::Forget { id: None, .. } => {
            let forgotten = store
                .forget_all(Some(memory.repo_key()))
                .map_err(bad_file)?;
            say(&format!(
                "ocflow: forgot {forgotten} failure(s) remembered of this repository"
            ));
        }
    }
    Ok(ExitCode::Success)
}

/// Memory `id`, when it is one of this repository's: another repository's is not shown nor
/// forgotten from here.
fn of_this_repository(store: &MemoryStore, memory: &Memory, id: i64) -> Result<Remembered> {
    store
        .get(id)
        .map_err(bad_file)?
        .filter(|r| r.repo == memory.repo_key())
        .ok_or_else(|| {
            Error::Usage(format!(
                "no memory #{id} of this repository; `ocflow memory list` shows their ids"
            ))
        })
}

fn bad_file(error: MemoryError) -> Error {
    let path = match &error {
        MemoryError::Database { path, .. }
        | MemoryError::Directory { path, .. }
        | MemoryError::Newer { path, .. } => path.clone(),
    };
    Error::BadStateFile {
        path,
        problem: error.to_string(),
    }
}

/// One line of `list`: id, when, the step, the error's class, how it ended, the strategy.
fn line_of(r: &Remembered) -> String {
    let failure = &r.failure;
    format!(
        "#{}  {}  {} ({})  {}  {}  then {}\n",
        r.id,
        r.created_at,
        printable(&failure.step),
        printable(&failure.operation),
        printable(&failure.error_class),
        r.outcome,
        printable(failure.strategy.as_deref().unwrap_or("-")),
    )
}

/// All of one memory, for `show`.
fn whole(r: &Remembered) -> String {
    let failure = &r.failure;
    let list = |items: &[String]| {
        if items.is_empty() {
            "  (none)\n".to_string()
        } else {
            items
                .iter()
                .map(|i| format!("  {}\n", printable(i)))
                .collect()
        }
    };
    format!(
        "memory #{}  ({})\nrepository: {}\nflow: {}  task: {}\nstep: {} ({})\nerror: {}\n\
         failing tests:\n{}files:\n{}error lines:\n{}then: {} {}\nended: {}\nlearned: {}\n",
        r.id,
        r.created_at,
        printable(&r.repo),
        printable(&failure.task_id),
        printable(&failure.task),
        printable(&failure.step),
        printable(&failure.operation),
        printable(&failure.error_class),
        list(&failure.tests),
        list(&failure.files),
        list(&failure.error_lines),
        printable(failure.strategy.as_deref().unwrap_or("-")),
        printable(failure.fix.as_deref().unwrap_or("")),
        r.outcome,
        printable(r.lesson.as_deref().unwrap_or("-")),
    )
}

fn as_json(r: &Remembered) -> Value {
    let failure = &r.failure;
    json!({
        "id": r.id,
        "repo": r.repo,
        "created_at": r.created_at,
        "task_id": failure.task_id,
        "task": failure.task,
        "step": failure.step,
        "operation": failure.operation,
        "error_class": failure.error_class,
        "tests": failure.tests,
        "files": failure.files,
        "error_lines": failure.error_lines,
        "strategy": failure.strategy,
        "fix": failure.fix,
        "outcome": r.outcome.to_string(),
        "lesson": r.lesson,
        "lesson_checked": r.lesson_checked,
    })
}
