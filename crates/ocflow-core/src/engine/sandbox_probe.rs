//! The sandbox probe as a handle: made when a command's configuration is read, started on a
//! thread of its own (the probe is processes that make namespaces: tens of milliseconds on a
//! quiet machine, tenths of a second on a loaded one) when the command starts, and waited for
//! by whoever first needs the plan. A `run` that plans waits once planned; a flow given with
//! `--plan` hands the handle to the engine (`PendingSandbox`), which starts the probe once its
//! first steps are on their way (it would otherwise take the processors from the interpreter's
//! start and those steps) and waits for it before its first command step; a flow without a
//! command step never probes (the probe was a fifth of a one-step flow's CPU).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::engine::sandbox::{SandboxPlan, SandboxSettings};
use ocflow_model::error::{Error, Result};

/// The sandbox plan, probed on a thread of its own; `plan` waits for it.
#[derive(Debug, Clone)]
pub struct SandboxProbe(Arc<Mutex<Probe>>);

#[derive(Debug)]
enum Probe {
    /// Not started yet: `begin` (or the first `plan`) starts it.
    Deferred(Box<SandboxSettings>),
    Running(JoinHandle<Result<Option<SandboxPlan>>>),
    /// Boxed: a plan is many times the size of the other states.
    Done(Option<Box<SandboxPlan>>),
    /// The probe failed; its message, for every later `plan`.
    Failed(String),
    /// Between taking the thread's handle and storing what it gave.
    Joining,
}

impl SandboxProbe {
    /// No probe: the plan is known (`None`: commands run without a sandbox).
    pub fn decided(plan: Option<SandboxPlan>) -> SandboxProbe {
        SandboxProbe(Arc::new(Mutex::new(Probe::Done(plan.map(Box::new)))))
    }

    /// A probe with `settings`, started by `begin` or by the first `plan`.
    pub fn deferred(settings: SandboxSettings) -> SandboxProbe {
        SandboxProbe(Arc::new(Mutex::new(Probe::Deferred(Box::new(settings)))))
    }

    /// Starts probing on a thread of its own, unless it has started already.
    pub fn begin(&self) {
        let Ok(mut state) = self.0.lock() else {
            return;
        };
        if let Probe::Deferred(_) = &*state {
            let Probe::Deferred(settings) = std::mem::replace(&mut *state, Probe::Joining) else {
                return;
            };
            let started = std::thread::Builder::new()
                .name("sandbox-probe".into())
                .spawn(move || SandboxPlan::probe(*settings));
            *state = match started {
                Ok(handle) => Probe::Running(handle),
                Err(err) => Probe::Failed(format!("cannot start the sandbox probe: {err}")),
            };
        }
    }

    /// Whether the probe was started (or its plan known from the start).
    pub fn started(&self) -> bool {
        self.0
            .lock()
            .is_ok_and(|state| !matches!(&*state, Probe::Deferred(_)))
    }

    /// The plan, waiting for the probe if it still runs; a failed probe is an error (a usage
    /// error: its message names the fix) every time it is asked.
    pub fn plan(&self) -> Result<Option<SandboxPlan>> {
        self.begin();
        let mut state = self
            .0
            .lock()
            .map_err(|_| Error::internal("the sandbox probe's state was poisoned"))?;
        if let Probe::Running(_) = &*state {
            let Probe::Running(handle) = std::mem::replace(&mut *state, Probe::Joining) else {
                return Err(Error::internal(
                    "the sandbox probe changed while it was read",
                ));
            };
            *state = match handle.join() {
                Ok(Ok(plan)) => Probe::Done(plan.map(Box::new)),
                Ok(Err(err)) => Probe::Failed(err.to_string()),
                Err(_) => Probe::Failed("the sandbox probe panicked".into()),
            };
        }
        match &*state {
            Probe::Done(plan) => Ok(plan.as_deref().cloned()),
            Probe::Failed(message) => Err(Error::Usage(message.clone())),
            Probe::Deferred(_) | Probe::Running(_) | Probe::Joining => {
                Err(Error::internal("the sandbox probe has no answer"))
            }
        }
    }
}

/// What the flow's sandbox says of itself once known: the status's sandbox line and the
/// warnings of the flow's start (what the probe left out, the key, the dependencies). Made by
/// the command, which knows where the key came from.
pub type SandboxReport = dyn Fn(Option<&SandboxPlan>) -> (String, Vec<String>) + Send + Sync;

/// A sandbox plan the engine waits for before the first step that needs it (a command step);
/// until then the flow's LLM steps run.
pub struct PendingSandbox {
    pub probe: SandboxProbe,
    /// The paths no command may write (the repository, the workspace), as `protecting` takes
    /// them.
    pub protect: Vec<PathBuf>,
    pub report: Box<SandboxReport>,
}

impl std::fmt::Debug for PendingSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingSandbox")
            .field("probe", &self.probe)
            .field("protect", &self.protect)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decided_plan_is_given_every_time() {
        let probe = SandboxProbe::decided(None);
        assert!(probe.plan().unwrap().is_none());
        assert!(probe.clone().plan().unwrap().is_none());
    }
}
