//! `ocflow clean`: removes the tasks a user is done with — finished and applied, failed, with no
//! change, or succeeded with nothing to apply — or the tasks named, and says how much disk that
//! frees. A succeeded task whose changes were never applied stays unless `--unapplied` (its
//! changes are still to review); a resumable one (interrupted, paused, waiting) unless
//! `--unfinished`; `--older-than` keeps the recent ones. A task whose ocflow still runs is never
//! removed. `--dry-run` says what would go and removes nothing.

use crate::cli::args::CleanArgs;
use crate::cli::config::Config;
use crate::cli::tasks::{as_shown, find_task, task_dirs};
use ocflow_core::task::disk;
use ocflow_core::task::review;
use ocflow_core::task::state;
use ocflow_core::task::workspace::TaskDir;
use ocflow_model::error::{Error, Result};
use ocflow_model::exit::ExitCode;
use ocflow_model::output::{print_stdout, say};
use ocflow_model::status::{FlowState, FlowStatus};

/// `ocflow clean`.
pub(crate) fn clean(config: &Config, args: CleanArgs) -> Result<ExitCode> {
    let chosen = if args.tasks.is_empty() {
        done_with(config, &args)?
    } else {
        // Every name is checked before anything is removed.
        let mut named = Vec::new();
        for name in &args.tasks {
            let task = find_task(config, Some(name), false)?;
            let status = state::load_status(&task).ok();
            named.push((task, status));
        }
        named
    };
    let (mut count, mut bytes, mut in_use) = (0, 0, Vec::new());
    for (task, status) in &chosen {
        let state = status
            .as_ref()
            .map_or_else(|| "no status".to_string(), |s| s.state.to_string());
        let freed = if args.dry_run {
            disk::usage(&task.root)
        } else {
            // Under the task's lock: a flow still running (or resumed meanwhile) is left.
            let _lock = match task.lock() {
                Ok(lock) => lock,
                Err(Error::Locked { .. }) => {
                    say(&format!(
                        "ocflow: task {} is in use (its ocflow still runs): left as it is",
                        task.task_id
                    ));
                    in_use.push(task.task_id.clone());
                    continue;
                }
                Err(error) => return Err(error),
            };
            disk::remove(task)?
        };
        count += 1;
        bytes += freed;
        let verb = if args.dry_run {
            "would remove"
        } else {
            "removed"
        };
        if config.json {
            let kind = if args.dry_run {
                "task_would_be_removed"
            } else {
                "task_removed"
            };
            let line = serde_json::json!({"version": 1, "type": kind, "task_id": task.task_id,
                "state": state, "bytes": freed});
            print_stdout(&format!("{line}\n"));
        } else {
            print_stdout(&format!(
                "{verb} {} ({}): {state}\n",
                task.task_id,
                disk::describe(freed)
            ));
        }
    }
    say_total(config, &args, count, bytes, &in_use);
    Ok(if in_use.is_empty() {
        ExitCode::Success
    } else {
        ExitCode::Failure
    })
}

/// The workspace's tasks `args` select when none is named, oldest first.
fn done_with(config: &Config, args: &CleanArgs) -> Result<Vec<(TaskDir, Option<FlowStatus>)>> {
    let now = chrono::Utc::now();
    let mut chosen: Vec<(TaskDir, FlowStatus)> = task_dirs(config)?
        .into_iter()
        .map(|(task, status)| {
            let (status, _) = as_shown(&task, status);
            (task, status)
        })
        .filter(|(task, status)| {
            let old_enough = args.older_than.is_none_or(|age| {
                chrono::DateTime::parse_from_rfc3339(&status.updated_at).is_ok_and(|at| {
                    now.signed_duration_since(at)
                        .to_std()
                        .is_ok_and(|d| d >= age)
                })
            });
            old_enough && selected(task, status, args)
        })
        .collect();
    chosen.sort_by(|(_, a), (_, b)| a.updated_at.cmp(&b.updated_at));
    Ok(chosen
        .into_iter()
        .map(|(task, status)| (task, Some(status)))
        .collect())
}

/// Whether a task the user did not name goes: one that ended with nothing more to do, and,
/// when asked, one whose changes were never applied or one that could still be resumed.
fn selected(task: &TaskDir, status: &FlowStatus, args: &CleanArgs) -> bool {
    match status.state {
        FlowState::Failed | FlowState::NoChange => true,
        FlowState::Succeeded if status.applied_at.is_some() || args.unapplied => true,
        // Nothing to apply: a question answered, a check that passed.
        FlowState::Succeeded => state::load_flow_of(task, status)
            .and_then(|flow| review::changes(task, status, &flow))
            .is_ok_and(|changes| changes.is_empty()),
        FlowState::Interrupted | FlowState::Paused | FlowState::Waiting => args.unfinished,
        // Its ocflow still runs (`as_shown` made one whose ocflow is gone interrupted).
        FlowState::Running => false,
    }
}

/// The last line: how many tasks went (or would) and the disk freed; or why nothing did.
fn say_total(config: &Config, args: &CleanArgs, count: usize, bytes: u64, in_use: &[String]) {
    if config.json {
        let line = serde_json::json!({"version": 1, "type": "cleaned", "tasks": count,
            "bytes": bytes, "dry_run": args.dry_run, "in_use": in_use});
        print_stdout(&format!("{line}\n"));
        return;
    }
    let size = disk::describe(bytes);
    match (count, args.dry_run) {
        (0, _) if in_use.is_empty() => say(&format!(
            "ocflow: nothing to remove in {}: no finished task is done with (`--unapplied` takes \
             succeeded tasks whose changes were never applied, `--unfinished` resumable ones, \
             or name the tasks)",
            config.workspace.display()
        )),
        (_, true) => say(&format!(
            "ocflow: would remove {count} task(s), {size}; run it again without --dry-run to \
             remove them"
        )),
        (_, false) => say(&format!("ocflow: removed {count} task(s), freed {size}")),
    }
}
