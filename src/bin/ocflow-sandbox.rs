//! `ocflow-sandbox`: the command steps' launcher without the embedded Python, so it starts in
//! a fraction of `ocflow`'s time (it runs twice per command step). It takes exactly the
//! arguments of `ocflow sandbox-exec`, which it stands in for (`crates/ocflow-sandbox`).

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

/// The launcher's command line: `ocflow sandbox-exec`'s, with or without `sandbox-exec` first
/// (the launcher re-runs itself as `… sandbox-exec --inner`, whichever binary it is).
#[derive(Parser)]
#[command(name = "ocflow-sandbox")]
struct Launcher {
    #[command(flatten)]
    args: ocflow_sandbox::SandboxArgs,
}

fn main() -> ExitCode {
    let mut argv: Vec<OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|first| first == "sandbox-exec") {
        argv.remove(1);
    }
    match Launcher::try_parse_from(argv) {
        Ok(launcher) => ExitCode::from(ocflow_sandbox::run("ocflow-sandbox", &launcher.args)),
        Err(err) if !err.use_stderr() => {
            let _ = err.print();
            ExitCode::SUCCESS
        }
        Err(err) => {
            let _ = err.print();
            ExitCode::from(126)
        }
    }
}
