//! Which view a command step runs in, and the directories of its step directory the view's
//! overlay and sandbox use: what the executor keeps per step, and what its parts share.

/// One of the views command steps run in: a copy of the repository (`views`), or one made of
/// layers (`layered`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ViewSlot {
    Copy(usize),
    Layered(usize),
}

/// A command step's overlay directories, in its step directory: what the command changed, and
/// the scratch space overlayfs needs beside it.
pub(super) const UPPER_DIR: &str = "upper";
pub(super) const WORK_DIR: &str = "work";
/// A command step's private directory, in its step directory: its caches' layers and its own
/// `/var/tmp` (`SandboxPlan::launcher`), gone with the step.
pub(super) const PRIVATE_DIR: &str = "private";
/// A command step's own temporary directory (`TMPDIR`), in its step directory.
pub(super) const TEMP_DIR: &str = "tmp";
