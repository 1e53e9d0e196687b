//! The command line: clap's raw arguments, the configuration resolved once from them, the
//! commands, `status --follow` and the demo.

pub mod args;
pub mod commands;
pub mod config;
pub mod demo;
pub mod follow;
