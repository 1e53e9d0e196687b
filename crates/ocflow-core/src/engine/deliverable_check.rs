//! Whether a flow delivered what its plan says "done" means, decided when it ends from the
//! evidence alone: the net change against the snapshot, each step's state, which steps a
//! command's run saw and in what order they finished, and the answer's step with what it was
//! given. Never from the words of the task or of any model.

use serde_json::Value;

use crate::flow::deliverables as settled;
use crate::task::workspace::TaskDir;
use ocflow_model::deliverable::{
    AnswerDeliverable, CommandDeliverable, DeliverableCheck, DeliverableKind, Deliverables,
    Required,
};
use ocflow_model::flow::Flow;
use ocflow_model::status::{FlowStatus, StepState, StepStatus};

/// Checks every deliverable of `flow` (inferred from its steps when it names none). `changed`:
/// the repository paths the flow's net change touches.
pub(crate) fn check(
    task: &TaskDir,
    status: &FlowStatus,
    flow: &Flow,
    changed: &[String],
) -> Vec<DeliverableCheck> {
    let deliverables = match &flow.deliverables {
        Some(deliverables) => deliverables.clone(),
        // A flow saved before deliverables existed: its steps say what it delivers.
        None => settled::inferred(flow),
    };
    let inferred = deliverables.inferred;
    let mut checks: Vec<DeliverableCheck> = Vec::new();
    if inferred {
        // A flow that named nothing delivers the change it made, whichever step made it (a
        // file written, then moved by a command, is delivered where it ended).
        for path in changed {
            checks.push(file(status, path, changed, true));
        }
        if changed.is_empty() && !deliverables.files.is_empty() {
            checks.push(DeliverableCheck {
                kind: DeliverableKind::File,
                what: deliverables.files.join(", "),
                met: false,
                detail: "the flow's steps wrote them, and its end changes no file".into(),
                inferred: true,
            });
        }
    } else {
        for path in &deliverables.files {
            checks.push(file(status, path, changed, false));
        }
    }
    for command in &deliverables.commands {
        let check = self::command(status, flow, command, changed, inferred);
        checks.push(match (&command.reproduced_by, command.required) {
            (Some(step), required) => {
                let standing_in = required == Some(Required::RepositoryTests);
                let shown = Reproduction {
                    step,
                    check_step: &command.step,
                    standing_in,
                };
                reproduced(task, status, &shown, changed, check)
            }
            (None, Some(Required::RepositoryTests)) => {
                repository_tests(task, status, command, changed, check)
            }
            _ => check,
        });
    }
    if let Some(answer) = &deliverables.answer {
        checks.push(self::answer(task, status, flow, answer, inferred));
    }
    checks
}

/// What the checks make of the flow.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Done {
    /// Every deliverable holds, and the flow delivered something.
    All,
    /// Some hold, not all: what is missing, in one sentence.
    Part(String),
    /// Nothing delivered: why, in one sentence.
    Nothing(String),
}

/// The verdict of `checks`: a flow delivers the files it changes, the answer it gives, and the
/// commands its plan says must pass; the commands of a model's plan that named no deliverables
/// only check a change, and deliver nothing of their own.
pub(crate) fn verdict(checks: &[DeliverableCheck], deliverables: Option<&Deliverables>) -> Done {
    let planned = deliverables.is_some_and(|d| d.planned);
    let delivers = |check: &&DeliverableCheck| {
        check.met && !(planned && check.kind == DeliverableKind::Command)
    };
    let missing: Vec<String> = checks.iter().filter(|c| !c.met).map(|c| c.line()).collect();
    if !checks.iter().any(|c| delivers(&c)) {
        let ran = checks.iter().any(|c| c.met);
        let why = if !missing.is_empty() {
            format!("not done: {}", missing.join("; "))
        } else if ran {
            "not done: the flow delivered nothing — its commands passed, and they check a change \
             it did not make; it changed no file and gave no answer from the files"
                .into()
        } else {
            "not done: the flow delivered nothing — it changed no file, ran no test after a \
             change and gave no answer from the files"
                .into()
        };
        return Done::Nothing(why);
    }
    match missing.is_empty() {
        true => Done::All,
        false => Done::Part(format!("not done: {}", missing.join("; "))),
    }
}

fn file(status: &FlowStatus, path: &str, changed: &[String], inferred: bool) -> DeliverableCheck {
    let by = status
        .steps
        .iter()
        .filter(|s| s.status == StepState::Succeeded)
        .filter(|s| {
            s.output_files
                .iter()
                .chain(&s.deleted_files)
                .any(|f| f == path)
        })
        .max_by_key(|s| s.sequence);
    let deleted = by.is_some_and(|s| s.deleted_files.iter().any(|f| f == path));
    let by = by.map(|s| s.id.clone());
    let met = changed.iter().any(|c| c == path);
    let detail = match (met, by) {
        (true, Some(step)) if deleted => format!("deleted by step {step}"),
        (true, Some(step)) => format!("changed by step {step}"),
        (true, None) => "changed".into(),
        (false, Some(step)) => {
            format!("step {step} wrote it back as the repository has it: no change")
        }
        (false, None) => "unchanged: no step that succeeded changed it".into(),
    };
    DeliverableCheck {
        kind: DeliverableKind::File,
        what: path.to_string(),
        met,
        detail,
        inferred,
    }
}

fn command(
    status: &FlowStatus,
    flow: &Flow,
    command: &CommandDeliverable,
    changed: &[String],
    inferred: bool,
) -> DeliverableCheck {
    let what = command
        .command
        .clone()
        .unwrap_or_else(|| format!("the tests of step {}", command.step));
    let result = |met: bool, detail: String| DeliverableCheck {
        kind: DeliverableKind::Command,
        what: what.clone(),
        met,
        detail,
        inferred,
    };
    // The step validation chose, else (a revision replaced it) the last that runs it and passed.
    let named = status.step(&command.step);
    let runner = named
        .filter(|s| s.status == StepState::Succeeded)
        .or_else(|| {
            status
                .steps
                .iter()
                .filter(|s| s.status == StepState::Succeeded)
                .filter(|s| {
                    flow.step(&s.id)
                        .is_some_and(|step| settled::runs(step, command.command.as_deref()))
                })
                .max_by_key(|s| s.sequence)
        });
    let Some(runner) = runner else {
        let detail = match named {
            Some(step) if step.status == StepState::Failed => format!(
                "step {} failed: {}",
                step.id,
                step.message.as_deref().unwrap_or("no message")
            ),
            Some(step) => format!("step {} is {}: it never passed", step.id, step.status),
            None => "no step ran it".into(),
        };
        return result(false, detail);
    };
    // A command the flow's author placed (inferred, not a test) passes where it runs.
    let tests = flow
        .step(&runner.id)
        .and_then(|s| crate::flow::operations::find(&s.operation))
        .is_some_and(|op| op.runs_tests);
    if inferred && !tests {
        return result(true, format!("passed in step {}", runner.id));
    }
    // Every change the flow kept must be one the run saw: made by a step it depends on, and
    // finished before it (a recovery may have changed files again after it ran).
    let ancestors = flow.ancestors(&runner.id);
    let unseen = status
        .steps
        .iter()
        .filter(|s| s.status == StepState::Succeeded && s.id != runner.id)
        .filter(|s| changes_kept(s, changed))
        .find(|s| !ancestors.contains(&s.id) || s.sequence > runner.sequence);
    let Some(writer) = unseen else {
        return result(
            true,
            format!("passed in step {}, after every change", runner.id),
        );
    };
    let what = writer
        .output_files
        .iter()
        .chain(&writer.deleted_files)
        .find(|f| changed.contains(f))
        .map_or("files", String::as_str);
    // A flow that named none runs its tests where its author put them: they pass there.
    if inferred {
        return result(
            true,
            format!(
                "passed in step {}, which does not see step {}'s change to {what}",
                runner.id, writer.id
            ),
        );
    }
    result(
        false,
        format!(
            "step {} ran it before step {} changed {what}",
            runner.id, writer.id
        ),
    )
}

fn answer(
    task: &TaskDir,
    status: &FlowStatus,
    flow: &Flow,
    answer: &AnswerDeliverable,
    inferred: bool,
) -> DeliverableCheck {
    let result = |met: bool, detail: String| DeliverableCheck {
        kind: DeliverableKind::Answer,
        what: answer.question.clone(),
        met,
        detail,
        inferred,
    };
    let step = status
        .step(&answer.step)
        .filter(|s| s.status == StepState::Succeeded)
        .or_else(|| {
            // A revision replaced it: the last marked step that answers and succeeded.
            flow.steps
                .iter()
                .filter(|s| s.final_answer)
                .filter_map(|s| status.step(&s.id))
                .filter(|s| s.status == StepState::Succeeded)
                .max_by_key(|s| s.sequence)
        });
    let Some(step) = step else {
        let detail = match status.step(&answer.step) {
            Some(s) if s.status == StepState::Failed => format!(
                "step {} failed: {}",
                s.id,
                s.message.as_deref().unwrap_or("no message")
            ),
            Some(s) => format!("step {} is {}: no answer", s.id, s.status),
            None => "no step gave it".into(),
        };
        return result(false, detail);
    };
    let Some(spec) = flow
        .step(&step.id)
        .and_then(|s| crate::flow::operations::find(&s.operation))
    else {
        return result(false, format!("step {} is not in the flow", step.id));
    };
    let Some(field) = spec.answers else {
        return result(
            false,
            format!("step {} ({}) answers no question", step.id, spec.name),
        );
    };
    let answered = crate::task::state::load_result(task, &step.id)
        .ok()
        .flatten();
    let text = answered
        .as_ref()
        .and_then(|r| match r.fields.get(field) {
            Some(Value::String(text)) => Some(text.trim().to_string()),
            _ => None,
        })
        .unwrap_or_default();
    if text.is_empty() {
        return result(false, format!("step {} gave no answer", step.id));
    }
    // Given the code's output as evidence, the answer must state it (the library compares
    // the answer with the output's last line).
    if let Some(fields) = answered.as_ref().map(|r| &r.fields)
        && fields.get("states_evidence") == Some(&Value::Bool(false))
    {
        let printed = fields
            .get("evidence_printed")
            .and_then(Value::as_str)
            .unwrap_or("its output");
        return result(
            false,
            format!(
                "step {}'s answer does not state what the code printed (`{printed}`), asked \
                 twice",
                step.id
            ),
        );
    }
    let from = if answer.files.is_empty() {
        String::new()
    } else {
        format!(" from {}", answer.files.join(", "))
    };
    result(true, format!("answered by step {}{from}", step.id))
}

/// A command that must pass after the change, judged with its run before it (step `step`,
/// `reproduce`): a failure then and a pass now show that the change did it. A reproduction that
/// never showed the problem (it passed before the change, could not run, or did not run) shows
/// nothing, and the change is not shown done: a model's reproduction is asked for where nothing
/// else checks the change, so its failing to show the problem leaves the change unchecked.
fn reproduced(
    task: &TaskDir,
    status: &FlowStatus,
    reproduction: &Reproduction,
    changed: &[String],
    after: DeliverableCheck,
) -> DeliverableCheck {
    let Reproduction {
        step,
        check_step,
        standing_in,
    } = *reproduction;
    let shown = status
        .step(step)
        .filter(|s| s.status == StepState::Succeeded)
        .and_then(|_| crate::task::state::load_result(task, step).ok().flatten())
        .filter(|r| r.fields.get("reproduced") == Some(&Value::Bool(true)));
    match shown {
        Some(before) => {
            let exit = before
                .fields
                .get("exit_code")
                .cloned()
                .unwrap_or(Value::Null);
            let text = |name: &str| before.fields.get(name).and_then(Value::as_str);
            // The repository's tests showed the problem: in the model's command's stead (it
            // showed nothing), or as the reproduction from the start.
            let tests = match (text("first_command"), text("command")) {
                (Some(_), tests) => tests,
                (None, tests) if standing_in => tests,
                _ => None,
            };
            if let Some(tests) = tests
                && let Some(why) = tests_unfit(task, status, check_step, tests, changed)
            {
                return DeliverableCheck {
                    met: false,
                    detail: format!(
                        "the repository's tests `{tests}` showed the problem before the change \
                         (step {step}), and {why}"
                    ),
                    ..after
                };
            }
            let what = match (text("first_command"), tests) {
                (Some(first), Some(tests)) => format!(
                    "the repository's tests `{tests}` failed before the change (`{first}` showed \
                     nothing; "
                ),
                _ => "it failed before the change (".to_string(),
            };
            DeliverableCheck {
                detail: format!("{what}step {step}, exit code {exit}); {}", after.detail),
                ..after
            }
        }
        None => {
            let why = match status.step(step) {
                Some(s) => format!(
                    "step {step} is {}: {}",
                    s.status,
                    s.message.as_deref().unwrap_or("no message")
                ),
                None => format!("step {step} is not in the flow"),
            };
            DeliverableCheck {
                met: false,
                detail: format!("the problem was never shown before the change ({why})"),
                ..after
            }
        }
    }
}

/// A command that reproduced the task's problem: the step that ran it before the change, the
/// step that runs it after, and whether it is the repository's tests standing in for the
/// model's reproduction (`Required::RepositoryTests`).
#[derive(Clone, Copy)]
struct Reproduction<'a> {
    step: &'a str,
    check_step: &'a str,
    standing_in: bool,
}

/// The repository's tests, required of a change the model wrote no reproduction for: their pass
/// shows nothing once the flow changed or deleted a test the repository had (a test it adds is
/// the task's, "add tests for …"), or when the step that passed ran another command.
fn repository_tests(
    task: &TaskDir,
    status: &FlowStatus,
    command: &CommandDeliverable,
    changed: &[String],
    after: DeliverableCheck,
) -> DeliverableCheck {
    let tests = command.command.as_deref().unwrap_or_default();
    let snapshot = task.snapshot();
    let had: Vec<String> = changed
        .iter()
        .filter(|path| snapshot.join(path.as_str()).exists())
        .cloned()
        .collect();
    match tests_unfit(task, status, &command.step, tests, &had) {
        Some(why) if after.met => DeliverableCheck {
            met: false,
            detail: format!("the repository's tests `{tests}` passed, but {why}"),
            ..after
        },
        _ => after,
    }
}

/// Why the repository's tests, which showed the problem in a reproduction's stead, cannot show
/// that it is solved: the flow changed a test (a test edited to pass proves nothing), or the
/// check after the change did not run them (a recovery rewrote it into another command).
fn tests_unfit(
    task: &TaskDir,
    status: &FlowStatus,
    check_step: &str,
    tests: &str,
    changed: &[String],
) -> Option<String> {
    let edited: Vec<&str> = changed
        .iter()
        .map(String::as_str)
        .filter(|path| crate::flow::test_command::is_test_file(path))
        .collect();
    if !edited.is_empty() {
        return Some(format!(
            "the flow changed tests ({}): they cannot show that it is solved",
            edited.join(", ")
        ));
    }
    let ran = status
        .step(check_step)
        .filter(|s| s.status == StepState::Succeeded)
        .and_then(|_| {
            crate::task::state::load_result(task, check_step)
                .ok()
                .flatten()
        })
        .and_then(|r| {
            r.fields
                .get("command")
                .and_then(Value::as_str)
                .map(settled::normalize)
        });
    if ran.as_deref() != Some(settled::normalize(tests).as_str()) {
        return Some(format!(
            "step {check_step} did not pass them after the change (it ran {})",
            ran.map_or("nothing that passed".into(), |c| format!("`{c}`"))
        ));
    }
    None
}

/// Whether the step's last run changed a file the flow's net change keeps (a cache a command
/// left under an ignored path is no change).
fn changes_kept(step: &StepStatus, changed: &[String]) -> bool {
    step.output_files
        .iter()
        .chain(&step.deleted_files)
        .any(|f| changed.contains(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(kind: DeliverableKind, met: bool) -> DeliverableCheck {
        DeliverableCheck {
            kind,
            what: "x".into(),
            met,
            detail: "d".into(),
            inferred: true,
        }
    }

    /// A model's plan for "email report.csv to Alice" ran `cat report.csv`, which passed: that
    /// checks nothing the flow did, and delivers nothing. A person's flow of commands delivers
    /// their passing; every deliverable must hold for a success.
    #[test]
    fn a_models_passing_command_delivers_nothing_of_its_own() {
        use DeliverableKind::*;
        let planned = Deliverables {
            inferred: true,
            planned: true,
            ..Deliverables::default()
        };
        let written = Deliverables {
            inferred: true,
            ..Deliverables::default()
        };
        let passed = [check(Command, true)];
        assert!(matches!(verdict(&passed, Some(&planned)), Done::Nothing(_)));
        assert_eq!(verdict(&passed, Some(&written)), Done::All);
        let fixed = [check(File, true), check(Command, true)];
        assert_eq!(verdict(&fixed, Some(&planned)), Done::All);
        let broke = [check(File, true), check(Command, false)];
        assert!(matches!(verdict(&broke, Some(&planned)), Done::Part(_)));
        assert!(matches!(verdict(&[], Some(&written)), Done::Nothing(_)));
    }
}
