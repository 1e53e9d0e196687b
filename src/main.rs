//! The `ocflow` binary: parse the command line, run, map the outcome to an exit code.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // First, while single-threaded: may re-execute the binary to drop the key from the environment.
    let api_key = ocflow::take_key_at_startup();
    let cli = ocflow::Cli::parse();
    let json = cli.json();
    match api_key.and_then(|api_key| ocflow::run(cli, api_key)) {
        Ok(code) => code.into(),
        Err(err) => {
            ocflow::report(&err, json);
            err.exit_code().into()
        }
    }
}
