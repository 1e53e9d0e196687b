//! Starts the embedded Python with the home it was built against. Embedded, CPython guesses
//! its home (where the standard library lives) from the first `python3` on PATH; with a
//! minimal PATH (`/usr/bin:/bin`, as in a sandbox) that is another Python, and the import of
//! `math` fails. ocflow knows the right home (`OCFLOW_BUILT_PYTHON_HOME`, from `build.rs`) and
//! sets it, unless the user set `PYTHONHOME`, a virtual environment is active (`VIRTUAL_ENV`:
//! its `python3` comes first on PATH, and Python's own guess is what finds its
//! `site-packages`), or that directory is gone; then Python guesses as before. The
//! interpreter's own `site-packages` come with it, so a `pip install`ed library is found there.

use std::ffi::CString;
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::Once;

use pyo3::ffi;

/// `sys.base_prefix` of the Python ocflow was built against.
const BUILT_HOME: Option<&str> = option_env!("OCFLOW_BUILT_PYTHON_HOME");

/// Where the Python ocflow was built against lives, for messages.
pub(crate) fn built_home() -> Option<&'static str> {
    BUILT_HOME
}

/// Starts the interpreter once, before pyo3 would; pyo3 then finds it running and uses it.
pub(crate) fn start() {
    static START: Once = Once::new();
    START.call_once(|| {
        let home = BUILT_HOME.filter(|home| {
            std::env::var_os("PYTHONHOME").is_none()
                && std::env::var_os("VIRTUAL_ENV").is_none()
                && Path::new(home).join("lib").is_dir()
        });
        let Some(home) = home.and_then(|home| CString::new(home).ok()) else {
            return;
        };
        // SAFETY: the documented PyConfig sequence (init, set, initialize, clear) on a config
        // owned here, before any other thread uses Python (`Once`, and pyo3 has not started
        // it: checked). As pyo3 does after starting Python, the GIL is released at the end.
        unsafe {
            if ffi::Py_IsInitialized() != 0 {
                return;
            }
            let mut config = MaybeUninit::<ffi::PyConfig>::uninit();
            ffi::PyConfig_InitPythonConfig(config.as_mut_ptr());
            let mut config = config.assume_init();
            // Like pyo3's Py_InitializeEx(0): ocflow handles the signals itself.
            config.install_signal_handlers = 0;
            let home_field = std::ptr::addr_of_mut!(config.home);
            let set = ffi::PyConfig_SetBytesString(&mut config, home_field, home.as_ptr());
            if ffi::PyStatus_Exception(set) == 0 {
                // On failure Python is left uninitialised and pyo3 starts it as before.
                let _ = ffi::Py_InitializeFromConfig(&config);
            }
            ffi::PyConfig_Clear(&mut config);
            if ffi::Py_IsInitialized() != 0 {
                ffi::PyEval_SaveThread();
            }
        }
    });
}
