//! The engine: the scheduler that runs a flow's steps (`executor`), recovery after a failure,
//! the pyo3 bridge to the operation library and the interpreter under it, the instructions
//! each step gets, the command sandbox (the host's half: the launcher is `ocflow-sandbox`) and
//! the variables a command is given (`command_env`), orphaned commands, the signals that stop
//! a run (`signals`), whether the flow delivered what "done" means (`deliverable_check`), and the
//! summary at the end with the flow's answer (`final_answer`). The
//! failure memory across runs: `memory` (what a flow stores and recalls) over `memory_store`
//! (the SQLite file), `memory_recall` (the nearest past failures for a prompt),
//! `failure_fingerprint` (failures normalised) and `repository_key`; `reflection`, the lesson
//! written at the end of a flow that recovered.

pub mod bridge;
pub(crate) mod bridge_host;
pub mod command_env;
pub(crate) mod deliverable_check;
pub mod dependencies;
pub mod executor;
pub mod failure_fingerprint;
pub mod final_answer;
pub mod hooks;
pub mod instructions;
pub mod interpreter;
pub mod memory;
pub mod memory_recall;
pub mod memory_store;
pub mod orphans;
pub mod planning;
pub mod recovery;
pub(crate) mod reflection;
pub mod repository_key;
pub mod sandbox;
pub mod sandbox_probe;
pub mod signals;
pub mod summary;
pub(crate) mod summary_check;
