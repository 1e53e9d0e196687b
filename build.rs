//! Makes the binaries (and the test binaries) load the libpython they were built against, not
//! whichever one the dynamic loader finds first. (`crates/ocflow-core/build.rs` records where that
//! Python's standard library lives.)

fn main() {
    pyo3_build_config::add_libpython_rpath_link_args();
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
}
