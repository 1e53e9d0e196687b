//! The flow's rules: the registry of operations, the validation of a flow (every rule, every
//! problem at once), where paths may go, and which commands are refused. Pure checks over the
//! model; nothing here writes.

pub mod operations;
pub mod path_rules;
pub mod policy;
pub mod validate;
