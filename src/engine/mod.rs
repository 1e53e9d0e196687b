//! The engine: the scheduler that runs a flow's steps (`executor`), recovery after a failure,
//! the pyo3 bridge to the operation library and the interpreter under it, the instructions
//! each step gets, the command sandbox, orphaned commands, and the summary at the end.

pub(crate) mod bridge;
pub(crate) mod dependencies;
pub(crate) mod executor;
pub(crate) mod instructions;
pub(crate) mod interpreter;
pub(crate) mod orphans;
pub(crate) mod recovery;
pub(crate) mod sandbox;
pub(crate) mod sandbox_exec;
pub(crate) mod socket_filter;
pub(crate) mod step_cgroup;
pub(crate) mod summary;
