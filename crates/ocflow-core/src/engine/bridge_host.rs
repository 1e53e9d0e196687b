//! What the host offers the library inside the embedded interpreter: the `ocflow_host` module,
//! put in `sys.modules` when the bridge loads (its test, in `engine/bridge.rs`, runs the
//! library's view tests through it). It reads a command's view made of layers by the
//! overlay's rules (`task::overlay_rules`), so the library (`open_codex_lib/view.py`) keeps no
//! copy of them.

use std::ffi::OsString;
use std::path::PathBuf;

use pyo3::prelude::*;

use crate::task::overlay_rules;

/// The module's name, as the library imports it.
const MODULE: &str = "ocflow_host";

/// Makes `import ocflow_host` work in the interpreter (once; a later call replaces nothing).
pub(crate) fn install(py: Python<'_>) -> PyResult<()> {
    let modules = py.import("sys")?.getattr("modules")?;
    if modules.contains(MODULE)? {
        return Ok(());
    }
    let module = PyModule::new(py, MODULE)?;
    module.add_function(wrap_pyfunction!(view_path, &module)?)?;
    module.add_function(wrap_pyfunction!(view_resolve, &module)?)?;
    module.add_function(wrap_pyfunction!(view_listing, &module)?)?;
    modules.set_item(MODULE, module)?;
    Ok(())
}

/// The file or directory showing at `relative` in the view made of `layers` (top first).
#[pyfunction]
fn view_path(py: Python<'_>, layers: Vec<PathBuf>, relative: PathBuf) -> Option<OsString> {
    py.detach(|| overlay_rules::shown_at(&layers, &relative).map(PathBuf::into_os_string))
}

/// Like `view_path`, a symlink there followed through the view.
#[pyfunction]
fn view_resolve(py: Python<'_>, layers: Vec<PathBuf>, relative: PathBuf) -> Option<OsString> {
    py.detach(|| overlay_rules::resolved_at(&layers, &relative).map(PathBuf::into_os_string))
}

/// The subdirectories and the other names showing in the directory at `relative`.
#[pyfunction]
fn view_listing(
    py: Python<'_>,
    layers: Vec<PathBuf>,
    relative: PathBuf,
) -> (Vec<OsString>, Vec<OsString>) {
    py.detach(|| {
        let shown = overlay_rules::listing(&layers, &relative);
        (shown.dirs, shown.files)
    })
}
