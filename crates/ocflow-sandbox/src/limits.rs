//! A step's resource limits, set by its launcher before anything else: no core dump, its
//! memory, and its cgroup.

/// The limits: the step's cgroup (`step_cgroup.rs`: its processes, its memory as a whole, and
/// everything it starts kept for the host to kill at the step's end) where one can be made,
/// and `RLIMIT_DATA` for each process in any case. Not `RLIMIT_NPROC`: it counts every process
/// and thread of the user (a desktop's browser included), so a step would fail for what
/// others run, and root ignores it.
pub(crate) fn limit_resources(
    memory_mb: Option<u64>,
    max_processes: Option<u64>,
    cgroup: Option<&str>,
) -> Result<(), String> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    // No core dump, soft and hard, so no command can raise it: a crashing command's memory
    // (what it read, the files it held) would land as `core` in the view, be taken for a
    // change of the flow's, and reach the diff, the apply and a recovery's prompt.
    let none = Rlimit {
        current: Some(0),
        maximum: Some(0),
    };
    setrlimit(Resource::Core, none).map_err(|err| format!("cannot turn core dumps off: {err}"))?;
    if let Some(mb) = memory_mb {
        let bytes = mb.saturating_mul(1024 * 1024);
        let limit = Rlimit {
            current: Some(bytes),
            maximum: Some(bytes),
        };
        setrlimit(Resource::Data, limit).map_err(|err| format!("cannot limit memory: {err}"))?;
    }
    // The host names a group only where its probe could join one, and then says the limits
    // hold per step: a group it named that cannot be joined stops the command. Without a
    // name (no cgroup here), the step runs with the rlimit alone, and results say so.
    match cgroup {
        Some(name) => crate::step_cgroup::Hierarchies::find()
            .join(name, max_processes, memory_mb)
            .map_err(|err| err.to_string()),
        None => Ok(()),
    }
}
