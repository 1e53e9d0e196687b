//! `ocflow resume`: continue a flow after a crash, an interrupt or a failure, from
//! `flow_status.json`, without running a succeeded step again.

use crate::cli::args::ResumeArgs;
use crate::cli::budget;
use crate::cli::config::Config;
use crate::cli::execute;
use crate::cli::gates::{self, Given, Reply};
use crate::cli::launch::{self, connect_llm};
use crate::cli::live;
use crate::cli::progress::Progress;
use crate::cli::run;
use crate::cli::tasks::{find_task, know_operations_of, warn};
use ocflow_core::engine::executor::{Executor, Settings};
use ocflow_core::engine::orphans;
use ocflow_core::engine::signals::Interrupt;
use ocflow_core::flow::deliverables::Order;
use ocflow_core::flow::path_rules::PathRules;
use ocflow_core::task::events::Events;
use ocflow_core::task::journal::Journal;
use ocflow_core::task::workspace::{self, TaskDir};
use ocflow_core::task::{outputs, state};
use ocflow_model::approval::AnsweredBy;
use ocflow_model::error::{Error, Result};
use ocflow_model::event::Event;
use ocflow_model::exit::ExitCode;
use ocflow_model::flow::Flow;
use ocflow_model::output::say;
use ocflow_model::status::{
    FlowState, FlowStatus, LLM_UNUSABLE_KIND, NO_SPACE_KIND, PendingRecovery, StepState,
};
use std::collections::BTreeSet;

pub(crate) async fn resume(config: &Config, args: ResumeArgs) -> Result<ExitCode> {
    continue_flow(config, args, None).await
}

/// Resumes a flow; `approved`: who approved the flow waiting for a person (`ocflow approve`),
/// which only then goes on.
pub(crate) async fn continue_flow(
    config: &Config,
    args: ResumeArgs,
    approved: Option<AnsweredBy>,
) -> Result<ExitCode> {
    let task = find_task(config, args.task.as_deref(), true)?;
    warn_not_loaded(config, &task);
    if let Some(status) = unplanned(&task) {
        return plan_again(config, &task, &status, args).await;
    }
    let _lock = task.lock()?;
    let mut flow_status = load_status(config, &task)?;
    let approving = approving(&task, &flow_status, approved)?;
    let rules = PathRules::new(&flow_status.repo, &task.workspace());
    let flow = flow_of(config, &task, &flow_status, &rules)?;
    let redone = redo_vanished(&task, &mut flow_status, &flow)?;
    if flow_status.state == FlowState::Succeeded {
        say(&format!(
            "ocflow: task {} already succeeded; nothing to resume. Review it with `ocflow diff \
             {0}`.",
            task.task_id
        ));
        return Ok(ExitCode::Success);
    }
    budget::refuse_the_same_limit(&flow_status, config.run.budget)?;
    // A recovery left pending needs the LLM settings (even to redo a decision already made);
    // without them the step is simply failed, and --retry-failed runs it again.
    let llm = connect_llm(config)?;
    refuse_without_model(config, &task, &flow_status, &flow, llm.is_some())?;
    if flow_status.pending_recovery.is_some() && (!config.run.recovery || llm.is_none()) {
        flow_status.pending_recovery = None;
    }
    let Some(failed) = failed_to_rerun(&task, &flow_status, &flow, &args) else {
        return Ok(ExitCode::Failure);
    };
    let bridge = launch::load_bridge(config)?;
    let interrupt = Interrupt::listen();
    let live = live::install(
        config.json,
        None,
        config.llm.as_ref().ok().map(|l| l.operations.model.clone()),
    );
    stop_orphans(&task);
    // The limits given now, else those the flow ran under; what it spent carries over.
    let (budget, said) = budget::install(
        config.run.budget,
        &config.run.prices,
        flow_status.budget,
        llm.as_deref(),
    );
    let mut settings = launch::engine_settings(config, &rules, &task.workspace(), llm)?;
    settings.budget = budget;
    requeue(&mut flow_status, &failed, args.recover, &settings)?;
    let mut events = Events::new(
        Journal::open(&task.file(workspace::JOURNAL_FILE))?,
        Progress::with_live(config.json, live),
    );
    if let Some(by) = approving {
        let mut given = Given {
            reply: Some(Reply::Yes),
            by,
        };
        gates::answer_waiting(&task, &mut flow_status, &flow, &mut events, &mut given).await?;
    }
    for message in redone.into_iter().chain(said) {
        events.emit(Event::Warning { message })?;
    }
    launch::report_sandbox(config, &settings, &mut flow_status, &mut events)?;
    state::save_status(&task, &mut flow_status)?;
    let pending = flow_status
        .steps
        .iter()
        .filter(|s| s.status == StepState::Pending)
        .map(|s| s.id.clone())
        .collect();
    events.emit(Event::FlowResumed {
        task_id: task.task_id.clone(),
        task_dir: task.root.clone(),
        pending,
    })?;
    outputs::rebuild_final_output(&task, &flow_status, &flow)?;
    let executor =
        Executor::from_snapshot(task, flow, flow_status, events, bridge, settings, interrupt)?;
    execute::execute(executor, args.apply, config.approvals.apply, config.json).await
}

/// The plugins loaded now come first; the saved catalogue adds the ones no longer loaded, so
/// the flow still reads (their finished steps are reviewed as what they were), and a step of
/// theirs still to run fails on its own, said here first.
fn warn_not_loaded(config: &Config, task: &TaskDir) {
    let not_loaded = know_operations_of(config, task);
    if !not_loaded.is_empty() {
        warn(
            config,
            format!(
                "task {} was planned with operations that are not loaded now: {}; a step of \
                 theirs that still has to run will fail (load the plugins that add them)",
                task.task_id,
                not_loaded.join(", ")
            ),
        );
    }
}

/// The status of a task stopped before the model gave a flow (interrupted, killed, or failed
/// while planning).
fn unplanned(task: &TaskDir) -> Option<FlowStatus> {
    state::load_status(task).ok().filter(|status| {
        status.steps.is_empty()
            && status.state != FlowState::Succeeded
            && !state::current_flow_file(task, status.revision).exists()
    })
}

/// A task with no flow yet is planned again, from its own words, where it was started: its own
/// repository and workspace. Planning paused by a budget pauses again under the same limit:
/// refused first.
async fn plan_again(
    config: &Config,
    task: &TaskDir,
    status: &FlowStatus,
    args: ResumeArgs,
) -> Result<ExitCode> {
    if config.repo_named && config.repo != status.repo {
        return Err(Error::Usage(format!(
            "task {} was started on the repository {}, not {}; resume it there (`--repo {1}`)",
            task.task_id,
            status.repo.display(),
            config.repo.display()
        )));
    }
    budget::refuse_the_same_limit(status, config.run.budget)?;
    let mut own = config.clone();
    own.workspace = task.workspace();
    own.rules = PathRules::new(&status.repo, &own.workspace);
    own.repo = status.repo.clone();
    say(&format!(
        "ocflow: task {} has no flow yet; planning it again",
        task.task_id
    ));
    run::plan_again(&own, &task.task_id, &status.task, args.apply, args.limits).await
}

/// The task's status. A crash right after flow.json was written leaves no status yet, or the
/// one written while the flow was starting (no steps): every step is pending.
fn load_status(config: &Config, task: &TaskDir) -> Result<FlowStatus> {
    let status_path = task.file(workspace::STATUS_FILE);
    let flow_file = task.file(workspace::FLOW_FILE);
    let read_flow = || {
        launch::read_flow(
            &flow_file,
            None,
            &config.rules,
            &config.roles,
            Order::AsWritten,
        )
    };
    match state::load_status(task) {
        Err(_) if !status_path.exists() && flow_file.is_file() => Ok(FlowStatus::new(
            &task.task_id,
            &read_flow()?.0,
            &config.repo,
        )),
        Ok(starting) if starting.steps.is_empty() && flow_file.is_file() => Ok(FlowStatus::new(
            &task.task_id,
            &read_flow()?.0,
            &starting.repo,
        )),
        loaded => loaded,
    }
}

/// Who approved a flow waiting for a person: it goes on only with their yes, and a yes is
/// given only to a flow that waits.
fn approving(
    task: &TaskDir,
    status: &FlowStatus,
    approved: Option<AnsweredBy>,
) -> Result<Option<AnsweredBy>> {
    match (status.state, approved) {
        (FlowState::Waiting, Some(by)) => Ok(Some(by)),
        (FlowState::Waiting, None) => Err(Error::Usage(format!(
            "task {} waits for approval{}: `ocflow approve {0}` runs it, `ocflow reject {0}` \
             ends it",
            task.task_id,
            status
                .approval
                .as_ref()
                .map(|p| format!(" of the {}", p.kind))
                .unwrap_or_default()
        ))),
        (state, Some(_)) => Err(Error::Usage(format!(
            "task {} is {state}, not waiting for an approval",
            task.task_id
        ))),
        (_, None) => Ok(None),
    }
}

/// The task's current flow, every step of which must be in the status (earlier revisions'
/// steps stay there too). A task whose planning never gave a flow says so, instead of
/// "flow.json: cannot read it".
fn flow_of(
    config: &Config,
    task: &TaskDir,
    status: &FlowStatus,
    rules: &PathRules,
) -> Result<Flow> {
    state::load_flow_of(task, status)?;
    let flow_file = state::current_flow_file(task, status.revision);
    let (flow, _) = launch::read_flow(&flow_file, None, rules, &config.roles, Order::AsWritten)?;
    if let Some(step) = flow.steps.iter().find(|s| status.step(&s.id).is_none()) {
        return Err(Error::BadStateFile {
            path: task.file(workspace::STATUS_FILE),
            problem: format!(
                "step {} of the flow is missing; flow.json or the status was edited by hand",
                step.id
            ),
        });
    }
    Ok(flow)
}

/// Steps left that call the model cannot run without one: refused, the flow left as it is (a
/// paused or waiting flow resumed without LLM settings used to end `failed`).
fn refuse_without_model(
    config: &Config,
    task: &TaskDir,
    status: &FlowStatus,
    flow: &Flow,
    has_model: bool,
) -> Result<()> {
    let needs_model = flow.steps.iter().find(|step| {
        status
            .step(&step.id)
            .is_some_and(|s| s.status != StepState::Succeeded && s.status != StepState::Skipped)
            && ocflow_core::flow::operations::step_needs_llm(&step.operation, &step.params)
    });
    match (has_model, needs_model) {
        (false, Some(step)) => Err(match launch::no_llm(config) {
            Error::Usage(missing) => Error::Usage(format!(
                "task {} is {} and its step {} calls the model: {missing}; nothing was changed",
                task.task_id, status.state, step.id
            )),
            other => other,
        }),
        _ => Ok(()),
    }
}

/// The failed steps that run again (a recovery left pending aside), or `None` when some failed
/// for a reason of its own and the resume was not asked to retry or recover them: said, with
/// how to go on. A step a full disk or a refusing model stopped did nothing wrong: once there
/// is room, or the key is fixed, it simply runs again.
fn failed_to_rerun(
    task: &TaskDir,
    status: &FlowStatus,
    flow: &Flow,
    args: &ResumeArgs,
) -> Option<Vec<String>> {
    let recovering = status.pending_recovery.as_ref().map(|p| &p.step);
    let failed: Vec<String> = status
        .steps
        .iter()
        .filter(|s| {
            s.status == StepState::Failed && flow.step(&s.id).is_some() && Some(&s.id) != recovering
        })
        .map(|s| s.id.clone())
        .collect();
    let blocking = status.steps.iter().any(|s| {
        failed.contains(&s.id)
            && s.error
                .as_ref()
                .is_none_or(|e| e.kind != NO_SPACE_KIND && e.kind != LLM_UNUSABLE_KIND)
    });
    if !blocking || args.retry_failed || args.recover {
        return Some(failed);
    }
    for step in status
        .steps
        .iter()
        .filter(|s| s.status == StepState::Failed)
    {
        say(&format!(
            "ocflow: step {} failed: {}",
            step.id,
            step.message.as_deref().unwrap_or("no message")
        ));
    }
    say(&format!(
        "ocflow: not resuming over failed steps; fix the cause and run `ocflow resume {} \
         --retry-failed` (or `--recover` to ask the LLM for a new strategy)",
        task.task_id
    ));
    None
}

/// First what the killed run's steps left in their cgroups (a daemon without the task's marker
/// too), then, where there were none, processes carrying the marker.
fn stop_orphans(task: &TaskDir) {
    let groups = ocflow_sandbox::step_cgroup::Hierarchies::find().end_left_for(&task.root);
    let stopped = groups + orphans::stop(task);
    if stopped > 0 {
        say(&format!(
            "ocflow: stopped {stopped} command(s) left running in this task when ocflow was killed"
        ));
    }
}

/// Sends the steps that run again back to pending: those running when ocflow stopped, and the
/// `failed` ones. With `recover`, the first failed step gets a new recovery round instead,
/// where there is an LLM and the caps leave room for one.
fn requeue(
    status: &mut FlowStatus,
    failed: &[String],
    recover: bool,
    settings: &Settings,
) -> Result<()> {
    let limits = settings.recovery_limits;
    let calls = status.recovery_calls;
    let recovering = status.pending_recovery.is_some();
    let mut new_round = None;
    for step in &mut status.steps {
        match step.status {
            StepState::Running => {
                step.requeue(Some("was running when ocflow stopped; it runs again"))?
            }
            StepState::Failed
                if failed.contains(&step.id)
                    && recover
                    && settings.recovery.is_some()
                    && new_round.is_none()
                    && !recovering
                    && step.attempts < limits.max_attempts_per_step
                    && calls < limits.max_recovery_calls =>
            {
                new_round = Some(step.id.clone());
            }
            StepState::Failed if failed.contains(&step.id) => step.requeue(None)?,
            _ => {}
        }
    }
    if let Some(step) = new_round {
        status.pending_recovery = Some(PendingRecovery {
            step,
            decision: None,
        });
    }
    status.message = None;
    status.paused = None;
    Ok(())
}

/// Sends back to pending every succeeded step whose recorded outputs vanished from the task
/// directory, and every succeeded step after it (it may have read them); says which.
fn redo_vanished(task: &TaskDir, flow_status: &mut FlowStatus, flow: &Flow) -> Result<Vec<String>> {
    let vanished = state::vanished_outputs(task, flow_status, flow);
    if vanished.is_empty() {
        return Ok(Vec::new());
    }
    let mut redo: BTreeSet<&str> = vanished.iter().map(|v| v.step.as_str()).collect();
    loop {
        let before = redo.len();
        for step in &flow.steps {
            if step.depends_on.iter().any(|d| redo.contains(d.as_str())) {
                redo.insert(step.id.as_str());
            }
        }
        if redo.len() == before {
            break;
        }
    }
    let mut notes: Vec<String> = vanished
        .iter()
        .map(|v| format!("the recorded outputs of {v} are gone: it runs again"))
        .collect();
    for id in redo {
        let Some(step) = flow_status.step_mut(id) else {
            continue;
        };
        if step.status != StepState::Succeeded {
            continue;
        }
        if !vanished.iter().any(|v| v.step == id) {
            notes.push(format!(
                "step {id} comes after a step that runs again: it runs again too"
            ));
        }
        step.reset("its recorded outputs (or an earlier step's) were gone; it runs again")?;
    }
    flow_status.move_to(FlowState::Running)?;
    flow_status.finished_at = None;
    Ok(notes)
}
