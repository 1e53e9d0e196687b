//! The durable state of a task on disk: the workspace and task directories, atomic writes,
//! the journal and the events that feed it, staging (the snapshot, overlays, the copied (and
//! watched) and layered views, what a command changed, a step's outputs, the file trees under
//! them) and review (changes, diff), the all-or-nothing apply and its journal, and what the
//! HTML report shows.

pub mod apply;
pub mod apply_journal;
pub mod capture;
pub mod copied_view;
pub mod disk;
pub mod events;
pub mod failure_cause;
pub mod file_tree;
pub mod interrupt;
pub mod journal;
pub mod layered_view;
pub mod outputs;
pub mod overlay;
pub mod overlay_rules;
pub mod report;
pub mod review;
pub mod snapshot;
pub mod state;
pub mod view_watch;
pub mod workspace;
