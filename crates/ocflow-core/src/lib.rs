//! The core of ocflow (the `ocflow-core` crate), in four layers, each using only those below it
//! and the data of `ocflow-model`: `flow` (checking a flow: operations, validation, policy),
//! `task` (a task's durable state on disk: workspace, journal, staging, apply), `llm` (the
//! OpenAI-compatible client and the planner) and `engine` (running a flow: the executor,
//! recovery, the Python bridge, the sandbox's host half, the summary).

pub mod engine;
pub mod flow;
pub mod llm;
pub mod task;
