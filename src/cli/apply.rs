//! `ocflow apply` and `ocflow undo`: a flow's changes written into the repository — the task
//! the user names, or the only one waiting; all of them or the files chosen; committed if
//! asked — and put back as they were.

use std::path::Path;

use crate::cli::args::{ApplyArgs, UndoArgs};
use crate::cli::config::Config;
use crate::cli::git::git_output;
use crate::cli::held_signals::HeldSignals;
use crate::cli::progress::Progress;
use crate::cli::tasks::{find_task, know_operations_of, task_dirs};
use ocflow_core::engine::hooks::HookPoint;
use ocflow_core::flow::path_rules::PathRules;
use ocflow_core::task::apply::{self, Applied};
use ocflow_core::task::apply_journal::{self, Stage};
use ocflow_core::task::events::Events;
use ocflow_core::task::journal::Journal;
use ocflow_core::task::review::{self, Change};
use ocflow_core::task::state;
use ocflow_core::task::workspace::{self, TaskDir};
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::event::Event;
use ocflow_model::event::{Record, Recovered};
use ocflow_model::exit::ExitCode;
use ocflow_model::flow::Flow;
use ocflow_model::output::{printable, quoted_path, say};
use ocflow_model::repo_path::RepoPath;
use ocflow_model::status::{FlowState, FlowStatus, now};

/// `ocflow apply`.
pub(crate) fn apply(config: &Config, args: ApplyArgs) -> Result<ExitCode> {
    let task = match &args.task {
        Some(id) => find_task(config, Some(id), false)?,
        None => the_only_one_waiting(config)?,
    };
    know_operations_of(config, &task);
    let _lock = task.lock()?;
    recover_locked(&task)?;
    let mut flow_status = state::load_status(&task)?;
    // Finished, having changed nothing: there is nothing to apply, and no resume would help.
    if flow_status.state == FlowState::NoChange {
        say(&format!(
            "ocflow: task {} finished without doing anything the task asked; it changed no \
             file, so there is nothing to apply",
            task.task_id
        ));
        return Ok(ExitCode::Success);
    }
    // A flow waiting for a person is answered first: its apply, or what comes before it.
    if flow_status.state == FlowState::Waiting {
        return Err(Error::Usage(format!(
            "task {} waits for a person's approval; answer it with `ocflow approve {0}` (which \
             applies a waiting apply) or `ocflow reject {0}`",
            task.task_id
        )));
    }
    if flow_status.state == FlowState::Failed && !args.only.is_empty() {
        // A failed flow can still hold good work: the files the user names, as the steps that
        // succeeded left them.
        let failed: Vec<&str> = flow_status
            .steps
            .iter()
            .filter(|s| s.status == ocflow_model::status::StepState::Failed)
            .map(|s| s.id.as_str())
            .collect();
        say(&format!(
            "ocflow: warning: task {} failed (step(s) {} failed); applying only the files named \
             with --only, as the steps that succeeded left them",
            task.task_id,
            failed.join(", ")
        ));
    } else if flow_status.state != FlowState::Succeeded {
        return Err(Error::Usage(format!(
            "task {} is {}, not succeeded; only a finished flow is applied whole. See `ocflow \
             status {0}`, then resume it, or apply the files of the steps that succeeded with \
             `ocflow apply {0} --only PATH`",
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
    // The user's hooks before an apply: one that blocks, and nothing is written.
    let event = serde_json::json!({
        "task_id": task.task_id,
        "task": flow_status.task,
        "files": changes.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(),
        "branch": args.branch,
    });
    if let Err(blocked) = config.hooks.run(HookPoint::BeforeApply, &event) {
        let mut events = Events::new(
            Journal::open(&task.file(workspace::JOURNAL_FILE))?,
            Progress::plain(config.json),
        );
        events.emit(Event::HookBlocked {
            point: blocked.point.name().into(),
            command: blocked.command.clone(),
            reason: blocked.reason.clone(),
            step: None,
        })?;
        return Err(Error::Usage(format!(
            "{blocked}; nothing was written (the task stays ready to apply)"
        )));
    }
    // On a branch of its own: nothing of the working tree or the index is touched.
    if let Some(name) = &args.branch {
        state::require_intact(&task, &flow_status, &flow)?;
        let message = commit_message(&task, &flow_status);
        crate::cli::branch::commit_on_branch(&task, &flow_status, &changes, name, &message)?;
        return Ok(ExitCode::Success);
    }
    // Held until the apply is recorded: a signal meanwhile puts back what was written.
    let held = HeldSignals::hold();
    let applied = apply_changes(&task, &flow_status, &flow, &changes, args.force, &|| {
        held.arrived()
    })?;
    let mut events = Events::new(
        Journal::open(&task.file(workspace::JOURNAL_FILE))?,
        Progress::plain(config.json),
    );
    let files = match &applied {
        Applied::Written(files) => files.clone(),
        _ => Vec::new(),
    };
    record_applied(&mut events, &mut flow_status, &task, applied)?;
    if held.arrived() {
        return Err(Error::ApplyInterrupted(format!(
            "a signal came as the apply of task {0} ended; every file was already in place \
             (`ocflow undo {0}` puts them back)",
            task.task_id
        )));
    }
    // The commit is part of the apply: journaled (the index entries it changes kept first),
    // and a signal meanwhile waits for it to end, so it is made or not, never half-staged.
    if args.commit
        && !files.is_empty()
        && let Some(mut kept) = apply_journal::last_apply(&task)?
    {
        kept.begin_commit(index_entries(&flow_status.repo, &files)?)?;
        let sha = commit(&flow_status.repo, &task, &flow_status, &files);
        let sha = match sha {
            Ok(sha) => sha,
            Err(error) => {
                restore_index(&flow_status.repo, &kept)?;
                kept.set_stage(Stage::Applied)?;
                return Err(error);
            }
        };
        kept.set_commit(sha)?;
        if held.arrived() {
            return Err(Error::ApplyInterrupted(format!(
                "a signal came as the apply of task {0} was committed; the commit is made \
                 (`ocflow undo {0}` removes it and puts the files back)",
                task.task_id
            )));
        }
    }
    drop(held);
    Ok(ExitCode::Success)
}

/// Writes `changes` of a succeeded, intact task into its repository, all or nothing, keeping
/// what they replace in the apply journal for a kill and for `undo`; `stop` is asked between
/// two files.
pub(crate) fn apply_changes(
    task: &TaskDir,
    flow_status: &FlowStatus,
    flow: &Flow,
    changes: &[Change],
    force: bool,
    stop: &dyn Fn() -> bool,
) -> Result<Applied> {
    state::require_intact(task, flow_status, flow)?;
    let rules = PathRules::new(&flow_status.repo, &task.workspace());
    apply::apply(&rules, task, changes, force, stop)
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
/// changed since unless forced), and removes the commit `apply --commit` made of them while it
/// is still HEAD.
pub(crate) fn undo(config: &Config, args: UndoArgs) -> Result<ExitCode> {
    let task = match &args.task {
        Some(id) => find_task(config, Some(id), false)?,
        None => the_last_applied(config)?,
    };
    know_operations_of(config, &task);
    let _lock = task.lock()?;
    recover_locked(&task)?;
    let mut flow_status = state::load_status(&task)?;
    let Some(mut kept) = apply_journal::last_apply(&task)? else {
        return Err(Error::Usage(format!(
            "task {} has no apply to undo",
            task.task_id
        )));
    };
    let rules = PathRules::new(&flow_status.repo, &task.workspace());
    match apply::check(&rules, &task.task_id, &kept.reversed(), args.force) {
        Err(Error::Drift { task_id, files }) => {
            return Err(Error::EditedSinceApply { task_id, files });
        }
        Err(other) => return Err(other),
        Ok(_) => {}
    }
    let commit = match kept.record.commit.clone() {
        Some(sha) => commit_to_remove(&rules.repo, &sha)?.then_some(sha),
        None => None,
    };
    let held = HeldSignals::hold();
    // Checked (or forced): an undo cut short is finished the same way, forced or not.
    kept.set_undoing(args.force)?;
    let restored = kept.restore(&rules, true)?;
    // The commit goes before the undo is recorded done, so a kill in between leaves an undo
    // the next command finishes, commit included.
    if let Some(sha) = &commit {
        uncommit(&rules.repo, sha, &kept.paths())?;
    }
    restore_index(&rules.repo, &kept)?;
    kept.set_stage(Stage::Undone)?;
    // An earlier apply of the task (an `--only` part) may still be in effect.
    flow_status.applied_at =
        apply_journal::last_apply(&task)?.map(|earlier| earlier.record.applied_at);
    state::save_status(&task, &mut flow_status)?;
    let mut events = Events::new(
        Journal::open(&task.file(workspace::JOURNAL_FILE))?,
        Progress::plain(config.json),
    );
    events.emit(Event::ChangesUndone {
        task_id: task.task_id.clone(),
        files: restored.files,
    })?;
    say(&format!(
        "ocflow: undid the apply of task {}; the files are as they were before it{}",
        task.task_id,
        match &commit {
            Some(sha) => format!(", and removed the commit {} it made", short(sha)),
            None => String::new(),
        }
    ));
    // Held until the undo is recorded: a signal then ends the command, the undo complete.
    if held.arrived() {
        return Err(Error::ApplyInterrupted(format!(
            "a signal came as the undo of task {} ended; the files are as they were before the \
             apply",
            task.task_id
        )));
    }
    Ok(ExitCode::Success)
}

/// Finishes what a killed `apply` or `undo` of any task in the workspace left half-done (see
/// `recover`); run first by every command that reads or changes tasks. A task another ocflow
/// holds is left to it. Problems are said, not raised: the command goes on.
pub(crate) fn recover_workspace(config: &Config) {
    let Ok(entries) = std::fs::read_dir(&config.workspace) else {
        return;
    };
    for task in entries.flatten().filter_map(|e| TaskDir::at(e.path())) {
        if let Err(err) = recover(&task) {
            say(&format!(
                "ocflow: warning: task {} has an apply that was cut short, and putting the \
                 repository back failed: {err:#}",
                task.task_id
            ));
        }
    }
}

/// Finishes what a killed `apply` or `undo` of `task` left, unless another ocflow holds it.
fn recover(task: &TaskDir) -> Result<()> {
    if apply_journal::unfinished(task)?.is_none() {
        return Ok(());
    }
    match task.lock() {
        Ok(_lock) => recover_locked(task),
        Err(Error::Locked { .. }) => Ok(()),
        Err(err) => Err(err),
    }
}

/// Finishes what a killed `apply` or `undo` of `task` (whose lock the caller holds) left: an
/// apply cut short is rolled back, or completed when every new file was already in place; an
/// undo cut short is finished. Said on stderr and in the task's journal.
fn recover_locked(task: &TaskDir) -> Result<()> {
    let Some(mut kept) = apply_journal::unfinished(task)? else {
        return Ok(());
    };
    let mut flow_status = state::load_status(task)?;
    let repo = flow_status.repo.clone();
    let rules = PathRules::new(&repo, &task.workspace());
    // Nothing is read or written through a path the journal should not name.
    kept.check_paths(&rules)?;
    let id = &task.task_id;
    let (outcome, restored) = match kept.record.stage {
        Stage::Committing => {
            // The killed apply's git may still be committing: its end is waited for.
            wait_for_git(&repo);
            // Made, if HEAD is the commit of this apply; else unstaged again.
            let message = git_output(&repo, &["log", "-1", "--format=%B"]).unwrap_or_default();
            let made = message.contains(&format!("Applied by ocflow from task {id}."));
            let outcome = if made {
                let sha = git_output(&repo, &["rev-parse", "HEAD"])?;
                kept.set_commit(sha)?;
                say(&format!(
                    "ocflow: the apply of task {id} was cut short after its commit was made; it \
                     is complete (`ocflow undo {id}` removes the commit and puts the files back)"
                ));
                Recovered::Committed
            } else {
                restore_index(&repo, &kept)?;
                kept.set_stage(Stage::Applied)?;
                say(&format!(
                    "ocflow: the commit of task {id}'s apply was cut short before it was made: \
                     the files stay applied and nothing of them is left staged (`git commit` \
                     them, or `ocflow undo {id}` puts them back)"
                ));
                Recovered::CommitRolledBack
            };
            (outcome, apply_journal::Restored::default())
        }
        Stage::Writing if kept.all_in_place(&repo)? => {
            kept.remove_leftovers(&repo);
            kept.set_stage(Stage::Applied)?;
            flow_status.applied_at = Some(kept.record.applied_at.clone());
            state::save_status(task, &mut flow_status)?;
            say(&format!(
                "ocflow: the apply of task {id} was cut short after every file was in place; \
                 it is complete (`ocflow undo {id}` puts the files back)"
            ));
            (Recovered::Completed, apply_journal::Restored::default())
        }
        Stage::Writing => {
            let restored = kept.restore(&rules, false)?;
            kept.set_stage(Stage::RolledBack)?;
            say(&format!(
                "ocflow: the apply of task {id} was cut short and is rolled back: the \
                 repository is as it was before it ({} file(s) put back). `ocflow apply {id}` \
                 applies it again",
                restored.files.len()
            ));
            (Recovered::RolledBack, restored)
        }
        _ => {
            let restored = kept.restore(&rules, kept.record.forced)?;
            if let Some(sha) = kept.record.commit.clone()
                && commit_to_remove(&repo, &sha).unwrap_or(false)
            {
                uncommit(&repo, &sha, &kept.paths())?;
            }
            kept.set_stage(Stage::Undone)?;
            flow_status.applied_at =
                apply_journal::last_apply(task)?.map(|earlier| earlier.record.applied_at);
            state::save_status(task, &mut flow_status)?;
            say(&format!(
                "ocflow: the undo of task {id} was cut short; finished it: the files are as \
                 they were before the apply"
            ));
            (Recovered::UndoFinished, restored)
        }
    };
    if !restored.left.is_empty() {
        say(&format!(
            "ocflow: warning: {} changed since, so they stay as they are",
            restored.left.join(", ")
        ));
    }
    let mut journal = Journal::open(&task.file(workspace::JOURNAL_FILE))?;
    journal.append(&Record::now(
        now(),
        Event::ApplyRecovered {
            task_id: id.clone(),
            outcome,
            files: restored.files,
            left: restored.left,
        },
    ))
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

/// A commit's message for the task: its first line, then the summary.
fn commit_message(task: &TaskDir, flow_status: &FlowStatus) -> String {
    let summary = std::fs::read_to_string(task.file(workspace::SUMMARY_FILE)).unwrap_or_default();
    let body: Vec<&str> = summary
        .lines()
        .filter(|l| !l.starts_with('#'))
        // What to do next was for before the apply, not for the history.
        .filter(|l| !l.starts_with("Review with `ocflow diff"))
        .skip_while(|l| l.trim().is_empty())
        .take(20)
        .collect();
    let subject = first_line(&flow_status.task);
    let subject = if subject.is_empty() {
        format!("ocflow task {}", task.task_id)
    } else {
        subject
    };
    format!(
        "{subject}\n\n{}\n\nApplied by ocflow from task {}.",
        body.join("\n").trim(),
        task.task_id
    )
}

/// `git commit` of exactly the applied files, with a message from the task and its summary;
/// returns the commit's id.
fn commit(
    repo: &Path,
    task: &TaskDir,
    flow_status: &FlowStatus,
    files: &[String],
) -> Result<String> {
    let message = commit_message(task, flow_status);
    let subject = message.lines().next().unwrap_or("").to_string();
    // File names, not patterns: `src/[ab].rs` must not also name `src/a.rs`.
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .current_dir(repo)
            .arg("--literal-pathspecs")
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
    git_output(repo, &["rev-parse", "HEAD"])
}

/// Waits (at most 30 s) while another git holds the repository's index: the one a killed
/// `apply --commit` started goes on to its end.
fn wait_for_git(repo: &Path) {
    let Ok(lock) = git_output(repo, &["rev-parse", "--git-path", "index.lock"]) else {
        return;
    };
    let lock = repo.join(lock);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while lock.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The index entries of `files` (`git ls-files --stage`), before an apply stages them.
fn index_entries(repo: &Path, files: &[String]) -> Result<String> {
    let mut args = vec!["--literal-pathspecs", "ls-files", "--stage", "-z", "--"];
    args.extend(files.iter().map(String::as_str));
    git_output(repo, &args)
}

/// Puts back the index entries the apply's files had before `apply --commit` staged them (none
/// for an apply that committed nothing): a file that was not in the index leaves it again.
fn restore_index(repo: &Path, kept: &apply_journal::Kept) -> Result<()> {
    let Some(before) = &kept.record.index_before else {
        return Ok(());
    };
    let paths = kept.paths();
    let mut remove = vec![
        "--literal-pathspecs",
        "rm",
        "--cached",
        "--force",
        "--quiet",
    ];
    remove.extend(["--ignore-unmatch", "--"]);
    remove.extend(paths.iter().map(String::as_str));
    git_output(repo, &remove)?;
    if before.is_empty() {
        return Ok(());
    }
    let mut child = std::process::Command::new("git")
        .current_dir(repo)
        .args(["update-index", "-z", "--index-info"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .io_context(|| "running git update-index".into())?;
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        stdin
            .write_all(before.as_bytes())
            .io_context(|| "writing to git update-index".into())?;
    }
    let done = child
        .wait_with_output()
        .io_context(|| "waiting for git update-index".into())?;
    if !done.status.success() {
        return Err(Error::Usage(format!(
            "putting back the index entries of {} failed: {}; `git reset -- <files>` unstages \
             them",
            paths.join(", "),
            String::from_utf8_lossy(&done.stderr).trim()
        )));
    }
    Ok(())
}

/// Runs git in `repo`; its trimmed output, or an error naming the command.
/// Whether `undo` removes the commit `sha` that `apply --commit` made: yes while it is HEAD;
/// with commits after it, `undo` refuses (they may build on it) and names `git revert`; gone
/// from the branch (amended, reset), there is no commit to remove.
fn commit_to_remove(repo: &Path, sha: &str) -> Result<bool> {
    let head = git_output(repo, &["rev-parse", "HEAD"]).unwrap_or_default();
    if head == sha {
        return Ok(true);
    }
    let on_branch = std::process::Command::new("git")
        .current_dir(repo)
        .args(["merge-base", "--is-ancestor", sha, "HEAD"])
        .status()
        .is_ok_and(|status| status.success());
    if on_branch {
        return Err(Error::Usage(format!(
            "the apply was committed as {}, and commits came after it, so nothing was undone; \
             undo it with `git revert {sha}`",
            short(sha)
        )));
    }
    Ok(false)
}

/// Removes HEAD, the commit `apply --commit` made, leaving the work tree as `undo` put it and
/// the index as it was before the apply (what the user had staged stays staged).
fn uncommit(repo: &Path, sha: &str, files: &[String]) -> Result<()> {
    git_output(repo, &["reset", "--quiet", "--soft", &format!("{sha}~1")]).map_err(|err| {
        Error::Usage(format!(
            "the files are put back, but removing the commit {} failed: {err}; remove it \
             with `git reset --soft {0}~1`",
            short(sha)
        ))
    })?;
    let mut args = vec!["--literal-pathspecs", "reset", "--quiet", "HEAD", "--"];
    args.extend(files.iter().map(String::as_str));
    git_output(repo, &args)?;
    Ok(())
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}
