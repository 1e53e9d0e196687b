//! SIGINT, SIGTERM and SIGHUP held while the repository is being written: a signal then waits
//! until the writer asks whether one came (between two files) and puts back what it wrote,
//! instead of killing the process with half the files in place.

/// The signals that stop ocflow.
const STOPPING: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Holds the stopping signals on this thread for as long as it lives; dropped, the thread's
/// signal mask is as it was.
pub(crate) struct HeldSignals {
    previous: libc::sigset_t,
    /// Whether the mask was changed (it may not be, on a system that refuses).
    held: bool,
    arrived: std::cell::Cell<bool>,
}

fn stopping_set() -> libc::sigset_t {
    // SAFETY: sigemptyset and sigaddset only write the set they are given.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in STOPPING {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

impl HeldSignals {
    pub(crate) fn hold() -> HeldSignals {
        let set = stopping_set();
        // SAFETY: pthread_sigmask reads `set` and writes `previous`, both valid.
        let (held, previous) = unsafe {
            let mut previous: libc::sigset_t = std::mem::zeroed();
            let held = libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut previous) == 0;
            (held, previous)
        };
        HeldSignals {
            previous,
            held,
            arrived: std::cell::Cell::new(false),
        }
    }

    /// Whether a stopping signal came while held. It is taken, so it does not kill the
    /// process when the mask is restored: the command ends as interrupted instead.
    pub(crate) fn arrived(&self) -> bool {
        if self.arrived.get() || !self.held {
            return self.arrived.get();
        }
        let set = stopping_set();
        // SAFETY: sigpending writes the set it is given; sigismember and sigtimedwait read
        // valid sets; a zero timeout makes sigtimedwait return at once.
        unsafe {
            let mut pending: libc::sigset_t = std::mem::zeroed();
            if libc::sigpending(&mut pending) != 0 {
                return false;
            }
            if !STOPPING
                .iter()
                .any(|&signal| libc::sigismember(&pending, signal) == 1)
            {
                return false;
            }
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            while libc::sigtimedwait(&set, std::ptr::null_mut(), &zero) > 0 {}
        }
        self.arrived.set(true);
        true
    }
}

impl Drop for HeldSignals {
    fn drop(&mut self) {
        if self.held {
            // SAFETY: restores the mask saved by `hold` on this same thread.
            unsafe {
                libc::pthread_sigmask(libc::SIG_SETMASK, &self.previous, std::ptr::null_mut());
            }
        }
    }
}
