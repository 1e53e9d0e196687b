//! `ocflow-sandbox`: the command steps' launcher, without the embedded Python, so it starts in
//! a fraction of `ocflow`'s time (it runs twice per command step). It takes exactly the
//! arguments of `ocflow sandbox-exec` (which it stands in for) and shares its code.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[path = "../engine/sandbox_exec.rs"]
mod sandbox_exec;
#[path = "../engine/socket_filter.rs"]
mod socket_filter;
// The host's half (ending a step's group) is not the launcher's.
#[allow(dead_code)]
#[path = "../engine/step_cgroup.rs"]
mod step_cgroup;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1).peekable();
    if args.peek().is_some_and(|first| first == "sandbox-exec") {
        args.next();
    }
    let (mut writable, mut network, mut bwrap, mut inner, mut probe) =
        (Vec::new(), false, None, false, false);
    let (mut memory_mb, mut max_processes, mut hidden) = (None, None, Vec::new());
    let (mut cgroup, mut refuse_udp): (Option<String>, bool) = (None, false);
    let (mut target, mut upper, mut work): (Option<PathBuf>, Option<PathBuf>, Option<PathBuf>) =
        (None, None, None);
    let mut lower: Vec<PathBuf> = Vec::new();
    let mut probe_in: Option<PathBuf> = None;
    let (mut dependencies_from, mut dependencies_into, mut dependencies): (
        Option<PathBuf>,
        Option<PathBuf>,
        Vec<PathBuf>,
    ) = (None, None, Vec::new());
    let (mut caches, mut cache_overlay, mut private) = (Vec::new(), false, None);
    let mut command: Vec<OsString> = Vec::new();
    while let Some(arg) = args.next() {
        let number = |value: Option<OsString>| value.and_then(|v| v.to_str()?.parse::<u64>().ok());
        match arg.to_str() {
            Some("--write") => writable.extend(args.next().map(PathBuf::from)),
            Some("--hide") => hidden.extend(args.next().map(PathBuf::from)),
            Some("--bwrap") => bwrap = args.next().map(PathBuf::from),
            Some("--memory-mb") => memory_mb = number(args.next()),
            Some("--max-processes") => max_processes = number(args.next()),
            Some("--network") => network = true,
            Some("--cgroup") => cgroup = args.next().and_then(|v| v.into_string().ok()),
            Some("--refuse-udp") => refuse_udp = true,
            Some("--overlay-on") => target = args.next().map(PathBuf::from),
            Some("--overlay-lower") => lower.extend(args.next().map(PathBuf::from)),
            Some("--overlay-upper") => upper = args.next().map(PathBuf::from),
            Some("--overlay-work") => work = args.next().map(PathBuf::from),
            Some("--cache") => match args.next().as_deref().and_then(sandbox_exec::Cache::parse) {
                Some(cache) => caches.push(cache),
                None => return fail("give --cache as VARIABLE:PATH"),
            },
            Some("--cache-overlay") => cache_overlay = true,
            Some("--private") => private = args.next().map(PathBuf::from),
            Some("--dependencies-from") => dependencies_from = args.next().map(PathBuf::from),
            Some("--dependencies-into") => dependencies_into = args.next().map(PathBuf::from),
            Some("--dependency") => dependencies.extend(args.next().map(PathBuf::from)),
            Some("--inner") => inner = true,
            Some("--probe") => probe = true,
            Some("--probe-in") => probe_in = args.next().map(PathBuf::from),
            Some("--") => command.extend(args.by_ref()),
            _ => return fail(&format!("unknown argument {}", arg.to_string_lossy())),
        }
    }
    if probe {
        return match sandbox_exec::probe(probe_in.as_deref()) {
            Ok(kind) => {
                let _ = writeln!(std::io::stdout(), "{kind}");
                ExitCode::SUCCESS
            }
            Err(problem) => fail(&problem),
        };
    }
    fail(&sandbox_exec::exec(&sandbox_exec::ExecRequest {
        writable: &writable,
        network,
        bwrap: bwrap.as_deref(),
        memory_mb,
        max_processes,
        inner,
        hidden: &hidden,
        cgroup: cgroup.as_deref(),
        refuse_udp,
        overlay: match (&target, &upper, &work) {
            (Some(target), Some(upper), Some(work)) => Some(sandbox_exec::Overlay {
                target,
                lower: &lower,
                upper,
                work,
            }),
            _ => None,
        },
        caches: &caches,
        cache_overlay,
        private: private.as_deref(),
        dependencies: match (&dependencies_from, &dependencies_into) {
            (Some(from), Some(into)) if !dependencies.is_empty() => {
                Some(sandbox_exec::Dependencies {
                    from,
                    into,
                    dirs: &dependencies,
                })
            }
            _ => None,
        },
        command: &command,
    }))
}

/// Says why the command could not be run; exits 126, as a shell does.
fn fail(problem: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "ocflow-sandbox: {problem}");
    ExitCode::from(126)
}
