//! The flow's rules: the registry of operations, the validation of a flow (every rule, every
//! problem at once), where paths may go, and which commands are refused. Pure checks over the
//! model; nothing here writes.

pub mod declaration;
pub mod deliverables;
pub mod graph;
pub mod ignore_rules;
pub mod operation;
pub mod operations;
pub mod path_rules;
pub mod plugins;
pub mod policy;
pub mod project_instructions;
pub mod roles;
pub mod seed_formats;
pub mod shell;
pub mod task_files;
pub mod test_command;
pub mod validate;
