//! Events: everything that happens in a flow, as typed records. Each one is appended to the
//! task's journal, then handed to the [`EventSink`] the caller passed in, which shows it (the
//! CLI's `cli/progress.rs`: a JSON line, the live display or a progress line). The engine only
//! emits; how an event looks to a person is not its business.

use std::sync::Arc;

use crate::task::journal::Journal;
use ocflow_model::error::Result;
use ocflow_model::event::{Event, Record};

/// Where the events of a command go once journaled (or, for heartbeats, instead of it): to the
/// person or program that started the command. Given by the caller, so the engine never
/// decides how an event is shown.
pub trait EventSink: Send + Sync {
    /// Shows one event to the caller.
    fn show(&self, record: &Record);
}

/// How often a running flow says it is still working, at least.
pub(crate) const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(15);

/// Where events go: the journal, then the caller's sink.
pub struct Events {
    journal: Journal,
    sink: Arc<dyn EventSink>,
    started: std::time::Instant,
}

impl Events {
    pub fn new(journal: Journal, sink: Arc<dyn EventSink>) -> Events {
        Events {
            journal,
            sink,
            started: std::time::Instant::now(),
        }
    }

    /// What heartbeats need: where to show them, and since when the flow runs.
    pub fn pulse(&self) -> Pulse {
        Pulse {
            sink: Arc::clone(&self.sink),
            started: self.started,
        }
    }

    /// Records an event in the journal, then shows it.
    pub fn emit(&mut self, event: Event) -> Result<()> {
        let record = Record::now(ocflow_model::status::now(), event);
        self.journal.append(&record)?;
        self.sink.show(&record);
        Ok(())
    }

    /// Shows an event without journaling it: what the caller must learn (the command's `error`)
    /// but the flow's state does not hold.
    pub fn show(&self, event: Event) {
        self.sink
            .show(&Record::now(ocflow_model::status::now(), event));
    }
}

/// Says that a flow is still working, without journaling it: heartbeats are for the caller.
#[derive(Clone)]
pub struct Pulse {
    sink: Arc<dyn EventSink>,
    started: std::time::Instant,
}

impl Pulse {
    pub fn beat(&self, stage: &str, running: Vec<String>, tokens: ocflow_model::llm::Usage) {
        let event = Event::Heartbeat {
            stage: stage.into(),
            running,
            elapsed_seconds: self.started.elapsed().as_secs(),
            tokens,
        };
        self.sink
            .show(&Record::now(ocflow_model::status::now(), event));
    }
}

/// Awaits `future`, calling `beat` every `HEARTBEAT` until it is done: an LLM call or a step may
/// take minutes, and a caller must not take the silence for a hang.
pub async fn beating<T>(future: impl std::future::Future<Output = T>, mut beat: impl FnMut()) -> T {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT);
    tokio::pin!(future);
    loop {
        tokio::select! {
            value = &mut future => return value,
            _ = ticks.tick() => beat(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A sink that keeps what it was shown, as the CLI's would show it.
    #[derive(Default)]
    struct Kept(Mutex<Vec<Event>>);

    impl EventSink for Kept {
        fn show(&self, record: &Record) {
            if let Ok(mut kept) = self.0.lock() {
                kept.push(record.event.clone());
            }
        }
    }

    #[test]
    fn events_are_journaled_then_shown_by_the_sink_the_caller_gave() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let kept = Arc::new(Kept::default());
        let mut events = Events::new(Journal::open(&path).unwrap(), kept.clone());
        let warning = Event::Warning {
            message: "disk almost full".into(),
        };
        events.emit(warning.clone()).unwrap();
        events
            .pulse()
            .beat("running", vec!["a".into()], Default::default());

        let shown = kept.0.lock().unwrap().clone();
        assert_eq!(shown.len(), 2);
        assert_eq!(shown[0], warning);
        assert!(matches!(&shown[1], Event::Heartbeat { stage, running, .. }
            if stage == "running" && running == &["a".to_string()]));
        // The heartbeat is for the caller only: the journal holds the warning alone.
        let (journaled, _) = crate::task::journal::read(&path).unwrap();
        let journaled: Vec<Event> = journaled.into_iter().map(|r| r.event).collect();
        assert_eq!(journaled, vec![warning]);
    }
}
