//! `ocflow report`: one self-contained HTML page (`<task dir>/report.html`) showing the flow's
//! graph, its timeline, the steps' tokens, the summary and the diff. Inline CSS and script
//! only, and a content security policy that lets nothing else load or run: the page opens
//! from a file with no network, and what the task holds is escaped (`html::escape`).

mod graph;
mod html;
mod markdown;
mod timeline;

use std::fmt::Write;

use crate::cli::args::TaskArg;
use crate::cli::config::Config;
use crate::cli::tasks::{find_task, know_operations_of};
use html::{duration, escape};
use ocflow_core::task::report::{self, Changes, FileDiff, MAX_DIFF_BYTES, ReportFacts, StepFacts};
use ocflow_core::task::workspace;
use ocflow_model::error::Result;
use ocflow_model::event::EVENT_VERSION;
use ocflow_model::exit::ExitCode;
use ocflow_model::output::print_stdout;
use ocflow_model::status::{FlowStatus, now};
use timeline::Span;

/// `ocflow report`: writes the page and prints where it is. Takes no lock: the page may be
/// made while the flow runs, and it only reads the task.
pub(crate) fn report(config: &Config, args: TaskArg) -> Result<ExitCode> {
    let task = find_task(config, args.task.as_deref(), false)?;
    know_operations_of(config, &task);
    let facts = report::gather(&task)?;
    let nonce = format!("{:032x}", rand::random::<u128>());
    let page = page(&facts, &nonce, &now());
    let path = task.file(workspace::REPORT_FILE);
    workspace::write_atomic(&path, page.as_bytes())?;
    if config.json {
        let line = serde_json::json!({"version": EVENT_VERSION, "type": "report",
            "task_id": task.task_id, "path": path});
        print_stdout(&format!("{line}\n"));
    } else {
        print_stdout(&format!("{}\n", path.display()));
    }
    Ok(ExitCode::Success)
}

/// The whole page. `nonce` marks the page's own two scripts as the only ones allowed to run;
/// `now` stamps it (and ends the timeline of a flow still running).
fn page(facts: &ReportFacts, nonce: &str, now: &str) -> String {
    let status = &facts.status;
    let span = Span::of(facts, now);
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'nonce-{nonce}'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>ocflow report — {}</title>\n<style>{STYLE}</style>\n\
         <script nonce=\"{nonce}\">{ERROR_HOOK}</script>\n</head>\n<body>\n",
        escape(&status.task_id)
    );
    out.push_str(&header(facts, &span));
    out.push_str("<div id=\"page-errors\" hidden></div>\n");
    section(&mut out, "graph", "Flow", &graph_section(facts));
    section(
        &mut out,
        "timeline",
        "Timeline",
        &timeline_section(facts, &span),
    );
    section(
        &mut out,
        "steps",
        "Steps and tokens",
        &steps_table(facts, &span),
    );
    let summary = facts.summary.as_deref().map_or_else(
        || "<p class=\"quiet\">No summary was written (yet).</p>\n".to_string(),
        markdown::render,
    );
    section(&mut out, "summary", "Summary", &summary);
    section(
        &mut out,
        "changes",
        "Changes",
        &changes_section(&facts.changes),
    );
    let _ = write!(
        out,
        "<footer>Made by ocflow {} at {}. Everything on this page is on it: nothing is \
         loaded from elsewhere.</footer>\n<script nonce=\"{nonce}\">{INTERACTION}</script>\n\
         </body>\n</html>\n",
        env!("CARGO_PKG_VERSION"),
        escape(now)
    );
    out
}

fn section(out: &mut String, id: &str, title: &str, body: &str) {
    let _ = write!(
        out,
        "<section id=\"{id}\">\n<h2>{title}</h2>\n{body}</section>\n"
    );
}

/// The task, its state and the flow's totals.
fn header(facts: &ReportFacts, span: &Span) -> String {
    let status = &facts.status;
    let state = status.state.to_string();
    let mut facts_list = vec![
        ("task id", escape(&status.task_id)),
        ("repository", escape(&status.repo.display().to_string())),
        ("revision", status.revision.to_string()),
        ("started", escape(&status.created_at)),
        (
            "span",
            duration(span.offset_ms(&status.updated_at).unsigned_abs()),
        ),
        ("tokens", tokens_line(status, &facts.steps)),
    ];
    if let Some(finished) = &status.finished_at {
        facts_list.insert(4, ("finished", escape(finished)));
    }
    if !status.budget.is_empty() {
        facts_list.push(("budget", escape(&status.budget.describe())));
    }
    if let Some(sandbox) = &status.sandbox {
        facts_list.push(("sandbox", escape(sandbox)));
    }
    // What done means and whether it holds: the reason of the state above.
    if !status.deliverables.is_empty() {
        let lines: Vec<String> = status
            .deliverables
            .iter()
            .map(|check| escape(&check.line()))
            .collect();
        facts_list.push(("done", lines.join("<br>")));
    }
    if !status.instructions_used.is_empty() {
        facts_list.push((
            "instructions used",
            escape(&status.instructions_used.join(", ")),
        ));
    }
    if let Some(applied) = &status.applied_at {
        facts_list.push(("applied", escape(applied)));
    }
    if !status.memories_used.is_empty() {
        // Past failures the prompts carried: `ocflow memory show ID` tells each.
        let ids: Vec<String> = status
            .memories_used
            .iter()
            .map(|id| format!("memory #{id}"))
            .collect();
        facts_list.push(("memories used", ids.join(", ")));
    }
    let list: String = facts_list
        .into_iter()
        .map(|(name, value)| format!("<dt>{name}</dt><dd>{value}</dd>"))
        .collect();
    let reason = status
        .failure_reason()
        .map(|r| format!("<p class=\"reason\">{}</p>\n", escape(&r)))
        .unwrap_or_default();
    format!(
        "<header>\n<h1>ocflow report <span class=\"badge {state}\">{state}</span></h1>\n\
         <p class=\"task\">{}</p>\n{reason}<dl>{list}</dl>\n</header>\n",
        escape(&status.task)
    )
}

/// The flow's tokens, and how many of them the steps used (the rest went to planning,
/// recovery and the summary).
fn tokens_line(status: &FlowStatus, steps: &[StepFacts]) -> String {
    let in_steps: u64 = steps.iter().map(|s| s.status.tokens.total_tokens).sum();
    let total = &status.tokens;
    format!(
        "{} (prompt {}{}, completion {}) in {} LLM call(s); {in_steps} in steps, {} in planning, \
         recovery and the summary",
        total.total_tokens,
        total.prompt_tokens,
        total.cached_note(),
        total.completion_tokens,
        total.calls,
        total.total_tokens.saturating_sub(in_steps)
    )
}

/// Why a flow has nothing to draw: planning failed, or it made no steps.
fn no_steps(facts: &ReportFacts) -> String {
    let why = if facts.has_flow {
        "The flow has no steps.".to_string()
    } else {
        "There is no flow: planning did not make one.".to_string()
    };
    let message = facts
        .status
        .message
        .as_deref()
        .map(|m| format!(" {}", escape(m)))
        .unwrap_or_default();
    format!("<p class=\"note\">{why}{message}</p>\n")
}

fn graph_section(facts: &ReportFacts) -> String {
    if facts.steps.is_empty() {
        return no_steps(facts);
    }
    let legend: String = ["succeeded", "failed", "running", "pending", "skipped"]
        .iter()
        .map(|state| format!("<span class=\"badge {state}\">{state}</span> "))
        .collect();
    format!(
        "<p class=\"legend\">Columns by dependency depth; arrows from a step to those that \
         need it. {legend}</p>\n<div class=\"scroll\">{}</div>\n",
        graph::svg(&facts.steps)
    )
}

fn timeline_section(facts: &ReportFacts, span: &Span) -> String {
    if facts.steps.is_empty() {
        return no_steps(facts);
    }
    timeline::render(facts, span)
}

/// One row per step: what it is, how it went, its tokens (with a bar against the largest).
fn steps_table(facts: &ReportFacts, span: &Span) -> String {
    if facts.steps.is_empty() {
        return no_steps(facts);
    }
    let most = facts
        .steps
        .iter()
        .map(|s| s.status.tokens.total_tokens)
        .max()
        .unwrap_or(0)
        .max(1);
    let mut out = String::from(
        "<div class=\"scroll\"><table>\n<thead><tr><th>step</th><th>role</th><th>operation</th>\
         <th>state</th><th>attempts</th><th>started</th><th>took</th><th>tokens</th>\
         <th>recoveries</th><th>message</th></tr></thead>\n<tbody>\n",
    );
    for step in &facts.steps {
        out.push_str(&step_row(step, span, most));
    }
    out.push_str("</tbody></table></div>\n");
    out
}

fn step_row(step: &StepFacts, span: &Span, most_tokens: u64) -> String {
    let status = &step.status;
    let state = status.status.to_string();
    let description = step
        .description
        .as_deref()
        .map(|d| format!("<div class=\"quiet\">{}</div>", escape(d)))
        .unwrap_or_default();
    let started = status
        .started_at
        .as_deref()
        .map(|t| span.label(t))
        .unwrap_or_default();
    let took = status.duration_ms.map(duration).unwrap_or_default();
    let tokens = status.tokens.total_tokens;
    let tokens_cell = if tokens == 0 {
        "–".to_string()
    } else {
        format!(
            "{tokens}<span class=\"tokens\" style=\"width:{:.1}%\"></span>",
            tokens as f64 / most_tokens as f64 * 100.0
        )
    };
    let recoveries: Vec<String> = status
        .recoveries
        .iter()
        .map(|r| format!("<code>{}</code>", r.strategy))
        .collect();
    let retries = match status.auto_retries {
        0 => String::new(),
        n => format!(" {n} automatic retr{}", if n == 1 { "y" } else { "ies" }),
    };
    let message = status
        .error
        .as_ref()
        .map(|e| e.message.as_str())
        .or(status.message.as_deref())
        .unwrap_or("");
    let cause = step
        .cause
        .as_ref()
        .map(|cause| {
            format!(
                "<div class=\"quiet\">{}:</div><pre class=\"cause\">{}</pre>",
                escape(cause.source),
                escape(&cause.text)
            )
        })
        .unwrap_or_default();
    format!(
        "<tr data-step=\"{id}\"><td class=\"step\"><b>{id}</b>{description}</td>\
         <td class=\"role\">{}</td><td class=\"op\">{}</td>\
         <td><span class=\"badge {state}\">{state}</span></td><td class=\"num\">{}</td>\
         <td class=\"num\">{started}</td><td class=\"num\">{took}</td>\
         <td class=\"num tokens-cell\">{tokens_cell}</td><td>{}{retries}</td>\
         <td class=\"message\">{}{cause}</td></tr>\n",
        escape(step.role.as_deref().unwrap_or("")),
        escape(&status.operation),
        status.attempts,
        recoveries.join(" "),
        escape(message),
        id = escape(&status.id),
    )
}

fn changes_section(changes: &Changes) -> String {
    let files = match changes {
        Changes::Unavailable(why) => return format!("<p class=\"note\">{}</p>\n", escape(why)),
        Changes::Files(files) if files.is_empty() => {
            return "<p class=\"quiet\">The flow changed no file.</p>\n".into();
        }
        Changes::Files(files) => files,
    };
    let open = if files.len() <= 20 { " open" } else { "" };
    let mut out = format!(
        "<p class=\"quiet\">{} file(s), from the steps that succeeded, against the repository \
         as the flow found it.</p>\n",
        files.len()
    );
    for file in files {
        out.push_str(&file_diff(file, open));
    }
    out
}

fn file_diff(file: &FileDiff, open: &str) -> String {
    let kind = file.kind.name();
    let body = match &file.diff {
        Some(diff) => format!("<pre class=\"diff\">{}</pre>", diff_lines(diff)),
        None => format!(
            "<p class=\"note\">Not shown: the page's diff passed {} MiB. `ocflow diff` shows \
             all of it.</p>",
            MAX_DIFF_BYTES / (1024 * 1024)
        ),
    };
    format!(
        "<details{open}><summary><span class=\"kind {kind}\">{kind}</span> {}</summary>\n\
         {body}</details>\n",
        escape(&file.path)
    )
}

/// The diff, escaped, one span per line classed by what the line is: git's header lines
/// (before the first hunk), hunk headers, added and removed lines.
fn diff_lines(diff: &str) -> String {
    let mut out = String::with_capacity(diff.len() + diff.len() / 4);
    let mut in_header = true;
    for line in diff.lines() {
        if line.starts_with("@@") {
            in_header = false;
        }
        let class = if in_header || line.starts_with('\\') {
            "meta"
        } else if line.starts_with("@@") {
            "hunk"
        } else if line.starts_with('+') {
            "add"
        } else if line.starts_with('-') {
            "del"
        } else {
            "ctx"
        };
        let _ = writeln!(out, "<span class=\"{class}\">{}</span>", escape(line));
    }
    out
}

/// Installed first: a script error or anything the page's policy blocks (a script that
/// escaped escaping) is written onto the page, where a person — or the browser test reading
/// the rendered page — sees it.
const ERROR_HOOK: &str = r#"
(function () {
  var errors = [];
  function show() {
    var box = document.getElementById('page-errors');
    if (!box || errors.length === 0) { return; }
    box.hidden = false;
    box.textContent = 'This page met errors: ' + errors.join(' | ');
  }
  window.addEventListener('error', function (e) { errors.push(String(e.message)); show(); });
  document.addEventListener('securitypolicyviolation', function (e) {
    errors.push('blocked by the page policy: ' + e.violatedDirective); show();
  });
  document.addEventListener('DOMContentLoaded', show);
})();
"#;

/// Pointing at a step anywhere (graph, timeline, table) highlights it everywhere.
const INTERACTION: &str = r#"
(function () {
  var items = Array.prototype.slice.call(document.querySelectorAll('[data-step]'));
  function focus(id) {
    items.forEach(function (el) {
      el.classList.toggle('focus', id !== null && el.getAttribute('data-step') === id);
    });
  }
  items.forEach(function (el) {
    el.addEventListener('mouseenter', function () { focus(el.getAttribute('data-step')); });
    el.addEventListener('mouseleave', function () { focus(null); });
    el.addEventListener('focus', function () { focus(el.getAttribute('data-step')); });
  });
  document.body.setAttribute('data-ready', 'yes');
})();
"#;

const STYLE: &str = r#"
:root { --ok:#1a7f37; --ok-bg:#dafbe1; --bad:#cf222e; --bad-bg:#ffebe9; --run:#0969da;
  --run-bg:#ddf4ff; --wait:#57606a; --wait-bg:#ffffff; --skip:#6e7781; --skip-bg:#eaeef2;
  --line:#d0d7de; --text:#1f2328; --quiet:#59636e; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1200px; padding: 24px; color: var(--text);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; background: #f6f8fa; }
header, section { background: #fff; border: 1px solid var(--line); border-radius: 8px;
  padding: 16px 20px; margin-bottom: 16px; }
h1 { font-size: 20px; margin: 0 0 8px; } h2 { font-size: 16px; margin: 0 0 12px; }
h3, h4, h5, h6 { font-size: 14px; margin: 12px 0 6px; }
.task { font-size: 15px; white-space: pre-wrap; margin: 0 0 8px; }
.reason { color: var(--bad); margin: 0 0 8px; white-space: pre-wrap; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0; }
dt { color: var(--quiet); } dd { margin: 0; overflow-wrap: anywhere; }
.quiet { color: var(--quiet); } .note { background: #fff8c5; padding: 8px 12px;
  border-radius: 6px; }
#page-errors { background: var(--bad-bg); color: var(--bad); padding: 8px 12px;
  border-radius: 6px; margin-bottom: 16px; white-space: pre-wrap; }
.badge { display: inline-block; padding: 0 8px; border-radius: 10px; font-size: 12px;
  font-weight: 600; border: 1px solid; vertical-align: middle; }
.badge.succeeded { color: var(--ok); background: var(--ok-bg); }
.badge.failed { color: var(--bad); background: var(--bad-bg); }
.badge.running { color: var(--run); background: var(--run-bg); }
.badge.pending, .badge.interrupted { color: var(--wait); background: var(--wait-bg);
  border-style: dashed; }
.badge.skipped { color: var(--skip); background: var(--skip-bg); }
.scroll { overflow: auto; }
svg.graph text { font-size: 11px; fill: var(--text); }
svg.graph .node-id { font-size: 13px; font-weight: 600; }
svg.graph .node-op, svg.graph .node-state { fill: var(--quiet); }
.node rect { stroke-width: 1.5; }
.node.succeeded rect { fill: var(--ok-bg); stroke: var(--ok); }
.node.failed rect { fill: var(--bad-bg); stroke: var(--bad); }
.node.running rect { fill: var(--run-bg); stroke: var(--run); }
.node.pending rect { fill: var(--wait-bg); stroke: var(--wait); stroke-dasharray: 5 3; }
.node.skipped rect { fill: var(--skip-bg); stroke: var(--skip); stroke-dasharray: 2 3; }
.node.focus rect { stroke-width: 3.5; }
.edge { fill: none; stroke: #8c959f; stroke-width: 1.5; } .arrowhead { fill: #8c959f; }
.timeline { display: grid; gap: 4px; }
.tl-row { display: grid; grid-template-columns: 180px 1fr; align-items: center; gap: 8px; }
.tl-label { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; font-weight: 600; }
.tl-track { position: relative; height: 20px; background: #f6f8fa; border-radius: 4px; }
.tl-none { position: absolute; left: 6px; top: 1px; color: var(--quiet); font-size: 12px; }
.bar { position: absolute; top: 3px; height: 14px; min-width: 3px; border-radius: 3px; }
.bar.succeeded { background: var(--ok); } .bar.failed { background: var(--bad); }
.bar.running { background: var(--run); } .bar.stopped { background: var(--skip); }
.mark { position: absolute; top: 0; width: 10px; height: 10px; margin-left: -5px;
  transform: rotate(45deg); border: 2px solid #fff; }
.mark.recovery { background: #8250df; top: 5px; } .mark.note { background: #bf8700; top: 5px; }
.tl-row.focus .tl-track, tr.focus { outline: 2px solid var(--run); }
.tl-axis { display: flex; justify-content: space-between; margin-left: 188px;
  color: var(--quiet); font-size: 12px; }
.decisions { margin: 12px 0 0; padding-left: 20px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { color: var(--quiet); font-weight: 600; font-size: 12px; }
td.num { text-align: right; white-space: nowrap; }
td.message { min-width: 240px; overflow-wrap: anywhere; white-space: pre-wrap; }
pre.cause { margin: 4px 0 0; white-space: pre-wrap; overflow-wrap: anywhere; }
td.role, td.step { min-width: 120px; max-width: 200px; overflow-wrap: anywhere; }
td.step b { white-space: nowrap; }
td.op { font-size: 12px; }
.tokens-cell { position: relative; }
.tokens { display: block; height: 4px; background: #8250df; margin-left: auto;
  border-radius: 2px; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: #eff2f5;
  padding: 0 4px; border-radius: 4px; }
pre { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; background: #f6f8fa;
  padding: 8px 12px; border-radius: 6px; overflow: auto; }
pre.diff span { display: inline-block; min-width: 100%; }
.diff .add { background: #dafbe1; color: #116329; }
.diff .del { background: #ffebe9; color: #82071e; }
.diff .hunk { color: #0550ae; background: #ddf4ff; }
.diff .meta { color: var(--quiet); font-weight: 600; }
details { margin-bottom: 8px; } summary { cursor: pointer; font-weight: 600; }
.kind { font-size: 12px; padding: 0 6px; border-radius: 4px; margin-right: 4px; }
.kind.added { background: var(--ok-bg); color: var(--ok); }
.kind.deleted { background: var(--bad-bg); color: var(--bad); }
.kind.modified { background: var(--run-bg); color: var(--run); }
footer { color: var(--quiet); font-size: 12px; text-align: center; }
"#;

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use ocflow_core::task::report::Attempt;
    use ocflow_core::task::review::ChangeKind;
    use ocflow_model::flow::{Flow, Step};
    use ocflow_model::status::StepState;

    const EVIL: &str = "<script>alert('x')</script>";

    fn step(id: &str, depends_on: &[&str]) -> Step {
        Step {
            id: id.into(),
            operation: "write_file".into(),
            role: Some(format!("<i>{id}</i>")),
            description: Some(EVIL.into()),
            params: serde_json::Map::new(),
            depends_on: depends_on.iter().map(|d| d.to_string()).collect(),
            final_answer: false,
            profile: None,
            model: None,
        }
    }

    /// A two-step flow whose every text field holds markup: the task, roles, descriptions, a
    /// message, a recovery reason, a path, a diff line and the summary.
    fn facts() -> ReportFacts {
        let flow = Flow {
            version: 1,
            task: EVIL.into(),
            steps: vec![step("a", &[]), step("b", &["a"])],
            deliverables: None,
        };
        let mut status = FlowStatus::new("t", &flow, Path::new("/r"));
        status.created_at = "2025-01-01T00:00:00.000Z".into();
        status.updated_at = "2025-01-01T00:00:10.000Z".into();
        status.steps[0].status = StepState::Failed;
        status.steps[0].message = Some(EVIL.into());
        status.steps[0].tokens.total_tokens = 40;
        status.steps[0]
            .recoveries
            .push(ocflow_model::status::RecoveryRecord {
                strategy: ocflow_model::decision::StrategyKind::Retry,
                reason: EVIL.into(),
                signature: String::new(),
                revision: None,
                at: "2025-01-01T00:00:05.000Z".into(),
            });
        let steps = flow
            .steps
            .iter()
            .zip(&status.steps)
            .map(|(definition, step)| StepFacts {
                status: step.clone(),
                role: definition.role.clone(),
                description: definition.description.clone(),
                depends_on: definition.depends_on.clone(),
                cause: None,
                attempts: vec![Attempt {
                    number: 1,
                    started_at: "2025-01-01T00:00:01.000Z".into(),
                    finished_at: Some("2025-01-01T00:00:04.000Z".into()),
                    outcome: Some(StepState::Failed),
                }],
            })
            .collect();
        ReportFacts {
            status,
            has_flow: true,
            steps,
            notes: Vec::new(),
            summary: Some(format!("# {EVIL}\n\n- {EVIL}")),
            changes: Changes::Files(vec![FileDiff {
                path: "<x>.html".into(),
                kind: ChangeKind::Added,
                diff: Some(format!("diff --git a/x b/x\n@@ -0,0 +1 @@\n+{EVIL}\n")),
            }]),
        }
    }

    #[test]
    fn every_text_from_the_task_is_escaped_and_only_our_scripts_run() {
        let page = page(&facts(), "n0nce", "2025-01-01T00:00:11.000Z");
        assert_eq!(page.matches("<script").count(), 2, "{page}");
        assert_eq!(page.matches("<script nonce=\"n0nce\">").count(), 2);
        assert!(
            !page.contains("<i>") && !page.contains("alert('x')"),
            "{page}"
        );
        for escaped in [
            "<p class=\"task\">&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;</p>",
            "<td class=\"role\">&lt;i&gt;a&lt;/i&gt;</td>",
            "<span class=\"add\">+&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;</span>",
            "<span class=\"kind added\">added</span> &lt;x&gt;.html",
            "recovery <code>retry</code> — &lt;script&gt;",
            "<h3>&lt;script&gt;",
        ] {
            assert!(page.contains(escaped), "missing {escaped:?} in\n{page}");
        }
    }

    #[test]
    fn the_timeline_places_bars_by_time_and_the_table_scales_tokens() {
        let page = page(&facts(), "n", "2025-01-01T00:00:11.000Z");
        // The flow spans 10 s; each attempt runs from 1 s to 4 s.
        assert!(
            page.contains("class=\"bar failed\" style=\"left:10.000%;width:30.000%\""),
            "{page}"
        );
        assert!(page.contains("class=\"mark recovery\" style=\"left:50.000%\""));
        assert!(page.contains("40<span class=\"tokens\" style=\"width:100.0%\">"));
    }

    #[test]
    fn a_flow_without_steps_says_why_on_every_section() {
        let mut facts = facts();
        facts.steps.clear();
        facts.has_flow = false;
        facts.status.message = Some("no valid <flow>".into());
        facts.changes = Changes::Unavailable("there is no flow, so nothing changed".into());
        let page = page(&facts, "n", "2025-01-01T00:00:11.000Z");
        let note = "There is no flow: planning did not make one. no valid &lt;flow&gt;";
        assert_eq!(page.matches(note).count(), 3, "{page}");
        assert!(page.contains("there is no flow, so nothing changed"));
    }
}
