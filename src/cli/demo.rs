//! `ocflow demo`: the whole job — plan, read, modify code, run the tests, summarise — on the
//! bundled sample repository, answered from the bundled recording, in a temporary directory.
//! No network and no key. Everything it needs is compiled into the binary.

use std::fs;

use crate::cli::args::{LimitArgs, RunArgs};
use crate::cli::commands::{self, EXIT_OK};
use crate::cli::config::{Config, LlmConfig};
use crate::error::{IoContext, Result};
use crate::llm::client::ModelSettings;
use crate::task::review;
use crate::model::status::FlowStatus;
use crate::task::workspace::{self, TaskDir};

/// The task the recording answers.
pub const TASK: &str =
    "Refactor calculate_metrics in utils.py to be readable and handle division by zero";

/// The sample repository (`examples/sample-repo/`).
const SAMPLE: &[(&str, &str)] = &[
    (
        "README.md",
        include_str!("../../examples/sample-repo/README.md"),
    ),
    ("utils.py", include_str!("../../examples/sample-repo/utils.py")),
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

pub async fn run(config: &Config) -> Result<u8> {
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
        model: "recorded".into(),
        temperature: Some(0.2),
        max_tokens: Some(4096),
    };
    let demo = Config {
        repo: repo
            .canonicalize()
            .io_context(|| format!("resolving {}", repo.display()))?,
        workspace: dir.join("workspace"),
        default_workspace: false,
        llm: Ok(LlmConfig {
            endpoint: None,
            planner: model.clone(),
            operations: model,
            record: None,
            replay: Some(recording),
        }),
        ..config.clone()
    };
    crate::task::events::say(&format!(
        "ocflow demo: sample repository in {}, recorded answers, no network",
        repo.display()
    ));
    let args = RunArgs {
        task: Some(TASK.into()),
        plan: None,
        task_id: Some("demo".into()),
        apply: false,
        limits: LimitArgs {
            jobs: None,
            step_timeout: None,
            max_output_bytes: None,
            allow_destructive: false,
            no_recovery: false,
            no_sandbox: false,
        },
    };
    let code = commands::run(&demo, args).await?;
    let task = TaskDir::new(&demo.workspace, "demo");
    if !demo.json {
        let summary = fs::read_to_string(task.file(workspace::SUMMARY_FILE)).unwrap_or_default();
        let status = FlowStatus::load(&task.file(workspace::STATUS_FILE))?;
        let diff = review::unified_diff(&review::changes(
            &task,
            &status,
            &commands::current_flow(&task, &status)?,
        )?)?;
        commands::print_stdout(&format!(
            "\n{summary}\n## The diff\n\n{diff}\nEverything is in {}. Try `ocflow --repo {} --workspace {} status demo`.\n",
            dir.display(),
            demo.repo.display(),
            demo.workspace.display()
        ));
    }
    Ok(if code == EXIT_OK { EXIT_OK } else { code })
}
