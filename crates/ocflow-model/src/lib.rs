//! The bottom layer (the `ocflow-model` crate): the types that are saved or cross a boundary —
//! `flow.json`, `flow_status.json`, journal events, `result.json`, the instructions file — and
//! the values they are made of. Plain data with serde and pure methods; nothing here reads a
//! file or calls anything above it. With them, the errors every layer returns (`error`), the
//! exit codes of the contract (`exit`), and the one place that writes to the terminal
//! (`output`).

pub mod approval;
pub mod budget;
pub mod decision;
pub mod deliverable;
pub mod error;
pub mod event;
pub mod exit;
pub mod flow;
pub mod llm;
pub mod output;
pub mod problem;
pub mod prompt_template;
pub mod repo_path;
pub mod status;
pub mod step_result;
pub mod step_spec;
