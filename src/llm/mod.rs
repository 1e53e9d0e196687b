//! The LLM layer: the one client (retries, tokens, record/replay), the API key kept out of
//! every environment, reading JSON out of a model's answer, what is redacted from every request, and the planner that turns a task
//! into a validated flow.

pub(crate) mod answer;
pub(crate) mod client;
pub(crate) mod key;
pub(crate) mod planner;
pub(crate) mod redact;
