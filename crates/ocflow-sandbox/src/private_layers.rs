//! The step's private directory: its own layer over each of the user's tool caches (or, where
//! no overlay can be mounted, an empty cache of its own, the user's left read-only) and its own
//! `/var/tmp`.

use std::path::{Path, PathBuf};

use crate::exec::ExecRequest;
use crate::overlay::{Overlay, mount_overlay_here};

/// A step's own `/var/tmp`, in its private directory (the host's is shared by every process
/// and survives the step).
const PRIVATE_VAR_TMP: &str = "var-tmp";

/// What the step's private directory gives the command: paths it may write (caches seen
/// through their overlays, the directories standing in for the others, its `/var/tmp`), the
/// variables pointing tools at those directories, and a `/var/tmp` for bubblewrap to bind.
#[derive(Debug, Default)]
pub(crate) struct Private {
    pub(crate) writable: Vec<PathBuf>,
    /// The user's caches left read-only: bubblewrap binds them, so one beneath a hidden
    /// directory (a home in `/tmp`) stays readable.
    pub(crate) read_only: Vec<PathBuf>,
    pub(crate) env: Vec<(String, PathBuf)>,
    pub(crate) var_tmp: Option<PathBuf>,
    /// The dependency directories no overlay could show: bubblewrap binds them read-only
    /// (source, place in the view).
    pub(crate) read_only_dependencies: Vec<(PathBuf, PathBuf)>,
}

/// Makes the step's private layers in `dir`: each cache through an overlay where `own_namespace`
/// allows one (the user's cache the lower layer, the step's directory the upper one), else a
/// directory of the step's named by the cache's variable (the user's left read-only); and a
/// `/var/tmp` of the step's, mounted here in the launcher's namespace or bound by bubblewrap
/// (without either, `/var/tmp` stays read-only).
pub(crate) fn make_private(
    request: &ExecRequest<'_>,
    dir: &Path,
    own_namespace: bool,
) -> Result<Private, String> {
    let made = |path: &Path| {
        std::fs::create_dir_all(path)
            .map_err(|err| format!("cannot make {}: {err}", path.display()))
    };
    let mut private = Private::default();
    for (index, cache) in request.caches.iter().enumerate() {
        let layer = dir.join(format!("cache-{index}"));
        let (upper, work) = (layer.join("upper"), layer.join("work"));
        let mounted = request.cache_overlay
            && own_namespace
            && cache.path.is_dir()
            && made(&upper).is_ok()
            && made(&work).is_ok()
            && {
                let overlay = Overlay {
                    target: &cache.path,
                    lower: std::slice::from_ref(&cache.path),
                    upper: &upper,
                    work: &work,
                };
                // `volatile` (Linux 5.10): the layer is thrown away with the step, so its
                // unmount need not sync the upper file system (which costs milliseconds on a
                // busy disk); older kernels refuse the option.
                mount_overlay_here(overlay, ",volatile").is_ok()
                    || mount_overlay_here(overlay, "").is_ok()
            };
        if mounted {
            private.writable.push(cache.path.clone());
            continue;
        }
        if cache.path.is_dir() {
            private.read_only.push(cache.path.clone());
        }
        if cache.variable.is_empty() {
            continue;
        }
        let own = layer.join("own");
        made(&own)?;
        if cache.variable == "CARGO_HOME" {
            // Cargo's settings live in its home: the step's starts with the user's (not the
            // credentials, which no command needs).
            for name in ["config.toml", "config"] {
                let _ = std::fs::copy(cache.path.join(name), own.join(name));
            }
        }
        private.env.push((cache.variable.clone(), own.clone()));
        private.writable.push(own);
    }
    let var_tmp = dir.join(PRIVATE_VAR_TMP);
    made(&var_tmp)?;
    if request.bwrap.is_some() {
        private.var_tmp = Some(var_tmp);
    } else if own_namespace && rustix::mount::mount_bind(&var_tmp, "/var/tmp").is_ok() {
        private.writable.push(PathBuf::from("/var/tmp"));
    }
    Ok(private)
}
