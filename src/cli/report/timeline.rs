//! The steps over time: one row per step, a bar per attempt placed by its start and end
//! relative to the flow's start, and a mark at each recovery decision and retry. Positions are
//! percentages of the flow's span, so the chart fits any width without script.

use std::fmt::Write;

use chrono::{DateTime, FixedOffset};

use super::html::{duration, escape};
use ocflow_core::task::report::{Attempt, ReportFacts};
use ocflow_model::status::StepState;

/// The flow's span: where 0 % and 100 % of the chart are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span {
    start: DateTime<FixedOffset>,
    length_ms: i64,
}

fn parse(ts: &str) -> Option<DateTime<FixedOffset>> {
    DateTime::parse_from_rfc3339(ts).ok()
}

impl Span {
    /// From the flow's creation to the latest moment anything recorded (`now` for a flow
    /// still running, so its open bars reach the present).
    pub(crate) fn of(facts: &ReportFacts, now: &str) -> Span {
        let status = &facts.status;
        let mut times: Vec<DateTime<FixedOffset>> = [&status.created_at, &status.updated_at]
            .into_iter()
            .chain(&status.finished_at)
            .filter_map(|t| parse(t))
            .collect();
        for step in &facts.steps {
            for attempt in &step.attempts {
                times.extend(parse(&attempt.started_at));
                times.extend(attempt.finished_at.as_deref().and_then(parse));
            }
        }
        if facts
            .steps
            .iter()
            .any(|s| s.status.status == StepState::Running)
        {
            times.extend(parse(now));
        }
        let start = times.iter().min().copied().unwrap_or_default();
        let end = times.iter().max().copied().unwrap_or(start);
        Span {
            start,
            length_ms: (end - start).num_milliseconds().max(1),
        }
    }

    /// Milliseconds from the flow's start to `ts` (0 when it does not parse).
    pub(crate) fn offset_ms(&self, ts: &str) -> i64 {
        parse(ts).map_or(0, |t| (t - self.start).num_milliseconds().max(0))
    }

    fn percent(&self, ms: i64) -> f64 {
        (ms as f64 / self.length_ms as f64 * 100.0).clamp(0.0, 100.0)
    }

    /// `+1.2 s` from the flow's start.
    pub(crate) fn label(&self, ts: &str) -> String {
        format!("+{}", duration(self.offset_ms(ts).unsigned_abs()))
    }
}

/// The chart: a row per step, then the axis and the decisions in words.
pub(crate) fn render(facts: &ReportFacts, span: &Span) -> String {
    let mut out = String::from("<div class=\"timeline\">\n");
    for step in &facts.steps {
        let id = escape(&step.status.id);
        let _ = write!(
            out,
            "<div class=\"tl-row\" data-step=\"{id}\"><div class=\"tl-label\" title=\"{id}\">\
             {id}</div><div class=\"tl-track\">"
        );
        let open_state = step.status.status;
        for (index, attempt) in step.attempts.iter().enumerate() {
            let next = step.attempts.get(index + 1).map(|a| a.started_at.as_str());
            out.push_str(&bar(attempt, next, open_state, span));
        }
        if step.attempts.is_empty() {
            let _ = write!(out, "<span class=\"tl-none\">{}</span>", step.status.status);
        }
        for record in &step.status.recoveries {
            let title = format!("recovery: {} — {}", record.strategy, record.reason);
            out.push_str(&mark("recovery", &record.at, &title, span));
        }
        for note in facts.notes.iter().filter(|n| n.step == step.status.id) {
            out.push_str(&mark("note", &note.at, &note.text, span));
        }
        out.push_str("</div></div>\n");
    }
    let _ = write!(
        out,
        "<div class=\"tl-axis\"><span>0</span><span>{}</span></div>\n</div>\n",
        duration(span.length_ms.unsigned_abs())
    );
    out.push_str(&decisions(facts, span));
    out
}

/// One attempt's bar. An attempt that did not end runs until the next one started (ocflow
/// stopped under it) or, for the step running now, to the end of the chart.
fn bar(attempt: &Attempt, next_start: Option<&str>, state: StepState, span: &Span) -> String {
    let start = span.offset_ms(&attempt.started_at);
    let (end, class) = match (&attempt.finished_at, attempt.outcome) {
        (Some(finished), Some(outcome)) => (span.offset_ms(finished), outcome.to_string()),
        (Some(finished), None) => (span.offset_ms(finished), "stopped".into()),
        (None, _) => match next_start {
            Some(next) => (span.offset_ms(next), "stopped".into()),
            None if state == StepState::Running => (span.length_ms, "running".into()),
            None => (start, "stopped".into()),
        },
    };
    let length = (end - start).max(0);
    let title = format!(
        "attempt {}: {class}, {} from {}",
        attempt.number,
        duration(length.unsigned_abs()),
        span.label(&attempt.started_at)
    );
    format!(
        "<span class=\"bar {class}\" style=\"left:{:.3}%;width:{:.3}%\" title=\"{}\"></span>",
        span.percent(start),
        span.percent(length),
        escape(&title)
    )
}

fn mark(class: &str, at: &str, title: &str, span: &Span) -> String {
    format!(
        "<span class=\"mark {class}\" style=\"left:{:.3}%\" title=\"{}\"></span>",
        span.percent(span.offset_ms(at)),
        escape(&format!("{} {title}", span.label(at)))
    )
}

/// The recovery decisions and retries in words, in the order they happened.
fn decisions(facts: &ReportFacts, span: &Span) -> String {
    let mut lines: Vec<(i64, String)> = Vec::new();
    for step in &facts.steps {
        for record in &step.status.recoveries {
            let revision = record
                .revision
                .map(|r| format!(" (revision {r})"))
                .unwrap_or_default();
            let text = format!(
                "<b>{}</b> {}: recovery <code>{}</code>{revision} — {}",
                escape(&step.status.id),
                span.label(&record.at),
                record.strategy,
                escape(&record.reason)
            );
            lines.push((span.offset_ms(&record.at), text));
        }
    }
    for note in &facts.notes {
        let text = format!(
            "<b>{}</b> {}: {}",
            escape(&note.step),
            span.label(&note.at),
            escape(&note.text)
        );
        lines.push((span.offset_ms(&note.at), text));
    }
    if lines.is_empty() {
        return "<p class=\"quiet\">No recovery decision and no retry.</p>\n".into();
    }
    lines.sort_by_key(|(at, _)| *at);
    let items: String = lines
        .into_iter()
        .map(|(_, text)| format!("<li>{text}</li>\n"))
        .collect();
    format!("<ol class=\"decisions\">\n{items}</ol>\n")
}
