//! One fake OpenAI-compatible server for every test that needs an LLM: a real HTTP server
//! (wiremock) answering `POST /v1/chat/completions` and keeping every request for assertions.
//!
//! It answers in one of two ways. With rules ([`FakeLlm::with_rules`]) a request gets the
//! answer of the first [`Rule`] its content matches, whatever order requests arrive in (steps
//! run in parallel), and each rule counts its calls. A request no rule matches gets a 500 naming
//! its prompt, and the test fails when the server is dropped (or at [`FakeLlm::verify`]).
//! The question for a reproduction that follows a valid plan for a change, and the question for
//! the evidence that follows a valid plan answering a question, are answered "none"
//! (`{"command": null}`) in either way, unless a [`Rule::reproduction`] or [`Rule::evidence`]
//! answers them.
//! In arrival order ([`FakeLlm::in_order`]) the Nth request gets the Nth reply: only for
//! requests that cannot overlap, where the order is what the test is about (a planner's re-asks,
//! the recovery rounds of one step, one request retried) or fixed by the flow (planning, then
//! steps that ask the model one after another, then the summary).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// One scripted reply.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A chat completion with this content and token usage (prompt, completion).
    Chat {
        content: String,
        usage: (u64, u64),
        finish_reason: &'static str,
    },
    /// Any HTTP status, body and headers.
    Raw {
        status: u16,
        body: String,
        headers: Vec<(&'static str, String)>,
    },
    /// A completion that arrives only after `delay`.
    Slow { delay: Duration },
    /// A chat completion with this content, after `delay`.
    SlowChat { content: String, delay: Duration },
}

/// A chat completion answering `content`, with usage 100 prompt + 10 completion tokens.
pub fn chat(content: &str) -> Reply {
    Reply::Chat {
        content: content.to_string(),
        usage: (100, 10),
        finish_reason: "stop",
    }
}

pub fn chat_with_usage(content: &str, prompt: u64, completion: u64) -> Reply {
    Reply::Chat {
        content: content.to_string(),
        usage: (prompt, completion),
        finish_reason: "stop",
    }
}

pub fn status(status: u16, body: &str) -> Reply {
    Reply::Raw {
        status,
        body: body.to_string(),
        headers: Vec::new(),
    }
}

/// The first line of ocflow's planner system prompt (`prompts/plan_system.md`).
const PLANNER_MARK: &str = "You are an expert software project manager.";
/// In ocflow's recovery prompt (`prompts/recovery.md`), whatever step failed.
const RECOVERY_MARK: &str = "Choose ONE strategy";
/// In ocflow's flow summary prompt (`prompts/summary.md`).
const SUMMARY_MARK: &str = "Write a concise summary for the user";
/// The reflection's prompt, after a flow that needed recovery (`prompts/reflection.md`).
const REFLECTION_MARK: &str = "Say what was learned";
/// In the question that follows a valid plan for a change (`prompts/reproduce.md`).
const REPRODUCTION_MARK: &str = "Before the plan runs, show the problem it is for.";
const EVIDENCE_MARK: &str = "Before the plan answers, show what the answer must agree with.";
/// In the question asked when the model's plans could not be used (`prompts/plan_shape.md`).
const SHAPE_MARK: &str = "Say what the task asks for:";
/// Where the recovery prompt shows the failed step as JSON, on the next line.
const FAILED_STEP_MARK: &str = "The failed step (attempt ";

/// What a request must hold for a rule to answer it.
#[derive(Clone, Debug)]
enum Condition {
    /// The last user message (what the tests call the prompt) contains this.
    PromptContains(String),
    /// Some message of the conversation (system, user or an earlier answer) contains this.
    ConversationContains(String),
    /// A recovery conversation about the step of this id: its recovery prompt shows the step
    /// as the failed one. The re-asks of that recovery keep the prompt, so they match too.
    RecoveryOf(String),
}

impl Condition {
    fn holds(&self, body: &Value) -> bool {
        match self {
            Condition::PromptContains(text) => last_user_message(body).contains(text.as_str()),
            Condition::ConversationContains(text) => {
                messages(body).any(|(_, content)| content.contains(text.as_str()))
            }
            Condition::RecoveryOf(id) => {
                let failed = format!("{{\"id\":{}", json!(id));
                messages(body)
                    .filter(|(role, _)| *role == "user")
                    .filter_map(|(_, content)| content.split_once(FAILED_STEP_MARK))
                    .filter_map(|(_, after)| after.split_once('\n'))
                    .any(|(_, step)| step.starts_with(&failed))
            }
        }
    }
}

/// How a rule answers the requests it matches.
#[derive(Clone, Debug)]
enum Answers {
    /// The same reply every time.
    Always(Reply),
    /// These replies, one per matching request in arrival order; a request past the last one
    /// is a test failure.
    InOrder(VecDeque<Reply>),
}

/// "A request whose content matches this gets that answer", with the number of calls it
/// expects. Build one with a matcher ([`Rule::prompt_contains`], [`Rule::planner`], ...),
/// narrow it with `and_...`, then give it its answer ([`Rule::reply`] or
/// [`Rule::replies_in_order`]).
#[derive(Clone, Debug)]
pub struct Rule {
    name: String,
    conditions: Vec<Condition>,
    answers: Answers,
    expected_calls: Option<usize>,
}

impl Rule {
    fn new(name: String, condition: Condition) -> Rule {
        Rule {
            name,
            conditions: vec![condition],
            // A rule given no answer fails the test when it matches (see `times(0)`).
            answers: Answers::InOrder(VecDeque::new()),
            expected_calls: None,
        }
    }

    /// Requests whose last user message contains `text`.
    pub fn prompt_contains(text: &str) -> Rule {
        Rule::new(
            format!("prompt contains {text:?}"),
            Condition::PromptContains(text.to_string()),
        )
    }

    /// Requests with `text` in any message: the system prompt, an earlier turn of a re-ask.
    pub fn conversation_contains(text: &str) -> Rule {
        Rule::new(
            format!("conversation contains {text:?}"),
            Condition::ConversationContains(text.to_string()),
        )
    }

    /// The planner's requests, its re-asks included.
    pub fn planner() -> Rule {
        Rule::conversation_contains(PLANNER_MARK).named("planner")
    }

    /// Every recovery request, whatever step failed, its re-asks included.
    pub fn recovery() -> Rule {
        Rule::conversation_contains(RECOVERY_MARK).named("recovery")
    }

    /// The recovery requests (re-asks included) for the failure of step `id`.
    pub fn recovery_of(id: &str) -> Rule {
        Rule::new(
            format!("recovery of step {id}"),
            Condition::RecoveryOf(id.to_string()),
        )
    }

    /// The request for the flow's closing summary (`summary.md`).
    pub fn flow_summary() -> Rule {
        Rule::conversation_contains(SUMMARY_MARK).named("flow summary")
    }

    /// The question for a command that shows the task's problem, after a valid plan for a
    /// change, and its re-ask. Unless a rule of this kind answers it, the server answers
    /// `{"command": null}` (no reproduction) without counting it against any other rule or
    /// reply.
    pub fn reproduction() -> Rule {
        Rule::conversation_contains(REPRODUCTION_MARK).named("reproduction")
    }

    /// The question for the evidence of a question's answer (`llm::evidence`), answered as a
    /// reproduction's question is.
    pub fn evidence() -> Rule {
        Rule::conversation_contains(EVIDENCE_MARK).named("evidence")
    }

    /// The question of what the task asks for (a change, an answer, a refusal), asked when no
    /// plan of the model's could be used and the task names files ocflow can plan on.
    pub fn plan_shape() -> Rule {
        Rule::conversation_contains(SHAPE_MARK).named("plan shape")
    }

    /// The reflection's request at the end of a flow that needed recovery.
    pub fn reflection() -> Rule {
        Rule::conversation_contains(REFLECTION_MARK).named("reflection")
    }

    /// Also requires `text` in any message (a re-ask's conversation holds the first prompt).
    pub fn and_conversation_contains(mut self, text: &str) -> Rule {
        self.name = format!("{}, conversation contains {text:?}", self.name);
        self.conditions
            .push(Condition::ConversationContains(text.to_string()));
        self
    }

    /// Also requires the last user message to contain `text`.
    pub fn and_prompt_contains(mut self, text: &str) -> Rule {
        self.name = format!("{}, prompt contains {text:?}", self.name);
        self.conditions
            .push(Condition::PromptContains(text.to_string()));
        self
    }

    /// The name the rule's calls are counted and reported under.
    pub fn named(mut self, name: &str) -> Rule {
        self.name = name.to_string();
        self
    }

    /// Answers every matching request with `reply`.
    pub fn reply(mut self, reply: Reply) -> Rule {
        self.answers = Answers::Always(reply);
        self
    }

    /// Answers the matching requests with `replies` in the order they arrive: for a sequence
    /// of one request (a retry, a re-ask) where the order is what the test is about. A request
    /// past the last reply is a failure.
    pub fn replies_in_order(mut self, replies: Vec<Reply>) -> Rule {
        self.answers = Answers::InOrder(replies.into());
        self
    }

    /// Expects exactly `n` matching requests, checked when the server is dropped or verified.
    /// `times(0)` with no answer says "the model is never asked this".
    pub fn times(mut self, n: usize) -> Rule {
        self.expected_calls = Some(n);
        self
    }

    fn is_reproduction(&self) -> bool {
        self.conditions.iter().any(|c| match c {
            Condition::ConversationContains(text) => {
                text == REPRODUCTION_MARK || text == EVIDENCE_MARK
            }
            _ => false,
        })
    }

    fn matches(&self, body: &Value) -> bool {
        self.conditions.iter().all(|c| c.holds(body))
    }
}

/// How the server chooses an answer.
enum Mode {
    /// One reply per request in arrival order; past the last one a 500 that names the prompt
    /// (some tests leave the flow summary unanswered on purpose, so this is not a failure).
    InOrder(VecDeque<Reply>),
    /// The first matching rule answers; `calls[i]` counts rule `i`'s requests.
    Rules { rules: Vec<Rule>, calls: Vec<usize> },
}

/// Which `response_format` the server refuses.
#[derive(Clone, Copy, PartialEq)]
enum Refuse {
    Nothing,
    /// Any, with a 400 (llama.cpp and some vLLM builds).
    AnyFormat,
    /// `json_schema`, with a 500 (llama-cpp-python's server), taking a schema in `json_object`.
    JsonSchema,
}

struct Script {
    mode: Mutex<Mode>,
    refuse: Refuse,
    /// What went against the rules: unmatched requests, requests past a rule's last reply.
    problems: Mutex<Vec<String>>,
    /// When each answered request arrived and when its answer was due (after its delay): the
    /// requests in flight at once, as the server saw them.
    spans: Mutex<Vec<(Instant, Instant)>>,
}

impl Script {
    /// The state even if a panicking test thread poisoned the lock: the server keeps answering
    /// and the report stays readable.
    fn mode(&self) -> MutexGuard<'_, Mode> {
        self.mode.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn problems(&self) -> MutexGuard<'_, Vec<String>> {
        self.problems.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The reply for `body`, or the text of a 500 saying why there is none.
    fn choose(&self, body: &Value) -> Result<Reply, String> {
        let prompt = excerpt(&last_user_message(body), 600);
        let mut mode = self.mode();
        // The question for a reproduction goes to a rule of its kind only (a planner rule matches
        // its conversation too), else gets "none".
        let reproduction = is_reproduction(body);
        let answered =
            |rules: &[Rule]| rules.iter().any(|r| r.is_reproduction() && r.matches(body));
        if reproduction && !matches!(&*mode, Mode::Rules { rules, .. } if answered(rules)) {
            return Ok(chat(r#"{"command": null}"#));
        }
        match &mut *mode {
            Mode::InOrder(replies) => replies.pop_front().ok_or_else(|| {
                format!("the fake LLM has no more scripted answers; the request's prompt: {prompt}")
            }),
            Mode::Rules { rules, calls } => {
                let fits = |r: &Rule| r.matches(body) && (!reproduction || r.is_reproduction());
                let Some(index) = rules.iter().position(fits) else {
                    let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
                    let problem = format!(
                        "no rule of the fake LLM matches this request (rules: {names:?}); \
                         its prompt: {prompt}"
                    );
                    self.problems().push(problem.clone());
                    return Err(problem);
                };
                calls[index] += 1;
                let rule = &mut rules[index];
                match &mut rule.answers {
                    Answers::Always(reply) => Ok(reply.clone()),
                    Answers::InOrder(replies) => replies.pop_front().ok_or_else(|| {
                        let problem = format!(
                            "the fake LLM's rule `{}` matched a request after its last reply \
                             (call {}); its prompt: {prompt}",
                            rule.name, calls[index]
                        );
                        self.problems().push(problem.clone());
                        problem
                    }),
                }
            }
        }
    }

    /// Unmatched requests and call counts that differ from a rule's `times`, one per line.
    fn report(&self) -> Vec<String> {
        let mut report = self.problems().clone();
        if let Mode::Rules { rules, calls } = &*self.mode() {
            for (rule, &count) in rules.iter().zip(calls) {
                if let Some(expected) = rule.expected_calls.filter(|&n| n != count) {
                    report.push(format!(
                        "the fake LLM's rule `{}` was expected {expected} time(s), matched {count}",
                        rule.name
                    ));
                }
            }
        }
        report
    }
}

impl Respond for Script {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        if self.refuse == Refuse::JsonSchema
            && body["response_format"]["type"] == json!("json_schema")
        {
            return ResponseTemplate::new(500).set_body_string("Internal Server Error");
        }
        if self.refuse == Refuse::AnyFormat && body.get("response_format").is_some() {
            return ResponseTemplate::new(400).set_body_json(json!({"error": {
                "message": "response_format is not supported",
                "type": "invalid_request_error", "param": null, "code": null
            }}));
        }
        let reply = match self.choose(&body) {
            Ok(reply) => reply,
            Err(why) => return ResponseTemplate::new(500).set_body_string(why),
        };
        let delay = match &reply {
            Reply::Slow { delay } | Reply::SlowChat { delay, .. } => *delay,
            _ => Duration::ZERO,
        };
        let arrived = Instant::now();
        self.spans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((arrived, arrived + delay));
        match reply {
            Reply::Chat {
                content,
                usage,
                finish_reason,
            } => {
                ResponseTemplate::new(200).set_body_json(completion(&content, usage, finish_reason))
            }
            Reply::Raw {
                status,
                body,
                headers,
            } => {
                let mut template = ResponseTemplate::new(status)
                    .set_body_raw(body.into_bytes(), "application/json");
                for (name, value) in headers {
                    template = template.insert_header(name, value.as_str());
                }
                template
            }
            Reply::Slow { delay } => ResponseTemplate::new(200)
                .set_body_json(completion("late", (1, 1), "stop"))
                .set_delay(delay),
            Reply::SlowChat { content, delay } => ResponseTemplate::new(200)
                .set_body_json(completion(&content, (100, 10), "stop"))
                .set_delay(delay),
        }
    }
}

fn completion(content: &str, (prompt, completion): (u64, u64), finish_reason: &str) -> Value {
    json!({
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion}
    })
}

/// The running server.
pub struct FakeLlm {
    runtime: tokio::runtime::Runtime,
    server: MockServer,
    script: Arc<Script>,
}

impl FakeLlm {
    /// Answers in arrival order: the Nth request gets `replies[N]`. Only where requests cannot
    /// overlap; where steps asking the model may run at once, use [`FakeLlm::with_rules`].
    pub fn in_order(replies: Vec<Reply>) -> FakeLlm {
        FakeLlm::start_with(Mode::InOrder(replies.into()), Refuse::Nothing)
    }

    /// Answers each request with the first rule (in the order given) its content matches.
    pub fn with_rules(rules: Vec<Rule>) -> FakeLlm {
        let calls = vec![0; rules.len()];
        FakeLlm::start_with(Mode::Rules { rules, calls }, Refuse::Nothing)
    }

    /// A server that answers 400 to any request carrying `response_format`, and the others
    /// with `replies` in arrival order.
    pub fn rejecting_response_format(replies: Vec<Reply>) -> FakeLlm {
        FakeLlm::start_with(Mode::InOrder(replies.into()), Refuse::AnyFormat)
    }

    /// A server like llama-cpp-python's: 500 to `json_schema`, a schema taken in `json_object`;
    /// the requests it takes get `replies` in arrival order.
    pub fn refusing_json_schema(replies: Vec<Reply>) -> FakeLlm {
        FakeLlm::start_with(Mode::InOrder(replies.into()), Refuse::JsonSchema)
    }

    fn start_with(mode: Mode, refuse: Refuse) -> FakeLlm {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let script = Arc::new(Script {
            mode: Mutex::new(mode),
            refuse,
            problems: Mutex::new(Vec::new()),
            spans: Mutex::new(Vec::new()),
        });
        let server = runtime.block_on(async {
            let server = MockServer::start().await;
            Mock::given(method("POST"))
                .and(path("/v1/chat/completions"))
                .respond_with(ScriptRef(script.clone()))
                .mount(&server)
                .await;
            server
        });
        FakeLlm {
            runtime,
            server,
            script,
        }
    }

    /// The base URL to give ocflow.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.runtime
            .block_on(self.server.received_requests())
            .unwrap_or_default()
    }

    /// Request bodies as JSON.
    pub fn bodies(&self) -> Vec<Value> {
        self.requests()
            .iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect()
    }

    /// The most requests in flight at once: answered requests whose arrival-to-answer spans
    /// (their replies' delays) overlapped. Replies without a delay count as instants.
    /// The bodies of every request but the questions for a reproduction (which follow a
    /// valid plan for a change): for tests about the other calls, in their order.
    pub fn bodies_except_reproduction(&self) -> Vec<Value> {
        self.bodies()
            .into_iter()
            .filter(|body| !is_reproduction(body))
            .collect()
    }

    pub fn max_in_flight(&self) -> usize {
        let spans = self.script.spans.lock().unwrap_or_else(|e| e.into_inner());
        // At equal times an answer leaves before the next request counts.
        let mut changes: Vec<(Instant, i32)> = spans
            .iter()
            .flat_map(|&(start, end)| [(start, 1), (end, -1)])
            .collect();
        changes.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        let (mut now, mut most) = (0i32, 0i32);
        for (_, change) in changes {
            now += change;
            most = most.max(now);
        }
        most as usize
    }

    /// How many requests the rule of this name answered (refusals of `response_format` are
    /// not counted: they never reach the rules).
    pub fn calls(&self, rule: &str) -> usize {
        match &*self.script.mode() {
            Mode::Rules { rules, calls } => {
                let index = rules.iter().position(|r| r.name == rule);
                let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
                calls[index.unwrap_or_else(|| panic!("no rule named {rule:?}: {names:?}"))]
            }
            Mode::InOrder(_) => panic!("this fake LLM answers in order: it has no rules"),
        }
    }

    /// Fails the test if a request matched no rule, a rule ran out of replies, or a rule's call
    /// count differs from its `times`. Dropping the server checks the same.
    pub fn verify(&self) {
        let report = self.script.report();
        assert!(report.is_empty(), "{}", report.join("\n"));
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        let report = self.script.report();
        if report.is_empty() {
            return;
        }
        // A second panic while the test is already failing would abort the whole test binary:
        // say it instead, next to the first failure.
        if std::thread::panicking() {
            eprintln!("the fake LLM also saw:\n{}", report.join("\n"));
        } else {
            panic!("{}", report.join("\n"));
        }
    }
}

struct ScriptRef(Arc<Script>);

impl Respond for ScriptRef {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.0.respond(request)
    }
}

/// The (role, content) of each message of a request body.
fn messages(body: &Value) -> impl Iterator<Item = (&str, &str)> {
    body["messages"].as_array().into_iter().flatten().map(|m| {
        (
            m["role"].as_str().unwrap_or_default(),
            m["content"].as_str().unwrap_or_default(),
        )
    })
}

/// The last user message of a request body.
/// Whether a request is the question for a reproduction, or its re-ask.
fn is_reproduction(body: &Value) -> bool {
    messages(body)
        .any(|(_, content)| content.contains(REPRODUCTION_MARK) || content.contains(EVIDENCE_MARK))
}

pub fn last_user_message(body: &Value) -> String {
    messages(body)
        .filter(|(role, _)| *role == "user")
        .last()
        .map(|(_, content)| content.to_string())
        .unwrap_or_default()
}

/// At most the last `limit` characters of `text`, marked where it was cut: prompts put what
/// is particular to a request (the task, the step's file) last, after their fixed text.
fn excerpt(text: &str, limit: usize) -> String {
    let count = text.chars().count();
    match text.char_indices().nth(count.saturating_sub(limit)) {
        Some((cut, _)) if cut > 0 => format!("…{} ({} bytes in all)", &text[cut..], text.len()),
        _ => text.to_string(),
    }
}

/// The fake itself, driven by ocflow: what a test sees when a request matches no rule or a
/// rule is called another number of times than it expects.
mod tests {
    use super::super::support::*;
    use super::*;

    const TASK: &str = "Create notes.txt saying hello";

    /// `ocflow plan TASK` against `llm`, asking once (no retry of a 500).
    fn plan(llm: &FakeLlm) -> std::process::Output {
        let sandbox = Sandbox::new(&[]);
        std::fs::create_dir_all(&sandbox.workspace).unwrap();
        std::fs::write(
            sandbox.workspace.join("ocflow.toml"),
            "[llm]\nmax_attempts = 1\n",
        )
        .unwrap();
        sandbox
            .ocflow_llm(&llm.base_url())
            .args(["plan", TASK])
            .output()
            .unwrap()
    }

    fn write_plan() -> Reply {
        chat(
            &json!({"steps": [{"id": "w", "operation": "write_file",
                "params": {"file_path": "notes.txt", "content": "hello\n"}}]})
            .to_string(),
        )
    }

    /// ocflow gets a 500 naming the prompt no rule matched (its error shows it, so a test's
    /// `assert_exit` message does), and the test fails when the server is dropped.
    #[test]
    #[should_panic(expected = "no rule of the fake LLM matches this request \
                               (rules: [\"flow summary\"]); its prompt: …")]
    fn a_request_no_rule_matches_gets_a_500_naming_its_prompt_and_fails_the_test() {
        let llm = FakeLlm::with_rules(vec![Rule::flow_summary().reply(chat("done"))]);
        let output = plan(&llm);
        assert_exit(&output, 1);
        let err = stderr(&output);
        assert!(
            err.contains("HTTP 500") && err.contains("Task: Create notes.txt saying hello"),
            "{err}"
        );
        assert_eq!(llm.calls("flow summary"), 0);
    }

    #[test]
    #[should_panic(expected = "the fake LLM's rule `planner` was expected 2 time(s), matched 1")]
    fn a_rule_called_another_number_of_times_than_it_expects_fails_the_test() {
        let llm = FakeLlm::with_rules(vec![Rule::planner().reply(write_plan()).times(2)]);
        assert_exit(&plan(&llm), 0);
        assert_eq!(llm.calls("planner"), 1);
    }

    #[test]
    #[should_panic(
        expected = "the fake LLM's rule `planner` matched a request after its last \
                               reply (call 2)"
    )]
    fn a_request_past_a_rules_last_reply_fails_the_test() {
        let llm = FakeLlm::with_rules(vec![
            Rule::planner().replies_in_order(vec![chat("not a plan")]),
        ]);
        // The planner asks again after the unusable answer and gets the 500.
        assert_exit(&plan(&llm), 1);
    }

    /// The first rule whose conditions all hold answers; the others are not called.
    #[test]
    fn the_first_matching_rule_answers_and_each_rule_counts_its_calls() {
        let llm = FakeLlm::with_rules(vec![
            Rule::planner()
                .and_prompt_contains("saying goodbye")
                .named("other task")
                .times(0),
            Rule::planner().reply(write_plan()).times(1),
            Rule::conversation_contains("Task: Create notes.txt")
                .named("shadowed")
                .reply(chat("never"))
                .times(0),
        ]);
        let output = plan(&llm);
        assert_exit(&output, 0);
        assert!(stdout(&output).contains("notes.txt"), "{}", stdout(&output));
        assert_eq!(
            (
                llm.calls("other task"),
                llm.calls("planner"),
                llm.calls("shadowed")
            ),
            (0, 1, 0)
        );
        llm.verify();
    }
}
