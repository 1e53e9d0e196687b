//! The durable state of a task on disk: the workspace and task directories, atomic writes,
//! the journal and the events that feed it, staging (snapshot, overlays, views) and review
//! (changes, diff), the all-or-nothing apply and its journal, and what the HTML report shows.

pub mod apply;
pub mod apply_journal;
pub mod events;
pub mod failure_cause;
pub mod interrupt;
pub mod journal;
pub mod layered_view;
pub mod overlay_rules;
pub mod report;
pub mod review;
pub mod staging;
pub mod state;
pub mod workspace;
