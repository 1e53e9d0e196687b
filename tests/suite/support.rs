//! Shared helpers: a temporary repository and workspace, the binary, and readers for the files
//! a flow leaves behind.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// A repository and a workspace in one temporary directory.
pub struct Sandbox {
    _dir: tempfile::TempDir,
    pub repo: PathBuf,
    pub workspace: PathBuf,
}

impl Sandbox {
    /// A repository holding `files` (path, content).
    pub fn new(files: &[(&str, &str)]) -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let repo = root.join("repo");
        let workspace = root.join("workspace");
        fs::create_dir_all(&repo).unwrap();
        // Commands are sandboxed: the one place outside their view they may write for a test
        // to see is `shared/`, allowed in the user config.
        fs::create_dir_all(root.join("shared")).unwrap();
        fs::create_dir_all(root.join("user-config/ocflow")).unwrap();
        fs::write(
            root.join("user-config/ocflow/config.toml"),
            format!(
                "[sandbox]\nwritable = [{:?}]\n",
                root.join("shared").display().to_string()
            ),
        )
        .unwrap();
        for (path, content) in files {
            let file = repo.join(path);
            fs::create_dir_all(file.parent().unwrap()).unwrap();
            fs::write(file, content).unwrap();
        }
        Sandbox {
            _dir: dir,
            repo,
            workspace,
        }
    }

    /// Adds lines to the test's user config (`~/.config/ocflow/config.toml`), whose
    /// `[sandbox]` table already allows `shared/`; `sandbox_lines` go into that table.
    pub fn configure_sandbox(&self, sandbox_lines: &str) {
        let path = self.root().join("user-config/ocflow/config.toml");
        let text = fs::read_to_string(&path).unwrap();
        let text = text.replacen("[sandbox]\n", &format!("[sandbox]\n{sandbox_lines}\n"), 1);
        fs::write(path, text).unwrap();
    }

    /// The test's `XDG_STATE_HOME`, where ocflow remembers each endpoint's answer form.
    pub fn state_home(&self) -> PathBuf {
        self.root().join("user-state")
    }

    /// A directory sandboxed commands may write, for files a test reads back.
    pub fn shared(&self) -> PathBuf {
        self.root().join("shared")
    }

    /// The temporary directory holding repo and workspace.
    pub fn root(&self) -> &Path {
        self.repo.parent().unwrap()
    }

    /// `ocflow` with `--repo` and `--workspace` set and a clean environment for the library.
    pub fn ocflow(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ocflow"));
        command
            .arg("--repo")
            .arg(&self.repo)
            .arg("--workspace")
            .arg(&self.workspace);
        for name in [
            "OCFLOW_CODEX_LIB",
            "OCFLOW_WORKSPACE",
            "OCFLOW_PYTHON_DIR",
            "OCFLOW_BASE_URL",
            "OPENAI_BASE_URL",
            "LLM_BASE_URL",
            "OCFLOW_MODEL",
            "LLM_MODEL",
            "OCFLOW_API_KEY",
            "OPENAI_API_KEY",
            "LLM_API_KEY",
        ] {
            command.env_remove(name);
        }
        // The test's own user config and state (the endpoints' answer forms), not the
        // machine's.
        command.env("XDG_CONFIG_HOME", self.root().join("user-config"));
        command.env("XDG_STATE_HOME", self.state_home());
        command
    }

    /// `ocflow()` talking to the OpenAI-compatible server at `base_url`, with model `m`.
    pub fn ocflow_llm(&self, base_url: &str) -> Command {
        let mut command = self.ocflow();
        command.args(["--base-url", base_url, "--model", "m"]);
        command
    }

    /// `program` with the environment `ocflow()` gives (no key, no endpoint, the test's user
    /// config), for starting ocflow through a shell or a wrapper, or without its arguments.
    pub fn command_like_ocflow(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let template = self.ocflow();
        let mut command = Command::new(program);
        for (name, value) in template.get_envs() {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        command
    }

    /// Writes a flow file next to the repository and returns its path.
    pub fn flow(&self, flow: &Value) -> PathBuf {
        let path = self.root().join("flow.json");
        fs::write(&path, serde_json::to_string_pretty(flow).unwrap()).unwrap();
        path
    }

    /// Runs `ocflow run --plan FLOW --task-id ID` and returns the output.
    pub fn run(&self, flow: &Value, task_id: &str) -> std::process::Output {
        let plan = self.flow(flow);
        self.ocflow()
            .args(["run", "--task-id", task_id, "--plan"])
            .arg(plan)
            .output()
            .unwrap()
    }

    pub fn task_dir(&self, task_id: &str) -> PathBuf {
        self.workspace.join(task_id)
    }

    /// The task's exact status, as `ocflow status --json` gives it: `flow_status.json` with
    /// the steps journaled since it was written replayed onto it (issue 15: the file itself is
    /// rewritten at checkpoints, not at every step).
    pub fn status(&self, task_id: &str) -> Value {
        let output = self
            .ocflow()
            .args(["--json", "status", task_id])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "ocflow status {task_id}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    }

    pub fn step_status(&self, task_id: &str, step: &str) -> Value {
        let status = self.status(task_id);
        status["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == step)
            .cloned()
            .unwrap_or(Value::Null)
    }

    pub fn result(&self, task_id: &str, step: &str) -> Value {
        read_json(&self.task_dir(task_id).join(step).join("result.json"))
    }
}

pub fn read_json(path: &Path) -> Value {
    let text =
        fs::read_to_string(path).unwrap_or_else(|err| panic!("reading {}: {err}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Every file under `dir` with its content, by relative path.
pub fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    if !dir.exists() {
        return files;
    }
    for entry in walkdir::WalkDir::new(dir).min_depth(1) {
        let entry = entry.unwrap();
        if entry.file_type().is_file() {
            let relative = entry
                .path()
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .to_string();
            files.insert(relative, fs::read(entry.path()).unwrap());
        }
    }
    files
}

/// `tree` with text contents, for readable assertions.
pub fn text_tree(dir: &Path) -> BTreeMap<String, String> {
    tree(dir)
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
        .collect()
}

pub fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Asserts the exit code, showing the output when it is wrong.
#[track_caller]
pub fn assert_exit(output: &std::process::Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        stdout(output),
        stderr(output)
    );
}

/// Whether any process runs `program` with exactly these arguments (found by its command line,
/// so it works whatever PID namespace the process sees itself in).
pub fn running(command_line: &[&str]) -> bool {
    let wanted: Vec<u8> = command_line
        .iter()
        .flat_map(|a| a.bytes().chain([0]))
        .collect();
    fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        let stat = fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'));
        !zombie && fs::read(entry.path().join("cmdline")).is_ok_and(|line| line == wanted)
    })
}

/// Something a test needs from the machine that a developer's machine may lack.
///
/// Rust's test harness has no "skipped": a test that cannot run calls [`require`] (or
/// [`skip`]), which says so on stderr and in `skipped-tests.txt` under the test target's
/// temporary directory (`scripts/test` prints that list after the run, so a skip is seen even
/// though the harness hides a passing test's stderr). Under CI a component `.ci/run` installs
/// is never a skip: its absence fails the test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    /// bubblewrap able to make the namespaces ocflow uses (the sandbox's namespace layer).
    Bubblewrap,
    /// tmux, the terminal the live-display tests watch.
    Tmux,
    /// Chromium, which renders `ocflow report`'s page headless.
    Chromium,
    /// Node.js, for the JavaScript checks (`.ci/run` does not install it).
    Node,
    /// util-linux's `script`, a pseudo-terminal without tmux (`.ci/run` does not install it).
    Script,
}

impl Component {
    /// Whether `.ci/run` installs it: then CI must have it.
    fn installed_by_ci(self) -> bool {
        matches!(
            self,
            Component::Bubblewrap | Component::Tmux | Component::Chromium
        )
    }

    /// What is missing and how to get it, for the skip line.
    fn missing(self) -> &'static str {
        match self {
            Component::Bubblewrap => {
                "bubblewrap cannot make namespaces here (apt-get install bubblewrap)"
            }
            Component::Tmux => "tmux is not installed (apt-get install tmux)",
            Component::Chromium => "no chromium on PATH (apt-get install chromium)",
            Component::Node => "node is not installed",
            Component::Script => "util-linux's `script` is not installed",
        }
    }

    fn present(self) -> bool {
        match self {
            Component::Bubblewrap => std::process::Command::new("bwrap")
                .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
                .args(["--unshare-pid", "--unshare-net", "--", "/bin/true"])
                .status()
                .is_ok_and(|s| s.success()),
            Component::Tmux => Command::new("tmux").arg("-V").output().is_ok(),
            Component::Chromium => chromium_path().is_some(),
            Component::Node => Command::new("node").arg("--version").output().is_ok(),
            Component::Script => Command::new("script").arg("--version").output().is_ok(),
        }
    }
}

/// Whether this run is CI's (`CI=true`, as CI services set it).
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| !matches!(value.as_str(), "" | "0" | "false"))
}

/// Whether `component` is here, for a test that checks one behaviour with it and another
/// without (nothing is skipped then). Under CI, a component `.ci/run` installs must be here.
pub fn available(component: Component) -> bool {
    let present = component.present();
    if !present && under_ci() && component.installed_by_ci() {
        panic!(
            "CI installs it (.ci/run) and this test needs it: {}",
            component.missing()
        );
    }
    present
}

/// Whether the running test can go on: `false`, with the test reported skipped, when
/// `component` is missing; a failure instead under CI when `.ci/run` installs it.
pub fn require(component: Component) -> bool {
    available(component) || {
        skip(component.missing());
        false
    }
}

/// Reports the running test skipped for `reason`, something `.ci/run` does not provide (a
/// tmpfs mount needs root, an overlay in a user namespace needs a kernel that allows it). The
/// caller returns at once.
pub fn skip(reason: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    let line = format!("SKIPPED: {test}: {reason}");
    eprintln!("{line}");
    // The harness shows a passing test's stderr only with --nocapture: the list is kept too.
    let list = Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped-tests.txt");
    let appended = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&list)
        .and_then(|mut file| std::io::Write::write_all(&mut file, format!("{line}\n").as_bytes()));
    if let Err(err) = appended {
        eprintln!("could not record the skip in {}: {err}", list.display());
    }
}

/// Chromium's path on PATH, if any.
pub fn chromium_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|path| path.is_file())
}

/// Whether bubblewrap can make the namespaces ocflow uses here (CI installs it; elsewhere the
/// sandbox falls back to Landlock alone, and the tests check that fallback instead).
pub fn namespaces_available() -> bool {
    available(Component::Bubblewrap)
}

/// A repository outside the temporary directories (which sandboxed commands may write): in
/// cargo's target directory, or in the home directory when the checkout itself is in /tmp.
pub fn sandbox_outside_tmp() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let writable = ["/tmp", "/var/tmp", "/dev/shm"];
    let candidates = [
        std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        std::path::PathBuf::from(std::env::var("HOME").unwrap()),
    ];
    let base = candidates
        .into_iter()
        .find(|dir| {
            dir.canonicalize()
                .is_ok_and(|real| !writable.iter().any(|w| real.starts_with(w)))
        })
        .expect("a directory outside /tmp for the sandbox test");
    let dir = tempfile::Builder::new()
        .prefix(".ocflow-sandbox-test-")
        .tempdir_in(base)
        .unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (repo, workspace) = (root.join("repo"), root.join("workspace"));
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    (dir, repo, workspace)
}

/// Runs git in `dir` as a test user (its name and email given); its stdout, the command
/// having succeeded.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Whether git in `dir` succeeds (a ref that may not exist).
pub fn git_succeeds(dir: &Path, args: &[&str]) -> bool {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
        .status
        .success()
}
