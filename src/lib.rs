//! ocflow: orchestrates LLM coding flows. A flow (validated JSON) is run step by step, each
//! step in its own directory through the Python library `open_codex_lib`, with files staged
//! between steps, durable state for resume, and a reviewable diff at the end.
//!
//! `main.rs` only parses arguments and maps the result to an exit code; everything else is
//! here, so tests can drive it directly.

pub mod answer;
pub mod bridge;
pub mod cli;
pub mod commands;
pub mod config;
pub mod demo;
pub mod error;
pub mod events;
pub mod executor;
pub mod flow;
pub mod follow;
pub mod instructions;
pub mod journal;
pub mod llm;
pub mod operations;
pub mod orphans;
pub mod planner;
pub mod recovery;
pub mod repo_path;
pub mod review;
pub mod sandbox;
pub mod secret;
pub mod staging;
pub mod status;
pub mod summary;
pub mod validate;
pub mod workspace;

use cli::Cli;
use error::Result;

/// Resolves the configuration and runs the command; returns the exit code. `api_key` comes
/// from `secret::take_key_at_startup`.
pub fn run(cli: Cli, api_key: llm::ApiKey) -> Result<u8> {
    // The sandbox launcher needs no configuration, and must stay small before its exec.
    if let cli::Command::SandboxExec(args) = &cli.command {
        return Ok(sandbox::exec(&args.write, args.probe, &args.command));
    }
    let config = config::Config::resolve(&cli.global, api_key)?;
    commands::dispatch(&config, cli.command)
}
