//! `ocflow_status`'s answer. An agent polls it, and OpenHands stops a conversation whose tool
//! answers the same four times, so the default answer is compact (at most [`ANSWER_LIMIT`]
//! bytes whatever the flow's length) and carries what moves while the flow runs (elapsed
//! times, steps done of total); `detail` is the whole status. [`fingerprint`] is what counts as
//! the flow's change for a call that waits for one.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use ocflow_core::engine::summary::MODEL_SECTION;

/// A flow this server started, as its JSON lines tell it.
#[derive(Debug, Default)]
pub(crate) struct Started {
    pub(crate) pid: Option<u32>,
    pub(crate) running: bool,
    pub(crate) exit_code: Option<i32>,
    /// The newest event (a heartbeat, a step's end…).
    pub(crate) last_event: Option<Value>,
    /// `flow_finished`, once it came.
    pub(crate) finished: Option<Value>,
    /// The `error` event that ended the command (a refused key…), once it came.
    pub(crate) error: Option<Value>,
    /// What the flow is doing, as its last heartbeat said (`planning`, `running`…).
    pub(crate) stage: Option<String>,
}

/// The compact answer's size limit, in bytes of JSON.
pub(crate) const ANSWER_LIMIT: usize = 2048;

/// Steps listed by name in the compact answer, of each kind (running, failed).
const LISTED_STEPS: usize = 3;
/// The longest text (a step's error, a reason, a message) kept in the compact answer.
const LINE_CHARS: usize = 160;
/// The longest summary kept in the compact answer; the file holds all of it.
const SUMMARY_CHARS: usize = 1000;

/// What changes when the flow moves on: its state, each step's state and attempts, its
/// revision and its recovery decisions. Times and tokens are left out: they move without
/// anything happening.
pub(crate) fn fingerprint(status: &Value) -> String {
    let steps: Vec<Value> = steps(status)
        .iter()
        .map(|step| json!([step["id"], step["status"], step["attempts"]]))
        .collect();
    json!([
        status["state"],
        status["revision"],
        status["recovery_calls"],
        status["pending_recovery"],
        steps
    ])
    .to_string()
}

/// Whether the status says the flow still runs.
pub(crate) fn runs(status: &Value) -> bool {
    status["state"] == "running"
}

/// The compact answer: the flow's state and counts, its running and failed steps in a line
/// each, its tokens, how it ended (for a flow this server started) and the call to make next.
pub(crate) fn compact(status: &Value, started: Option<&Started>, now: DateTime<Utc>) -> Value {
    let steps = steps(status);
    let count = |state: &str| steps.iter().filter(|s| s["status"] == state).count();
    let (succeeded, skipped) = (count("succeeded"), count("skipped"));
    let running: Vec<&Value> = steps.iter().filter(|s| s["status"] == "running").collect();
    let failed: Vec<&Value> = steps.iter().filter(|s| s["status"] == "failed").collect();
    let mut shown = Map::new();
    shown.insert("task_id".into(), status["task_id"].clone());
    shown.insert("state".into(), status["state"].clone());
    // What a person must answer, its words cut short (a long plan's steps are in its flow).
    if status["approval"].is_object() {
        let approval = &status["approval"];
        let subject = cut(
            text(&approval["subject"]).unwrap_or_default(),
            APPROVAL_CHARS,
        );
        shown.insert(
            "approval".into(),
            json!({"kind": approval["kind"], "step": approval["step"], "subject": subject}),
        );
    }
    let end = text(&status["finished_at"]).and_then(parse_time);
    if let Some(since) = text(&status["created_at"]).and_then(parse_time) {
        shown.insert("elapsed_seconds".into(), seconds(since, end.unwrap_or(now)));
    }
    if let Some(stage) = started.and_then(|s| s.stage.as_deref())
        && runs(status)
    {
        shown.insert("stage".into(), json!(stage));
    }
    shown.insert(
        "steps".into(),
        json!({"total": steps.len(), "done": succeeded + skipped, "succeeded": succeeded,
            "running": running.len(), "failed": failed.len(), "skipped": skipped,
            "pending": count("pending")}),
    );
    let running_lines: Vec<Value> = running
        .iter()
        .take(LISTED_STEPS)
        .map(|step| {
            let mut line = json!({"id": step["id"], "operation": step["operation"],
                "attempt": step["attempts"]});
            if let Some(since) = text(&step["started_at"]).and_then(parse_time) {
                line["elapsed_seconds"] = seconds(since, now);
            }
            line
        })
        .collect();
    shown.insert("running_steps".into(), json!(running_lines));
    let failed_lines: Vec<Value> = failed
        .iter()
        .take(LISTED_STEPS)
        .map(|step| {
            let why = text(&step["error"]["message"]).or_else(|| text(&step["message"]));
            json!({"id": step["id"], "operation": step["operation"],
                "attempts": step["attempts"], "error": why.map(one_line)})
        })
        .collect();
    shown.insert("failed_steps".into(), json!(failed_lines));
    shown.insert("tokens".into(), status["tokens"].clone());
    for key in ["message", "resume_command"] {
        if let Some(value) = text(&status[key]) {
            shown.insert(key.into(), json!(one_line(value)));
        }
    }
    let mut answer = json!({"status": shown});
    if let Some(started) = started {
        answer["running"] = json!(started.running);
        answer["exit_code"] = json!(started.exit_code);
        if let Some(finished) = &started.finished {
            answer["finished"] = compact_finished(finished);
        }
        if let Some(error) = &started.error {
            answer["error"] = json!({"code": error["code"], "exit_code": error["exit_code"],
                "message": text(&error["message"]).map(one_line), "hint": error["hint"]});
        }
    } else {
        answer["running"] = json!(runs(status));
    }
    answer["next"] = json!(next_call(status, started));
    fit(&mut answer);
    answer
}

/// The whole status (every step), as the answer was before it was made compact; the newest
/// event only when it is not `flow_finished` again.
pub(crate) fn detail(status: Value, started: Option<&Started>) -> Value {
    let mut answer = json!({"status": status});
    if let Some(started) = started {
        answer["running"] = json!(started.running);
        answer["exit_code"] = json!(started.exit_code);
        answer["finished"] = json!(started.finished);
        if started.last_event != started.finished {
            answer["last_event"] = json!(started.last_event);
        }
        if let Some(error) = &started.error {
            answer["error"] = error.clone();
        }
    }
    answer
}

/// `flow_finished` without what the compact answer cannot afford: the summary cut short (its
/// file holds it whole), the changed files counted.
fn compact_finished(finished: &Value) -> Value {
    let mut shown = json!({"type": finished["type"], "task_id": finished["task_id"],
        "state": finished["state"], "summary": finished["summary"]});
    if let Some(reason) = text(&finished["reason"]) {
        shown["reason"] = json!(one_line(reason));
    }
    if let Some(files) = finished["changed_files"].as_array() {
        shown["changed_files"] = json!(files.len());
    }
    if !finished["diff"].is_null() {
        shown["diff"] = finished["diff"].clone();
    }
    if let Some(summary) = text(&finished["summary_text"]) {
        shown["summary_text"] = json!(short_summary(summary, SUMMARY_CHARS));
    }
    shown
}

/// The summary when it is short; else the model's own words (its last section), cut: the facts
/// above them are in the answer already, counted.
fn short_summary(summary: &str, chars: usize) -> String {
    if summary.chars().count() <= chars {
        return summary.to_string();
    }
    match summary.split_once(MODEL_SECTION) {
        Some((_, words)) => format!("…{MODEL_SECTION}\n{}", cut(words.trim(), chars)),
        None => cut(summary, chars),
    }
}

/// The most characters of an approval's subject shown.
const APPROVAL_CHARS: usize = 400;

/// The call the agent should make next.
fn next_call(status: &Value, started: Option<&Started>) -> String {
    let id = text(&status["task_id"]).unwrap_or_default();
    let hint = started
        .and_then(|s| s.error.as_ref())
        .and_then(|error| text(&error["hint"]));
    match text(&status["state"]).unwrap_or_default() {
        "running" => "call ocflow_status again with wait_seconds 30: it answers at the flow's \
                      next change"
            .into(),
        "succeeded" => {
            "review the changes with ocflow_diff, then write them with ocflow_apply".into()
        }
        "interrupted" => format!("continue it with `ocflow resume {id}` in a terminal"),
        // Spent a budget: nothing failed, and a higher limit continues where it stopped.
        "paused" => {
            let flag = match text(&status["paused"]["budget"]) {
                Some("cost") => "--max-cost",
                Some("time") => "--max-time",
                _ => "--max-tokens",
            };
            format!(
                "a budget paused it (limits {}): continue it with a higher limit, `ocflow resume \
                 {id} {flag} …`, in a terminal",
                status["budget"]["limits"]
            )
        }
        "waiting" => format!(
            "ask the person about `approval`, then call ocflow_approve with task_id {id} \
             (approve false, with a reason, to say no)"
        ),
        "no_change" => "nothing was changed: give a more precise task to ocflow_run".into(),
        "failed"
            if text(&status["message"])
                .is_some_and(|m| m.starts_with("rejected at the approval")) =>
        {
            "a person said no (see message): nothing to continue; start again with ocflow_run \
             if they ask for something else"
                .into()
        }
        _ => match hint {
            // Planned already: its finished steps are kept, and resume continues from them.
            Some(hint) if status["steps"].as_array().is_some_and(|s| !s.is_empty()) => {
                format!("{hint}, then continue it with `ocflow resume {id}` in a terminal")
            }
            Some(hint) => format!("{hint}, then start the flow again with ocflow_run"),
            None => format!(
                "read failed_steps (ocflow_status with detail for every step); continue it with \
                 `ocflow resume {id}` in a terminal, or start again with ocflow_run"
            ),
        },
    }
}

/// Keeps the answer within [`ANSWER_LIMIT`] whatever its texts: first the summary goes (its
/// file holds it), then the step lists shrink to one line each, then the texts are cut short.
fn fit(answer: &mut Value) {
    let size = |answer: &Value| answer.to_string().len();
    if size(answer) <= ANSWER_LIMIT {
        return;
    }
    if let Some(summary) = answer["finished"]["summary_text"].as_str() {
        answer["finished"]["summary_text"] = json!(short_summary(summary, SUMMARY_CHARS / 4));
    }
    if size(answer) > ANSWER_LIMIT
        && let Some(finished) = answer["finished"].as_object_mut()
    {
        finished.remove("summary_text");
    }
    for list in ["running_steps", "failed_steps"] {
        if size(answer) > ANSWER_LIMIT
            && let Some(steps) = answer["status"][list].as_array_mut()
        {
            steps.truncate(1);
        }
    }
    if size(answer) > ANSWER_LIMIT {
        shorten_texts(answer, 60);
    }
}

/// Cuts every string in `value` to `chars` characters.
fn shorten_texts(value: &mut Value, chars: usize) {
    match value {
        Value::String(text) => *text = cut(text, chars),
        Value::Array(items) => items.iter_mut().for_each(|v| shorten_texts(v, chars)),
        Value::Object(fields) => fields.values_mut().for_each(|v| shorten_texts(v, chars)),
        _ => {}
    }
}

fn steps(status: &Value) -> &[Value] {
    status["steps"].as_array().map_or(&[], Vec::as_slice)
}

fn text(value: &Value) -> Option<&str> {
    value.as_str()
}

fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|time| time.with_timezone(&Utc))
}

/// Seconds from `since` to `until`, to the millisecond: two polls a moment apart still differ.
fn seconds(since: DateTime<Utc>, until: DateTime<Utc>) -> Value {
    let milliseconds = (until - since).num_milliseconds().max(0);
    json!(milliseconds as f64 / 1000.0)
}

/// The first line of `text`, cut to [`LINE_CHARS`].
fn one_line(text: &str) -> String {
    cut(text.lines().next().unwrap_or_default(), LINE_CHARS)
}

/// `text` cut to `chars` characters, marked `…` when cut.
fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(n: usize, state: &str) -> Value {
        json!({"id": format!("a-step-with-a-long-name-{n:04}"), "operation": "modify_code",
            "status": state, "attempts": 3, "started_at": "2026-01-01T00:00:00Z",
            "message": "x".repeat(5000), "error": {"kind": "failure",
            "message": format!("{}\nsecond line", "why ".repeat(500))}})
    }

    fn status(steps: Vec<Value>) -> Value {
        json!({"task_id": "t", "state": "running", "revision": 1, "recovery_calls": 0,
            "created_at": "2026-01-01T00:00:00Z", "tokens": {"calls": 1},
            "message": "m".repeat(3000), "steps": steps})
    }

    #[test]
    fn the_answer_stays_within_the_limit_whatever_the_flow() {
        let steps = (0..500)
            .map(|n| step(n, ["running", "failed", "pending"][n % 3]))
            .collect();
        let mut started = Started {
            running: true,
            finished: Some(
                json!({"type": "flow_finished", "summary_text": "s".repeat(9000),
                "reason": "r".repeat(9000), "changed_files": vec!["f"; 900]}),
            ),
            error: Some(json!({"code": "llm", "message": "e".repeat(9000), "hint": "h"})),
            ..Started::default()
        };
        started.stage = Some("running".into());
        let now = Utc::now();
        let answer = compact(&status(steps), Some(&started), now);
        assert!(answer.to_string().len() <= ANSWER_LIMIT, "{answer}");
        assert_eq!(answer["status"]["steps"]["total"], json!(500));
        assert_eq!(answer["status"]["steps"]["running"], json!(167));
        assert!(
            !answer["status"]["running_steps"]
                .as_array()
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_waiting_flow_s_answer_says_what_to_approve_in_a_few_words_and_how() {
        let mut waiting = status(vec![step(1, "pending")]);
        waiting["state"] = json!("waiting");
        waiting["approval"] = json!({"kind": "plan", "subject": "s".repeat(9000),
            "asked_at": "2026-01-01T00:00:00Z"});
        let answer = compact(&waiting, None, Utc::now());
        assert_eq!(answer["status"]["approval"]["kind"], json!("plan"));
        let subject = answer["status"]["approval"]["subject"].as_str().unwrap();
        assert!(subject.chars().count() <= APPROVAL_CHARS + 1, "{subject}");
        assert!(answer["next"].as_str().unwrap().contains("ocflow_approve"));
        waiting["state"] = json!("failed");
        waiting["message"] = json!("rejected at the approval of the plan: no");
        let answer = compact(&waiting, None, Utc::now());
        assert!(
            answer["next"]
                .as_str()
                .unwrap()
                .contains("a person said no")
        );
    }

    #[test]
    fn a_running_flow_s_answer_moves_though_nothing_happened() {
        let status = status(vec![step(1, "running"), step(2, "pending")]);
        let now = Utc::now();
        let first = compact(&status, None, now);
        let later = compact(&status, None, now + chrono::Duration::milliseconds(1));
        assert_ne!(first, later);
        assert_eq!(
            first["status"]["steps"],
            json!({"total": 2, "done": 0, "succeeded": 0, "running": 1, "failed": 0,
                "skipped": 0, "pending": 1})
        );
        assert!(first["next"].as_str().unwrap().contains("wait_seconds"));
    }

    #[test]
    fn a_paused_flow_s_next_call_names_the_budget_to_raise() {
        let mut paused = status(vec![step(1, "succeeded"), step(2, "pending")]);
        paused["state"] = json!("paused");
        paused["paused"] = json!({"kind": "budget", "budget": "cost", "spent": 1.0,
            "needed": 0.5, "limit": 1.2});
        paused["budget"] = json!({"limits": {"max_cost_usd": 1.2}});
        let next = compact(&paused, None, Utc::now())["next"].clone();
        let next = next.as_str().unwrap();
        assert!(
            next.contains("`ocflow resume t --max-cost …`") && next.contains("max_cost_usd"),
            "{next}"
        );
    }

    #[test]
    fn only_steps_and_states_make_a_change() {
        let mut status = status(vec![step(1, "running")]);
        let before = fingerprint(&status);
        status["tokens"] = json!({"calls": 9});
        status["updated_at"] = json!("2026-01-01T00:01:00Z");
        assert_eq!(fingerprint(&status), before);
        status["steps"][0]["status"] = json!("succeeded");
        assert_ne!(fingerprint(&status), before);
    }

    #[test]
    fn a_long_summary_is_cut_to_the_model_s_words() {
        let summary = format!(
            "# t\n\n{}\n\n{MODEL_SECTION}\n\nDid it.",
            "fact ".repeat(400)
        );
        let short = short_summary(&summary, 100);
        assert_eq!(short, format!("…{MODEL_SECTION}\nDid it."));
        assert_eq!(short_summary("# t\n\nDid it.", 100), "# t\n\nDid it.");
    }

    #[test]
    fn texts_are_cut_on_characters() {
        assert_eq!(cut("héllo", 2), "hé…");
        assert_eq!(cut("hé", 2), "hé");
        assert_eq!(one_line("first\nsecond"), "first");
    }
}
