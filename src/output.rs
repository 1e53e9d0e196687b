//! The one place that writes to the terminal: data to stdout, messages for people to stderr.
//! Library code never prints on its own; a closed stream (`ocflow … | head -1`) never stops a
//! flow, so write errors are ignored here.

use std::io::Write;

/// Writes a line for people to stderr.
pub fn say(line: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{line}");
}

/// Writes command output (data, not progress) to stdout.
#[allow(clippy::print_stdout)]
pub(crate) fn print_stdout(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}
