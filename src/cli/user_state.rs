//! The user's state directory (`$XDG_STATE_HOME/ocflow/`, else `~/.local/state/ocflow/`) and
//! what ocflow remembers there across commands besides the task index: the warnings it has
//! said already this session, so an agent running ocflow many times is told a thing once.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The file of warnings said, in the state directory.
const SAID_FILE: &str = "said.json";
/// How long a warning said stays said: about a working session.
const SESSION: Duration = Duration::from_secs(12 * 60 * 60);

/// `<state dir>/ocflow`: under `XDG_STATE_HOME` when it is an absolute path, else under
/// `~/.local/state`; `None` without either.
pub(crate) fn dir() -> Option<PathBuf> {
    let variable = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let absolute = |value: Option<String>| value.map(PathBuf::from).filter(|p| p.is_absolute());
    let base = absolute(variable("XDG_STATE_HOME"))
        .or_else(|| absolute(variable("HOME")).map(|home| home.join(".local/state")))?;
    Some(base.join("ocflow"))
}

/// Whether the warning `key` is due: not said in this session (the last `SESSION`). Records
/// it as said. Without a state directory every warning is due. Two commands starting at the
/// same moment may both say it: a warning twice is better than a lock on every command.
pub(crate) fn first_time_this_session(key: &str) -> bool {
    let Some(dir) = dir() else {
        return true;
    };
    first_time_in(&dir.join(SAID_FILE), key, SystemTime::now())
}

fn first_time_in(file: &Path, key: &str, now: SystemTime) -> bool {
    let seconds = |time: SystemTime| time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let now = seconds(now);
    let mut said: BTreeMap<String, u64> = std::fs::read(file)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    said.retain(|_, at| *at <= now && now - *at < SESSION.as_secs());
    if said.contains_key(key) {
        return false;
    }
    said.insert(key.to_string(), now);
    // Not written (a read-only home): said every time, as before.
    let _ = write(file, &said);
    true
}

fn write(file: &Path, said: &BTreeMap<String, u64>) -> std::io::Result<()> {
    let dir = file.parent().unwrap_or(Path::new("."));
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let text = serde_json::to_string_pretty(said).map_err(std::io::Error::other)?;
    let mut temp = tempfile::Builder::new()
        .prefix(".tmp-said-")
        .tempfile_in(dir)?;
    temp.write_all(text.as_bytes())?;
    temp.persist(file).map(drop).map_err(|err| err.error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_due_once_a_session() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ocflow").join(SAID_FILE);
        let start = SystemTime::now();
        assert!(first_time_in(&file, "model openai/x", start));
        assert!(!first_time_in(
            &file,
            "model openai/x",
            start + Duration::from_secs(60)
        ));
        assert!(first_time_in(&file, "model openai/y", start));
        assert!(first_time_in(
            &file,
            "model openai/x",
            start + SESSION + Duration::from_secs(1)
        ));
    }
}
