//! `ocflow demo`: the whole job — plan, read, modify code, run the tests, summarise — on the
//! bundled sample repository, answered from the bundled recording, in a temporary directory.
//! No network and no key. Everything it needs is compiled into the binary.

use std::fs;

use crate::cli::args::{LimitArgs, RunArgs};
use crate::cli::config::{Config, RunConfig};
use crate::cli::profiles::LlmConfig;
use ocflow_core::flow::path_rules::PathRules;
use ocflow_core::task::workspace::TaskDir;
use ocflow_core::task::{review, state};
use ocflow_model::error::{IoContext, Result};
use ocflow_model::llm::{DEFAULT_PROFILE, ModelSettings};
use ocflow_model::output::{print_stdout, say};

/// The demo's task id.
const TASK_ID: &str = "demo";

/// The task the recording answers.
pub(crate) const TASK: &str =
    "Refactor calculate_metrics in utils.py to be readable and handle division by zero";

/// The sample repository (`examples/sample-repo/`).
const SAMPLE: &[(&str, &str)] = &[
    (
        "README.md",
        include_str!("../../examples/sample-repo/README.md"),
    ),
    (
        "utils.py",
        include_str!("../../examples/sample-repo/utils.py"),
    ),
    (
        "tests/__init__.py",
        include_str!("../../examples/sample-repo/tests/__init__.py"),
    ),
    (
        "tests/test_utils.py",
        include_str!("../../examples/sample-repo/tests/test_utils.py"),
    ),
];

/// The model's answers (`examples/demo/recording.jsonl`, made by `scripts/record-demo`).
const RECORDING: &str = include_str!("../../examples/demo/recording.jsonl");

/// The demo's configuration and run: a fresh sample repository and workspace in a temporary
/// directory, answers from the recording.
pub(crate) fn prepare(config: &Config) -> Result<(Config, RunArgs)> {
    let dir = tempfile::Builder::new()
        .prefix("ocflow-demo-")
        .tempdir()
        .io_context(|| "creating the demo directory".into())?
        .keep();
    let repo = dir.join("repo");
    for (path, content) in SAMPLE {
        let file = repo.join(path);
        if let Some(parent) = file.parent() {
            fs::create_dir_all(parent).io_context(|| format!("creating {}", parent.display()))?;
        }
        fs::write(&file, content).io_context(|| format!("writing {}", file.display()))?;
    }
    let recording = dir.join("recording.jsonl");
    fs::write(&recording, RECORDING).io_context(|| format!("writing {}", recording.display()))?;
    let model = ModelSettings {
        profile: DEFAULT_PROFILE.into(),
        model: "recorded".into(),
        temperature: Some(0.2),
        max_tokens: Some(4096),
    };
    let repo = repo
        .canonicalize()
        .io_context(|| format!("resolving {}", repo.display()))?;
    let workspace = dir.join("workspace");
    let demo = Config {
        rules: PathRules::new(&repo, &workspace),
        repo,
        workspace,
        default_workspace: false,
        repo_named: true,
        llm: Ok(LlmConfig {
            endpoints: Default::default(),
            planner: model.clone(),
            recovery: model.clone(),
            summary: model.clone(),
            operations: model,
            roles: Default::default(),
            profiles: Default::default(),
            record: None,
            replay: Some(recording),
            key_command: None,
            default_key_profiles: Vec::new(),
            unavailable: Default::default(),
        }),
        // Recorded answers match the prompts they were recorded for: the user's failure
        // memory must not add to them, nor a reflection ask what was never recorded.
        run: RunConfig {
            memory: false,
            reflect: false,
            ..config.run.clone()
        },
        ..config.clone()
    };
    say(&format!(
        "ocflow demo: sample repository in {}, recorded answers, no network",
        demo.repo.display()
    ));
    let args = RunArgs {
        task_file: None,
        task: Some(TASK.into()),
        plan: None,
        task_id: Some(TASK_ID.into()),
        apply: false,
        detach: false,
        exit_code_file: None,
        limits: LimitArgs::default(),
    };
    Ok((demo, args))
}

/// After the demo's run (whose end already gave the summary): the diff, and where everything
/// is.
pub(crate) fn show(demo: &Config) -> Result<()> {
    if demo.json {
        return Ok(());
    }
    let task = TaskDir::new(&demo.workspace, TASK_ID);
    let status = state::load_status(&task)?;
    let flow = state::load_flow(&task, status.revision)?;
    let diff = review::unified_diff(&review::changes(&task, &status, &flow)?)?;
    let dir = demo.workspace.parent().unwrap_or(&demo.workspace);
    print_stdout(&format!(
        "\nThe diff (`ocflow diff`):\n\n{diff}\nEverything is in {}. Try `ocflow --repo {} \
         --workspace {} status {TASK_ID}`.\n",
        dir.display(),
        demo.repo.display(),
        demo.workspace.display()
    ));
    Ok(())
}
