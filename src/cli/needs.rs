//! What each subcommand needs before it runs, declared in one exhaustive match: a subcommand
//! added to `args::Command` does not compile until it says what it needs (no `_` arm gives it a
//! default). `lib.rs` and `dispatch.rs` act on the answer.

use crate::cli::args::{Command, LimitArgs};

/// Whether a subcommand works on a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repository {
    /// It starts work on one (`--repo`, else the current directory's).
    Required,
    /// It finds its tasks through `--workspace` when given, else the repository's workspace.
    UnlessWorkspace,
    /// It needs none.
    No,
}

/// The sandbox probe's result, which stops a command before any task is made if the sandbox
/// cannot be set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Waited for before the command runs.
    Before,
    /// Waited for by the command itself, once planned or before its first command step (`run`).
    Later,
    /// Not waited for.
    No,
}

/// Where a subcommand's budget flags come from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Limits<'a> {
    /// Its own flags.
    Given(&'a LimitArgs),
    /// None given: the configuration's (`demo`, `doctor`, which show or run a flow of their own).
    Configured,
    /// It runs no flow.
    No,
}

/// What one subcommand needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Needs<'a> {
    /// It runs before any configuration is resolved: the sandbox launcher, the help files, the
    /// MCP server (each tool runs this binary, which resolves its own), `list --all`.
    pub(crate) early: bool,
    pub(crate) repository: Repository,
    /// The task it names: found from any directory through the user's task index.
    pub(crate) task: Option<&'a str>,
    pub(crate) limits: Limits<'a>,
    /// It plans or validates flows: the operation library's catalogue (its plugins) comes first.
    pub(crate) library: bool,
    /// It reads or changes tasks or the repository: a killed `apply` or `undo` is finished first.
    pub(crate) recovers_applies: bool,
    pub(crate) probe: Probe,
}

impl Needs<'_> {
    /// A subcommand that runs before the configuration: it needs nothing of it.
    const EARLY: Needs<'static> = Needs {
        early: true,
        repository: Repository::No,
        task: None,
        limits: Limits::No,
        library: false,
        recovers_applies: false,
        probe: Probe::No,
    };
    /// A subcommand that reads a task: found by its id, a killed apply finished first.
    fn reading(task: Option<&str>) -> Needs<'_> {
        Needs {
            early: false,
            repository: Repository::UnlessWorkspace,
            task,
            limits: Limits::No,
            library: false,
            recovers_applies: true,
            probe: Probe::No,
        }
    }
    /// A subcommand that needs the configuration only.
    const CONFIGURED: Needs<'static> = Needs {
        early: false,
        repository: Repository::No,
        task: None,
        limits: Limits::No,
        library: false,
        recovers_applies: false,
        probe: Probe::No,
    };
}

impl Command {
    /// What this subcommand needs before it runs.
    pub(crate) fn needs(&self) -> Needs<'_> {
        match self {
            Command::SandboxExec(_)
            | Command::Completions(_)
            | Command::Man
            | Command::Mcp
            | Command::Acp(_) => Needs::EARLY,
            Command::List(args) if args.all => Needs::EARLY,
            Command::List(_) | Command::Clean(_) => Needs::reading(None),
            // A waiting flow is answered by its id from anywhere (a fresh agent conversation).
            Command::Reject(args) => Needs::reading(Some(&args.task)),
            Command::Status(args) => Needs::reading(args.task.as_deref()),
            Command::Diff(args) => Needs::reading(args.task.as_deref()),
            Command::Report(args) => Needs::reading(args.task.as_deref()),
            Command::Apply(args) => Needs::reading(args.task.as_deref()),
            Command::Undo(args) => Needs::reading(args.task.as_deref()),
            Command::Wait(args) => Needs::reading(args.task.as_deref()),
            Command::Resume(args) => Needs {
                limits: Limits::Given(&args.limits),
                library: true,
                probe: Probe::Before,
                ..Needs::reading(args.task.as_deref())
            },
            Command::Approve(args) => Needs {
                library: true,
                probe: Probe::Before,
                ..Needs::reading(Some(&args.task))
            },
            Command::Run(args) => Needs {
                repository: Repository::Required,
                limits: Limits::Given(&args.limits),
                library: true,
                recovers_applies: true,
                probe: Probe::Later,
                ..Needs::CONFIGURED
            },
            Command::Plan(_) => Needs {
                repository: Repository::Required,
                library: true,
                probe: Probe::Before,
                ..Needs::CONFIGURED
            },
            Command::Trust(_) | Command::Memory(_) => Needs {
                repository: Repository::Required,
                ..Needs::CONFIGURED
            },
            Command::Demo => Needs {
                limits: Limits::Configured,
                library: true,
                probe: Probe::Before,
                ..Needs::CONFIGURED
            },
            Command::Doctor => Needs {
                limits: Limits::Configured,
                ..Needs::CONFIGURED
            },
            Command::Batch(_) | Command::Eval(_) | Command::Skill(_) | Command::Operations => {
                Needs::CONFIGURED
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::Cli;
    use clap::Parser;

    /// Every subcommand parses from a command line a user would type, and needs what it says.
    #[test]
    fn each_subcommand_parses_and_says_what_it_needs() {
        use Probe as P;
        use Repository as R;
        // (command line, early, repository, task, library, recovers applies, probe)
        type Row = (&'static str, bool, R, Option<&'static str>, bool, bool, P);
        // T, F: true, false; the repository Required (REQ), UnlessWorkspace (WS) or No (NO).
        const T: bool = true;
        const F: bool = false;
        const REQ: R = R::Required;
        const WS: R = R::UnlessWorkspace;
        const NO: R = R::No;
        #[rustfmt::skip]
        let table: &[Row] = &[
            ("run fix-it",                      F, REQ, None,       T, T, P::Later),
            ("run --plan flow.json",            F, REQ, None,       T, T, P::Later),
            ("plan fix-it",                     F, REQ, None,       T, F, P::Before),
            ("resume t1 --max-tokens 9",        F, WS,  Some("t1"), T, T, P::Before),
            ("approve t1",                      F, WS,  Some("t1"), T, T, P::Before),
            ("reject t1 --reason no",           F, WS,  Some("t1"), F, T, P::No),
            ("status t1",                       F, WS,  Some("t1"), F, T, P::No),
            ("status",                          F, WS,  None,       F, T, P::No),
            ("list",                            F, WS,  None,       F, T, P::No),
            ("clean --dry-run t1",              F, WS,  None,       F, T, P::No),
            ("list --all",                      T, NO,  None,       F, F, P::No),
            ("diff t1",                         F, WS,  Some("t1"), F, T, P::No),
            ("wait t1",                         F, WS,  Some("t1"), F, T, P::No),
            ("report t1",                       F, WS,  Some("t1"), F, T, P::No),
            ("apply t1",                        F, WS,  Some("t1"), F, T, P::No),
            ("undo t1",                         F, WS,  Some("t1"), F, T, P::No),
            ("batch tasks.jsonl --out results", F, NO,  None,       F, F, P::No),
            ("trust",                           F, REQ, None,       F, F, P::No),
            ("memory list",                     F, REQ, None,       F, F, P::No),
            ("demo",                            F, NO,  None,       T, F, P::Before),
            ("doctor",                          F, NO,  None,       F, F, P::No),
            ("operations",                      F, NO,  None,       F, F, P::No),
            ("skill",                           F, NO,  None,       F, F, P::No),
            ("completions bash",                T, NO,  None,       F, F, P::No),
            ("man",                             T, NO,  None,       F, F, P::No),
            ("mcp",                             T, NO,  None,       F, F, P::No),
            ("acp --approve plan",              T, NO,  None,       F, F, P::No),
        ];
        for (line, early, repository, task, library, recovers, probe) in table {
            let argv = std::iter::once("ocflow").chain(line.split_whitespace());
            let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{line}: {e}"));
            let needs = cli.command.needs();
            assert_eq!(
                (
                    needs.early,
                    needs.repository,
                    needs.task,
                    needs.library,
                    needs.recovers_applies,
                    needs.probe
                ),
                (*early, *repository, *task, *library, *recovers, *probe),
                "{line}"
            );
        }
    }
}
