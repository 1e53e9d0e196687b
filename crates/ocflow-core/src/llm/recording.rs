//! Recording and replaying an LLM's exchanges (`--record FILE`, `--replay FILE`): one JSON
//! line per call — its purpose, model, messages (redacted) and answer — and a replay that
//! answers from them by the messages alone, without any network.

use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use ocflow_model::error::Error;
use ocflow_model::llm::{ChatAnswer, ChatRequest, LlmError, LlmErrorKind, Message};

/// A recording's answers, by request (`request_key`), in the order they were given.
pub(crate) type Answers = HashMap<String, VecDeque<ChatAnswer>>;

/// One line of a recording.
#[derive(Debug, Serialize, Deserialize)]
struct RecordedExchange {
    version: u32,
    purpose: String,
    model: String,
    messages: Vec<Message>,
    answer: ChatAnswer,
}

const RECORDING_VERSION: u32 = 1;

/// Appends one exchange to the recording.
pub(crate) fn record(recorder: &Mutex<File>, request: &ChatRequest, answer: &ChatAnswer) {
    let exchange = RecordedExchange {
        version: RECORDING_VERSION,
        purpose: request.purpose.clone(),
        model: request.settings.model.clone(),
        messages: request.messages.clone(),
        answer: answer.clone(),
    };
    if let (Ok(mut file), Ok(line)) = (recorder.lock(), serde_json::to_string(&exchange)) {
        let _ = writeln!(file, "{line}");
    }
}

/// Reads a recording's answers; a line that is no recorded exchange of this version is an
/// error naming the line.
pub(crate) fn load(path: &Path) -> Result<Answers, Error> {
    let file = File::open(path).map_err(|err| {
        Error::Usage(format!(
            "cannot read the recording {}: {err}",
            path.display()
        ))
    })?;
    let mut answers: HashMap<String, VecDeque<ChatAnswer>> = HashMap::new();
    for (number, line) in BufReader::new(file).lines().enumerate() {
        let line =
            line.map_err(|err| Error::Usage(format!("cannot read {}: {err}", path.display())))?;
        if line.trim().is_empty() {
            continue;
        }
        let exchange: RecordedExchange = serde_json::from_str(&line).map_err(|err| {
            Error::Usage(format!(
                "{} line {}: not a recorded exchange ({err})",
                path.display(),
                number + 1
            ))
        })?;
        if exchange.version != RECORDING_VERSION {
            return Err(Error::Usage(format!(
                "{} line {}: recording version {} is not supported",
                path.display(),
                number + 1,
                exchange.version
            )));
        }
        answers
            .entry(request_key(&exchange.messages))
            .or_default()
            .push_back(exchange.answer);
    }
    Ok(answers)
}

/// Opens the recording to append to.
pub(crate) fn open(path: &Path) -> Result<Mutex<File>, Error> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(Mutex::new)
        .map_err(|err| {
            Error::Usage(format!(
                "cannot open the recording {}: {err}",
                path.display()
            ))
        })
}

/// Replays match on the messages only, so a recording works whatever model is configured
/// and whatever order parallel steps ask in.
fn request_key(messages: &[Message]) -> String {
    serde_json::to_string(messages).unwrap_or_default()
}

/// The recorded answer to `request` (the last one stays for identical requests).
pub(crate) fn replay_answer(
    answers: &Mutex<HashMap<String, VecDeque<ChatAnswer>>>,
    source: &Path,
    request: &ChatRequest,
) -> Result<ChatAnswer, LlmError> {
    let key = request_key(&request.messages);
    let mut answers = answers
        .lock()
        .map_err(|_| LlmError::new(LlmErrorKind::NotRecorded, "the recording is unusable"))?;
    let queue = answers.get_mut(&key);
    match queue {
        // The last answer for a request stays available: identical requests get it again.
        Some(queue) if queue.len() > 1 => queue
            .pop_front()
            .ok_or_else(|| LlmError::new(LlmErrorKind::NotRecorded, "empty")),
        Some(queue) if queue.len() == 1 => queue
            .front()
            .cloned()
            .ok_or_else(|| LlmError::new(LlmErrorKind::NotRecorded, "empty")),
        _ => {
            let last = request
                .messages
                .last()
                .map(|m| m.content.as_str())
                .unwrap_or("");
            // Its end: prompts put what is particular to a request (the task) last.
            let count = last.chars().count();
            let preview: String = last.chars().skip(count.saturating_sub(160)).collect();
            Err(LlmError::new(
                LlmErrorKind::NotRecorded,
                format!(
                    "{} has no answer for this {} request (last message ends: {preview:?}); \
                     record it again with --record",
                    source.display(),
                    request.purpose
                ),
            ))
        }
    }
}
