//! Waiting for the sandbox's plan, which a flow given with `--plan` starts without
//! (`Settings::pending_sandbox`): before the first step in a view, and at the end for the
//! record. Until then the flow's LLM steps run beside the probe.

use super::Executor;
use crate::engine::sandbox::SandboxPlan;
use crate::engine::sandbox_probe::SandboxProbe;
use crate::flow::operations;
use ocflow_model::error::{Error, Result};
use ocflow_model::event::Event;

/// The status's sandbox line of a flow that never had a command step.
const NOT_PROBED: &str = "not probed: the flow had no command step";

/// The probe's plan, waited for on a blocking thread: the run loop's worker stays free for the
/// LLM steps running beside it, the heartbeat and signals.
async fn probed(probe: &SandboxProbe) -> Result<Option<SandboxPlan>> {
    let probe = probe.clone();
    tokio::task::spawn_blocking(move || probe.plan())
        .await
        .map_err(|err| Error::internal(format!("waiting for the sandbox probe: {err}")))?
}

impl Executor {
    /// Whether the flow has a step that needs the sandbox: only then is it probed.
    pub(super) fn has_command_steps(&self) -> bool {
        self.flow.steps.iter().any(operations::needs_sandbox)
    }

    /// Takes the probed plan into the settings (protecting the repository and workspace), and
    /// records and says what it is, as the flow's start did when it waited. A probe that
    /// failed is the flow's error (its message names the fix): the caller stops the flow,
    /// resumable, before any command step starts.
    pub(super) async fn wait_for_sandbox(&mut self) -> Result<()> {
        let Some(pending) = self.settings.pending_sandbox.take() else {
            return Ok(());
        };
        let plan = probed(&pending.probe).await?;
        self.settings.sandbox = plan.map(|plan| plan.protecting(&pending.protect));
        let (line, warnings) = (pending.report)(self.settings.sandbox.as_ref());
        self.status.sandbox = Some(line);
        for message in warnings {
            self.events.emit(Event::Warning { message })?;
        }
        Ok(())
    }

    /// At the end of a flow that never needed the sandbox: its plan for the record (the
    /// status and the summary say what would have confined commands). A probe that failed
    /// stopped nothing here, and is said as a warning.
    pub(super) async fn record_sandbox(&mut self) -> Result<()> {
        let Some(probe) = self
            .settings
            .pending_sandbox
            .as_ref()
            .map(|p| p.probe.clone())
        else {
            return Ok(());
        };
        // A flow that never had a command step does not probe for the record alone.
        if !probe.started() {
            self.settings.pending_sandbox = None;
            self.status.sandbox = Some(NOT_PROBED.into());
            return Ok(());
        }
        match probed(&probe).await {
            Ok(_) => self.wait_for_sandbox().await,
            Err(error) => {
                self.settings.pending_sandbox = None;
                self.events.emit(Event::Warning {
                    message: format!("no command step ran, and none could have: {error}"),
                })
            }
        }
    }
}
