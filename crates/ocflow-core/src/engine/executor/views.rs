//! The views command steps run in: a copy of the repository or one made of layers under an
//! overlay, which kind a step gets, reusing the view of its nearest ancestor, capturing what the
//! command changed there, and setting a view back after a full disk.

use std::fs;

use super::Executor;
use super::settling::Outputs;
use super::view_slots::{PRIVATE_DIR, TEMP_DIR, UPPER_DIR, ViewSlot, WORK_DIR};
use crate::engine::sandbox::SandboxPlan;
use crate::flow::graph::Ancestors;
use crate::flow::operations;
use crate::task::copied_view::CopiedView;
use crate::task::file_tree;
use crate::task::layered_view::LayeredView;
use crate::task::overlay::Overlay;
use crate::task::workspace;
use ocflow_model::error::{IoContext, Result};
use ocflow_model::event::Event;
use ocflow_model::flow::Step;

/// The operations that touch their view only through commands (so only under an overlay):
/// those declared `commands_only`.
pub(super) fn is_built_in_command(operation: &str) -> bool {
    operations::find(operation).is_some_and(|op| op.commands_only)
}

impl Executor {
    /// A free view, preferring the one where the step's nearest ancestor command ran: what
    /// that command left outside the tracked files (a `.venv`, `node_modules`, a build
    /// directory) is there, as it would be with `--jobs 1`.
    fn acquire_view(&mut self, ancestors: &Ancestors, layered: bool) -> Result<ViewSlot> {
        let order: Vec<&str> = ancestors.in_order().collect();
        let kind = |slot: &ViewSlot| matches!(slot, ViewSlot::Layered(_)) == layered;
        let preferred = order
            .iter()
            .rev()
            .filter_map(|id| self.view_of_step.get(*id))
            .find(|slot| kind(slot))
            .copied();
        if let Some(position) =
            preferred.and_then(|slot| self.free_views.iter().position(|free| *free == slot))
        {
            return Ok(self.free_views.remove(position));
        }
        if let Some(position) = self.free_views.iter().rposition(kind) {
            return Ok(self.free_views.remove(position));
        }
        if layered {
            let index = self.layered.len();
            self.layered
                .push(LayeredView::open(&self.task, self.task.layers(index))?);
            return Ok(ViewSlot::Layered(index));
        }
        let index = self.views.len();
        self.views
            .push(CopiedView::open(&self.task, self.task.view(index))?);
        Ok(ViewSlot::Copy(index))
    }

    /// The view `step` runs in: one made of layers or a copy (`layered_view_for`), preferring
    /// its nearest ancestor's; recorded as the step's.
    pub(super) fn acquire_view_for(
        &mut self,
        step: &Step,
        ancestors: &Ancestors,
    ) -> Result<ViewSlot> {
        let layered = self.layered_view_for(step) && self.overlay_works_here()?;
        let slot = self.acquire_view(ancestors, layered)?;
        self.view_of_step.insert(step.id.clone(), slot);
        Ok(slot)
    }

    /// Brings the view `slot` to the state the step must see (`overlay`: the snapshot with the
    /// outputs of its ancestors), with the repository's dependencies copied in where no mount
    /// shows them; returns its directory as `work_dir`, relative to the step's directory.
    pub(super) fn sync_view(&mut self, slot: ViewSlot, overlay: &Overlay) -> Result<String> {
        let dir = match slot {
            ViewSlot::Copy(index) => {
                if let Err(err) = self.views[index].sync(&self.task, overlay) {
                    // Half-synced, the view's record no longer matches its files: set it back
                    // to the snapshot before anyone uses it again.
                    self.views[index] = CopiedView::open(&self.task, self.task.view(index))?;
                    return Err(err);
                }
                let mounted = self
                    .settings
                    .sandbox
                    .as_ref()
                    .is_some_and(SandboxPlan::mounts_dependencies);
                if !mounted {
                    // No mount can show the repository's dependencies here: the view gets
                    // copies (the flow's start warned).
                    self.settings
                        .dependencies
                        .copy_into(&self.task.view(index))?;
                }
                workspace::view_dir_name(index)
            }
            ViewSlot::Layered(index) => {
                if let Err(err) = self.layered[index].prepare(&self.task, overlay) {
                    // Half-synced, the view's record no longer matches its layer: set it back
                    // to the snapshot before anyone uses it again.
                    self.layered[index] = LayeredView::open(&self.task, self.task.layers(index))?;
                    return Err(err);
                }
                format!(
                    "{}/{}",
                    workspace::layers_dir_name(index),
                    LayeredView::MOUNT_DIR
                )
            }
        };
        Ok(format!("../{dir}"))
    }

    /// Whether overlays work in the task's directory: probed there once, before the first view
    /// made of layers; when they do not, a warning says so and views are copies.
    pub(super) fn overlay_works_here(&mut self) -> Result<bool> {
        if let Some(works) = self.overlay_works {
            return Ok(works);
        }
        let works = self
            .settings
            .sandbox
            .as_ref()
            .is_some_and(|plan| plan.overlay_works_in(&self.task.root));
        self.overlay_works = Some(works);
        if !works {
            self.events.emit(Event::Warning {
                message: format!(
                    "overlays do not work in the file system of {} (the temporary directory's \
                     took one): command steps run in copies of the repository",
                    self.task.root.display()
                ),
            })?;
        }
        Ok(works)
    }

    /// Whether `step` runs in a view made of layers: only the built-in commands (a plugin may
    /// write into its view from Python, between commands or beside them), only under the
    /// sandbox with overlays on, and only where the workspace's files keep the group they would
    /// have (a setgid workspace gives them one the overlay's user namespace cannot map, and
    /// copying a file up would fail).
    pub(super) fn layered_view_for(&self, step: &Step) -> bool {
        self.settings
            .sandbox
            .as_ref()
            .is_some_and(|plan| plan.overlay)
            && is_built_in_command(&step.operation)
            && !self.copy_views.contains(&step.id)
            && self.files_keep_their_group()
    }

    /// Whether files made in the task's directory keep the group they would have, which the
    /// launcher's user namespace maps (not in a setgid workspace of another group).
    pub(super) fn files_keep_their_group(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(&self.task.root).is_ok_and(|m| m.gid() == rustix::process::getegid().as_raw())
    }

    /// A command step's changes, from its view: exactly the overlay's upper directory for a
    /// view made of layers, a stat walk for a copy. Captured even when the command failed, so
    /// the view can be set back.
    pub(super) fn capture(
        &mut self,
        step: &Step,
        sequence: u64,
        view: Option<ViewSlot>,
    ) -> Result<Outputs> {
        // A file step comes here only when its thread failed: what it wrote is in `output/`.
        let Some(view) = view else {
            return Ok(Outputs::Written);
        };
        let dir = self.task.step_dir(&step.id);
        let output_dir = dir.join(workspace::OUTPUT_DIR);
        // What the command left running was stopped before (`orphans::end_step`).
        let (upper, work) = (dir.join(UPPER_DIR), dir.join(WORK_DIR));
        let forbidden = &self.settings.forbidden;
        let captured = match view {
            ViewSlot::Layered(index) => Outputs::Captured {
                captured: self.layered[index].capture(
                    &self.task,
                    &step.id,
                    sequence,
                    &upper,
                    &output_dir,
                    forbidden,
                )?,
                view: "overlay",
            },
            ViewSlot::Copy(index) => Outputs::Captured {
                captured: self.views[index].capture(
                    &self.task,
                    &step.id,
                    sequence,
                    &output_dir,
                    forbidden,
                )?,
                view: "copy",
            },
        };
        for dir in [upper, work, dir.join(PRIVATE_DIR)] {
            if dir.exists() {
                ocflow_sandbox::exec::remove_overlay_dirs(&dir);
            }
        }
        Ok(captured)
    }

    /// Drops everything a command step wrote when its disk filled up — its overlay's upper
    /// directory, its temporary directory, what its capture put in `output/` — and sets its
    /// view back to the snapshot (a copied view is made again: the command wrote into it; a
    /// view made of layers may hold the capture's merge).
    pub(super) fn drop_command_writes(
        &mut self,
        step: &Step,
        view: Option<ViewSlot>,
    ) -> Result<()> {
        let dir = self.task.step_dir(&step.id);
        crate::engine::orphans::stop_step(&self.task, &step.id);
        for written in [
            dir.join(UPPER_DIR),
            dir.join(WORK_DIR),
            dir.join(TEMP_DIR),
            dir.join(PRIVATE_DIR),
        ] {
            ocflow_sandbox::exec::remove_overlay_dirs(&written);
        }
        let output = dir.join(workspace::OUTPUT_DIR);
        file_tree::remove_tree(&output)?;
        fs::create_dir_all(&output).io_context(|| format!("creating {}", output.display()))?;
        match view {
            Some(ViewSlot::Copy(index)) => {
                self.views[index] = CopiedView::create(&self.task, self.task.view(index))?;
            }
            Some(ViewSlot::Layered(index)) => {
                self.layered[index] = LayeredView::open(&self.task, self.task.layers(index))?;
            }
            None => {}
        }
        Ok(())
    }
}
