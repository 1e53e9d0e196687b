//! The batch's LLM gate: a small HTTP proxy the driver runs between its flows and the real
//! endpoints. It caps the requests in flight per endpoint across the whole batch (the model
//! server's batch capacity is the real bottleneck), counts them, and adds the real key, so the
//! flows only ever hold a random per-batch token and the key stays in the driver's memory.
//!
//! Each upstream endpoint has a path prefix: `http://HOST:PORT/u{N}/REST` is forwarded to
//! `UPSTREAM_N/REST`, the response streamed back as it arrives.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::channel::Channel;
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use ocflow_core::llm::key::ApiKey;
use tokio::sync::Semaphore;

/// The body of every answer the gate gives: streamed from upstream, or a short error.
type GateBody = Channel<Bytes, std::io::Error>;

/// Why the gate could not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GateError {
    /// Permanent: no local port could be had.
    #[error("the batch's LLM gate cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// Permanent: the HTTP client could not be built (TLS setup).
    #[error("the batch's LLM gate cannot build its HTTP client: {0}")]
    Client(reqwest::Error),
}

/// One real endpoint behind the gate.
#[derive(Clone, Debug)]
pub(crate) struct Upstream {
    /// Its OpenAI-compatible base URL, without a trailing `/`.
    pub(crate) base_url: String,
    pub(crate) key: ApiKey,
    /// The longest a request may take, its answer streamed to the end: a flow that gave up
    /// on it cannot hold its place under the cap for longer.
    pub(crate) timeout: std::time::Duration,
}

/// What the gate measured: the requests in flight at once, over the batch.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct GateStats {
    /// Requests forwarded.
    pub(crate) requests: u64,
    pub(crate) max_in_flight: usize,
    /// The time-weighted mean of the requests in flight since the gate started.
    pub(crate) mean_in_flight: f64,
}

/// The in-flight count and its integral over time (for the mean).
struct Counter {
    started: Instant,
    last_change: Instant,
    in_flight: usize,
    max_in_flight: usize,
    /// Requests in flight × seconds, up to `last_change`.
    area: f64,
    requests: u64,
}

impl Counter {
    /// Brings the integral of requests in flight up to now.
    fn settle(&mut self) {
        let now = Instant::now();
        self.area += self.in_flight as f64 * (now - self.last_change).as_secs_f64();
        self.last_change = now;
    }

    fn change(&mut self, up: bool) {
        self.settle();
        if up {
            self.in_flight += 1;
            self.requests += 1;
            self.max_in_flight = self.max_in_flight.max(self.in_flight);
        } else {
            self.in_flight = self.in_flight.saturating_sub(1);
        }
    }
}

/// Counts a request in flight for as long as it lives (its response streamed to the end).
struct InFlight {
    counter: Arc<Mutex<Counter>>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut counter) = self.counter.lock() {
            counter.change(false);
        }
    }
}

struct Shared {
    upstreams: Vec<(Upstream, Arc<Semaphore>)>,
    /// The per-batch token the flows present instead of the key.
    token: String,
    client: reqwest::Client,
    counter: Arc<Mutex<Counter>>,
}

/// The running gate; dropping it stops it.
pub(crate) struct Gate {
    host: String,
    port: u16,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Gate {
    /// Listens on `bind`:random (127.0.0.1 for local flows, 0.0.0.0 for a cluster's) and
    /// tells flows to reach it at `host`. `limit`: requests in flight per upstream at most.
    pub(crate) async fn start(
        upstreams: Vec<Upstream>,
        limit: Option<usize>,
        bind: IpAddr,
        host: String,
    ) -> Result<Gate, GateError> {
        // reqwest is built without a default crypto provider (as the LLM client is).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(GateError::Client)?;
        let addr = SocketAddr::new(bind, 0);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| GateError::Bind { addr, source })?;
        let port = listener
            .local_addr()
            .map_err(|source| GateError::Bind { addr, source })?
            .port();
        let permits = limit.unwrap_or(Semaphore::MAX_PERMITS).max(1);
        let now = Instant::now();
        let shared = Arc::new(Shared {
            upstreams: upstreams
                .into_iter()
                .map(|u| (u, Arc::new(Semaphore::new(permits))))
                .collect(),
            token: random_token(),
            client,
            counter: Arc::new(Mutex::new(Counter {
                started: now,
                last_change: now,
                in_flight: 0,
                max_in_flight: 0,
                area: 0.0,
                requests: 0,
            })),
        });
        let serving = shared.clone();
        let server = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let io = hyper_util::rt::TokioIo::new(stream);
                let shared = serving.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(shared.handle(request).await) }
                    });
                    // A flow that goes away mid-request ends its connection: nothing to do.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        });
        Ok(Gate {
            host,
            port,
            shared,
            server,
        })
    }

    /// The base URL flows use for upstream `index`.
    pub(crate) fn base_url(&self, index: usize) -> String {
        format!("http://{}:{}/u{index}", self.host, self.port)
    }

    /// The token flows use as their key.
    pub(crate) fn token(&self) -> &str {
        &self.shared.token
    }

    /// What the gate measured so far.
    pub(crate) fn stats(&self) -> GateStats {
        let Ok(mut counter) = self.shared.counter.lock() else {
            return GateStats::default();
        };
        counter.settle();
        let elapsed = (counter.last_change - counter.started).as_secs_f64();
        GateStats {
            requests: counter.requests,
            max_in_flight: counter.max_in_flight,
            mean_in_flight: if elapsed > 0.0 {
                counter.area / elapsed
            } else {
                0.0
            },
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Shared {
    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<GateBody> {
        let presented = request
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if presented != Some(self.token.as_str()) {
            return error(
                StatusCode::UNAUTHORIZED,
                "the batch's LLM gate takes only its flows' token",
            );
        }
        let path = request.uri().path().to_string();
        let Some((index, rest)) = route(&path) else {
            return error(
                StatusCode::NOT_FOUND,
                "the batch's LLM gate serves /u<N>/... only",
            );
        };
        let Some((upstream, semaphore)) = self.upstreams.get(index) else {
            return error(StatusCode::NOT_FOUND, "no such upstream endpoint");
        };
        let query = request
            .uri()
            .query()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        let url = format!("{}{rest}{query}", upstream.base_url);
        let (parts, body) = request.into_parts();
        let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
            return error(StatusCode::BAD_REQUEST, "the request's body did not arrive");
        };
        // Waits here, before the request leaves, while K others are in flight.
        let Ok(permit) = semaphore.clone().acquire_owned().await else {
            return error(StatusCode::SERVICE_UNAVAILABLE, "the gate is closing");
        };
        if let Ok(mut counter) = self.counter.lock() {
            counter.change(true);
        }
        let in_flight = InFlight {
            counter: self.counter.clone(),
            _permit: permit,
        };
        let mut forwarded = self
            .client
            .request(parts.method, &url)
            .timeout(upstream.timeout)
            .body(body);
        for (name, value) in &parts.headers {
            // The key replaces the token; the client sets length and host for the upstream.
            if !matches!(
                name.as_str(),
                "authorization" | "host" | "content-length" | "connection" | "transfer-encoding"
            ) {
                forwarded = forwarded.header(name, value);
            }
        }
        let key = upstream.key.expose();
        if !key.is_empty() {
            forwarded = forwarded.bearer_auth(key);
        }
        let mut answer = match forwarded.send().await {
            Ok(answer) => answer,
            Err(err) => {
                // Said as the upstream's unavailability, so the flow's client retries.
                return error(
                    StatusCode::BAD_GATEWAY,
                    &format!("the batch's LLM gate could not reach the endpoint: {err}"),
                );
            }
        };
        let mut response = Response::builder().status(answer.status());
        for (name, value) in answer.headers() {
            if !matches!(
                name.as_str(),
                "content-length" | "connection" | "transfer-encoding"
            ) {
                response = response.header(name, value);
            }
        }
        let (mut sender, body) = Channel::new(16);
        // Streams the answer through as it arrives; the request stays in flight until then.
        tokio::spawn(async move {
            let _in_flight = in_flight;
            loop {
                match answer.chunk().await {
                    Ok(Some(chunk)) => {
                        if sender.send(Frame::data(chunk)).await.is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(err) => {
                        sender.abort(std::io::Error::other(err));
                        return;
                    }
                }
            }
        });
        response
            .body(body)
            .unwrap_or_else(|_| error(StatusCode::BAD_GATEWAY, "the endpoint's answer is invalid"))
    }
}

/// `/u3/chat/completions` → (3, `/chat/completions`).
fn route(path: &str) -> Option<(usize, &str)> {
    let rest = path.strip_prefix("/u")?;
    let digits = rest.find('/').unwrap_or(rest.len());
    let index = rest[..digits].parse().ok()?;
    Some((index, &rest[digits..]))
}

fn error(status: StatusCode, message: &str) -> Response<GateBody> {
    let (mut sender, body) = Channel::new(1);
    let text = serde_json::json!({"error": {"message": message, "type": "ocflow_batch_gate"}});
    let _ = sender.try_send(Frame::data(Bytes::from(text.to_string())));
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

/// 128 random bits as hex: the flows' stand-in for the key, valid for this batch only.
fn random_token() -> String {
    let bytes: [u8; 16] = rand::random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("ocflow-batch-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;

    fn full(text: &'static str) -> Full<Bytes> {
        Full::new(Bytes::from_static(text.as_bytes()))
    }

    #[test]
    fn routes_by_the_upstreams_prefix() {
        assert_eq!(
            route("/u0/chat/completions"),
            Some((0, "/chat/completions"))
        );
        assert_eq!(route("/u12/models"), Some((12, "/models")));
        assert_eq!(route("/u1"), Some((1, "")));
        assert_eq!(route("/v1/chat/completions"), None);
        assert_eq!(route("/ux/chat"), None);
    }

    /// The token is required, and the real key reaches the upstream in its place.
    #[tokio::test]
    async fn the_key_replaces_the_token_and_others_are_refused() {
        let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream_addr = upstream.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let recorded = seen.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = upstream.accept().await.unwrap();
                let recorded = recorded.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                        let auth = request
                            .headers()
                            .get("authorization")
                            .map(|v| v.to_str().unwrap().to_string())
                            .unwrap_or_default();
                        recorded
                            .lock()
                            .unwrap()
                            .push(format!("{} {auth}", request.uri().path()));
                        async move { Ok::<_, Infallible>(Response::new(full("{\"ok\":1}"))) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("key");
        std::fs::write(&key_file, "sk-real\n").unwrap();
        std::fs::set_permissions(
            &key_file,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        let key = ocflow_core::llm::key::from_file(&key_file).unwrap();
        let gate = Gate::start(
            vec![Upstream {
                base_url: format!("http://{upstream_addr}/v1"),
                key,
                timeout: std::time::Duration::from_secs(5),
            }],
            Some(2),
            IpAddr::from([127, 0, 0, 1]),
            "127.0.0.1".into(),
        )
        .await
        .unwrap();
        let client = reqwest::Client::new();
        let url = format!("{}/chat/completions", gate.base_url(0));
        let refused = client
            .post(&url)
            .bearer_auth("sk-guess")
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 401);
        let answer = client
            .post(&url)
            .bearer_auth(gate.token())
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.text().await.unwrap(), "{\"ok\":1}");
        assert_eq!(
            *seen.lock().unwrap(),
            ["/v1/chat/completions Bearer sk-real"]
        );
        let stats = gate.stats();
        assert_eq!((stats.requests, stats.max_in_flight), (1, 1));
    }
}
