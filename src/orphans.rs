//! Commands a killed ocflow left running. The library keeps each running command's
//! process-group id in `<step>/.command.pgid`; on resume, a group that is still there and
//! still works in this task's view is killed before anything else runs in the view.

use std::fs;
use std::path::Path;

use rustix::process::{Pid, Signal, kill_process_group};

use crate::workspace::TaskDir;

/// The file the library writes while a command runs (see `open_codex_lib.commands`).
const PGID_FILE: &str = ".command.pgid";

/// Kills the leftover command of each of `steps`, if any; returns the steps that had one.
pub fn stop(task: &TaskDir, steps: &[String]) -> Vec<String> {
    let mut stopped = Vec::new();
    let views = &task.root;
    for step in steps {
        let file = task.step_dir(step).join(PGID_FILE);
        let Some(pgid) = fs::read_to_string(&file).ok().and_then(|text| text.trim().parse::<i32>().ok()) else { continue };
        // After a reboot the number may belong to another process: only a process working in
        // this task's directory (its views) is ours.
        if works_in(pgid, views)
            && let Some(pid) = Pid::from_raw(pgid)
            && kill_process_group(pid, Signal::KILL).is_ok()
        {
            stopped.push(step.clone());
        }
        let _ = fs::remove_file(&file);
    }
    stopped
}

fn works_in(pid: i32, dir: &Path) -> bool {
    let Ok(cwd) = fs::read_link(format!("/proc/{pid}/cwd")) else { return false };
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    cwd.starts_with(&dir)
}
