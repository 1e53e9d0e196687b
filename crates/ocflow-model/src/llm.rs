//! What crosses the boundary with a model: messages, model settings, answers, token usage, and
//! the typed error of a call (which says whether retrying can help). The client that makes the
//! calls is `llm::client`.

use serde::{Deserialize, Serialize};

/// Which model answers, and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSettings {
    /// The model profile (`[llm.profiles.NAME]`) whose endpoint answers; `default` is the one
    /// flags, environment and `[llm]` set.
    #[serde(default = "default_profile")]
    pub profile: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

/// The profile flags, environment and `[llm]` set.
pub const DEFAULT_PROFILE: &str = "default";

fn default_profile() -> String {
    DEFAULT_PROFILE.into()
}

impl ModelSettings {
    /// The settings of the `answer`-th answer asked for (1: the first): each re-ask 0.3 warmer,
    /// up to 1.0, since a deterministic model asked the same at the same temperature repeats
    /// itself.
    pub fn for_answer(&self, answer: usize) -> ModelSettings {
        let mut settings = self.clone();
        if answer > 1 {
            let warmer = self.temperature.unwrap_or(0.2) + 0.3 * (answer - 1) as f32;
            settings.temperature = Some(warmer.min(1.0));
        }
        settings
    }
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Message {
        Message {
            role: "system".into(),
            content: content.into(),
        }
    }
    pub fn user(content: impl Into<String>) -> Message {
        Message {
            role: "user".into(),
            content: content.into(),
        }
    }
    pub fn assistant(content: impl Into<String>) -> Message {
        Message {
            role: "assistant".into(),
            content: content.into(),
        }
    }
}

/// A chat completion to make.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// What the call is for: `planner`, `summary`, or a step id. Usage is counted per purpose.
    pub purpose: String,
    pub settings: ModelSettings,
    pub messages: Vec<Message>,
    /// Ask for a JSON object (`response_format`) where the endpoint supports it.
    pub json: bool,
    /// The JSON Schema the answer must follow, for endpoints that constrain decoding to one.
    pub schema: Option<serde_json::Value>,
    /// A call the flow can do without (the question for a reproduction): when the budget has
    /// no room for it, it is refused and the flow goes on, its budget not spent.
    pub optional: bool,
}

/// Tokens used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// Completed calls.
    pub calls: u64,
    /// Of `prompt_tokens`, those the server took from its prompt cache, as it reports them
    /// (`usage.prompt_tokens_details.cached_tokens`); 0 when it says nothing, and then left
    /// out of the files.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_prompt_tokens: u64,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

impl Usage {
    /// No call counted (a step that asks no model).
    pub fn is_none(&self) -> bool {
        *self == Usage::default()
    }

    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_tokens += other.total_tokens;
        self.calls += other.calls;
        self.cached_prompt_tokens += other.cached_prompt_tokens;
    }

    /// What was used since `before` was taken (counters only grow).
    pub fn since(&self, before: &Usage) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens.saturating_sub(before.prompt_tokens),
            completion_tokens: self
                .completion_tokens
                .saturating_sub(before.completion_tokens),
            total_tokens: self.total_tokens.saturating_sub(before.total_tokens),
            calls: self.calls.saturating_sub(before.calls),
            cached_prompt_tokens: self
                .cached_prompt_tokens
                .saturating_sub(before.cached_prompt_tokens),
        }
    }

    pub fn is_zero(&self) -> bool {
        self.calls == 0
    }

    /// ", N of them cached by the server" after a prompt-token count, when the server said it
    /// served some from its prompt cache; empty otherwise.
    pub fn cached_note(&self) -> String {
        match self.cached_prompt_tokens {
            0 => String::new(),
            n => format!(", {n} of them cached by the server"),
        }
    }
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatAnswer {
    pub content: String,
    /// `stop`, `length` (truncated: never act on it), …
    pub finish_reason: Option<String>,
    pub usage: Usage,
}

impl ChatAnswer {
    pub fn is_truncated(&self) -> bool {
        self.finish_reason.as_deref() == Some("length")
    }
}

/// Why a call failed. `transient()` says whether the same call may succeed later.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LlmError {
    pub kind: LlmErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmErrorKind {
    /// 429 without `insufficient_quota` (transient).
    RateLimited,
    /// 5xx (transient).
    Server,
    /// No answer within the request timeout (transient).
    Timeout,
    /// The connection failed (transient).
    Connection,
    /// The answer is not a chat completion (transient: a proxy hiccup is the usual cause).
    BadResponse,
    /// 429 `insufficient_quota` (permanent).
    QuotaExceeded,
    /// 401 or 403 (permanent).
    Unauthorized,
    /// 404 (permanent).
    NotFound,
    /// 400, 422 and other 4xx (permanent).
    BadRequest,
    /// A 3xx: the endpoint redirects; the key is never sent on (permanent).
    Redirected,
    /// Replay has no recorded answer for this request (permanent).
    NotRecorded,
    /// The retry budget (attempts or time) ran out on transient errors (transient: a later
    /// call may succeed).
    GaveUp,
    /// The flow's budget (`--max-tokens`, `--max-cost`, `--max-time`) would be exceeded by the
    /// call, or ran out while it waited: never sent, or cancelled. Not the step's fault: the
    /// flow pauses, and the step runs again on resume.
    BudgetExhausted,
}

impl LlmError {
    pub fn new(kind: LlmErrorKind, message: impl Into<String>) -> LlmError {
        LlmError {
            kind,
            message: message.into(),
        }
    }

    /// Whether the model cannot be used at all until the user changes something (the key, the
    /// URL, the model name, the quota): every later call, whatever it asks, fails the same way,
    /// so nothing that needs the model (recovery, the summary) is asked of it again.
    pub fn model_unusable(&self) -> bool {
        matches!(
            self.kind,
            LlmErrorKind::Unauthorized
                | LlmErrorKind::NotFound
                | LlmErrorKind::Redirected
                | LlmErrorKind::QuotaExceeded
        )
    }

    /// Whether the same call may succeed if tried again later.
    pub fn transient(&self) -> bool {
        // GaveUp only ever follows transient errors: later, the endpoint may answer again.
        matches!(
            self.kind,
            LlmErrorKind::RateLimited
                | LlmErrorKind::Server
                | LlmErrorKind::Timeout
                | LlmErrorKind::Connection
                | LlmErrorKind::BadResponse
                | LlmErrorKind::GaveUp
        )
    }
}
