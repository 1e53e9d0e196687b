//! The `ocflow` binary: parse the command line, run, map the outcome to an exit code.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = ocflow::cli::Cli::parse();
    match ocflow::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            ocflow::events::say(&format!("ocflow: error: {err:#}"));
            ExitCode::from(err.exit_code())
        }
    }
}
