//! `ocflow status`, `ocflow diff` and `ocflow apply`: what a flow did, and writing its changes
//! into the repository.

use crate::cli::args::{ApplyArgs, StatusArgs, TaskArg};
use crate::cli::config::Config;
use crate::cli::launch::record_applied;
use crate::cli::tasks::find_task;
use crate::cli::{follow, status_table};
use crate::error::{Error, Result};
use crate::exit::ExitCode;
use crate::flow::path_rules::PathRules;
use crate::model::status::FlowState;
use crate::output::{print_stdout, say};
use crate::task::events::Events;
use crate::task::journal::Journal;
use crate::task::{apply, review, state, workspace};

/// `ocflow status`: the table, JSON, or the table again at every change (`--follow`).
pub(crate) fn status(config: &Config, args: StatusArgs) -> Result<ExitCode> {
    let task = find_task(config, args.task.as_deref(), false)?;
    if args.follow {
        return follow::follow(&task, config.json);
    }
    let flow_status = state::load_status(&task)?;
    let text = if config.json {
        serde_json::to_string(&flow_status).unwrap_or_default() + "\n"
    } else {
        status_table::render(&flow_status)
    };
    print_stdout(&text);
    Ok(ExitCode::Success)
}

/// `ocflow diff`: the flow's changes as a unified diff.
pub(crate) fn diff(config: &Config, args: TaskArg) -> Result<ExitCode> {
    let task = find_task(config, args.task.as_deref(), false)?;
    let flow_status = state::load_status(&task)?;
    let flow = state::load_flow(&task, flow_status.revision)?;
    state::require_intact(&task, &flow_status, &flow)?;
    let (changes, left_out) = review::changes_and_left_out(&task, &flow_status, &flow)?;
    if changes.is_empty() {
        say(&format!("ocflow: task {} changed no file", task.task_id));
    }
    if !left_out.is_empty() {
        say(&format!(
            "ocflow: left out {} file(s) the commands made that git ignores: {}",
            left_out.len(),
            left_out.join(", ")
        ));
    }
    let diff = review::unified_diff(&changes)?;
    if config.json {
        // One JSON line: the files by kind, and the unified diff itself.
        let files: Vec<serde_json::Value> = changes
            .iter()
            .map(|c| serde_json::json!({"path": c.path.as_str(), "kind": c.kind.name()}))
            .collect();
        let line = serde_json::json!({"type": "diff", "task_id": task.task_id, "files": files,
            "ignored": left_out, "diff": diff});
        print_stdout(&format!("{line}\n"));
    } else {
        print_stdout(&diff);
    }
    Ok(ExitCode::Success)
}

/// `ocflow apply`: the flow's changes written into the repository.
pub(crate) fn apply(config: &Config, args: ApplyArgs) -> Result<ExitCode> {
    let task = find_task(config, args.task.as_deref(), false)?;
    let _lock = task.lock()?;
    let mut flow_status = state::load_status(&task)?;
    if flow_status.state != FlowState::Succeeded {
        return Err(Error::Usage(format!(
            "task {} is {}, not succeeded; only a finished flow is applied. See `ocflow status \
             {0}`, then resume it",
            task.task_id, flow_status.state
        )));
    }
    // The changes go where the flow read; a different repository named here is a mistake.
    if config.repo_named && config.repo != flow_status.repo {
        return Err(Error::Usage(format!(
            "task {} was made from the repository {}, not {}; nothing was written. Apply it \
             there (`--repo {1}`), or run the task again on {2}",
            task.task_id,
            flow_status.repo.display(),
            config.repo.display()
        )));
    }
    let flow = state::load_flow(&task, flow_status.revision)?;
    state::require_intact(&task, &flow_status, &flow)?;
    let changes = review::changes(&task, &flow_status, &flow)?;
    let rules = PathRules::new(&flow_status.repo, &task.workspace());
    let applied = apply::apply(&rules, &task.task_id, &changes, args.force)?;
    let mut events = Events::new(
        Journal::open(&task.file(workspace::JOURNAL_FILE))?,
        config.json,
    );
    record_applied(&mut events, &mut flow_status, &task, applied)?;
    Ok(ExitCode::Success)
}
