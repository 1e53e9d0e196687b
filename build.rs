//! Makes the binary (and the test binaries) load the libpython it was built against,
//! not whichever one the dynamic loader finds first.

fn main() {
    pyo3_build_config::add_libpython_rpath_link_args();
}
