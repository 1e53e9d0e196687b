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
        // The test's own user config, not the machine's.
        command.env("XDG_CONFIG_HOME", self.root().join("user-config"));
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

    pub fn status(&self, task_id: &str) -> Value {
        read_json(&self.task_dir(task_id).join("flow_status.json"))
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
