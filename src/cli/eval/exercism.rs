//! The Exercism practice-exercise layout (the one Aider's code-editing benchmark uses) as a
//! suite: `ocflow eval DIR` where DIR holds exercises, each a directory with
//! `.docs/instructions.md` (and perhaps `instructions.append.md`), `.meta/config.json` naming
//! its `solution` and `test` files, the solution's stub and its tests.
//!
//! Each exercise becomes a repository of its own under `--out` (`exercism/repos/SLUG`: the
//! stub, the tests and the instructions; never `.meta/`, which holds the example solution), a
//! git work tree with one commit. Its task is the instructions with Aider's request to change
//! the stub; its check runs the exercise's own tests, put back as they were first (a flow that
//! edits the tests does not pass by it): `pytest` for Python, `node --test` for JavaScript's
//! `*.test.js`/`*.spec.js` when node is there. The model alone is shown the stub.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct Config {
    files: Files,
}

#[derive(Deserialize)]
struct Files {
    solution: Vec<String>,
    test: Vec<String>,
}

/// Writes the suite of the exercises in `dir` (and their repositories) under `out`; returns the
/// suite's path. An exercise without the layout's files is skipped, and said.
pub(crate) fn suite(dir: &Path, out: &Path) -> Result<PathBuf, String> {
    let root = out.join("exercism");
    let repos = root.join("repos");
    let tests = root.join("tests");
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|err| format!("cannot read {}: {err}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(".meta/config.json").is_file())
        .collect();
    entries.sort();
    if entries.is_empty() {
        return Err(format!(
            "{} holds no exercise: give a JSON-lines suite, or a directory of Exercism \
             exercises (each with .meta/config.json, .docs/instructions.md, a stub and its tests)",
            dir.display()
        ));
    }
    let mut lines = String::new();
    for exercise in entries {
        let slug = exercise
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match one(&exercise, &slug, &repos.join(&slug), &tests.join(&slug)) {
            Ok(line) => {
                lines.push_str(&line.to_string());
                lines.push('\n');
            }
            Err(problem) => ocflow_model::output::say(&format!(
                "ocflow: eval: exercise {slug} left out: {problem}"
            )),
        }
    }
    let path = root.join("suite.jsonl");
    std::fs::write(&path, lines)
        .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    Ok(path)
}

/// One exercise: its repository and pristine tests made, its suite line returned.
fn one(
    exercise: &Path,
    slug: &str,
    repo: &Path,
    tests: &Path,
) -> Result<serde_json::Value, String> {
    let config: Config = std::fs::read_to_string(exercise.join(".meta/config.json"))
        .map_err(|err| err.to_string())
        .and_then(|text| serde_json::from_str(&text).map_err(|err| err.to_string()))?;
    let mut instructions = String::new();
    for name in ["instructions.md", "instructions.append.md"] {
        if let Ok(text) = std::fs::read_to_string(exercise.join(".docs").join(name)) {
            instructions.push_str(text.trim());
            instructions.push_str("\n\n");
        }
    }
    if instructions.is_empty() {
        return Err("no .docs/instructions.md".into());
    }
    if repo.exists() {
        std::fs::remove_dir_all(repo).map_err(|err| err.to_string())?;
    }
    let files = config.files.solution.iter().chain(&config.files.test);
    for (name, kept_in) in files
        .map(|f| (f, repo))
        .chain(config.files.test.iter().map(|f| (f, tests)))
    {
        let source = exercise.join(name);
        let target = kept_in.join(name);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|err| err.to_string())?;
        }
        std::fs::copy(&source, &target)
            .map_err(|err| format!("cannot copy {}: {err}", source.display()))?;
    }
    std::fs::create_dir_all(repo.join(".docs")).map_err(|err| err.to_string())?;
    std::fs::write(repo.join(".docs/instructions.md"), &instructions)
        .map_err(|err| err.to_string())?;
    commit(repo)?;
    let solution = config.files.solution.join(", ");
    let task = format!(
        "{instructions}Use the above instructions to modify the supplied files: {solution}. \
         Keep and implement the existing function or class stubs, they will be called from unit \
         tests. Only use the standard library, don't install any packages."
    );
    Ok(json!({
        "id": slug,
        "task": task,
        "repo": repo,
        "files": config.files.solution,
        "check": check(&config.files.test, tests)?,
    }))
}

/// The exercise's tests, put back from their pristine copy, then run.
fn check(test_files: &[String], pristine: &Path) -> Result<String, String> {
    let quote = |text: &str| format!("'{}'", text.replace('\'', "'\\''"));
    let restore: Vec<String> = test_files
        .iter()
        .map(|f| {
            format!(
                "cp {} {}",
                quote(&pristine.join(f).to_string_lossy()),
                quote(f)
            )
        })
        .collect();
    let listed: Vec<String> = test_files.iter().map(|f| quote(f)).collect();
    let run = if test_files.iter().all(|f| f.ends_with(".py")) {
        format!(
            "python3 -m pytest -q -p no:cacheprovider {}",
            listed.join(" ")
        )
    } else if test_files
        .iter()
        .all(|f| f.ends_with(".js") || f.ends_with(".mjs"))
    {
        format!("node --test {}", listed.join(" "))
    } else {
        return Err(format!("no runner for the tests {}", test_files.join(", ")));
    };
    Ok(format!("{} && {run}", restore.join(" && ")))
}

fn commit(repo: &Path) -> Result<(), String> {
    for args in [
        &["init", "-q"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.name=ocflow eval",
            "-c",
            "user.email=eval@ocflow.invalid",
            "commit",
            "-qm",
            "the exercise",
        ],
    ] {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(repo)
            .stdout(std::process::Stdio::null())
            .status()
            .map_err(|err| format!("cannot run git: {err}"))?;
        if !status.success() {
            return Err(format!(
                "git {} failed in {}",
                args.join(" "),
                repo.display()
            ));
        }
    }
    Ok(())
}
