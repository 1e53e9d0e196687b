//! What a person sees: a real terminal (tmux) watching a multi-step run against a slow model —
//! the planning spinner, the plan, a live step line, the end of the run with the next commands;
//! and no escape code at all where colour does not belong (`NO_COLOR`, a pipe).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use super::fake_llm::{FakeLlm, Reply, chat};
use super::support::*;

const TASK: &str = "make greet.py greet loudly";

/// A flow of three steps whose planning and code step each take `delay`.
fn slow_llm(delay: Duration) -> FakeLlm {
    let plan = json!({"steps": [
        {"id": "read", "operation": "read_file", "params": {"file_path": "greet.py"}},
        {"id": "shout", "operation": "modify_code", "depends_on": ["read"],
         "params": {"file_path": "greet.py", "instructions": "print in capitals"}},
        {"id": "check", "operation": "execute_shell_command", "depends_on": ["shout"],
         "params": {"command": "python3 greet.py"}}
    ]});
    FakeLlm::in_order(vec![
        Reply::SlowChat {
            content: plan.to_string(),
            delay,
        },
        Reply::SlowChat {
            content: "```python\nprint(\"HELLO\")\n```".into(),
            delay,
        },
        chat("greet.py now prints HELLO."),
    ])
}

/// A script that runs ocflow as the sandbox's `ocflow()` would, from a shell.
fn script(sandbox: &Sandbox, llm: &FakeLlm, extra_env: &str) -> std::path::PathBuf {
    let mut lines = vec!["#!/bin/sh".to_string()];
    let template = sandbox.ocflow_llm(&llm.base_url());
    for (name, value) in template.get_envs() {
        let name = name.to_string_lossy();
        match value {
            Some(value) => lines.push(format!("export {name}='{}'", value.to_string_lossy())),
            None => lines.push(format!("unset {name}")),
        }
    }
    lines.push(extra_env.to_string());
    let args: Vec<String> = template
        .get_args()
        .map(|a| format!("'{}'", a.to_string_lossy()))
        .collect();
    lines.push(format!(
        "'{}' {} run --task-id t '{TASK}'",
        env!("CARGO_BIN_EXE_ocflow"),
        args.join(" ")
    ));
    lines.push("echo __EXIT_$?__".into());
    lines.push("sleep 60".into());
    let path = sandbox.root().join("run.sh");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// tmux on a socket of its own, so a test never touches anyone's sessions.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(script: &Path) -> Option<Tmux> {
        let socket = format!("ocflow-test-{}-{}", std::process::id(), rand_suffix());
        let started = Command::new("tmux")
            .args([
                "-L",
                &socket,
                "new-session",
                "-d",
                "-s",
                "t",
                "-x",
                "120",
                "-y",
                "50",
            ])
            .arg(format!("sh {}", script.display()))
            .status();
        match started {
            Ok(status) if status.success() => Some(Tmux { socket }),
            _ => None,
        }
    }

    /// The screen, with escape codes when `escapes`.
    fn screen(&self, escapes: bool) -> String {
        let mut args = vec!["-L", &self.socket, "capture-pane", "-p", "-t", "t"];
        if escapes {
            args.push("-e");
        }
        let output = Command::new("tmux").args(args).output().unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Every screen seen until `done` holds of one, or the time runs out.
    fn watch(&self, escapes: bool, done: impl Fn(&str) -> bool) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(90);
        let mut screens = Vec::new();
        while Instant::now() < deadline {
            let screen = self.screen(escapes);
            let finished = done(&screen);
            screens.push(screen);
            if finished {
                break;
            }
            std::thread::sleep(Duration::from_millis(150));
        }
        screens
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64 % 1_000_000)
}

#[test]
fn a_terminal_shows_the_plan_live_steps_and_the_next_commands() {
    if !require(Component::Tmux) {
        return;
    }
    let sandbox = Sandbox::new(&[("greet.py", "print(\"hello\")\n")]);
    let llm = slow_llm(Duration::from_millis(2500));
    let tmux = Tmux::start(&script(&sandbox, &llm, "")).unwrap();
    let screens = tmux.watch(false, |s| s.contains("__EXIT_"));
    let last = screens.last().unwrap();
    assert!(last.contains("__EXIT_0__"), "{last}");
    let seen = |what: &str| screens.iter().any(|s| s.contains(what));
    // While the model plans: a spinner with its name.
    assert!(
        seen("planning with m…"),
        "no planning spinner in {screens:#?}"
    );
    // The plan, before it runs.
    for line in [
        "the plan, 3 step(s):",
        "1. read read_file greet.py",
        "(after read)",
    ] {
        assert!(last.contains(line), "{line} not in {last}");
    }
    // A live line for the step asking the model, with its elapsed time, while it runs.
    let elapsed = |line: &str| {
        line.split_whitespace().any(|w| {
            w.strip_suffix('s')
                .is_some_and(|n| n.parse::<u64>().is_ok())
        })
    };
    let live = screens.iter().any(|s| {
        s.lines()
            .any(|l| l.contains("shout modify_code as coder, asking m") && elapsed(l))
    });
    assert!(live, "no live step line in {screens:#?}");
    // Finished steps, then the end of the run with the next commands.
    for line in [
        "✓ shout",
        "✓ succeeded in",
        "greet.py now prints HELLO.",
        "1 file(s) changed, +1 -1",
        "next:",
        "ocflow diff t",
        "ocflow apply t",
    ] {
        assert!(last.contains(line), "{line} not in {last}");
    }
}

#[test]
fn no_escape_codes_with_no_color_or_without_a_terminal() {
    if !require(Component::Tmux) {
        return;
    }
    let sandbox = Sandbox::new(&[("greet.py", "print(\"hello\")\n")]);
    let llm = slow_llm(Duration::from_millis(300));
    let tmux = Tmux::start(&script(&sandbox, &llm, "export NO_COLOR=1")).unwrap();
    let screens = tmux.watch(true, |s| s.contains("__EXIT_"));
    let last = screens.last().unwrap();
    assert!(last.contains("__EXIT_0__"), "{last}");
    assert!(last.contains("next:"), "{last}");
    for screen in &screens {
        assert!(
            !screen.contains('\u{1b}'),
            "an escape code under NO_COLOR: {screen:?}"
        );
    }

    // Piped: the end of the run still prints, as plain text.
    let sandbox = Sandbox::new(&[("greet.py", "print(\"hello\")\n")]);
    let llm = slow_llm(Duration::from_millis(10));
    let output = sandbox
        .ocflow_llm(&llm.base_url())
        .args(["run", "--task-id", "t", TASK])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("ocflow apply t"),
        "{}",
        stdout(&output)
    );
    for text in [stdout(&output), stderr(&output)] {
        assert!(
            !text.contains('\u{1b}'),
            "an escape code in a pipe: {text:?}"
        );
    }
    // CLICOLOR_FORCE colours even a pipe.
    let sandbox = Sandbox::new(&[("greet.py", "print(\"hello\")\n")]);
    let llm = slow_llm(Duration::from_millis(10));
    let forced = sandbox
        .ocflow_llm(&llm.base_url())
        .env("CLICOLOR_FORCE", "1")
        .args(["run", "--task-id", "t", TASK])
        .output()
        .unwrap();
    assert!(stdout(&forced).contains('\u{1b}'), "{}", stdout(&forced));
}

/// What a task text or a command's file names could do to a terminal, they cannot: `status` and
/// `list` drop control characters and overrides from the task, `diff` (headers and `--stat`)
/// and the run's end report quote names as git does, so a newline in a name fakes no diff line
/// and an override shows no name reversed.
#[test]
fn escapes_in_the_task_and_in_file_names_do_not_reach_the_terminal() {
    let sandbox = Sandbox::new(&[("README.md", "# demo\n")]);
    let task = "tidy up\u{1b}]52;c;aGVsbG8=\u{7}\u{1b}[2J\u{9b}31m now \u{202E}gnp.exe";
    let command = concat!(
        "printf 'x\\n' > \"$(printf 'a\\nb.txt')\"; ",
        "printf 'y\\n' > \"$(printf '\\342\\200\\256txt.exe')\""
    );
    let flow = json!([{"id": "make", "operation": "execute_shell_command",
        "params": {"command": command}}]);
    let plan = sandbox.flow(&flow);
    let run = sandbox
        .ocflow()
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .arg("--")
        .arg(task)
        .output()
        .unwrap();
    assert_exit(&run, 0);
    let unsafe_char =
        |c: char| (c.is_control() && c != '\n') || ('\u{202A}'..='\u{202E}').contains(&c);
    let status = sandbox.ocflow().args(["status", "t"]).output().unwrap();
    let list = sandbox.ocflow().args(["list"]).output().unwrap();
    let diff = sandbox.ocflow().args(["diff", "t"]).output().unwrap();
    let stat = sandbox
        .ocflow()
        .args(["diff", "--stat", "t"])
        .output()
        .unwrap();
    for (what, output) in [
        ("run", &run),
        ("status", &status),
        ("list", &list),
        ("diff", &diff),
        ("diff --stat", &stat),
    ] {
        assert_exit(output, 0);
        for text in [stdout(output), stderr(output)] {
            assert!(!text.contains(unsafe_char), "{what} printed {text:?}");
        }
    }
    assert!(
        stdout(&status).contains("tidy up]52;c;aGVsbG8=[2J31m now gnp.exe"),
        "{}",
        stdout(&status)
    );
    assert!(stdout(&list).contains("tidy up"), "{}", stdout(&list));

    let diff = stdout(&diff);
    assert!(
        diff.contains("diff --git \"a/a\\nb.txt\" \"b/a\\nb.txt\"\n"),
        "{diff}"
    );
    assert!(diff.contains("+++ \"b/a\\nb.txt\"\n"), "{diff}");
    assert!(
        diff.contains("+++ \"b/\\342\\200\\256txt.exe\"\n"),
        "{diff}"
    );
    // No line of the diff is a piece of a name.
    assert!(
        !diff.lines().any(|line| line.starts_with("b.txt")),
        "{diff}"
    );
    assert!(stdout(&stat).contains("\"a\\nb.txt\""), "{}", stdout(&stat));
    assert!(
        stdout(&run).contains("\"\\342\\200\\256txt.exe\""),
        "{}",
        stdout(&run)
    );
}

/// At a real terminal (a pseudo-terminal made by util-linux's `script`), `status` and `diff`
/// through the pager let no escape sequence but colour through, though the task and a file's
/// content carry a clipboard write (OSC 52), a bell and a screen clear.
#[test]
fn at_a_terminal_only_colour_gets_through() {
    if !require(Component::Script) {
        return;
    }
    let sandbox = Sandbox::new(&[("README.md", "# demo\n")]);
    let evil = "\u{1b}]52;c;aGk=\u{7}\u{1b}[2J";
    let command = "printf 'hello\\033]52;c;aGk=\\007\\033[2J\\n' > evil.txt";
    let flow = json!([{"id": "make", "operation": "execute_shell_command",
        "params": {"command": command}}]);
    let plan = sandbox.flow(&flow);
    let run = sandbox
        .ocflow()
        .args(["run", "--task-id", "t", "--plan"])
        .arg(plan)
        .arg("--")
        .arg(format!("clean up{evil}"))
        .output()
        .unwrap();
    assert_exit(&run, 0);
    let made = std::fs::read_to_string(sandbox.task_dir("t").join("final_output/evil.txt"));
    assert!(made.unwrap().contains(evil), "the file holds the escapes");
    for what in ["status t", "diff t"] {
        let line = format!(
            "{} --repo {} --workspace {} {what}",
            env!("CARGO_BIN_EXE_ocflow"),
            sandbox.repo.display(),
            sandbox.workspace.display()
        );
        let output = Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .env("PAGER", "cat")
            .env("TERM", "xterm-256color")
            .env("XDG_CONFIG_HOME", sandbox.root().join("user-config"))
            .env_remove("NO_COLOR")
            .output()
            .unwrap();
        assert_exit(&output, 0);
        let text = stdout(&output);
        assert!(
            text.contains("clean up") || text.contains("hello"),
            "{what}: {text:?}"
        );
        for bad in ["\u{1b}]", "\u{7}", "\u{1b}[2J"] {
            assert!(!text.contains(bad), "{what} let {bad:?} through: {text:?}");
        }
    }
}
