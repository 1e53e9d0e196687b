//! Reading a model's answer: the JSON in it, wherever the model put it. Small models wrap JSON
//! in prose or ```json fences and leave trailing commas; the shape is then checked by the
//! validator, never guessed at. Each repair is reported so it can be logged.

/// Why no JSON could be taken from an answer, in words a model can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct AnswerError(pub String);

/// The JSON text found in `answer`, and the repairs made to get it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Extracted {
    pub(crate) json: String,
    pub(crate) repairs: Vec<String>,
}

/// The complete answers a model gave to one question, to tell when it repeats itself: asking
/// again after the same answer twice would not help.
#[derive(Debug, Default)]
pub(crate) struct Answers(Vec<String>);

/// Said when the model repeated an answer.
pub(crate) const REPEATED: &str =
    "- the model gave the same answer again, so asking once more would not help";

/// Said when the model's answer had the same problem as the one before.
pub(crate) const SAME_PROBLEM: &str =
    "- the model's answer had the same problem again, so asking once more would not help";

impl Answers {
    /// Records `reply`; `true` when it repeats an earlier complete answer (a truncated one is
    /// not compared: its text is not the whole answer).
    pub(crate) fn repeats(&mut self, reply: &ocflow_model::llm::ChatAnswer) -> bool {
        if reply.is_truncated() {
            return false;
        }
        let text = reply.content.trim();
        if self.0.iter().any(|a| a == text) {
            return true;
        }
        self.0.push(text.to_string());
        false
    }
}

/// Finds the JSON object or array in an answer. The error says what was wrong, in words a
/// model can act on when asked again.
pub(crate) fn extract_json(answer: &str) -> Result<Extracted, AnswerError> {
    find_json(answer).map_err(AnswerError)
}

fn find_json(answer: &str) -> Result<Extracted, String> {
    let mut repairs = Vec::new();
    let candidate = match fenced_json(answer) {
        Some(block) => {
            repairs.push("took the JSON out of a ``` code block".to_string());
            block
        }
        None => {
            let trimmed = answer.trim();
            let start = trimmed
                .find(['{', '['])
                .ok_or("the answer holds no JSON object or array")?;
            let body = &trimmed[start..];
            let end = matching_close(body)
                .ok_or("the JSON in the answer is not closed (it may have been cut off)")?;
            if start > 0 || end + 1 < body.len() {
                repairs.push("ignored text around the JSON".to_string());
            }
            &body[..=end]
        }
    };
    let (json, removed) = remove_trailing_commas(candidate);
    if removed > 0 {
        repairs.push(format!("removed {removed} trailing comma(s)"));
    }
    serde_json::from_str::<serde_json::Value>(&json)
        .map_err(|err| format!("the JSON in the answer does not parse: {err}"))?;
    Ok(Extracted { json, repairs })
}

/// The first fenced code block whose body starts with `{` or `[`.
fn fenced_json(answer: &str) -> Option<&str> {
    let mut rest = answer;
    while let Some(open) = rest.find("```") {
        let after_fence = &rest[open + 3..];
        let body_start = after_fence.find('\n').map_or(after_fence.len(), |i| i + 1);
        let body = &after_fence[body_start..];
        let close = body.find("```")?;
        let block = body[..close].trim();
        if block.starts_with('{') || block.starts_with('[') {
            return Some(block);
        }
        rest = &body[close + 3..];
    }
    None
}

/// The byte index of the bracket closing the one `text` starts with, skipping strings.
fn matching_close(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (index, byte) in text.bytes().enumerate() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(index);
                }
            }
            _ => {}
        }
    }
    None
}

/// Drops commas that stand right before a closing bracket (outside strings).
fn remove_trailing_commas(text: &str) -> (String, usize) {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut removed = 0;
    let mut in_string = false;
    let mut escaped = false;
    for (index, ch) in text.char_indices() {
        if in_string {
            match ch {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
        } else if ch == '"' {
            in_string = true;
        } else if ch == ',' {
            let next = bytes[index + 1..].iter().find(|b| !b.is_ascii_whitespace());
            if matches!(next, Some(b'}') | Some(b']')) {
                removed += 1;
                continue;
            }
        }
        out.push(ch);
    }
    (out, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_json_in_fences_prose_and_repairs_trailing_commas() {
        let fenced = "Here is the plan:\n```json\n{\"steps\": [1, 2,],}\n```\nGood luck!";
        let got = extract_json(fenced).unwrap();
        assert_eq!(got.json, "{\"steps\": [1, 2]}");
        assert_eq!(
            got.repairs,
            vec![
                "took the JSON out of a ``` code block",
                "removed 2 trailing comma(s)"
            ]
        );

        let prose = "Sure! [{\"id\": \"a\", \"note\": \"a } in a string, and ]\"}] That is all.";
        assert_eq!(
            extract_json(prose).unwrap().json,
            "[{\"id\": \"a\", \"note\": \"a } in a string, and ]\"}]"
        );

        assert!(extract_json("no json here").is_err());
        assert!(
            extract_json("{\"steps\": [")
                .unwrap_err()
                .0
                .contains("not closed")
        );
        assert_eq!(
            extract_json("{\"a\": \"x,]\"}").unwrap().json,
            "{\"a\": \"x,]\"}"
        );
    }
}
