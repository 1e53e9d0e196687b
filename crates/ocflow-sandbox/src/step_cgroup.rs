//! A command step's cgroup: every process a step starts — a double-forked daemon that cleared
//! its environment and left the step's directory included — stays in it, so the step's end
//! can kill them all, and its limits hold for the step as a whole: at most so many processes
//! (`pids`), so much memory (`memory`) for all of them together.
//!
//! The launcher (`sandbox_exec.rs`) makes the group, named by the host, and moves itself into
//! it before it becomes the command; the host kills what is left in it when the step ends
//! (`end`). On cgroup v2 the groups live in `/sys/fs/cgroup/ocflow`, with the `pids` and
//! `memory` controllers enabled (root only); on v1 in `ocflow/` beneath the process's own
//! group of each controller's hierarchy, so limits set above ocflow still hold. Where neither
//! can be made (an unprivileged user without a delegated subtree), steps run with rlimits
//! alone and results say so. Like `sandbox_exec.rs`, this file depends on nothing else of
//! ocflow: the small launcher compiles it too.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where cgroups are mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// A step group this process could not join, with its limits (the host's probe joined one,
/// so the limits it promised would not hold: the launcher stops the command).
#[derive(Debug, thiserror::Error)]
#[error("cannot join the step's cgroup {}", group.display())]
pub struct JoinError {
    /// The group's directory in the hierarchy that refused it.
    pub group: PathBuf,
}

/// The directories ocflow makes step groups in, one per controller it found usable (on v2
/// the same directory for both).
#[derive(Debug, Clone, Default)]
pub struct Hierarchies {
    pids: Option<PathBuf>,
    memory: Option<PathBuf>,
    /// A cgroup v2 directory where groups can be made even without controllers (a container's
    /// own cgroup namespace, whose root holds processes, cannot enable them): a group there
    /// limits nothing but still holds everything a step started, to be killed at its end.
    ends: Option<PathBuf>,
}

/// What a step's group told at its end.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ended {
    /// The kernel killed a process of the step for going over the step's memory limit.
    pub out_of_memory: bool,
}

impl Hierarchies {
    /// Finds the hierarchies here and makes ocflow's directory in each.
    pub fn find() -> Hierarchies {
        let root = Path::new(CGROUP_ROOT);
        if root.join("cgroup.controllers").is_file() {
            return find_v2(root);
        }
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let base = |controller: &str| -> Option<PathBuf> {
            // Lines are `ID:CONTROLLERS:PATH`, the controllers separated by commas.
            let path = own.lines().find_map(|line| {
                let mut fields = line.splitn(3, ':');
                let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
                controllers
                    .split(',')
                    .any(|c| c == controller)
                    .then_some(path)
            })?;
            let mount = root.join(controller);
            let dir = mount.join(path.trim_start_matches('/')).join("ocflow");
            (mount.join("cgroup.procs").is_file() && std::fs::create_dir_all(&dir).is_ok())
                .then_some(dir)
        };
        let pids = base("pids");
        // The hybrid layout's v2 hierarchy, to end steps where no `pids` one can be used.
        let unified = root.join("unified");
        let ends = if pids.is_none() && unified.join("cgroup.procs").is_file() {
            find_v2(&unified).ends
        } else {
            None
        };
        Hierarchies {
            pids,
            memory: base("memory"),
            ends,
        }
    }

    /// Hierarchies at `dir`: every controller there (`pids`, `memory`) or none. For tests (here
    /// and in the host's), which point it at a directory of their own.
    pub fn at(dir: &Path, controllers: bool) -> Hierarchies {
        Hierarchies {
            pids: controllers.then(|| dir.to_path_buf()),
            memory: controllers.then(|| dir.to_path_buf()),
            ends: Some(dir.to_path_buf()),
        }
    }

    /// Whether everything a step started can be killed at its end (though perhaps not
    /// counted or limited).
    pub fn ends_steps(&self) -> bool {
        self.pids.is_some() || self.ends.is_some()
    }

    /// Whether a step's processes can be counted and limited (and so all killed at its end).
    pub fn has_pids(&self) -> bool {
        self.pids.is_some()
    }

    /// Whether a step's memory can be limited as a whole.
    pub fn has_memory(&self) -> bool {
        self.memory.is_some()
    }

    /// Makes the step's group `name` (or finds it, for the step's next command) with these
    /// limits, and moves this process into it; an error names the hierarchy it could not join
    /// (the host, which found the same hierarchies, says the limits hold per step).
    pub fn join(
        &self,
        name: &str,
        max_processes: Option<u64>,
        memory_mb: Option<u64>,
    ) -> Result<(), JoinError> {
        let pids = self.pids.as_ref().is_none_or(|base| {
            sweep(base);
            let group = base.join(name);
            std::fs::create_dir_all(&group).is_ok()
                && max_processes.is_none_or(|max| write(&group, "pids.max", &max.to_string()))
                && write(&group, "cgroup.procs", "0")
        });
        let memory = self.memory.as_ref().is_none_or(|base| {
            if Some(base) != self.pids.as_ref() {
                sweep(base);
            }
            let group = base.join(name);
            let set = |bytes: u64| {
                if group.join("memory.max").is_file() {
                    // v2; swap counts separately there, and a step gets none of it.
                    write(&group, "memory.max", &bytes.to_string())
                        && (!group.join("memory.swap.max").is_file()
                            || write(&group, "memory.swap.max", "0"))
                } else {
                    // v1: memory first, then memory and swap together, where swap is counted.
                    write(&group, "memory.limit_in_bytes", &bytes.to_string())
                        && (!group.join("memory.memsw.limit_in_bytes").is_file()
                            || write(&group, "memory.memsw.limit_in_bytes", &bytes.to_string()))
                }
            };
            std::fs::create_dir_all(&group).is_ok()
                && memory_mb.is_none_or(|mb| set(mb.saturating_mul(1024 * 1024)))
                && write(&group, "cgroup.procs", "0")
        });
        // A group that only holds the step, where neither controller could be used.
        let held = self.ends.as_ref().is_none_or(|base| {
            if self.pids.is_some() || self.memory.is_some() {
                return true;
            }
            sweep(base);
            let group = base.join(name);
            std::fs::create_dir_all(&group).is_ok() && write(&group, "cgroup.procs", "0")
        });
        let failed = |base: &Option<PathBuf>| JoinError {
            group: base.as_ref().map(|b| b.join(name)).unwrap_or_default(),
        };
        match (pids, memory, held) {
            (true, true, true) => Ok(()),
            (false, _, _) => Err(failed(&self.pids)),
            (true, false, _) => Err(failed(&self.memory)),
            (true, true, false) => Err(failed(&self.ends)),
        }
    }

    /// Kills every process left in the step's group `name` and removes the group.
    pub fn end(&self, name: &str) -> Ended {
        let mut ended = Ended::default();
        for base in self.dirs() {
            let group = base.join(name);
            if !group.is_dir() {
                continue;
            }
            kill_all(&group);
            ended.out_of_memory |= oom_kills(&group) > 0;
            remove(&group);
        }
        ended
    }

    /// Ends every group this process (the host, by its pid) made, as a flow ends: what an
    /// interrupted step left running goes with it.
    pub fn end_all_of_this_process(&self) {
        let prefix = format!("{}.", std::process::id());
        for base in self.dirs() {
            for entry in std::fs::read_dir(base).into_iter().flatten().flatten() {
                if entry.file_name().to_string_lossy().starts_with(&prefix) {
                    kill_all(&entry.path());
                    remove(&entry.path());
                }
            }
        }
    }

    /// Ends the groups a killed ocflow left for the task at `task` (their host is gone): on
    /// `resume`, before anything runs again. Returns how many still held processes.
    pub fn end_left_for(&self, task: &Path) -> usize {
        let mut ended = std::collections::BTreeSet::new();
        let hash = task_hash(task);
        for base in self.dirs() {
            for entry in std::fs::read_dir(base).into_iter().flatten().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let mut parts = name.splitn(3, '.');
                let (Some(owner), Some(of_task)) = (parts.next(), parts.next()) else {
                    continue;
                };
                let gone = owner
                    .parse::<u32>()
                    .is_ok_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
                if gone && of_task == hash {
                    if kill_all(&entry.path()) {
                        ended.insert(name);
                    }
                    remove(&entry.path());
                }
            }
        }
        ended.len()
    }

    fn dirs(&self) -> Vec<&PathBuf> {
        let mut dirs: Vec<&PathBuf> = [&self.pids, &self.memory, &self.ends]
            .into_iter()
            .flatten()
            .collect();
        dirs.sort();
        dirs.dedup();
        dirs
    }
}

/// The name of a step's group: the host's pid first (so leftovers of a host that is gone can
/// be told), then the task and the step.
pub fn name(task: &Path, step: &str) -> String {
    format!("{}.{}.{step}", std::process::id(), task_hash(task))
}

/// The task's part of a group's name: its directory, resolved and hashed, so that `resume`
/// finds the groups a killed run left.
fn task_hash(task: &Path) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    task.canonicalize()
        .unwrap_or_else(|_| task.to_path_buf())
        .hash(&mut hasher);
    format!("{:08x}", hasher.finish() as u32)
}

/// cgroup v2: `/sys/fs/cgroup/ocflow` with the `pids` and `memory` controllers enabled for
/// its children (the root's children must have them first), or without them, only to end
/// steps.
fn find_v2(root: &Path) -> Hierarchies {
    let base = root.join("ocflow");
    // One at a time: a write naming a controller the kernel lacks enables none of them.
    for controller in ["+pids", "+memory"] {
        let _ = write(root, "cgroup.subtree_control", controller);
    }
    if std::fs::create_dir_all(&base).is_err() {
        return Hierarchies::default();
    }
    for controller in ["+pids", "+memory"] {
        let _ = write(&base, "cgroup.subtree_control", controller);
    }
    let enabled = std::fs::read_to_string(base.join("cgroup.subtree_control")).unwrap_or_default();
    let has = |controller: &str| enabled.split_whitespace().any(|c| c == controller);
    // A directory made before may stand in a hierarchy now mounted read-only: make a group.
    let probe = base.join(format!("probe-{}", std::process::id()));
    let writable = std::fs::create_dir(&probe).is_ok() && std::fs::remove_dir(&probe).is_ok();
    Hierarchies {
        pids: (writable && has("pids")).then(|| base.clone()),
        memory: (writable && has("memory")).then(|| base.clone()),
        ends: writable.then_some(base),
    }
}

fn write(dir: &Path, file: &str, value: &str) -> bool {
    std::fs::write(dir.join(file), value).is_ok()
}

/// Kills every process in `group` until none is left: a process may fork between the reading
/// and the killing, so the group is read again (its `pids.max` bounds how often). Returns
/// whether there was any.
fn kill_all(group: &Path) -> bool {
    let procs = || std::fs::read_to_string(group.join("cgroup.procs")).unwrap_or_default();
    let held = !procs().trim().is_empty();
    // cgroup v2 (Linux 5.14) kills the whole group at once.
    let _ = write(group, "cgroup.kill", "1");
    for _ in 0..400 {
        let pids: Vec<i32> = procs()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.is_empty() {
            break;
        }
        for pid in pids.into_iter().filter_map(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    held
}

/// How many processes the kernel killed in `group` for its memory limit.
fn oom_kills(group: &Path) -> u64 {
    // v2: `memory.events`; v1: `memory.oom_control` (Linux 4.13); both say `oom_kill N`.
    ["memory.events", "memory.oom_control"]
        .iter()
        .filter_map(|file| std::fs::read_to_string(group.join(file)).ok())
        .flat_map(|text| {
            text.lines()
                .filter_map(|line| line.strip_prefix("oom_kill ")?.trim().parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// Removes an emptied group: the kernel lets it go once its last process has exited.
fn remove(group: &Path) {
    for _ in 0..100 {
        if std::fs::remove_dir(group).is_ok() || !group.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Removes groups whose host is gone (a killed ocflow), killing what they still hold, when
/// they pile up. A group just made and not yet joined must not go: its host is alive.
fn sweep(base: &Path) {
    let groups: Vec<_> = std::fs::read_dir(base)
        .into_iter()
        .flatten()
        .flatten()
        .collect();
    if groups.len() <= 64 {
        return;
    }
    for entry in groups {
        let owner = entry
            .file_name()
            .to_str()
            .and_then(|name| name.split('.').next()?.parse::<u32>().ok());
        if owner.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            kill_all(&entry.path());
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_name_starts_with_its_host_and_tells_tasks_apart() {
        let one = name(Path::new("/w/task-a"), "build");
        let other = name(Path::new("/w/task-b"), "build");
        assert!(one.starts_with(&format!("{}.", std::process::id())));
        assert!(one.ends_with(".build"));
        assert_ne!(one, other);
        assert_eq!(one, name(Path::new("/w/task-a"), "build"));
    }

    /// Each cgroup hierarchy here where a group can be made (root, as in CI): cgroup v2 (a
    /// unified one, or the hybrid layout's `unified/`) kills through `cgroup.kill`, v1 reads
    /// and kills.
    fn writable_hierarchies(test: &str) -> Vec<PathBuf> {
        ["", "unified", "pids"]
            .iter()
            .map(|sub| Path::new(CGROUP_ROOT).join(sub))
            .filter(|dir| dir.join("cgroup.procs").is_file())
            .filter_map(|dir| {
                let group = dir.join(format!("ocflow-unit-{test}-{}", std::process::id()));
                std::fs::create_dir(&group).ok().map(|()| group)
            })
            .collect()
    }

    #[test]
    fn every_process_of_a_group_is_killed_and_the_group_removed() {
        let groups = writable_hierarchies("kill");
        if groups.is_empty() {
            // Without root no hierarchy is writable: then nothing ocflow would claim either.
            assert!(!Hierarchies::find().has_pids() || rustix::process::geteuid().is_root());
            return;
        }
        for group in groups {
            // A shell, moved into the group at once, that leaves a daemon in a session of its
            // own behind it and exits.
            let mut child = std::process::Command::new("sh")
                .args(["-c", "sleep 0.3; setsid sleep 337 </dev/null & exit 0"])
                .spawn()
                .unwrap();
            std::fs::write(group.join("cgroup.procs"), child.id().to_string()).unwrap();
            child.wait().unwrap();
            let procs = || std::fs::read_to_string(group.join("cgroup.procs")).unwrap();
            assert!(!procs().trim().is_empty(), "{}", group.display());
            assert!(kill_all(&group), "{}", group.display());
            assert_eq!(procs().trim(), "", "{}", group.display());
            remove(&group);
            assert!(!group.exists(), "{} was not removed", group.display());
        }
    }

    #[test]
    fn a_v2_hierarchy_without_controllers_still_ends_steps() {
        // The hybrid layout's v2 hierarchy has no controllers (v1 holds them all).
        let unified = Path::new(CGROUP_ROOT).join("unified");
        let groups = writable_hierarchies("v2");
        groups.iter().for_each(|group| remove(group));
        let writable = groups.iter().any(|group| group.starts_with(&unified));
        let found = find_v2(&unified);
        assert_eq!(found.ends_steps(), writable, "{found:?}");
        if writable {
            let controllers = std::fs::read_to_string(unified.join("cgroup.controllers")).unwrap();
            assert_eq!(found.has_pids(), controllers.contains("pids"), "{found:?}");
        }
    }

    #[test]
    fn out_of_memory_kills_are_read_from_either_version() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        assert_eq!(oom_kills(dir.path()), 2);
        std::fs::remove_file(dir.path().join("memory.oom_control")).unwrap();
        std::fs::write(
            dir.path().join("memory.events"),
            "low 0\noom 1\noom_kill 1\n",
        )
        .unwrap();
        assert_eq!(oom_kills(dir.path()), 1);
    }
}
