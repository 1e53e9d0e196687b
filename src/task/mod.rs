//! The durable state of a task on disk: the workspace and task directories, atomic writes,
//! the journal and the events that feed it, staging (snapshot, overlays, views) and review
//! (changes, diff, apply).

pub mod events;
pub mod journal;
pub mod review;
pub mod staging;
pub mod state;
pub mod workspace;
