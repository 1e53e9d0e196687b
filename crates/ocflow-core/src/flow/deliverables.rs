//! What a flow must deliver (`deliverables` in flow.json), settled before anything runs: read
//! as the plan wrote it, or inferred from its steps when it names none, and checked to be
//! deliverable by those steps. A file deliverable is written by a step; a command that must pass
//! runs after every step that writes files (a step is added, or given the dependencies, when
//! none does); an answer comes from a model step that answers from the files the question is
//! about. The engine checks every deliverable again, on the evidence, when the flow ends
//! (`engine::deliverable_check`).

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value};

use crate::flow::operations::{self, ParamMeaning, Reads};
use crate::flow::path_rules::PathRules;
use ocflow_model::deliverable::{AnswerDeliverable, CommandDeliverable, Deliverables, Required};
use ocflow_model::flow::{Flow, Step};
use ocflow_model::problem::Problem;

/// The id validation gives a step it adds to run a command that must pass.
const CHECK_ID: &str = "check";

/// What a plan wrote under `deliverables`, read leniently: one string for a list, an answer
/// given as its question alone.
#[derive(Default)]
struct Declared {
    files: Vec<String>,
    commands: Vec<String>,
    answer: Option<(String, Vec<String>)>,
}

/// Settles the flow's deliverables from what the plan wrote (`raw`, its `deliverables` value):
/// fills `flow.deliverables`, adds what they need (a dependency, a step that runs a command that
/// must pass, the answer's `final_answer` mark) and returns one sentence for each such
/// addition. What cannot be delivered is a problem for the plan's author.
pub(crate) fn settle(
    flow: &mut Flow,
    raw: Option<Value>,
    rules: &PathRules,
    order: Order,
    problems: &mut Vec<Problem>,
) -> Vec<String> {
    let mut notes = Vec::new();
    // A revision of a model's plan infers again as it did.
    let planned = raw
        .as_ref()
        .is_some_and(|raw| raw.get("planned") == Some(&Value::Bool(true)));
    let required = required_commands(raw.as_ref());
    let declared = raw.and_then(|raw| read(raw, problems));
    let deliverables = match declared {
        Some(declared) => settle_declared(flow, declared, rules, order, problems, &mut notes),
        None => Deliverables {
            planned,
            ..infer(flow, order, &mut notes)
        },
    };
    flow.deliverables = Some(deliverables);
    // What the task or ocflow requires stays, whatever a revision did to the steps running it.
    for (command, why) in required {
        let kept = format!("`{command}` must still pass at the end");
        notes.extend(require_command_because(flow, &command, why, &kept));
    }
    settle_reproductions(flow, order, problems, &mut notes);
    notes
}

/// The commands a saved flow's deliverables (`raw`) hold as required, and by whom.
fn required_commands(raw: Option<&Value>) -> Vec<(String, Required)> {
    let Some(Value::Array(commands)) = raw.and_then(|raw| raw.get("commands")) else {
        return Vec::new();
    };
    commands
        .iter()
        .filter_map(|c| {
            let required = serde_json::from_value(c.get("required")?.clone()).ok()?;
            Some((c.get("command")?.as_str()?.to_string(), required))
        })
        .collect()
}

/// Makes the command of each step that reproduces the task's problem (`reproduce`) one the flow
/// must see pass after every change, the reproduction its other half of the evidence. A
/// reproduction that depends on a change is a problem: it must see the repository as it is.
fn settle_reproductions(
    flow: &mut Flow,
    order: Order,
    problems: &mut Vec<Problem>,
    notes: &mut Vec<String>,
) {
    let writers: BTreeSet<String> = file_writes(flow).into_iter().map(|(id, _)| id).collect();
    let reproductions: Vec<(String, String)> = flow
        .steps
        .iter()
        .filter(|s| operations::find(&s.operation).is_some_and(|op| op.reproduces))
        .filter_map(|s| Some((s.id.clone(), command_of(s)?)))
        .collect();
    for (id, command) in reproductions {
        if let Some(writer) = flow.ancestors(&id).intersection(&writers).next() {
            problems.push(flow_problem(format!(
                "step `{id}` reproduces the problem before any change, and depends on step \
                 `{writer}`, which changes files: remove that dependency"
            )));
            continue;
        }
        let mut deliverables = flow.deliverables.take().unwrap_or_default();
        let known = deliverables
            .commands
            .iter_mut()
            .find(|c| c.command.as_deref().map(normalize) == Some(normalize(&command)));
        match known {
            Some(known) => known.reproduced_by = Some(id),
            None => {
                if let Some(step) = deliver_command(flow, Some(&command), true, order, notes) {
                    notes.push(format!(
                        "`{command}` fails before the change (step {id}): it must pass after \
                         every change"
                    ));
                    deliverables.commands.push(CommandDeliverable {
                        command: Some(command),
                        step,
                        reproduced_by: Some(id),
                        required: None,
                    });
                }
            }
        }
        flow.deliverables = Some(deliverables);
    }
}

/// Adds a step that runs `command` before any change to show the task's problem (the model
/// was asked for one), and makes the command one that must pass after every change. One
/// sentence for each addition.
pub(crate) fn require_reproduction(flow: &mut Flow, command: &str) -> Vec<String> {
    let Some(op) = operations::all().find(|op| op.reproduces) else {
        return Vec::new();
    };
    let id = fresh_id(flow, "reproduce");
    let mut params = Map::new();
    params.insert("command".into(), Value::String(command.to_string()));
    flow.steps.push(Step {
        id: id.clone(),
        operation: op.name.to_string(),
        role: None,
        description: Some("show the task's problem before any change".into()),
        params,
        depends_on: Vec::new(),
        final_answer: false,
        profile: None,
        model: None,
    });
    let mut notes = vec![format!(
        "step {id} was added to run `{command}` before any change: the model's reproduction of \
         the problem"
    )];
    settle_reproductions(flow, Order::AsWritten, &mut Vec::new(), &mut notes);
    notes
}

/// Makes the repository's own tests (`tests`) the flow's reproduction, where the model gave
/// none it could use: a step runs them before any change, where they must fail, and they must
/// pass after every change, required as the repository's tests (their pass is no evidence once
/// the flow changed a test). One sentence for each addition.
pub(crate) fn require_tests_as_reproduction(flow: &mut Flow, tests: &str) -> Vec<String> {
    let mut notes = require_reproduction(flow, tests);
    if let Some(first) = notes.first_mut() {
        *first = first.replace(
            "the model's reproduction of the problem",
            "the repository's tests, which must fail before it",
        );
    }
    if let Some(deliverables) = flow.deliverables.as_mut() {
        let wanted = normalize(tests);
        for command in &mut deliverables.commands {
            if command.reproduced_by.is_some()
                && command.command.as_deref().map(normalize).as_deref() == Some(wanted.as_str())
            {
                command.required.get_or_insert(Required::RepositoryTests);
            }
        }
    }
    notes
}

/// Gives each reproduction of a model's the repository's own tests (`tests`, the command
/// `run_tests` runs) to fall back on: when the model's command passes before the change, or
/// cannot run, and the tests fail then, the tests showed the problem, and the check after the
/// change runs them instead (`command_from_step`). A small model's reproduction often shows
/// nothing (`python3 -c 'print(f(1))'` exits 0 on a stub), which alone fails a flow whose change
/// was right; the tests failing before and passing after are evidence of the same kind.
pub(crate) fn fall_back_to_tests(flow: &mut Flow, tests: &str) -> Vec<String> {
    let Some(deliverables) = flow.deliverables.clone() else {
        return Vec::new();
    };
    let takes = |step: &Step, param: &str| {
        operations::find(&step.operation).is_some_and(|op| op.param(param).is_some())
    };
    let mut notes = Vec::new();
    for command in &deliverables.commands {
        let Some(reproduce) = command.reproduced_by.clone() else {
            continue;
        };
        let own = command.command.as_deref().map(normalize);
        let check_takes = flow
            .step(&command.step)
            .is_some_and(|s| takes(s, "command_from_step"));
        let Some(step) = flow.steps.iter_mut().find(|s| s.id == reproduce) else {
            continue;
        };
        if !check_takes
            || !takes(step, "fallback_command")
            || step.params.contains_key("fallback_command")
            || own.as_deref() == Some(normalize(tests).as_str())
        {
            continue;
        }
        step.params
            .insert("fallback_command".into(), Value::String(tests.to_string()));
        if let Some(check) = flow.steps.iter_mut().find(|s| s.id == command.step) {
            check
                .params
                .insert("command_from_step".into(), Value::String(reproduce.clone()));
            if !check.depends_on.contains(&reproduce) {
                check.depends_on.push(reproduce.clone());
            }
        }
        notes.push(format!(
            "if the model's reproduction shows nothing before the change, step {reproduce} runs \
             the repository's tests (`{tests}`): failing then, they are what must pass after it \
             (step {})",
            command.step
        ));
    }
    notes
}

/// The operation whose answer can be given a command's output, and the parameter that names it.
const EVIDENCE_OPERATION: &str = "analyze_code";
const EVIDENCE_PARAM: &str = "evidence_from_step";

/// The step that gives the flow's answer, when it can be given evidence and has none yet.
pub(crate) fn evidence_target(flow: &Flow) -> Option<String> {
    let answer = flow.deliverables.as_ref()?.answer.as_ref()?;
    let step = flow.step(&answer.step)?;
    (step.operation == EVIDENCE_OPERATION && !step.params.contains_key(EVIDENCE_PARAM))
        .then(|| step.id.clone())
}

/// Adds a step running `command` on the repository as it is, before the answer's step, and
/// gives the answer's step its output (`evidence_from_step`): what the answer must agree with.
/// The command's failure is evidence too (an exception is an answer), so the step always
/// succeeds and its output ends with the command's exit code.
pub(crate) fn require_evidence(flow: &mut Flow, command: &str) -> Vec<String> {
    let Some(target) = evidence_target(flow) else {
        return Vec::new();
    };
    let id = fresh_id(flow, "evidence");
    let mut params = Map::new();
    params.insert(
        "command".into(),
        Value::String(format!("( {command}\n) 2>&1; echo \"(exit code $?)\"")),
    );
    flow.steps.push(Step {
        id: id.clone(),
        operation: "execute_shell_command".into(),
        role: None,
        description: Some("show what the answer must agree with".into()),
        params,
        depends_on: Vec::new(),
        final_answer: false,
        profile: None,
        model: None,
    });
    if let Some(step) = flow.steps.iter_mut().find(|s| s.id == target) {
        step.depends_on.push(id.clone());
        step.params
            .insert(EVIDENCE_PARAM.into(), Value::String(id.clone()));
    }
    vec![format!(
        "step {id} was added to run `{command}` on the repository before step {target} answers: \
         the model's evidence, which the answer is given to agree with"
    )]
}

/// Marks a flow's inferred deliverables as inferred from a model's plan: its commands then
/// check the change and deliver nothing of their own.
pub(crate) fn planned_by_model(flow: &mut Flow) {
    if let Some(deliverables) = flow.deliverables.as_mut().filter(|d| d.inferred) {
        deliverables.planned = true;
    }
}

/// The plan's `deliverables` as written; `None` when it names nothing (or was inferred before:
/// a revised flow infers them again from its new steps).
fn read(raw: Value, problems: &mut Vec<Problem>) -> Option<Declared> {
    let mut object = match raw {
        Value::Null => return None,
        Value::Object(object) => object,
        other => {
            problems.push(flow_problem(format!(
                "`deliverables` must be an object {{\"files\": [...], \"commands\": [...], \
                 \"answer\": \"...\"}}, not {other}"
            )));
            return None;
        }
    };
    object.remove("planned");
    if object.remove("inferred") == Some(Value::Bool(true)) {
        return None;
    }
    let mut declared = Declared {
        files: strings(object.remove("files"), "files", problems),
        commands: commands(object.remove("commands"), problems),
        answer: None,
    };
    declared.answer = match object.remove("answer") {
        None | Some(Value::Null) => None,
        Some(Value::String(question)) if question.trim().is_empty() => None,
        Some(Value::String(question)) => Some((question.trim().to_string(), Vec::new())),
        Some(Value::Object(mut answer)) => {
            let files = strings(answer.remove("files"), "answer.files", problems);
            match answer.remove("question") {
                Some(Value::String(question)) if !question.trim().is_empty() => {
                    Some((question.trim().to_string(), files))
                }
                _ => {
                    problems.push(flow_problem(
                        "`deliverables.answer` needs its `question` as text".into(),
                    ));
                    None
                }
            }
        }
        Some(other) => {
            problems.push(flow_problem(format!(
                "`deliverables.answer` is the question the flow answers, as text, not {other}"
            )));
            None
        }
    };
    for key in object.keys() {
        problems.push(flow_problem(format!(
            "unknown field `{key}` in deliverables; allowed: files, commands, answer"
        )));
    }
    let empty =
        declared.files.is_empty() && declared.commands.is_empty() && declared.answer.is_none();
    (!empty).then_some(declared)
}

/// A list of strings, or one string, without blanks.
fn strings(value: Option<Value>, field: &str, problems: &mut Vec<Problem>) -> Vec<String> {
    let entries = match value {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::String(one)) => vec![Value::String(one)],
        Some(Value::Array(entries)) => entries,
        Some(other) => {
            problems.push(flow_problem(format!(
                "`deliverables.{field}` must be a list of strings, not {other}"
            )));
            return Vec::new();
        }
    };
    let mut out: Vec<String> = Vec::new();
    for entry in entries {
        match entry {
            Value::String(text) if text.trim().is_empty() => {}
            Value::String(text) if !out.contains(&text.trim().to_string()) => {
                out.push(text.trim().to_string())
            }
            Value::String(_) => {}
            other => problems.push(flow_problem(format!(
                "`deliverables.{field}` holds {other}, which is not a string"
            ))),
        }
    }
    out
}

/// The commands that must pass: strings, or the saved form `{"command": …, "step": …}` (whose
/// step is found again: a revision may have replaced it).
fn commands(value: Option<Value>, problems: &mut Vec<Problem>) -> Vec<String> {
    let entries = match value {
        Some(Value::Array(entries)) => entries,
        other => return strings(other, "commands", problems),
    };
    let as_text: Vec<Value> = entries
        .into_iter()
        .filter_map(|entry| match entry {
            Value::Object(mut saved) => saved.remove("command"),
            other => Some(other),
        })
        .collect();
    strings(Some(Value::Array(as_text)), "commands", problems)
}

fn settle_declared(
    flow: &mut Flow,
    declared: Declared,
    rules: &PathRules,
    order: Order,
    problems: &mut Vec<Problem>,
    notes: &mut Vec<String>,
) -> Deliverables {
    let mut files: Vec<String> = Vec::new();
    let runs_commands = flow
        .steps
        .iter()
        .any(|s| operations::find(&s.operation).is_some_and(|op| op.runs_commands));
    let written = file_writes(flow);
    for raw in &declared.files {
        let path = match rules.check(raw, false) {
            Ok(path) => path.to_string(),
            Err(message) => {
                problems.push(flow_problem(format!("`deliverables.files`: {message}")));
                continue;
            }
        };
        if !written.iter().any(|(_, p)| *p == path) && !runs_commands {
            problems.push(flow_problem(format!(
                "deliverables.files names `{path}`, and no step writes it: add a step that \
                 changes it (modify_code, write_file or delete_file), or leave it out of the \
                 deliverables"
            )));
        }
        if !files.contains(&path) {
            files.push(path);
        }
    }
    let mut commands = Vec::new();
    for command in &declared.commands {
        match deliver_command(flow, Some(command), true, order, notes) {
            Some(step) => commands.push(CommandDeliverable {
                command: Some(command.clone()),
                step,
                reproduced_by: None,
                required: None,
            }),
            None => problems.push(flow_problem(format!(
                "deliverables.commands names `{command}`, and this library has no operation \
                 that runs commands"
            ))),
        }
    }
    let answer = declared.answer.and_then(|(question, files)| {
        deliver_answer(flow, question, files, rules, problems, notes)
    });
    Deliverables {
        files,
        commands,
        answer,
        inferred: false,
        planned: false,
    }
}

/// Makes `command` one of the flow's commands that must pass (the task names it): run by the
/// step that runs it after every change, or by one added. One sentence for each addition.
pub(crate) fn require_command(flow: &mut Flow, command: &str) -> Vec<String> {
    let why = format!("the task names `{command}`: it must pass at the end");
    require_command_because(flow, command, Required::Task, &why)
}

/// Makes the repository's tests (`tests`, the command `run_tests` runs) a command that must
/// pass after a change the model wrote no reproduction for (it said none can show it): the
/// change is then checked by the tests the repository already has, as a refactoring's would be.
/// A plan that runs the tests itself after every change (a test runner's step, its own flags)
/// keeps its command, now required.
pub(crate) fn require_tests_after(flow: &mut Flow, tests: &str) -> Vec<String> {
    let runs_tests = |id: &str| {
        flow.step(id)
            .and_then(|step| operations::find(&step.operation))
            .is_some_and(|op| op.runs_tests)
    };
    let planned = flow.deliverables.as_ref().and_then(|d| {
        d.commands
            .iter()
            .position(|c| c.command.is_some() && runs_tests(&c.step))
    });
    if let (Some(at), Some(deliverables)) = (planned, flow.deliverables.as_mut()) {
        let command = &mut deliverables.commands[at];
        command.required.get_or_insert(Required::RepositoryTests);
        let run = command.command.clone().unwrap_or_default();
        return vec![format!(
            "no command shows the change itself: the plan's tests `{run}` must pass after it"
        )];
    }
    require_command_because(
        flow,
        tests,
        Required::RepositoryTests,
        &format!(
            "no command shows the change itself: the repository's tests `{tests}` must pass \
             after the change"
        ),
    )
}

/// `require_command`, saying `why` when it adds the command, which `required` then keeps
/// through every revision.
fn require_command_because(
    flow: &mut Flow,
    command: &str,
    required: Required,
    why: &str,
) -> Vec<String> {
    let mut notes = Vec::new();
    let mut deliverables = flow.deliverables.take().unwrap_or_default();
    let known = deliverables
        .commands
        .iter_mut()
        .find(|c| c.command.as_deref().map(normalize) == Some(normalize(command)));
    let known = match known {
        Some(known) => {
            known.required.get_or_insert(required);
            true
        }
        None => false,
    };
    if !known
        && let Some(step) = deliver_command(flow, Some(command), true, Order::AsWritten, &mut notes)
    {
        deliverables.commands.push(CommandDeliverable {
            command: Some(command.to_string()),
            step,
            reproduced_by: None,
            required: Some(required),
        });
        notes.push(why.to_string());
    }
    flow.deliverables = Some(deliverables);
    notes
}

/// The deliverables a flow's steps imply, the flow left as it is (one saved before
/// deliverables existed).
pub(crate) fn inferred(flow: &Flow) -> Deliverables {
    infer(&mut flow.clone(), Order::AsWritten, &mut Vec::new())
}

/// Which steps that write files a test the flow must pass may be made to wait for.
#[derive(Debug, Clone, Copy)]
pub enum Order {
    /// Those before it in the flow as written: a flow read again (a revision, a resume, a plan
    /// edited at its approval) may have finished steps, and none is ever rewired.
    AsWritten,
    /// Any that does not wait for it: a plan read for the first time (the model's, or one
    /// given with `--plan`), where nothing has run, and a test written before the change with
    /// no dependency between them would run beside it.
    Any,
}

/// The deliverables a flow that names none has by its steps: the files its file steps write,
/// the tests it runs after them, and the answer of a step marked `final_answer` that answers.
/// Tests are made to wait for the changes `order` allows.
fn infer(flow: &mut Flow, order: Order, notes: &mut Vec<String>) -> Deliverables {
    let mut files: Vec<String> = Vec::new();
    for (_, path) in file_writes(flow) {
        if !files.contains(&path) {
            files.push(path);
        }
    }
    // Its last commands: each must pass. Tests run after every change (the dependencies they
    // lack are added where the flow's order allows); other commands run where the flow puts them.
    let upstream = upstream_of_writers(flow);
    let last_commands: Vec<(String, Option<String>, bool)> = flow
        .steps
        .iter()
        .filter_map(|s| operations::find(&s.operation).map(|op| (s, op)))
        .filter(|(_, op)| op.runs_commands && !op.reproduces)
        .filter(|(s, _)| !upstream.contains(&s.id))
        .map(|(s, op)| (s.id.clone(), command_of(s), op.runs_tests))
        .collect();
    let mut commands: Vec<CommandDeliverable> = Vec::new();
    for (id, command, tests) in last_commands {
        if tests {
            order_after_writers(flow, &id, order, notes);
        }
        // The same command twice: the later run is the one that counts.
        commands.retain(|c| c.command.is_none() || c.command != command);
        commands.push(CommandDeliverable {
            command,
            step: id,
            reproduced_by: None,
            required: None,
        });
    }
    // Its answer: the step marked as the flow's answer, else its last step that answers from
    // the files it was given and that no step depends on (a review, seed 002's closing summary).
    let needed: BTreeSet<&str> = flow
        .steps
        .iter()
        .flat_map(|s| s.depends_on.iter().map(String::as_str))
        .collect();
    let from_files = |s: &Step| answers(s) && !reads(flow, s).is_empty();
    let marked = flow.steps.iter().rfind(|s| s.final_answer && from_files(s));
    let last = || {
        flow.steps
            .iter()
            .rfind(|s| !needed.contains(s.id.as_str()) && from_files(s))
    };
    let answer = marked.or_else(last).map(|step| AnswerDeliverable {
        question: step
            .params
            .get("query")
            .and_then(Value::as_str)
            .filter(|q| !q.trim().is_empty())
            .unwrap_or(&flow.task)
            .to_string(),
        files: reads(flow, step),
        step: step.id.clone(),
    });
    Deliverables {
        files,
        commands,
        answer,
        inferred: true,
        planned: false,
    }
}

/// The step that runs `command` (or, for `None`, the tests by the library's choice) after every
/// step that writes files: the last such step, given the dependencies it lacks where it comes
/// after them in the flow, else a step added to run it (when `add` allows). `None` when none
/// can be.
fn deliver_command(
    flow: &mut Flow,
    command: Option<&str>,
    add: bool,
    order: Order,
    notes: &mut Vec<String>,
) -> Option<String> {
    let writers: Vec<String> = file_writes(flow).into_iter().map(|(id, _)| id).collect();
    let rank: HashMap<String, usize> = flow
        .topological_order()
        .into_iter()
        .enumerate()
        .map(|(at, id)| (id.to_string(), at))
        .collect();
    // A run before a change (a step a writer depends on) is a diagnosis, never the check.
    let upstream = upstream_of_writers(flow);
    let candidate = flow
        .steps
        .iter()
        .filter(|s| runs(s, command))
        .filter(|s| !upstream.contains(&s.id))
        .max_by_key(|s| rank.get(&s.id).copied().unwrap_or(0))
        .map(|s| s.id.clone());
    if let Some(id) = candidate
        && order_after_writers(flow, &id, order, notes)
    {
        return Some(id);
    }
    if !add {
        return None;
    }
    let operation = operations::all()
        .find(|op| op.runs_tests && op.param("command").is_some())
        .or_else(|| {
            operations::all().find(|op| op.runs_commands && op.param("command").is_some())
        })?;
    let id = fresh_id(flow, CHECK_ID);
    let sinks: Vec<String> = writers
        .iter()
        .filter(|w| {
            !writers
                .iter()
                .any(|other| flow.ancestors(other).contains(*w))
        })
        .cloned()
        .collect();
    let mut params = Map::new();
    if let Some(command) = command {
        params.insert("command".into(), Value::String(command.to_string()));
    }
    flow.steps.push(Step {
        id: id.clone(),
        operation: operation.name.to_string(),
        role: None,
        description: Some(
            "run a command the deliverables say must pass, after every change".into(),
        ),
        params,
        depends_on: sinks,
        final_answer: false,
        profile: None,
        model: None,
    });
    notes.push(format!(
        "step {id} was added to run `{}` after every step that changes files: the flow's \
         deliverables say it must pass",
        command.unwrap_or("the tests")
    ));
    Some(id)
}

/// Gives step `id` every step that writes files as an ancestor, adding the dependencies it
/// lacks where `order` allows each (never one that waits for `id`: no cycle). False when one
/// cannot be added.
fn order_after_writers(flow: &mut Flow, id: &str, order: Order, notes: &mut Vec<String>) -> bool {
    let position = |flow: &Flow, id: &str| flow.steps.iter().position(|s| s.id == id);
    let Some(at) = position(flow, id) else {
        return false;
    };
    let ancestors = flow.ancestors(id);
    let missing: Vec<String> = file_writes(flow)
        .into_iter()
        .map(|(writer, _)| writer)
        .filter(|writer| writer != id && !ancestors.contains(writer))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let allowed = |writer: &String| match order {
        Order::AsWritten => position(flow, writer).is_some_and(|w| w < at),
        Order::Any => !flow.ancestors(writer).contains(id),
    };
    if !missing.iter().all(allowed) {
        return false;
    }
    for writer in missing {
        flow.steps[at].depends_on.push(writer.clone());
        notes.push(format!(
            "step {id} runs a command that must pass at the end, and did not depend on step \
             {writer}, which changes files: the dependency was added"
        ));
    }
    true
}

/// The step that answers `question`: the one marked `final_answer`, else the last that answers
/// from the question's files (then marked). Problems when none can.
fn deliver_answer(
    flow: &mut Flow,
    question: String,
    files: Vec<String>,
    rules: &PathRules,
    problems: &mut Vec<Problem>,
    notes: &mut Vec<String>,
) -> Option<AnswerDeliverable> {
    let mut about: Vec<String> = Vec::new();
    for raw in &files {
        match rules.check(raw, false) {
            Ok(path) if !about.contains(&path.to_string()) => about.push(path.to_string()),
            Ok(_) => {}
            Err(message) => problems.push(flow_problem(format!(
                "`deliverables.answer.files`: {message}"
            ))),
        }
    }
    let order = flow.topological_order();
    let last = |filter: &dyn Fn(&Step) -> bool| {
        order
            .iter()
            .rev()
            .filter_map(|id| flow.step(id))
            .find(|s| filter(s))
            .map(|s| s.id.clone())
    };
    let reads_about = |s: &Step| {
        let given = reads(flow, s);
        !given.is_empty() && (about.is_empty() || about.iter().any(|f| given.contains(f)))
    };
    let step = match last(&|s| s.final_answer) {
        Some(marked) => {
            let step = flow.step(&marked)?;
            if !answers(step) {
                problems.push(Problem {
                    step: Some(marked.clone()),
                    rule: "deliverables",
                    message: format!(
                        "the flow's answer must come from a model step given the files the \
                         question is about; `{}` answers no question: mark an analyze_code step \
                         (`file_path` and the question as `query`) as the final answer",
                        step.operation
                    ),
                });
                return None;
            }
            marked
        }
        None => {
            let Some(found) = last(&|s| answers(s) && reads_about(s)) else {
                problems.push(flow_problem(format!(
                    "deliverables.answer asks {question:?}, and no step answers it from the \
                     files: add an analyze_code step with `file_path` (the file the question is \
                     about) and `query` (the question), marked \"final_answer\": true"
                )));
                return None;
            };
            if let Some(step) = flow.steps.iter_mut().find(|s| s.id == found) {
                step.final_answer = true;
            }
            notes.push(format!(
                "step {found} gives the flow's answer: it was marked final_answer"
            ));
            found
        }
    };
    let given = flow.step(&step).map(|s| reads(flow, s)).unwrap_or_default();
    if !about.is_empty() && !about.iter().any(|f| given.contains(f)) {
        problems.push(Problem {
            step: Some(step.clone()),
            rule: "deliverables",
            message: format!(
                "the step that answers is not given the files the question is about ({}): give \
                 it one of them as `file_path`",
                about.join(", ")
            ),
        });
        return None;
    }
    Some(AnswerDeliverable {
        question,
        files: if about.is_empty() { given } else { about },
        step,
    })
}

/// The steps some step that writes files depends on: what runs before a change.
fn upstream_of_writers(flow: &Flow) -> BTreeSet<String> {
    let writers: BTreeSet<String> = file_writes(flow).into_iter().map(|(id, _)| id).collect();
    let mut upstream = BTreeSet::new();
    for writer in &writers {
        if !upstream.contains(writer) {
            upstream.extend(flow.ancestors(writer));
        }
    }
    upstream
}

/// Every path the flow's file steps write, in their order (repeats kept).
pub(crate) fn written_paths(flow: &Flow) -> Vec<String> {
    file_writes(flow)
        .into_iter()
        .map(|(_, path)| path)
        .collect()
}

/// Each step that writes files by name, with each path it writes: (step id, path).
pub(crate) fn file_writes(flow: &Flow) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for step in &flow.steps {
        let Some(op) = operations::find(&step.operation) else {
            continue;
        };
        for param in op.writes {
            if let Some(path) = step.params.get(*param).and_then(Value::as_str) {
                out.push((step.id.clone(), path.to_string()));
            }
        }
    }
    out
}

/// The files a step is given: those its path parameters name and, for an operation given every
/// step it depends on (`generate_summary`), those its ancestors name.
fn reads(flow: &Flow, step: &Step) -> Vec<String> {
    let Some(op) = operations::find(&step.operation) else {
        return Vec::new();
    };
    let mut files = named_paths(step);
    let names_steps = op
        .params
        .iter()
        .any(|p| p.meaning == ParamMeaning::StepRef && step.params.contains_key(p.name));
    if op.reads == Reads::NamedOrAncestors && !names_steps {
        for ancestor in flow.ancestors(&step.id) {
            for path in flow.step(&ancestor).map(named_paths).unwrap_or_default() {
                if !files.contains(&path) {
                    files.push(path);
                }
            }
        }
    }
    files
}

/// The files a step's path parameters name.
fn named_paths(step: &Step) -> Vec<String> {
    let Some(op) = operations::find(&step.operation) else {
        return Vec::new();
    };
    op.params
        .iter()
        .filter(|p| p.meaning == ParamMeaning::FilePath)
        .filter_map(|p| step.params.get(p.name).and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

/// Whether the step answers a question from what it is given: its operation answers, by its
/// model, or by a text made of earlier steps' results (seed 004's `generate_summary` whose
/// `message` is `The notes say: @{outputs.read.content}`) — never by text of the plan's own.
pub(crate) fn answers(step: &Step) -> bool {
    operations::find(&step.operation).is_some_and(|op| {
        op.answers.is_some()
            && op
                .may_use_llm_without
                .iter()
                .filter_map(|p| step.params.get(*p))
                .all(|given| {
                    given
                        .as_str()
                        .is_some_and(|text| text.contains("@{outputs."))
                })
    })
}

fn command_of(step: &Step) -> Option<String> {
    step.params
        .get("command")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Whether `step` runs `command` (spaces collapsed, `python3` read as `python`, one within the
/// other), or for `None` runs the tests the library chooses.
pub(crate) fn runs(step: &Step, command: Option<&str>) -> bool {
    // A reproduction runs before the change: never the run that checks it.
    let Some(op) =
        operations::find(&step.operation).filter(|op| op.runs_commands && !op.reproduces)
    else {
        return false;
    };
    match (command, command_of(step)) {
        (Some(wanted), Some(given)) => {
            let (wanted, given) = (normalize(wanted), normalize(&given));
            given.contains(&wanted) || wanted.contains(&given) || same_but_options(&wanted, &given)
        }
        (None, None) => op.runs_tests,
        _ => false,
    }
}

/// Whether two commands are one but for their options (`pytest -q t.py`, `pytest t.py`).
fn same_but_options(one: &str, other: &str) -> bool {
    let words = |command: &str| -> Vec<String> {
        command
            .split_whitespace()
            .filter(|word| !word.starts_with('-') || *word == "-m")
            .map(str::to_string)
            .collect()
    };
    words(one) == words(other)
}

/// A command with its spaces collapsed and `python3` read as `python`.
pub(crate) fn normalize(command: &str) -> String {
    command
        .split_whitespace()
        .map(|word| if word == "python3" { "python" } else { word })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `base`, or `base_2`, `base_3` … : the first id no step has.
fn fresh_id(flow: &Flow, base: &str) -> String {
    let taken = |id: &str| flow.steps.iter().any(|s| s.id.eq_ignore_ascii_case(id));
    if !taken(base) {
        return base.to_string();
    }
    (2..)
        .map(|n| format!("{base}_{n}"))
        .find(|id| !taken(id))
        .unwrap_or_else(|| base.to_string())
}

fn flow_problem(message: String) -> Problem {
    Problem {
        step: None,
        rule: "deliverables",
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules() -> (tempfile::TempDir, PathRules) {
        let repo = tempfile::tempdir().unwrap();
        for file in ["utils.py", "stats.py"] {
            std::fs::write(repo.path().join(file), "x = 1\n").unwrap();
        }
        let rules = PathRules::new(repo.path(), &repo.path().join(".ocflow"));
        (repo, rules)
    }

    fn flow(steps: Value) -> Flow {
        Flow {
            version: 1,
            task: "the task".into(),
            steps: serde_json::from_value(steps).unwrap(),
            deliverables: None,
        }
    }

    #[test]
    fn a_command_that_must_pass_runs_after_every_change() {
        let (_repo, rules) = rules();
        let mut problems = Vec::new();
        // The test written after the change, without the dependency: it is given it.
        let mut written = flow(json!([
            {"id": "fix", "operation": "modify_code",
             "params": {"file_path": "utils.py", "instructions": "fix it"}},
            {"id": "test", "operation": "run_tests", "params": {"command": "python3 -m pytest"}}]));
        let raw = json!({"files": ["utils.py"], "commands": ["python -m pytest"]});
        let notes = settle(
            &mut written,
            Some(raw),
            &rules,
            Order::AsWritten,
            &mut problems,
        );
        assert_eq!(problems, vec![]);
        assert_eq!(
            written.step("test").unwrap().depends_on,
            vec!["fix".to_string()]
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
        let settled = written.deliverables.unwrap();
        assert_eq!(settled.commands[0].step, "test");
        assert_eq!(settled.files, vec!["utils.py".to_string()]);
        // No step runs it: one is added after the change.
        let mut missing = flow(json!([
            {"id": "fix", "operation": "modify_code",
             "params": {"file_path": "utils.py", "instructions": "fix it"}}]));
        let raw = json!({"files": "utils.py", "commands": "make test"});
        settle(
            &mut missing,
            Some(raw),
            &rules,
            Order::AsWritten,
            &mut problems,
        );
        assert_eq!(problems, vec![]);
        let added = missing.step("check").expect("a check step");
        assert_eq!(added.depends_on, vec!["fix".to_string()]);
        assert_eq!(added.params["command"], json!("make test"));
    }

    /// A reproduction a plan writes itself: its command must pass after every change, and it
    /// must run on the repository as it is, never after a change.
    #[test]
    fn a_planned_reproduction_is_checked_after_the_change_and_runs_before_it() {
        let (_repo, rules) = rules();
        let mut problems = Vec::new();
        let mut planned = flow(json!([
            {"id": "show", "operation": "reproduce", "params": {"command": "python3 -c 'f()'"}},
            {"id": "fix", "operation": "modify_code",
             "params": {"file_path": "utils.py", "instructions": "fix it"}}]));
        settle(&mut planned, None, &rules, Order::AsWritten, &mut problems);
        assert_eq!(problems, vec![]);
        let settled = planned.deliverables.clone().unwrap();
        assert_eq!(settled.commands.len(), 1, "{settled:?}");
        assert_eq!(settled.commands[0].reproduced_by.as_deref(), Some("show"));
        let check = planned.step(&settled.commands[0].step).unwrap();
        assert_eq!(check.depends_on, vec!["fix".to_string()]);
        assert!(planned.step("show").unwrap().depends_on.is_empty());

        let mut late = flow(json!([
            {"id": "fix", "operation": "modify_code",
             "params": {"file_path": "utils.py", "instructions": "fix it"}},
            {"id": "show", "operation": "reproduce", "depends_on": ["fix"],
             "params": {"command": "python3 -c 'f()'"}}]));
        settle(&mut late, None, &rules, Order::AsWritten, &mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0]
                .message
                .contains("step `show` reproduces the problem before any change")
                && problems[0].message.contains("depends on step `fix`"),
            "{problems:?}"
        );
    }

    #[test]
    fn what_no_step_can_deliver_is_a_problem() {
        let (_repo, rules) = rules();
        let mut problems = Vec::new();
        let mut read_only = flow(json!([
            {"id": "read", "operation": "read_file", "params": {"file_path": "stats.py"}}]));
        let raw = json!({"files": ["ANALYSIS.md"], "answer": "What does summarize return?"});
        settle(
            &mut read_only,
            Some(raw),
            &rules,
            Order::AsWritten,
            &mut problems,
        );
        let messages: Vec<String> = problems.iter().map(|p| p.message.clone()).collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(messages[0].contains("no step writes it"), "{messages:?}");
        assert!(messages[1].contains("no step answers it"), "{messages:?}");
    }

    #[test]
    fn an_answer_comes_from_a_model_step_given_the_file() {
        let (_repo, rules) = rules();
        let mut problems = Vec::new();
        let mut asked = flow(json!([
            {"id": "read", "operation": "read_file", "params": {"file_path": "stats.py"}},
            {"id": "explain", "operation": "analyze_code",
             "params": {"file_path": "stats.py", "query": "what does it return?"}}]));
        let raw = json!({"answer": {"question": "What does summarize return?",
                                    "files": ["stats.py"]}});
        settle(
            &mut asked,
            Some(raw),
            &rules,
            Order::AsWritten,
            &mut problems,
        );
        assert_eq!(problems, vec![]);
        assert!(asked.step("explain").unwrap().final_answer);
        assert_eq!(asked.deliverables.unwrap().answer.unwrap().step, "explain");
        // Marked on a step that answers nothing: a problem, whatever it read.
        let mut marked = flow(json!([{"id": "read", "operation": "read_file",
            "final_answer": true, "params": {"file_path": "stats.py"}}]));
        settle(
            &mut marked,
            Some(json!({"answer": "What?"})),
            &rules,
            Order::AsWritten,
            &mut problems,
        );
        assert!(
            problems[0].message.contains("answers no question"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_flow_that_names_none_has_the_deliverables_of_its_steps() {
        let (_repo, rules) = rules();
        let mut problems = Vec::new();
        let mut seed = flow(json!([
            {"id": "test_before", "operation": "run_tests", "params": {}},
            {"id": "fix", "operation": "modify_code", "depends_on": ["test_before"],
             "params": {"file_path": "utils.py", "instructions": "fix it"}},
            {"id": "test", "operation": "run_tests", "params": {}}]));
        let notes = settle(&mut seed, None, &rules, Order::AsWritten, &mut problems);
        assert_eq!(problems, vec![]);
        assert_eq!(notes.len(), 1, "{notes:?}");
        let inferred = seed.deliverables.unwrap();
        assert!(inferred.inferred);
        assert_eq!(inferred.files, vec!["utils.py".to_string()]);
        // The run before the change is a diagnosis; the one after it is the check.
        assert_eq!(inferred.commands.len(), 1);
        assert_eq!(inferred.commands[0].step, "test");
        // A flow that only reads delivers nothing.
        let mut reads_only = flow(json!([{"id": "read", "operation": "read_file",
            "params": {"file_path": "stats.py"}}]));
        settle(
            &mut reads_only,
            None,
            &rules,
            Order::AsWritten,
            &mut problems,
        );
        assert!(reads_only.deliverables.unwrap().is_empty());
    }

    /// Issue 41's eval: phone-number's plan ran its tests first and the change after, with no
    /// dependency between them, so the tests ran beside the change, judged the starting code,
    /// and no coder's try could follow them (it takes the code step the tests depend on). On a
    /// plan read for the first time, a test that no change depends on runs after every change,
    /// wherever the plan wrote it, whether the plan names its deliverables or not; on a flow
    /// read again (a revision, a resume) only where the order as written allows, so no
    /// finished step is rewired.
    #[test]
    fn tests_written_before_the_change_run_after_it() {
        let (_repo, rules) = rules();
        let mut problems = Vec::new();
        let steps = json!([
            {"id": "check", "operation": "run_tests", "params": {"command": "python3 -m pytest"}},
            {"id": "fix", "operation": "modify_code",
             "params": {"file_path": "utils.py", "instructions": "fix it"}}]);
        let declared = json!({"files": ["utils.py"], "commands": ["python3 -m pytest"]});
        for raw in [None, Some(declared)] {
            let mut written = flow(steps.clone());
            let notes = settle(&mut written, raw.clone(), &rules, Order::Any, &mut problems);
            assert_eq!(problems, vec![]);
            assert_eq!(
                written.step("check").unwrap().depends_on,
                vec!["fix".to_string()],
                "{raw:?}"
            );
            assert!(notes.iter().any(|n| n.contains("step check")), "{notes:?}");
            assert_eq!(written.steps.len(), 2, "no second check added: {raw:?}");
            let settled = written.deliverables.clone().unwrap();
            assert_eq!(settled.commands[0].step, "check");
            // The same steps read again: the order as written holds.
            let mut again = flow(steps.clone());
            let raw = serde_json::to_value(&settled).unwrap();
            settle(
                &mut again,
                Some(raw),
                &rules,
                Order::AsWritten,
                &mut problems,
            );
            assert_eq!(problems, vec![]);
            assert!(again.step("check").unwrap().depends_on.is_empty());
        }
        // A diagnosis (a change depends on it) stays before the change.
        let mut diagnosis = flow(json!([
            {"id": "check", "operation": "run_tests", "params": {"command": "python3 -m pytest"}},
            {"id": "fix", "operation": "modify_code", "depends_on": ["check"],
             "params": {"file_path": "utils.py", "instructions": "fix it"}}]));
        settle(&mut diagnosis, None, &rules, Order::Any, &mut problems);
        assert_eq!(problems, vec![]);
        assert!(diagnosis.step("check").unwrap().depends_on.is_empty());
    }
}
