//! `ocflow mcp`'s stdio: every line the client sends is checked before rmcp reads it. rmcp drops
//! a line that is not JSON, or is too long, without a word, and a client waiting for its answer
//! waits forever. Here a line that is not UTF-8 JSON is answered with a JSON-RPC parse error
//! (-32700, id null) and a line over [`LINE_LIMIT`] with an invalid-request error (-32600, with
//! the request's id when the line's start shows it); either way the server goes on serving.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream,
    WriteHalf,
};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

/// The longest request line accepted. A task is at most 1 MiB (`run`'s limit), so 8 MiB leaves
/// room for JSON escaping (up to six bytes a character) while a 60 MB line is refused without
/// being held in memory.
pub(crate) const LINE_LIMIT: usize = 8 * 1024 * 1024;

/// How much of a refused line is kept to find its id.
const KEPT_START: usize = 4096;

/// JSON-RPC's code for input that is not JSON.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for a request that cannot be taken.
const INVALID_REQUEST: i64 = -32600;

/// The process's stdin and stdout, guarded: rmcp serves over the returned stream; the handle
/// ends once the last answer rmcp gave is written.
pub(crate) fn stdio() -> (DuplexStream, JoinHandle<()>) {
    guard(tokio::io::stdin(), tokio::io::stdout(), LINE_LIMIT)
}

/// `input` and `output`, guarded as [`stdio`] guards the process's own, with lines up to `limit`.
pub(crate) fn guard<R, W>(input: R, output: W, limit: usize) -> (DuplexStream, JoinHandle<()>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (server_side, our_side) = tokio::io::duplex(64 * 1024);
    let (from_server, to_server) = tokio::io::split(our_side);
    // One writer at a time, one whole line each: an error answer never splits rmcp's.
    let output = Arc::new(Mutex::new(output));
    tokio::spawn(inbound(
        BufReader::new(input),
        to_server,
        output.clone(),
        limit,
    ));
    let outbound = tokio::spawn(outbound(BufReader::new(from_server), output));
    (server_side, outbound)
}

/// The client's lines: good ones on to rmcp, the others answered here. At the client's end,
/// rmcp sees its end too.
async fn inbound<R, W>(
    mut input: R,
    mut server: WriteHalf<DuplexStream>,
    output: Arc<Mutex<W>>,
    limit: usize,
) where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut line = Vec::new();
    loop {
        line.clear();
        let answer = match read_line(&mut input, &mut line, limit).await {
            Ok(Line::End) | Err(_) => break,
            Ok(Line::Whole) => match check(&line) {
                Checked::Good => {
                    if !line.ends_with(b"\n") {
                        line.push(b'\n');
                    }
                    if server.write_all(&line).await.is_err() || server.flush().await.is_err() {
                        break;
                    }
                    continue;
                }
                Checked::Blank => continue,
                Checked::Bad(message) => error_answer(Value::Null, PARSE_ERROR, &message),
            },
            Ok(Line::TooLong(length)) => error_answer(
                request_id(&line),
                INVALID_REQUEST,
                &format!(
                    "invalid request: the line is {length} bytes, over the {} MiB limit for one \
                     message; put a long task in a file in the repository and give a short task \
                     that names it",
                    limit / (1024 * 1024)
                ),
            ),
        };
        if write_line(&output, &answer).await.is_err() {
            break;
        }
    }
    let _ = server.shutdown().await;
}

/// rmcp's answers, a whole line at a time.
async fn outbound<R, W>(mut from_server: R, output: Arc<Mutex<W>>)
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut line = Vec::new();
    loop {
        line.clear();
        match from_server.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if write_line(&output, &line).await.is_err() {
                    break;
                }
            }
        }
    }
}

async fn write_line<W: AsyncWrite + Unpin>(output: &Mutex<W>, line: &[u8]) -> std::io::Result<()> {
    let mut output = output.lock().await;
    output.write_all(line).await?;
    output.flush().await
}

/// A JSON-RPC error response, as one line.
fn error_answer(id: Value, code: i64, message: &str) -> Vec<u8> {
    let answer = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    let mut line = answer.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// What [`read_line`] found.
#[derive(Debug, PartialEq)]
enum Line {
    /// A line (its newline included, unless the input ended first).
    Whole,
    /// A line over the limit, of this many bytes; only its start was kept.
    TooLong(usize),
    /// The input ended.
    End,
}

/// Reads one line into `line`, never holding more than `limit` bytes (plus one buffer) of it.
async fn read_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    line: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Line> {
    let mut length = 0usize;
    let mut too_long = false;
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (too_long, length) {
                (true, _) => Line::TooLong(length),
                (false, 0) => Line::End,
                (false, _) => Line::Whole,
            });
        }
        let newline = available.iter().position(|byte| *byte == b'\n');
        let take = newline.map_or(available.len(), |at| at + 1);
        if !too_long {
            line.extend_from_slice(&available[..take]);
            if line.len() > limit {
                too_long = true;
                line.truncate(KEPT_START);
                line.shrink_to_fit();
            }
        }
        input.consume(take);
        length += take;
        if newline.is_some() {
            return Ok(if too_long {
                Line::TooLong(length)
            } else {
                Line::Whole
            });
        }
    }
}

/// Whether a line may go on to rmcp.
#[derive(Debug, PartialEq)]
enum Checked {
    Good,
    /// Only white space: skipped, as rmcp skips it.
    Blank,
    /// Not UTF-8 JSON: the error's message.
    Bad(String),
}

fn check(line: &[u8]) -> Checked {
    // RFC 8259 lets a parser ignore a byte order mark, and rmcp does.
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let Ok(text) = std::str::from_utf8(line) else {
        return Checked::Bad("parse error: the line is not UTF-8".into());
    };
    if text.trim().is_empty() {
        return Checked::Blank;
    }
    match serde_json::from_str::<serde::de::IgnoredAny>(text) {
        Ok(_) => Checked::Good,
        Err(err) => Checked::Bad(format!("parse error: the line is not JSON ({err})")),
    }
}

/// The `id` of the request whose start is `start`, if the top-level object shows it there (as
/// clients write it: `{"jsonrpc":"2.0","id":7,"method":…`); null when it does not.
fn request_id(start: &[u8]) -> Value {
    let mut depth = 0usize;
    // The string that ended last at the object's top level, and nothing since: a key if `:`
    // comes next.
    let mut key: Option<&[u8]> = None;
    let mut at = 0;
    while at < start.len() {
        match start[at] {
            b'"' => {
                let Some(end) = string_end(start, at) else {
                    return Value::Null;
                };
                key = (depth == 1).then(|| &start[at..=end]);
                at = end;
            }
            b'{' | b'[' => {
                depth += 1;
                key = None;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                key = None;
            }
            b':' if depth == 1 && key == Some(b"\"id\"") => return id_value(&start[at + 1..]),
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => key = None,
        }
        at += 1;
    }
    Value::Null
}

/// The index of the quote closing the string that opens at `open`.
fn string_end(text: &[u8], open: usize) -> Option<usize> {
    let mut at = open + 1;
    while at < text.len() {
        match text[at] {
            b'\\' => at += 2,
            b'"' => return Some(at),
            _ => at += 1,
        }
    }
    None
}

/// A JSON-RPC id (a string or a number) at the start of `text`; null for anything else.
fn id_value(text: &[u8]) -> Value {
    let skipped = text.iter().take_while(|b| b.is_ascii_whitespace()).count();
    let text = &text[skipped..];
    let end = match text.first() {
        Some(b'"') => string_end(text, 0).map(|end| end + 1),
        Some(_) => Some(
            text.iter()
                .take_while(|b| b.is_ascii_digit() || b"-+.eE".contains(b))
                .count(),
        ),
        None => None,
    };
    let parsed = end.and_then(|end| serde_json::from_slice::<Value>(&text[..end]).ok());
    match parsed {
        Some(id @ (Value::String(_) | Value::Number(_))) => id,
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_read_from_a_request_s_start() {
        let id = |text: &str| request_id(text.as_bytes());
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","id":7,"method":"x","params":{"#),
            json!(7)
        );
        assert_eq!(id(r#"{ "id" : "a\"b", "method": "#), json!("a\"b"));
        // A nested `id` is not the request's; an id cut off by the limit is not guessed.
        assert_eq!(id(r#"{"params":{"id":3},"jsonrpc":"2.0","#), Value::Null);
        assert_eq!(id(r#"{"method":"x","params":{"task":"xxxxx"#), Value::Null);
        assert_eq!(id(r#"{"method":"x","id":"abc"#), Value::Null);
        assert_eq!(id(r#"{"method":"x","id":null,"#), Value::Null);
        assert_eq!(id(r#"{"note":"id","id":[1]}"#), Value::Null);
    }

    #[test]
    fn lines_are_checked_before_rmcp_sees_them() {
        assert_eq!(check(b"{\"a\":1}\n"), Checked::Good);
        assert_eq!(check(b"\xEF\xBB\xBF{\"a\":1}\r\n"), Checked::Good);
        assert_eq!(check(b"  \r\n"), Checked::Blank);
        assert!(matches!(check(b"\xff{}\n"), Checked::Bad(m) if m.contains("not UTF-8")));
        assert!(matches!(check(b"{\"a\":\n"), Checked::Bad(m) if m.contains("not JSON")));
    }

    #[tokio::test]
    async fn a_long_line_is_counted_but_not_kept() {
        let text = format!("{}\nnext\nlast", "x".repeat(100_000));
        let mut input = BufReader::with_capacity(1000, text.as_bytes());
        let mut line = Vec::new();
        let read = read_line(&mut input, &mut line, 10_000).await.unwrap();
        assert_eq!(read, Line::TooLong(100_001));
        assert_eq!(line.len(), KEPT_START);
        line.clear();
        assert_eq!(
            read_line(&mut input, &mut line, 10_000).await.unwrap(),
            Line::Whole
        );
        assert_eq!(line, b"next\n");
        line.clear();
        assert_eq!(
            read_line(&mut input, &mut line, 10_000).await.unwrap(),
            Line::Whole
        );
        assert_eq!(line, b"last");
        line.clear();
        assert_eq!(
            read_line(&mut input, &mut line, 10_000).await.unwrap(),
            Line::End
        );
    }
}
