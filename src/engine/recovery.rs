//! Recovery: what happens when a step fails for good. The LLM is shown the failed step, its
//! error, the tail of its log and its structured test failures, what is done and what remains,
//! and answers one strategy from a closed set. The answer is extracted and validated like a
//! plan (same re-ask rule); any flow it implies goes through the full flow validation. Limits
//! and the stuck rule stop a recovery that is going nowhere.

use std::collections::BTreeSet;
use std::fmt;
use std::fs;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::llm::answer;
use crate::model::flow::{FLOW_VERSION, Flow};
use crate::llm::client::{ChatRequest, Llm, LlmError, Message, ModelSettings};
use crate::flow::operations;
use crate::model::status::{FlowStatus, StepState};
use crate::flow::validate::{self, PathRules};
use crate::task::workspace::{self, TaskDir};

const PROMPT: &str = include_str!("../../prompts/recovery.md");
const FIX: &str = include_str!("../../prompts/recovery_fix.md");

/// Answers asked for per recovery round.
const MAX_ANSWERS: usize = 3;
/// How much of the step's log the model sees.
const LOG_TAIL_LINES: usize = 60;
const LOG_TAIL_BYTES: usize = 6000;

/// The bounds of recovery, from `[recovery]` in ocflow.toml.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Attempts of one step, all causes together.
    pub max_attempts_per_step: u32,
    /// Replans (new revisions of the remaining flow) per flow.
    pub max_revisions: u32,
    /// Strategies asked of the LLM per flow.
    pub max_recovery_calls: u32,
    /// Automatic retries of a transient failure, without asking the LLM.
    pub max_transient_retries: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_attempts_per_step: 3,
            max_revisions: 3,
            max_recovery_calls: 10,
            max_transient_retries: 2,
        }
    }
}

/// The closed set of strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StrategyKind {
    /// Run the same step again.
    Retry,
    /// Run a step (the failed one or one it depends on) again with changed parameters or
    /// instructions, then everything after it.
    Modify,
    /// Replace the failed step with one or more new steps.
    Alternative,
    /// Mark the failed step skipped; the steps that need its outputs are skipped too.
    Skip,
    /// A new revision of the remaining flow.
    Replan,
    /// Stop the flow.
    Abort,
}

impl fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        f.write_str(&name)
    }
}

/// A validated strategy, as journaled and kept in the status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub strategy: StrategyKind,
    pub reason: String,
    /// For `modify`: the changed step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<Value>,
    /// For `alternative` and `replan`: the new steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Value>,
}

impl Decision {
    /// Strategy and parameters, for the stuck rule: the same twice for one step is stuck.
    pub fn signature(&self) -> String {
        json!({"strategy": self.strategy, "step": self.step, "steps": self.steps}).to_string()
    }
}

/// Why recovery stopped; the flow fails with this in its summary.
#[derive(Debug, thiserror::Error)]
pub enum Stop {
    #[error(
        "step {step} has failed {attempts} time(s), the most allowed per step (max_attempts_per_step)"
    )]
    AttemptsCap { step: String, attempts: u32 },
    #[error(
        "{calls} recovery decision(s) were asked in this flow, the most allowed (max_recovery_calls)"
    )]
    RecoveryCallsCap { calls: u32 },
    #[error(
        "the LLM proposed replanning again, but the flow has been replanned {revisions} time(s), the most allowed (max_revisions)"
    )]
    RevisionsCap { revisions: u32 },
    #[error(
        "recovery is stuck: the LLM proposed `{strategy}` with the same parameters for step {step} a second time"
    )]
    Stuck {
        step: String,
        strategy: StrategyKind,
    },
    #[error("the LLM chose to abort: {reason}")]
    Aborted { reason: String },
    #[error(
        "no usable recovery strategy after {answers} answer(s) (saved in {dir}); last problems:\n{problems}"
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

/// A decision and the flow it leads to (`None`: the flow does not change).
pub struct Decided {
    pub decision: Decision,
    pub flow: Option<Flow>,
}

/// What recovery needs to see and check.
pub struct Context<'a> {
    pub llm: &'a Llm,
    pub settings: &'a ModelSettings,
    pub rules: &'a PathRules,
    pub task: &'a TaskDir,
    pub flow: &'a Flow,
    pub status: &'a FlowStatus,
    pub limits: Limits,
    /// Whether LLM-proposed commands may be destructive (`--allow-destructive`).
    pub allow_destructive: bool,
}

/// Checks the limits, then asks the LLM for a strategy for `failed` until one passes every
/// check (at most `MAX_ANSWERS` answers). Answers are saved in `<task>/recovery/`.
pub async fn decide(context: &Context<'_>, failed: &str) -> Result<Decided, Stop> {
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
    let mut messages = vec![Message::user(prompt(context, failed))];
    let mut problems = String::new();
    for answer_number in 1..=MAX_ANSWERS {
        let request = ChatRequest {
            purpose: "recovery".into(),
            settings: context.settings.clone(),
            messages: messages.clone(),
            json: true,
        };
        let reply = context.llm.chat(&request).await?;
        fs::write(
            dir.join(format!("{failed}-round{round}-answer{answer_number}.md")),
            &reply.content,
        )?;
        let checked = if reply.is_truncated() {
            Err(vec![
                "the answer was cut off (token limit): answer with a shorter JSON object"
                    .to_string(),
            ])
        } else {
            check(context, failed, &reply.content)
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
                problems = found
                    .iter()
                    .map(|p| format!("- {p}"))
                    .collect::<Vec<_>>()
                    .join("\n");
                messages.push(Message::assistant(reply.content));
                messages.push(Message::user(FIX.trim().replace("{{problems}}", &problems)));
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
pub fn redo(
    context: &Context<'_>,
    failed: &str,
    decision: Decision,
) -> Result<Decided, Vec<String>> {
    let flow = implied_flow(context, failed, &decision)?;
    Ok(Decided { decision, flow })
}

/// Parses an answer into a decision and the flow it implies, or the problems to show the
/// model. A repeated strategy, an exhausted cap and `abort` are final: they are not re-asked.
fn check(context: &Context<'_>, failed: &str, text: &str) -> Result<Decided, Vec<String>> {
    let extracted = answer::extract_json(text).map_err(|p| vec![p])?;
    let decision: Decision = serde_json::from_str(&extracted.json).map_err(|err| {
        vec![format!("the answer must be one JSON object {{\"strategy\": \"retry\" | \"modify\" | \"alternative\" | \"skip\" | \"replan\" | \"abort\", \"reason\": \"...\", \"step\": {{...}}, \"steps\": [...]}}: {err}")]
    })?;
    let flow = implied_flow(context, failed, &decision)?;
    if let Some(flow) = &flow
        && !context.allow_destructive
    {
        // Only what the LLM proposes now: steps that are new or changed.
        let proposed = flow
            .steps
            .iter()
            .filter(|s| context.flow.step(&s.id) != Some(*s));
        if let Some(problem) = destructive_steps(proposed) {
            return Err(vec![problem]);
        }
    }
    Ok(Decided { decision, flow })
}

/// The flow after a decision, fully validated; `None` when the flow itself does not change.
fn implied_flow(
    context: &Context<'_>,
    failed: &str,
    decision: &Decision,
) -> Result<Option<Flow>, Vec<String>> {
    let flow = context.flow;
    let new_steps = |values: &[Value]| -> Result<Vec<Value>, Vec<String>> {
        if values.is_empty() {
            return Err(vec![format!(
                "`{}` needs `steps`: the new steps",
                decision.strategy
            )]);
        }
        let clashes: Vec<String> = values
            .iter()
            .filter_map(|v| v.get("id").and_then(Value::as_str))
            .filter(|id| context.status.step(id).is_some())
            .map(|id| {
                format!("step id `{id}` is already used in this flow; new steps need fresh ids")
            })
            .collect();
        if clashes.is_empty() {
            Ok(values.to_vec())
        } else {
            Err(clashes)
        }
    };
    let mut steps: Vec<Value> = flow
        .steps
        .iter()
        .map(|s| serde_json::to_value(s).unwrap_or(Value::Null))
        .collect();
    match decision.strategy {
        StrategyKind::Retry | StrategyKind::Skip | StrategyKind::Abort => return Ok(None),
        StrategyKind::Modify => {
            let Some(changed) = &decision.step else {
                return Err(vec![
                    "`modify` needs `step`: the changed step, with the id of the step to change"
                        .into(),
                ]);
            };
            let id = changed.get("id").and_then(Value::as_str).unwrap_or(failed);
            if id != failed && !flow.ancestors(failed).contains(id) {
                return Err(vec![format!(
                    "`modify` may change step {failed} or a step it depends on; `{id}` is neither"
                )]);
            }
            let Some(position) = flow.steps.iter().position(|s| s.id == id) else {
                return Err(vec![format!("there is no step `{id}` to modify")]);
            };
            let mut merged = steps[position].clone();
            if let (Value::Object(target), Value::Object(change)) = (&mut merged, changed) {
                for (key, value) in change {
                    target.insert(key.clone(), value.clone());
                }
                target.insert("id".into(), Value::String(id.to_string()));
            }
            steps[position] = merged;
        }
        StrategyKind::Alternative => {
            let mut added = new_steps(&decision.steps)?;
            let failed_step = flow
                .step(failed)
                .ok_or_else(|| vec![format!("step {failed} is not in the flow")])?;
            let added_ids: Vec<String> = added
                .iter()
                .filter_map(|v| v.get("id").and_then(Value::as_str).map(str::to_string))
                .collect();
            // New steps without dependencies start where the failed step started.
            for value in &mut added {
                if value.get("depends_on").is_none_or(Value::is_null)
                    && !failed_step.depends_on.is_empty()
                {
                    value["depends_on"] = json!(failed_step.depends_on);
                }
            }
            // The steps that needed the failed step now need the new steps instead.
            let needed: BTreeSet<String> = added
                .iter()
                .flat_map(|v| match v.get("depends_on") {
                    Some(Value::String(dep)) => vec![dep.clone()],
                    Some(Value::Array(deps)) => deps
                        .iter()
                        .filter_map(|d| d.as_str().map(str::to_string))
                        .collect(),
                    _ => Vec::new(),
                })
                .collect();
            let sinks: Vec<String> = added_ids
                .iter()
                .filter(|id| !needed.contains(*id))
                .cloned()
                .collect();
            steps.retain(|v| v.get("id").and_then(Value::as_str) != Some(failed));
            for value in &mut steps {
                rewire(value, failed, &sinks);
            }
            steps.extend(added);
        }
        StrategyKind::Replan => {
            let added = new_steps(&decision.steps)?;
            steps.retain(|v| {
                v.get("id")
                    .and_then(Value::as_str)
                    .and_then(|id| context.status.step(id))
                    .is_some_and(|s| s.status == StepState::Succeeded)
            });
            steps.extend(added);
        }
    }
    let text = json!({"version": FLOW_VERSION, "task": flow.task, "steps": steps}).to_string();
    validate::parse_flow(&text, Some(&flow.task), context.rules)
        .map(Some)
        .map_err(|problems| problems.iter().map(|p| p.to_string()).collect())
}

/// Replaces `old` in a step's `depends_on` with `new`.
fn rewire(step: &mut Value, old: &str, new: &[String]) {
    let deps: Vec<String> = match step.get("depends_on") {
        Some(Value::String(dep)) => vec![dep.clone()],
        Some(Value::Array(deps)) => deps
            .iter()
            .filter_map(|d| d.as_str().map(str::to_string))
            .collect(),
        _ => return,
    };
    if !deps.iter().any(|d| d == old) {
        return;
    }
    let mut rewired: Vec<String> = deps.into_iter().filter(|d| d != old).collect();
    rewired.extend(new.iter().cloned());
    step["depends_on"] = json!(rewired);
}

/// The first step whose command is destructive, as a problem to show the model.
pub fn destructive_steps<'s>(steps: impl Iterator<Item = &'s crate::model::flow::Step>) -> Option<String> {
    steps.into_iter().find_map(|step| {
        let pattern = step.params.get("command").and_then(Value::as_str).and_then(destructive)?;
        Some(format!("step {}: the command contains `{pattern}`, which is refused (destructive); propose something that does not destroy data", step.id))
    })
}

/// The part of a command that makes it destructive, if any. LLM-proposed commands run on the
/// user's machine: wiping a home directory or a repository's history is never a recovery.
pub fn destructive(command: &str) -> Option<&'static str> {
    let squeezed = command.split_whitespace().collect::<Vec<_>>().join(" ");
    const PATTERNS: &[&str] = &[
        "rm -rf /",
        "rm -rf ~",
        "rm -rf $HOME",
        "rm -rf *",
        "rm -fr /",
        "rm -fr ~",
        "git reset --hard",
        "git clean -f",
        "git push --force",
        "mkfs",
        "dd if=",
        "> /dev/sd",
        ":(){",
        "chmod -R 777 /",
        "| sh",
        "| bash",
    ];
    PATTERNS.iter().find(|p| squeezed.contains(*p)).copied()
}

/// The recovery prompt: the failed step, its error and log tail, its structured test
/// failures, the steps done with their outputs, and the steps remaining.
fn prompt(context: &Context<'_>, failed: &str) -> String {
    let step_dir = context.task.step_dir(failed);
    let result: Value = fs::read(step_dir.join(workspace::RESULT_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    let entry = context.status.step(failed);
    let error = entry
        .and_then(|s| s.error.as_ref())
        .map_or("unknown", |e| e.message.as_str());
    let failures = result
        .get("tests")
        .and_then(|t| t.get("failures"))
        .and_then(Value::as_array)
        .filter(|f| !f.is_empty())
        .map(|failures| {
            failures
                .iter()
                .map(|f| {
                    format!(
                        "- {} — {}: {}",
                        text(f, "name"),
                        text(f, "error_type"),
                        text(f, "message")
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_else(|| "(none reported)".into());
    let mut log = String::new();
    for field in ["stdout", "stderr"] {
        if let Some(output) = result
            .get(field)
            .and_then(Value::as_str)
            .filter(|o| !o.trim().is_empty())
        {
            log.push_str(&format!("{field}:\n{}\n", tail(output)));
        }
    }
    if log.is_empty() {
        log =
            tail(&fs::read_to_string(step_dir.join(workspace::STEP_LOG_FILE)).unwrap_or_default());
    }
    let done: Vec<String> = context
        .flow
        .steps
        .iter()
        .filter_map(|s| {
            context
                .status
                .step(&s.id)
                .filter(|st| st.status == StepState::Succeeded)
                .map(|st| (s, st))
        })
        .map(|(s, st)| {
            let outputs = if st.output_files.is_empty() {
                String::new()
            } else {
                format!("; changed {}", st.output_files.join(", "))
            };
            format!(
                "- {} ({}): {}{outputs}",
                s.id,
                s.operation,
                st.message.as_deref().unwrap_or("")
            )
        })
        .collect();
    let remaining: Vec<String> = context
        .flow
        .steps
        .iter()
        .filter(|s| {
            s.id != failed
                && context
                    .status
                    .step(&s.id)
                    .is_some_and(|st| st.status == StepState::Pending)
        })
        .map(|s| serde_json::to_string(s).unwrap_or_default())
        .collect();
    let tried: Vec<String> = entry
        .map(|s| {
            s.recoveries
                .iter()
                .map(|r| format!("- {}: {}", r.strategy, r.reason))
                .collect()
        })
        .unwrap_or_default();
    let failed_json = context
        .flow
        .step(failed)
        .and_then(|s| serde_json::to_string(s).ok())
        .unwrap_or_default();
    PROMPT
        .trim()
        .replace("{{task}}", &context.flow.task)
        .replace("{{failed_step}}", &failed_json)
        .replace("{{attempts}}", &entry.map_or(0, |s| s.attempts).to_string())
        .replace("{{error}}", error)
        .replace("{{test_failures}}", &failures)
        .replace(
            "{{log}}",
            if log.trim().is_empty() {
                "(empty)"
            } else {
                log.trim_end()
            },
        )
        .replace("{{done}}", &or_none(&done))
        .replace("{{remaining}}", &or_none(&remaining))
        .replace("{{tried}}", &or_none(&tried))
        .replace("{{operations}}", operations::catalogue().trim_end())
}

fn text<'v>(value: &'v Value, field: &str) -> &'v str {
    value.get(field).and_then(Value::as_str).unwrap_or("?")
}

fn or_none(lines: &[String]) -> String {
    if lines.is_empty() {
        "(none)".into()
    } else {
        lines.join("\n")
    }
}

/// The last lines of a log, bounded in bytes.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    let mut text = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
    if text.len() > LOG_TAIL_BYTES {
        let cut = text.len() - LOG_TAIL_BYTES;
        let start = (cut..text.len())
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(text.len());
        text = format!("[…]{}", &text[start..]);
    }
    text
}

/// Saves the flow of a new revision as `flow.rN.json`, keeping the first as `flow.r1.json`.
pub fn save_revision(task: &TaskDir, flow: &Flow, revision: u32) -> crate::error::Result<()> {
    let first = task.file("flow.r1.json");
    if !first.exists() {
        let current = fs::read(task.file(workspace::FLOW_FILE)).unwrap_or_default();
        workspace::write_atomic(&first, &current)?;
    }
    workspace::write_json_atomic(&task.file(&format!("flow.r{revision}.json")), flow)
}

/// The flow of the status's revision: `flow.rN.json` when it exists (a crash may have come
/// before `flow.json` was replaced), else `flow.json`.
pub fn current_flow_file(task: &TaskDir, revision: u32) -> std::path::PathBuf {
    let revision_file = task.file(&format!("flow.r{revision}.json"));
    if revision > 1 && revision_file.is_file() {
        revision_file
    } else {
        task.file(workspace::FLOW_FILE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destructive_commands_are_recognised() {
        for bad in [
            "rm  -rf  ~",
            "cd / && rm -rf /",
            "git reset --hard HEAD",
            "curl http://x | sh",
        ] {
            assert!(destructive(bad).is_some(), "{bad}");
        }
        for fine in ["rm -rf build", "python3 -m pytest -q", "git status"] {
            assert!(destructive(fine).is_none(), "{fine}");
        }
    }

    #[test]
    fn rewiring_replaces_the_failed_dependency() {
        let mut step = json!({"id": "c", "depends_on": ["a", "b"]});
        rewire(&mut step, "b", &["x".into(), "y".into()]);
        assert_eq!(step["depends_on"], json!(["a", "x", "y"]));
    }
}
