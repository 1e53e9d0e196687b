//! A recovery decision: the strategy the LLM chose for a failed step, from a closed set, as it
//! is kept in `flow_status.json` and the journal.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The closed set of strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StrategyKind {
    /// Run the same step again.
    Retry,
    /// Run a step (the failed one or one it depends on) again with changed parameters or
    /// instructions, then everything after it.
    Modify,
    /// Replace the failed step with one or more new steps.
    Alternative,
    /// Mark the failed step skipped; the steps that need its outputs are skipped too.
    Skip,
    /// A new revision of the remaining flow.
    Replan,
    /// Stop the flow.
    Abort,
}

impl fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        f.write_str(&name)
    }
}

/// A validated strategy, as journaled and kept in the status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub strategy: StrategyKind,
    pub reason: String,
    /// For `modify`: the changed step; for `retry`, optionally `{"id": …}`: the step to run
    /// again (the failed one, or one it depends on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<Value>,
    /// For `alternative` and `replan`: the new steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Value>,
}

impl Decision {
    /// The id of the step it names (`"step": {"id": …}`): the step `modify` changes, or the
    /// one `retry` runs again (the failed one when it names none).
    pub fn step_id(&self) -> Option<&str> {
        self.step
            .as_ref()
            .and_then(|s| s.get("id"))
            .and_then(Value::as_str)
    }

    /// Strategy and parameters, for the stuck rule: the same twice for one step is stuck.
    pub fn signature(&self) -> String {
        json!({"strategy": self.strategy, "step": self.step, "steps": self.steps}).to_string()
    }
}
