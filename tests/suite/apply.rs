//! `apply` writes the flow's changes into the repository, and refuses when the repository
//! changed since the flow read it.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::*;

fn editing_flow() -> Value {
    json!({"task": "edit", "steps": [
        {"id": "edit", "operation": "write_file",
         "params": {"file_path": "a.txt", "content": "new a\n"}},
        {"id": "add", "operation": "write_file",
         "params": {"file_path": "dir/b.txt", "content": "b\n"}},
        {"id": "remove", "operation": "delete_file", "params": {"file_path": "gone.txt"}}
    ]})
}

#[test]
fn apply_writes_adds_and_deletes_then_knows_it_is_done() {
    let sandbox = Sandbox::new(&[
        ("a.txt", "old a\n"),
        ("gone.txt", "bye\n"),
        ("keep.txt", "keep\n"),
    ]);
    assert_exit(&sandbox.run(&editing_flow(), "t"), 0);
    let output = sandbox.ocflow().args(["apply", "t"]).output().unwrap();
    assert_exit(&output, 0);
    assert_eq!(
        text_tree(&sandbox.repo),
        [
            ("a.txt", "new a\n"),
            ("dir/b.txt", "b\n"),
            ("keep.txt", "keep\n")
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    );
    assert!(sandbox.status("t")["applied_at"].is_string());
    let again = sandbox.ocflow().args(["apply", "t"]).output().unwrap();
    assert_exit(&again, 0);
    assert!(
        stderr(&again).contains("already holds the changes"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn apply_refuses_after_the_repository_changed_unless_forced() {
    let sandbox = Sandbox::new(&[("a.txt", "old a\n"), ("gone.txt", "bye\n")]);
    assert_exit(&sandbox.run(&editing_flow(), "t"), 0);
    std::fs::write(sandbox.repo.join("a.txt"), "someone else's work\n").unwrap();
    let before = tree(&sandbox.repo);
    let refused = sandbox.ocflow().args(["apply", "t"]).output().unwrap();
    assert_exit(&refused, 2);
    let err = stderr(&refused);
    assert!(
        err.contains("the repository changed since the flow read these files")
            && err.contains("  a.txt")
            && err.contains("--force"),
        "{err}"
    );
    assert!(
        !err.contains("gone.txt"),
        "unchanged files are not listed: {err}"
    );
    assert_eq!(
        tree(&sandbox.repo),
        before,
        "nothing may be written when apply refuses"
    );

    assert_exit(
        &sandbox
            .ocflow()
            .args(["apply", "t", "--force"])
            .output()
            .unwrap(),
        0,
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("a.txt")).unwrap(),
        "new a\n"
    );
    assert!(!sandbox.repo.join("gone.txt").exists());
}

#[test]
fn run_with_apply_applies_a_successful_flow() {
    let sandbox = Sandbox::new(&[("a.txt", "old a\n"), ("gone.txt", "bye\n")]);
    let plan = sandbox.flow(&editing_flow());
    let output = sandbox
        .ocflow()
        .args(["run", "--apply", "--task-id", "t", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("dir/b.txt")).unwrap(),
        "b\n"
    );
}

#[test]
fn a_failed_flow_is_not_applied() {
    let sandbox = Sandbox::new(&[("a.txt", "old a\n")]);
    let flow = json!([
        {"id": "edit", "operation": "write_file",
         "params": {"file_path": "a.txt", "content": "new\n"}},
        {"id": "fail", "operation": "execute_shell_command", "depends_on": "edit",
         "params": {"command": "exit 1"}}
    ]);
    assert_exit(&sandbox.run(&flow, "t"), 1);
    let output = sandbox.ocflow().args(["apply", "t"]).output().unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("is failed, not succeeded"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("a.txt")).unwrap(),
        "old a\n"
    );
}

/// A dangling symlink pointing out of the repository: refused at validation, and at apply when
/// planted after the run — before anything is written.
#[test]
fn a_dangling_symlink_out_of_the_repository_is_refused_at_validation_and_at_apply() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let outside = sandbox.root().join("outside-nowhere");
    std::os::unix::fs::symlink(&outside, sandbox.repo.join("dlink")).unwrap();
    let through_link = json!([
        {"id": "a", "operation": "write_file", "params": {"file_path": "aaa.txt", "content": "x"}},
        {"id": "d", "operation": "write_file",
         "params": {"file_path": "dlink/x.txt", "content": "x"}}
    ]);
    let refused = sandbox.run(&through_link, "v");
    assert_exit(&refused, 2);
    assert!(stderr(&refused).contains("dlink"), "{}", stderr(&refused));
    assert!(!outside.exists());

    let into_dir = json!([
        {"id": "a", "operation": "write_file", "params": {"file_path": "aaa.txt", "content": "x"}},
        {"id": "d", "operation": "write_file", "params": {"file_path": "d/x.txt", "content": "x"}}
    ]);
    assert_exit(&sandbox.run(&into_dir, "t"), 0);
    std::os::unix::fs::symlink(&outside, sandbox.repo.join("d")).unwrap();
    let before = tree(&sandbox.repo);
    let output = sandbox.ocflow().args(["apply", "t"]).output().unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("not applying anything"),
        "{}",
        stderr(&output)
    );
    assert_eq!(tree(&sandbox.repo), before, "nothing was written");
    assert!(!outside.exists());
}

/// A file planted where the flow needs a directory stops the apply before any write (it used
/// to write the other files, then fail).
#[test]
fn a_file_where_a_directory_must_be_stops_the_apply_before_any_write() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let flow = json!([
        {"id": "a", "operation": "write_file", "params": {"file_path": "aaa.txt", "content": "x"}},
        {"id": "p", "operation": "write_file", "params": {"file_path": "p/x.txt", "content": "x"}}
    ]);
    assert_exit(&sandbox.run(&flow, "t"), 0);
    std::fs::write(sandbox.repo.join("p"), "a file\n").unwrap();
    let before = tree(&sandbox.repo);
    let output = sandbox.ocflow().args(["apply", "t"]).output().unwrap();
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(err.contains("p/x.txt (needs p to be a directory)"), "{err}");
    assert_eq!(tree(&sandbox.repo), before, "nothing was written");
}

/// `apply TASK --repo OTHER` used to write into the task's own repository, silently.
#[test]
fn apply_into_another_repository_than_the_tasks_is_refused() {
    let sandbox = Sandbox::new(&[("a.txt", "old a\n"), ("gone.txt", "bye\n")]);
    assert_exit(&sandbox.run(&editing_flow(), "t"), 0);
    let other = sandbox.root().join("other");
    std::fs::create_dir(&other).unwrap();
    let before = tree(&sandbox.repo);
    let output = sandbox
        .command_like_ocflow(env!("CARGO_BIN_EXE_ocflow"))
        .arg("--repo")
        .arg(&other)
        .arg("--workspace")
        .arg(&sandbox.workspace)
        .args(["apply", "t"])
        .output()
        .unwrap();
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(err.contains("was made from the repository"), "{err}");
    assert_eq!(tree(&sandbox.repo), before);
    assert!(tree(&other).is_empty());
}

fn write(id: &str, path: &str, content: &str) -> Value {
    json!({"id": id, "operation": "write_file",
           "params": {"file_path": path, "content": content}})
}

/// With two flows waiting, a bare `apply` lists them and writes nothing (it used to take the
/// most recent one, which need not be the one just reviewed); with one waiting, it applies it.
#[test]
fn apply_without_a_task_id_never_picks_silently() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    assert_exit(
        &sandbox.run(&json!([write("w", "one.txt", "1\n")]), "first"),
        0,
    );
    assert_exit(
        &sandbox.run(&json!([write("w", "two.txt", "2\n")]), "second"),
        0,
    );
    let before = tree(&sandbox.repo);
    let output = sandbox.ocflow().arg("apply").output().unwrap();
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(err.contains("first") && err.contains("second"), "{err}");
    assert!(err.contains("name the one you reviewed"), "{err}");
    assert_eq!(tree(&sandbox.repo), before);

    assert_exit(
        &sandbox.ocflow().args(["apply", "first"]).output().unwrap(),
        0,
    );
    let output = sandbox.ocflow().arg("apply").output().unwrap();
    assert_exit(&output, 0);
    assert!(
        sandbox.repo.join("two.txt").is_file(),
        "the one waiting is applied"
    );
}

/// `undo` puts back byte for byte what the last apply replaced: a modified file, a deleted
/// one, an added one in a new directory; it refuses files changed since, unless forced.
#[test]
fn undo_restores_the_repository_byte_for_byte() {
    let sandbox = Sandbox::new(&[
        ("a.txt", "old a\n"),
        ("gone.txt", "bye\n"),
        ("keep.txt", "keep\n"),
    ]);
    std::fs::write(sandbox.repo.join("blob.bin"), [0u8, 255, 1, 254]).unwrap();
    assert_exit(&sandbox.run(&editing_flow(), "t"), 0);
    let before = tree(&sandbox.repo);
    assert_exit(&sandbox.ocflow().args(["apply", "t"]).output().unwrap(), 0);
    assert_ne!(tree(&sandbox.repo), before);
    let undone = sandbox
        .ocflow()
        .args(["--json", "undo", "t"])
        .output()
        .unwrap();
    assert_exit(&undone, 0);
    assert_eq!(tree(&sandbox.repo), before, "the repository is as it was");
    assert!(
        !sandbox.repo.join("dir").exists(),
        "the directory the apply made is gone"
    );
    assert!(stdout(&undone).contains("\"type\":\"changes_undone\""));
    assert_eq!(sandbox.status("t")["applied_at"], Value::Null);

    // Applied again, then edited by hand: undo refuses, naming the file, unless forced.
    assert_exit(&sandbox.ocflow().args(["apply", "t"]).output().unwrap(), 0);
    std::fs::write(sandbox.repo.join("a.txt"), "my own edit\n").unwrap();
    let refused = sandbox.ocflow().args(["undo", "t"]).output().unwrap();
    assert_exit(&refused, 2);
    assert!(stderr(&refused).contains("a.txt"), "{}", stderr(&refused));
    assert_exit(
        &sandbox
            .ocflow()
            .args(["undo", "t", "--force"])
            .output()
            .unwrap(),
        0,
    );
    assert_eq!(tree(&sandbox.repo), before);
    let nothing = sandbox.ocflow().args(["undo", "t"]).output().unwrap();
    assert_exit(&nothing, 2);
    assert!(
        stderr(&nothing).contains("no apply to undo"),
        "{}",
        stderr(&nothing)
    );
}

/// `--only` and `--exclude` choose files; the rest can be applied later.
#[test]
fn apply_only_and_exclude_choose_the_files() {
    let sandbox = Sandbox::new(&[("a.txt", "old a\n"), ("gone.txt", "bye\n")]);
    assert_exit(&sandbox.run(&editing_flow(), "t"), 0);
    let only = sandbox
        .ocflow()
        .args(["apply", "t", "--only", "dir/"])
        .output()
        .unwrap();
    assert_exit(&only, 0);
    assert!(sandbox.repo.join("dir/b.txt").is_file());
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("a.txt")).unwrap(),
        "old a\n"
    );
    assert!(sandbox.repo.join("gone.txt").is_file());
    let rest = sandbox
        .ocflow()
        .args(["apply", "t", "--exclude", "gone.txt"])
        .output()
        .unwrap();
    assert_exit(&rest, 0);
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("a.txt")).unwrap(),
        "new a\n"
    );
    assert!(sandbox.repo.join("gone.txt").is_file(), "excluded");
    let unknown = sandbox
        .ocflow()
        .args(["apply", "t", "--only", "nope.txt"])
        .output()
        .unwrap();
    assert_exit(&unknown, 2);
    assert!(stderr(&unknown).contains("matches none of the changed files"));
}

/// `ocflow` with a committer's identity, for `apply --commit`.
fn with_identity(command: &mut std::process::Command) -> std::process::Output {
    command
        .env("GIT_AUTHOR_NAME", "T")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "T")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap()
}

/// `--commit` commits exactly the applied files, leaving what the user had staged alone.
#[test]
fn apply_commit_commits_exactly_the_applied_files() {
    let sandbox = Sandbox::new(&[("a.txt", "old a\n"), ("gone.txt", "bye\n")]);
    let git = |args: &[&str]| git(&sandbox.repo, args);
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "start"]);
    assert_exit(&sandbox.run(&editing_flow(), "t"), 0);
    std::fs::write(sandbox.repo.join("mine.txt"), "staged by me\n").unwrap();
    git(&["add", "mine.txt"]);
    let output = with_identity(sandbox.ocflow().args(["apply", "t", "--commit"]));
    assert_exit(&output, 0);
    let committed = git(&["show", "--name-status", "--format=%s%n%b", "HEAD"]);
    assert!(committed.starts_with("edit\n"), "{committed}");
    assert!(
        committed.contains("Applied by ocflow from task t."),
        "{committed}"
    );
    for line in ["M\ta.txt", "A\tdir/b.txt", "D\tgone.txt"] {
        assert!(committed.contains(line), "{line} in {committed}");
    }
    assert!(!committed.contains("mine.txt"), "{committed}");
    assert_eq!(git(&["diff", "--cached", "--name-only"]), "mine.txt\n");
}

/// Two applies of one task (`--only`, then the rest) are undone one at a time, the task still
/// counting as applied until the first one is undone too.
#[test]
fn undo_goes_back_one_apply_at_a_time() {
    let sandbox = Sandbox::new(&[("a.txt", "old a\n"), ("gone.txt", "bye\n")]);
    assert_exit(&sandbox.run(&editing_flow(), "t"), 0);
    let before = tree(&sandbox.repo);
    let apply = |args: &[&str]| {
        let output = sandbox.ocflow().args(args).output().unwrap();
        assert_exit(&output, 0);
    };
    apply(&["apply", "t", "--only", "dir/"]);
    let after_first = tree(&sandbox.repo);
    apply(&["apply", "t"]);
    apply(&["undo", "t"]);
    assert_eq!(tree(&sandbox.repo), after_first);
    assert!(
        sandbox.status("t")["applied_at"].is_string(),
        "the first apply still counts"
    );
    apply(&["undo", "t"]);
    assert_eq!(tree(&sandbox.repo), before);
    assert!(sandbox.status("t")["applied_at"].is_null());
}

/// The repository's files without `.git/`.
fn work_tree(repo: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    tree(repo)
        .into_iter()
        .filter(|(path, _)| !path.starts_with(".git/"))
        .collect()
}

/// A flow whose one command writes 400 files, changes README.md and deletes utils.py.
fn large_change_flow() -> Value {
    json!({"task": "generate", "steps": [
        {"id": "gen", "operation": "execute_shell_command", "params": {"command":
            "mkdir -p gen && for i in $(seq 1 400); do head -c 4000 /dev/zero | tr '\\0' x \
             > gen/f$i.bin; done && echo changed >> README.md && rm utils.py"}}
    ]})
}

/// Files beside the repository's own that an apply may have left: staged or set-aside copies.
fn leftovers(repo: &std::path::Path) -> Vec<String> {
    tree(repo)
        .into_keys()
        .filter(|path| path.contains(".ocflow-"))
        .collect()
}

/// `apply` killed at random moments (SIGKILL and SIGTERM, 24 times): after the next command
/// that touches the task, the repository is byte for byte the old tree or the new one, with
/// nothing beside it, and `undo` and a second `apply` tell the truth about it.
#[test]
fn apply_killed_at_any_moment_leaves_the_old_tree_or_the_new_one() {
    let sandbox = Sandbox::new(&[
        ("README.md", "# project\n"),
        ("utils.py", "def f():\n    return 1\n"),
        ("keep.txt", "keep\n"),
    ]);
    assert_exit(&sandbox.run(&large_change_flow(), "k"), 0);
    let old = tree(&sandbox.repo);
    let started = std::time::Instant::now();
    assert_exit(&sandbox.ocflow().args(["apply", "k"]).output().unwrap(), 0);
    let full = started.elapsed();
    let new = tree(&sandbox.repo);
    assert_eq!(
        new.len(),
        old.len() - 1 + 400,
        "400 added, utils.py deleted"
    );
    assert_exit(&sandbox.ocflow().args(["undo", "k"]).output().unwrap(), 0);
    assert_eq!(tree(&sandbox.repo), old);

    let next_commands: [&[&str]; 5] = [
        &["status", "k"],
        &["list"],
        &["diff", "k"],
        &["undo", "k"],
        &["apply", "k"],
    ];
    let (mut saw_old, mut saw_new) = (0, 0);
    // Kills that landed while files were being written: rolled back by the next command
    // (SIGKILL), or by the apply itself (SIGTERM, held while writing).
    let (mut rolled_back_later, mut rolled_back_itself) = (0, 0);
    for round in 0..24u32 {
        let mut child = sandbox.ocflow().args(["apply", "k"]).spawn().unwrap();
        // Spread over the whole apply, start to end.
        let wait = full.mul_f64(f64::from(round % 12) / 11.0);
        std::thread::sleep(wait);
        let signal = if round % 2 == 0 { "-KILL" } else { "-TERM" };
        std::process::Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        let killed = child.wait().unwrap();
        if killed.code() == Some(130) {
            rolled_back_itself += 1;
        }
        let next = next_commands[round as usize % next_commands.len()];
        let output = sandbox.ocflow().args(next).output().unwrap();
        if stderr(&output).contains("is rolled back") {
            rolled_back_later += 1;
        }
        let now = tree(&sandbox.repo);
        assert!(
            leftovers(&sandbox.repo).is_empty(),
            "round {round}: left beside the files: {:?}",
            leftovers(&sandbox.repo)
        );
        if now == new {
            saw_new += 1;
            // Applied whole: undo puts the old tree back.
            if next[0] != "undo" {
                let undone = sandbox.ocflow().args(["undo", "k"]).output().unwrap();
                assert_exit(&undone, 0);
            }
        } else {
            assert!(
                now == old,
                "round {round} ({signal} after {wait:?}, then {next:?}): the repository is \
                 neither the old tree nor the new one; {} files differ from the old\n{}",
                now.iter().filter(|(k, v)| old.get(*k) != Some(*v)).count()
                    + old.keys().filter(|k| !now.contains_key(*k)).count(),
                stderr(&output)
            );
            // `undo` as the next command: it took back an apply that was whole, or found
            // nothing to undo after the rollback.
            if next[0] == "undo" && output.status.code() == Some(0) {
                saw_new += 1;
            } else {
                saw_old += 1;
            }
            if next[0] == "undo" && output.status.code() != Some(0) {
                assert_exit(&output, 2);
                assert!(
                    stderr(&output).contains("no apply to undo"),
                    "{}",
                    stderr(&output)
                );
            }
        }
        assert_eq!(
            tree(&sandbox.repo),
            old,
            "round {round}: back to the old tree"
        );
    }
    assert!(saw_old > 0, "no kill came before the apply ended");
    eprintln!(
        "rolled back by the next command {rolled_back_later} times, by itself {rolled_back_itself}"
    );
    assert!(
        rolled_back_later + rolled_back_itself > 0,
        "no kill landed while files were being written"
    );
    // A complete apply after all these kills writes everything.
    let output = sandbox.ocflow().args(["apply", "k"]).output().unwrap();
    assert_exit(&output, 0);
    assert_eq!(tree(&sandbox.repo), new);
    eprintln!("old tree {saw_old} times, new tree {saw_new} times");
}

/// An apply interrupted half-way, left unrecovered, is rolled back by the next command that
/// touches the task, which says so.
#[test]
fn the_next_command_rolls_back_a_half_written_apply_and_says_so() {
    let sandbox = Sandbox::new(&[
        ("README.md", "# project\n"),
        ("utils.py", "def f():\n    return 1\n"),
    ]);
    assert_exit(&sandbox.run(&large_change_flow(), "k"), 0);
    let old = tree(&sandbox.repo);
    // Kill it once some files are in place but not all.
    let mut child = sandbox.ocflow().args(["apply", "k"]).spawn().unwrap();
    let started = std::time::Instant::now();
    while !sandbox.repo.join("gen").is_dir() && started.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let status = sandbox.ocflow().args(["status", "k"]).output().unwrap();
    assert_exit(&status, 0);
    let now = tree(&sandbox.repo);
    if now != old {
        // The apply had finished before the kill landed: nothing to roll back then.
        assert_eq!(now.len(), old.len() - 1 + 400);
        return;
    }
    assert!(
        stderr(&status).contains("rolled back"),
        "status says what it did: {}",
        stderr(&status)
    );
    let journal = std::fs::read_to_string(sandbox.task_dir("k").join("journal.jsonl")).unwrap();
    assert!(
        journal.contains("\"type\":\"apply_recovered\""),
        "{journal}"
    );
    let undo = sandbox.ocflow().args(["undo", "k"]).output().unwrap();
    assert_exit(&undo, 2);
    assert!(
        stderr(&undo).contains("no apply to undo"),
        "{}",
        stderr(&undo)
    );
}

/// `undo` after `apply --commit` removes that commit when HEAD is still it; with a commit
/// after it, `undo` refuses and names `git revert`.
#[test]
fn undo_after_apply_commit_removes_the_commit_or_names_git_revert() {
    let sandbox = Sandbox::new(&[("a.txt", "old a\n"), ("gone.txt", "bye\n")]);
    let git = |args: &[&str]| git(&sandbox.repo, args);
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "start"]);
    let start = git(&["rev-parse", "HEAD"]);
    assert_exit(&sandbox.run(&editing_flow(), "t"), 0);
    std::fs::write(sandbox.repo.join("mine.txt"), "staged by me\n").unwrap();
    git(&["add", "mine.txt"]);
    let before = work_tree(&sandbox.repo);
    assert_exit(
        &with_identity(sandbox.ocflow().args(["apply", "t", "--commit"])),
        0,
    );
    assert_ne!(git(&["rev-parse", "HEAD"]), start);
    let undone = with_identity(sandbox.ocflow().args(["undo", "t"]));
    assert_exit(&undone, 0);
    assert!(
        stderr(&undone).contains("removed the commit"),
        "{}",
        stderr(&undone)
    );
    assert_eq!(git(&["rev-parse", "HEAD"]), start, "the commit is gone");
    assert_eq!(work_tree(&sandbox.repo), before);
    assert_eq!(
        git(&["diff", "--cached", "--name-only"]),
        "mine.txt\n",
        "what the user had staged stays staged, nothing else is"
    );

    // Committed, then another commit on top: undo refuses and names `git revert`.
    git(&["reset", "-q"]);
    assert_exit(
        &with_identity(sandbox.ocflow().args(["apply", "t", "--commit"])),
        0,
    );
    let applied = git(&["rev-parse", "HEAD"]);
    std::fs::write(sandbox.repo.join("later.txt"), "later\n").unwrap();
    git(&["add", "later.txt"]);
    git(&["commit", "-q", "-m", "later"]);
    let after = work_tree(&sandbox.repo);
    let refused = with_identity(sandbox.ocflow().args(["undo", "t"]));
    assert_exit(&refused, 2);
    assert!(
        stderr(&refused).contains(&format!("git revert {}", applied.trim())),
        "{}",
        stderr(&refused)
    );
    assert_eq!(work_tree(&sandbox.repo), after, "nothing was touched");
}

/// `undo` refusing files edited since the apply names `ocflow undo --force`, not `apply --force`.
#[test]
fn undo_refusing_edited_files_names_undo_force() {
    let sandbox = Sandbox::new(&[("a.txt", "old a\n"), ("gone.txt", "bye\n")]);
    assert_exit(&sandbox.run(&editing_flow(), "t"), 0);
    assert_exit(&sandbox.ocflow().args(["apply", "t"]).output().unwrap(), 0);
    std::fs::write(sandbox.repo.join("a.txt"), "my own edit\n").unwrap();
    let refused = sandbox.ocflow().args(["undo", "t"]).output().unwrap();
    assert_exit(&refused, 2);
    let err = stderr(&refused);
    assert!(err.contains("ocflow undo t --force"), "{err}");
    assert!(!err.contains("apply t --force"), "{err}");
}

/// Issue 25: a failed flow can still hold good work: `apply --only PATH` writes the files of
/// its steps that succeeded, with a warning naming the failed steps; its summary never
/// suggests a plain `apply`, which is refused.
#[test]
fn apply_only_takes_good_work_from_a_failed_flow() {
    let sandbox = Sandbox::new(&[("a.txt", "old a\n")]);
    let flow = json!([
        {"id": "edit", "operation": "write_file",
         "params": {"file_path": "a.txt", "content": "new\n"}},
        {"id": "fail", "operation": "execute_shell_command", "depends_on": "edit",
         "params": {"command": "exit 1"}}
    ]);
    assert_exit(&sandbox.run(&flow, "t"), 1);
    let summary = std::fs::read_to_string(sandbox.task_dir("t").join("summary.md")).unwrap();
    assert!(!summary.contains("then `ocflow apply t`"), "{summary}");
    assert!(
        summary.contains("`ocflow apply t --only PATH`"),
        "{summary}"
    );
    let output = sandbox
        .ocflow()
        .args(["apply", "t", "--only", "a.txt"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert!(
        stderr(&output).contains("step(s) fail failed"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("a.txt")).unwrap(),
        "new\n"
    );
}

/// Issue 24: `apply` of a succeeded flow that changed nothing said "applies/1/apply.json: No
/// such file" (an internal error); it says there is nothing to apply and exits 0 — alone, with
/// `--commit`, after `run --apply`, and a second time.
#[test]
fn a_flow_that_changed_nothing_has_nothing_to_apply() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let flow = json!({"task": "Check that a.txt is there", "steps": [
        {"id": "read", "operation": "read_file", "params": {"file_path": "a.txt"}},
        {"id": "check", "operation": "execute_shell_command", "depends_on": "read",
         "params": {"command": "test -f a.txt"}}
    ]});
    assert_exit(&sandbox.run(&flow, "t"), 0);
    let before = tree(&sandbox.repo);
    for args in [
        &["apply", "t"][..],
        &["apply", "--commit", "t"],
        &["apply", "t"],
    ] {
        let output = sandbox.ocflow().args(args).output().unwrap();
        assert_exit(&output, 0);
        assert!(
            stderr(&output).contains("task t changed no file; nothing to apply"),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    assert_eq!(tree(&sandbox.repo), before);
    let plan = sandbox.flow(&flow);
    let output = sandbox
        .ocflow()
        .args(["run", "--apply", "--task-id", "u", "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert!(
        stderr(&output).contains("nothing to apply"),
        "{}",
        stderr(&output)
    );
    let undo = sandbox.ocflow().args(["undo", "t"]).output().unwrap();
    assert_exit(&undo, 2);
    assert!(
        stderr(&undo).contains("task t has no apply to undo"),
        "{}",
        stderr(&undo)
    );
    assert_eq!(tree(&sandbox.repo), before);
}

/// A flow that ended `no_change` (it did nothing the task asked) has nothing to apply either:
/// said plainly, exit 0, not "resume it".
#[test]
fn a_no_change_flow_has_nothing_to_apply() {
    let sandbox = Sandbox::new(&[("a.txt", "a\n")]);
    let flow = json!({"task": "Fix the typo in a.txt", "steps": [
        {"id": "read", "operation": "read_file", "params": {"file_path": "a.txt"}}
    ]});
    assert_exit(&sandbox.run(&flow, "t"), 1);
    assert_eq!(sandbox.status("t")["state"], json!("no_change"));
    let output = sandbox.ocflow().args(["apply", "t"]).output().unwrap();
    assert_exit(&output, 0);
    let err = stderr(&output);
    assert!(
        err.contains("task t finished without doing anything the task asked")
            && err.contains("nothing to apply")
            && !err.contains("resume"),
        "{err}"
    );
}

/// `apply --commit` and `undo` name files to git literally: an applied `src/[ab].rs` never
/// also commits the user's own edit of `src/a.rs` (git reads names as patterns by default).
#[test]
fn apply_commit_names_files_to_git_literally() {
    let sandbox = Sandbox::new(&[("src/a.rs", "fn a() {}\n")]);
    let git = |args: &[&str]| git(&sandbox.repo, args);
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "start"]);
    let flow = json!({"task": "write", "steps": [{"id": "w", "operation": "write_file",
        "params": {"file_path": "src/[ab].rs", "content": "fn ab() {}\n"}}]});
    assert_exit(&sandbox.run(&flow, "t"), 0);
    std::fs::write(sandbox.repo.join("src/a.rs"), "fn a() { /* mine */ }\n").unwrap();
    assert_exit(
        &with_identity(sandbox.ocflow().args(["apply", "t", "--commit"])),
        0,
    );
    let committed = git(&["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(committed.trim(), "src/[ab].rs", "{committed}");
    assert_eq!(
        git(&["diff", "--name-only"]).trim(),
        "src/a.rs",
        "still the user's"
    );
}

/// An apply journal naming a path outside the repository (edited by hand, or corrupt) is
/// refused by name: recovery reads and writes nothing through it.
#[test]
fn a_journal_naming_a_path_outside_the_repository_is_refused() {
    let sandbox = Sandbox::new(&[("a.txt", "old a\n"), ("gone.txt", "bye\n")]);
    assert_exit(&sandbox.run(&editing_flow(), "t"), 0);
    assert_exit(&sandbox.ocflow().args(["apply", "t"]).output().unwrap(), 0);
    let outside = sandbox.root().join("outside.txt");
    std::fs::write(&outside, "not the repository's\n").unwrap();
    let record = sandbox.task_dir("t").join("applies/1/apply.json");
    let mut journal: Value = read_json(&record);
    journal["stage"] = json!("writing");
    journal["files"]
        .as_array_mut()
        .unwrap()
        .push(json!({"path": "../outside.txt", "before": false, "after": false}));
    std::fs::write(&record, serde_json::to_string(&journal).unwrap()).unwrap();
    let status = sandbox.ocflow().args(["status", "t"]).output().unwrap();
    assert!(
        stderr(&status).contains("not a path inside the repository"),
        "{}",
        stderr(&status)
    );
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        "not the repository's\n"
    );
    let undo = sandbox.ocflow().args(["undo", "t"]).output().unwrap();
    assert_exit(&undo, 2);
    assert!(
        stderr(&undo).contains("not a path inside the repository"),
        "{}",
        stderr(&undo)
    );
    assert!(outside.exists());
}

/// An apply journal written by a newer ocflow (a version this one does not know) is refused,
/// naming its version and the fix, by recovery and by `undo` alike: never read as this
/// version's, so no file is put back on its word. A version no ocflow wrote is refused too.
#[test]
fn a_journal_of_a_newer_version_is_refused_by_name() {
    let sandbox = Sandbox::new(&[("a.txt", "old a\n"), ("gone.txt", "bye\n")]);
    assert_exit(&sandbox.run(&editing_flow(), "t"), 0);
    assert_exit(&sandbox.ocflow().args(["apply", "t"]).output().unwrap(), 0);
    let applied = tree(&sandbox.repo);
    let record = sandbox.task_dir("t").join("applies/1/apply.json");
    let mut journal: Value = read_json(&record);
    // Cut short, as a newer ocflow may leave it: this one must not roll it back.
    journal["version"] = json!(2);
    journal["stage"] = json!("writing");
    std::fs::write(&record, serde_json::to_string(&journal).unwrap()).unwrap();
    let newer = "applies/1/apply.json: apply journal version 2 was written by a newer ocflow \
                 (this one reads version 1): use that version of ocflow to recover or undo \
                 this apply";
    let status = sandbox.ocflow().args(["status", "t"]).output().unwrap();
    assert!(stderr(&status).contains(newer), "{}", stderr(&status));
    let undo = sandbox.ocflow().args(["undo", "t"]).output().unwrap();
    assert_exit(&undo, 2);
    assert!(stderr(&undo).contains(newer), "{}", stderr(&undo));
    assert_eq!(tree(&sandbox.repo), applied, "nothing was put back");

    journal["version"] = json!(0);
    std::fs::write(&record, serde_json::to_string(&journal).unwrap()).unwrap();
    let undo = sandbox.ocflow().args(["undo", "t"]).output().unwrap();
    assert_exit(&undo, 2);
    assert!(
        stderr(&undo).contains("apply journal version 0 is not one ocflow writes"),
        "{}",
        stderr(&undo)
    );
    assert_eq!(tree(&sandbox.repo), applied, "nothing was put back");
}

/// Issue 38: an apply the disk cannot hold said "free the disk …, then resume", where the next
/// command is the apply itself, and its code said `io`. It says no space now, and how to go on;
/// nothing is left half-written. The repository sits on a 1 MiB file system (bubblewrap's sized
/// tmpfs); the flow's change is 3 MB.
#[test]
fn an_apply_the_disk_cannot_hold_says_no_space_and_to_apply_again() {
    if !require(Component::Bubblewrap) {
        return;
    }
    let sandbox = Sandbox::new(&[]);
    let flow = json!([{"id": "big", "operation": "execute_shell_command",
        "params": {"command": "head -c 3000000 /dev/zero > big.bin"}}]);
    assert_exit(&sandbox.run(&flow, "t"), 0);
    let ocflow = sandbox.ocflow();
    let args: Vec<String> = ocflow
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .chain(["--json", "apply", "t"].map(String::from))
        .collect();
    let mut command = sandbox.command_like_ocflow("bwrap");
    command
        .args(["--dev-bind", "/", "/", "--size", "1048576", "--tmpfs"])
        .arg(&sandbox.repo)
        .arg(env!("CARGO_BIN_EXE_ocflow"))
        .args(&args);
    let output = command.output().unwrap();
    assert_exit(&output, 1);
    let error: Value = stdout(&output)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == json!("error"))
        .unwrap_or_else(|| panic!("{}\n{}", stdout(&output), stderr(&output)));
    assert_eq!(error["code"], json!("no_space"), "{error}");
    let hint = error["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("`ocflow apply ID` for an apply"), "{error}");
}

/// Issue 38: `apply --commit` killed while it committed (files applied, all staged, HEAD
/// unchanged) left the staging behind, and `undo` put the files back but left them staged, so
/// the user's next plain `git commit` committed the undone changes. The commit phase is in the
/// apply's journal: the next command unstages what a kill left (the files stay applied), and
/// `undo` puts the index back as it was. A signal during the commit waits for it: it is made,
/// or not, never left half-staged. (The repository's own pre-commit hook kills ocflow, as a
/// signal at that moment would.)
#[test]
fn a_commit_cut_short_leaves_nothing_staged_and_undo_puts_the_index_back() {
    let sandbox = Sandbox::new(&[("a.txt", "old a\n"), ("gone.txt", "bye\n")]);
    let git = |args: &[&str]| git(&sandbox.repo, args);
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "start"]);
    assert_exit(&sandbox.run(&editing_flow(), "t"), 0);
    let hook = sandbox.repo.join(".git/hooks/pre-commit");
    // The hook's parent is git, git's is ocflow.
    std::fs::write(
        &hook,
        "#!/bin/sh\nkill -9 \"$(ps -o ppid= -p \"$PPID\" | tr -d ' ')\"\nsleep 5\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let killed = with_identity(sandbox.ocflow().args(["apply", "t", "--commit"]));
    assert_eq!(killed.status.code(), None, "killed: {}", stderr(&killed));
    assert_eq!(
        git(&["log", "--format=%s"]),
        "start\n",
        "no commit was made"
    );
    assert_ne!(
        git(&["diff", "--cached", "--name-only"]),
        "",
        "the kill left it staged"
    );
    std::fs::remove_file(&hook).unwrap();
    // The next command finishes what the kill left: nothing staged, the files still applied.
    let status = sandbox.ocflow().args(["status", "t"]).output().unwrap();
    assert_exit(&status, 0);
    assert!(
        stderr(&status).contains("was cut short before it was made"),
        "{}",
        stderr(&status)
    );
    assert_eq!(git(&["diff", "--cached", "--name-only"]), "");
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("a.txt")).unwrap(),
        "new a\n"
    );
    // Staged again by hand, then undone: the index is as it was before the apply too.
    git(&["add", "-A"]);
    let undone = sandbox.ocflow().args(["undo", "t"]).output().unwrap();
    assert_exit(&undone, 0);
    assert_eq!(
        git(&["status", "--porcelain", "--", "a.txt", "gone.txt", "dir"]),
        ""
    );
    // SIGTERM while the hook runs: the commit is made, then ocflow ends with 130.
    assert_exit(
        &sandbox
            .ocflow()
            .args(["apply", "t", "--only", "a.txt"])
            .output()
            .unwrap(),
        0,
    );
    let undone = sandbox.ocflow().args(["undo", "t"]).output().unwrap();
    assert_exit(&undone, 0);
    std::fs::write(
        &hook,
        "#!/bin/sh\nkill -TERM \"$(ps -o ppid= -p \"$PPID\" | tr -d ' ')\"\nsleep 1\nexit 0\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let termed = with_identity(sandbox.ocflow().args(["apply", "t", "--commit"]));
    assert_exit(&termed, 130);
    assert!(
        stderr(&termed).contains("the commit is made"),
        "{}",
        stderr(&termed)
    );
    assert_eq!(git(&["log", "-1", "--format=%s"]), "edit\n");
    assert_eq!(git(&["diff", "--cached", "--name-only"]), "");
}
