//! The bottom layer: the types that are saved or cross a boundary — `flow.json`,
//! `flow_status.json`, journal events, `result.json`, the instructions file — and the values they
//! are made of. Plain data with serde and pure methods; nothing here reads a file or calls
//! anything above it.

pub(crate) mod decision;
pub(crate) mod event;
pub(crate) mod flow;
pub(crate) mod llm;
pub(crate) mod problem;
pub(crate) mod repo_path;
pub(crate) mod status;
pub(crate) mod step_result;
pub(crate) mod step_spec;
