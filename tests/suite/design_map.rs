//! DESIGN.md's map, checked against the tree: every folder that holds code (under `src/`,
//! `crates/*/src/` and `python/open_codex_lib/`) and every crate is named in it, and every path
//! it names from the repository's root exists. The tree is read when the test runs, so a folder
//! added or a file moved without DESIGN.md fails here, not in a newcomer's first day.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn design() -> String {
    fs::read_to_string(root().join("DESIGN.md")).unwrap()
}

/// Whether `text` holds `needle` not glued to a longer name or path before it: `model/` must
/// not be found inside `ocflow-model/`, nor `bin/` inside `/bin/sh`.
fn names(text: &str, needle: &str) -> bool {
    text.match_indices(needle).any(|(at, _)| {
        text[..at]
            .chars()
            .last()
            .is_none_or(|c| !(c.is_alphanumeric() || "-_./".contains(c)))
    })
}

/// Every directory below `dir` (not `dir` itself), relative to the repository's root, without
/// Python's byte-code caches.
fn folders_below(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return found;
    };
    for entry in entries {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() && entry.file_name() != "__pycache__" {
            found.push(entry.path().strip_prefix(root()).unwrap().to_path_buf());
            found.extend(folders_below(&entry.path()));
        }
    }
    found
}

/// The crates of the workspace: each folder of `crates/` with a `Cargo.toml`, by the name it
/// declares.
fn crates() -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(root().join("crates")) else {
        return found;
    };
    for entry in entries {
        let dir = entry.unwrap().path();
        let Ok(manifest) = fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let name = manifest
            .lines()
            .filter_map(|line| line.trim().strip_prefix("name"))
            .filter_map(|rest| rest.trim_start().strip_prefix('='))
            .map(|value| value.trim().trim_matches('"').to_string())
            .next()
            .unwrap_or_else(|| panic!("{} declares no name", dir.display()));
        found.push((dir.strip_prefix(root()).unwrap().to_path_buf(), name));
    }
    found.sort();
    found
}

/// The ways DESIGN.md may name a folder: its path from the root, or its path below its `src/`
/// (`engine/executor/`) or below `python/` (`open_codex_lib/prompts/`), with a closing slash.
fn spellings(folder: &Path) -> Vec<String> {
    let full = folder.to_string_lossy().into_owned();
    let mut all = vec![format!("{full}/")];
    let parts: Vec<&str> = full.split('/').collect();
    if let Some(src) = parts.iter().rposition(|part| *part == "src")
        && src + 1 < parts.len()
    {
        all.push(format!("{}/", parts[src + 1..].join("/")));
    }
    if let Some(below) = full.strip_prefix("python/") {
        all.push(format!("{below}/"));
    }
    all
}

#[test]
fn every_code_folder_and_crate_is_named_in_design() {
    let text = design();
    let crates = crates();
    let mut folders = vec![PathBuf::from("src")];
    folders.extend(folders_below(&root().join("src")));
    for (dir, _) in &crates {
        folders.extend(folders_below(&root().join(dir).join("src")));
    }
    folders.push(PathBuf::from("python/open_codex_lib"));
    folders.extend(folders_below(&root().join("python/open_codex_lib")));

    let mut missing: Vec<String> = folders
        .iter()
        .filter(|folder| !spellings(folder).iter().any(|s| names(&text, s)))
        .map(|folder| format!("folder {}/", folder.display()))
        .collect();
    missing.extend(
        crates
            .iter()
            .filter(|(_, name)| !names(&text, &format!("`{name}`")))
            .map(|(dir, name)| format!("crate `{name}` ({})", dir.display())),
    );
    assert!(
        missing.is_empty(),
        "DESIGN.md does not name these (add each to its map, with what it holds):\n{}",
        missing.join("\n")
    );
    assert!(
        !crates.is_empty(),
        "no crate under crates/: DESIGN.md describes a workspace of layer crates"
    );
}

/// The paths DESIGN.md names from the root inside backquotes, such as `crates/ocflow-core/src/`
/// or `python/open_codex_lib/operations.json`.
fn named_paths(text: &str) -> BTreeSet<String> {
    const ROOTS: &[&str] = &[
        "src/",
        "crates/",
        "python/",
        "tests/",
        "scripts/",
        "docs/",
        "prompts/",
        "skills/",
        "examples/",
        "workspace-template/",
    ];
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|quoted| ROOTS.iter().any(|r| quoted.starts_with(r)))
        .filter(|quoted| !quoted.contains(|c: char| c.is_whitespace() || "*<>{}…".contains(c)))
        .map(|quoted| quoted.trim_end_matches([',', '.', ':']).to_string())
        .collect()
}

#[test]
fn every_path_design_names_exists() {
    let named = named_paths(&design());
    assert!(
        named.len() >= 10,
        "DESIGN.md names only {} paths from the root; its map should name its folders: {named:?}",
        named.len()
    );
    let gone: Vec<&String> = named.iter().filter(|p| !root().join(p).exists()).collect();
    assert!(
        gone.is_empty(),
        "DESIGN.md names paths that do not exist (moved or renamed?):\n{}",
        gone.iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_name_matcher_ignores_longer_names() {
    assert!(names(
        "`crates/ocflow-model/src/`",
        "crates/ocflow-model/src/"
    ));
    assert!(names("the `model/` layer", "model/"));
    assert!(!names("`crates/ocflow-model/`", "model/"));
    assert!(!names("`my_model/`", "model/"));
    assert!(!names("`/bin/sh -c`", "bin/"));
    assert!(!names("`src/cli/`", "cli/"));
    assert_eq!(
        spellings(Path::new("crates/ocflow-core/src/engine/executor")),
        vec![
            "crates/ocflow-core/src/engine/executor/".to_string(),
            "engine/executor/".to_string()
        ]
    );
    assert_eq!(
        spellings(Path::new("python/open_codex_lib/prompts")),
        vec![
            "python/open_codex_lib/prompts/".to_string(),
            "open_codex_lib/prompts/".to_string()
        ]
    );
}
