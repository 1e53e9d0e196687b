//! The one LLM client: chat completions against any OpenAI-compatible endpoint through
//! async-openai, with exactly one retry loop (ours: async-openai's is not installed), typed
//! errors that say whether retrying can help, token accounting per purpose, and recording and
//! replaying of every exchange. The API key lives only in this struct's memory.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use crate::llm::{recording, response};
use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use serde_json::{Value, json};

use crate::llm::answer_forms;
use crate::llm::budget::Budget;
use crate::llm::key::ApiKey;
use crate::llm::redact::Redactor;
use ocflow_model::error::Error;
use ocflow_model::llm::{ChatAnswer, ChatRequest, DEFAULT_PROFILE, LlmError, LlmErrorKind, Usage};

/// Where and how to reach the endpoint.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The OpenAI-compatible base URL, ending in `/v1` usually.
    pub base_url: String,
    pub api_key: ApiKey,
    /// Time limit of one HTTP request.
    pub request_timeout: Duration,
    /// The config setting that gave `request_timeout`, named when a request times out
    /// ("request_timeout_seconds under [llm]").
    pub timeout_setting: String,
    pub retry: RetryPolicy,
}

/// The retry loop's bounds: attempts, total time, and the longest `Retry-After` honoured.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub max_elapsed: Duration,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    pub retry_after_cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            max_elapsed: Duration::from_secs(300),
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            retry_after_cap: Duration::from_secs(60),
        }
    }
}

/// The LLM as the rest of ocflow sees it.
pub struct Llm {
    backend: Backend,
    /// Tokens by purpose (`planner`, `summary`, `recovery`, a step id).
    usage: Mutex<BTreeMap<String, Usage>>,
    /// The model profile each purpose last asked.
    profiles: Mutex<BTreeMap<String, String>>,
    recorder: Option<Mutex<File>>,
    /// What comes out of every request before it leaves (keys, ignored files' content).
    redactor: Redactor,
    /// The flow's budget, once the command set one: every call reserves from it first.
    budget: OnceLock<Arc<Budget>>,
}

/// One endpoint: a profile's, or the default one.
struct Http {
    endpoint: Endpoint,
    client: reqwest::Client,
    /// The best answer form the endpoint has not refused (`Form` as a number): probed once,
    /// remembered for the rest of the run.
    form: AtomicU8,
    /// Set once an answer came in a JSON form: the probing is over.
    form_works: AtomicBool,
    /// Where the form found is remembered for the next runs (`answer_forms`); `None` keeps it
    /// in this process only.
    memory: Option<PathBuf>,
    /// Set when this process moved past a refused form: what it found is worth remembering.
    probed: AtomicBool,
    /// Set once the form found was remembered.
    remembered: AtomicBool,
}

/// How a wanted JSON shape is asked for, best first. An endpoint that refuses one form (OpenAI
/// and vLLM take `json_schema`; llama-cpp-python answers it with a 500 but enforces a schema
/// inside `json_object`; some servers take no `response_format` at all) is asked the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Form {
    JsonSchema = 0,
    JsonObjectWithSchema = 1,
    JsonObject = 2,
    Plain = 3,
}

impl Form {
    fn from_level(level: u8) -> Form {
        match level {
            0 => Form::JsonSchema,
            1 => Form::JsonObjectWithSchema,
            2 => Form::JsonObject,
            _ => Form::Plain,
        }
    }

    fn from_name(name: &str) -> Option<Form> {
        [
            Form::JsonSchema,
            Form::JsonObjectWithSchema,
            Form::JsonObject,
            Form::Plain,
        ]
        .into_iter()
        .find(|form| form.name() == name)
    }

    /// The form's name, as the journal records it.
    pub fn name(self) -> &'static str {
        match self {
            Form::JsonSchema => "json_schema",
            Form::JsonObjectWithSchema => "json_object with a schema",
            Form::JsonObject => "json_object",
            Form::Plain => "plain text",
        }
    }

    /// The `response_format` to send, if any.
    fn response_format(self, schema: Option<&Value>) -> Option<Value> {
        match (self, schema) {
            (Form::JsonSchema, Some(schema)) => Some(json!({"type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema, "strict": false}})),
            (Form::JsonObjectWithSchema, Some(schema)) => {
                Some(json!({"type": "json_object", "schema": schema}))
            }
            (Form::Plain, _) => None,
            _ => Some(json!({"type": "json_object"})),
        }
    }
}

enum Backend {
    /// The endpoints by profile name.
    Http(BTreeMap<String, Http>),
    Replay {
        answers: Mutex<HashMap<String, VecDeque<ChatAnswer>>>,
        source: PathBuf,
    },
}

impl Llm {
    /// A client for real endpoints, one per model profile. Redirects are not followed, so a
    /// key never reaches another host.
    pub fn connect(
        endpoints: BTreeMap<String, Endpoint>,
        record: Option<&Path>,
    ) -> Result<Llm, Error> {
        // reqwest is built without a default crypto provider; ring is lighter to build.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let memory = answer_forms::state_file(|name| std::env::var(name).ok());
        let mut backends = BTreeMap::new();
        for (profile, endpoint) in endpoints {
            let mut builder = reqwest::Client::builder()
                .timeout(endpoint.request_timeout)
                .connect_timeout(Duration::from_secs(10).min(endpoint.request_timeout))
                .redirect(reqwest::redirect::Policy::none());
            if !needs_root_certificates(&endpoint.base_url, |name| std::env::var(name).ok()) {
                builder = builder.tls_certs_only(std::iter::empty());
            }
            let client = builder
                .build()
                .map_err(|err| Error::internal(format!("cannot build the HTTP client: {err}")))?;
            // What an earlier run found at this endpoint, within the day: no probe again.
            let known = memory
                .as_deref()
                .and_then(|file| answer_forms::recall(file, &endpoint.base_url, SystemTime::now()))
                .and_then(|name| Form::from_name(&name))
                .unwrap_or(Form::JsonSchema);
            let http = Http {
                endpoint,
                client,
                form: AtomicU8::new(known as u8),
                form_works: AtomicBool::new(false),
                memory: memory.clone(),
                probed: AtomicBool::new(false),
                remembered: AtomicBool::new(false),
            };
            backends.insert(profile, http);
        }
        Ok(Llm {
            backend: Backend::Http(backends),
            usage: Mutex::default(),
            profiles: Mutex::default(),
            recorder: record.map(recording::open).transpose()?,
            redactor: Redactor::default(),
            budget: OnceLock::new(),
        })
    }

    /// Redacts, from now on, the lines of the files `repo` ignores besides the key shapes.
    pub fn redact_ignored_files(&mut self, repo: &Path, workspace: &Path) {
        self.redactor = Redactor::for_repository(repo, workspace);
    }

    /// A client that answers from a recording, without any network.
    pub fn replay(path: &Path) -> Result<Llm, Error> {
        let answers = recording::load(path)?;
        Ok(Llm {
            backend: Backend::Replay {
                answers: Mutex::new(answers),
                source: path.to_path_buf(),
            },
            usage: Mutex::default(),
            profiles: Mutex::default(),
            recorder: None,
            redactor: Redactor::default(),
            budget: OnceLock::new(),
        })
    }

    /// Holds every call from now on to `budget` (once: a second budget is ignored, as one
    /// client serves one flow).
    pub fn set_budget(&self, budget: Arc<Budget>) {
        let _ = self.budget.set(budget);
    }

    /// The flow's budget, when one was set.
    pub fn budget(&self) -> Option<&Arc<Budget>> {
        self.budget.get()
    }

    /// Tokens used for one purpose.
    pub fn usage_for(&self, purpose: &str) -> Usage {
        self.usage
            .lock()
            .ok()
            .and_then(|u| u.get(purpose).copied())
            .unwrap_or_default()
    }

    /// The model profile a purpose asked (`default` before it asked any).
    pub fn profile_for(&self, purpose: &str) -> String {
        self.profiles
            .lock()
            .ok()
            .and_then(|p| p.get(purpose).cloned())
            .unwrap_or_else(|| DEFAULT_PROFILE.to_string())
    }

    /// The form JSON answers are asked in now (after any refusals) at a profile's endpoint,
    /// for the journal; `None` when answers come from a recording.
    pub fn answer_form(&self, profile: &str) -> Option<Form> {
        match &self.backend {
            Backend::Replay { .. } => None,
            Backend::Http(endpoints) => endpoints
                .get(profile)
                .map(|http| Form::from_level(http.form.load(Ordering::Relaxed))),
        }
    }

    /// Makes one chat completion, retrying transient failures within the policy's bounds.
    pub async fn chat(&self, request: &ChatRequest) -> Result<ChatAnswer, LlmError> {
        // Redacted before anything else sees it: the endpoint, the recording, the replay key.
        let redacted = self.redactor.request(request);
        let request = redacted.as_ref().unwrap_or(request);
        // What the call may use is taken from the budget before it is sent; a call that does
        // not fit is never sent, and one in flight when the time runs out is cancelled.
        let budget = self.budget.get();
        let reservation = match budget {
            Some(budget) => Some(budget.reserve(request).await?),
            None => None,
        };
        // What the budget has left is what the call may ask to answer in.
        let lowered = reservation
            .as_ref()
            .and_then(|r| r.lowered_max_tokens())
            .map(|max_tokens| {
                let mut smaller = request.clone();
                smaller.settings.max_tokens = Some(max_tokens);
                smaller
            });
        let request = lowered.as_ref().unwrap_or(request);
        let call = async {
            match &self.backend {
                Backend::Replay { answers, source } => {
                    recording::replay_answer(answers, source, request)
                }
                Backend::Http(endpoints) => {
                    let profile = &request.settings.profile;
                    let http = endpoints.get(profile).ok_or_else(|| {
                        LlmError::new(
                            LlmErrorKind::BadRequest,
                            format!("no endpoint for the model profile {profile:?}"),
                        )
                    })?;
                    http.chat_with_retries(request).await
                }
            }
        };
        let answer = match budget {
            Some(budget) => tokio::select! {
                answer = call => answer?,
                () = budget.stopped() => {
                    let exceeded = budget.exceeded().ok_or_else(|| {
                        LlmError::new(LlmErrorKind::BudgetExhausted, "the budget stopped the call")
                    })?;
                    return Err(crate::llm::budget::refusal(&exceeded));
                }
            },
            None => call.await?,
        };
        let answer = counted(request, answer);
        if let Some(reservation) = reservation {
            reservation.settle(&answer.usage);
        }
        if let Ok(mut usage) = self.usage.lock() {
            usage
                .entry(request.purpose.clone())
                .or_default()
                .add(&answer.usage);
        }
        if let Ok(mut profiles) = self.profiles.lock() {
            profiles.insert(request.purpose.clone(), request.settings.profile.clone());
        }
        if let Some(recorder) = &self.recorder {
            recording::record(recorder, request, &answer);
        }
        Ok(answer)
    }
}

impl Http {
    /// Remembers for the next runs the form an answer came in, once, when this process found
    /// it by moving past refused ones (a form read from memory is not written back, so it is
    /// probed again when its day is over).
    fn remember(&self, form: Form) {
        let found = Form::from_level(self.form.load(Ordering::Relaxed));
        if form != found || !self.probed.load(Ordering::Relaxed) {
            return;
        }
        if let Some(file) = &self.memory
            && !self.remembered.swap(true, Ordering::Relaxed)
        {
            // Only an optimisation: a state directory that cannot be written means the next
            // run probes again, nothing worse.
            let _ = answer_forms::remember(
                file,
                &self.endpoint.base_url,
                form.name(),
                SystemTime::now(),
            );
        }
    }

    /// The form a request is sent in: plain text when it wants no JSON; otherwise the best
    /// form the endpoint has not refused (past the schema forms when there is no schema).
    fn form_for(&self, request: &ChatRequest) -> Form {
        if !request.json {
            return Form::Plain;
        }
        let known = Form::from_level(self.form.load(Ordering::Relaxed));
        if request.schema.is_none() {
            known.max(Form::JsonObject)
        } else {
            known
        }
    }

    fn form_confirmed(&self) -> bool {
        self.form_works.load(Ordering::Relaxed)
    }

    async fn chat_with_retries(&self, request: &ChatRequest) -> Result<ChatAnswer, LlmError> {
        let (endpoint, http) = (&self.endpoint, &self.client);
        let policy = &endpoint.retry;
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let form = self.form_for(request);
            // The budget ends every wait, the request in flight included.
            let remaining = policy.max_elapsed.saturating_sub(started.elapsed());
            let sent =
                tokio::time::timeout(remaining, send_once(endpoint, http, request, form)).await;
            let Ok(sent) = sent else {
                return Err(LlmError::new(
                    LlmErrorKind::GaveUp,
                    format!(
                        "no answer within the retry budget of {} s (attempt {attempt}, {:.1} s \
                         after the first): check the server (it accepted the request but did \
                         not answer), or raise max_retry_seconds under [llm] in ocflow.toml",
                        policy.max_elapsed.as_secs(),
                        started.elapsed().as_secs_f64()
                    ),
                ));
            };
            let (error, retry_after) = match sent {
                Ok(answer) => {
                    if form != Form::Plain {
                        self.form_works.store(true, Ordering::Relaxed);
                    }
                    self.remember(form);
                    return Ok(answer);
                }
                Err((error, retry_after))
                    if refused(form, &error, retry_after.is_some(), self.form_confirmed()) =>
                {
                    // The next form from now on, at once. Probing is not trying: a refusal costs
                    // no attempt (llama-cpp-python's 500 to `json_schema` used up one of two).
                    self.form.fetch_max(form as u8 + 1, Ordering::Relaxed);
                    self.probed.store(true, Ordering::Relaxed);
                    attempt -= 1;
                    continue;
                }
                Err((error, retry_after)) if error.transient() => (error, retry_after),
                Err((error, _)) => return Err(error),
            };
            let backoff = jittered_backoff(policy, attempt);
            let wait = match retry_after {
                Some(asked) if asked <= policy.retry_after_cap => asked,
                _ => backoff,
            };
            let elapsed = started.elapsed();
            if attempt >= policy.max_attempts || elapsed + wait > policy.max_elapsed {
                return Err(LlmError::new(
                    LlmErrorKind::GaveUp,
                    format!(
                        "gave up after {attempt} attempt(s) in {:.1} s (retry budget of {} s, \
                         {} attempts at most); last error: {}",
                        elapsed.as_secs_f64(),
                        policy.max_elapsed.as_secs(),
                        policy.max_attempts,
                        error.message
                    ),
                ));
            }
            tokio::time::sleep(wait).await;
        }
    }
}

/// Exponential backoff with full jitter: uniform in [0, min(max, initial × 2^(attempt-1))].
fn jittered_backoff(policy: &RetryPolicy, attempt: u32) -> Duration {
    let exponent = attempt.saturating_sub(1).min(20);
    let ceiling = policy
        .initial_backoff
        .saturating_mul(1 << exponent)
        .min(policy.max_backoff);
    ceiling.mul_f64(rand::random::<f64>())
}

/// What the transport saw of the last response, which async-openai does not report.
#[derive(Default)]
struct Seen {
    status: Option<u16>,
    retry_after: Option<String>,
    location: Option<String>,
}

/// Whether an error is the endpoint refusing the answer form rather than failing, before any
/// answer came in a JSON form: a 400 to any form, or a 5xx to `json_schema` that does not ask
/// to come back later (llama-cpp-python's answer to it). Once a form has worked, a 400 is the
/// request's own fault (a prompt too long for the context) and a 5xx only a fault.
fn refused(form: Form, error: &LlmError, asked_to_wait: bool, form_works: bool) -> bool {
    match error.kind {
        LlmErrorKind::BadRequest => form != Form::Plain && !form_works,
        LlmErrorKind::Server => form == Form::JsonSchema && !asked_to_wait && !form_works,
        _ => false,
    }
}

/// One HTTP attempt. On failure, also returns the `Retry-After` the server asked for, if valid.
async fn send_once(
    endpoint: &Endpoint,
    http: &reqwest::Client,
    request: &ChatRequest,
    form: Form,
) -> Result<ChatAnswer, (LlmError, Option<Duration>)> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let transport = {
        let http = http.clone();
        let seen = seen.clone();
        tower::service_fn(move |factory: HttpRequestFactory| {
            let http = http.clone();
            let seen = seen.clone();
            async move {
                let built = factory.build().await?;
                let response = http.execute(built).await.map_err(OpenAIError::Reqwest)?;
                if let Ok(mut seen) = seen.lock() {
                    let header = |name: &str| {
                        response
                            .headers()
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_string)
                    };
                    seen.status = Some(response.status().as_u16());
                    seen.retry_after = header("retry-after");
                    seen.location = header("location");
                }
                Ok::<_, OpenAIError>(response)
            }
        })
    };
    let config = OpenAIConfig::new()
        .with_api_base(endpoint.base_url.trim_end_matches('/'))
        .with_api_key(endpoint.api_key.expose());
    // `build`, not `with_config`: that makes a client of its own (loading the system's root
    // certificates, milliseconds of CPU) on every call, only to have the transport replace it.
    let client = Client::build(http.clone(), config).with_http_service(transport);
    let mut body =
        json!({"model": request.settings.model, "messages": request.messages, "stream": false});
    if let Some(temperature) = request.settings.temperature {
        body["temperature"] = json!(temperature);
    }
    if let Some(max_tokens) = request.settings.max_tokens {
        body["max_tokens"] = json!(max_tokens);
    }
    if let Some(format) = form.response_format(request.schema.as_ref()) {
        body["response_format"] = format;
    }
    let result: Result<Value, OpenAIError> = client.chat().create_byot(body).await;
    let (status, retry_after, location) = match seen.lock() {
        Ok(mut seen) => (seen.status, seen.retry_after.take(), seen.location.take()),
        Err(_) => (None, None, None),
    };
    let retry_after = retry_after.as_deref().and_then(response::parse_retry_after);
    match result {
        Ok(value) => response::parse_answer(&value).map_err(|e| (e, None)),
        Err(error) => Err((
            response::classify(
                error,
                status,
                location.as_deref(),
                response::Called {
                    base_url: &endpoint.base_url,
                    request_timeout: endpoint.request_timeout,
                    timeout_setting: &endpoint.timeout_setting,
                },
            ),
            retry_after,
        )),
    }
}

/// `answer` with its usage counted at least at the estimate of what was sent and received
/// where the server's figure is missing or cannot be (no usage, zero, a negative number: a
/// prompt or an answer of no token), so that a budget binds against any server: one that said
/// nothing let 7 calls through a budget an honest one stopped after 4.
fn counted(request: &ChatRequest, mut answer: ChatAnswer) -> ChatAnswer {
    let sent = crate::llm::budget::estimate_prompt_tokens(request);
    let received = (answer.content.chars().count() as u64).div_ceil(4);
    let usage = &mut answer.usage;
    let missing =
        (usage.prompt_tokens == 0 && sent > 0) || (usage.completion_tokens == 0 && received > 0);
    if missing {
        usage.prompt_tokens = usage.prompt_tokens.max(sent);
        usage.completion_tokens = usage.completion_tokens.max(received);
        usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    }
    answer
}

/// Whether the client for `base_url` needs the system's root certificates (loading them takes
/// milliseconds of the start): not for a plain-HTTP endpoint, a model served on the local
/// network, which never makes a TLS connection since redirects are refused — unless a proxy
/// from the environment carries its requests, as that proxy may speak HTTPS.
fn needs_root_certificates(base_url: &str, variable: impl Fn(&str) -> Option<String>) -> bool {
    let plain = base_url
        .get(..7)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"));
    let proxied = ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
        .iter()
        .any(|name| variable(name).is_some_and(|value| !value.trim().is_empty()));
    !plain || proxied
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_http_endpoint_without_a_proxy_goes_without_root_certificates() {
        let none = |_: &str| None;
        assert!(!needs_root_certificates("http://10.0.0.5:8080/v1", none));
        assert!(!needs_root_certificates("HTTP://localhost/v1", none));
        assert!(needs_root_certificates("https://api.example.com/v1", none));
        // A proxy may speak HTTPS itself; an empty variable is no proxy.
        let proxy = |name: &str| (name == "HTTP_PROXY").then(|| "https://proxy:3128".to_string());
        assert!(needs_root_certificates("http://localhost/v1", proxy));
        let empty = |name: &str| (name == "all_proxy").then(|| " ".to_string());
        assert!(!needs_root_certificates("http://localhost/v1", empty));
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let policy = RetryPolicy::default();
        for attempt in 1..30 {
            assert!(jittered_backoff(&policy, attempt) <= policy.max_backoff);
        }
        assert!(jittered_backoff(&policy, 1) <= policy.initial_backoff);
    }

    #[test]
    fn the_key_never_shows_in_debug_output() {
        let key = ApiKey::new("sk-canary-123".into(), None);
        assert_eq!(format!("{key:?}"), "ApiKey(***)");
    }
}
