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
    /// What the kernel enforces (`landlock`, `landlock-partial`), reported in results.
    pub kind: String,
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
