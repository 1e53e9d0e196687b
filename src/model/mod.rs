//! The bottom layer: the types that are saved or cross a boundary — `flow.json`,
//! `flow_status.json`, journal events, `result.json`, the instructions file — and the values they
//! are made of. Plain data with serde and pure methods; nothing here reads a file or calls
//! anything above it.

pub mod decision;
pub mod event;
pub mod flow;
pub mod llm;
pub mod problem;
pub mod repo_path;
pub mod status;
pub mod step_result;
pub mod step_spec;
