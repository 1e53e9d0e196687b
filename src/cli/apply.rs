//! `ocflow apply` and `ocflow undo`: a flow's changes written into the repository — the task
//! the user names, or the only one waiting; all of them or the files chosen; committed if
//! asked — and put back as they were.

use std::path::Path;

use crate::cli::args::{ApplyArgs, UndoArgs};
use crate::cli::config::Config;
use crate::cli::tasks::{find_task, task_dirs};
use crate::error::{Error, Result};
use crate::exit::ExitCode;
use crate::flow::path_rules::PathRules;
use crate::model::event::Event;
use crate::model::flow::Flow;
use crate::model::repo_path::RepoPath;
use crate::model::status::{FlowState, FlowStatus, now};
use crate::output::{printable, quoted_path, say};
use crate::task::apply::{self, Applied};
use crate::task::events::Events;
use crate::task::journal::Journal;
use crate::task::review::{self, Change};
use crate::task::workspace::{self, TaskDir};
use crate::task::{state, undo};

/// `ocflow apply`.
pub(crate) fn apply(config: &Config, args: ApplyArgs) -> Result<ExitCode> {
    let task = match &args.task {
        Some(id) => find_task(config, Some(id), false)?,
        None => the_only_one_waiting(config)?,
    };
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
    let flow = state::load_flow_of(&task, &flow_status)?;
    let changes = select(
        review::changes(&task, &flow_status, &flow)?,
        &args.only,
        &args.exclude,
    )?;
    let applied = apply_changes(&task, &flow_status, &flow, &changes, args.force)?;
    let mut events = Events::new(
        Journal::open(&task.file(workspace::JOURNAL_FILE))?,
        config.json,
    );
    let files = match &applied {
        Applied::Written(files) => files.clone(),
        _ => Vec::new(),
    };
    record_applied(&mut events, &mut flow_status, &task, applied)?;
    if args.commit && !files.is_empty() {
        commit(&flow_status.repo, &task, &flow_status, &files)?;
    }
    Ok(ExitCode::Success)
}

/// Writes `changes` of a succeeded, intact task into its repository, keeping what they replace
/// for `undo`.
pub(crate) fn apply_changes(
    task: &TaskDir,
    flow_status: &FlowStatus,
    flow: &Flow,
    changes: &[Change],
    force: bool,
) -> Result<Applied> {
    state::require_intact(task, flow_status, flow)?;
    let rules = PathRules::new(&flow_status.repo, &task.workspace());
    let kept = undo::keep(task, &rules.repo, changes)?;
    match apply::apply(&rules, &task.task_id, changes, force) {
        Ok(Applied::Written(files)) => Ok(Applied::Written(files)),
        // A failure while writing: the copies stay, in case undoing it failed too and
        // `ocflow undo --force` must put the files back.
        Err(error @ Error::Io { .. }) => Err(error),
        other => {
            kept.discard();
            other
        }
    }
}

/// Records an apply in the status and the journal, or says why nothing was written.
pub(crate) fn record_applied(
    events: &mut Events,
    flow_status: &mut FlowStatus,
    task: &TaskDir,
    applied: Applied,
) -> Result<()> {
    match applied {
        Applied::Written(files) => {
            flow_status.applied_at = Some(now());
            state::save_status(task, flow_status)?;
            events.emit(Event::ChangesApplied {
                task_id: task.task_id.clone(),
                files,
            })?;
            say(&format!(
                "ocflow: applied task {0}; `ocflow undo {0}` puts the files back as they were",
                task.task_id
            ));
            Ok(())
        }
        Applied::AlreadyThere => {
            say(&format!(
                "ocflow: the repository already holds the changes of task {}",
                task.task_id
            ));
            Ok(())
        }
        Applied::Nothing => {
            say(&format!(
                "ocflow: task {} changed no file; nothing to apply",
                task.task_id
            ));
            Ok(())
        }
    }
}

/// `ocflow undo`: puts back what the task's last apply replaced (all or nothing, refusing files
/// changed since unless forced).
pub(crate) fn undo(config: &Config, args: UndoArgs) -> Result<ExitCode> {
    let task = match &args.task {
        Some(id) => find_task(config, Some(id), false)?,
        None => the_last_applied(config)?,
    };
    let _lock = task.lock()?;
    let mut flow_status = state::load_status(&task)?;
    let Some(kept) = undo::last_apply(&task)? else {
        return Err(Error::Usage(format!(
            "task {} has no apply to undo",
            task.task_id
        )));
    };
    let rules = PathRules::new(&flow_status.repo, &task.workspace());
    let reversed = kept.reversed();
    let files: Vec<String> = match apply::apply(&rules, &task.task_id, &reversed, args.force)? {
        Applied::Written(files) => files,
        Applied::AlreadyThere | Applied::Nothing => Vec::new(),
    };
    kept.mark_undone(&rules.repo)?;
    // An earlier apply of the task (an `--only` part) may still be in effect.
    flow_status.applied_at = undo::last_apply(&task)?.map(|earlier| earlier.record.applied_at);
    state::save_status(&task, &mut flow_status)?;
    let mut events = Events::new(
        Journal::open(&task.file(workspace::JOURNAL_FILE))?,
        config.json,
    );
    events.emit(Event::ChangesUndone {
        task_id: task.task_id.clone(),
        files,
    })?;
    say(&format!(
        "ocflow: undid the apply of task {}; the files are as they were before it",
        task.task_id
    ));
    Ok(ExitCode::Success)
}

/// The changes `--only` and `--exclude` choose (a file, or every file below a directory); a
/// path that matches no change is an error listing the changed files.
fn select(changes: Vec<Change>, only: &[String], exclude: &[String]) -> Result<Vec<Change>> {
    let parse = |raw: &String| {
        RepoPath::parse(raw.trim_end_matches('/'))
            .map_err(|err| Error::Usage(format!("{raw}: {err}")))
    };
    let only: Vec<RepoPath> = only.iter().map(parse).collect::<Result<_>>()?;
    let exclude: Vec<RepoPath> = exclude.iter().map(parse).collect::<Result<_>>()?;
    for path in only.iter().chain(&exclude) {
        if !changes.iter().any(|c| c.path.is_within(path)) {
            let changed: Vec<String> = changes
                .iter()
                .map(|c| quoted_path(c.path.as_str()))
                .collect();
            return Err(Error::Usage(format!(
                "{path} matches none of the changed files: {}",
                changed.join(", ")
            )));
        }
    }
    Ok(changes
        .into_iter()
        .filter(|c| only.is_empty() || only.iter().any(|p| c.path.is_within(p)))
        .filter(|c| !exclude.iter().any(|p| c.path.is_within(p)))
        .collect())
}

/// Without a task id, apply only when exactly one succeeded flow waits to be applied.
fn the_only_one_waiting(config: &Config) -> Result<TaskDir> {
    let mut waiting: Vec<(TaskDir, FlowStatus)> = task_dirs(config)?
        .into_iter()
        .filter(|(_, s)| s.state == FlowState::Succeeded && s.applied_at.is_none())
        .collect();
    match waiting.len() {
        1 => Ok(waiting.remove(0).0),
        0 => Err(Error::Usage(format!(
            "no succeeded flow in {} waits to be applied; name a task: `ocflow apply ID`",
            config.workspace.display()
        ))),
        _ => {
            waiting.sort_by(|a, b| b.1.updated_at.cmp(&a.1.updated_at));
            let list: Vec<String> = waiting
                .iter()
                .map(|(task, s)| format!("  {}  {}", task.task_id, printable(&first_line(&s.task))))
                .collect();
            Err(Error::Usage(format!(
                "{} succeeded flows wait to be applied; name the one you reviewed, \
                 `ocflow apply ID`:\n{}",
                waiting.len(),
                list.join("\n")
            )))
        }
    }
}

/// Without a task id, undo the most recent apply in the workspace.
fn the_last_applied(config: &Config) -> Result<TaskDir> {
    task_dirs(config)?
        .into_iter()
        .filter_map(|(task, s)| s.applied_at.clone().map(|at| (at, task)))
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, task)| task)
        .ok_or_else(|| {
            Error::Usage(format!(
                "no applied flow in {}; nothing to undo",
                config.workspace.display()
            ))
        })
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() > 60 {
        format!("{}…", line.chars().take(59).collect::<String>())
    } else {
        line.to_string()
    }
}

/// `git commit` of exactly the applied files, with a message from the task and its summary.
fn commit(repo: &Path, task: &TaskDir, flow_status: &FlowStatus, files: &[String]) -> Result<()> {
    let summary = std::fs::read_to_string(task.file(workspace::SUMMARY_FILE)).unwrap_or_default();
    let body: Vec<&str> = summary
        .lines()
        .filter(|l| !l.starts_with('#'))
        .skip_while(|l| l.trim().is_empty())
        .take(20)
        .collect();
    let subject = first_line(&flow_status.task);
    let subject = if subject.is_empty() {
        format!("ocflow task {}", task.task_id)
    } else {
        subject
    };
    let message = format!(
        "{subject}\n\n{}\n\nApplied by ocflow from task {}.",
        body.join("\n").trim(),
        task.task_id
    );
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .current_dir(repo)
            .args(args)
            .args(["--"])
            .args(files)
            .output()
    };
    for args in [
        &["add", "-A"][..],
        &["commit", "--quiet", "--only", "-m", &message][..],
    ] {
        let output = git(args).map_err(|err| {
            Error::Usage(format!(
                "the changes are applied, but git could not run to commit them: {err}"
            ))
        })?;
        if !output.status.success() {
            return Err(Error::Usage(format!(
                "the changes are applied, but `git {}` failed: {}; commit them yourself",
                args[0],
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
    }
    say(&format!(
        "ocflow: committed {} file(s): {subject}",
        files.len()
    ));
    Ok(())
}
