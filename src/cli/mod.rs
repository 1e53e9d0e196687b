//! The command line: clap's raw arguments, the configuration resolved once from them, and the
//! commands — `run`/`plan`, `resume`, `status`/`diff`/`apply`, `status --follow`, the demo —
//! with what they share (`launch`, `tasks`).

pub mod args;
pub mod config;
pub mod demo;
pub mod dispatch;
pub mod follow;
pub mod launch;
pub mod resume;
pub mod review;
pub mod run;
pub mod status_table;
pub mod tasks;
