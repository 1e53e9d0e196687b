//! The LLM layer: the one client (retries, tokens, record/replay), the answer form each
//! endpoint takes remembered across runs, the API key kept out of every environment, what is
//! redacted from every request, reading JSON out of a model's answer, and the planner that
//! turns a task into a validated flow.

pub(crate) mod answer;
pub(crate) mod answer_forms;
pub(crate) mod client;
pub(crate) mod key;
pub(crate) mod planner;
pub(crate) mod redact;
