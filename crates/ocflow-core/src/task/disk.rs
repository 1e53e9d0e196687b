//! What a task holds on disk, and removing a task whole: its snapshot, views and layers (an
//! overlay's work directory holds a directory without permissions, which a plain removal cannot
//! enter as a user other than root).

use std::path::Path;

use walkdir::WalkDir;

use crate::task::file_tree;
use crate::task::workspace::{self, TaskDir};
use ocflow_model::error::Result;

/// The bytes the files under `dir` take on disk, as `du` counts them (allocated blocks; a file
/// linked twice counts twice). Symlinks are not followed.
pub fn usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.metadata().ok())
        .map(|meta| meta.blocks() * 512)
        .sum()
}

/// Where a task's size is kept at the end of its last run (`record`), so that the end of another
/// run adds up the workspace without walking every task's snapshot and views.
const SIZE_FILE: &str = "disk_usage.txt";

/// Walks the task's directory and keeps its size for `workspace_usage`; returns it.
pub fn record(task: &TaskDir) -> u64 {
    let bytes = usage(&task.root);
    let _ = workspace::write_atomic(&task.file(SIZE_FILE), bytes.to_string().as_bytes());
    bytes
}

/// The bytes the workspace's tasks hold, and how many tasks there are: each task's size as its
/// last run's end recorded it, walked for a task that has none.
pub fn workspace_usage(workspace_dir: &Path) -> (u64, usize) {
    let Ok(entries) = std::fs::read_dir(workspace_dir) else {
        return (0, 0);
    };
    let tasks: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|dir| dir.join(workspace::STATUS_FILE).is_file())
        .collect();
    let bytes = tasks
        .iter()
        .map(|dir| {
            std::fs::read_to_string(dir.join(SIZE_FILE))
                .ok()
                .and_then(|text| text.trim().parse().ok())
                .unwrap_or_else(|| usage(dir))
        })
        .sum();
    (bytes, tasks.len())
}

/// Removes the task's directory with everything in it; the caller holds its lock (the lock file
/// goes with it). Returns the bytes it held.
pub fn remove(task: &TaskDir) -> Result<u64> {
    use std::os::unix::fs::PermissionsExt;
    let bytes = usage(&task.root);
    for entry in WalkDir::new(&task.root).into_iter().flatten() {
        if entry.file_type().is_dir() {
            let _ = std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o700));
        }
    }
    file_tree::remove_tree(&task.root)?;
    Ok(bytes)
}

/// A size in words: `812 B`, `4.1 KB`, `273 MB`, `2.5 GB` (powers of 1000, as `du -h --si`).
pub fn describe(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64;
    let mut unit = "B";
    for next in UNITS {
        if value < 1000.0 {
            break;
        }
        value /= 1000.0;
        unit = next;
    }
    if value < 10.0 {
        format!("{value:.1} {unit}")
    } else {
        format!("{value:.0} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_said_in_powers_of_a_thousand() {
        assert_eq!(describe(812), "812 B");
        assert_eq!(describe(4_100), "4.1 KB");
        assert_eq!(describe(273_000_000), "273 MB");
        assert_eq!(describe(2_500_000_000), "2.5 GB");
    }

    #[test]
    fn a_task_is_removed_whole_even_with_a_directory_without_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let task = TaskDir::new(dir.path(), "t");
        let locked = task.root.join("_layers/work/work");
        std::fs::create_dir_all(&locked).unwrap();
        std::fs::write(task.root.join("flow_status.json"), vec![b'x'; 10_000]).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        let freed = remove(&task).unwrap();
        assert!(freed >= 10_000, "{freed}");
        assert!(!task.root.exists());
    }

    #[test]
    fn the_workspace_adds_up_recorded_sizes_and_walks_the_others() {
        let dir = tempfile::tempdir().unwrap();
        for (id, bytes) in [("a", 50_000), ("b", 20_000)] {
            let task = TaskDir::new(dir.path(), id);
            std::fs::create_dir_all(&task.root).unwrap();
            std::fs::write(task.file(workspace::STATUS_FILE), vec![b'x'; bytes]).unwrap();
        }
        let a = TaskDir::new(dir.path(), "a");
        let recorded = record(&a);
        let walked = usage(&TaskDir::new(dir.path(), "b").root);
        // A directory that is no task is not counted.
        std::fs::create_dir_all(dir.path().join("_plans")).unwrap();
        assert_eq!(workspace_usage(dir.path()), (recorded + walked, 2));
        // The recorded figure is used as it is: a later change is counted at the next record.
        std::fs::write(a.root.join("more"), vec![b'x'; 100_000]).unwrap();
        assert_eq!(workspace_usage(dir.path()).0, recorded + walked);
    }
}
