//! `ocflow status` and `ocflow diff`: what a flow did (`apply` writes it into the repository).

use crate::cli::args::{StatusArgs, TaskArg};
use crate::cli::config::Config;
use crate::cli::tasks::find_task;
use crate::cli::{follow, status_table};
use crate::error::Result;
use crate::exit::ExitCode;
use crate::output::{print_stdout, say};
use crate::task::{review, state};

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
