//! ocflow: orchestrates LLM coding flows. A flow (validated JSON) is run step by step, each
//! step in its own directory through the Python library `open_codex_lib`, with files staged
//! between steps, durable state for resume, and a reviewable diff at the end.
//!
//! `main.rs` only parses arguments and maps the result to an exit code; everything else is
//! here, so tests can drive it directly.

pub mod cli;
pub mod engine;
pub mod error;
pub mod flow;
pub mod llm;
pub mod model;
pub mod task;

use cli::args::Cli;
use error::Result;

/// Resolves the configuration and runs the command; returns the exit code. `api_key` comes
/// from `llm::key::take_key_at_startup`.
pub fn run(cli: Cli, api_key: llm::client::ApiKey) -> Result<u8> {
    // The sandbox launcher needs no configuration, and must stay small before its exec.
    if let cli::args::Command::SandboxExec(args) = &cli.command {
        return Ok(engine::sandbox::exec(&args.write, args.probe, &args.command));
    }
    let config = cli::config::Config::resolve(&cli.global, api_key)?;
    cli::commands::dispatch(&config, cli.command)
}
