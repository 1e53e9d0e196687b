//! What recovery sees and checks (`Context`), the bounds it keeps (`Limits`, from
//! `[recovery]` in ocflow.toml), and what it decides (`Decided`): shared by the loop of answers
//! (`recovery.rs`) and its parts.

use crate::flow::path_rules::PathRules;
use crate::flow::policy::CommandPolicy;
use crate::flow::roles::Roles;
use crate::llm::client::Llm;
use crate::task::workspace::TaskDir;
use ocflow_model::decision::Decision;
use ocflow_model::flow::Flow;
use ocflow_model::llm::ModelSettings;
use ocflow_model::status::FlowStatus;
use ocflow_model::step_result::StepResult;

/// The bounds of recovery, from `[recovery]` in ocflow.toml.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Attempts of one step, all causes together.
    pub max_attempts_per_step: u32,
    /// Replans (new revisions of the remaining flow) per flow.
    pub max_revisions: u32,
    /// Strategies asked of the LLM per flow.
    pub max_recovery_calls: u32,
    /// Automatic retries of a transient failure, without asking the LLM.
    pub max_transient_retries: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_attempts_per_step: 3,
            max_revisions: 3,
            max_recovery_calls: 10,
            max_transient_retries: 2,
        }
    }
}

/// A decision and the flow it leads to (`None`: the flow does not change).
pub(crate) struct Decided {
    pub(crate) decision: Decision,
    pub(crate) flow: Option<Flow>,
    /// What ocflow changed in the proposed steps, to say (a reused id given a fresh one).
    pub(crate) notes: Vec<String>,
}

/// What recovery needs to see and check.
pub(crate) struct Context<'a> {
    pub(crate) llm: &'a Llm,
    pub(crate) settings: &'a ModelSettings,
    pub(crate) rules: &'a PathRules,
    pub(crate) task: &'a TaskDir,
    pub(crate) flow: &'a Flow,
    pub(crate) status: &'a FlowStatus,
    pub(crate) limits: Limits,
    /// What the commands of proposed steps may do.
    pub(crate) policy: CommandPolicy,
    /// Who may take the proposed steps.
    pub(crate) roles: &'a Roles,
    /// The failed step's result, when it got one (an exception or an engine fault leaves none).
    pub(crate) result: Option<&'a StepResult>,
    /// Past failures like this one and what ended them (the failure memory's section); empty
    /// without any.
    pub(crate) past_experience: &'a str,
}
