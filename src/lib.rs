//! ocflow: orchestrates LLM coding flows. A flow (validated JSON) is run step by step, each
//! step in its own directory through the Python library `open_codex_lib`, with files staged
//! between steps, durable state for resume, and a reviewable diff at the end.
//!
//! This package is the command line (`cli/`) over the layer crates in `crates/`: `ocflow-core`
//! (flows, tasks, the LLM client, the engine), `ocflow-sandbox` (the command launcher) and
//! `ocflow-model` (the data, errors and exit codes). `main.rs` only parses arguments and maps the
//! result to an exit code.

mod cli;

use cli::args::Command;
use cli::needs::{Limits, Repository};

// The library's interface: what `main.rs` needs. Everything else is internal to the crate, so
// the compiler reports what nothing uses.
pub use cli::args::Cli;
pub use ocflow_core::llm::key::{ApiKey, take_key_at_startup};
pub use ocflow_model::error::{Error, Result};
pub use ocflow_model::exit::ExitCode;
pub use ocflow_model::output::say;

/// Resolves the configuration and runs the command; returns the exit code. `api_key` comes
/// from `llm::key::take_key_at_startup`.
pub fn run(mut cli: Cli, api_key: ApiKey) -> Result<ExitCode> {
    // The sandbox launcher needs no configuration, and must stay small before its exec.
    if let Command::SandboxExec(args) = &cli.command {
        return Ok(match ocflow_sandbox::run("ocflow sandbox-exec", args) {
            0 => ExitCode::Success,
            _ => ExitCode::CannotRun,
        });
    }
    // What the subcommand needs, declared once (`cli::needs`).
    let needs = cli.command.needs();
    if needs.early {
        return match &cli.command {
            Command::Completions(args) => cli::help_files::completions(args.shell),
            Command::Man => cli::help_files::man_page(),
            // The MCP server resolves nothing itself: each tool runs this binary, which does.
            Command::Mcp => cli::mcp::serve(&cli.global, api_key),
            Command::Acp(args) => cli::acp::serve(&cli.global, args, api_key),
            Command::List(_) => cli::task_index::list_all(cli.global.json),
            other => Err(Error::internal(format!(
                "{other:?} is declared to run early and has no early start"
            ))),
        };
    }
    // A task named by id or by directory is found from any directory (the user's task index).
    let named_task = needs.task.map(str::to_string);
    let repository = needs.repository;
    cli::task_index::locate(&mut cli.global, named_task.as_deref())?;
    if let Command::Batch(args) = &mut cli.command {
        args.forwarded = cli::batch::forwarded_flags(&cli.global)?;
    }
    if let Command::Eval(args) = &mut cli.command {
        args.forwarded = cli::batch::forwarded_flags(&cli.global)?;
    }
    let detached_key = match &cli.command {
        Command::Run(args) if args.detach => Some(api_key.clone()),
        _ => None,
    };
    let configured = cli::args::LimitArgs::default();
    let limits = match cli.command.needs().limits {
        Limits::Given(limits) => Some(limits),
        Limits::Configured => Some(&configured),
        Limits::No => None,
    };
    // Commands that start work on a repository need one; the others can find their task
    // through an explicit workspace or task directory.
    let needs_repo = match repository {
        Repository::Required => true,
        Repository::UnlessWorkspace => cli.global.workspace.is_none(),
        Repository::No => false,
    };
    let config = cli::config::Config::resolve(&cli.global, needs_repo, limits, api_key)?;
    if let (Command::Run(args), Some(key)) = (&cli.command, &detached_key) {
        return cli::detach::start(&config, args, key);
    }
    let exit_code_file = match &cli.command {
        Command::Run(args) => args.exit_code_file.clone(),
        _ => None,
    };
    let outcome = cli::dispatch::dispatch(&config, cli.command);
    if let Some(file) = exit_code_file {
        cli::detach::record_exit(&file, &outcome);
    }
    outcome
}

/// Says why a command failed: to people on stderr (with the context chain) and, with `--json`,
/// as an `error` event on stdout, so a headless caller reading only stdout learns it too.
pub fn report(error: &Error, json: bool) {
    say(&format!("ocflow: error: {error:#}"));
    if json {
        let event = ocflow_model::event::Event::Error {
            code: error.code().into(),
            exit_code: error.exit_code().code(),
            message: format!("{error:#}"),
            hint: error.hint(),
        };
        cli::progress::show(
            &ocflow_model::event::Record::now(ocflow_model::status::now(), event),
            true,
        );
    }
}
