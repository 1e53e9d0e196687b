//! What an operation is, as the registry holds it: its parameters with their types and
//! meanings, how a step of it sees the repository, which earlier results it is given, and the
//! rest of its declaration (`declaration` reads one into this shape; `operations` holds them).

/// The JSON type a parameter must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParamType {
    String,
    Integer,
    Boolean,
}

impl ParamType {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ParamType::String => "a string",
            ParamType::Integer => "an integer",
            ParamType::Boolean => "true or false",
        }
    }

    pub(crate) fn accepts(self, value: &serde_json::Value) -> bool {
        match self {
            ParamType::String => value.is_string(),
            ParamType::Integer => value.is_i64() || value.is_u64(),
            ParamType::Boolean => value.is_boolean(),
        }
    }
}

/// What a parameter's value means, beyond its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParamMeaning {
    /// Free text (content, instructions).
    Text,
    /// A shell command. References in it reach the command as environment variables, never
    /// as shell code.
    Command,
    /// A file path relative to the repository; the file is staged into the step's `input/`.
    FilePath,
    /// A directory path relative to the repository (`.` is the root).
    DirPath,
    /// The id of an earlier step this one reads from; it must be an ancestor.
    StepRef,
    /// A number or flag.
    Setting,
}

/// One parameter of an operation.
#[derive(Debug)]
pub struct ParamSpec {
    pub name: &'static str,
    pub(crate) kind: ParamType,
    pub(crate) meaning: ParamMeaning,
    pub required: bool,
    pub doc: &'static str,
    /// Other names a step may give it by (the seed's prompt: `instructions_for_llm`).
    pub(crate) aliases: &'static [&'static str],
}

/// How a step of this operation sees the repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Only the files named in its parameters, staged into `input/`; it writes into `output/`.
    Files,
    /// A full view of the repository with all earlier changes applied; what it changes there is
    /// captured as its outputs.
    View,
}

/// One operation of `open_codex_lib`.
#[derive(Debug)]
pub struct OperationSpec {
    pub name: &'static str,
    pub doc: &'static str,
    pub params: &'static [ParamSpec],
    /// Groups of parameters of which exactly one must be given.
    pub exactly_one_of: &'static [&'static str],
    pub(crate) access: Access,
    pub needs_llm: bool,
    /// Whether it runs commands: a role that may run none may not use it.
    pub runs_commands: bool,
    /// The path parameters whose files the operation writes or deletes.
    pub writes: &'static [&'static str],
    /// Which earlier steps' results the operation is given (the instructions' `steps`).
    pub(crate) reads: Reads,
    /// Parameters whose presence makes a step of it call the LLM (`write_file`'s
    /// `instructions`).
    pub(crate) needs_llm_with: &'static [&'static str],
    /// Parameters without which the library may use the LLM (kept for the saved catalogue).
    pub(crate) may_use_llm_without: &'static [&'static str],
    /// It touches its view only through commands, so the view may be made of overlay layers.
    pub(crate) commands_only: bool,
    /// A failed step of it means the tests failed.
    pub(crate) runs_tests: bool,
    /// Its command shows the task's problem before any change (`reproduce`): it may depend on
    /// no step that changes files, and the same command must pass after every change.
    pub(crate) reproduces: bool,
    /// Whether the planner is offered it (its prompt and its answer's schema).
    pub(crate) offered: bool,
    /// The result field that holds what a step of it produced; the message when `None`.
    pub(crate) result: Option<&'static str>,
    /// Its last step that succeeded is the flow's answer when no step is marked.
    pub(crate) summarises: bool,
    /// A step of it deletes the files its `writes` parameters name.
    pub(crate) deletes: bool,
    /// The field of its result that answers a question about the files it is given: a step of
    /// it may give a flow's answer (`analyze_code`'s `summary`).
    pub(crate) answers: Option<&'static str>,
    /// The role a step of it gets when the flow names none.
    pub(crate) default_role: Option<&'static str>,
    /// The goal line of its steps' instructions: the first line that applies.
    pub(crate) goal: &'static [GoalLine],
    /// Whether the library declares it itself (not a plugin).
    pub(crate) builtin: bool,
    /// Where a plugin comes from (empty for the built-ins).
    pub(crate) source: &'static str,
    /// The library's function, `module:function`.
    pub(crate) implementation: &'static str,
}

/// One way to say what a step does: it applies when every parameter of `when` is given as
/// non-empty text; `{param}` in `text` stands for that parameter's text, on one line.
#[derive(Debug)]
pub(crate) struct GoalLine {
    pub(crate) when: &'static [&'static str],
    pub(crate) text: &'static str,
}

/// Which earlier results an operation receives (docs/step-contract.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Reads {
    /// Only the steps its step-reference parameters name (`content_from_step`).
    #[default]
    Named,
    /// The steps its step-reference parameters name or, when it names none, every step it
    /// depends on, directly or not (`generate_summary` summarises them all).
    NamedOrAncestors,
}

impl ParamSpec {
    /// The parameter's type as the library's registry names it (`path`, `step`, …).
    pub fn type_name(&self) -> &'static str {
        match (self.kind, self.meaning) {
            (_, ParamMeaning::FilePath) => "path",
            (_, ParamMeaning::DirPath) => "directory",
            (_, ParamMeaning::StepRef) => "step",
            (_, ParamMeaning::Command) => "command",
            (ParamType::Integer, _) => "integer",
            (ParamType::Boolean, _) => "boolean",
            (ParamType::String, _) => "string",
        }
    }
}

impl OperationSpec {
    pub(crate) fn param(&self, name: &str) -> Option<&'static ParamSpec> {
        self.params.iter().find(|p| p.name == name)
    }
}
