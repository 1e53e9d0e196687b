//! A broken rule of a flow: what validation reports, one per problem, naming the step and the
//! rule, so a person or a model can fix every problem in one go.

use std::fmt;

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The step at fault, when there is one.
    pub step: Option<String>,
    /// Short name of the rule (`id`, `operation`, `params`, `dependencies`, `cycle`,
    /// `reference`, `path`, `limits`, `format`, `version`).
    pub rule: &'static str,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.step {
            Some(step) => write!(f, "step {step}: {} [{}]", self.message, self.rule),
            None => write!(f, "flow: {} [{}]", self.message, self.rule),
        }
    }
}
