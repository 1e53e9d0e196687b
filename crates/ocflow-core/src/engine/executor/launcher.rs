//! A command step's sandbox launcher: the view it may write (mounted from layers by the
//! launcher for a view made of layers), its temporary and private directories, its cgroup, the
//! repository's dependencies, and whether its caches are overlays or its own.

use std::fs;
use std::path::{Path, PathBuf};

use super::Executor;
use super::view_slots::{PRIVATE_DIR, UPPER_DIR, ViewSlot, WORK_DIR};
use crate::engine::sandbox::{LauncherOverlay, SandboxPlan, StepScope};
use ocflow_model::error::{IoContext, Result};
use ocflow_model::flow::Step;
use ocflow_model::step_spec::Sandbox;

impl Executor {
    /// The launcher `step`'s commands start through, in the view `slot`, writing `temp` too;
    /// `network`: whether the step may reach the network. Only under a sandbox plan.
    pub(super) fn launcher(
        &mut self,
        step: &Step,
        slot: ViewSlot,
        temp: PathBuf,
        network: bool,
    ) -> Result<Sandbox> {
        // The caches' overlays have their upper layers in the task's directory: where the
        // kernel refuses overlays there (a container's root file system) or in a setgid
        // workspace, whose group the launcher's user namespace cannot map, the step gets
        // caches of its own, and results say so.
        let cache_overlays = self.settings.sandbox.as_ref().is_some_and(|p| p.overlay)
            && self.files_keep_their_group()
            && self.overlay_works_here()?;
        let Some(plan) = &self.settings.sandbox else {
            return Err(ocflow_model::error::Error::internal(format!(
                "step {} asked for a launcher without a sandbox plan",
                step.id
            )));
        };
        let dir = self.task.step_dir(&step.id);
        // A view made of layers is mounted by the launcher; the command's changes land in
        // `upper/`.
        let (upper, work) = (dir.join(UPPER_DIR), dir.join(WORK_DIR));
        let mut build_layers = None;
        let (target, lower) = match slot {
            ViewSlot::Copy(index) => (self.task.view(index), Vec::new()),
            ViewSlot::Layered(index) => {
                for fresh in [&upper, &work] {
                    // What a killed attempt wrote would show through in this one.
                    if fresh.exists() {
                        ocflow_sandbox::exec::remove_overlay_dirs(fresh);
                    }
                    fs::create_dir_all(fresh)
                        .io_context(|| format!("creating {}", fresh.display()))?;
                }
                let layered = &self.layered[index];
                build_layers = Some(layered.build_layers());
                (layered.mount_point(), layered.lower_layers(&self.task))
            }
        };
        let overlay = (!lower.is_empty()).then_some(LauncherOverlay {
            lower: &lower,
            upper: &upper,
            work: &work,
        });
        let private = dir.join(PRIVATE_DIR);
        // Decided on the flow's plan, as the view's copies of them are, not the caches' one.
        let dependencies = &self.settings.dependencies;
        let mounted = plan.mounts_dependencies().then_some(dependencies);
        let cache_plan;
        let plan = if cache_overlays {
            plan
        } else {
            cache_plan = SandboxPlan {
                overlay: false,
                ..plan.clone()
            };
            &cache_plan
        };
        let cgroup = ocflow_sandbox::step_cgroup::name(&self.task.root, &step.id);
        let scope = StepScope {
            private: &private,
            cgroup: &cgroup,
            dependencies: mounted,
            build_layers: build_layers.as_deref(),
        };
        let mut launcher = plan.launcher(&target, &[temp], network, overlay, scope)?;
        if !lower.is_empty() {
            let relative = |path: &Path| match path.strip_prefix(&self.task.root) {
                Ok(inside) => format!("../{}", inside.display()),
                Err(_) => path.display().to_string(),
            };
            launcher.view_layers = std::iter::once(UPPER_DIR.to_string())
                .chain(lower.iter().map(|layer| relative(layer)))
                .collect();
        }
        Ok(launcher)
    }
}
