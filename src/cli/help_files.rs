//! What shells and `man` read, generated from the command line's own definition (clap), so
//! they can never disagree with `--help`: `ocflow completions SHELL` and `ocflow man`.

use clap::CommandFactory;

use crate::cli::args::Cli;
use ocflow_model::error::{Error, Result};
use ocflow_model::exit::ExitCode;
use ocflow_model::output::print_stdout;

/// Prints the completion script for `shell`.
pub(crate) fn completions(shell: clap_complete::Shell) -> Result<ExitCode> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "ocflow", &mut script);
    print_stdout(&String::from_utf8_lossy(&script));
    Ok(ExitCode::Success)
}

/// Prints the manual page, in roff.
pub(crate) fn man_page() -> Result<ExitCode> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut page)
        .map_err(|err| Error::internal(format!("rendering the manual page: {err}")))?;
    print_stdout(&String::from_utf8_lossy(&page));
    Ok(ExitCode::Success)
}
