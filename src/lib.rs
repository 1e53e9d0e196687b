//! ocflow: orchestrates LLM coding flows. A flow (validated JSON) is run step by step, each
//! step in its own directory through the Python library `open_codex_lib`, with files staged
//! between steps, durable state for resume, and a reviewable diff at the end.
//!
//! `main.rs` only parses arguments and maps the result to an exit code; everything else is
//! here, so tests can drive it directly.

mod cli;
mod engine;
mod error;
mod exit;
mod flow;
mod llm;
mod model;
mod output;
mod task;

use cli::args::Command;

// The library's interface: what `main.rs` needs. Everything else is internal to the crate, so
// the compiler reports what nothing uses.
pub use cli::args::Cli;
pub use error::{Error, Result};
pub use exit::ExitCode;
pub use llm::key::{ApiKey, take_key_at_startup};
pub use output::say;

/// Resolves the configuration and runs the command; returns the exit code. `api_key` comes
/// from `llm::key::take_key_at_startup`.
pub fn run(cli: Cli, api_key: ApiKey) -> Result<ExitCode> {
    // The sandbox launcher needs no configuration, and must stay small before its exec.
    if let Command::SandboxExec(args) = &cli.command {
        use engine::sandbox_exec;
        if args.probe {
            return Ok(match sandbox_exec::probe(args.probe_in.as_deref()) {
                Ok(kind) => {
                    output::print_stdout(&format!("{kind}\n"));
                    ExitCode::Success
                }
                Err(problem) => {
                    say(&format!("ocflow sandbox-exec: {problem}"));
                    ExitCode::CannotRun
                }
            });
        }
        let Some(caches) = args
            .cache
            .iter()
            .map(|arg| sandbox_exec::Cache::parse(arg))
            .collect::<Option<Vec<_>>>()
        else {
            say("ocflow sandbox-exec: give --cache as VARIABLE:PATH");
            return Ok(ExitCode::CannotRun);
        };
        let problem = sandbox_exec::exec(&sandbox_exec::ExecRequest {
            writable: &args.write,
            network: args.network,
            bwrap: args.bwrap.as_deref(),
            memory_mb: args.memory_mb,
            max_processes: args.max_processes,
            inner: args.inner,
            hidden: &args.hide,
            cgroup: args.cgroup.as_deref(),
            refuse_udp: args.refuse_udp,
            overlay: match (&args.overlay_on, &args.overlay_upper, &args.overlay_work) {
                (Some(target), Some(upper), Some(work)) => Some(sandbox_exec::Overlay {
                    target,
                    lower: &args.overlay_lower,
                    upper,
                    work,
                }),
                _ => None,
            },
            caches: &caches,
            cache_overlay: args.cache_overlay,
            private: args.private.as_deref(),
            dependencies: match (&args.dependencies_from, &args.dependencies_into) {
                (Some(from), Some(into)) if !args.dependency.is_empty() => {
                    Some(sandbox_exec::Dependencies {
                        from,
                        into,
                        dirs: &args.dependency,
                    })
                }
                _ => None,
            },
            command: &args.command,
        });
        say(&format!("ocflow sandbox-exec: {problem}"));
        return Ok(ExitCode::CannotRun);
    }
    match &cli.command {
        Command::Completions(args) => return cli::help_files::completions(args.shell),
        Command::Man => return cli::help_files::man_page(),
        _ => {}
    }
    // The MCP server resolves nothing itself: each tool runs this binary, which does.
    if let Command::Mcp = &cli.command {
        return cli::mcp::serve(&cli.global, api_key);
    }
    let demo = cli::args::LimitArgs::default();
    let limits = match &cli.command {
        Command::Run(args) => Some(&args.limits),
        Command::Resume(args) => Some(&args.limits),
        Command::Demo | Command::Doctor => Some(&demo),
        _ => None,
    };
    // Commands that start work on a repository need one; the others can find their task
    // through an explicit workspace or task directory.
    let needs_repo = match &cli.command {
        Command::Run(_) | Command::Plan(_) | Command::Trust(_) => true,
        Command::Demo
        | Command::Skill(_)
        | Command::SandboxExec(_)
        | Command::Mcp
        | Command::Completions(_)
        | Command::Man
        | Command::Doctor
        | Command::Operations => false,
        _ => cli.global.workspace.is_none(),
    };
    let config = cli::config::Config::resolve(&cli.global, needs_repo, limits, api_key)?;
    cli::dispatch::dispatch(&config, cli.command)
}

/// Says why a command failed: to people on stderr (with the context chain) and, with `--json`,
/// as an `error` event on stdout, so a headless caller reading only stdout learns it too.
pub fn report(error: &Error, json: bool) {
    say(&format!("ocflow: error: {error:#}"));
    if json {
        let event = model::event::Event::Error {
            code: error.code().into(),
            exit_code: error.exit_code().code(),
            message: format!("{error:#}"),
            hint: error.hint(),
        };
        task::events::show(
            &model::event::Record::now(model::status::now(), event),
            true,
        );
    }
}
