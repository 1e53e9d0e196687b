//! One fake OpenAI-compatible server for every test that needs an LLM: a real HTTP server
//! (wiremock) answering `POST /v1/chat/completions` from a script, one answer per request in
//! arrival order, and keeping every request for assertions.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// One scripted reply.
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

struct Script {
    replies: Mutex<VecDeque<Reply>>,
    refuse: Refuse,
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
        let Some(reply) = self.replies.lock().unwrap().pop_front() else {
            return ResponseTemplate::new(500)
                .set_body_string("the fake server has no more scripted answers");
        };
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
    _script: Arc<Script>,
}

impl FakeLlm {
    pub fn start(replies: Vec<Reply>) -> FakeLlm {
        FakeLlm::start_with(replies, Refuse::Nothing)
    }

    /// A server that answers 400 to any request carrying `response_format`.
    pub fn rejecting_response_format(replies: Vec<Reply>) -> FakeLlm {
        FakeLlm::start_with(replies, Refuse::AnyFormat)
    }

    /// A server like llama-cpp-python's: 500 to `json_schema`, a schema taken in `json_object`.
    pub fn refusing_json_schema(replies: Vec<Reply>) -> FakeLlm {
        FakeLlm::start_with(replies, Refuse::JsonSchema)
    }

    fn start_with(replies: Vec<Reply>, refuse: Refuse) -> FakeLlm {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let script = Arc::new(Script {
            replies: Mutex::new(replies.into()),
            refuse,
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
            _script: script,
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
}

struct ScriptRef(Arc<Script>);

impl Respond for ScriptRef {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.0.respond(request)
    }
}

/// The last user message of a request body.
pub fn last_user_message(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .unwrap_or_default()
}
