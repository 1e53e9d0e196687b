//! Redaction of what is sent to the LLM. Strings that look like keys (`sk-…`, `ghp_…`,
//! `AKIA…`, `xoxb-…`, private key blocks, `…KEY=`/`TOKEN=`/`SECRET=`/`PASSWORD=` with a long
//! value) and the lines of the files git ignores (a `.env` a command printed) are replaced with
//! markers before a request leaves. It happens in the one client every prompt goes through
//! (planning, re-asks, recovery, summaries, the library's steps), so no new prompt can forget
//! it, and the request says so in a note at its end.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::{Captures, Regex};

use crate::flow::ignore_rules;
use ocflow_model::llm::ChatRequest;

/// The key shapes, shared with the library run on its own (its `redact.py`).
const SHARED: &str = include_str!("../../../../python/open_codex_lib/redaction.json");

/// What stands for a string that looks like a key.
pub(crate) const KEY_MARKER: &str = "[redacted: looks like a key]";

/// Ignored files larger than this are not read: secrets live in small files, and build output
/// and data sets must not cost a start-up.
const MAX_FILE_BYTES: u64 = 64 * 1024;
/// At most this many ignored files are read.
const MAX_FILES: usize = 200;
/// Shorter lines of an ignored file (`}`, `DEBUG=1`) say nothing secret and would mark ordinary
/// text everywhere.
const MIN_LINE_CHARS: usize = 8;
/// Directories whose ignored content is dependencies or build output, not secrets: their lines
/// would turn every quoted line of code into a marker.
const SKIPPED_DIRS: &[&str] = &[
    ".git",
    "node_modules",
    "target",
    "build",
    "dist",
    ".venv",
    "venv",
    "__pycache__",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".cache",
    ".next",
    ".gradle",
    "coverage",
];

/// `redaction.json`: the patterns both languages read.
#[derive(serde::Deserialize)]
struct Shared {
    /// Tokens whose shape gives them away.
    key_shapes: Vec<String>,
    /// `NAME=value` where the name says key, token, secret or password and the value is long:
    /// the value (group 2) goes, the name (group 1) stays, as it tells the model what was there.
    key_assignment: String,
}

/// The compiled patterns: the key shapes, then the assignment. A pattern that does not compile
/// is left out (the unit tests compile each one).
static PATTERNS: LazyLock<(Vec<Regex>, Option<Regex>)> = LazyLock::new(|| {
    let Ok(shared) = serde_json::from_str::<Shared>(SHARED) else {
        return (Vec::new(), None);
    };
    let shapes = shared
        .key_shapes
        .iter()
        .filter_map(|pattern| Regex::new(pattern).ok())
        .collect();
    (shapes, Regex::new(&shared.key_assignment).ok())
});

/// What redaction replaced in one text.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Redacted {
    pub(crate) text: String,
    /// Strings that looked like keys.
    pub(crate) keys: usize,
    /// The ignored files whose lines were found.
    pub(crate) files: BTreeSet<String>,
}

/// The redaction of one repository: the key shapes, and the lines of its ignored files.
#[derive(Debug, Default)]
pub(crate) struct Redactor {
    /// Each line of an ignored file, longest first, with the file it came from.
    lines: Vec<(String, String)>,
    /// All of `lines` in one pattern.
    pattern: Option<Regex>,
}

impl Redactor {
    /// Reads the small text files git ignores in `repo` (not under `skip`, the workspace when
    /// it lies inside the repository, nor in dependency or build directories).
    pub(crate) fn for_repository(repo: &Path, skip: &Path) -> Redactor {
        let mut seen = HashSet::new();
        let mut lines = Vec::new();
        for (path, text) in ignored_text_files(repo, skip) {
            for line in text.lines().map(str::trim) {
                if line.chars().count() >= MIN_LINE_CHARS && seen.insert(line.to_string()) {
                    lines.push((line.to_string(), path.clone()));
                }
            }
        }
        lines.sort_by_key(|(line, _)| std::cmp::Reverse(line.len()));
        let alternation: Vec<String> = lines.iter().map(|(line, _)| regex::escape(line)).collect();
        let pattern = (!lines.is_empty())
            .then(|| {
                regex::RegexBuilder::new(&alternation.join("|"))
                    .size_limit(64 * 1024 * 1024)
                    .build()
                    .ok()
            })
            .flatten();
        Redactor { lines, pattern }
    }

    /// `text` with the ignored files' lines, then the keys, replaced by markers.
    pub(crate) fn redact(&self, text: &str) -> Redacted {
        let mut redacted = Redacted::default();
        let mut text = match &self.pattern {
            Some(pattern) => pattern
                .replace_all(text, |found: &Captures| {
                    let path = self.file_of(&found[0]);
                    redacted.files.insert(path.to_string());
                    format!("[redacted: content of git-ignored {path}]")
                })
                .into_owned(),
            None => text.to_string(),
        };
        let (shapes, assignment) = &*PATTERNS;
        for shape in shapes {
            text = shape
                .replace_all(&text, |_: &Captures| {
                    redacted.keys += 1;
                    KEY_MARKER
                })
                .into_owned();
        }
        if let Some(assignment) = assignment {
            text = assignment
                .replace_all(&text, |found: &Captures| {
                    // A reference to a variable (`$TOKEN`, `${TOKEN}`) is not its value.
                    if found[2].starts_with('$') {
                        return found[0].to_string();
                    }
                    redacted.keys += 1;
                    format!("{}{KEY_MARKER}", &found[1])
                })
                .into_owned();
        }
        redacted.text = text;
        redacted
    }

    /// `request` with every message redacted and a note at its end saying what went; `None`
    /// when nothing had to go.
    pub(crate) fn request(&self, request: &ChatRequest) -> Option<ChatRequest> {
        let mut keys = 0;
        let mut files = BTreeSet::new();
        let mut changed = request.clone();
        for message in &mut changed.messages {
            let redacted = self.redact(&message.content);
            keys += redacted.keys;
            files.extend(redacted.files);
            message.content = redacted.text;
        }
        if keys == 0 && files.is_empty() {
            return None;
        }
        let mut what = Vec::new();
        if keys > 0 {
            what.push(format!("{keys} string(s) that look like keys"));
        }
        if !files.is_empty() {
            let names: Vec<&str> = files.iter().map(String::as_str).collect();
            what.push(format!(
                "content of git-ignored files ({})",
                names.join(", ")
            ));
        }
        if let Some(last) = changed.messages.last_mut() {
            last.content.push_str(&format!(
                "\n\n(Note from ocflow: before this request was sent, {} were replaced by \
                 `[redacted: …]` markers. Do not guess or ask for the values; a command that \
                 needs one reads it where it is.)",
                what.join(" and ")
            ));
        }
        Some(changed)
    }

    fn file_of(&self, line: &str) -> &str {
        self.lines
            .iter()
            .find(|(known, _)| known == line)
            .map_or("file", |(_, path)| path.as_str())
    }
}

/// The small UTF-8 files of `repo` that git ignores, as (path in the repository, text).
fn ignored_text_files(repo: &Path, skip: &Path) -> Vec<(String, String)> {
    let kept: HashSet<PathBuf> = ignore_rules::walk(repo)
        .build()
        .filter_map(Result::ok)
        .map(ignore::DirEntry::into_path)
        .collect();
    let walk = walkdir::WalkDir::new(repo)
        .follow_links(false)
        .into_iter()
        .filter_entry(|entry| {
            let name = entry.file_name().to_str().unwrap_or_default();
            entry.path() != skip && !(entry.file_type().is_dir() && SKIPPED_DIRS.contains(&name))
        });
    let mut found = Vec::new();
    for entry in walk.filter_map(Result::ok) {
        if found.len() >= MAX_FILES {
            break;
        }
        if !entry.file_type().is_file() || kept.contains(entry.path()) {
            continue;
        }
        if entry.metadata().map_or(true, |m| m.len() > MAX_FILE_BYTES) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let path = entry.path().strip_prefix(repo).unwrap_or(entry.path());
        found.push((path.display().to_string(), text));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_patterns_all_compile() {
        let shared: Shared = serde_json::from_str(SHARED).unwrap();
        assert_eq!(PATTERNS.0.len(), shared.key_shapes.len());
        assert!(PATTERNS.1.is_some());
        assert!(SHARED.contains(&format!("\"key_marker\": \"{KEY_MARKER}\"")));
    }

    #[test]
    fn strings_that_look_like_keys_are_replaced() {
        let redactor = Redactor::default();
        let text = "openai sk-proj-abcdefghijklmnop1234 github ghp_abcdefghijklmnopqrstuvwx12 \
                    aws AKIAABCDEFGHIJKLMNOP slack xoxb-1234567890-abcdef\n\
                    export API_TOKEN=\"abcdefgh12345678\" and password: hunter2hunter2\n\
                    -----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----\n\
                    kept: TOKEN=${GITHUB_TOKEN} max_tokens=4096 sk-short the key=value";
        let redacted = redactor.redact(text);
        assert_eq!(
            redacted.text,
            format!(
                "openai {KEY_MARKER} github {KEY_MARKER} aws {KEY_MARKER} slack {KEY_MARKER}\n\
                 export API_TOKEN=\"{KEY_MARKER}\" and password: {KEY_MARKER}\n{KEY_MARKER}\n\
                 kept: TOKEN=${{GITHUB_TOKEN}} max_tokens=4096 sk-short the key=value"
            )
        );
        assert_eq!(redacted.keys, 7);
    }

    #[test]
    fn a_private_key_cut_by_a_tail_goes_to_the_end() {
        let redacted = Redactor::default().redact("x\n-----BEGIN PRIVATE KEY-----\nMIIEv");
        assert_eq!(redacted.text, format!("x\n{KEY_MARKER}"));
    }

    #[test]
    fn lines_of_ignored_files_are_replaced_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        std::fs::write(repo.join(".gitignore"), ".env\nnode_modules/\n").unwrap();
        std::fs::write(repo.join(".env"), "DB_HOST=db.internal.example\nX=1\n").unwrap();
        std::fs::create_dir(repo.join("node_modules")).unwrap();
        std::fs::write(repo.join("node_modules/a.js"), "module.exports = 1;\n").unwrap();
        std::fs::write(
            repo.join("main.py"),
            "print('DB_HOST=db.internal.example')\n",
        )
        .unwrap();
        let redactor = Redactor::for_repository(repo, &repo.join("workspace"));
        let redacted =
            redactor.redact("host: DB_HOST=db.internal.example\nX=1\nmodule.exports = 1;");
        assert_eq!(
            redacted.text,
            "host: [redacted: content of git-ignored .env]\nX=1\nmodule.exports = 1;"
        );
        assert_eq!(redacted.files, BTreeSet::from([".env".to_string()]));
    }
}
