//! What the host offers the library inside the embedded interpreter: the `ocflow_host` module,
//! put in `sys.modules` when the bridge loads. It reads a command's view made of layers by the
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

#[cfg(test)]
mod tests {
    use std::ffi::CString;
    use std::path::Path;

    use pyo3::types::PyDict;

    use super::*;
    use crate::engine::bridge::Bridge;

    /// The library's tests of views made of layers (`python/tests/test_view.py`), run by pytest
    /// inside the embedded interpreter, where they read the layers through `ocflow_host`: the
    /// rules are the host's, the assertions the library's.
    #[test]
    fn the_library_reads_views_made_of_layers_through_the_host() {
        let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python");
        Bridge::load(Some(&python), "open_codex_lib").unwrap();
        let tests = python.join("tests/test_view.py");
        let code = CString::new(format!(
            r#"
import sys
import pytest

class Outcomes:
    def __init__(self):
        self.seen = []

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            reason = report.longrepr[2] if report.skipped else str(report.longrepr or "")
            self.seen.append((report.nodeid.split("::")[-1], report.outcome, reason))

if not hasattr(sys, "argv"):
    sys.argv = ["pytest"]
outcomes = Outcomes()
code = int(pytest.main(
    [{tests:?}, "-q", "-p", "no:cacheprovider", "--capture=sys"], plugins=[outcomes]
))
seen = outcomes.seen
"#,
            tests = tests.display().to_string()
        ))
        .unwrap();
        let (code, seen): (i32, Vec<(String, String, String)>) = Python::attach(|py| {
            let scope = PyDict::new(py);
            py.run(&code, Some(&scope), Some(&scope))?;
            let code = scope.get_item("code")?.unwrap().extract()?;
            let seen = scope.get_item("seen")?.unwrap().extract()?;
            PyResult::Ok((code, seen))
        })
        .unwrap();
        if seen
            .iter()
            .any(|(_, _, why)| why.contains("extended attributes"))
        {
            eprintln!("SKIPPED: no user extended attributes on this file system");
            return;
        }
        let mut outcomes: Vec<(&str, &str)> = seen
            .iter()
            .map(|(name, outcome, _)| (name.as_str(), outcome.as_str()))
            .collect();
        outcomes.sort();
        assert_eq!(
            outcomes,
            vec![
                (
                    "test_a_path_is_read_from_the_highest_layer_that_has_it",
                    "passed"
                ),
                ("test_a_symlink_is_followed_through_the_view", "passed"),
                ("test_a_walk_merges_the_layers", "passed"),
                (
                    "test_the_test_command_is_found_through_the_layers",
                    "passed"
                ),
                ("test_without_layers_the_work_dir_is_the_view", "passed"),
                // Here the host's functions are there: nothing is missing.
                (
                    "test_without_the_host_a_view_made_of_layers_says_what_it_needs",
                    "skipped"
                ),
            ],
            "{seen:?}"
        );
        assert_eq!(code, 0, "{seen:?}");
    }
}
