//! The flow's answer for the user: what a step produced when the flow is asked a question, not
//! only a change. The step the flow's answer deliverable names gives it, else the step marked
//! `final_answer` (seed 004's `isFinalAnswer`); without one, the last step that succeeded of an
//! operation that `summarises` (`generate_summary`: seed 002's closing step, whose text
//! otherwise stayed in its `result.json`). The text is the result field its operation declares
//! as its `result`.
//! Its text heads `summary.md`, the run's end at the terminal, and `flow_finished`.

use serde_json::Value;

use crate::flow::operations;
use crate::flow::seed_formats;
use crate::task::state;
use crate::task::workspace::TaskDir;
use ocflow_model::event::FinalAnswer;
use ocflow_model::flow::Flow;
use ocflow_model::status::{FlowStatus, StepState};

/// The most of an answer's text given (the whole is in the step's `result.json`).
const MAX_ANSWER_BYTES: usize = 16 * 1024;

/// The flow's answer, when a step gives one and succeeded. A result that cannot be read gives
/// none: the summary is written all the same.
pub fn find(task: &TaskDir, status: &FlowStatus, flow: &Flow) -> Option<FinalAnswer> {
    let succeeded = |id: &str| {
        status
            .step(id)
            .is_some_and(|s| s.status == StepState::Succeeded)
    };
    // The step the deliverables name as the answer's, else one marked, else a closing summary.
    let deliverable = flow
        .deliverables
        .as_ref()
        .and_then(|d| d.answer.as_ref())
        .and_then(|answer| flow.step(&answer.step))
        .filter(|s| succeeded(&s.id));
    let step = deliverable
        .or_else(|| {
            flow.steps
                .iter()
                .filter(|s| s.final_answer)
                .rfind(|s| succeeded(&s.id))
        })
        .or_else(|| {
            flow.steps
                .iter()
                .filter(|s| operations::find(&s.operation).is_some_and(|op| op.summarises))
                .rfind(|s| succeeded(&s.id))
        })?;
    let result = state::load_result(task, &step.id).ok().flatten()?;
    let field = seed_formats::result_data_field(&step.operation);
    let text = match result.fields.get(field) {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Null) | None => result.message.clone(),
        Some(other) => other.to_string(),
    };
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let mut end = text.len().min(MAX_ANSWER_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = if end < text.len() {
        "\n[… the rest is in the step's result.json]"
    } else {
        ""
    };
    Some(FinalAnswer {
        step: step.id.clone(),
        text: format!("{}{cut}", &text[..end]),
    })
}
