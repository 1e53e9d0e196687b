//! How a repository runs its tests, read from its own build files (`package.json`'s `test`
//! script, `go.mod`, `pom.xml`, `build.gradle`, `Cargo.toml`, `pyproject.toml`/`tox.ini`/
//! `pytest.ini`, a `Makefile`'s `test` target), so the planner's `run_tests` steps use `npm
//! test` or `go test ./...` instead of guessing.

use std::fs;
use std::path::Path;

/// One way the repository runs its tests: the command, and where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TestCommand {
    pub(crate) command: String,
    pub(crate) found_in: String,
}

/// What npm writes into a new `package.json`: a `test` script that only fails.
const NPM_PLACEHOLDER: &str = "no test specified";
/// The most of a build file read: enough for any real one.
const MAX_READ: u64 = 1024 * 1024;

fn read(path: &Path) -> Option<String> {
    let meta = fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_READ {
        return None;
    }
    fs::read_to_string(path).ok()
}

/// Every test command the repository's root build files name, most specific first.
pub(crate) fn detect(repo: &Path) -> Vec<TestCommand> {
    let mut found = Vec::new();
    let mut add = |command: &str, found_in: String| {
        found.push(TestCommand {
            command: command.to_string(),
            found_in,
        });
    };
    if let Some(text) = read(&repo.join("package.json"))
        && let Ok(package) = serde_json::from_str::<serde_json::Value>(&text)
        && let Some(script) = package["scripts"]["test"].as_str()
        && !script.contains(NPM_PLACEHOLDER)
    {
        let runner = if repo.join("pnpm-lock.yaml").exists() {
            "pnpm test"
        } else if repo.join("yarn.lock").exists() {
            "yarn test"
        } else {
            "npm test"
        };
        add(runner, format!("package.json's test script: {script}"));
    }
    if repo.join("go.mod").is_file() {
        add("go test ./...", "go.mod".into());
    }
    if repo.join("pom.xml").is_file() {
        let maven = if repo.join("mvnw").is_file() {
            "./mvnw -q test"
        } else {
            "mvn -q test"
        };
        add(maven, "pom.xml".into());
    }
    let gradle = ["build.gradle", "build.gradle.kts"]
        .into_iter()
        .find(|name| repo.join(name).is_file());
    if let Some(name) = gradle {
        let command = if repo.join("gradlew").is_file() {
            "./gradlew test"
        } else {
            "gradle test"
        };
        add(command, name.into());
    }
    if repo.join("Cargo.toml").is_file() {
        add("cargo test", "Cargo.toml".into());
    }
    let python = [
        "pytest.ini",
        "tox.ini",
        "pyproject.toml",
        "setup.cfg",
        "conftest.py",
    ]
    .into_iter()
    .find(|name| match read(&repo.join(name)) {
        Some(text) => *name == "conftest.py" || *name == "pytest.ini" || text.contains("pytest"),
        None => false,
    });
    let python_or_more = python.is_some();
    if let Some(name) = python {
        add("python3 -m pytest -q", name.into());
    }
    if !python_or_more
        && found_nothing_else(repo)
        && let Some(text) = read(&repo.join("Makefile"))
        && text.lines().any(|line| line.starts_with("test:"))
    {
        add("make test", "the Makefile's test target".into());
    }
    found
}

/// Whether none of the build files above is there (a `Makefile` is then the way in).
fn found_nothing_else(repo: &Path) -> bool {
    [
        "package.json",
        "go.mod",
        "pom.xml",
        "build.gradle",
        "build.gradle.kts",
        "Cargo.toml",
    ]
    .iter()
    .all(|name| !repo.join(name).is_file())
}

/// The commands as the planner's prompt gives them (empty when none was found).
pub(crate) fn for_planner(commands: &[TestCommand]) -> String {
    if commands.is_empty() {
        return String::new();
    }
    let listed: Vec<String> = commands
        .iter()
        .map(|c| format!("- `{}` ({})", c.command, c.found_in))
        .collect();
    format!(
        "\nHow this repository runs its tests (give run_tests this command):\n{}\n",
        listed.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    fn commands(files: &[(&str, &str)]) -> Vec<String> {
        detect(repo(files).path())
            .into_iter()
            .map(|c| c.command)
            .collect()
    }

    #[test]
    fn finds_the_test_command_of_each_build_system() {
        assert_eq!(
            commands(&[("package.json", r#"{"scripts": {"test": "node --test"}}"#)]),
            ["npm test"]
        );
        assert_eq!(
            commands(&[
                ("package.json", r#"{"scripts": {"test": "vitest run"}}"#),
                ("pnpm-lock.yaml", "")
            ]),
            ["pnpm test"]
        );
        let placeholder = r#"{"scripts": {"test": "echo \"Error: no test specified\" && exit 1"}}"#;
        assert!(commands(&[("package.json", placeholder)]).is_empty());
        assert_eq!(commands(&[("go.mod", "module x\n")]), ["go test ./..."]);
        assert_eq!(commands(&[("pom.xml", "<project/>")]), ["mvn -q test"]);
        assert_eq!(
            commands(&[("build.gradle.kts", ""), ("gradlew", "")]),
            ["./gradlew test"]
        );
        assert_eq!(commands(&[("Cargo.toml", "[package]\n")]), ["cargo test"]);
        assert_eq!(
            commands(&[("pyproject.toml", "[tool.pytest.ini_options]\n")]),
            ["python3 -m pytest -q"]
        );
        assert!(commands(&[("pyproject.toml", "[project]\nname = \"x\"\n")]).is_empty());
        assert_eq!(commands(&[("Makefile", "test:\n\t./run\n")]), ["make test"]);
        let listed = for_planner(&detect(
            repo(&[("package.json", r#"{"scripts": {"test": "node --test"}}"#)]).path(),
        ));
        assert!(
            listed.contains("- `npm test` (package.json's test script: node --test)"),
            "{listed}"
        );
    }
}
