//! The architecture, checked: every file of `src/` belongs to a layer (DESIGN.md, "Layers"),
//! no file uses one of a higher layer, and no files use each other in a loop. Uses are read
//! from the source: every `crate::…` path and every `super::…` path, resolved to the file that
//! defines the module.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Layers from the bottom up; a file may use files of its own layer or of lower ones.
const LAYERS: &[(&str, usize)] = &[
    ("error.rs", 0),
    ("exit.rs", 0),
    ("output.rs", 0),
    ("model", 0),
    ("flow", 1),
    ("task", 2),
    ("llm", 3),
    ("engine", 4),
    ("cli", 5),
    ("lib.rs", 6),
    ("main.rs", 6),
    ("bin", 6),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn layer_of(file: &Path) -> usize {
    let first = file
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_str()
        .unwrap();
    LAYERS
        .iter()
        .find(|(name, _)| *name == first)
        .map(|(_, rank)| *rank)
        .unwrap_or_else(|| {
            panic!(
                "{} is in no layer; add it to LAYERS and DESIGN.md",
                file.display()
            )
        })
}

/// The file defining the module at `segments` (relative to `src/`), using the longest prefix of
/// `segments` that names a module file: the rest are items inside it.
fn module_file(segments: &[&str]) -> Option<PathBuf> {
    for len in (1..=segments.len()).rev() {
        let base: PathBuf = segments[..len].iter().collect();
        for candidate in [base.with_extension("rs"), base.join("mod.rs")] {
            if src().join(&candidate).is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// The module path of a file: `engine/executor.rs` is `engine::executor`.
fn module_path(file: &Path) -> Vec<String> {
    let mut parts: Vec<String> = file
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    parts
}

/// The files `file` uses.
fn uses(file: &Path) -> BTreeSet<PathBuf> {
    let text = fs::read_to_string(src().join(file)).unwrap();
    let mut found = BTreeSet::new();
    for line in text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
    {
        for (prefix, base) in [("crate::", Vec::new()), ("super::", parent_of(file))] {
            let mut rest = line;
            while let Some(at) = rest.find(prefix) {
                let preceded = rest[..at].chars().last();
                rest = &rest[at + prefix.len()..];
                if preceded.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .unwrap_or(rest.len());
                let mut segments: Vec<&str> = base.iter().map(String::as_str).collect();
                segments.extend(rest[..end].split("::").filter(|s| !s.is_empty()));
                // `crate::x::{a, b}`: each braced name may itself be a module.
                let braced = rest[end..].strip_prefix('{').map(|inner| {
                    inner[..inner.find('}').unwrap_or(inner.len())]
                        .split(',')
                        .map(|item| item.trim().split("::").next().unwrap_or("").to_string())
                        .collect::<Vec<_>>()
                });
                for name in braced.unwrap_or_else(|| vec![String::new()]) {
                    let mut full = segments.clone();
                    if !name.is_empty() {
                        full.push(&name);
                    }
                    if let Some(target) = module_file(&full)
                        && target != file
                    {
                        found.insert(target);
                    }
                }
            }
        }
    }
    found
}

fn parent_of(file: &Path) -> Vec<String> {
    let mut path = module_path(file);
    path.pop();
    path
}

fn graph() -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut files = BTreeMap::new();
    for entry in walkdir::WalkDir::new(src()) {
        let entry = entry.unwrap();
        if entry.path().extension().is_some_and(|e| e == "rs") {
            let relative = entry.path().strip_prefix(src()).unwrap().to_path_buf();
            files.insert(relative.clone(), uses(&relative));
        }
    }
    files
}

#[test]
fn no_file_uses_a_higher_layer() {
    let mut upward = Vec::new();
    for (file, targets) in graph() {
        for target in targets {
            if layer_of(&target) > layer_of(&file) {
                upward.push(format!("{} -> {}", file.display(), target.display()));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "uses of a higher layer:\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_files_use_each_other_in_a_loop() {
    let graph = graph();
    // Depth-first search; a back edge closes a loop, reported with its files.
    fn visit(
        file: &Path,
        graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        path: &mut Vec<PathBuf>,
        done: &mut BTreeSet<PathBuf>,
        loops: &mut Vec<String>,
    ) {
        if let Some(start) = path.iter().position(|p| p == file) {
            let cycle: Vec<String> = path[start..]
                .iter()
                .chain([&path[start]])
                .map(|p| p.display().to_string())
                .collect();
            loops.push(cycle.join(" -> "));
            return;
        }
        if !done.insert(file.to_path_buf()) {
            return;
        }
        path.push(file.to_path_buf());
        for next in graph.get(file).into_iter().flatten() {
            visit(next, graph, path, done, loops);
        }
        path.pop();
    }
    let mut loops = Vec::new();
    let mut done = BTreeSet::new();
    for file in graph.keys() {
        visit(file, &graph, &mut Vec::new(), &mut done, &mut loops);
    }
    assert!(
        loops.is_empty(),
        "files that use each other in a loop:\n{}",
        loops.join("\n")
    );
}

#[test]
fn the_checker_sees_uses() {
    // The check itself must not go blind: known uses are found.
    let executor = uses(Path::new("engine/executor.rs"));
    assert!(
        executor.iter().any(|p| p.starts_with("model")),
        "{executor:?}"
    );
    let recovering = uses(Path::new("engine/executor/recovering.rs"));
    assert!(
        recovering.contains(Path::new("engine/executor.rs")),
        "{recovering:?}"
    );
}
