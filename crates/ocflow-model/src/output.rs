//! The one place that writes to the terminal: data to stdout, messages for people to stderr.
//! Library code never prints on its own; a closed stream (`ocflow … | head -1`) never stops a
//! flow, so write errors are ignored here.
//!
//! Colour is written as ANSI styles and passed through `anstream`, which removes them where they
//! do not belong: not a terminal, `NO_COLOR`, `TERM=dumb` (and keeps them for `CLICOLOR_FORCE`).
//! While a flow runs at a terminal, a live display (`cli/live.rs`) holds the last lines of
//! stderr: lines for people then go above its live lines instead of through them. Showing an
//! event is not done here (the CLI's `cli/progress.rs` owns it); only where a line lands is.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, OnceLock};

use anstyle::{AnsiColor, Style};

/// The live lines of a display at the bottom of stderr, which other lines must go above.
pub trait LiveLines: Send + Sync {
    /// Prints a line above the live lines.
    fn println(&self, line: &str);
}

/// Process-wide because anything may say a line while the display runs (the engine's own
/// warnings, the CLI's notes), and a line written past it would tear its live lines.
static LIVE_LINES: OnceLock<Arc<dyn LiveLines>> = OnceLock::new();

/// Makes every line for people go above `live` for the rest of the process.
pub fn install_live_lines(live: Arc<dyn LiveLines>) {
    let _ = LIVE_LINES.set(live);
}

/// Whether people at this terminal get live lines and colour on stderr: a terminal, and
/// colour not turned off (`NO_COLOR`, `TERM=dumb`).
pub fn stderr_is_live() -> bool {
    std::io::stderr().is_terminal()
        && anstream::AutoStream::choice(&std::io::stderr()) != anstream::ColorChoice::Never
}

/// Whether what goes to stdout may be coloured (a terminal, or `CLICOLOR_FORCE`; not
/// `NO_COLOR`).
pub fn stdout_colour() -> bool {
    anstream::AutoStream::choice(&std::io::stdout()) != anstream::ColorChoice::Never
}

/// Whether stdout is a terminal (a pager and colour make sense there).
pub fn stdout_is_terminal() -> bool {
    std::io::stdout().is_terminal()
}

/// Writes a line for people to stderr, made [`terminal_safe`].
pub fn say(line: &str) {
    let line = terminal_safe(line);
    if let Some(live) = LIVE_LINES.get() {
        live.println(&line);
        return;
    }
    // One write per line: anstream writes the pieces between colours one by one when it strips
    // them (stderr is unbuffered), which costs a flow of 1000 steps 14,000 calls and lets the
    // lines of processes sharing the stream (a batch's flows) cut into each other.
    let mut text = Vec::with_capacity(line.len() + 1);
    let mut stream =
        anstream::AutoStream::new(&mut text, anstream::AutoStream::choice(&std::io::stderr()));
    let _ = writeln!(stream, "{line}");
    let _ = std::io::stderr().lock().write_all(&text);
}

/// Writes command output (data, not progress) to stdout: [`terminal_safe`] at a terminal, as it
/// is through a pipe (a diff for `git apply`, JSON lines, whose strings are escaped anyway).
#[allow(clippy::print_stdout)]
pub fn print_stdout(text: &str) {
    let text = if stdout_is_terminal() {
        terminal_safe(text)
    } else {
        text.into()
    };
    let mut stdout = anstream::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// The last guard before a terminal, for text that mixes ocflow's own styles with anything: line
/// breaks, tabs and colour (SGR: `ESC [ digits ; m`) pass, every other control character and
/// escape sequence and the bidirectional overrides are dropped. Untrusted pieces are also made
/// [`printable`] where they are put in a line (which drops their colour too).
pub fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let plain = |c: char| c == '\n' || c == '\t' || !is_unsafe(c);
    if text.chars().all(plain) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '\u{1b}' {
            let params = rest[1..].strip_prefix('[').map(|after| {
                after
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == ';')
            });
            if let Some(params) = params {
                let length = 2 + params.count();
                if rest[length..].starts_with('m') {
                    out.push_str(&rest[..=length]);
                    rest = &rest[length + 1..];
                    continue;
                }
            }
        }
        if plain(c) {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out.into()
}

/// Text from a model, a task or a repository, safe to print at a terminal on one line: control
/// characters (C0, DEL, C1: an escape sequence could move the cursor, fake a line or set the
/// clipboard) and bidirectional overrides (which show a name reversed) are dropped. Every
/// untrusted string printed for people goes through here or [`printable_lines`], file names
/// through [`quoted_path`].
pub fn printable(text: &str) -> String {
    text.chars()
        .filter(|c| *c == '\t' || !is_unsafe(*c))
        .collect()
}

/// [`printable`], keeping the line breaks of a text shown on several lines (a task).
pub fn printable_lines(text: &str) -> String {
    text.chars()
        .filter(|c| *c == '\t' || *c == '\n' || !is_unsafe(*c))
        .collect()
}

/// A character that must not reach a terminal as it is: a control character, or one that
/// reorders the text around it (U+061C, U+200E-200F, U+202A-202E, U+2066-2069).
fn is_unsafe(c: char) -> bool {
    let reordering = matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}')
        || ('\u{202A}'..='\u{202E}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c);
    c.is_control() || reordering
}

/// A file name as git prints it (`core.quotePath`): as it is when it is plain, otherwise in
/// double quotes with C escapes (`\n`, `\t`, `\"`, `\\`) and the UTF-8 bytes of every other
/// unsafe character in octal. A newline in a name then cannot fake a diff line, nor an
/// override show it reversed; `git apply` reads the quoted form.
pub fn quoted_path(name: &str) -> String {
    if !name.chars().any(|c| c == '"' || c == '\\' || is_unsafe(c)) {
        return name.to_string();
    }
    let mut out = String::from("\"");
    for c in name.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{b}' => out.push_str("\\v"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if is_unsafe(c) => {
                let mut bytes = [0; 4];
                for byte in c.encode_utf8(&mut bytes).bytes() {
                    out.push_str(&format!("\\{byte:03o}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `text` in `style` (removed on the way out where colour does not belong).
pub fn paint(text: &str, style: Style) -> String {
    format!("{style}{text}{style:#}")
}

/// The styles ocflow uses, so every command colours alike.
pub mod styles {
    use super::*;

    pub const GOOD: Style = AnsiColor::Green.on_default();
    pub const BAD: Style = AnsiColor::Red.on_default().bold();
    pub const NOTE: Style = AnsiColor::Yellow.on_default();
    pub const NAME: Style = Style::new().bold();
    pub const DIM: Style = Style::new().dimmed();
    pub const ADDED: Style = AnsiColor::Green.on_default();
    pub const REMOVED: Style = AnsiColor::Red.on_default();
    pub const HUNK: Style = AnsiColor::Cyan.on_default();
}

/// A fence of backticks longer than any run of them in `text`, so the text cannot close it
/// early (a file or a command's output put in a Markdown block).
pub fn fence_for(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_quoted_as_git_quotes_them() {
        assert_eq!(quoted_path("src/main.rs"), "src/main.rs");
        assert_eq!(quoted_path("résumé.txt"), "résumé.txt");
        assert_eq!(quoted_path("a\nb.txt"), r#""a\nb.txt""#);
        assert_eq!(quoted_path("say \"hi\"\\x"), r#""say \"hi\"\\x""#);
        assert_eq!(quoted_path("\u{202E}txt.exe"), r#""\342\200\256txt.exe""#);
        assert_eq!(quoted_path("e\u{1b}[2Jx\u{7f}"), r#""e\033[2Jx\177""#);
    }

    #[test]
    fn only_colour_and_line_breaks_reach_a_terminal() {
        let red = paint("red", styles::BAD);
        let text = format!("{red}\n\tx\u{1b}]52;c;aGk=\u{7}\u{1b}[2J\u{1b}[1;31my\u{202E}z\r");
        assert_eq!(
            terminal_safe(&text),
            format!("{red}\n\tx]52;c;aGk=[2J\u{1b}[1;31myz")
        );
        assert!(matches!(
            terminal_safe("plain\n"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn printable_text_has_no_control_or_reordering_characters() {
        let text = "fix\u{1b}]52;c;aGk=\u{7}\u{9b}31m it\u{202E}gnp.exe\tnow\r\nthen";
        assert_eq!(printable(text), "fix]52;c;aGk=31m itgnp.exe\tnowthen");
        assert_eq!(
            printable_lines(text),
            "fix]52;c;aGk=31m itgnp.exe\tnow\nthen"
        );
    }
}
