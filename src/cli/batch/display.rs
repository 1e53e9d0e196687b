//! What the person or program that started `ocflow batch` sees while it runs. With `--json`:
//! every flow's events as its process prints them, each tagged with its `task_id`, between
//! `batch_started` and `batch_finished`. At a terminal: one live line per running flow and a
//! total bar (indicatif, as `cli/live.rs` shows one flow). Otherwise: a line per finished flow.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use ocflow_model::event::{Event, Record};
use ocflow_model::output::{self, print_stdout, printable, say};
use ocflow_model::status::now;
use serde_json::Value;

use crate::cli::batch::results::TaskResult;

/// Shows the batch's progress; shared by the flows' tasks.
pub(crate) struct Reporter {
    json: bool,
    live: Option<Live>,
    /// The last `error` event of each flow, for its result's reason.
    errors: Mutex<HashMap<String, String>>,
    total: usize,
    done: Mutex<usize>,
}

struct Live {
    multi: MultiProgress,
    total: ProgressBar,
    flows: Mutex<HashMap<String, ProgressBar>>,
}

impl Reporter {
    pub(crate) fn new(json: bool, total: usize) -> Arc<Reporter> {
        let live = (!json && output::stderr_is_live()).then(|| {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            let bar = multi.add(ProgressBar::new(total as u64));
            bar.set_style(
                ProgressStyle::with_template("{bar:30} {pos}/{len} flows, {elapsed} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            Live {
                multi,
                total: bar,
                flows: Mutex::default(),
            }
        });
        Arc::new(Reporter {
            json,
            live,
            errors: Mutex::default(),
            total,
            done: Mutex::new(0),
        })
    }

    /// A batch-level event (`batch_started`, `batch_finished`).
    pub(crate) fn event(&self, event: Event) {
        if self.json {
            let record = Record::now(now(), event);
            if let Ok(line) = serde_json::to_string(&record) {
                print_stdout(&format!("{line}\n"));
            }
        } else if let Event::BatchStarted {
            tasks,
            skipped,
            resumed,
            flows,
            out,
            ..
        } = &event
        {
            self.note(&format!(
                "ocflow: batch of {tasks} task(s) in {}: {skipped} finished earlier, {resumed} \
                 to resume, {flows} flow(s) at once",
                out.display()
            ));
        }
    }

    /// Tasks an earlier run finished count as done on the bar.
    pub(crate) fn skipped(&self, count: usize) {
        if let Ok(mut done) = self.done.lock() {
            *done += count;
        }
        if let Some(live) = &self.live {
            live.total.inc(count as u64);
        }
    }

    /// A flow's process started.
    pub(crate) fn started(&self, id: &str, resume: bool) {
        if let Some(live) = &self.live {
            let bar = live
                .multi
                .insert_before(&live.total, ProgressBar::new_spinner());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {prefix} {elapsed:>4} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_prefix(printable(id));
            bar.set_message(if resume { "resuming" } else { "starting" });
            bar.enable_steady_tick(Duration::from_millis(120));
            if let Ok(mut flows) = live.flows.lock() {
                flows.insert(id.to_string(), bar);
            }
        }
    }

    /// One line a flow's process printed on stdout (a JSON event).
    pub(crate) fn flow_line(&self, id: &str, line: &str) {
        let Ok(mut event) = serde_json::from_str::<Value>(line) else {
            return;
        };
        if event["type"] == "error"
            && let (Some(message), Ok(mut errors)) = (event["message"].as_str(), self.errors.lock())
        {
            errors.insert(id.to_string(), message.to_string());
        }
        if self.json {
            if let Some(object) = event.as_object_mut() {
                object.insert("task_id".into(), Value::String(id.to_string()));
            }
            print_stdout(&format!("{event}\n"));
            return;
        }
        let Some(live) = &self.live else {
            return;
        };
        let message = match event["type"].as_str() {
            Some("flow_planned") => format!("{} step(s)", event["steps"]),
            Some("step_started") => format!(
                "step {} ({})",
                event["step"].as_str().unwrap_or("?"),
                event["operation"].as_str().unwrap_or("?")
            ),
            Some("step_finished") => format!(
                "step {} {}",
                event["step"].as_str().unwrap_or("?"),
                event["status"].as_str().unwrap_or("?")
            ),
            Some("heartbeat") => match event["stage"].as_str() {
                Some(stage) => stage.to_string(),
                None => return,
            },
            _ => return,
        };
        if let Ok(flows) = live.flows.lock()
            && let Some(bar) = flows.get(id)
        {
            // A step id comes from the model: never let it drive the terminal.
            bar.set_message(printable(&message));
        }
    }

    /// Every line of a process's stdout (an apply's events).
    pub(crate) fn passthrough(&self, id: &str, stdout: &[u8]) {
        for line in String::from_utf8_lossy(stdout).lines() {
            self.flow_line(id, line);
        }
    }

    /// The last error a flow's process reported.
    pub(crate) fn last_error(&self, id: &str) -> Option<String> {
        self.errors.lock().ok()?.get(id).cloned()
    }

    /// A flow finished (`Some`) or stopped unfinished (`None`).
    pub(crate) fn finished(&self, id: &str, result: Option<&TaskResult>) {
        let done = self.done.lock().map_or(0, |mut done| {
            *done += usize::from(result.is_some());
            *done
        });
        let line = match result {
            Some(result) => format!(
                "ocflow: batch: {} {} in {:.1} s ({done}/{})",
                printable(id),
                result.state,
                result.duration_ms as f64 / 1000.0,
                self.total
            ),
            None => format!(
                "ocflow: batch: {} stopped; running the batch again resumes it",
                printable(id)
            ),
        };
        if let Some(live) = &self.live {
            if let Ok(mut flows) = live.flows.lock()
                && let Some(bar) = flows.remove(id)
            {
                bar.finish_and_clear();
            }
            if result.is_some() {
                live.total.inc(1);
            }
        }
        if !self.json {
            self.note(&line);
        }
    }

    /// A line for people, above the live lines when they are shown.
    pub(crate) fn note(&self, text: &str) {
        if self.json || text.trim().is_empty() {
            if self.json && !text.trim().is_empty() {
                say(text.trim_end());
            }
            return;
        }
        match &self.live {
            Some(live) => {
                let _ = live.multi.println(text.trim_end());
            }
            None => say(text.trim_end()),
        }
    }

    /// Takes the live lines off the terminal before the summary.
    pub(crate) fn close(&self) {
        if let Some(live) = &self.live {
            live.total.finish_and_clear();
            let _ = live.multi.clear();
        }
    }
}
