//! The one place that writes to the terminal: data to stdout, messages for people to stderr.
//! Library code never prints on its own; a closed stream (`ocflow … | head -1`) never stops a
//! flow, so write errors are ignored here.
//!
//! Colour is written as ANSI styles and passed through `anstream`, which removes them where they
//! do not belong: not a terminal, `NO_COLOR`, `TERM=dumb` (and keeps them for `CLICOLOR_FORCE`).
//! While a flow runs at a terminal, a live display (`cli/live.rs`) may be installed: lines for
//! people then go above its live lines instead of through them.

use std::io::{IsTerminal, Write};
use std::sync::OnceLock;

use anstyle::{AnsiColor, Style};

use crate::model::event::Event;

/// A live display of a running flow, for people at a terminal.
pub(crate) trait Live: Send + Sync {
    /// Shows an event its own way; `false` leaves it to the plain progress line.
    fn show(&self, event: &Event) -> bool;
    /// Prints a line above the live lines.
    fn println(&self, line: &str);
}

static LIVE: OnceLock<Box<dyn Live>> = OnceLock::new();

/// Installs the live display for the rest of the process.
pub(crate) fn install_live(live: Box<dyn Live>) {
    let _ = LIVE.set(live);
}

/// The live display, when one is installed.
pub(crate) fn live() -> Option<&'static dyn Live> {
    LIVE.get().map(Box::as_ref)
}

/// Whether people at this terminal get live lines and colour on stderr: a terminal, and
/// colour not turned off (`NO_COLOR`, `TERM=dumb`).
pub(crate) fn stderr_is_live() -> bool {
    std::io::stderr().is_terminal()
        && anstream::AutoStream::choice(&std::io::stderr()) != anstream::ColorChoice::Never
}

/// Whether what goes to stdout may be coloured (a terminal, or `CLICOLOR_FORCE`; not
/// `NO_COLOR`).
pub(crate) fn stdout_colour() -> bool {
    anstream::AutoStream::choice(&std::io::stdout()) != anstream::ColorChoice::Never
}

/// Whether stdout is a terminal (a pager and colour make sense there).
pub(crate) fn stdout_is_terminal() -> bool {
    std::io::stdout().is_terminal()
}

/// Writes a line for people to stderr.
pub fn say(line: &str) {
    if let Some(live) = live() {
        live.println(line);
        return;
    }
    let mut stderr = anstream::stderr().lock();
    let _ = writeln!(stderr, "{line}");
}

/// Writes command output (data, not progress) to stdout.
#[allow(clippy::print_stdout)]
pub(crate) fn print_stdout(text: &str) {
    let mut stdout = anstream::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// Text from a model or a repository, safe to print at a terminal: control characters (an
/// escape sequence could move the cursor, fake a line or set the clipboard) are dropped.
pub(crate) fn printable(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || *c == '\t')
        .collect()
}

/// `text` in `style` (removed on the way out where colour does not belong).
pub(crate) fn paint(text: &str, style: Style) -> String {
    format!("{style}{text}{style:#}")
}

/// The styles ocflow uses, so every command colours alike.
pub(crate) mod styles {
    use super::*;

    pub(crate) const GOOD: Style = AnsiColor::Green.on_default();
    pub(crate) const BAD: Style = AnsiColor::Red.on_default().bold();
    pub(crate) const NOTE: Style = AnsiColor::Yellow.on_default();
    pub(crate) const NAME: Style = Style::new().bold();
    pub(crate) const DIM: Style = Style::new().dimmed();
    pub(crate) const ADDED: Style = AnsiColor::Green.on_default();
    pub(crate) const REMOVED: Style = AnsiColor::Red.on_default();
    pub(crate) const HUNK: Style = AnsiColor::Cyan.on_default();
}
