//! The executor after a step failed: transient failures retried after a backoff, permanent
//! ones handed to recovery, and the decision carried out on the flow and its status (see the
//! state machine in DESIGN.md, "Recovery").

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Executor, Next, missing_step};
use crate::engine::recovery::{self, feedback};
use crate::task::events::beating;
use crate::task::{outputs, state};
use ocflow_model::decision::StrategyKind;
use ocflow_model::error::{Error, Result};
use ocflow_model::event::Event;
use ocflow_model::flow::Step;
use ocflow_model::llm::{LlmError, LlmErrorKind};
use ocflow_model::status::{self, FlowStatus, StepState};
use ocflow_model::step_result::{LlmFailure, StepResult};

/// How the reason of the coder's second try (`Executor::second_try`) begins.
const SECOND_TRY: &str = "the coder's second try";

impl Executor {
    /// A failed step: a transient failure is retried after a backoff, within bounds and
    /// without asking the LLM; a permanent one goes to recovery when there is an LLM.
    pub(super) async fn after_failure(&mut self, step: &Step) -> Result<Next> {
        // Whatever follows (a retry, a skip, a revision) may set steps back to pending.
        self.ready_from = 0;
        let result = self.failed_result(&step.id)?;
        // Failed because ocflow is stopping (its model call was ended by the signal, or its
        // command cancelled): the step did nothing wrong, and runs again on resume. Under load
        // the failure could be settled before the signal reached the loop, and `resume` then
        // stopped at a failed step.
        let stopping = result
            .as_ref()
            .and_then(|result| result.llm_error.as_ref())
            .is_some_and(|error| error.kind == crate::engine::bridge::STOPPING_KIND);
        if stopping || crate::task::interrupt::raised() {
            let entry = self
                .status
                .step_mut(&step.id)
                .ok_or_else(|| missing_step(&self.task, &step.id))?;
            entry.requeue(Some("interrupted while running; it runs again on resume"))?;
            entry.error = None;
            self.save()?;
            return Ok(Next::Interrupted);
        }
        let llm_error = result
            .as_ref()
            .and_then(|result| result.llm_error.as_ref())
            .and_then(LlmFailure::llm_error);
        if let Some(error) = llm_error.clone().filter(LlmError::model_unusable) {
            // Recovery would ask the same refusing endpoint, and any new step would too: the
            // flow stops at once, resumable once the user fixed the key, the URL or the model.
            return self.stop_for_the_model(&step.id, error);
        }
        let limits = self.settings.recovery_limits;
        let retryable = step.params.get("retryable").and_then(Value::as_bool) == Some(true);
        let transient = result.as_ref().is_some_and(|result| {
            result.llm_error.as_ref().is_some_and(|e| e.transient)
                || (result.timed_out == Some(true) && retryable)
        });
        if let Some(reason) = result.as_ref().and_then(bwrap_refused)
            && self.fall_back_a_layer(&step.id, &reason)?
        {
            // The command never ran: it runs again at once with the next set of layers,
            // without the LLM, whatever the attempts left (at most twice a flow: each time
            // takes a layer off).
            return self.run_again_at_once(&step.id);
        }
        let unmounted = result.as_ref().and_then(overlay_not_mounted);
        if let Some(reason) = &unmounted
            && self.overlay_works != Some(false)
        {
            // What failed for one step would fail for the next: copies from now on.
            self.overlay_works = Some(false);
            self.events.emit(Event::Warning {
                message: format!(
                    "the overlay of step {}'s view could not be mounted ({reason}): command \
                     steps run in copies of the repository from now on",
                    step.id
                ),
            })?;
        }
        let again_in_a_copy = (unmounted.is_some()
            || result.as_ref().is_some_and(refused_a_rename))
            && self.copy_views.insert(step.id.clone());
        if again_in_a_copy {
            // The overlay refused to rename a directory the view already had (EXDEV), which
            // a copied view allows, or could not be mounted: the command runs again at once in
            // a copy, without the LLM, whatever the attempts left (the step did nothing wrong;
            // once per step).
            return self.run_again_at_once(&step.id);
        }
        let entry = self
            .status
            .step_mut(&step.id)
            .ok_or_else(|| missing_step(&self.task, &step.id))?;
        if transient
            && entry.auto_retries < limits.max_transient_retries
            && entry.attempts < limits.max_attempts_per_step
        {
            let retry = entry.retry_transient()?;
            let delay = std::time::Duration::from_secs(1 << (retry - 1).min(5));
            self.save()?;
            self.events.emit(Event::StepRetrying {
                step: step.id.clone(),
                retry,
                delay_ms: delay.as_millis() as u64,
            })?;
            let interrupt = self.interrupt.clone();
            tokio::select! {
                () = tokio::time::sleep(delay) => return Ok(Next::Continue),
                () = interrupt.wait() => return Ok(Next::Interrupted),
            }
        }
        if self.settings.recovery.is_none() {
            // Its retries spent, the model's failure is what ended the flow.
            self.llm_failure = llm_error;
            return Ok(Next::Stop);
        }
        self.status.pending_recovery = Some(status::PendingRecovery {
            step: step.id.clone(),
            decision: None,
        });
        self.save()?;
        self.recover(&step.id).await
    }

    /// Runs a step that did nothing wrong again at once, without the LLM, whatever the
    /// attempts left (its sandbox or view was at fault, not its command).
    fn run_again_at_once(&mut self, id: &str) -> Result<Next> {
        let entry = self
            .status
            .step_mut(id)
            .ok_or_else(|| missing_step(&self.task, id))?;
        let retry = entry.retry_transient()?;
        self.save()?;
        self.events.emit(Event::StepRetrying {
            step: id.to_string(),
            retry,
            delay_ms: 0,
        })?;
        Ok(Next::Continue)
    }

    /// Takes a layer off the flow's sandbox after bubblewrap refused to start step `id`'s
    /// command (`reason`): the overlays first (the known case: no `/proc` mount in the user
    /// namespace the launcher makes for them), then the namespaces. Says so; false when there
    /// was no layer left to take.
    fn fall_back_a_layer(&mut self, id: &str, reason: &str) -> Result<bool> {
        let Some(plan) = self.settings.sandbox.as_mut() else {
            return Ok(false);
        };
        let what = if plan.overlay {
            plan.overlay = false;
            self.overlay_works = Some(false);
            "without overlays (views are copies; tool caches start empty in each step)"
        } else if plan.bwrap.is_some() {
            plan.bwrap = None;
            "without namespaces (Landlock and the limits hold)"
        } else {
            return Ok(false);
        };
        self.status.sandbox = Some(format!("{}: {}", plan.kind(), plan.describe()));
        self.events.emit(Event::Warning {
            message: format!(
                "bubblewrap could not start step {id}'s command ({reason}): command steps run \
                 {what} from now on"
            ),
        })?;
        Ok(true)
    }

    /// The result of a step that just failed: kept from when it was recorded, or read once
    /// (a recovery that a crash interrupted).
    fn failed_result(&mut self, id: &str) -> Result<Option<StepResult>> {
        match self.failed_results.get(id) {
            Some(result) => Ok(Some(result.clone())),
            None => state::load_result(&self.task, id),
        }
    }

    /// One recovery round for the failed step: a decision (the pending one after a crash, or
    /// a new one from the LLM), the stuck rule, then carrying it out.
    pub(super) async fn recover(&mut self, failed: &str) -> Result<Next> {
        if self.settings.recovery.is_none() {
            return Ok(Next::Stop);
        }
        let pending = self
            .status
            .pending_recovery
            .as_ref()
            .and_then(|p| p.decision.clone());
        let result = self.failed_result(failed)?;
        // Tests of code that failed: the coder tries again first, shown them, before the model
        // is asked for a strategy (no question, so no memory of it either).
        let coder_first = pending
            .is_none()
            .then(|| self.coder_first(failed, result.as_ref()))
            .flatten();
        // The failure as the memory keeps it, and the past ones like it, before the call.
        let memory =
            (self.settings.memory.clone()).filter(|_| pending.is_none() && coder_first.is_none());
        let remembered = match (&memory, self.flow.step(failed)) {
            (Some(memory), Some(step)) => {
                let failure = memory.failure(
                    &self.task.task_id,
                    &self.flow.task,
                    step,
                    self.status.step(failed),
                    result.as_ref(),
                    &self.task.step_dir(failed),
                );
                let recalled = memory.for_recovery(&failure);
                Some((failure, recalled))
            }
            _ => None,
        };
        let mut past_experience = String::new();
        let mut memory_problem = None;
        if let Some((_, recalled)) = &remembered {
            match recalled {
                Ok(recalled) => {
                    past_experience = recalled.text.clone();
                    self.status.use_memories(&recalled.ids);
                }
                Err(error) => memory_problem = Some(error.to_string()),
            }
        }
        if let Some(problem) = memory_problem {
            self.events.emit(Event::Warning {
                message: format!("recovery goes on without the failure memory: {problem}"),
            })?;
        }
        let Some(settings) = &self.settings.recovery else {
            return Ok(Next::Stop);
        };
        let context = recovery::Context {
            llm: &settings.llm,
            settings: &settings.model,
            rules: &settings.rules,
            task: &self.task,
            flow: &self.flow,
            status: &self.status,
            limits: self.settings.recovery_limits,
            policy: settings.policy,
            roles: &settings.roles,
            result: result.as_ref(),
            past_experience: &past_experience,
        };
        let before = settings.llm.usage_for("recovery");
        let asked = pending.is_none();
        let decided = match (pending, coder_first) {
            (Some(decision), _) => recovery::redo(&context, failed, decision),
            (None, Some(first)) => Ok(first),
            (None, None) => {
                let interrupt = self.interrupt.clone();
                let (pulse, tokens, llm) = (self.events.pulse(), self.status.tokens, &settings.llm);
                let beat = || {
                    let mut so_far = tokens;
                    so_far.add(&llm.usage_for("recovery").since(&before));
                    pulse.beat("recovering", vec![failed.to_string()], so_far);
                };
                tokio::select! {
                    decided = beating(recovery::decide(&context, failed), beat) => decided,
                    () = interrupt.wait() => return Ok(Next::Interrupted),
                }
            }
        };
        let used = settings.llm.usage_for("recovery").since(&before);
        self.status.count_tokens(&settings.model.profile, &used);
        // Every answer asked for counts, usable or not.
        self.status.recovery_calls += u32::try_from(used.calls).unwrap_or(u32::MAX);
        let decided = match decided {
            Ok(decided) => decided,
            Err(recovery::Stop::Llm(error)) if error.kind == LlmErrorKind::BudgetExhausted => {
                // The budget refused the question: the recovery stays pending, asked on
                // resume (the flow pauses).
                self.save()?;
                return Ok(Next::Stop);
            }
            // Not for a saved decision that no longer holds on resume: that one was recorded.
            Err(stop @ recovery::Stop::NoValidAnswer { .. }) if asked => {
                match self.second_try(failed, result.as_ref(), &no_strategy("no usable answer")) {
                    Some(decided) => decided,
                    None => return self.stop_recovery(failed, &stop.to_string()),
                }
            }
            // The endpoint refused this question (a prompt longer than its context): the
            // coder's request is another one, and the step is no less worth a try.
            Err(recovery::Stop::Llm(error)) if asked && error.kind == LlmErrorKind::BadRequest => {
                // Every 4xx is this kind: a profile every request of which is refused is
                // said here, and ends the flow at the next question.
                let said: String = error.message.chars().take(300).collect();
                let why = no_strategy(&format!("the question was refused: {said}"));
                match self.second_try(failed, result.as_ref(), &why) {
                    Some(decided) => {
                        self.events.emit(Event::Warning {
                            message: format!(
                                "the endpoint refused the recovery question for step {failed} \
                                 ({said}): the code is tried again instead"
                            ),
                        })?;
                        decided
                    }
                    None => {
                        self.llm_failure = Some(error.clone());
                        let stop = recovery::Stop::Llm(error);
                        return self.stop_recovery(failed, &stop.to_string());
                    }
                }
            }
            Err(stop) => {
                // The recovery's call failed after the client's retries: the model, not the
                // step, is what the user must fix.
                if let recovery::Stop::Llm(error) = &stop {
                    self.llm_failure = Some(error.clone());
                }
                return self.stop_recovery(failed, &stop.to_string());
            }
        };
        let fresh = self
            .status
            .pending_recovery
            .as_ref()
            .is_some_and(|p| p.decision.is_none());
        let decided = if fresh && self.tried(failed, &decided.decision) {
            let again = no_strategy("the same strategy a second time");
            match self.second_try(failed, result.as_ref(), &again) {
                Some(second) => second,
                None => {
                    let stuck = recovery::Stop::Stuck {
                        step: failed.to_string(),
                        strategy: decided.decision.strategy,
                    };
                    return self.stop_recovery(failed, &stuck.to_string());
                }
            }
        } else {
            decided
        };
        let signature = decided.decision.signature();
        // `--approve risky`: asked once, when decided, in the same status write as the
        // decision (a crash between the two cannot carry it out unasked); the decision
        // `ocflow approve` resumes is then carried out.
        let asking = match &self.settings.approve_risky {
            Some(policy) if fresh => Self::needs_approval(&decided.decision, policy),
            _ => None,
        };
        if fresh {
            // The coder's try alone leaves nothing for the reflection to learn from.
            self.recovered_in_this_run |= !decided.decision.reason.starts_with(SECOND_TRY);
            let revision = decided.flow.as_ref().map(|_| self.status.revision + 1);
            if let Some(entry) = self.status.step_mut(failed) {
                entry.recoveries.push(status::RecoveryRecord {
                    strategy: decided.decision.strategy,
                    reason: decided.decision.reason.clone(),
                    signature,
                    revision,
                    at: status::now(),
                });
            }
            self.status.pending_recovery = Some(status::PendingRecovery {
                step: failed.to_string(),
                decision: Some(decided.decision.clone()),
            });
            if let Some(why) = &asking {
                self.mark_waiting(failed, why)?;
            }
            self.save()?;
            self.events.emit(Event::RecoveryDecided {
                step: failed.to_string(),
                strategy: decided.decision.strategy.to_string(),
                reason: decided.decision.reason.clone(),
                revision,
            })?;
            if let (Some(memory), Some((failure, _))) = (&memory, remembered) {
                // Remembered with the strategy that followed; how it ended is known later.
                if let Err(error) = memory.record(failure, &decided.decision) {
                    self.events.emit(Event::Warning {
                        message: format!("this failure is not remembered: {error}"),
                    })?;
                }
            }
            for message in &decided.notes {
                self.events.emit(Event::Warning {
                    message: message.clone(),
                })?;
            }
        }
        if let Some(why) = asking {
            return self.announce_waiting(failed, why);
        }
        self.carry_out(failed, decided)
    }

    /// Whether the model's `decision` (strategy and parameters) was already taken for step
    /// `failed`. The coder's try is ocflow's, not the model's: a model that asks to run the
    /// code again after it, with its reason, is not repeating itself.
    fn tried(&self, failed: &str, decision: &ocflow_model::decision::Decision) -> bool {
        let signature = decision.signature();
        self.status.step(failed).is_some_and(|entry| {
            (entry.recoveries.iter())
                .any(|r| r.signature == signature && !r.reason.starts_with(SECOND_TRY))
        })
    }

    /// Whether the coder's try was taken for step `failed` (once per failed step).
    fn coder_tried(&self, failed: &str) -> bool {
        self.status.step(failed).is_some_and(|entry| {
            (entry.recoveries.iter()).any(|r| r.reason.starts_with(SECOND_TRY))
        })
    }

    /// The coder's second try taken before the model is asked, when the failed step's runner
    /// reported failing tests of code: the model alone is given the failing tests at once in
    /// Aider's protocol, and a recovery answer costs a call (minutes of a small model on a
    /// CPU) that is rarely better advice than the tests themselves. A step that failed without
    /// failing tests (a missing tool, a wrong command) goes to the model, which may change it.
    /// Within the failed step's attempts too, which `recovery::decide` checks for the model.
    fn coder_first(&self, failed: &str, result: Option<&StepResult>) -> Option<recovery::Decided> {
        let tests_failed = result
            .and_then(|r| r.tests.as_ref())
            .is_some_and(|tests| !tests.failures.is_empty());
        let attempts = self.status.step(failed).map_or(0, |s| s.attempts);
        let within = attempts < self.settings.recovery_limits.max_attempts_per_step;
        let why = "before the model is asked for a strategy";
        (tests_failed && within).then(|| self.second_try(failed, result, why))?
    }

    /// The coder's second try (why it is taken: `why`) for a failed test of code: the code
    /// step runs again, shown the failing test, as the model alone is in Aider's protocol.
    /// Once per failed step and within the code step's attempts; `None` otherwise.
    fn second_try(
        &self,
        failed: &str,
        result: Option<&StepResult>,
        why: &str,
    ) -> Option<recovery::Decided> {
        let code = feedback::code_step_of(&self.flow, failed, result)?;
        // A step that writes tests is never told to make them pass by ocflow itself.
        let writes_tests = crate::flow::deliverables::file_writes(&self.flow)
            .iter()
            .any(|(id, path)| *id == code && crate::flow::test_command::is_test_file(path));
        if writes_tests {
            return None;
        }
        let attempts = self.status.step(&code).map_or(0, |s| s.attempts);
        if attempts >= self.settings.recovery_limits.max_attempts_per_step {
            return None;
        }
        let decision = ocflow_model::decision::Decision {
            strategy: StrategyKind::Retry,
            reason: format!("{SECOND_TRY}, {why}: step {code} runs again, shown the failing test"),
            step: Some(serde_json::json!({"id": code})),
            steps: Vec::new(),
        };
        (!self.coder_tried(failed)).then_some(recovery::Decided {
            decision,
            flow: None,
            notes: Vec::new(),
        })
    }

    /// Applies a decision to the flow and the status, then clears the pending recovery in one
    /// atomic status write. A new flow revision is saved as `flow.rN.json` before that write
    /// and copied to `flow.json` after it, so a crash anywhere leaves a state resume redoes.
    fn carry_out(&mut self, failed: &str, decided: recovery::Decided) -> Result<Next> {
        let decision = decided.decision;
        // The coder is told the failing test; ocflow's own reason for the try is no advice.
        let advice = if decision.reason.starts_with(SECOND_TRY) {
            ""
        } else {
            decision.reason.as_str()
        };
        let feedback = self.feedback_for(failed, advice)?;
        let skip = |status: &mut FlowStatus, id: &str, message: String| -> Result<()> {
            match status.step_mut(id) {
                Some(entry) => Ok(entry.skip(message)?),
                None => Ok(()),
            }
        };
        let mut next = Next::Continue;
        match (decision.strategy, decided.flow) {
            (StrategyKind::Retry, _) => {
                // The step named (the code a failing test checks), or the failed one, and what
                // follows it.
                let target = decision.step_id().unwrap_or(failed).to_string();
                self.reset(&target)?;
                if target != failed {
                    for id in self.descendants(&target) {
                        self.reset(&id)?;
                    }
                }
                self.give_feedback(&target, feedback);
            }
            (StrategyKind::Skip, _) => {
                skip(
                    &mut self.status,
                    failed,
                    format!("skipped by recovery: {}", decision.reason),
                )?;
                for id in self.descendants(failed) {
                    let reason =
                        format!("skipped: it needs the outputs of the skipped step {failed}");
                    skip(&mut self.status, &id, reason)?;
                }
            }
            (StrategyKind::Abort, _) => {
                self.status.message = Some(format!(
                    "recovery aborted the flow at step {failed}: {}",
                    decision.reason
                ));
                next = Next::Stop;
            }
            (strategy, Some(flow)) => {
                let revision = self.status.revision + 1;
                state::save_revision(&self.task, &flow, revision)?;
                let old: BTreeSet<String> = self.flow.steps.iter().map(|s| s.id.clone()).collect();
                let kept: BTreeSet<String> = flow.steps.iter().map(|s| s.id.clone()).collect();
                let added: Vec<_> = flow
                    .steps
                    .iter()
                    .filter(|s| self.status.step(&s.id).is_none())
                    .map(FlowStatus::pending_step)
                    .collect();
                self.status.steps.extend(added);
                for id in old.difference(&kept) {
                    let reason = if id == failed && strategy == StrategyKind::Alternative {
                        format!("replaced in revision {revision}: {}", decision.reason)
                    } else {
                        format!("dropped by revision {revision}")
                    };
                    skip(&mut self.status, id, reason)?;
                }
                if strategy == StrategyKind::Modify {
                    let target = decision.step_id().unwrap_or(failed).to_string();
                    self.set_flow(flow);
                    self.reset(&target)?;
                    for id in self.descendants(&target) {
                        self.reset(&id)?;
                    }
                    self.give_feedback(&target, feedback);
                } else {
                    self.set_flow(flow);
                }
                if strategy == StrategyKind::Replan {
                    self.status.replans += 1;
                }
                self.status.revision = revision;
            }
            (strategy, None) => {
                return Err(Error::internal(format!(
                    "recovery strategy {strategy} came without a flow"
                )));
            }
        }
        self.status.pending_recovery = None;
        self.save()?;
        state::save_flow(&self.task, &self.flow)?;
        outputs::rebuild_final_output(&self.task, &self.status, &self.flow)?;
        Ok(next)
    }

    /// What a code step run again after `failed` failed is told (`recovery::feedback`): its
    /// error, failing tests, output's end, and the recovery's `reason`.
    fn feedback_for(&mut self, failed: &str, reason: &str) -> Result<String> {
        let result = self.failed_result(failed)?;
        let error = self
            .status
            .step(failed)
            .and_then(|s| s.error.as_ref())
            .map_or("unknown", |e| e.message.as_str());
        Ok(feedback::text(
            failed,
            error,
            result.as_ref(),
            &self.task.step_dir(failed),
            reason,
        ))
    }

    /// Tells step `id`, when it asks the model to write code, why it runs again.
    fn give_feedback(&mut self, id: &str, feedback: String) {
        let writes_code = self.flow.step(id).is_some_and(feedback::writes_code);
        if let Some(entry) = self.status.step_mut(id).filter(|_| writes_code) {
            entry.feedback = Some(feedback);
        }
    }

    /// Sets a step back to pending; its earlier outputs no longer count. A step an earlier
    /// decision skipped stays skipped.
    fn reset(&mut self, id: &str) -> Result<()> {
        if let Some(entry) = self
            .status
            .step_mut(id)
            .filter(|s| s.status != StepState::Skipped)
        {
            entry.reset("runs again after a recovery decision")?;
            // What it was told the last time no longer holds (`give_feedback` says it anew).
            entry.feedback = None;
        }
        Ok(())
    }

    /// Every step of the current flow that depends on `id`, directly or not.
    fn descendants(&self, id: &str) -> Vec<String> {
        self.flow
            .steps
            .iter()
            .filter(|s| self.graph.depends_on(&s.id, id))
            .map(|s| s.id.clone())
            .collect()
    }

    /// Step `step`'s call was refused by the model (`error`): no recovery is asked, the flow
    /// fails saying what to fix, and a plain `resume` runs the step again.
    fn stop_for_the_model(&mut self, step: &str, error: LlmError) -> Result<Next> {
        let reason = format!(
            "the model refused step {step}'s call ({error}); fix that, then run `ocflow resume \
             {}`",
            self.task.task_id
        );
        self.status.message = Some(reason.clone());
        self.llm_failure = Some(error);
        self.save()?;
        self.events.emit(Event::RecoveryStopped {
            step: step.to_string(),
            reason,
        })?;
        Ok(Next::Stop)
    }

    /// Recovery cannot go on: the flow fails, and its summary says why.
    fn stop_recovery(&mut self, step: &str, reason: &str) -> Result<Next> {
        self.status.pending_recovery = None;
        self.status.message = Some(format!("recovery stopped at step {step}: {reason}"));
        self.save()?;
        self.events.emit(Event::RecoveryStopped {
            step: step.to_string(),
            reason: reason.to_string(),
        })?;
        Ok(Next::Stop)
    }
}

/// Why the coder's second try is taken when the model gave no strategy (`what` it gave).
fn no_strategy(what: &str) -> String {
    format!("as the model gave no usable recovery strategy ({what})")
}

/// Whether a command failed in a view made of layers because the kernel refused to rename a
/// directory (EXDEV: overlays mounted in a user namespace cannot redirect directories; `mv`
/// copies instead, Python's `os.rename` and Node's `fs.rename` fail). The words are in glibc's
/// and musl's `strerror` ("Invalid cross-device link", "Cross-device link"), so in what
/// Python, Go, Rust and Java print, and in Node's ("EXDEV: cross-device link not permitted").
fn refused_a_rename(result: &StepResult) -> bool {
    let said = |field: &str| {
        result
            .fields
            .get(field)
            .and_then(Value::as_str)
            .is_some_and(|text| text.to_ascii_lowercase().contains("cross-device link"))
    };
    result.view.as_deref() == Some("overlay") && (said("stderr") || said("stdout"))
}

/// Why bubblewrap could not start a step's command, when that is why it failed: bubblewrap
/// exits 1 saying `bwrap: …` (as "bwrap: Can't mount proc on /newroot/proc: Operation not
/// permitted") before the command runs. Only for a step that ran in namespaces.
fn bwrap_refused(result: &StepResult) -> Option<String> {
    let in_namespaces = result
        .fields
        .get("sandbox_layers")
        .and_then(|layers| layers.get("namespaces"))
        .and_then(Value::as_bool);
    let exit_code = result.fields.get("exit_code").and_then(Value::as_i64);
    if in_namespaces != Some(true) || exit_code != Some(1) {
        return None;
    }
    let stderr = result.fields.get("stderr").and_then(Value::as_str)?;
    let first = stderr.lines().find(|line| !line.trim().is_empty())?.trim();
    first.starts_with("bwrap: ").then(|| first.to_string())
}

/// Why the sandbox launcher could not mount a step's view made of layers, when that is why the
/// command did not run: the launcher exits 126, as a shell does, saying "cannot ... for the
/// overlay: ...". The probes make it rare (a kernel that refuses one mount but took the
/// probe's); a copied view needs no mount.
fn overlay_not_mounted(result: &StepResult) -> Option<String> {
    let stderr = result.fields.get("stderr").and_then(Value::as_str)?;
    let exit_code = result.fields.get("exit_code").and_then(Value::as_i64);
    if result.view.as_deref() != Some("overlay") || exit_code != Some(126) {
        return None;
    }
    stderr
        .lines()
        .find(|line| line.contains(" for the overlay: "))
        .map(|line| line.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(fields: serde_json::Value) -> StepResult {
        let mut value = serde_json::json!({"version": 1, "status": "failure", "message": "m"});
        value
            .as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_launcher_that_could_not_mount_the_overlay_is_told_from_a_failing_command() {
        let said = "ocflow-sandbox: cannot mount for the overlay: Invalid argument (os error 22)\n";
        let unmounted =
            result(serde_json::json!({"view": "overlay", "exit_code": 126, "stderr": said}));
        assert_eq!(
            overlay_not_mounted(&unmounted).as_deref(),
            Some("ocflow-sandbox: cannot mount for the overlay: Invalid argument (os error 22)")
        );
        // A command's own exit 126, a copied view, or other words: the command's failure.
        let denied = "bash: ./run: Permission denied";
        for fields in [
            serde_json::json!({"view": "overlay", "exit_code": 126, "stderr": denied}),
            serde_json::json!({"view": "copy", "exit_code": 126, "stderr": said}),
            serde_json::json!({"view": "overlay", "exit_code": 1, "stderr": said}),
        ] {
            assert_eq!(
                overlay_not_mounted(&result(fields.clone())),
                None,
                "{fields}"
            );
        }
    }

    #[test]
    fn a_bubblewrap_refusal_is_told_from_a_failing_command() {
        let said = "bwrap: Can't mount proc on /newroot/proc: Operation not permitted\n";
        let layers = serde_json::json!({"namespaces": true});
        let refused = result(serde_json::json!(
            {"exit_code": 1, "stderr": said, "sandbox_layers": layers}
        ));
        assert_eq!(
            bwrap_refused(&refused).as_deref(),
            Some("bwrap: Can't mount proc on /newroot/proc: Operation not permitted")
        );
        // Another exit code, no namespaces, or other words first: the command's failure.
        for fields in [
            serde_json::json!({"exit_code": 2, "stderr": said, "sandbox_layers": layers}),
            serde_json::json!(
                {"exit_code": 1, "stderr": said, "sandbox_layers": {"namespaces": false}}
            ),
            serde_json::json!(
                {"exit_code": 1, "stderr": format!("make: *** x\n{said}"), "sandbox_layers": layers}
            ),
        ] {
            assert_eq!(bwrap_refused(&result(fields.clone())), None, "{fields}");
        }
    }

    #[test]
    fn a_refused_rename_is_told_by_its_words_in_a_view_made_of_layers() {
        let exdev = "OSError: [Errno 18] Invalid cross-device link: 'pkg' -> 'lib'";
        assert!(refused_a_rename(&result(
            serde_json::json!({"view": "overlay", "stderr": exdev})
        )));
        assert!(!refused_a_rename(&result(
            serde_json::json!({"view": "copy", "stderr": exdev})
        )));
    }
}
