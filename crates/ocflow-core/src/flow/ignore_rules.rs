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

/// The rules of a `.gitignore` a command wrote (pytest's `.pytest_cache/.gitignore` holds `*`,
/// as do mypy's and ruff's caches): git applies it as soon as it exists, so what it ignores is
/// no change a person would commit, though the repository does not hold the file yet.
pub struct MadeRules {
    /// The directory holding the file, relative to the repository (`""` for its root).
    dir: String,
    rules: Gitignore,
}

impl MadeRules {
    /// The rules `text` of the ignore file `file` (a `.gitignore`), read as git reads them;
    /// `None` for any other file.
    pub fn new(repo: &Path, file: &RepoPath, text: &str) -> Option<MadeRules> {
        let (dir, name) = match file.as_str().rsplit_once('/') {
            Some((dir, name)) => (dir, name),
            None => ("", file.as_str()),
        };
        if name != ".gitignore" {
            return None;
        }
        let mut builder = GitignoreBuilder::new(repo.join(dir));
        for line in text.lines() {
            builder.add_line(None, line).ok()?;
        }
        Some(MadeRules {
            dir: dir.to_string(),
            rules: builder.build().ok()?,
        })
    }

    /// Whether these rules ignore `path` or a directory above it, below their own directory.
    pub fn ignore(&self, repo: &Path, path: &RepoPath) -> bool {
        let below = self.dir.is_empty() || path.as_str().starts_with(&format!("{}/", self.dir));
        below
            && self
                .rules
                .matched_path_or_any_parents(repo.join(path.as_str()), false)
                .is_ignore()
    }
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

    /// pytest's cache directory ignores itself: its `.gitignore` is `*`.
    #[test]
    fn an_ignore_file_a_command_made_applies_below_it() {
        let repo = Path::new("/nonexistent/repo");
        let path = |p: &str| RepoPath::parse(p).unwrap();
        let made = MadeRules::new(repo, &path(".pytest_cache/.gitignore"), "# pytest\n*\n")
            .expect("an ignore file");
        assert!(made.ignore(repo, &path(".pytest_cache/.gitignore")));
        assert!(made.ignore(repo, &path(".pytest_cache/v/cache/nodeids")));
        assert!(!made.ignore(repo, &path("calc.py")));
        assert!(!made.ignore(repo, &path(".pytest_cache_other/x")));
        assert!(MadeRules::new(repo, &path("notes.txt"), "*").is_none());
        let nested = MadeRules::new(repo, &path("build/.gitignore"), "*.o\n").unwrap();
        assert!(nested.ignore(repo, &path("build/sub/main.o")));
        assert!(!nested.ignore(repo, &path("build/main.c")));
    }
}
