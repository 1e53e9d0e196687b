//! Commands a killed ocflow left running. Commands run in their own session, so they outlive
//! a `kill -9` of ocflow; on resume, every process that ocflow started for this task (its
//! environment carries the task's marker, inherited by whatever it starts) and that still works
//! inside the task's directory is stopped with its process group before anything else runs.
//! A person's shell sitting in a view has no marker and is left alone.

use std::fs;
use std::path::Path;

use rustix::process::{Pid, Signal, getpgid, kill_process_group};

use crate::task::workspace::TaskDir;

/// The environment variable that marks a command as started for a task.
pub(crate) const MARKER: &str = "OCFLOW_TASK";
/// The environment variable that names the step a command was started for.
pub(crate) const STEP_MARKER: &str = "OCFLOW_STEP";

/// The marker's value: the task directory.
pub(crate) fn marker_value(task: &TaskDir) -> String {
    task.root
        .canonicalize()
        .unwrap_or_else(|_| task.root.clone())
        .to_string_lossy()
        .into_owned()
}

/// Kills the process groups of processes whose working directory is inside the task's
/// directory; returns how many groups were stopped.
pub fn stop(task: &TaskDir) -> usize {
    stop_marked(task, None)
}

/// Kills what one step's command left running after it ended — a daemon that left its process
/// group with `setsid` — where no PID namespace took it down with the step.
pub(crate) fn stop_step(task: &TaskDir, step: &str) -> usize {
    stop_marked(task, Some(&format!("{STEP_MARKER}={step}")))
}

fn stop_marked(task: &TaskDir, step_marker: Option<&str>) -> usize {
    let root = task
        .root
        .canonicalize()
        .unwrap_or_else(|_| task.root.clone());
    let me = std::process::id();
    let marker = format!("{MARKER}={}", marker_value(task));
    let mut groups = std::collections::BTreeSet::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let of_the_step = step_marker.is_none_or(|step| marked(pid, step));
        if pid == me || !works_in(pid, &root) || !marked(pid, &marker) || !of_the_step {
            continue;
        }
        if let Some(group) = Pid::from_raw(pid as i32).and_then(|p| getpgid(Some(p)).ok()) {
            groups.insert(group.as_raw_nonzero().get());
        }
    }
    groups
        .into_iter()
        .filter(|group| *group != rustix::process::getpgrp().as_raw_nonzero().get())
        .filter_map(Pid::from_raw)
        .filter(|group| kill_process_group(*group, Signal::KILL).is_ok())
        .count()
}

fn marked(pid: u32, marker: &str) -> bool {
    fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
        environ
            .split(|b| *b == 0)
            .any(|var| var == marker.as_bytes())
    })
}

fn works_in(pid: u32, dir: &Path) -> bool {
    fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(dir))
}
