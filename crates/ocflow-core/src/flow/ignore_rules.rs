//! The repository's own ignore rules, as git applies them (`.gitignore` at every level, the
//! deeper file first, `!` re-including; then `.git/info/exclude`), through the `ignore` crate,
//! ripgrep's implementation. What git ignores — secret files, virtual environments, build
//! output, caches — is not listed for the planner, not read or written by a flow's file steps,
//! and not carried into the diff from what a command left behind. Command steps still see it
//! in their view: builds and tests need it.

use std::path::Path;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use ocflow_model::repo_path::RepoPath;

/// The rule that makes git ignore `path` (or a directory above it), as `` `PATTERN` in FILE ``;
/// `None` when git would not ignore it.
pub fn ignored_by(repo: &Path, path: &RepoPath) -> Option<String> {
    let parts: Vec<&str> = path.as_str().split('/').filter(|p| !p.is_empty()).collect();
    // Git does not look inside an ignored directory, so the outermost ignored level decides.
    for depth in 1..=parts.len() {
        let candidate = parts[..depth]
            .iter()
            .fold(repo.to_path_buf(), |p, c| p.join(c));
        let is_dir = depth < parts.len() || candidate.is_dir();
        if let Some(rule) = decide(repo, &candidate, is_dir) {
            return Some(rule);
        }
    }
    None
}

/// Whether the rules of the directories holding `candidate` ignore it: the nearest `.gitignore`
/// that has a say decides, then `.git/info/exclude`.
fn decide(repo: &Path, candidate: &Path, is_dir: bool) -> Option<String> {
    let mut dir = candidate.parent();
    while let Some(current) = dir {
        let file = current.join(".gitignore");
        if file.is_file() {
            let (rules, _) = Gitignore::new(&file);
            match rules.matched(candidate, is_dir) {
                Match::Ignore(glob) => return Some(describe(glob.original(), repo, &file)),
                Match::Whitelist(_) => return None,
                Match::None => {}
            }
        }
        if current == repo {
            break;
        }
        dir = current.parent();
    }
    let exclude = repo.join(".git").join("info").join("exclude");
    if exclude.is_file() {
        let mut builder = GitignoreBuilder::new(repo);
        builder.add(&exclude);
        if let Ok(rules) = builder.build()
            && let Match::Ignore(glob) = rules.matched(candidate, is_dir)
        {
            return Some(describe(glob.original(), repo, &exclude));
        }
    }
    None
}

fn describe(pattern: &str, repo: &Path, file: &Path) -> String {
    format!(
        "`{pattern}` in {}",
        file.strip_prefix(repo).unwrap_or(file).display()
    )
}

/// A walk of the repository that skips what git ignores, for listings.
pub(crate) fn walk(repo: &Path) -> ignore::WalkBuilder {
    let mut walk = ignore::WalkBuilder::new(repo);
    walk.hidden(false)
        .parents(false)
        .ignore(false)
        .git_global(false)
        .git_ignore(true)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false);
    walk
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_apply_as_git_applies_them() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        std::fs::write(
            repo.join(".gitignore"),
            "secret.env\nvenv/\n*.log\n!keep.log\n",
        )
        .unwrap();
        std::fs::create_dir_all(repo.join("sub/venv")).unwrap();
        std::fs::write(repo.join("sub/.gitignore"), "!important.log\nlocal/\n").unwrap();
        std::fs::create_dir_all(repo.join(".git/info")).unwrap();
        std::fs::write(repo.join(".git/info/exclude"), "/scratch/\n").unwrap();
        let ignored = |path: &str| ignored_by(repo, &RepoPath::parse(path).unwrap());
        assert_eq!(
            ignored("secret.env").as_deref(),
            Some("`secret.env` in .gitignore")
        );
        assert!(ignored("sub/venv/bin/python").is_some());
        assert!(ignored("debug.log").is_some());
        assert_eq!(ignored("keep.log"), None);
        assert_eq!(ignored("sub/important.log"), None);
        assert!(ignored("sub/local/x.txt").is_some());
        assert_eq!(
            ignored("scratch/notes.md").as_deref(),
            Some("`/scratch/` in .git/info/exclude")
        );
        assert_eq!(ignored("src/main.py"), None);
    }
}
