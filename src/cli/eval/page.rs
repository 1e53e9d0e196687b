//! The eval's page, `DIR/report.html`: one self-contained HTML file (no script, no fetch) with
//! two bar charts — tasks solved, and tokens per solved task, by the flows and by the model
//! alone — and the table of tasks, each linked to its flow's summary.

use std::collections::BTreeMap;

use crate::cli::eval::baseline::BaselineScore;
use crate::cli::eval::scoring::Scored;

/// The page for the tasks `ids`, their flows' scores and the model alone's.
pub(crate) fn render(
    ids: &[String],
    scored: &BTreeMap<String, Scored>,
    baselines: &BTreeMap<String, BaselineScore>,
) -> String {
    let flows_solved = scored.values().filter(|s| s.solved).count();
    let flows_tokens: u64 = scored.values().map(|s| s.tokens.total_tokens).sum();
    let alone_solved = baselines.values().filter(|b| b.solved).count();
    let alone_tokens: u64 = baselines.values().map(|b| b.tokens.total_tokens).sum();
    let per = |tokens: u64, solved: usize| tokens.checked_div(solved as u64).unwrap_or(0);
    let mut solved_bars = vec![("ocflow", flows_solved as u64)];
    let mut token_bars = vec![("ocflow", per(flows_tokens, flows_solved))];
    if !baselines.is_empty() {
        solved_bars.push(("the model alone", alone_solved as u64));
        token_bars.push(("the model alone", per(alone_tokens, alone_solved)));
    }
    let mut rows = String::new();
    for id in ids {
        let flow = scored.get(id);
        let cell = |text: &str| format!("<td>{}</td>", escape(text));
        rows.push_str("<tr>");
        rows.push_str(&format!(
            "<td><a href=\"flows/workspace/{0}/summary.md\">{0}</a></td>",
            escape(id)
        ));
        rows.push_str(&cell(match flow {
            Some(one) if one.solved => "solved",
            Some(_) => "not solved",
            None => "unfinished",
        }));
        rows.push_str(&cell(flow.map_or("-", |one| one.state.as_str())));
        rows.push_str(&cell(if flow.is_some_and(|one| one.false_success) {
            "FALSE SUCCESS"
        } else {
            ""
        }));
        rows.push_str(&cell(
            &flow.map_or(String::new(), |one| one.tokens.total_tokens.to_string()),
        ));
        if !baselines.is_empty() {
            rows.push_str(&cell(match baselines.get(id) {
                Some(one) if one.solved_first_try => "solved (1st try)",
                Some(one) if one.solved => "solved (2nd try)",
                Some(_) => "not solved",
                None => "-",
            }));
        }
        rows.push_str("</tr>\n");
    }
    let alone_head = if baselines.is_empty() {
        ""
    } else {
        "<th>the model alone</th>"
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>ocflow eval</title><style>body{{font-family:sans-serif;margin:2em;max-width:60em}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.3em .6em}}\
         .charts{{display:flex;gap:3em}}</style></head><body>\n<h1>ocflow eval</h1>\n\
         <p>{flows_solved} of {} task(s) solved by ocflow{}.</p>\n\
         <div class=\"charts\">{}{}</div>\n\
         <table><tr><th>task</th><th>ocflow</th><th>flow</th><th>false success</th>\
         <th>tokens</th>{alone_head}</tr>\n{rows}</table>\n</body></html>\n",
        ids.len(),
        if baselines.is_empty() {
            String::new()
        } else {
            format!(", {alone_solved} by the model alone")
        },
        bars("tasks solved", &solved_bars),
        bars("tokens per solved task", &token_bars),
    )
}

/// A small horizontal bar chart, as inline SVG.
fn bars(title: &str, values: &[(&str, u64)]) -> String {
    let most = values.iter().map(|(_, v)| *v).max().unwrap_or(0).max(1);
    let mut svg = format!(
        "<figure><figcaption>{}</figcaption><svg width=\"360\" height=\"{}\" role=\"img\">",
        escape(title),
        values.len() * 30 + 10
    );
    for (index, (label, value)) in values.iter().enumerate() {
        let y = index * 30 + 5;
        let width = 200 * value / most;
        svg.push_str(&format!(
            "<text x=\"0\" y=\"{}\" font-size=\"12\">{}</text>\
             <rect x=\"110\" y=\"{y}\" width=\"{width}\" height=\"20\" fill=\"{}\"></rect>\
             <text x=\"{}\" y=\"{}\" font-size=\"12\">{value}</text>",
            y + 15,
            escape(label),
            if index == 0 { "#2a7" } else { "#888" },
            115 + width,
            y + 15
        ));
    }
    svg.push_str("</svg></figure>");
    svg
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
