//! Recovery: what happens when a step fails for good. The LLM is shown the failed step, its
//! error, the tail of its log and its structured test failures, what is done and what remains,
//! and answers one strategy from a closed set. The answer is extracted and validated like a
//! plan (same re-ask rule); any flow it implies goes through the full flow validation. Limits
//! and the stuck rule stop a recovery that is going nowhere.
//!
//! This file holds the loop of answers; what recovery sees, its limits and what it decides are
//! in `context`. What the model is shown is in `prompt`,
//! how its answer is read into a decision (or the problems to show it) in `reading`, and how a
//! decision is applied to the flow in `revision`, and what a code step run again is told in
//! `feedback`.

mod context;
pub(crate) mod feedback;
mod prompt;
mod reading;
mod revision;

use std::fs;

pub use context::Limits;
pub(crate) use context::{Context, Decided};

use crate::llm::answer;
use ocflow_model::decision::{Decision, StrategyKind};
use ocflow_model::llm::{ChatRequest, LlmError, Message};
use ocflow_model::prompt_template;

/// Answers asked for per recovery round.
const MAX_ANSWERS: usize = 3;

/// Why recovery stopped; the flow fails with this in its summary.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Stop {
    #[error(
        "step {step} has failed {attempts} time(s), the most allowed per step \
         (max_attempts_per_step)"
    )]
    AttemptsCap { step: String, attempts: u32 },
    #[error(
        "{calls} recovery answer(s) were asked of the LLM in this flow, the most allowed \
         (max_recovery_calls)"
    )]
    RecoveryCallsCap { calls: u32 },
    #[error(
        "the LLM proposed replanning again, but the flow has been replanned {revisions} time(s), \
         the most allowed (max_revisions)"
    )]
    RevisionsCap { revisions: u32 },
    #[error(
        "recovery is stuck: the LLM proposed `{strategy}` with the same parameters for step {step} \
         a second time"
    )]
    Stuck {
        step: String,
        strategy: StrategyKind,
    },
    #[error(
        "no usable recovery strategy after {answers} answer(s) (saved in {dir}); last \
         problems:\n{problems}"
    )]
    NoValidAnswer {
        answers: usize,
        dir: String,
        problems: String,
    },
    #[error("the recovery LLM call failed: {0}")]
    Llm(#[from] LlmError),
    #[error("cannot save the recovery answer: {0}")]
    Io(#[from] std::io::Error),
}

/// Checks the limits, then asks the LLM for a strategy for `failed` until one passes every
/// check (at most `MAX_ANSWERS` answers, fewer when two in a row have the same problems).
/// Answers are saved in `<task>/recovery/`.
pub(crate) async fn decide(context: &Context<'_>, failed: &str) -> Result<Decided, Stop> {
    let entry = context.status.step(failed);
    let attempts = entry.map_or(0, |s| s.attempts);
    if attempts >= context.limits.max_attempts_per_step {
        return Err(Stop::AttemptsCap {
            step: failed.to_string(),
            attempts,
        });
    }
    if context.status.recovery_calls >= context.limits.max_recovery_calls {
        return Err(Stop::RecoveryCallsCap {
            calls: context.status.recovery_calls,
        });
    }
    let round = entry.map_or(0, |s| s.recoveries.len()) + 1;
    let dir = context.task.root.join("recovery");
    fs::create_dir_all(&dir)?;
    let mut messages = vec![Message::user(prompt::prompt(context, failed))];
    let mut problems = String::new();
    let mut answers = answer::Answers::default();
    for answer_number in 1..=MAX_ANSWERS {
        let request = ChatRequest {
            purpose: "recovery".into(),
            settings: context.settings.for_answer(answer_number),
            messages: messages.clone(),
            json: true,
            schema: Some(reading::decision_schema()),
            optional: false,
        };
        let reply = context.llm.chat(&request).await?;
        fs::write(
            dir.join(format!("{failed}-round{round}-answer{answer_number}.md")),
            &reply.content,
        )?;
        if answers.repeats(&reply) {
            return Err(Stop::NoValidAnswer {
                answers: answer_number,
                dir: dir.display().to_string(),
                problems: format!("{problems}\n{}", answer::REPEATED),
            });
        }
        let checked = if reply.is_truncated() {
            Err(vec![
                "the answer was cut off (token limit): answer with a shorter JSON object"
                    .to_string(),
            ])
        } else {
            reading::check(context, failed, &reply.content)
        };
        // A limit reached is final, whatever the model would answer next.
        if let Ok(decided) = &checked
            && decided.decision.strategy == StrategyKind::Replan
            && context.status.replans >= context.limits.max_revisions
        {
            return Err(Stop::RevisionsCap {
                revisions: context.status.replans,
            });
        }
        match checked {
            Ok(decided) => return Ok(decided),
            Err(found) => {
                let said = std::mem::take(&mut problems);
                problems = found
                    .iter()
                    .map(|p| format!("- {p}"))
                    .collect::<Vec<_>>()
                    .join("\n");
                // A third answer after the same problems twice (a small model repeating a list
                // to the token limit) would cost minutes and differ little. Unlike the
                // planner's rule, whatever follows: a failed test of code gets the coder's try,
                // any other failure stops, as after three answers.
                if answer_number > 1 && problems == said {
                    return Err(Stop::NoValidAnswer {
                        answers: answer_number,
                        dir: dir.display().to_string(),
                        problems: format!("{problems}\n{}", answer::SAME_PROBLEM),
                    });
                }
                messages.push(Message::assistant(reply.content));
                messages.push(Message::user(prompt_template::fill_with(
                    prompt::FIX.trim(),
                    &[("problems", &problems)],
                )));
            }
        }
    }
    Err(Stop::NoValidAnswer {
        answers: MAX_ANSWERS,
        dir: dir.display().to_string(),
        problems,
    })
}

/// The flow a decision made before a crash leads to, computed again on resume.
pub(crate) fn redo(
    context: &Context<'_>,
    failed: &str,
    decision: Decision,
) -> Result<Decided, Stop> {
    let (flow, notes) = revision::implied_flow(context, failed, &decision).map_err(|problems| {
        Stop::NoValidAnswer {
            answers: 0,
            dir: "the status file".into(),
            problems: problems.join("\n"),
        }
    })?;
    Ok(Decided {
        decision,
        flow,
        notes,
    })
}
