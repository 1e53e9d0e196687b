//! The durable state of a task on disk: the workspace and task directories, atomic writes,
//! the journal and the events that feed it, staging (snapshot, overlays, views) and review
//! (changes, diff), the all-or-nothing apply and its journal, and what the HTML report shows.

pub(crate) mod apply;
pub(crate) mod apply_journal;
pub(crate) mod events;
pub(crate) mod failure_cause;
pub(crate) mod interrupt;
pub(crate) mod journal;
pub(crate) mod layered_view;
pub(crate) mod report;
pub(crate) mod review;
pub(crate) mod staging;
pub(crate) mod state;
pub(crate) mod workspace;
