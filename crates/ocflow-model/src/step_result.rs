//! `result.json`: what a step's call of `execute_operation` returned, as the host keeps it. The
//! library's dict is open (each operation adds its own fields, docs/step-contract.md lists
//! them); the fields the host acts on are typed here, the rest is kept as it came. The host
//! adds the files it captured and a version, then writes the file once, atomically.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The result file format version this build writes and reads.
pub const RESULT_VERSION: u32 = 1;

/// A step's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    /// Format version; see `RESULT_VERSION`. Written by the host, not the library.
    #[serde(default = "first_version")]
    pub version: u32,
    /// `success` or `failure`, as the library said.
    pub status: CallStatus,
    /// One sentence for people.
    #[serde(default)]
    pub message: String,
    /// Repository-relative files the step created or changed (what the host recorded).
    #[serde(default)]
    pub output_files: Vec<String>,
    /// Repository-relative files the step deleted (what the host recorded).
    #[serde(default)]
    pub deleted_files: Vec<String>,
    /// Symlinks and special files a command made, never carried out of its view.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_files: Vec<String>,
    /// How a command step's changes were found: `overlay` (read from the overlay it ran
    /// under, whatever the repository's size) or `copy` (the view walked and compared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
    /// Why an LLM operation's call failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_error: Option<LlmFailure>,
    /// Whether a command was killed at its time limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_out: Option<bool>,
    /// A test run's report (`run_tests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<TestReport>,
    /// Everything else the operation returned (content, exit_code, stdout, findings…).
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

fn first_version() -> u32 {
    RESULT_VERSION
}

/// What the library said of its own call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    Success,
    Failure,
}

/// An LLM call's failure, as the library reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmFailure {
    #[serde(default)]
    pub kind: String,
    /// Whether the same call may succeed later (then the step is retried without recovery).
    #[serde(default)]
    pub transient: bool,
    #[serde(default)]
    pub message: String,
}

impl LlmFailure {
    /// The host's typed error this failure reports, when its kind is one of the host's (a
    /// library calling a model of its own may report kinds ocflow does not know).
    pub fn llm_error(&self) -> Option<crate::llm::LlmError> {
        let kind = serde_json::from_value(serde_json::Value::String(self.kind.clone())).ok()?;
        Some(crate::llm::LlmError::new(kind, self.message.clone()))
    }
}

/// A test run's report: counts, and the failures recovery shows the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestReport {
    #[serde(default)]
    pub failures: Vec<TestFailure>,
    /// Counts and the runner's name.
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

/// One failing test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestFailure {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub error_type: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

impl StepResult {
    /// A text field the operation returned (`stdout`, `content`, …).
    pub fn text(&self, field: &str) -> Option<&str> {
        self.fields.get(field).and_then(Value::as_str)
    }

    /// The value at `path` (object fields and list indexes), for `@{outputs.STEP.FIELD…}`.
    pub fn lookup(&self, path: &[String]) -> Option<Value> {
        let whole = serde_json::to_value(self).ok()?;
        let mut field = &whole;
        for part in path {
            field = match field {
                Value::Object(map) => map.get(part)?,
                Value::Array(items) => items.get(part.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(field.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::LlmErrorKind;

    #[test]
    fn a_reported_llm_failure_is_the_host_s_typed_error_when_its_kind_is_known() {
        let failure = |kind: &str| LlmFailure {
            kind: kind.into(),
            transient: false,
            message: "HTTP 401".into(),
        };
        let refused = failure("unauthorized").llm_error().unwrap();
        assert_eq!(refused.kind, LlmErrorKind::Unauthorized);
        assert_eq!(refused.message, "HTTP 401");
        assert!(refused.model_unusable());
        let timeout = failure("timeout").llm_error().unwrap();
        assert!(!timeout.model_unusable() && timeout.transient());
        // A library's own client may report a kind ocflow does not know: not the host's.
        assert_eq!(failure("error").llm_error(), None);
    }
}
