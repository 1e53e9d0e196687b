//! Which repository a memory belongs to, the same for every clone of it: its root commit (the
//! first commit has the same id in every clone), else the URL of its `origin` remote without
//! any credentials in it, else its canonical path. Read with git itself, as git answers it.

use std::path::Path;
use std::process::{Command, Stdio};

/// The key of the repository at `repo`: `commit:<id>`, `remote:<url>` or `path:<path>`.
pub fn key(repo: &Path) -> String {
    if let Some(root) = git(repo, &["rev-list", "--max-parents=0", "HEAD"]) {
        // A history that merged unrelated ones has several roots: the smallest id is stable.
        if let Some(first) = root.lines().map(str::trim).filter(|l| !l.is_empty()).min() {
            return format!("commit:{first}");
        }
    }
    if let Some(url) = git(repo, &["config", "--get", "remote.origin.url"]) {
        let url = url.trim();
        if !url.is_empty() {
            return format!("remote:{}", without_credentials(url));
        }
    }
    let path = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
    format!("path:{}", path.display())
}

/// What `git -C repo ARGS` prints, when it succeeds; `None` without git or a repository.
fn git(repo: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        // The repository's own hooks and pagers run nothing here: these commands only read.
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A remote's URL without a user or token before its host (`https://user:token@host/x` is
/// `https://host/x`): a key is stored, and a token must never be.
fn without_credentials(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            if path.is_empty() {
                format!("{scheme}://{host}")
            } else {
                format!("{scheme}://{host}/{path}")
            }
        }
        // scp-like `git@host:owner/repo.git`: the user names no secret.
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git_in(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }

    #[test]
    fn a_clone_has_the_key_of_its_origin() {
        let dir = tempfile::tempdir().unwrap();
        let origin = dir.path().join("origin");
        std::fs::create_dir(&origin).unwrap();
        git_in(&origin, &["init", "-q"]);
        std::fs::write(origin.join("a.txt"), "a\n").unwrap();
        git_in(&origin, &["add", "a.txt"]);
        git_in(
            &origin,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "-m",
                "first",
            ],
        );
        let clone = dir.path().join("clone");
        git_in(
            dir.path(),
            &["clone", "-q", origin.to_str().unwrap(), "clone"],
        );
        let key_of_origin = key(&origin);
        assert!(key_of_origin.starts_with("commit:"), "{key_of_origin}");
        assert_eq!(key(&clone), key_of_origin);
        // Not a repository: its path.
        let plain = dir.path().join("plain");
        std::fs::create_dir(&plain).unwrap();
        assert_eq!(
            key(&plain),
            format!("path:{}", plain.canonicalize().unwrap().display())
        );
    }

    #[test]
    fn a_remotes_credentials_are_not_kept() {
        assert_eq!(
            without_credentials("https://me:ghp_secret@github.com/o/r.git"),
            "https://github.com/o/r.git"
        );
        assert_eq!(
            without_credentials("git@github.com:o/r.git"),
            "git@github.com:o/r.git"
        );
        assert_eq!(without_credentials("ssh://host"), "ssh://host");
    }
}
