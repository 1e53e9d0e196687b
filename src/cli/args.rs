//! The command line as clap parses it: raw options, before `config` resolves them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Orchestrates LLM coding flows: runs a validated flow of operations step by step through
/// open_codex_lib, keeps the state to resume it, and hands back a diff to apply.
#[derive(Debug, Parser)]
#[command(name = "ocflow", version, about, long_about = None, after_help = ENVIRONMENT)]
pub struct Cli {
    #[command(flatten)]
    pub(crate) global: GlobalArgs,
    #[command(subcommand)]
    pub(crate) command: Command,
}

impl Cli {
    /// Whether the caller asked for JSON lines (`--json`).
    pub fn json(&self) -> bool {
        self.global.json
    }
}

/// What `--help` says of the environment: where the LLM and its key come from.
const ENVIRONMENT: &str = "\
Environment:
  OCFLOW_API_KEY (or OPENAI_API_KEY, LLM_API_KEY)  the API key; kept in memory only
  OCFLOW_API_KEY_FILE                              a file holding the key (mode 600)
  OCFLOW_BASE_URL (or OPENAI_BASE_URL, LLM_BASE_URL)  the OpenAI-compatible endpoint
  OCFLOW_MODEL (or LLM_MODEL)                      the model
  OCFLOW_WORKSPACE                                 where task directories live
  NO_COLOR, CLICOLOR_FORCE                         colour off, or on without a terminal
Config: <workspace>/ocflow.toml, ~/.config/ocflow/config.toml.";

/// Options every command takes (shown apart from each command's own).
#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub(crate) struct GlobalArgs {
    /// The repository the flow works on (only read until `apply`) [default: the git repository
    /// holding the current directory].
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) repo: Option<PathBuf>,
    /// Where task directories live [default: <repo>/.ocflow].
    #[arg(long, global = true, value_name = "DIR", env = "OCFLOW_WORKSPACE")]
    pub(crate) workspace: Option<PathBuf>,
    /// Print events as JSON lines on stdout (for scripts and headless callers).
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Python module to drive instead of open_codex_lib (must define execute_operation)
    /// [default: open_codex_lib].
    #[arg(long, global = true, value_name = "MODULE", env = "OCFLOW_CODEX_LIB")]
    pub(crate) codex_lib: Option<String>,
    /// Directory to put first on Python's sys.path [default: the bundled python/ folder].
    #[arg(long, global = true, value_name = "DIR", env = "OCFLOW_PYTHON_DIR")]
    pub(crate) python_dir: Option<PathBuf>,
    /// OpenAI-compatible endpoint, e.g. http://localhost:8000/v1
    /// [env: OCFLOW_BASE_URL, OPENAI_BASE_URL, LLM_BASE_URL].
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) base_url: Option<String>,
    /// Model for planning and for the operations [env: OCFLOW_MODEL, LLM_MODEL].
    #[arg(long, global = true, value_name = "NAME")]
    pub(crate) model: Option<String>,
    /// Append every LLM request and answer to FILE (JSON lines; never the key).
    #[arg(long, global = true, value_name = "FILE", conflicts_with = "replay")]
    pub(crate) record: Option<PathBuf>,
    /// Answer every LLM request from a recording made with --record; no network.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) replay: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Plan TASK with the LLM (or take `--plan FLOW.json`), run the flow, summarise.
    Run(RunArgs),
    /// Plan TASK with the LLM and print the validated flow on stdout.
    Plan(PlanArgs),
    /// Continue a flow after a crash, an interrupt or a failure.
    Resume(ResumeArgs),
    /// Say yes to what a waiting flow asks (its plan, a risky command, its apply): it goes on.
    Approve(ApproveArgs),
    /// Say no to what a waiting flow asks: it ends (failed; an apply is not written).
    Reject(RejectArgs),
    /// Show a flow's steps, states, attempts, tokens and timings.
    Status(StatusArgs),
    /// List the workspace's tasks: state, age, files changed, applied or not; `--all`: every
    /// repository's recent tasks.
    List(ListArgs),
    /// Show the flow's changes as a unified diff against the repository (paged and coloured
    /// at a terminal).
    Diff(DiffArgs),
    /// Wait for a flow to end (one started with `run --detach`, say) and exit with its exit
    /// code; 124 when `--timeout` passes first (the flow goes on).
    Wait(WaitArgs),
    /// Write one self-contained HTML page of the flow (graph, timeline, tokens, summary, diff)
    /// into the task directory and print its path.
    Report(TaskArg),
    /// Write the flow's changes into the repository: all of them or none.
    Apply(ApplyArgs),
    /// Run a fleet of flows from TASKS.jsonl (one task a line), M at once, here or on a Ray
    /// cluster; results in DIR/results.jsonl and DIR/summary.md. Run it again with the same
    /// --out to resume: finished tasks are skipped, unfinished flows continued.
    Batch(BatchArgs),
    /// Run a suite of tasks as a batch and score each flow by its task's check, run on the
    /// flow's changes in a fresh copy of the repository: solved or not, false successes,
    /// tokens and time per solved task (DIR/results.jsonl, DIR/summary.md). Run it again with
    /// the same --out to go on.
    Eval(EvalArgs),
    /// Put back what a task's last apply replaced, byte for byte.
    Undo(UndoArgs),
    /// Remove the tasks you are done with — finished and applied, failed, or with nothing to
    /// apply — or the tasks named, and say how much disk that frees (`--dry-run`: only say).
    Clean(CleanArgs),
    /// Obey the repository's own config (`.ocflow/ocflow.toml`) in full from now on: its
    /// settings that run code, widen the sandbox or send the key elsewhere are ignored until then.
    Trust(TrustArgs),
    /// The failure memory of this repository: past failures and what ended them, recalled
    /// before planning and recovery (`list`, `show ID`, `forget ID`, `forget --all`).
    Memory(MemoryArgs),
    /// Run a complete flow on a bundled sample repository with recorded LLM answers
    /// (no network, no key).
    Demo,
    /// Say what this machine gives ocflow — Python and the library, syntax-check grammars,
    /// bubblewrap, namespaces, overlays, Landlock, cgroups, the key's source, the endpoint and
    /// model (one tiny request) — each with its fix (exit 1 when something essential fails).
    Doctor,
    /// List the operations a flow may use: the built-in ones and the plugin operations of the
    /// configured plugin folders and installed packages (exit 1 when a plugin failed to load
    /// or a role names an operation that does not exist).
    Operations,
    /// Print the OpenHands skill that teaches an agent to call ocflow; `--install DIR` puts it
    /// where OpenHands reads skills (`DIR/.agents/skills/ocflow/SKILL.md`).
    Skill(SkillArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell):
    /// `ocflow completions bash > ~/.local/share/bash-completion/completions/ocflow`.
    Completions(CompletionsArgs),
    /// Print the manual page (roff): `ocflow man | man -l -`.
    Man,
    /// Serve ocflow's tools over MCP on stdio (ocflow_plan, ocflow_run, ocflow_status,
    /// ocflow_diff, ocflow_apply, ocflow_approve) for agents such as OpenHands; flows run in the
    /// background.
    Mcp,
    /// Serve ocflow as an Agent Client Protocol agent on stdio, for editors (Zed, JetBrains) and
    /// headless ACP clients: a prompt becomes a flow shown as a plan and tool calls; its changes
    /// are applied when the person allows it.
    Acp(AcpArgs),
    /// (internal) Run a command in the sandbox: write access only beneath the --write paths.
    #[command(hide = true)]
    SandboxExec(Box<ocflow_sandbox::SandboxArgs>),
}

#[derive(Debug, Args)]
pub(crate) struct BatchArgs {
    /// The tasks: one JSON object a line, {"id": "...", "task": "...", "repo": "path"} with
    /// optional "plan" (a flow file), "model" and "base_url"; relative paths are taken from
    /// the file's directory.
    #[arg(value_name = "TASKS.jsonl")]
    pub(crate) tasks: PathBuf,
    /// Where the batch keeps its results, summary, logs and the flows' task directories.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: PathBuf,
    #[command(flatten)]
    pub(crate) fleet: FleetArgs,
    /// After the batch, apply each succeeded flow to its repository (all or nothing, refusing
    /// a repository that changed); otherwise they wait for review (`ocflow list --all`).
    #[arg(long)]
    pub(crate) apply: bool,
    /// After the batch, commit each succeeded flow on a new branch of its repository,
    /// PREFIX/ID (`apply --branch`: working trees untouched; a pull request's description in
    /// each task directory).
    #[arg(long, value_name = "PREFIX", conflicts_with = "apply")]
    pub(crate) branches: Option<String>,
    /// Global flags handed on to every flow (`--model`, `--codex-lib`, `--python-dir`).
    #[arg(skip)]
    pub(crate) forwarded: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub(crate) struct EvalArgs {
    /// The suite: TASKS.jsonl's lines, each with "check", the command that says whether the
    /// task is solved (e.g. "python3 -m pytest -q tests"), never shown to the model, and
    /// optionally "files", what the model alone is shown; or a directory of Exercism exercises
    /// (Python or JavaScript: .docs/instructions.md, .meta/config.json, a stub, its tests); or
    /// SWE-bench instances (instance_id, repo, base_commit, problem_statement, test_command),
    /// which also give DIR/predictions.jsonl for the official harness.
    #[arg(value_name = "SUITE.jsonl|DIR")]
    pub(crate) suite: PathBuf,
    /// Where the eval keeps its results, summary, checks' logs and the flows (DIR/flows).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: PathBuf,
    /// Seconds each check may run before it is stopped (and the task not solved).
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub(crate) check_timeout: u64,
    /// Let the flows recall and write the failure memory (off for scoring: a task solved by
    /// what an earlier task of the suite taught is not the model's).
    #[arg(long)]
    pub(crate) memory: bool,
    /// Ask the model alone too, beside the flows: the same model and endpoint, once per task
    /// with the task and its files (the line's "files", else those the task names), every
    /// changed file whole, then once more with the check's output (DIR/baseline.jsonl).
    #[arg(long)]
    pub(crate) baseline: bool,
    /// After the flows, commit each succeeded one on a new branch of its repository,
    /// PREFIX/ID (as `batch --branches`: working trees untouched, a pull request's description
    /// in each task directory), for review whatever its score.
    #[arg(long, value_name = "PREFIX")]
    pub(crate) branches: Option<String>,
    #[command(flatten)]
    pub(crate) fleet: FleetArgs,
    /// Global flags handed on to every flow (`--model`, `--codex-lib`, `--python-dir`).
    #[arg(skip)]
    pub(crate) forwarded: Vec<std::ffi::OsString>,
}

/// How a fleet of flows runs: `batch`'s and `eval`'s.
#[derive(Debug, Clone, Args)]
pub(crate) struct FleetArgs {
    /// Flows at once [default: --max-llm-requests, else the number of cores].
    #[arg(long, value_name = "M")]
    pub(crate) flows: Option<usize>,
    /// Steps each flow runs at once (as `run --jobs`).
    #[arg(long, value_name = "N")]
    pub(crate) jobs: Option<usize>,
    /// LLM requests in flight across the whole batch at most, per endpoint [default: no cap].
    #[arg(long, value_name = "K")]
    pub(crate) max_llm_requests: Option<usize>,
    /// Where the flows run: child processes here, or Ray tasks on a cluster.
    #[arg(long, value_enum, default_value_t = Engine::Local)]
    pub(crate) engine: Engine,
    /// The Ray cluster (`auto`: the one `ray start` began on this machine).
    #[arg(long, value_name = "ADDR", default_value = "auto")]
    pub(crate) ray_address: String,
    /// The budget of each flow: a flow that reaches it pauses, and running the batch again with
    /// a higher one resumes it.
    #[command(flatten)]
    pub(crate) budget: BudgetArgs,
    /// Flows neither recall nor write the failure memory (as `run --no-memory`).
    #[arg(long)]
    pub(crate) no_memory: bool,
}

/// A flow's budget, declared once: the flags of `run`, `resume`, `demo` and every flow of a
/// `batch`, a config file's `[budget]` (`budget::strict`) and the parameters of MCP's
/// `ocflow_run` (its doc comments are their descriptions); `child_command::budget_flags` hands
/// it on to a flow's command line.
#[derive(Debug, Default, Clone, Args, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct BudgetArgs {
    /// Tokens the flow may use (planning, steps, recovery, the summary; every model): it
    /// pauses (exit 3) before a call would exceed them.
    #[arg(long, value_name = "N")]
    #[serde(default)]
    pub(crate) max_tokens: Option<u64>,
    /// US dollars the flow may cost, by the price table (`price_per_mtok_in/out` of a profile,
    /// or `[prices]`): it pauses (exit 3) before a call would exceed them.
    #[arg(long, value_name = "USD", value_parser = parse_cost)]
    #[serde(default, deserialize_with = "cost")]
    pub(crate) max_cost: Option<f64>,
    /// How long the flow may run, across resumes ("90s", "5m", "1h30m"): then it pauses
    /// (exit 3), cancelling the model's calls in flight.
    #[arg(long, value_name = "DURATION", value_parser = ocflow_model::budget::parse_duration)]
    #[serde(default, deserialize_with = "duration")]
    #[schemars(with = "Option<String>")]
    pub(crate) max_time: Option<std::time::Duration>,
    /// Calls to the model the flow may make (planning, steps, recovery, the summary; every
    /// model): it pauses (exit 3) before one more.
    #[arg(long, value_name = "N")]
    #[serde(default)]
    pub(crate) max_calls: Option<u64>,
}

impl BudgetArgs {
    /// The names of its keys, as `[budget]` and MCP take them.
    pub(crate) const KEYS: [&str; 4] = ["max_tokens", "max_cost", "max_time", "max_calls"];
}

/// `max_cost` outside the command line: a positive number of US dollars, as `--max-cost`.
fn cost<'de, D: serde::Deserializer<'de>>(from: D) -> Result<Option<f64>, D::Error> {
    let usd = <Option<f64> as serde::Deserialize>::deserialize(from)?;
    usd.map(|usd| parse_cost(&usd.to_string()))
        .transpose()
        .map_err(serde::de::Error::custom)
}

/// `max_time` outside the command line: a duration as `--max-time` takes it.
fn duration<'de, D: serde::Deserializer<'de>>(
    from: D,
) -> Result<Option<std::time::Duration>, D::Error> {
    let text = <Option<String> as serde::Deserialize>::deserialize(from)?;
    text.as_deref()
        .map(ocflow_model::budget::parse_duration)
        .transpose()
        .map_err(serde::de::Error::custom)
}

/// Where `ocflow batch` runs its flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Engine {
    /// Child processes of this ocflow, on this machine.
    Local,
    /// One Ray task per flow (needs `pip install ray` in $VIRTUAL_ENV or python3).
    Ray,
}

#[derive(Debug, Args)]
pub(crate) struct CleanArgs {
    /// Tasks to remove (ids, their beginnings, or task directories), whatever their state, unless
    /// their ocflow still runs [default: every finished task you are done with].
    pub(crate) tasks: Vec<String>,
    /// Only tasks whose last change is older than this (90m, 12h, 7d…).
    #[arg(long, value_name = "DURATION", value_parser = ocflow_model::budget::parse_duration)]
    pub(crate) older_than: Option<std::time::Duration>,
    /// Remove succeeded tasks whose changes were never applied too (kept otherwise: `ocflow
    /// apply` still writes them).
    #[arg(long)]
    pub(crate) unapplied: bool,
    /// Remove resumable tasks too: interrupted, paused by a budget, waiting for an approval.
    #[arg(long)]
    pub(crate) unfinished: bool,
    /// Say what would be removed and how much it would free; remove nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// Every repository's recent tasks, from the user's task index.
    #[arg(long)]
    pub(crate) all: bool,
}

#[derive(Debug, Args)]
pub(crate) struct WaitArgs {
    /// Task id or task directory [default: the most recent flow].
    pub(crate) task: Option<String>,
    /// Give up waiting after this many seconds (exit 124; the flow goes on).
    #[arg(long, value_name = "SECONDS")]
    pub(crate) timeout: Option<f64>,
}

#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    pub(crate) shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub(crate) struct SkillArgs {
    /// The repository or workspace OpenHands opens (the agent's starting directory is `.`).
    #[arg(long, value_name = "DIR")]
    pub(crate) install: Option<PathBuf>,
    /// Replace a SKILL.md that differs from ocflow's (the old one is kept as SKILL.md.bak).
    #[arg(long, requires = "install")]
    pub(crate) force: bool,
}

#[derive(Debug, Args)]
pub(crate) struct MemoryArgs {
    #[command(subcommand)]
    pub(crate) action: MemoryAction,
}

#[derive(Debug, Subcommand)]
pub(crate) enum MemoryAction {
    /// The failures remembered of this repository, newest first.
    List,
    /// One remembered failure: its error lines, the strategy that followed, how it ended.
    Show {
        /// The memory's id, as `list` shows it.
        id: i64,
    },
    /// Forget one remembered failure, or with `--all` every one of this repository.
    Forget {
        /// The memory's id, as `list` shows it.
        #[arg(required_unless_present = "all")]
        id: Option<i64>,
        /// Every failure remembered of this repository.
        #[arg(long, conflicts_with = "id")]
        all: bool,
    },
}

#[derive(Debug, Args)]
pub(crate) struct TrustArgs {
    /// Stop trusting the repository.
    #[arg(long)]
    pub(crate) revoke: bool,
}

#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    /// The task, in words; `-` reads it from stdin.
    #[arg(required_unless_present = "task_file")]
    pub(crate) task: Option<String>,
    /// Read the task from FILE.
    #[arg(long, value_name = "FILE", conflicts_with = "task")]
    pub(crate) task_file: Option<PathBuf>,
    /// Id of the task directory where the planner's answers are kept
    /// [default: the task's first word and three letters, e.g. refactor-k7m].
    #[arg(long, value_name = "ID")]
    pub(crate) task_id: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The task, in words; `-` reads it from stdin.
    pub(crate) task: Option<String>,
    /// Read the task from FILE.
    #[arg(long, value_name = "FILE", conflicts_with = "task")]
    pub(crate) task_file: Option<PathBuf>,
    /// Execute this flow file instead of planning.
    #[arg(long, value_name = "FLOW.json")]
    pub(crate) plan: Option<PathBuf>,
    /// Id of the task directory [default: the task's first word and three letters, e.g.
    /// refactor-k7m; any unique prefix names it later].
    #[arg(long, value_name = "ID")]
    pub(crate) task_id: Option<String>,
    /// Apply the changes to the repository when the flow succeeds.
    #[arg(long)]
    pub(crate) apply: bool,
    /// Run the flow in the background, in a session of its own (a closed terminal does not
    /// stop it): print the task id (`flow_started` with --json) and return; its output goes to
    /// `detached.log` in the task directory. `ocflow wait ID` waits for its end.
    #[arg(long)]
    pub(crate) detach: bool,
    /// (internal) Where a detached run writes its exit code when it ends.
    #[arg(long, hide = true, value_name = "FILE")]
    pub(crate) exit_code_file: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) limits: LimitArgs,
}

#[derive(Debug, Default, Args)]
pub(crate) struct LimitArgs {
    /// Steps run at the same time at most; 1 runs them one after another [default: 4].
    #[arg(long, value_name = "N")]
    pub(crate) jobs: Option<usize>,
    /// Default time limit of a command step, in seconds (a step's timeout_seconds wins)
    /// [default: 600].
    #[arg(long, value_name = "SECONDS")]
    pub(crate) step_timeout: Option<u64>,
    /// Most bytes of each output stream a command step keeps [default: 1048576].
    #[arg(long, value_name = "BYTES")]
    pub(crate) max_output_bytes: Option<u64>,
    /// Let LLM-proposed commands be destructive (rm -rf ~, git reset --hard…); refused otherwise.
    #[arg(long)]
    pub(crate) allow_destructive: bool,
    /// Do not ask the LLM for a recovery strategy when a step fails: stop the flow.
    #[arg(long)]
    pub(crate) no_recovery: bool,
    /// Neither recall nor write the failure memory (past failures on this repository and what
    /// ended them; `ocflow memory` shows it).
    #[arg(long)]
    pub(crate) no_memory: bool,
    /// No reflection call at the end of a flow that needed recovery (its lesson goes into
    /// summary.md and the failure memory).
    #[arg(long)]
    pub(crate) no_reflect: bool,
    /// Ask before going on (repeatable, or comma-separated): `plan` shows the plan and waits
    /// for yes / no / edit; `risky` asks before a command the policy flags or a recovery that
    /// replans; `apply` asks before `--apply` writes the changes. Headless (`--json`, no
    /// terminal) the flow waits (exit 3) for `ocflow approve ID` or `ocflow reject ID`.
    #[arg(long, value_name = "WHAT", value_delimiter = ',')]
    pub(crate) approve: Vec<ApproveWhat>,
    /// Run command steps without the sandbox — no namespaces, Landlock or limits (they can then
    /// write anywhere you can).
    #[arg(long)]
    pub(crate) no_sandbox: bool,
    /// The flow's budget.
    #[command(flatten)]
    pub(crate) budget: BudgetArgs,
}

/// `--max-cost`: a positive number of US dollars.
fn parse_cost(text: &str) -> Result<f64, String> {
    match text.trim().trim_start_matches('$').parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd > 0.0 => Ok(usd),
        _ => Err(format!(
            "{text:?} is not an amount of US dollars: write it like 0.50 or 2"
        )),
    }
}

#[derive(Debug, Args)]
pub(crate) struct AcpArgs {
    /// Put these to the person through the client's permission requests too (repeatable, or
    /// comma-separated): `plan` before a flow runs its plan, `risky` before a command the
    /// policy flags or a recovery that replans. The changes are always put to them before
    /// they are applied.
    #[arg(long, value_name = "WHAT", value_delimiter = ',', value_parser = ["plan", "risky"])]
    pub(crate) approve: Vec<String>,
}

/// What `--approve` asks a person about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ApproveWhat {
    Plan,
    Risky,
    Apply,
}

#[derive(Debug, Args)]
pub(crate) struct ApproveArgs {
    /// Task id or task directory of the waiting flow.
    pub(crate) task: String,
    /// (internal) The answer came through MCP's ocflow_approve (so the journal says).
    #[arg(long, hide = true)]
    pub(crate) via_mcp: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RejectArgs {
    /// Task id or task directory of the waiting flow.
    pub(crate) task: String,
    /// Why, kept in the journal and the status.
    #[arg(long, value_name = "TEXT")]
    pub(crate) reason: Option<String>,
    /// (internal) The answer came through MCP's ocflow_approve (so the journal says).
    #[arg(long, hide = true)]
    pub(crate) via_mcp: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ResumeArgs {
    /// Task id or task directory [default: the most recent unfinished flow].
    pub(crate) task: Option<String>,
    /// Run failed steps again, as they are (otherwise resume reports them and stops).
    #[arg(long)]
    pub(crate) retry_failed: bool,
    /// Ask the LLM for a new recovery strategy for a failed step instead of running it again
    /// as it is.
    #[arg(long, conflicts_with = "retry_failed")]
    pub(crate) recover: bool,
    /// Apply the changes to the repository when the flow succeeds.
    #[arg(long)]
    pub(crate) apply: bool,
    #[command(flatten)]
    pub(crate) limits: LimitArgs,
}

#[derive(Debug, Args)]
pub(crate) struct TaskArg {
    /// Task id or task directory [default: the most recent flow].
    pub(crate) task: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// Task id or task directory [default: the most recent flow].
    pub(crate) task: Option<String>,
    /// Only the changed files with their lines added and removed.
    #[arg(long)]
    pub(crate) stat: bool,
}

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// Task id or task directory [default: the most recent flow].
    pub(crate) task: Option<String>,
    /// Keep showing the status as it changes, until the flow stops (with --json: one JSON
    /// document per line, per change).
    #[arg(long)]
    pub(crate) follow: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ApplyArgs {
    /// Task id or task directory [default: the one succeeded flow not yet applied; with
    /// several, they are listed and nothing is applied].
    pub(crate) task: Option<String>,
    /// Overwrite files that changed in the repository since the flow read them.
    #[arg(long)]
    pub(crate) force: bool,
    /// Apply only this file, or the files below this directory (repeatable).
    #[arg(long, value_name = "PATH")]
    pub(crate) only: Vec<String>,
    /// Leave this file, or the files below this directory, as they are (repeatable).
    #[arg(long, value_name = "PATH")]
    pub(crate) exclude: Vec<String>,
    /// Commit exactly the applied files with git, with a message from the task and its summary.
    #[arg(long)]
    pub(crate) commit: bool,
    /// Instead of writing the files, commit the changes on this new branch (from HEAD), the
    /// working tree and the index untouched; a pull request's description goes beside
    /// (`pull_request.md` in the task directory).
    #[arg(long, value_name = "NAME", conflicts_with = "commit")]
    pub(crate) branch: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct UndoArgs {
    /// Task id or task directory [default: the most recently applied flow].
    pub(crate) task: Option<String>,
    /// Put the files back even where they changed since the apply.
    #[arg(long)]
    pub(crate) force: bool,
}
