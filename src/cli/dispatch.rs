//! Runs the command the user asked for, on an async runtime where it needs one.

use crate::cli::args::Command;
use crate::cli::config::Config;
use crate::cli::{apply, demo, report, resume, review, run, skill, trust};
use crate::error::{Error, IoContext, Result};
use crate::exit::ExitCode;
use crate::model::event::{Event, Record};
use crate::model::status::now;
use crate::task::events;

/// Runs one command.
pub(crate) fn dispatch(config: &Config, command: Command) -> Result<ExitCode> {
    // Said before the command runs, to people (stderr) and headless callers (a warning event).
    for message in &config.warnings {
        let event = Event::Warning {
            message: message.clone(),
        };
        events::show(&Record::now(now(), event), config.json);
    }
    match command {
        Command::Run(args) => with_runtime(|| run::run(config, args)),
        Command::Plan(args) => with_runtime(|| run::plan(config, args)),
        Command::Demo => with_runtime(|| async {
            let (demo_config, args) = demo::prepare(config)?;
            let code = run::run(&demo_config, args).await?;
            demo::show(&demo_config)?;
            Ok(code)
        }),
        Command::Resume(args) => with_runtime(|| resume::resume(config, args)),
        Command::Status(args) => review::status(config, args),
        Command::List => review::list(config),
        Command::Diff(args) => review::diff(config, args),
        Command::Report(args) => report::report(config, args),
        Command::Apply(args) => apply::apply(config, args),
        Command::Undo(args) => apply::undo(config, args),
        Command::Trust(args) => trust::trust(config, args),
        Command::Skill(args) => skill::skill(config, args),
        Command::SandboxExec(_) | Command::Mcp | Command::Completions(_) | Command::Man => {
            Err(Error::internal(
                "sandbox-exec, mcp, completions and man run before the configuration is resolved",
            ))
        }
    }
}

/// Runs an async command on a fresh runtime. The runtime is not waited for on the way out: a
/// step interrupted by a signal may still be unwinding in its blocking thread.
fn with_runtime<F: Future<Output = Result<ExitCode>>>(
    command: impl FnOnce() -> F,
) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .io_context(|| "starting the async runtime".to_string())?;
    let code = runtime.block_on(command());
    runtime.shutdown_background();
    code
}
