//! What a person at a terminal sees while a flow runs (indicatif): a spinner with the model's
//! name and the tokens so far while the planner thinks, the plan listed before it runs, a live
//! line per running step with its elapsed time (and the model, for a step that asks one), and
//! each finished step with its duration and outcome. Made only when stderr is a terminal,
//! colour is allowed and `--json` is off; otherwise events stay plain lines
//! (`cli/progress.rs`, which hands events to the display).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use ocflow_core::flow::operations;
use ocflow_model::event::Event;
use ocflow_model::flow::Flow;
use ocflow_model::llm::Usage;
use ocflow_model::output::{self, LiveLines, paint, printable, say, styles};
use ocflow_model::status::StepState;

use crate::cli::words::{seconds, started_label};

/// The live display of one process.
pub(crate) struct Display {
    multi: MultiProgress,
    /// The planner's and the operations' model names.
    planner: Option<String>,
    operations: Option<String>,
    bars: Mutex<Bars>,
}

#[derive(Default)]
struct Bars {
    /// The spinner of a stage without steps (planning, the summary).
    stage: Option<ProgressBar>,
    steps: HashMap<String, ProgressBar>,
    tokens: Usage,
}

/// The live display, when people watch a terminal: it shows the events handed to it (by
/// `cli/progress.rs`), and every other line for people goes above it from now on.
pub(crate) fn install(
    json: bool,
    planner: Option<String>,
    operations: Option<String>,
) -> Option<Arc<Display>> {
    if json || !output::stderr_is_live() {
        return None;
    }
    let display = Arc::new(Display {
        multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
        planner,
        operations,
        bars: Mutex::default(),
    });
    output::install_live_lines(display.clone());
    Some(display)
}

/// Lists the plan before it runs: each step, what it does and what it waits for.
pub(crate) fn show_plan(flow: &Flow, json: bool) {
    if json {
        return;
    }
    say(&format!("ocflow: the plan, {} step(s):", flow.steps.len()));
    for (n, step) in flow.steps.iter().enumerate() {
        let target = [
            "file_path",
            "path",
            "command",
            "report_path",
            "instructions",
        ]
        .iter()
        .find_map(|p| step.params.get(*p).and_then(|v| v.as_str()))
        .map(|t| format!(" {}", shorten(&printable(t), 50)))
        .unwrap_or_default();
        let after = if step.depends_on.is_empty() {
            String::new()
        } else {
            paint(
                &format!("  (after {})", step.depends_on.join(", ")),
                styles::DIM,
            )
        };
        say(&format!(
            "  {:>2}. {} {}{target}{after}",
            n + 1,
            paint(&step.id, styles::NAME),
            step.operation
        ));
    }
}

fn shorten(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() > max || text.lines().count() > 1 {
        format!("{}…", line.chars().take(max - 1).collect::<String>())
    } else {
        line.to_string()
    }
}

fn spinner(template: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

fn tokens(usage: &Usage) -> String {
    let total = usage.prompt_tokens + usage.completion_tokens;
    if total == 0 {
        String::new()
    } else if total >= 10_000 {
        format!(" · {:.1}k tokens", total as f64 / 1000.0)
    } else {
        format!(" · {total} tokens")
    }
}

impl Display {
    fn bars(&self) -> std::sync::MutexGuard<'_, Bars> {
        self.bars
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The model a step asks, if its operation asks one.
    fn model_of(&self, operation: &str) -> Option<&str> {
        let asks = operations::find(operation).is_some_and(|op| op.needs_llm);
        asks.then_some(self.operations.as_deref()).flatten()
    }

    fn stage(&self, bars: &mut Bars, what: &str) {
        if let Some(old) = bars.stage.take() {
            old.finish_and_clear();
        }
        let bar = self
            .multi
            .add(spinner("{spinner:.cyan} {msg} {elapsed:.dim}"));
        bar.set_message(what.to_string());
        bars.stage = Some(bar);
    }

    /// Shows an event its own way; `false` leaves it to the plain progress line.
    pub(crate) fn show(&self, event: &Event) -> bool {
        let mut bars = self.bars();
        match event {
            Event::FlowStarted { task_id, .. } => {
                self.println(&format!("ocflow: task {}", paint(task_id, styles::NAME)));
                if let Some(model) = &self.planner {
                    self.stage(&mut bars, &format!("planning with {model}…"));
                }
                true
            }
            Event::FlowPlanned { .. } | Event::FlowResumed { .. } => {
                if let Some(bar) = bars.stage.take() {
                    bar.finish_and_clear();
                }
                false
            }
            Event::StepStarted {
                step,
                operation,
                attempt,
                role,
                model,
                ..
            } => {
                let asking = model
                    .as_deref()
                    .or_else(|| self.model_of(operation))
                    .map(|m| format!(", asking {m}"))
                    .unwrap_or_default();
                let bar = self
                    .multi
                    .add(spinner("  {spinner:.cyan} {msg} {elapsed:.dim}"));
                let label = started_label(step, operation, *attempt, role.as_deref());
                bar.set_message(format!("{label}{asking}"));
                bars.steps.insert(step.clone(), bar);
                true
            }
            Event::StepFinished {
                step,
                status,
                message,
                duration_ms,
                ..
            } => {
                if let Some(bar) = bars.steps.remove(step) {
                    bar.finish_and_clear();
                }
                let mark = if *status == StepState::Succeeded {
                    paint("✓", styles::GOOD)
                } else {
                    paint("✗", styles::BAD)
                };
                self.println(&format!(
                    "  {mark} {} {} {}",
                    paint(step, styles::NAME),
                    paint(&seconds(*duration_ms), styles::DIM),
                    printable(message)
                ));
                true
            }
            Event::Heartbeat {
                stage, tokens: t, ..
            } => {
                bars.tokens = *t;
                let extra = tokens(t);
                if let Some(bar) = &bars.stage {
                    let model = self.planner.as_deref().unwrap_or("the model");
                    bar.set_message(format!("{stage} with {model}…{extra}"));
                }
                // The flow's tokens so far, on every line still asking a model.
                for bar in bars.steps.values() {
                    let message = bar.message();
                    let base = message.split(" · ").next().unwrap_or(&message).to_string();
                    if base.contains(", asking ") {
                        bar.set_message(format!("{base}{extra}"));
                    }
                }
                true
            }
            Event::FlowFinished { .. }
            | Event::FlowInterrupted { .. }
            | Event::FlowPaused { .. } => {
                if let Some(bar) = bars.stage.take() {
                    bar.finish_and_clear();
                }
                for (_, bar) in bars.steps.drain() {
                    bar.finish_and_clear();
                }
                // The end of the run says it in full (`cli/ending.rs`); an interrupt says how
                // to resume here.
                matches!(event, Event::FlowFinished { .. })
            }
            _ => false,
        }
    }
}

impl LiveLines for Display {
    fn println(&self, line: &str) {
        if self.multi.println(line).is_err() {
            eprintln!("{line}");
        }
    }
}
