//! The flow's end: its final state (succeeded when every deliverable holds, no change when its
//! steps delivered none of them, failed otherwise), the summary (by the LLM when there is one,
//! else from the journal), the diff, and the `FlowFinished` event.

use std::path::PathBuf;

use super::{Executor, FlowOutcome};
use crate::engine::deliverable_check::{self, Done};
use crate::llm::planner::PlanError;
use crate::task::events::Events;
use crate::task::outputs;
use crate::task::state;
use crate::task::workspace::{self, TaskDir};
use ocflow_model::error::{Error, Result};
use ocflow_model::event::Event;
use ocflow_model::exit::ExitCode;
use ocflow_model::flow::Flow;
use ocflow_model::status::{self, FlowState, FlowStatus, StepState};

impl Executor {
    /// Ends the flow: succeeded when every step did, failed otherwise; writes the summary.
    /// The LLM writes the summary when there is one; if that call fails, the journal-based
    /// summary is written and the flow's result is unaffected.
    pub(super) async fn finish_flow(&mut self) -> Result<FlowOutcome> {
        // A signal that came while the last step was recorded: not a finished flow.
        if self.interrupt.is_raised() {
            return self.stopped_by_signal();
        }
        // A flow of LLM steps alone never waited for the sandbox probe: its plan is recorded.
        self.record_sandbox().await?;
        // A budget stopped it with steps (or a recovery) left: paused, never failed.
        if let Some(exceeded) = self.budget_exceeded()
            && self.left_for_the_budget()
        {
            return self.pause(exceeded);
        }
        // The last steps' ends reach the file now, the flow still running: rebuilding
        // final_output/ before the final write takes seconds on a long flow.
        if self.checkpoint.behind_since.is_some() {
            self.save()?;
        }
        // Succeeded, or skipped by a recovery decision; an abort or a failure fails the flow.
        let all_done = self.status.message.is_none()
            && self.flow.steps.iter().all(|step| {
                self.status
                    .step(&step.id)
                    .is_some_and(|s| matches!(s.status, StepState::Succeeded | StepState::Skipped))
            });
        // Done is decided by the evidence: each deliverable of the flow (what its plan says done
        // means, or what its steps imply) against the net change, the checks' runs and the
        // answer. A flow whose steps all succeeded and delivered none of it made no change; one
        // that delivered part of it failed.
        let changes = crate::task::review::changes(&self.task, &self.status, &self.flow)?;
        let changed: Vec<String> = changes
            .iter()
            .map(|c| c.path.as_str().to_string())
            .collect();
        let checks = deliverable_check::check(&self.task, &self.status, &self.flow, &changed);
        let (ended, unmet) =
            match deliverable_check::verdict(&checks, self.flow.deliverables.as_ref()) {
                _ if !all_done => (FlowState::Failed, None),
                Done::All => (FlowState::Succeeded, None),
                Done::Part(why) => (FlowState::Failed, Some(why)),
                Done::Nothing(why) => (FlowState::NoChange, Some(why)),
            };
        if all_done {
            self.status.message = unmet;
        }
        self.status.deliverables = checks;
        self.status.move_to(ended)?;
        self.status.finished_at = Some(status::now());
        // The summary's call goes out now and is answered while final_output/ is rebuilt, the
        // status saved and the diff written: it reads none of them (its facts are the status
        // and the steps' outputs).
        // A model that ended the flow is not asked for its summary too: the journal's is
        // written, at once.
        let spent = self.budget_exceeded();
        if let (Some(exceeded), Some(_)) = (spent, &self.settings.summary_llm) {
            ocflow_model::output::say(&format!(
                "ocflow: {exceeded}: the summary is written from the journal"
            ));
        }
        let summary_llm = self
            .settings
            .summary_llm
            .clone()
            .filter(|_| self.llm_failure.is_none() && spent.is_none());
        let summary_call = summary_llm.clone().map(|(llm, settings)| {
            let before = llm.usage_for("summary");
            let (task, status, flow) = (self.task.clone(), self.status.clone(), self.flow.clone());
            let call = tokio::spawn(async move {
                crate::engine::summary::with_llm(&task, &status, &flow, &llm, &settings).await
            });
            (call, before)
        });
        // Steps finish in any order; final_output/ follows the flow's order, as the diff does.
        let kept = changes.clone();
        let ready = outputs::rebuild_final_output(&self.task, &self.status, &self.flow)
            .and_then(|()| self.save())
            .and_then(|()| self.write_diff(changes));
        if let (Err(_), Some((call, _))) = (&ready, &summary_call) {
            call.abort();
        }
        let (changed_files, diff) = ready?;
        crate::task::layered_view::remove_build_layers(&self.task);
        self.hooks_at_end(&ended.to_string(), &changed);
        let summary_path = self.task.file(workspace::SUMMARY_FILE);
        let mut summary = None;
        if let (Some((mut call, before)), Some((llm, settings))) = (summary_call, summary_llm) {
            let (pulse, tokens) = (self.events.pulse(), self.status.tokens);
            let writing = async {
                (&mut call).await.unwrap_or_else(|err| {
                    Err(crate::engine::summary::SummaryError::State(
                        Error::internal(format!("the summary's call failed: {err}")),
                    ))
                })
            };
            let beat = || pulse.beat("summarising", Vec::new(), tokens);
            // Ctrl-C while the model writes: its call is dropped, the journal's summary written.
            let interrupt = self.interrupt.clone();
            let written = tokio::select! {
                written = crate::task::events::beating(writing, beat) => Some(written),
                () = interrupt.wait() => None,
            };
            call.abort();
            match written {
                Some(Ok(written)) => summary = Some(written),
                Some(Err(reason)) => {
                    // A failed flow whose model refuses even its summary: the caller learns
                    // what to fix before any resume or recovery can work.
                    if let crate::engine::summary::SummaryError::Llm(error) = &reason
                        && error.model_unusable()
                        && ended == FlowState::Failed
                    {
                        self.llm_failure = Some(error.clone());
                    }
                    ocflow_model::output::say(&format!(
                        "ocflow: the LLM summary failed ({reason}); writing the summary from the \
                     journal"
                    ))
                }
                None => ocflow_model::output::say(
                    "ocflow: interrupted while the model wrote the summary; writing it from the \
                     journal",
                ),
            }
            self.status
                .count_tokens(&settings.profile, &llm.usage_for("summary").since(&before));
            self.save()?;
        }
        let (summary, contradicted_claims) = match summary {
            Some(written) => (written.text, written.contradicted),
            None => (
                crate::engine::summary::from_journal_with(
                    &self.task,
                    &self.status,
                    &self.flow,
                    &kept,
                )?,
                Vec::new(),
            ),
        };
        let mut summary = summary;
        if let Some(lesson) = self.reflect().await? {
            summary = format!(
                "{}\n\n## What was learned (the model's reflection)\n\n{lesson}\n",
                summary.trim_end()
            );
        }
        self.remember_the_end(ended == FlowState::Succeeded)?;
        workspace::write_atomic(&summary_path, summary.as_bytes())?;
        self.events.emit(Event::FlowFinished {
            task_id: self.task.task_id.clone(),
            state: self.status.state,
            reason: self.status.failure_reason(),
            changed_files,
            diff,
            summary: summary_path,
            summary_text: summary,
            tokens: self.status.tokens,
            contradicted_claims,
            budget: Some(self.status.budget).filter(|b| !b.is_empty()),
            final_answer: crate::engine::final_answer::find(&self.task, &self.status, &self.flow),
            deliverables: self.status.deliverables.clone(),
        })?;
        Ok(if ended == FlowState::Succeeded {
            FlowOutcome::Succeeded
        } else {
            FlowOutcome::Failed
        })
    }

    /// The reflection's lesson, after a flow that needed recovery in this run: one short call
    /// to the summary's model, none with `--no-reflect`, after the model ended the flow, or
    /// after a signal. Kept in the failure memory beside the flow's failures. A failed call is
    /// said and costs the flow nothing.
    async fn reflect(&mut self) -> Result<Option<String>> {
        let Some((llm, settings)) = self.settings.summary_llm.clone() else {
            return Ok(None);
        };
        // A resume that only finished what an earlier run recovered (and reflected on) asks
        // nothing more.
        if !self.settings.reflect
            || !self.recovered_in_this_run
            || self.llm_failure.is_some()
            || self.interrupt.is_raised()
            || !crate::engine::reflection::needed(&self.status)
        {
            return Ok(None);
        }
        // What the failed steps printed, as the memory kept it (the status keeps a message).
        let mut errors = std::collections::BTreeMap::new();
        if let Some(memory) = &self.settings.memory
            && let Ok(remembered) = memory.of_flow(&self.task.task_id)
        {
            for r in remembered {
                errors
                    .entry(r.failure.step)
                    .or_insert(r.failure.error_lines);
            }
        }
        let before = llm.usage_for("reflection");
        let call =
            crate::engine::reflection::reflect(&self.status, &self.flow, &errors, &llm, &settings);
        let interrupt = self.interrupt.clone();
        let answered = tokio::select! {
            answered = call => Some(answered),
            () = interrupt.wait() => None,
        };
        self.status.count_tokens(
            &settings.profile,
            &llm.usage_for("reflection").since(&before),
        );
        self.save()?;
        let lesson = match answered {
            Some(Ok(lesson)) => lesson,
            Some(Err(reason)) => {
                self.events.emit(Event::Warning {
                    message: format!("no reflection on this flow: {reason}"),
                })?;
                return Ok(None);
            }
            None => return Ok(None),
        };
        if let Some(memory) = &self.settings.memory
            && let Err(error) = memory.teach(&self.task.task_id, &lesson, self.fix_was_checked())
        {
            self.events.emit(Event::Warning {
                message: format!("the reflection is not remembered: {error}"),
            })?;
        }
        Ok(Some(lesson))
    }

    /// Whether the flow verified its fix: it succeeded, and a command it had to pass passed
    /// after every change. Only such a flow's lesson is recalled as a fact.
    fn fix_was_checked(&self) -> bool {
        self.status.state == FlowState::Succeeded
            && self.status.deliverables.iter().any(|check| {
                check.met && check.kind == ocflow_model::deliverable::DeliverableKind::Command
            })
    }

    /// The flow's failures still open in the memory end with it: fixed when their step
    /// succeeded in the end, or the flow did.
    fn remember_the_end(&mut self, succeeded: bool) -> Result<()> {
        // A flow that recovered nothing left nothing open: the file is not even opened.
        let Some(memory) = self
            .settings
            .memory
            .as_ref()
            .filter(|_| crate::engine::reflection::needed(&self.status))
        else {
            return Ok(());
        };
        let succeeded_steps: Vec<String> = self
            .status
            .steps
            .iter()
            .filter(|s| s.status == StepState::Succeeded)
            .map(|s| s.id.clone())
            .collect();
        if let Err(error) = memory.settle(&self.task.task_id, succeeded, &succeeded_steps) {
            self.events.emit(Event::Warning {
                message: format!("the failure memory was not told how this flow ended: {error}"),
            })?;
        }
        Ok(())
    }

    /// Writes `changes.diff` of the flow's net `changes` (none without changes); returns the
    /// changed files and the diff.
    fn write_diff(
        &self,
        changes: Vec<crate::task::review::Change>,
    ) -> Result<(Vec<String>, Option<PathBuf>)> {
        let diff = if changes.is_empty() {
            None
        } else {
            let path = self.task.file(workspace::DIFF_FILE);
            let text = crate::task::review::unified_diff(&changes)?;
            workspace::write_atomic(&path, text.as_bytes())?;
            Some(path)
        };
        let changed_files = changes
            .into_iter()
            .map(|c| c.path.as_str().to_string())
            .collect();
        Ok((changed_files, diff))
    }
}

/// A flow whose planning failed, or whose task the model refused (`engine::planning`): saved
/// `failed` with no steps, its summary from the journal, and said. An LLM that cannot be used
/// (a refused key, a wrong URL) is the caller's to fix: a headless caller learns it as the
/// command's error too, with what to check, not only as a failed flow.
pub(crate) fn fail_planning(
    task: &TaskDir,
    mut status: FlowStatus,
    empty: &Flow,
    events: &mut Events,
    error: &PlanError,
    callers_fault: bool,
) -> Result<()> {
    status.move_to(FlowState::Failed)?;
    // A refusal is the model's answer, not a failure to plan.
    let said = match error {
        PlanError::Refused { .. } => error.to_string(),
        _ => format!("planning failed: {error}"),
    };
    status.message = Some(said.clone());
    status.finished_at = Some(status::now());
    state::save_status(task, &mut status)?;
    end_unrun(task, &status, empty, events)?;
    ocflow_model::output::say(&format!("ocflow: {said}"));
    if let PlanError::Llm(llm_error) = error {
        let unusable = Error::Llm(llm_error.clone());
        let code = if callers_fault {
            ExitCode::Usage
        } else {
            ExitCode::Failure
        };
        events.show(Event::Error {
            code: unusable.code().into(),
            exit_code: code.code(),
            message: said,
            hint: unusable.hint(),
        });
    }
    Ok(())
}

/// Records the end of a flow that ended failed before any step ran (planning failed, the plan
/// rejected): its summary from the journal, and the `FlowFinished` event. The status was saved.
pub fn end_unrun(
    task: &TaskDir,
    status: &FlowStatus,
    flow: &Flow,
    events: &mut Events,
) -> Result<()> {
    let summary_path = task.file(workspace::SUMMARY_FILE);
    let summary = crate::engine::summary::from_journal(task, status, flow)?;
    workspace::write_atomic(&summary_path, summary.as_bytes())?;
    events.emit(Event::FlowFinished {
        task_id: task.task_id.clone(),
        state: status.state,
        reason: status.failure_reason(),
        changed_files: Vec::new(),
        diff: None,
        summary: summary_path,
        summary_text: summary,
        tokens: status.tokens,
        contradicted_claims: Vec::new(),
        budget: Some(status.budget).filter(|b| !b.is_empty()),
        final_answer: None,
        deliverables: Vec::new(),
    })
}
