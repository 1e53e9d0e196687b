//! Runs the command the user asked for, on an async runtime where it needs one.

use crate::cli::args::Command;
use crate::cli::config::Config;
use crate::cli::needs::Probe;
use crate::cli::{
    apply, approval, batch, clean, demo, doctor, eval, launch, memory, progress, report, resume,
    review, run, skill, trust, wait,
};
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::event::{Event, Record};
use ocflow_model::exit::ExitCode;
use ocflow_model::status::now;

/// Runs one command.
pub(crate) fn dispatch(config: &Config, command: Command) -> Result<ExitCode> {
    // Said before the command runs, to people (stderr) and headless callers (a warning event).
    // The compiled-in declarations are read at first use: a build whose file does not read
    // could validate nothing, and says so before anything else.
    if let Some(problem) = ocflow_core::flow::operations::built_in_problem() {
        return Err(Error::internal(problem));
    }
    let mut warnings = config.warnings.clone();
    let mut connected = None;
    let needs = command.needs();
    let given_flow = matches!(&command, Command::Run(args) if args.plan.is_some());
    // The sandbox probe starts now, beside the library's start, except for a flow given with
    // `--plan`: its engine starts the probe once the first steps are on their way, so that it
    // never takes the processors from them (issue 28 §4).
    if !given_flow {
        config.run.sandbox.begin();
    }
    // The commands that plan or validate flows take the library's catalogue first, so its
    // plugin operations are known to the planner and the validator.
    if needs.library {
        // `run` connects to the LLM meanwhile (its HTTP client loads the system's root
        // certificates): the embedded Python's start takes longer, and needs nothing from it.
        // A flow given with `--plan` is read and its task set up while the library loads: it
        // waits for the library only to say which one ran the flow (`run::start`).
        if given_flow && launch::may_load_later(config) {
            launch::load_in_background(config);
            connected = Some(launch::connect_llm(config));
        } else {
            let loaded = std::thread::scope(|scope| {
                let connecting = matches!(command, Command::Run(_))
                    .then(|| scope.spawn(|| launch::connect_llm(config)));
                let loaded = launch::load_operations(config);
                connected = connecting.map(|thread| {
                    thread
                        .join()
                        .unwrap_or_else(|_| Err(Error::internal("connecting to the LLM panicked")))
                });
                loaded
            });
            warnings.extend(loaded?.1);
        }
        // The sandbox was probed meanwhile, on a thread of its own; a probe that failed stops
        // the command here, before any task is made. A `run` that plans with the LLM waits for
        // it only once planned (`launch::engine_settings`), or before the first command step
        // of a flow given with `--plan` (`SandboxWait`): under load the probe takes tenths of
        // a second, which planning or LLM steps hide, and it still stops the flow before any
        // command step.
        if needs.probe == Probe::Before {
            config.run.sandbox.plan()?;
        }
    }
    for message in warnings {
        let event = Event::Warning { message };
        progress::show(&Record::now(now(), event), config.json);
    }
    // A killed `apply` or `undo` left half-done is finished before anything reads or changes
    // the tasks or the repository.
    if needs.recovers_applies {
        apply::recover_workspace(config);
    }
    match command {
        Command::Operations => operations(config),
        Command::Doctor => doctor::doctor(config),
        Command::Run(args) => with_runtime(|| run::run(config, args, connected)),
        Command::Plan(args) => with_runtime(|| run::plan(config, args)),
        Command::Demo => with_runtime(|| async {
            let (demo_config, args) = demo::prepare(config)?;
            let code = run::run(&demo_config, args, None).await?;
            demo::show(&demo_config)?;
            Ok(code)
        }),
        Command::Resume(args) => with_runtime(|| resume::resume(config, args)),
        Command::Batch(args) => with_runtime(|| batch::batch(config, args)),
        Command::Eval(args) => with_runtime(|| eval::eval(config, args)),
        Command::Approve(args) => with_runtime(|| approval::approve(config, args)),
        Command::Reject(args) => with_runtime(|| approval::reject(config, args)),
        Command::Status(args) => review::status(config, args),
        Command::List(_) => review::list(config),
        Command::Wait(args) => wait::wait(config, args),
        Command::Diff(args) => review::diff(config, args),
        Command::Report(args) => report::report(config, args),
        Command::Apply(args) => apply::apply(config, args),
        Command::Undo(args) => apply::undo(config, args),
        Command::Clean(args) => clean::clean(config, args),
        Command::Trust(args) => trust::trust(config, args),
        Command::Memory(args) => memory::memory(config, args),
        Command::Skill(args) => skill::skill(config, args),
        Command::SandboxExec(_)
        | Command::Mcp
        | Command::Acp(_)
        | Command::Completions(_)
        | Command::Man => Err(Error::internal(
            "sandbox-exec, mcp, acp, completions and man run before the configuration is resolved",
        )),
    }
}

/// Runs an async command on a fresh runtime. The runtime is not waited for on the way out: a
/// step interrupted by a signal may still be unwinding in its blocking thread.
fn with_runtime<F: Future<Output = Result<ExitCode>>>(
    command: impl FnOnce() -> F,
) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .io_context(|| "starting the async runtime".to_string())?;
    let code = runtime.block_on(command());
    runtime.shutdown_background();
    code
}

/// `ocflow operations`: every operation a flow may use — the built-ins and the plugins the
/// configuration loads — as the planner is shown them; with `--json`, as JSON.
fn operations(config: &Config) -> Result<ExitCode> {
    let (_, problems) = launch::load_operations(config)?;
    if config.json {
        let listed: Vec<serde_json::Value> = ocflow_core::flow::operations::all()
            .map(|op| {
                serde_json::json!({
                    "name": op.name,
                    "doc": op.doc,
                    "needs_llm": op.needs_llm,
                    "runs_commands": op.runs_commands,
                    "writes": op.writes,
                    "exactly_one_of": op.exactly_one_of,
                    "params": op.params.iter().map(|p| serde_json::json!({
                        "name": p.name, "type": p.type_name(), "required": p.required,
                        "doc": p.doc,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let text = serde_json::json!({"operations": listed, "problems": problems});
        ocflow_model::output::print_stdout(&format!("{text}\n"));
    } else {
        let mut text = format!(
            "Operations (* marks required parameters):\n{}",
            ocflow_core::flow::operations::catalogue()
        );
        for problem in &problems {
            text.push_str(&format!("\nwarning: {problem}"));
        }
        ocflow_model::output::print_stdout(&format!("{}\n", text.trim_end()));
    }
    Ok(if problems.is_empty() {
        ExitCode::Success
    } else {
        ExitCode::Failure
    })
}
