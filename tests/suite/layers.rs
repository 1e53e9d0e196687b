//! The architecture, checked. Between crates the compiler holds it: `ocflow-model` and
//! `ocflow-sandbox` depend on no other crate of ocflow, `ocflow-core` on those two, the `ocflow`
//! package (the CLI) on all three, and a use that points up does not compile. Inside a crate,
//! the layers are modules, checked here for `ocflow-core` (`crates/ocflow-core/src`) and the
//! command line (`src/`): every file belongs to a layer, no file uses one of a higher layer,
//! and no files use each other in a loop. Uses are read from the source: every `crate::…` and
//! `super::…` path, grouped imports (`use crate::{a::B, c::D}`, over several lines as rustfmt
//! writes them) included, resolved to the file defining the module.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A crate's source tree and its layers from the bottom up: each a path prefix (a file, or a
/// directory for every file under it) and its rank; a file may use files of its own layer or
/// of lower ones, and belongs to the layer of its longest prefix.
struct Tree {
    root: &'static str,
    layers: &'static [(&'static str, usize)],
}

const CORE: Tree = Tree {
    root: "crates/ocflow-core/src",
    layers: &[
        ("flow", 1),
        ("task", 2),
        ("llm", 3),
        ("engine", 4),
        ("lib.rs", 5),
    ],
};

/// The command line: what every command shares at the bottom, the commands at the top
/// (DESIGN.md §1).
const CLI: Tree = Tree {
    root: "src",
    layers: &[
        // Parsing and wording: the arguments, what each subcommand needs, the user's state.
        ("cli/args.rs", 1),
        ("cli/child_command.rs", 1),
        ("cli/git.rs", 1),
        ("cli/layered.rs", 1),
        ("cli/needs.rs", 1),
        ("cli/help_files.rs", 1),
        ("cli/words.rs", 1),
        ("cli/user_state.rs", 1),
        ("cli/held_signals.rs", 1),
        ("cli/mcp_stdio.rs", 1),
        // The configuration, resolved once.
        ("cli/profiles.rs", 2),
        ("cli/budget.rs", 2),
        ("cli/config.rs", 2),
        // Output to people and programs, and finding tasks.
        ("cli/live.rs", 3),
        ("cli/progress.rs", 3),
        ("cli/status_table.rs", 3),
        ("cli/follow.rs", 3),
        ("cli/ending.rs", 3),
        ("cli/tasks.rs", 3),
        ("cli/task_index.rs", 3),
        ("cli/branch.rs", 3),
        // What running a flow shares: the library, the client, the snapshot; the apply.
        ("cli/launch.rs", 4),
        ("cli/apply.rs", 4),
        // The questions asked of a person, and the executor run to an exit code.
        ("cli/gates.rs", 5),
        ("cli/execute.rs", 5),
        // The commands.
        ("cli/run.rs", 6),
        ("cli/resume.rs", 6),
        ("cli/approval.rs", 6),
        ("cli/review.rs", 6),
        ("cli/report.rs", 6),
        ("cli/report", 6),
        ("cli/wait.rs", 6),
        ("cli/clean.rs", 6),
        ("cli/detach.rs", 6),
        ("cli/batch", 6),
        ("cli/eval", 6),
        ("cli/demo.rs", 6),
        ("cli/doctor.rs", 6),
        ("cli/memory.rs", 6),
        ("cli/trust.rs", 6),
        ("cli/skill.rs", 6),
        ("cli/mcp_status.rs", 6),
        ("cli/mcp.rs", 6),
        ("cli/acp", 6),
        // Choosing the command, and the crate's entry points.
        ("cli/dispatch.rs", 7),
        ("cli/mod.rs", 7),
        ("lib.rs", 8),
        ("main.rs", 8),
        ("bin", 8),
    ],
};

impl Tree {
    fn src(&self) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(self.root)
    }

    fn layer_of(&self, file: &Path) -> usize {
        self.layers
            .iter()
            .filter(|(prefix, _)| file.starts_with(prefix))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, rank)| *rank)
            .unwrap_or_else(|| {
                panic!(
                    "{}/{} is in no layer; add it to the layers in tests/suite/layers.rs and \
                     DESIGN.md",
                    self.root,
                    file.display()
                )
            })
    }

    /// The file defining the module at `segments` (relative to the tree's root), using the
    /// longest prefix of `segments` that names a module file: the rest are items inside it.
    fn module_file(&self, segments: &[&str]) -> Option<PathBuf> {
        for len in (1..=segments.len()).rev() {
            let base: PathBuf = segments[..len].iter().collect();
            for candidate in [base.with_extension("rs"), base.join("mod.rs")] {
                if self.src().join(&candidate).is_file() {
                    return Some(candidate);
                }
            }
        }
        None
    }

    /// The files `file` uses.
    fn uses(&self, file: &Path) -> BTreeSet<PathBuf> {
        let text = fs::read_to_string(self.src().join(file)).unwrap();
        // A file's tests use it and what it uses (`use super::*`): the layers are the code's.
        let code: String = text
            .lines()
            .take_while(|line| line.trim() != "#[cfg(test)]")
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
                    if let Some(target) = self.module_file(&full)
                        && target != file
                    {
                        found.insert(target);
                    }
                }
            }
        }
        // A module's own children, named bare (`local::run` in `batch/mod.rs`).
        let children = code.lines().filter_map(|line| {
            let line = line.trim();
            let name = line.strip_suffix(';')?.rsplit_once("mod ")?.1;
            (line.starts_with("mod ") || line.starts_with("pub")).then_some(name)
        });
        let own = module_path(file);
        for child in children {
            let named = format!("{child}::");
            let bare = code.match_indices(&named).any(|(at, _)| {
                !code[..at]
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
            });
            let mut path: Vec<&str> = own.iter().map(String::as_str).collect();
            path.push(child);
            if bare && let Some(target) = self.module_file(&path) {
                found.insert(target);
            }
        }
        found
    }

    fn graph(&self) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
        let mut files = BTreeMap::new();
        for entry in walkdir::WalkDir::new(self.src()) {
            let entry = entry.unwrap();
            if entry.path().extension().is_some_and(|e| e == "rs") {
                let relative = entry.path().strip_prefix(self.src()).unwrap().to_path_buf();
                files.insert(relative.clone(), self.uses(&relative));
            }
        }
        files
    }

    /// Every use of a higher layer, one `file -> target` line each.
    fn upward_uses(&self) -> Vec<String> {
        let mut upward = Vec::new();
        for (file, targets) in self.graph() {
            for target in targets {
                if self.layer_of(&target) > self.layer_of(&file) {
                    upward.push(format!("{} -> {}", file.display(), target.display()));
                }
            }
        }
        upward
    }

    /// Every loop of files that use each other, one line each.
    fn loops(&self) -> Vec<String> {
        let graph = self.graph();
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
        loops
    }
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

fn parent_of(file: &Path) -> Vec<String> {
    let mut path = module_path(file);
    path.pop();
    path
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

#[test]
fn no_file_uses_a_higher_layer() {
    for tree in [CORE, CLI] {
        let upward = tree.upward_uses();
        assert!(
            upward.is_empty(),
            "uses of a higher layer in {}:\n{}",
            tree.root,
            upward.join("\n")
        );
    }
}

#[test]
fn no_files_use_each_other_in_a_loop() {
    for tree in [CORE, CLI] {
        let loops = tree.loops();
        assert!(
            loops.is_empty(),
            "files that use each other in a loop in {}:\n{}",
            tree.root,
            loops.join("\n")
        );
    }
}

#[test]
fn the_checker_sees_uses() {
    // The check itself must not go blind: known uses are found.
    let executor = CORE.uses(Path::new("engine/executor.rs"));
    assert!(
        executor.iter().any(|p| p.starts_with("task")),
        "{executor:?}"
    );
    let recovering = CORE.uses(Path::new("engine/executor/recovering.rs"));
    assert!(
        recovering.contains(Path::new("engine/executor.rs")),
        "{recovering:?}"
    );
    let run = CLI.uses(Path::new("cli/run.rs"));
    assert!(run.contains(Path::new("cli/launch.rs")), "{run:?}");
    let batch = CLI.uses(Path::new("cli/batch/mod.rs"));
    assert!(batch.contains(Path::new("cli/batch/local.rs")), "{batch:?}");
    assert_eq!(CLI.layer_of(Path::new("cli/batch/ray.rs")), 6);
    assert!(CLI.layer_of(Path::new("cli/launch.rs")) > CLI.layer_of(Path::new("cli/config.rs")));
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

/// The longest a function of the command line may be: a command that needs more is a second
/// engine growing, or several concepts in one place (issue 39).
const LONGEST_CLI_FUNCTION: usize = 150;

/// The functions of the Rust files under `dir` with their length in lines, from the line that
/// declares them to the brace that closes them at the same indentation, as rustfmt writes them.
fn function_lengths(dir: &Path) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for entry in walkdir::WalkDir::new(dir).into_iter().flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = fs::read_to_string(path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (at, line) in lines.iter().enumerate() {
            let code = line.trim_start();
            let indent = &line[..line.len() - code.len()];
            let declared = ["pub(crate) ", "pub(super) ", "pub ", "async ", "const "]
                .iter()
                .fold(code, |rest, prefix| {
                    rest.strip_prefix(prefix).unwrap_or(rest)
                });
            let Some(name) = declared.strip_prefix("fn ") else {
                continue;
            };
            let name: String = name
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let closing = format!("{indent}}}");
            // A declaration whose signature ends in `;` (a trait's) has no body.
            let signature_end = lines[at..]
                .iter()
                .find(|l| l.trim_end().ends_with('{') || l.trim_end().ends_with(';'));
            if signature_end.is_none_or(|l| l.trim_end().ends_with(';')) {
                continue;
            }
            let end = lines[at..].iter().position(|l| *l == closing);
            if let Some(end) = end {
                let file = path.strip_prefix(dir).unwrap().display();
                found.push((end + 1, format!("{file}: {name} (line {})", at + 1)));
            }
        }
    }
    found
}

#[test]
fn no_function_of_the_command_line_is_over_150_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli");
    let lengths = function_lengths(&src);
    // The check itself must not go blind: it finds the command line's functions.
    assert!(
        lengths.iter().any(|(_, f)| f.starts_with("run.rs: plan ")),
        "{lengths:?}"
    );
    let long: Vec<String> = lengths
        .iter()
        .filter(|(lines, _)| *lines > LONGEST_CLI_FUNCTION)
        .map(|(lines, f)| format!("{f}: {lines} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "functions over {LONGEST_CLI_FUNCTION} lines in src/cli/ (split them by what they do):\n{}",
        long.join("\n")
    );
}
