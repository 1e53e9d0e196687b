//! The step block of `open_codex_instructions.md`: what the host tells the library about one
//! step (docs/step-contract.md is the whole contract). The library reads only this block; the
//! Markdown around it is for people (`engine::instructions` renders both).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The instructions file format version.
pub const INSTRUCTIONS_VERSION: u32 = 1;

/// The machine-readable part of the instructions, for the library.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepSpec {
    /// Format version; see `INSTRUCTIONS_VERSION`.
    pub version: u32,
    pub task_id: String,
    pub task: String,
    pub step_id: String,
    pub operation: String,
    pub role: Option<String>,
    /// Parameters with `@{outputs…}` references already resolved.
    pub params: Map<String, Value>,
    /// Relative to the instructions file's directory.
    pub input_dir: String,
    pub output_dir: String,
    /// The full repository view, for operations that need one; else `None`.
    pub work_dir: Option<String>,
    /// Repository-relative files staged under `input_dir`.
    pub input_files: Vec<String>,
    /// Earlier steps whose results this one is given, by id, in flow order (see
    /// `engine::instructions::earlier_steps`): each an `EarlierStep`.
    pub steps: Map<String, Value>,
    pub limits: Limits,
    /// Environment for commands: the values of references in `command` (`OCFLOW_REF_n`).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub env: Map<String, Value>,
    /// How commands are started, when they run in the sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Sandbox>,
}

/// The sandbox launcher the library puts before every command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sandbox {
    /// `ocflow sandbox-exec --write VIEW --write … --`
    pub launcher: Vec<String>,
    /// What confines the command, in one word (`namespaces+landlock`, `landlock`, …), reported
    /// in results as `sandbox`.
    pub kind: String,
    /// What holds, layer by layer, reported in results as `sandbox_layers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<SandboxLayers>,
    /// When the launcher mounts the view as an overlay on `work_dir` (which only the command
    /// sees), the directories it is made of, top first: the one the command's writes land in,
    /// then the read-only layers. Relative to the instructions file's directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub view_layers: Vec<String>,
}

/// What confines a command step, layer by layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxLayers {
    /// Whether the command ran in bubblewrap's namespaces: mount, network, IPC, UTS, and PID
    /// unless `proc` is `shared`.
    pub namespaces: bool,
    /// Which `/proc` the command sees: `own` (a PID namespace and a fresh `/proc`: only the
    /// step's processes), `shared` (namespaces but no PID namespace: the container's `/proc`,
    /// where the kernel refuses a fresh one; other processes within reach), or `host`
    /// (no namespaces).
    #[serde(default)]
    pub proc: String,
    /// `off` (only loopback, TCP refused) or `on`.
    pub network: String,
    /// What Landlock enforces: `landlock`, `landlock-partial` or `none`.
    pub landlock: String,
    /// The process limit and how it is enforced: `256 (cgroup)`, `256 (rlimit)`.
    pub processes: String,
    /// The memory limit, in MiB.
    pub memory_mb: u64,
    /// How far it reaches: `8192 MiB per step (cgroup)`, or `8192 MiB per process (rlimit)`
    /// where no memory cgroup can be made.
    #[serde(default)]
    pub memory: String,
    /// `blocked` (a network namespace, or the socket filter) or `open` (the network allowed,
    /// or neither here).
    #[serde(default)]
    pub udp: String,
    /// How the user's tool caches are kept from change: `overlay` (read through a layer of
    /// the step's own) or `private` (empty caches of the step's own; the user's read-only).
    #[serde(default)]
    pub caches: String,
    /// `dropped`: the command holds no capability in any set, and `no_new_privs` keeps an exec
    /// from gaining one (bubblewrap's user namespace, or the launcher without one).
    #[serde(default)]
    pub capabilities: String,
    /// Whether a crashing command may write a core dump: never under the launcher (its
    /// `RLIMIT_CORE` is 0, soft and hard), so no `core` file lands in the view.
    #[serde(default)]
    pub core_dumps: bool,
    /// Whether a layer is missing here (no namespaces, or Landlock only in part): other
    /// processes' environments and the host's sockets may then be within reach.
    pub partial: bool,
}

/// Limits the library enforces inside the step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    pub timeout_seconds: u64,
    pub max_output_bytes: u64,
}

/// Where an earlier step's result and outputs are, relative to the instructions file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EarlierStep {
    /// Its `result.json`.
    pub result: String,
    /// Its `output/` directory.
    pub output_dir: String,
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// The fenced block of docs/step-contract.md whose info string is `json <name>`.
    pub fn contract_block(name: &str) -> Value {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/step-contract.md");
        let text = std::fs::read_to_string(path).unwrap();
        let opening = format!("```json {name}\n");
        let start = text.find(&opening).unwrap() + opening.len();
        let end = start + text[start..].find("\n```").unwrap();
        serde_json::from_str(&text[start..end]).unwrap()
    }

    #[test]
    fn the_documented_step_block_is_exactly_what_the_host_writes() {
        let example = contract_block("step-contract:instructions");
        let spec: StepSpec = serde_json::from_value(example.clone()).unwrap();
        // Every documented field is one StepSpec has, and back again: nothing lost or added.
        assert_eq!(serde_json::to_value(&spec).unwrap(), example);
        assert_eq!(spec.version, INSTRUCTIONS_VERSION);
        for earlier in spec.steps.values() {
            let _: EarlierStep = serde_json::from_value(earlier.clone()).unwrap();
        }
    }
}
