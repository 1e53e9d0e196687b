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
use std::sync::{Mutex, Once};

use pyo3::ffi;

/// `sys.base_prefix` of the Python ocflow was built against.
const BUILT_HOME: Option<&str> = option_env!("OCFLOW_BUILT_PYTHON_HOME");

/// Where the Python ocflow was built against lives, for messages.
pub(crate) fn built_home() -> Option<&'static str> {
    BUILT_HOME
}

/// Held while the interpreter starts and while ocflow registers its signal handlers
/// (`signals::Interrupt::listen`): the library may load on a thread of its own while the run
/// starts, and the two must not interleave (see `start`).
pub(crate) static SIGNAL_HANDLERS: Mutex<()> = Mutex::new(());

/// Starts the interpreter once, before pyo3 would; pyo3 then finds it running and uses it.
/// Python puts its own SIGINT handler in place when it finds none (its `signal` module, even
/// without `install_signal_handlers`), which would raise KeyboardInterrupt inside the next call
/// into the library and, chained behind ocflow's, kill nothing: whatever was there before the
/// start is put back, under `SIGNAL_HANDLERS`, so that ocflow's handler (registered before or
/// after) is the only one.
pub(crate) fn start() {
    static START: Once = Once::new();
    START.call_once(|| {
        let _handlers = SIGNAL_HANDLERS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = sigint_action();
        start_python();
        if let Some(before) = before
            && sigint_action().is_some_and(|now| now.sa_sigaction != before.sa_sigaction)
        {
            // SAFETY: sigaction with a struct read by sigaction above, for one signal.
            unsafe {
                libc::sigaction(libc::SIGINT, &before, std::ptr::null_mut());
            }
        }
    });
}

/// SIGINT's action now, or `None` when it cannot be read.
fn sigint_action() -> Option<libc::sigaction> {
    // SAFETY: sigaction with a null new action only writes the old one, a valid struct.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(libc::SIGINT, std::ptr::null(), &mut action) == 0).then_some(action)
    }
}

/// Starts the interpreter: with the home it was built against when that is right, else as
/// pyo3 does.
fn start_python() {
    start_at_built_home();
    pyo3::Python::initialize();
    // Its `signal` module is what sets the handler, when first imported: now, under the lock.
    pyo3::Python::attach(|py| {
        let _ = py.import("signal");
    });
}

fn start_at_built_home() {
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
}
