//! The answer form each endpoint takes, remembered across runs. A server that refuses the best
//! form (llama-cpp-python answers `json_schema` with a 500) is probed once, and the form that
//! worked is kept per base URL in the user's state directory
//! (`$XDG_STATE_HOME/ocflow/answer-forms.json`, else `~/.local/state/ocflow/`), so a batch of
//! flows probes it once a day rather than once a process. The file holds base URLs without any
//! user, password, query or fragment (a key never goes in it), is written atomically, and an
//! entry older than a day is probed again (a server may have been upgraded).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::task::workspace;

/// The file's name in `<state dir>/ocflow/`.
const FILE: &str = "answer-forms.json";

/// How long a remembered form is trusted before the endpoint is probed again.
pub(crate) const LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

const VERSION: u32 = 1;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    version: u32,
    /// By base URL (see `key`).
    endpoints: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    /// The form's name, as `flow_planned` records it (`json_object with a schema`).
    form: String,
    /// When it was found, in seconds since 1970.
    probed_at: u64,
}

/// The file of remembered forms: under `XDG_STATE_HOME` when it is an absolute path, else
/// under `~/.local/state`; `None` without either (nothing is remembered then).
pub(crate) fn state_file(variable: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let absolute =
        |value: Option<String>| value.map(PathBuf::from).filter(|path| path.is_absolute());
    let base = absolute(variable("XDG_STATE_HOME"))
        .or_else(|| absolute(variable("HOME")).map(|home| home.join(".local/state")))?;
    Some(base.join("ocflow").join(FILE))
}

/// The remembered form's name for `base_url`, if found less than a day before `now`.
pub(crate) fn recall(file: &Path, base_url: &str, now: SystemTime) -> Option<String> {
    let entry = read(file).endpoints.remove(&key(base_url)?)?;
    fresh(&entry, now).then_some(entry.form)
}

/// Keeps `form` as the one `base_url` takes, dropping entries that expired. A file that cannot
/// be written leaves the next run to probe again: the caller ignores the error.
pub(crate) fn remember(
    file: &Path,
    base_url: &str,
    form: &str,
    now: SystemTime,
) -> ocflow_model::error::Result<()> {
    let Some(key) = key(base_url) else {
        return Ok(());
    };
    let mut stored = read(file);
    stored.version = VERSION;
    stored.endpoints.retain(|_, entry| fresh(entry, now));
    stored.endpoints.insert(
        key,
        Entry {
            form: form.to_string(),
            probed_at: seconds(now),
        },
    );
    if let Some(dir) = file.parent() {
        create_private_dir(dir)?;
    }
    let mut text = serde_json::to_string_pretty(&stored)
        .map_err(|err| ocflow_model::error::Error::internal(format!("answer forms: {err}")))?;
    text.push('\n');
    workspace::write_replacing(file, text.as_bytes())
}

fn create_private_dir(dir: &Path) -> ocflow_model::error::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|err| {
            ocflow_model::error::Error::internal(format!("creating {}: {err}", dir.display()))
        })
}

/// The file's content; an unreadable or damaged file is as good as none (it is rewritten).
fn read(file: &Path) -> Stored {
    std::fs::read(file)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Stored>(&bytes).ok())
        .filter(|stored| stored.version == VERSION)
        .unwrap_or_default()
}

fn fresh(entry: &Entry, now: SystemTime) -> bool {
    let age = seconds(now).saturating_sub(entry.probed_at);
    // An entry from the future (a clock set back) is not trusted either.
    entry.probed_at <= seconds(now) && age < LIFETIME.as_secs()
}

fn seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The base URL as the file keeps it: scheme, host, port and path, without a user, password,
/// query or fragment (where a key could be), and without a trailing slash.
fn key(base_url: &str) -> Option<String> {
    let mut url = reqwest::Url::parse(base_url.trim()).ok()?;
    url.set_username("").ok()?;
    url.set_password(None).ok()?;
    url.set_query(None);
    url.set_fragment(None);
    Some(url.as_str().trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_keeps_no_credentials_and_entries_expire_after_a_day() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("state/ocflow").join(FILE);
        let now = SystemTime::now();
        let url = "http://user:sk-secret@127.0.0.1:8080/v1/?api-key=sk-other#x";
        remember(&file, url, "json_object with a schema", now).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.contains("\"http://127.0.0.1:8080/v1\"") && !text.contains("sk-"),
            "{text}"
        );
        assert_eq!(
            recall(&file, "http://127.0.0.1:8080/v1", now).as_deref(),
            Some("json_object with a schema")
        );
        assert_eq!(recall(&file, "http://127.0.0.1:8081/v1", now), None);
        let later = now + LIFETIME + Duration::from_secs(1);
        assert_eq!(recall(&file, "http://127.0.0.1:8080/v1", later), None);
        // Writing another endpoint later drops the expired one.
        remember(&file, "http://other:1/v1", "plain text", later).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains("8080") && text.contains("other:1"), "{text}");
        std::fs::write(&file, "{ damaged").unwrap();
        assert_eq!(recall(&file, "http://other:1/v1", later), None);
    }

    #[test]
    fn the_state_directory_follows_xdg_then_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            state_file(env(&[("XDG_STATE_HOME", "/s"), ("HOME", "/h")])),
            Some(PathBuf::from("/s/ocflow/answer-forms.json"))
        );
        assert_eq!(
            state_file(env(&[("XDG_STATE_HOME", "relative"), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.local/state/ocflow/answer-forms.json"))
        );
        assert_eq!(state_file(env(&[])), None);
    }
}
