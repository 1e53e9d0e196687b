//! ocflow: orchestrates LLM coding flows. A flow (validated JSON) is run step by step, each
//! step in its own directory through the Python library `open_codex_lib`, with files staged
//! between steps, durable state for resume, and a reviewable diff at the end.
//!
//! `main.rs` only parses arguments and maps the result to an exit code; everything else is
//! here, so tests can drive it directly.

pub mod cli;
pub mod engine;
pub mod error;
pub mod exit;
pub mod flow;
pub mod llm;
pub mod model;
pub mod output;
pub mod task;

use cli::args::{Cli, Command};
use error::Result;
use exit::ExitCode;

/// Resolves the configuration and runs the command; returns the exit code. `api_key` comes
/// from `llm::key::take_key_at_startup`.
pub fn run(cli: Cli, api_key: llm::key::ApiKey) -> Result<ExitCode> {
    // The sandbox launcher needs no configuration, and must stay small before its exec.
    if let Command::SandboxExec(args) = &cli.command {
        return Ok(engine::sandbox::exec(
            &args.write,
            args.probe,
            &args.command,
        ));
    }
    let demo = cli::args::LimitArgs::default();
    let limits = match &cli.command {
        Command::Run(args) => Some(&args.limits),
        Command::Resume(args) => Some(&args.limits),
        Command::Demo => Some(&demo),
        _ => None,
    };
    let config = cli::config::Config::resolve(&cli.global, limits, api_key)?;
    cli::dispatch::dispatch(&config, cli.command)
}
