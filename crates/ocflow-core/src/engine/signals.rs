//! Listening for the signals that stop a run (SIGINT, SIGTERM, SIGHUP): `Interrupt` is raised
//! once one arrives, wakes whoever waits on it (the executor's loop, the summary's call), and
//! raises the process-wide flag of `task::interrupt` that the task's long loops check.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// Set once SIGINT (Ctrl-C), SIGTERM or SIGHUP arrives, however delivered.
#[derive(Default)]
pub struct Interrupt {
    raised: AtomicBool,
    notify: Notify,
}

impl Interrupt {
    /// Starts listening for SIGINT and SIGTERM.
    pub fn listen() -> Arc<Interrupt> {
        use tokio::signal::unix::{Signal, SignalKind, signal};
        let interrupt = Arc::new(Interrupt::default());
        // Never while the interpreter starts on another thread (see `interpreter::start`).
        let handlers = crate::engine::interpreter::SIGNAL_HANDLERS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Registered now, not when the task below first runs: no signal is lost in between.
        let mut streams: Vec<Option<Signal>> = [
            SignalKind::interrupt(),
            SignalKind::terminate(),
            SignalKind::hangup(),
        ]
        .into_iter()
        .map(|kind| signal(kind).ok())
        .collect();
        drop(handlers);
        async fn next(stream: &mut Option<Signal>) {
            match stream {
                Some(stream) => {
                    stream.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
        let listener = interrupt.clone();
        tokio::spawn(async move {
            let [int, term, hup] = streams.as_mut_slice() else {
                return;
            };
            tokio::select! {
                () = next(int) => {}
                () = next(term) => {}
                () = next(hup) => {}
            }
            listener.raised.store(true, Ordering::SeqCst);
            // The long loops of staging and publishing check this one.
            crate::task::interrupt::raise();
            listener.notify.notify_waiters();
        });
        interrupt
    }

    pub(crate) fn is_raised(&self) -> bool {
        self.raised.load(Ordering::SeqCst)
    }

    pub async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_raised() {
                return;
            }
            notified.await;
        }
    }
}
