//! The evidence for a question's answer, asked of the model once its plan is valid: one shell
//! command whose output shows the answer (the function called with the question's input, its
//! result printed). The command runs before the answer's step, on the repository as it is, and
//! the step is given its output to agree with: an answer about what code does is otherwise the
//! model's guess from reading it (a real Qwen2.5-Coder-0.5B read `stats.py` and answered that
//! `summarize([])` returns a dictionary; it returns `None`).

use crate::flow::deliverables;
use crate::llm::reproduction::CommandQuestion;
use ocflow_model::flow::Flow;

/// The question for the evidence.
pub(crate) const EVIDENCE: CommandQuestion = CommandQuestion {
    ask: include_str!("../../../../prompts/evidence.md"),
    again: include_str!("../../../../prompts/evidence_again.md"),
    purpose: "evidence",
    what: "evidence for the answer",
    add: deliverables::require_evidence,
};

/// Whether the model should be asked for evidence: the flow answers a question by a step that
/// can be given a command's output (`analyze_code`'s `evidence_from_step`), none given yet.
pub(crate) fn wanted(flow: &Flow) -> bool {
    deliverables::evidence_target(flow).is_some()
}
