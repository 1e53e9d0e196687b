//! The LLM layer: the one client (retries, tokens, record/replay), the flow's budget every call
//! reserves from, the answer form each endpoint takes remembered across runs, the API key kept
//! out of every environment, what is redacted from every request, reading JSON out of a
//! model's answer, the planner that turns a task into a validated flow (its prompt laid out for
//! a server's prefix cache) and the plans it makes on the files a task names when the model
//! cannot plan, and the command it asks for that shows the task's problem.

pub mod answer;
pub mod answer_forms;
pub mod budget;
pub mod client;
pub(crate) mod evidence;
pub mod key;
pub(crate) mod plan_shapes;
pub mod planner;
pub mod planner_prompt;
pub(crate) mod recording;
pub mod redact;
pub mod reproduction;
pub(crate) mod response;
