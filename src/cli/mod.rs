//! The command line: clap's raw arguments, the configuration resolved once from them, and the
//! commands — `run`/`plan`, `resume`, `status`/`diff`/`apply`, the HTML `report`, `status
//! --follow`, the demo, `trust`, the failure `memory`, the OpenHands `skill`, the MCP server —
//! with what they share (`launch`, `tasks`) — and `batch`, a fleet of flows.

pub(crate) mod acp;
pub(crate) mod apply;
pub(crate) mod approval;
pub(crate) mod args;
pub(crate) mod batch;
pub(crate) mod branch;
pub(crate) mod budget;
pub(crate) mod child_command;
pub(crate) mod clean;
pub(crate) mod config;
pub(crate) mod demo;
pub(crate) mod detach;
pub(crate) mod dispatch;
pub(crate) mod doctor;
pub(crate) mod ending;
pub(crate) mod eval;
pub(crate) mod execute;
pub(crate) mod follow;
pub(crate) mod gates;
pub(crate) mod git;
pub(crate) mod held_signals;
pub(crate) mod help_files;
pub(crate) mod launch;
pub(crate) mod layered;
pub(crate) mod live;
pub(crate) mod mcp;
pub(crate) mod mcp_status;
pub(crate) mod mcp_stdio;
pub(crate) mod memory;
pub(crate) mod needs;
pub(crate) mod profiles;
pub(crate) mod progress;
pub(crate) mod report;
pub(crate) mod resume;
pub(crate) mod review;
pub(crate) mod run;
pub(crate) mod skill;
pub(crate) mod status_table;
pub(crate) mod task_index;
pub(crate) mod tasks;
pub(crate) mod trust;
pub(crate) mod user_state;
pub(crate) mod wait;
pub(crate) mod words;
