//! The command steps' launcher (the `ocflow-sandbox` crate): what runs between the host and a
//! step's command, one file per confinement mechanism — the step's limits (`limits`) and cgroup
//! (`step_cgroup`), the overlay view (`overlay`) and the step's private layers
//! (`private_layers`), bubblewrap's namespaces (`bubblewrap`) or, without them, the socket
//! filter (`socket_filter`), no capability (`capabilities`), then Landlock (`landlock_rules`);
//! `exec` puts them together in order. README.md says what each stops.
//! It depends on nothing else of ocflow, so it builds into `ocflow sandbox-exec` and into
//! `ocflow-sandbox`, a small binary without the embedded Python that starts in a fraction of
//! the time (launchers use it when it is installed beside `ocflow`). Its command line is
//! `args::SandboxArgs`, for both.

mod args;
mod bubblewrap;
pub mod capabilities;
pub mod exec;
mod landlock_rules;
mod limits;
mod overlay;
mod private_layers;
pub mod socket_filter;
pub mod step_cgroup;

use std::io::Write;

pub use args::SandboxArgs;

/// Runs the launcher as `args` ask: reports what the sandbox enforces here (`--probe`), else
/// becomes the command and never returns. Returns the exit code when it could not: 0 after a
/// probe, 126 (as a shell says of a command it cannot run) with the reason on stderr, each
/// message starting with `name`.
pub fn run(name: &str, args: &SandboxArgs) -> u8 {
    let fail = |problem: &str| {
        let _ = writeln!(std::io::stderr(), "{name}: {problem}");
        126
    };
    if args.probe {
        return match exec::probe(args.probe_in.as_deref()) {
            Ok(kind) => {
                let _ = writeln!(std::io::stdout(), "{kind}");
                0
            }
            Err(problem) => fail(&problem.to_string()),
        };
    }
    let Some(caches) = args
        .cache
        .iter()
        .map(|arg| exec::Cache::parse(arg))
        .collect::<Option<Vec<_>>>()
    else {
        return fail("give --cache as VARIABLE:PATH");
    };
    fail(&exec::exec(&exec::ExecRequest {
        writable: &args.write,
        network: args.network,
        bwrap: args.bwrap.as_deref(),
        shared_proc: args.shared_proc,
        memory_mb: args.memory_mb,
        max_processes: args.max_processes,
        inner: args.inner,
        hidden: &args.hide,
        cgroup: args.cgroup.as_deref(),
        refuse_udp: args.refuse_udp,
        overlay: match (&args.overlay_on, &args.overlay_upper, &args.overlay_work) {
            (Some(target), Some(upper), Some(work)) => Some(exec::Overlay {
                target,
                lower: &args.overlay_lower,
                upper,
                work,
            }),
            _ => None,
        },
        caches: &caches,
        cache_overlay: args.cache_overlay,
        private: args.private.as_deref(),
        dependencies: match (&args.dependencies_from, &args.dependencies_into) {
            (Some(from), Some(into))
                if !args.dependency.is_empty() || !args.build_output.is_empty() =>
            {
                Some(exec::Dependencies {
                    from,
                    into,
                    dirs: &args.dependency,
                    build_outputs: &args.build_output,
                    build_layers: args.build_layers.as_deref(),
                })
            }
            _ => None,
        },
        command: &args.command,
    }))
}
