//! The engine: the scheduler that runs a flow's steps (`executor`), recovery after a failure,
//! the pyo3 bridge to the operation library and the interpreter under it, the instructions
//! each step gets, the command sandbox (the host's half: the launcher is `ocflow-sandbox`) and
//! the variables a command is given (`command_env`), orphaned commands, the signals that stop
//! a run (`signals`), and the summary at the end with the flow's answer (`final_answer`).

pub mod bridge;
pub(crate) mod bridge_host;
pub mod command_env;
pub mod dependencies;
pub mod executor;
pub(crate) mod final_answer;
pub mod instructions;
pub mod interpreter;
pub mod orphans;
pub mod recovery;
pub mod sandbox;
pub mod signals;
pub mod summary;
