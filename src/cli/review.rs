//! `ocflow status` and `ocflow diff`: what a flow did (`apply` writes it into the repository).

use crate::cli::args::{DiffArgs, StatusArgs};
use crate::cli::config::Config;
use crate::cli::tasks::{as_shown, find_task, know_operations_of, task_dirs};
use crate::cli::{follow, status_table};
use ocflow_core::task::{review, state};
use ocflow_model::error::Result;
use ocflow_model::exit::ExitCode;
use ocflow_model::output::{self, paint, print_stdout, quoted_path, say, styles};

/// `ocflow status`: the table, JSON, or the table again at every change (`--follow`).
pub(crate) fn status(config: &Config, args: StatusArgs) -> Result<ExitCode> {
    let task = find_task(config, args.task.as_deref(), false)?;
    if args.follow {
        return follow::follow(&task, config.json);
    }
    let saved = state::load_status(&task)?;
    let saved_state = saved.state;
    let (flow_status, resume) = as_shown(&task, saved);
    let text = if config.json {
        let mut value = serde_json::to_value(&flow_status).unwrap_or_default();
        if let (Some(resume), Some(object)) = (&resume, value.as_object_mut()) {
            object.insert("saved_state".into(), serde_json::json!(saved_state));
            object.insert("resume_command".into(), serde_json::json!(resume));
        }
        format!("{value}\n")
    } else {
        status_table::render(&flow_status)
    };
    print_stdout(&text);
    if let (Some(resume), false) = (&resume, config.json) {
        say(&gone_hint(&task.task_id, resume));
    }
    Ok(ExitCode::Success)
}

/// What `status` and `list` say of a flow whose ocflow is gone.
fn gone_hint(task_id: &str, resume: &str) -> String {
    format!(
        "ocflow: task {task_id} was interrupted (the ocflow running it is gone); continue it \
         with `{resume}`"
    )
}

/// `ocflow list`: the workspace's tasks, newest first, with the disk each holds (with `--json`,
/// one line per task).
pub(crate) fn list(config: &Config) -> Result<ExitCode> {
    let mut tasks: Vec<_> = task_dirs(config)?
        .into_iter()
        .map(|(task, status)| {
            let bytes = ocflow_core::task::disk::usage(&task.root);
            let (status, resume) = as_shown(&task, status);
            (status, resume, bytes)
        })
        .collect();
    tasks.sort_by(|(a, ..), (b, ..)| b.updated_at.cmp(&a.updated_at));
    if config.json {
        for (status, resume, bytes) in &tasks {
            let mut line = serde_json::json!({"version": 1, "type": "task",
                "task_id": status.task_id, "state": status.state, "task": status.task,
                "created_at": status.created_at, "updated_at": status.updated_at,
                "applied_at": status.applied_at, "bytes": bytes});
            if let Some(resume) = resume {
                line["resume_command"] = serde_json::json!(resume);
            }
            print_stdout(&format!("{line}\n"));
        }
    } else if tasks.is_empty() {
        say(&format!(
            "ocflow: no tasks in {}",
            config.workspace.display()
        ));
    } else {
        let rows: Vec<_> = tasks
            .iter()
            .map(|(status, _, bytes)| (status.clone(), *bytes))
            .collect();
        print_stdout(&status_table::render_list(&rows, chrono::Utc::now()));
        for (status, resume, _) in &tasks {
            if let Some(resume) = resume {
                say(&gone_hint(&status.task_id, resume));
            }
        }
        let total: u64 = tasks.iter().map(|(.., bytes)| bytes).sum();
        say(&format!(
            "ocflow: {} task(s) hold {} in {}; `ocflow clean --dry-run` shows what can go",
            tasks.len(),
            ocflow_core::task::disk::describe(total),
            config.workspace.display()
        ));
    }
    Ok(ExitCode::Success)
}

/// `ocflow diff`: the flow's changes as a unified diff.
pub(crate) fn diff(config: &Config, args: DiffArgs) -> Result<ExitCode> {
    let task = find_task(config, args.task.as_deref(), false)?;
    know_operations_of(config, &task);
    let flow_status = state::load_status(&task)?;
    let flow = state::load_flow_of(&task, &flow_status)?;
    state::require_intact(&task, &flow_status, &flow)?;
    let (changes, left_out) = review::changes_and_left_out(&task, &flow_status, &flow)?;
    if changes.is_empty() {
        say(&format!("ocflow: task {} changed no file", task.task_id));
    }
    if !left_out.is_empty() {
        say(&format!(
            "ocflow: left out {} file(s) the commands made that git ignores: {}",
            left_out.len(),
            left_out
                .iter()
                .map(|p| quoted_path(p))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let diff = review::unified_diff(&changes)?;
    if config.json {
        // One JSON line: the files by kind, and the unified diff itself.
        let files: Vec<serde_json::Value> = changes
            .iter()
            .map(|c| serde_json::json!({"path": c.path.as_str(), "kind": c.kind.name()}))
            .collect();
        let line = serde_json::json!({"version": 1, "type": "diff", "task_id": task.task_id,
            "files": files, "ignored": left_out, "diff": diff});
        print_stdout(&format!("{line}\n"));
    } else if args.stat {
        print_stdout(&stat_text(&review::diff_stat(&changes)?));
    } else {
        page(&colour_diff(&diff));
    }
    Ok(ExitCode::Success)
}

/// `git diff --stat`'s shape: each file with its lines added and removed, then the totals.
fn stat_text(stat: &[review::FileStat]) -> String {
    let names: Vec<String> = stat.iter().map(|f| quoted_path(&f.path)).collect();
    let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    let (mut added, mut removed) = (0, 0);
    for (file, name) in stat.iter().zip(&names) {
        let counts = match file.lines {
            Some((a, r)) => {
                added += a;
                removed += r;
                format!(
                    "{} {}",
                    paint(&format!("+{a}"), styles::ADDED),
                    paint(&format!("-{r}"), styles::REMOVED)
                )
            }
            None => "binary".into(),
        };
        out.push_str(&format!(" {name:<width$} | {counts}\n"));
    }
    out.push_str(&format!(
        " {} file(s) changed, {added} insertion(s)(+), {removed} deletion(s)(-)\n",
        stat.len()
    ));
    out
}

/// The diff's lines coloured as git colours them.
fn colour_diff(diff: &str) -> String {
    diff.lines()
        .map(|line| {
            let header = ["diff --git", "+++", "---", "new file", "deleted file"];
            let style = if header.iter().any(|h| line.starts_with(h)) {
                Some(styles::NAME)
            } else if line.starts_with('+') {
                Some(styles::ADDED)
            } else if line.starts_with('-') {
                Some(styles::REMOVED)
            } else if line.starts_with("@@") {
                Some(styles::HUNK)
            } else {
                None
            };
            let line = style.map_or(line.to_string(), |s| paint(line, s));
            line + "\n"
        })
        .collect()
}

/// Shows `text` through the user's pager at a terminal (`PAGER`, else `less -FRX`, as git
/// does), straight to stdout otherwise or when no pager runs.
fn page(text: &str) {
    if !output::stdout_is_terminal() {
        print_stdout(text);
        return;
    }
    let pager = std::env::var("PAGER").unwrap_or_else(|_| "less".into());
    let mut command = std::process::Command::new("sh");
    command
        .args(["-c", &pager])
        .stdin(std::process::Stdio::piped());
    if std::env::var_os("LESS").is_none() {
        command.env("LESS", "FRX");
    }
    let Ok(mut child) = command.spawn() else {
        print_stdout(text);
        return;
    };
    // The pager shows the text at the terminal, so it gets it terminal-safe (a file's content
    // may hold escape sequences; only colour passes), without colour where colour is off.
    let text = output::terminal_safe(text);
    let text = if output::stdout_colour() {
        text.into_owned()
    } else {
        anstream::adapter::strip_str(&text).to_string()
    };
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        let _ = stdin.write_all(text.as_bytes());
    }
    let _ = child.wait();
}
