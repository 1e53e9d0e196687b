//! Validation: turns untrusted flow JSON (a plan file, later an LLM's answer) into a `Flow`,
//! checking every rule of the contract and reporting every problem at once, one per line,
//! naming the step and the rule. Nothing runs and no directory is created before this passes.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::{Map, Value};

use crate::flow::deliverables::{self, Order};
use crate::flow::operations::{self, ParamMeaning};
use crate::flow::path_rules::PathRules;
use crate::flow::seed_formats;
use ocflow_model::flow::{self, FLOW_VERSION, Flow, Step, read_depends_on};
use ocflow_model::problem::Problem;

/// Size limits, checked before anything else is done with a flow.
pub const MAX_FLOW_BYTES: usize = 16 * 1024 * 1024;
/// The largest task text, however it comes (the command line, stdin, `--task-file`, a flow's
/// `task`). A task is a request, not a specification: a long one belongs in a file in the
/// repository, which the steps read; every prompt carries the task.
pub const MAX_TASK_BYTES: usize = 1024 * 1024;
pub(crate) const MAX_STEPS: usize = 1000;
pub(crate) const MAX_STRING_BYTES: usize = 1024 * 1024;
pub(crate) const MAX_DEPENDENCIES: usize = 100;

/// Names a step may not take because the task directory uses them.
const RESERVED_IDS: &[&str] = &["final_output", "planning", "recovery"];

/// Parses and validates a flow read again (a revision: `Order::AsWritten`). `default_task`
/// names the task when the flow does not.
pub(crate) fn parse_flow(
    text: &str,
    default_task: Option<&str>,
    rules: &PathRules,
) -> Result<Flow, Vec<Problem>> {
    parse_flow_noting(text, default_task, rules).map(|(flow, _)| flow)
}

/// `parse_flow`, also returning what was added to the flow as written: a dependency a step's
/// reference implies (`content_from_step`, `@{outputs.…}`) but `depends_on` left out, as the
/// seed's own examples do — added unless it would make a cycle. One sentence each.
pub(crate) fn parse_flow_noting(
    text: &str,
    default_task: Option<&str>,
    rules: &PathRules,
) -> Result<(Flow, Vec<String>), Vec<Problem>> {
    parse_flow_checking(text, default_task, rules, Order::AsWritten, &|_| Vec::new())
}

/// `parse_flow_noting`, with `also` run on the flow as soon as its steps are read, so its
/// problems (the roles') come with every other one at once. `order` says which changes its
/// tests may be made to wait for: any, for a plan read for the first time.
pub fn parse_flow_checking(
    text: &str,
    default_task: Option<&str>,
    rules: &PathRules,
    order: Order,
    also: &dyn Fn(&Flow) -> Vec<Problem>,
) -> Result<(Flow, Vec<String>), Vec<Problem>> {
    let mut notes = Vec::new();
    let mut problems = Problems::default();
    if text.len() > MAX_FLOW_BYTES {
        problems.flow(
            "limits",
            format!(
                "the flow is {} bytes; the limit is {MAX_FLOW_BYTES}",
                text.len()
            ),
        );
        return Err(problems.0);
    }
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(err) => {
            problems.flow("format", format!("not valid JSON: {err}"));
            return Err(problems.0);
        }
    };
    let mut flow = read_flow(value, default_task, &mut problems);
    if let Some((flow, deliverables)) = &mut flow {
        result_data_references(flow);
        problems.0.extend(also(flow));
        notes = add_implied_dependencies(flow);
        notes.extend(drop_dependencies_on_no_step(flow));
        check_graph(flow, &mut problems);
        // Paths are stored normalised so staging and diffing see one spelling.
        for (index, name, path) in check_params(flow, rules, &mut problems) {
            flow.steps[index].params.insert(name, Value::String(path));
        }
        // What done means, once the steps are known good: the steps it needs are added to them.
        if problems.0.is_empty() {
            notes.extend(deliverables::settle(
                flow,
                deliverables.take(),
                rules,
                order,
                &mut problems.0,
            ));
        }
        if problems.0.is_empty() {
            check_concurrent_writers(flow, &mut problems);
        }
    }
    match flow {
        Some((flow, _)) if problems.0.is_empty() => Ok((flow, notes)),
        _ => Err(problems.0),
    }
}

/// Seed 004's `@{outputs.STEP.result_data}` in every parameter, written as the field that holds
/// STEP's result (`seed_formats::result_data_field`).
fn result_data_references(flow: &mut Flow) {
    let operations: HashMap<String, String> = flow
        .steps
        .iter()
        .map(|s| (s.id.clone(), s.operation.clone()))
        .collect();
    let operation_of = |id: &str| operations.get(id).cloned();
    for step in &mut flow.steps {
        for value in step.params.values_mut() {
            if let Value::String(text) = value {
                *text = seed_formats::references(text, &operation_of);
            }
        }
    }
}

#[derive(Default)]
struct Problems(Vec<Problem>);

impl Problems {
    fn flow(&mut self, rule: &'static str, message: String) {
        self.0.push(Problem {
            step: None,
            rule,
            message,
        });
    }
    fn step(&mut self, step: &str, rule: &'static str, message: String) {
        self.0.push(Problem {
            step: Some(step.to_string()),
            rule,
            message,
        });
    }
}

/// The structure: top-level shape, version, and each step's fields and types; with the
/// `deliverables` as written, which are settled once the steps are known good.
fn read_flow(
    value: Value,
    default_task: Option<&str>,
    problems: &mut Problems,
) -> Option<(Flow, Option<Value>)> {
    let (version, task, raw_steps, deliverables) = match value {
        Value::Array(steps) => (FLOW_VERSION, None, steps, None),
        Value::Object(mut object) => {
            seed_formats::flow_object(&mut object);
            let version = match object.remove("version") {
                None => FLOW_VERSION,
                Some(Value::Number(n)) if n.as_u64() == Some(u64::from(FLOW_VERSION)) => {
                    FLOW_VERSION
                }
                Some(other) => {
                    problems.flow(
                        "version",
                        format!(
                            "unsupported flow version {other}; this ocflow reads version \
                             {FLOW_VERSION}"
                        ),
                    );
                    return None;
                }
            };
            let task = match object.remove("task") {
                Some(Value::String(task)) => Some(task),
                None | Some(Value::Null) => None,
                Some(_) => {
                    problems.flow("format", "`task` must be a string".into());
                    None
                }
            };
            let steps = match object.remove("steps") {
                Some(Value::Array(steps)) => steps,
                _ => {
                    problems.flow(
                        "format",
                        "the flow needs a `steps` array (or give a bare JSON array of steps)"
                            .into(),
                    );
                    return None;
                }
            };
            let deliverables = object.remove("deliverables");
            // A planner's refusal is the planner's to read; a flow given to run cannot refuse.
            match object.remove("refuse") {
                None | Some(Value::Null) => {}
                Some(Value::String(why)) if why.trim().is_empty() => {}
                Some(why) => problems.flow(
                    "refused",
                    format!(
                        "the flow refuses its task ({why}): a flow to run plans steps, and \
                         nothing runs when it refuses"
                    ),
                ),
            }
            for key in object.keys() {
                problems.flow(
                    "format",
                    format!(
                        "unknown top-level field `{key}`; allowed: version, task, deliverables, \
                         steps, refuse"
                    ),
                );
            }
            (version, task, steps, deliverables)
        }
        _ => {
            problems.flow(
                "format",
                "a flow is an object with `steps` or a JSON array of steps".into(),
            );
            return None;
        }
    };
    if raw_steps.is_empty() {
        problems.flow("format", "the flow has no steps".into());
        return None;
    }
    if raw_steps.len() > MAX_STEPS {
        problems.flow(
            "limits",
            format!(
                "the flow has {} steps; the limit is {MAX_STEPS}",
                raw_steps.len()
            ),
        );
        return None;
    }
    let task = task
        .or_else(|| default_task.map(str::to_string))
        .unwrap_or_default();
    let mut steps = Vec::with_capacity(raw_steps.len());
    let mut seen = HashSet::new();
    for (index, raw) in raw_steps.into_iter().enumerate() {
        let label = format!("#{}", index + 1);
        if let Some(step) = read_step(raw, &label, problems) {
            // Ids name directories: on a case-insensitive file system `Step1` and `step1` collide.
            if !seen.insert(step.id.to_ascii_lowercase()) {
                problems.step(
                    &step.id,
                    "id",
                    "the id is used by more than one step (ids are compared ignoring case); give \
                     each step its own id"
                        .into(),
                );
            }
            steps.push(step);
        }
    }
    Some((
        Flow {
            version,
            task,
            steps,
            deliverables: None,
        },
        deliverables,
    ))
}

/// Reads steps given outside a flow (the new or changed steps of a recovery answer) as a flow's
/// steps are read, with the same problems. `first_index` is the index the first of them takes in
/// the flow they join, so a step without a usable id is named by its place there (`#4`).
pub(crate) fn read_steps(raw: Vec<Value>, first_index: usize) -> Result<Vec<Step>, Vec<Problem>> {
    let mut problems = Problems::default();
    let steps: Vec<Step> = raw
        .into_iter()
        .enumerate()
        .filter_map(|(offset, raw)| {
            read_step(
                raw,
                &format!("#{}", first_index + offset + 1),
                &mut problems,
            )
        })
        .collect();
    if problems.0.is_empty() {
        Ok(steps)
    } else {
        Err(problems.0)
    }
}

fn read_step(raw: Value, label: &str, problems: &mut Problems) -> Option<Step> {
    let Value::Object(mut object) = raw else {
        problems.step(label, "format", "a step must be a JSON object".into());
        return None;
    };
    seed_formats::step_object(&mut object);
    let id = match object.remove("id") {
        Some(Value::String(id)) => id,
        _ => {
            problems.step(label, "id", "the step has no string `id`".into());
            return None;
        }
    };
    let name = if is_valid_id(&id) {
        id.clone()
    } else {
        format!("{label} ({id:?})")
    };
    if !is_valid_id(&id) {
        problems.step(
            &name,
            "id",
            "ids match [A-Za-z0-9][A-Za-z0-9_-]{0,63}".into(),
        );
    } else if RESERVED_IDS.contains(&id.to_ascii_lowercase().as_str()) {
        problems.step(
            &name,
            "id",
            format!("`{id}` is reserved for the task directory; choose another id"),
        );
    }
    let operation = match object.remove("operation") {
        Some(Value::String(op)) => op,
        _ => {
            problems.step(
                &name,
                "operation",
                format!(
                    "the step has no string `operation`; one of: {}",
                    operations::names().join(", ")
                ),
            );
            String::new()
        }
    };
    let role = optional_string(&mut object, "role", &name, problems);
    let description = optional_string(&mut object, "description", &name, problems);
    let params = match object.remove("params") {
        Some(Value::Object(mut params)) => {
            // The seed's names for a parameter, unless the step also gives ours.
            let declared = operations::find(&operation).map_or(&[][..], |op| op.params);
            for (param, alias) in declared
                .iter()
                .flat_map(|p| p.aliases.iter().map(move |alias| (p, alias)))
            {
                if !params.contains_key(param.name)
                    && let Some(value) = params.remove(*alias)
                {
                    params.insert(param.name.to_string(), value);
                }
            }
            params
        }
        None | Some(Value::Null) => Map::new(),
        Some(_) => {
            problems.step(&name, "params", "`params` must be an object".into());
            Map::new()
        }
    };
    let final_answer = match object.remove("final_answer") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => flag,
        Some(_) => {
            problems.step(
                &name,
                "format",
                "`final_answer` (seed 004's `isFinalAnswer`) must be true or false".into(),
            );
            false
        }
    };
    let profile = optional_string(&mut object, "profile", &name, problems);
    if let Some(profile) = profile.as_deref().filter(|p| !is_valid_name(p)) {
        problems.step(
            &name,
            "model",
            format!(
                "profile {profile:?}: a profile's name is letters, digits, `_` and `-` (at most \
                 64), as under [llm.profiles.NAME]"
            ),
        );
    }
    let model = optional_string(&mut object, "model", &name, problems);
    if let Some(model) = model.as_deref().filter(|m| !is_model_name(m)) {
        problems.step(
            &name,
            "model",
            format!(
                "model {model:?}: a model's name is 1 to 200 printable characters without \
                 spaces (`gpt-4o-mini`, `qwen2.5-coder:1.5b`)"
            ),
        );
    }
    let (depends_on, not_ids) = read_depends_on(object.remove("depends_on").unwrap_or(Value::Null));
    for problem in not_ids {
        problems.step(&name, "dependencies", problem.to_string());
    }
    for key in object.keys() {
        problems.step(
            &name,
            "format",
            format!(
                "unknown field `{key}`; allowed: id, operation, params, depends_on, role, \
                 description, final_answer, profile, model"
            ),
        );
    }
    Some(Step {
        id: name,
        operation,
        role,
        description,
        params,
        depends_on,
        final_answer,
        profile,
        model,
    })
}

/// A profile's name, as `[llm.profiles.NAME]` allows one.
fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A model's name: what an endpoint is sent, printable, one word.
fn is_model_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 200 && name.chars().all(|c| c.is_ascii_graphic())
}

fn optional_string(
    object: &mut Map<String, Value>,
    key: &str,
    step: &str,
    problems: &mut Problems,
) -> Option<String> {
    match object.remove(key) {
        Some(Value::String(text)) => Some(text),
        None | Some(Value::Null) => None,
        Some(_) => {
            problems.step(step, "format", format!("`{key}` must be a string"));
            None
        }
    }
}

/// Adds to `depends_on` the steps a step reads (a step-reference parameter or an
/// `@{outputs.STEP…}` reference) but does not depend on, when that makes no cycle.
fn add_implied_dependencies(flow: &mut Flow) -> Vec<String> {
    let mut notes = Vec::new();
    for index in 0..flow.steps.len() {
        let step = &flow.steps[index];
        let spec = operations::find(&step.operation);
        let mut read: Vec<String> = Vec::new();
        for (name, value) in &step.params {
            let Some(text) = value.as_str() else { continue };
            let is_step_ref = spec
                .and_then(|s| s.param(name))
                .is_some_and(|p| p.meaning == ParamMeaning::StepRef);
            if is_step_ref {
                read.push(text.to_string());
            }
            read.extend(
                flow::output_refs(text)
                    .into_iter()
                    .flatten()
                    .map(|r| r.step),
            );
        }
        for target in read {
            let step = &flow.steps[index];
            let known = flow.steps.iter().any(|s| s.id == target);
            if !known || target == step.id || step.depends_on.contains(&target) {
                continue;
            }
            // Only where it makes no cycle: the target must not already need this step.
            if flow.ancestors(&target).contains(&step.id) {
                continue;
            }
            let id = step.id.clone();
            flow.steps[index].depends_on.push(target.clone());
            notes.push(format!(
                "step {id} reads step {target} but did not depend on it: the dependency was added"
            ));
        }
    }
    notes
}

/// Drops, with a note, what `depends_on` names that is no step and needs no guess: the step
/// itself, an operation's or a function's name (a real 0.5B model's every invalid plan was only
/// that). A name one slip away from a step's id is left for `check_graph` to refuse, naming the
/// step it may mean: which one is meant is a guess.
fn drop_dependencies_on_no_step(flow: &mut Flow) -> Vec<String> {
    let ids: Vec<String> = flow.steps.iter().map(|s| s.id.clone()).collect();
    let mut notes = Vec::new();
    for step in &mut flow.steps {
        let own = step.id.clone();
        step.depends_on.retain(|dep| {
            let itself = *dep == own;
            let unknown = !ids.contains(dep) && near_id(dep, &ids).is_none();
            if itself {
                notes.push(format!(
                    "step {own} named itself in depends_on: the entry was dropped"
                ));
            } else if unknown {
                notes.push(format!(
                    "step {own} named `{dep}` in depends_on, which is no step of the flow (an \
                     operation's or a function's name): the entry was dropped"
                ));
            }
            !itself && !unknown
        });
    }
    notes
}

/// The step id `name` may be a slip of: the same ignoring case, or at most two edits away from
/// an id of four letters or more.
fn near_id<'a>(name: &str, ids: &'a [String]) -> Option<&'a String> {
    ids.iter().find(|id| {
        id.eq_ignore_ascii_case(name)
            || (id.len() >= 4 && name.len() >= 4 && edit_distance(id, name) <= 2)
    })
}

/// Levenshtein's distance between two short strings.
fn edit_distance(one: &str, other: &str) -> usize {
    let other: Vec<char> = other.chars().collect();
    let mut row: Vec<usize> = (0..=other.len()).collect();
    for (i, a) in one.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, b) in other.iter().enumerate() {
            let substitution = previous + usize::from(a != *b);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[other.len()]
}

/// Whether `id` is a valid step id.
pub(crate) fn is_valid_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
}

/// Dependencies exist, no step depends on itself, no cycles.
fn check_graph(flow: &Flow, problems: &mut Problems) {
    let ids: HashSet<&str> = flow.steps.iter().map(|s| s.id.as_str()).collect();
    for step in &flow.steps {
        if step.depends_on.len() > MAX_DEPENDENCIES {
            problems.step(
                &step.id,
                "limits",
                format!(
                    "{} dependencies; the limit is {MAX_DEPENDENCIES}",
                    step.depends_on.len()
                ),
            );
        }
        for dep in &step.depends_on {
            if dep == &step.id {
                problems.step(
                    &step.id,
                    "dependencies",
                    "the step depends on itself".into(),
                );
            } else if !ids.contains(dep.as_str()) {
                let known: Vec<String> = flow.steps.iter().map(|s| s.id.clone()).collect();
                let meant = near_id(dep, &known)
                    .map(|id| format!(" (did you mean `{id}`?)"))
                    .unwrap_or_default();
                problems.step(
                    &step.id,
                    "dependencies",
                    format!("depends_on names `{dep}`, which is not a step of this flow{meant}"),
                );
            }
        }
    }
    if let Some(cycle) = find_cycle(flow) {
        problems.step(
            &cycle[0],
            "cycle",
            format!(
                "dependency cycle: {}; remove one of these dependencies",
                cycle.join(" -> ")
            ),
        );
    }
}

/// A cycle as a list of ids whose last element repeats the first, if any.
fn find_cycle(flow: &Flow) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Fresh,
        Active,
        Done,
    }
    let index: HashMap<&str, usize> = flow
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let mut marks = vec![Mark::Fresh; flow.steps.len()];
    for root in 0..flow.steps.len() {
        if marks[root] != Mark::Fresh {
            continue;
        }
        // Iterative depth-first search; `path` holds the active chain and each node's next edge.
        let mut path: Vec<(usize, usize)> = vec![(root, 0)];
        marks[root] = Mark::Active;
        while let Some(&mut (node, ref mut edge)) = path.last_mut() {
            let deps = &flow.steps[node].depends_on;
            if *edge < deps.len() {
                let next = index.get(deps[*edge].as_str()).copied();
                *edge += 1;
                let Some(next) = next else { continue };
                match marks[next] {
                    Mark::Fresh => {
                        marks[next] = Mark::Active;
                        path.push((next, 0));
                    }
                    Mark::Active => {
                        let start = path.iter().position(|(n, _)| *n == next).unwrap_or(0);
                        let mut cycle: Vec<String> = path[start..]
                            .iter()
                            .map(|(n, _)| flow.steps[*n].id.clone())
                            .collect();
                        cycle.push(flow.steps[next].id.clone());
                        return Some(cycle);
                    }
                    Mark::Done => {}
                }
            } else {
                marks[node] = Mark::Done;
                path.pop();
            }
        }
    }
    None
}

/// Two steps that may run at the same time (neither depends on the other) may not write the
/// same file: which one won would depend on timing.
fn check_concurrent_writers(flow: &Flow, problems: &mut Problems) {
    let order: HashMap<&str, usize> = flow
        .topological_order()
        .into_iter()
        .enumerate()
        .map(|(at, id)| (id, at))
        .collect();
    let mut writers: std::collections::BTreeMap<&str, Vec<&str>> =
        std::collections::BTreeMap::new();
    for step in &flow.steps {
        let Some(spec) = operations::find(&step.operation) else {
            continue;
        };
        for name in spec.writes {
            if let Some(path) = step.params.get(*name).and_then(Value::as_str) {
                writers.entry(path).or_default().push(&step.id);
            }
        }
    }
    for (path, steps) in writers {
        // Writers one after another in run order, each depending on the one before, are all
        // ordered (depending is transitive): one ancestor set at a time, never kept. Keeping
        // every writer's set made a chain rewriting one file quadratic in memory (65 MB for
        // 1000 steps against 28 MB for 200).
        let mut ordered = steps.clone();
        ordered.sort_by_key(|id| order.get(id).copied().unwrap_or(usize::MAX));
        if ordered
            .windows(2)
            .all(|pair| pair[0] == pair[1] || flow.ancestors(pair[1]).contains(pair[0]))
        {
            continue;
        }
        // Some are not ordered: every pair that is not is named (an invalid flow, rare).
        let mut ancestors: HashMap<String, BTreeSet<String>> = HashMap::new();
        let mut depends = |step: &str, on: &str| {
            ancestors
                .entry(step.to_string())
                .or_insert_with(|| flow.ancestors(step))
                .contains(on)
        };
        for (i, first) in steps.iter().enumerate() {
            for second in &steps[i + 1..] {
                let related = depends(first, second) || depends(second, first);
                if !related && first != second {
                    problems.step(
                        second,
                        "concurrency",
                        format!(
                            "steps {first} and {second} may run at the same time and both write \
                             {path}; make one depend on the other"
                        ),
                    );
                }
            }
        }
    }
}

/// Each step's operation and parameters: known names, types, sizes, paths, and references
/// only to ancestors.
/// Returns the path parameters whose normalised spelling differs from what was written.
fn check_params(
    flow: &Flow,
    rules: &PathRules,
    problems: &mut Problems,
) -> Vec<(usize, String, String)> {
    let mut normalised = Vec::new();
    for (index, step) in flow.steps.iter().enumerate() {
        if step.operation.is_empty() {
            continue;
        }
        let Some(spec) = operations::find(&step.operation) else {
            problems.step(
                &step.id,
                "operation",
                format!(
                    "unknown operation `{}`; one of: {}",
                    step.operation,
                    operations::names().join(", ")
                ),
            );
            continue;
        };
        // Found when a reference needs them: every step's, each in turn, is quadratic on a chain.
        let ancestors = std::cell::OnceCell::new();
        let refer = |target: &str, what: &str, problems: &mut Problems| {
            if flow.step(target).is_none() {
                problems.step(
                    &step.id,
                    "reference",
                    format!("{what} names `{target}`, which is not a step of this flow"),
                );
            } else if !ancestors
                .get_or_init(|| flow.ancestors(&step.id))
                .contains(target)
            {
                problems.step(
                    &step.id,
                    "reference",
                    format!(
                        "{what} reads step `{target}`, which this step does not depend on; add it \
                         to depends_on"
                    ),
                );
            }
        };
        for (name, value) in &step.params {
            let Some(param) = spec.param(name) else {
                let allowed: Vec<&str> = spec.params.iter().map(|p| p.name).collect();
                problems.step(
                    &step.id,
                    "params",
                    format!(
                        "{} has no parameter `{name}`; allowed: {}",
                        spec.name,
                        allowed.join(", ")
                    ),
                );
                continue;
            };
            if !param.kind.accepts(value) {
                problems.step(
                    &step.id,
                    "params",
                    format!("`{name}` must be {}, not {value}", param.kind.name()),
                );
                continue;
            }
            let Some(text) = value.as_str() else { continue };
            if text.len() > MAX_STRING_BYTES {
                problems.step(
                    &step.id,
                    "limits",
                    format!(
                        "`{name}` is {} bytes; the limit is {MAX_STRING_BYTES}",
                        text.len()
                    ),
                );
                continue;
            }
            match flow::output_refs(text) {
                Ok(refs) => {
                    for reference in refs {
                        refer(&reference.step, &reference.text, problems);
                    }
                }
                Err(message) => {
                    problems.step(&step.id, "reference", format!("`{name}`: {message}"))
                }
            }
            match param.meaning {
                ParamMeaning::FilePath | ParamMeaning::DirPath if text.contains("@{") => {
                    problems.step(
                        &step.id,
                        "path",
                        format!(
                            "`{name}` holds a reference; paths must be written out so they can be \
                             checked before the flow runs"
                        ),
                    );
                }
                ParamMeaning::FilePath | ParamMeaning::DirPath => {
                    match rules.check(text, param.meaning == ParamMeaning::DirPath) {
                        Ok(path) if path.to_string() != text => {
                            normalised.push((index, name.clone(), path.to_string()))
                        }
                        Ok(_) => {}
                        Err(message) => {
                            problems.step(&step.id, "path", format!("`{name}`: {message}"))
                        }
                    }
                }
                ParamMeaning::StepRef => refer(text, &format!("`{name}`"), problems),
                ParamMeaning::Text | ParamMeaning::Command | ParamMeaning::Setting => {}
            }
        }
        for param in spec.params.iter().filter(|p| p.required) {
            if !step.params.contains_key(param.name) {
                problems.step(
                    &step.id,
                    "params",
                    format!("{} needs `{}` ({})", spec.name, param.name, param.doc),
                );
            }
        }
        if !spec.exactly_one_of.is_empty() {
            let given: BTreeSet<&str> = spec
                .exactly_one_of
                .iter()
                .copied()
                .filter(|p| step.params.contains_key(*p))
                .collect();
            if given.len() != 1 {
                problems.step(
                    &step.id,
                    "params",
                    format!(
                        "{} needs exactly one of {}",
                        spec.name,
                        spec.exactly_one_of.join(", ")
                    ),
                );
            }
        }
    }
    normalised
}
