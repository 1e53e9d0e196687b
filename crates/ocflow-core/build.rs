//! Makes the core's test binaries load the libpython it was built against, not
//! whichever one the dynamic loader finds first, and records where that Python's standard
//! library lives (its `sys.base_prefix`) as `OCFLOW_BUILT_PYTHON_HOME`: embedded, Python would
//! otherwise guess its home from the first `python3` on PATH, and a minimal PATH
//! (`/usr/bin:/bin`) hands it another Python's standard library.

use std::process::Command;

fn main() {
    pyo3_build_config::add_libpython_rpath_link_args();
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
    let Some(python) = pyo3_build_config::get().executable() else {
        return;
    };
    let home = Command::new(python)
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .and_then(|output| String::from_utf8(output.stdout).ok());
    if let Some(home) = home.map(|h| h.trim().to_string()).filter(|h| !h.is_empty()) {
        println!("cargo:rustc-env=OCFLOW_BUILT_PYTHON_HOME={home}");
    }
}
