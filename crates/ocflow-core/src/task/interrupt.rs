//! A stop asked for by a signal (SIGINT, SIGTERM, SIGHUP), as one flag for the whole process.
//! The task's long loops — publishing outputs, staging, the snapshot, a view's sync and
//! capture, flushing outputs, the diff — check it between files and stop with
//! `Error::Interrupted`, so that a signal is answered within a second whatever phase it finds;
//! the executor then saves the flow as interrupted, for `resume` to continue.

use std::sync::atomic::{AtomicBool, Ordering};

use ocflow_model::error::{Error, Result};
use tokio::sync::Notify;

static RAISED: AtomicBool = AtomicBool::new(false);
/// Wakes whoever waits for the stop (`stopped`): a step's model call on its own thread.
static STOPPED: Notify = Notify::const_new();

/// Marks the process as asked to stop (the signal listener calls it).
pub(crate) fn raise() {
    RAISED.store(true, Ordering::SeqCst);
    STOPPED.notify_waiters();
}

/// Returns once a stop is asked for. Needs no timer: it may be polled while the runtime shuts
/// down.
pub(crate) async fn stopped() {
    loop {
        let notified = STOPPED.notified();
        if raised() {
            return;
        }
        notified.await;
    }
}

/// Whether a stop was asked for.
pub fn raised() -> bool {
    RAISED.load(Ordering::SeqCst)
}

/// `Err(Error::Interrupted)` once a stop was asked for: a long loop's check between files.
pub(crate) fn check() -> Result<()> {
    if raised() {
        Err(Error::Interrupted)
    } else {
        Ok(())
    }
}
