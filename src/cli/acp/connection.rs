//! The JSON-RPC 2.0 side of `ocflow acp`: one JSON message a line on stdout, answers to the
//! client's requests, notifications, and requests of our own (a permission) whose answers the
//! reading loop hands back. Lines that are not JSON, or too long, never reach here:
//! `mcp_stdio`'s guard answers them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;

/// JSON-RPC's codes for what the agent cannot take.
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
pub(crate) const INVALID_PARAMS: i64 = -32602;
pub(crate) const INTERNAL_ERROR: i64 = -32603;

/// A JSON-RPC error: its code and a message that names the problem and the fix.
#[derive(Debug)]
pub(crate) struct RpcError {
    pub(crate) code: i64,
    pub(crate) message: String,
}

impl RpcError {
    pub(crate) fn invalid(message: impl Into<String>) -> RpcError {
        RpcError {
            code: INVALID_PARAMS,
            message: message.into(),
        }
    }

    pub(crate) fn internal(message: impl Into<String>) -> RpcError {
        RpcError {
            code: INTERNAL_ERROR,
            message: message.into(),
        }
    }
}

/// The agent's end of the connection.
pub(crate) struct Connection {
    out: tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>,
    /// Our requests waiting for the client's answer, by id.
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, Value>>>>,
    next_id: AtomicU64,
}

impl Connection {
    pub(crate) fn new(out: impl AsyncWrite + Send + Unpin + 'static) -> Connection {
        Connection {
            out: tokio::sync::Mutex::new(Box::new(out)),
            pending: Mutex::default(),
            next_id: AtomicU64::new(1),
        }
    }

    /// Writes one message, a line. A client gone is no error of ours: the reading loop ends.
    async fn send(&self, message: Value) {
        let mut out = self.out.lock().await;
        let _ = out.write_all(format!("{message}\n").as_bytes()).await;
        let _ = out.flush().await;
    }

    /// Answers the client's request `id`.
    pub(crate) async fn respond(&self, id: Value, result: Result<Value, RpcError>) {
        let message = match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": error.code, "message": error.message}}),
        };
        self.send(message).await;
    }

    /// A `session/update` notification.
    pub(crate) async fn update(&self, session: &str, update: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": session, "update": update}}))
            .await;
    }

    /// Asks the client (`method`) and waits for its answer: the result, or its error object.
    /// `Err(None)`: the connection ended first.
    pub(crate) async fn request(&self, method: &str, params: Value) -> Result<Value, Value> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer, answered) = oneshot::channel();
        self.pending().insert(id, answer);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        answered
            .await
            .unwrap_or_else(|_| Err(json!({"message": "the client closed the connection"})))
    }

    /// Hands the client's answer to our request `id` to its waiter.
    pub(crate) fn answered(&self, message: &Value) {
        let Some(id) = message["id"].as_u64() else {
            return;
        };
        if let Some(waiter) = self.pending().remove(&id) {
            let answer = match message.get("error") {
                Some(error) => Err(error.clone()),
                None => Ok(message["result"].clone()),
            };
            let _ = waiter.send(answer);
        }
    }

    /// Ends every request still waiting: the client is gone.
    pub(crate) fn close(&self) {
        self.pending().clear();
    }

    fn pending(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Result<Value, Value>>>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
