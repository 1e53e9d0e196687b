//! The architecture, checked. Between crates the compiler holds it: `ocflow-model` and
//! `ocflow-sandbox` depend on no other crate of ocflow, `ocflow-core` on those two, the `ocflow`
//! package (the CLI) on all three, and a use that points up does not compile. Inside
//! `ocflow-core`, the layers are modules, checked here: every file belongs to a layer, no file
//! uses one of a higher layer, and no files use each other in a loop. Uses are read from the
//! source: every `crate::…` and `super::…` path, grouped imports (`use crate::{a::B, c::D}`,
//! over several lines as rustfmt writes them) included, resolved to the file defining the
//! module.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Layers from the bottom up; a file may use files of its own layer or of lower ones.
const LAYERS: &[(&str, usize)] = &[
    ("flow", 1),
    ("task", 2),
    ("llm", 3),
    ("engine", 4),
    ("lib.rs", 5),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/ocflow-core/src")
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
    let code: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = BTreeSet::new();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent_of(file))] {
        let mut rest = code.as_str();
        while let Some(at) = rest.find(prefix) {
            let preceded = rest[..at].chars().last();
            rest = &rest[at + prefix.len()..];
            if preceded.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            for path in use_tree(rest) {
                let mut full: Vec<&str> = base.iter().map(String::as_str).collect();
                full.extend(path.iter().map(String::as_str));
                if let Some(target) = module_file(&full)
                    && target != file
                {
                    found.insert(target);
                }
            }
        }
    }
    found
}

/// The paths a use tree names, read from its start: `a::b::{c, d::{e, f}}` gives `a::b::c`,
/// `a::b::d::e` and `a::b::d::f`; a plain path gives itself. Whitespace and newlines between
/// the parts are allowed, as rustfmt writes long groups.
fn use_tree(text: &str) -> Vec<Vec<String>> {
    fn parse(chars: &[char], at: &mut usize) -> Vec<Vec<String>> {
        let skip_space = |at: &mut usize| {
            while *at < chars.len() && chars[*at].is_whitespace() {
                *at += 1;
            }
        };
        let mut prefix = Vec::new();
        loop {
            skip_space(at);
            if chars.get(*at) == Some(&'{') {
                *at += 1;
                let mut paths = Vec::new();
                loop {
                    skip_space(at);
                    match chars.get(*at) {
                        None => return paths,
                        Some('}') => {
                            *at += 1;
                            return paths;
                        }
                        Some(',') => *at += 1,
                        Some(_) => {
                            let before = *at;
                            for sub in parse(chars, at) {
                                paths.push([prefix.clone(), sub].concat());
                            }
                            // Anything the parser does not read (`as x`, `self`) is skipped.
                            while *at < chars.len() && !matches!(chars[*at], ',' | '}') {
                                *at += 1;
                            }
                            if *at == before {
                                *at += 1;
                            }
                        }
                    }
                }
            }
            let start = *at;
            while *at < chars.len() && (chars[*at].is_alphanumeric() || chars[*at] == '_') {
                *at += 1;
            }
            if *at == start {
                return vec![prefix];
            }
            prefix.push(chars[start..*at].iter().collect());
            skip_space(at);
            if chars[*at..].starts_with(&[':', ':']) {
                *at += 2;
            } else {
                return vec![prefix];
            }
        }
    }
    let chars: Vec<char> = text.chars().collect();
    parse(&chars, &mut 0)
}

#[test]
fn grouped_uses_over_several_lines_are_read() {
    let paths =
        use_tree("{\n    engine::executor::Executor,\n    flow::{validate, roles::Role},\n};");
    let joined: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        joined,
        [
            "engine::executor::Executor",
            "flow::validate",
            "flow::roles::Role"
        ]
    );
    assert_eq!(
        use_tree("task::workspace::TaskDir;")[0].join("::"),
        "task::workspace::TaskDir"
    );
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
        executor.iter().any(|p| p.starts_with("task")),
        "{executor:?}"
    );
    let recovering = uses(Path::new("engine/executor/recovering.rs"));
    assert!(
        recovering.contains(Path::new("engine/executor.rs")),
        "{recovering:?}"
    );
}

#[test]
fn the_crates_depend_only_downward() {
    // The compiler holds what each manifest allows; this holds the manifests.
    let manifest = |dir: &str| {
        fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(dir)
                .join("Cargo.toml"),
        )
        .unwrap()
    };
    let ours = |text: &str| -> Vec<String> {
        let section = text.split("[dependencies]").nth(1).unwrap_or("");
        let section = section.split("\n[").next().unwrap_or("");
        section
            .lines()
            .filter_map(|line| line.split(['.', ' ', '=']).next())
            .filter(|name| name.starts_with("ocflow-"))
            .map(str::to_string)
            .collect()
    };
    assert!(ours(&manifest("crates/ocflow-model")).is_empty());
    assert!(ours(&manifest("crates/ocflow-sandbox")).is_empty());
    assert_eq!(
        ours(&manifest("crates/ocflow-core")),
        ["ocflow-model", "ocflow-sandbox"]
    );
}
