//! The step block of `open_codex_instructions.md`: what the host tells the library about one
//! step (docs/step-contract.md is the whole contract). The library reads only this block; the
//! Markdown around it is for people (`engine::instructions` renders both).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The instructions file format version.
pub(crate) const INSTRUCTIONS_VERSION: u32 = 1;

/// The machine-readable part of the instructions, for the library.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StepSpec {
    /// Format version; see `INSTRUCTIONS_VERSION`.
    pub(crate) version: u32,
    pub(crate) task_id: String,
    pub(crate) task: String,
    pub(crate) step_id: String,
    pub(crate) operation: String,
    pub(crate) role: Option<String>,
    /// Parameters with `@{outputs…}` references already resolved.
    pub(crate) params: Map<String, Value>,
    /// Relative to the instructions file's directory.
    pub(crate) input_dir: String,
    pub(crate) output_dir: String,
    /// The full repository view, for operations that need one; else `None`.
    pub(crate) work_dir: Option<String>,
    /// Repository-relative files staged under `input_dir`.
    pub(crate) input_files: Vec<String>,
    /// Earlier steps whose results this one is given, by id, in flow order (see
    /// `engine::instructions::earlier_steps`): each an `EarlierStep`.
    pub(crate) steps: Map<String, Value>,
    pub(crate) limits: Limits,
    /// Environment for commands: the values of references in `command` (`OCFLOW_REF_n`).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub(crate) env: Map<String, Value>,
    /// How commands are started, when they run in the sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) sandbox: Option<Sandbox>,
}

/// The sandbox launcher the library puts before every command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Sandbox {
    /// `ocflow sandbox-exec --write VIEW --write … --`
    pub(crate) launcher: Vec<String>,
    /// What confines the command, in one word (`namespaces+landlock`, `landlock`, …), reported
    /// in results as `sandbox`.
    pub(crate) kind: String,
    /// What holds, layer by layer, reported in results as `sandbox_layers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) layers: Option<SandboxLayers>,
    /// When the launcher mounts the view as an overlay on `work_dir` (which only the command
    /// sees), the directories it is made of, top first: the one the command's writes land in,
    /// then the read-only layers. Relative to the instructions file's directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) view_layers: Vec<String>,
}

/// What confines a command step, layer by layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SandboxLayers {
    /// PID, mount, network, IPC and UTS namespaces (bubblewrap).
    pub(crate) namespaces: bool,
    /// `off` (only loopback, TCP refused) or `on`.
    pub(crate) network: String,
    /// What Landlock enforces: `landlock`, `landlock-partial` or `none`.
    pub(crate) landlock: String,
    /// The process limit and how it is enforced: `256 (cgroup)`, `256 (rlimit)`.
    pub(crate) processes: String,
    /// The memory limit, in MiB.
    pub(crate) memory_mb: u64,
    /// How far it reaches: `8192 MiB per step (cgroup)`, or `8192 MiB per process (rlimit)`
    /// where no memory cgroup can be made.
    #[serde(default)]
    pub(crate) memory: String,
    /// `blocked` (a network namespace, or the socket filter) or `open` (the network allowed,
    /// or neither here).
    #[serde(default)]
    pub(crate) udp: String,
    /// How the user's tool caches are kept from change: `overlay` (read through a layer of
    /// the step's own) or `private` (empty caches of the step's own; the user's read-only).
    #[serde(default)]
    pub(crate) caches: String,
    /// Whether a layer is missing here (no namespaces, or Landlock only in part): other
    /// processes' environments and the host's sockets may then be within reach.
    pub(crate) partial: bool,
}

/// Limits the library enforces inside the step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Limits {
    pub(crate) timeout_seconds: u64,
    pub(crate) max_output_bytes: u64,
}

/// Where an earlier step's result and outputs are, relative to the instructions file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct EarlierStep {
    /// Its `result.json`.
    pub(crate) result: String,
    /// Its `output/` directory.
    pub(crate) output_dir: String,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The fenced block of docs/step-contract.md whose info string is `json <name>`.
    pub(crate) fn contract_block(name: &str) -> Value {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/step-contract.md");
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
