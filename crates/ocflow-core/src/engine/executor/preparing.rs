//! A step's preparation before its call: its directory cleaned of an earlier attempt, its
//! inputs staged or its view synced, its references resolved, its command's sandbox, and the
//! instructions file the library reads.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::Executor;
use super::view_slots::{PRIVATE_DIR, TEMP_DIR, UPPER_DIR, ViewSlot, WORK_DIR};
use crate::engine::command_env;
use crate::engine::instructions::{self, DoneStep};
use crate::flow::operations::{self, Access, ParamMeaning};
use crate::flow::shell;
use crate::task::file_tree;
use crate::task::overlay::{self, Overlay};
use crate::task::state;
use crate::task::workspace;
use ocflow_model::error::{Error, IoContext, Result};
use ocflow_model::flow::{self, RefError, Step};
use ocflow_model::status;
use ocflow_model::step_spec::StepSpec;

/// Empties a step's directory of what an earlier attempt left (its log keeps every attempt) and
/// makes its `input/` and `output/` afresh.
fn clean_for_attempt(dir: &Path) -> Result<()> {
    let input_dir = dir.join(workspace::INPUT_DIR);
    let output_dir = dir.join(workspace::OUTPUT_DIR);
    for stale in [&input_dir, &output_dir] {
        file_tree::remove_tree(stale)?;
    }
    let _ = fs::remove_file(dir.join(workspace::RESULT_FILE));
    let _ = fs::remove_file(dir.join(workspace::TRACEBACK_FILE));
    // The library numbers its saved answers from 1 on every attempt.
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with("llm-answer-")
        {
            let _ = fs::remove_file(entry.path());
        }
    }
    for fresh in [&input_dir, &output_dir] {
        fs::create_dir_all(fresh).io_context(|| format!("creating {}", fresh.display()))?;
    }
    // A killed attempt's overlay directories go too, whatever this attempt uses: they must
    // never be taken for this one's changes.
    for stale in [UPPER_DIR, WORK_DIR, PRIVATE_DIR] {
        ocflow_sandbox::exec::remove_overlay_dirs(&dir.join(stale));
    }
    Ok(())
}

/// A step made ready to run.
pub(super) struct Prepared {
    pub(super) instructions: PathBuf,
    pub(super) log: PathBuf,
    /// The view it runs in, for command steps.
    pub(super) view: Option<ViewSlot>,
}

impl Executor {
    /// Builds the step directory: staged inputs or a synced view, resolved references, and the
    /// instructions file.
    pub(super) fn prepare(&mut self, step: &Step) -> Result<Prepared> {
        let mut view = None;
        let prepared = self.prepare_in(step, &mut view);
        if let (Err(_), Some(index)) = (&prepared, view) {
            self.free_views.push(index);
        }
        prepared
    }

    pub(super) fn prepare_in(
        &mut self,
        step: &Step,
        view: &mut Option<ViewSlot>,
    ) -> Result<Prepared> {
        let spec = operations::find(&step.operation).ok_or_else(|| {
            Error::internal(format!(
                "step {} has the unknown operation {}",
                step.id, step.operation
            ))
        })?;
        let dir = self.task.step_dir(&step.id);
        clean_for_attempt(&dir)?;
        let ancestors = self.graph.ancestors(&step.id);
        let (params, mut env) = self.resolve_params(step)?;

        let (input_files, work_dir) = match spec.access {
            Access::Files => {
                // Only the versions of the paths the step reads: a chain's step no longer
                // builds the overlay of all its ancestors' files.
                let paths = instructions::staged_paths(step);
                let overlay = Overlay::of_ancestors(&self.status, &ancestors, Some(&paths));
                let staged = overlay::stage_inputs(
                    &self.task,
                    &overlay,
                    &paths,
                    &dir.join(workspace::INPUT_DIR),
                )?;
                (
                    staged.iter().map(|p| p.as_str().to_string()).collect(),
                    None,
                )
            }
            Access::View => {
                let overlay = Overlay::of_ancestors(&self.status, &ancestors, None);
                let slot = self.acquire_view_for(step, &ancestors)?;
                // Set before the sync: a view that fails to sync goes back to the free ones.
                *view = Some(slot);
                (Vec::new(), Some(self.sync_view(slot, &overlay)?))
            }
        };
        let mut sandbox = None;
        if let Some(slot) = *view {
            let temp = dir.join(TEMP_DIR);
            fs::create_dir_all(&temp).io_context(|| format!("creating {}", temp.display()))?;
            // The network is off under the sandbox unless the user allowed it, for every step
            // or this one.
            let asked = step.params.get("network").and_then(Value::as_bool) == Some(true);
            let network = self
                .settings
                .sandbox
                .as_ref()
                .map(|plan| plan.network || asked);
            env.extend(command_env::for_command_step(
                &self.task,
                &step.id,
                &temp,
                network == Some(false),
            ));
            if let Some(network) = network {
                sandbox = Some(self.launcher(step, slot, temp, network)?);
            }
        }

        let steps = instructions::earlier_steps(&self.flow, step, spec);
        let spec_block = StepSpec {
            version: ocflow_model::step_spec::INSTRUCTIONS_VERSION,
            task_id: self.task.task_id.clone(),
            task: self.flow.task.clone(),
            step_id: step.id.clone(),
            operation: step.operation.clone(),
            role: step.role.clone(),
            params,
            input_dir: workspace::INPUT_DIR.into(),
            output_dir: workspace::OUTPUT_DIR.into(),
            work_dir,
            input_files,
            steps,
            limits: self.settings.limits.clone(),
            env,
            sandbox,
        };
        // Only the direct dependencies: validation has made every step a parameter reads one.
        let dependencies: Vec<DoneStep<'_>> = step
            .depends_on
            .iter()
            .filter_map(|id| self.status.step(id))
            .map(|s| DoneStep {
                id: &s.id,
                operation: &s.operation,
                message: s.message.as_deref().unwrap_or(""),
            })
            .collect();
        let text = instructions::render(&spec_block, step, &dependencies);
        let instructions_path = dir.join(workspace::INSTRUCTIONS_FILE);
        fs::write(&instructions_path, text)
            .io_context(|| format!("writing {}", instructions_path.display()))?;
        let log = dir.join(workspace::STEP_LOG_FILE);
        let attempt = self.status.step(&step.id).map_or(1, |s| s.attempts);
        let header = format!("=== attempt {attempt}, {} ===\n", status::now());
        append(&log, header.as_bytes())?;
        Ok(Prepared {
            instructions: instructions_path,
            log,
            view: *view,
        })
    }

    /// The step's parameters with every `@{outputs.STEP.FIELD}` replaced by that field of the
    /// step's `result.json`; a missing field is an error naming the reference. In a command,
    /// a reference becomes `${OCFLOW_REF_n}` and its value goes into the returned environment:
    /// repository text reaches the shell as data, never as code.
    pub(super) fn resolve_params(
        &self,
        step: &Step,
    ) -> Result<(Map<String, Value>, Map<String, Value>)> {
        let spec = operations::find(&step.operation);
        let mut params = step.params.clone();
        let mut env = Map::new();
        for (name, value) in params.iter_mut() {
            let Some(text) = value.as_str() else { continue };
            let is_command = spec
                .and_then(|s| s.param(name))
                .is_some_and(|p| p.meaning == ParamMeaning::Command);
            let resolved = flow::substitute_refs(text, |reference, at| {
                let value = self.reference_value(reference)?;
                if !is_command {
                    return Ok(value);
                }
                let variable = format!("OCFLOW_REF_{}", env.len() + 1);
                env.insert(variable.clone(), Value::String(value));
                // Inside single quotes the shell expands nothing: close them around it.
                // A quote left open to the end of its line is a here-document's apostrophe,
                // not a quote: the variable goes in as it is there.
                let rest_of_line = text[at..].lines().next().unwrap_or("");
                let closed =
                    rest_of_line[reference.text.len().min(rest_of_line.len())..].contains('\'');
                Ok(match shell::quote_at(text, at) {
                    shell::Quote::Single if closed => format!("'\"${{{variable}}}\"'"),
                    _ => format!("${{{variable}}}"),
                })
            })
            .map_err(|message| Error::Usage(format!("parameter `{name}`: {message}")))?;
            *value = Value::String(resolved);
        }
        Ok((params, env))
    }

    /// The text of a referenced result field.
    pub(super) fn reference_value(&self, reference: &flow::OutputRef) -> Result<String, RefError> {
        let cannot =
            |why: String| RefError(format!("{} cannot be resolved: {why}", reference.text));
        let result = state::load_result(&self.task, &reference.step)
            .map_err(|err| cannot(err.to_string()))?
            .ok_or_else(|| cannot(format!("step {} has no result", reference.step)))?;
        // Content that is not text, or not whole, would arrive as other bytes: refused.
        if reference.fields.first().is_some_and(|f| f == "content") {
            if result.fields.contains_key("content_base64") {
                return Err(cannot(format!(
                    "step {} read a file that is not UTF-8 text ({} bytes), and a reference \
                     carries only text; copy it byte for byte with write_file's \
                     content_from_step",
                    reference.step,
                    result.fields.get("size").cloned().unwrap_or(Value::Null)
                )));
            }
            if result.fields.get("truncated") == Some(&Value::Bool(true)) {
                return Err(cannot(format!(
                    "step {} kept only the first part of the file (its content was cut at \
                     max_output_bytes); raise --max-output-bytes, or copy the file with a \
                     command",
                    reference.step
                )));
            }
        }
        let field = result.lookup(&reference.fields).ok_or_else(|| {
            // The first field on the path that is not there.
            let missing = (1..=reference.fields.len())
                .find(|len| result.lookup(&reference.fields[..*len]).is_none())
                .map_or("?", |len| reference.fields[len - 1].as_str());
            RefError(format!(
                "{} cannot be resolved: the result of step {} has no field `{missing}`",
                reference.text, reference.step
            ))
        })?;
        Ok(match field {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
    }
}

pub(super) fn append(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut file| file.write_all(bytes))
        .io_context(|| format!("writing {}", path.display()))
}
