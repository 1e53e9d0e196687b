//! `ocflow run --detach`: the flow runs in a process of its own session (no terminal, stdin
//! from /dev/null, its output in the task directory's `detached.log`), so a closed terminal or
//! a Ctrl-C sent to the caller's shell does not stop it. The caller gets the task id at once;
//! `ocflow wait ID` waits for the end and exits with the flow's code, which the detached run
//! leaves in the task directory (`exit_code`). The key reaches it the way every re-execution
//! gets it: through a pipe (`key::hand_over`), never through its environment, argv or a file.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::Stdio;

use crate::cli::args::RunArgs;
use crate::cli::child_command;
use crate::cli::config::Config;
use crate::cli::{progress, run, task_index};
use ocflow_core::llm::key::{self, ApiKey};
use ocflow_core::task::workspace::TaskDir;
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::event::{Event, Record};
use ocflow_model::exit::ExitCode;
use ocflow_model::output::{print_stdout, say};
use ocflow_model::status::now;

/// The detached run's stdout and stderr, in its task directory.
pub(crate) const LOG_FILE: &str = "detached.log";
/// The detached run's exit code, written when it ends.
pub(crate) const EXIT_CODE_FILE: &str = "exit_code";
/// The detached run's process id: `wait` tells a run still starting from one that died.
pub(crate) const PID_FILE: &str = "detached.pid";

/// Starts the run `args` describes in the background and returns once it is started.
pub(crate) fn start(config: &Config, args: &RunArgs, api_key: &ApiKey) -> Result<ExitCode> {
    // Said here: the detached run would not say them again (some are said once a session),
    // and its output goes to the log.
    for message in &config.warnings {
        let event = Event::Warning {
            message: message.clone(),
        };
        progress::show(&Record::now(now(), event), config.json);
    }
    if args.task.as_deref() == Some("-") {
        return Err(Error::Usage(
            "--detach reads nothing from stdin: give the task as an argument or with \
             --task-file FILE"
                .into(),
        ));
    }
    let task_text = match (
        &args.plan,
        run::read_task(args.task.clone(), args.task_file.as_deref())?,
    ) {
        (_, Some(text)) => text,
        (Some(plan), None) => task_of_plan(plan),
        (None, None) => {
            return Err(Error::Usage(
                "give a task, `ocflow run --detach \"add input validation to api.py\"`, or a \
                 flow, `ocflow run --detach --plan FLOW.json`"
                    .into(),
            ));
        }
    };
    let task_id = run::task_id_for(args.task_id.as_deref(), &config.workspace, &task_text)?;
    let task = TaskDir::new(&config.workspace, &task_id);
    // The run itself takes this directory over (it holds neither flow nor status yet).
    task.create()?;
    let log_path = task.file(LOG_FILE);
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&log_path)
        .io_context(|| format!("opening {}", log_path.display()))?;
    let exit_file = task.file(EXIT_CODE_FILE);
    // A code left by an earlier run of the same id must not end the next `wait` at once.
    let _ = std::fs::remove_file(&exit_file);
    let program = std::env::current_exe().io_context(|| "finding ocflow's own binary".into())?;
    let chosen = Some(task_id.as_str()).filter(|_| args.task_id.is_none());
    let argv = child_command::detached(chosen, &exit_file);
    let mut command = tokio::process::Command::new(program);
    command
        .args(argv)
        .stdin(Stdio::null())
        .stdout(
            log.try_clone()
                .io_context(|| "duplicating the log file".into())?,
        )
        .stderr(log);
    let pipe = key::hand_over(&mut command, api_key)
        .io_context(|| "handing the API key to the detached run".into())?;
    // SAFETY: between fork and exec the closure only calls setsid, which is
    // async-signal-safe. A session of its own: no controlling terminal whose hang-up or
    // Ctrl-C could reach the run, and a process group apart from the caller's.
    unsafe {
        command.pre_exec(|| rustix::process::setsid().map(drop).map_err(Into::into));
    }
    let child = command
        .as_std_mut()
        .spawn()
        .io_context(|| "starting the detached run".into())?;
    // The child holds its own copy of the pipe's reading end now.
    drop(pipe);
    let pid_path = task.file(PID_FILE);
    std::fs::write(&pid_path, format!("{}\n", child.id()))
        .io_context(|| format!("writing {}", pid_path.display()))?;
    task_index::remember(&task, &config.repo);
    if config.json {
        let event = Event::FlowStarted {
            task_id: task_id.clone(),
            task: task_text,
            task_dir: task.root.clone(),
            repo: config.repo.clone(),
            library: config.codex_lib.clone(),
        };
        progress::show(&Record::now(now(), event), true);
    } else {
        print_stdout(&format!("{task_id}\n"));
    }
    say(&format!(
        "ocflow: task {task_id} runs in the background (log: {}); `ocflow wait {task_id}` waits \
         for its end, `ocflow status {task_id}` shows it",
        log_path.display()
    ));
    Ok(ExitCode::Success)
}

/// Leaves a detached run's exit code where `wait` finds it, replacing the file whole.
pub(crate) fn record_exit(file: &Path, outcome: &Result<ExitCode>) {
    let code = match outcome {
        Ok(code) => code.code(),
        Err(err) => err.exit_code().code(),
    };
    let dir = file.parent().unwrap_or(Path::new("."));
    let written = tempfile::Builder::new()
        .prefix(".tmp-exit-")
        .tempfile_in(dir)
        .and_then(|mut temp| {
            temp.write_all(format!("{code}\n").as_bytes())?;
            temp.persist(file).map(drop).map_err(|err| err.error)
        });
    if let Err(err) = written {
        say(&format!(
            "ocflow: could not write {}: {err}",
            file.display()
        ));
    }
}

/// The task words of a flow file, for the task id; its file name when it has none.
fn task_of_plan(plan: &Path) -> String {
    std::fs::read(plan)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .and_then(|flow| flow.get("task")?.as_str().map(str::to_string))
        .unwrap_or_else(|| {
            plan.file_stem()
                .map_or_else(|| "flow".into(), |s| s.to_string_lossy().into_owned())
        })
}
