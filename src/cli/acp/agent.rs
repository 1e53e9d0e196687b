//! How the ACP agent reaches the person and runs ocflow: the connection (for permission
//! requests) and this binary as a child, with the flags and key every flow of the session gets.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use super::connection::Connection;
use crate::cli::child_command::{self, as_json, stdout_lines};
use ocflow_core::llm::key::ApiKey;

/// The agent: its connection, and how it runs flows.
pub(crate) struct Agent {
    pub(crate) conn: Arc<Connection>,
    pub(crate) program: PathBuf,
    pub(crate) forwarded: Vec<OsString>,
    /// `run --approve`'s list for every flow (`plan`, `risky`).
    pub(crate) approve: Vec<String>,
    pub(crate) key: ApiKey,
}

impl Agent {
    /// Asks the person through `session/request_permission`: the option chosen, or `None` when
    /// the prompt was cancelled or the client could not answer.
    pub(crate) async fn permission(
        &self,
        session: &str,
        call: Value,
        options: Value,
    ) -> Option<String> {
        let answer = self
            .conn
            .request(
                "session/request_permission",
                json!({"sessionId": session, "toolCall": call, "options": options}),
            )
            .await
            .ok()?;
        let outcome = &answer["outcome"];
        (outcome["outcome"] == "selected")
            .then(|| outcome["optionId"].as_str().map(str::to_string))
            .flatten()
    }

    /// Runs a short ocflow command to its end: its exit code and what it said (its events'
    /// messages, a line each).
    pub(crate) async fn run_to_end(
        &self,
        repo: &Path,
        args: impl IntoIterator<Item = OsString>,
    ) -> (i32, String) {
        let run = async {
            let (mut command, pipe) = child_command::json_child(
                &self.program,
                &self.forwarded,
                Some(repo),
                args,
                false,
                &self.key,
            )?;
            // Never killed halfway (an apply), even when the session ends.
            let mut child = command.spawn()?;
            drop(pipe);
            let mut lines = stdout_lines(&mut child)?;
            let mut said = Vec::new();
            while let Some(line) = lines.next_line().await? {
                let event = as_json(line);
                if let Some(message) = event["message"].as_str() {
                    said.push(message.to_string());
                }
            }
            let code = child.wait().await?.code().unwrap_or(-1);
            Ok::<_, std::io::Error>((code, said.join("\n")))
        };
        run.await
            .unwrap_or_else(|err| (-1, format!("could not run ocflow: {err}")))
    }
}
