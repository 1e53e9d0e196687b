//! What an endpoint answered: a chat completion read leniently (small self-hosted servers omit
//! fields OpenAI sends), or its failure as a typed error that says whether retrying can help,
//! with the `Retry-After` it asked for.

use std::time::Duration;

use async_openai::error::OpenAIError;
use serde_json::Value;

use ocflow_model::llm::{ChatAnswer, LlmError, LlmErrorKind, Usage};

/// `Retry-After` as seconds or an HTTP date; `None` for anything unusable (negative, infinite,
/// garbage), which falls back to computed backoff.
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (0.0..1e9)
            .contains(&seconds)
            .then(|| Duration::from_secs_f64(seconds));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let seconds = (date.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_milliseconds();
    (seconds >= 0).then(|| Duration::from_millis(seconds as u64))
}

/// The endpoint a failed call went to, as its error names it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Called<'a> {
    pub(crate) base_url: &'a str,
    pub(crate) request_timeout: Duration,
    /// The setting that gave the time limit, which a timeout's message names.
    pub(crate) timeout_setting: &'a str,
}

/// The typed error of a failed call: its HTTP status (and where a redirect pointed) first.
pub(crate) fn classify(
    error: OpenAIError,
    status: Option<u16>,
    location: Option<&str>,
    endpoint: Called,
) -> LlmError {
    use LlmErrorKind::*;
    let base_url = endpoint.base_url;
    if let Some(code @ 300..=399) = status {
        return LlmError::new(
            Redirected,
            format!(
                "the endpoint {base_url} answered HTTP {code} redirecting to {}; ocflow does not \
                 follow redirects with your key: set the base URL to the final address",
                location.unwrap_or("?")
            ),
        );
    }
    match error {
        OpenAIError::ApiError(response) => {
            let code = response.status_code.as_u16();
            let api = &response.api_error;
            let detail: String = api.message.chars().take(300).collect();
            let quota = api.code.as_deref() == Some("insufficient_quota")
                || api.r#type.as_deref() == Some("insufficient_quota");
            match code {
                429 if quota => LlmError::new(
                    QuotaExceeded,
                    format!(
                        "the endpoint says the quota is used up (HTTP 429 insufficient_quota): \
                         {detail}"
                    ),
                ),
                429 => LlmError::new(RateLimited, format!("rate limited (HTTP 429): {detail}")),
                401 | 403 => LlmError::new(
                    Unauthorized,
                    format!(
                        "the endpoint refused the request (HTTP {code}): check the API key \
                         (OCFLOW_API_KEY, OPENAI_API_KEY or LLM_API_KEY) and the base URL \
                         {base_url}"
                    ),
                ),
                404 => LlmError::new(
                    NotFound,
                    format!(
                        "HTTP 404 from {base_url}/chat/completions: check the base URL (it usually \
                         ends in /v1) and the model name; {detail}"
                    ),
                ),
                408 => LlmError::new(
                    Timeout,
                    format!("the endpoint timed out (HTTP 408): {detail}"),
                ),
                500..=599 => LlmError::new(Server, format!("server error (HTTP {code}): {detail}")),
                _ => LlmError::new(
                    BadRequest,
                    format!("the endpoint rejected the request (HTTP {code}): {detail}"),
                ),
            }
        }
        OpenAIError::Reqwest(err) if err.is_timeout() => LlmError::new(
            Timeout,
            // A model on a CPU can take minutes over one answer: say which setting gives it
            // more time.
            format!(
                "no answer from {base_url} within the request timeout of {} s: a slow model \
                 (one on a CPU) needs more; raise {} in ocflow.toml (and max_retry_seconds \
                 with it)",
                endpoint.request_timeout.as_secs(),
                endpoint.timeout_setting
            ),
        ),
        OpenAIError::Reqwest(err) if err.is_connect() => LlmError::new(
            Connection,
            format!("cannot connect to {base_url}: {}", error_chain(&err)),
        ),
        OpenAIError::Reqwest(err) => LlmError::new(
            Connection,
            format!("HTTP error talking to {base_url}: {}", error_chain(&err)),
        ),
        OpenAIError::JSONDeserialize(err, content) => {
            let preview: String = content.chars().take(200).collect();
            let code = status.map(|s| format!(" (HTTP {s})")).unwrap_or_default();
            LlmError::new(
                BadResponse,
                format!(
                    "the endpoint's answer{code} is not a chat completion ({err}): {preview:?}"
                ),
            )
        }
        other => LlmError::new(BadResponse, format!("{other}")),
    }
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Reads a chat completion leniently: small self-hosted servers omit fields OpenAI sends.
pub(crate) fn parse_answer(value: &Value) -> Result<ChatAnswer, LlmError> {
    let choice = value.get("choices").and_then(|c| c.get(0));
    let content = choice
        .and_then(|c| c.get("message"))
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str);
    let Some(content) = content else {
        let preview: String = value.to_string().chars().take(200).collect();
        return Err(LlmError::new(
            LlmErrorKind::BadResponse,
            format!("the answer has no choices[0].message.content: {preview}"),
        ));
    };
    let usage = value.get("usage");
    let count = |name: &str| {
        usage
            .and_then(|u| u.get(name))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let prompt_tokens = count("prompt_tokens");
    let completion_tokens = count("completion_tokens");
    // The OpenAI form, which vLLM and llama.cpp's server give too when their prefix cache
    // served part of the prompt.
    let cached_prompt_tokens = usage
        .and_then(|u| u.get("prompt_tokens_details"))
        .and_then(|d| d.get("cached_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let total_tokens = match count("total_tokens") {
        0 => prompt_tokens + completion_tokens,
        total => total,
    };
    Ok(ChatAnswer {
        content: content.to_string(),
        finish_reason: choice
            .and_then(|c| c.get("finish_reason"))
            .and_then(Value::as_str)
            .map(str::to_string),
        usage: Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens,
            calls: 1,
            cached_prompt_tokens,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cached_prompt_tokens_are_read_where_the_server_gives_them() {
        let answer = |usage: Value| {
            parse_answer(&json!({"choices": [{"message": {"content": "x"}}], "usage": usage}))
                .map(|a| a.usage)
                .unwrap()
        };
        let cached = answer(json!({"prompt_tokens": 1000, "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 960}}));
        assert_eq!(
            (cached.prompt_tokens, cached.cached_prompt_tokens),
            (1000, 960)
        );
        assert_eq!(cached.total_tokens, 1005);
        let silent = answer(json!({"prompt_tokens": 1000, "completion_tokens": 5}));
        assert_eq!(silent.cached_prompt_tokens, 0);
        // Serialised without the field when the server said nothing: files stay as they were.
        assert!(!serde_json::to_string(&silent).unwrap().contains("cached"));
    }

    #[test]
    fn retry_after_is_parsed_or_refused() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        for bad in ["-1", "inf", "NaN", "soon", "1e30"] {
            assert_eq!(parse_retry_after(bad), None, "{bad}");
        }
        let in_three = (chrono::Utc::now() + chrono::Duration::seconds(3)).to_rfc2822();
        let parsed = parse_retry_after(&in_three).unwrap();
        assert!(
            parsed <= Duration::from_secs(3) && parsed >= Duration::from_secs(1),
            "{parsed:?}"
        );
    }
}
