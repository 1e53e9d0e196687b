//! The flow's rules: the registry of operations, the validation of a flow (every rule, every
//! problem at once), where paths may go, and which commands are refused. Pure checks over the
//! model; nothing here writes.

pub(crate) mod declaration;
pub(crate) mod ignore_rules;
pub(crate) mod operation;
pub(crate) mod operations;
pub(crate) mod path_rules;
pub(crate) mod plugins;
pub(crate) mod policy;
pub(crate) mod roles;
pub(crate) mod shell;
pub(crate) mod task_intent;
pub(crate) mod test_command;
pub(crate) mod validate;
