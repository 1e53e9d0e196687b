//! Landlock: reading everywhere, writing only beneath the step's writable paths, no TCP
//! connect or bind without the network, no abstract Unix socket or signal outside the step.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    Scope, path_beneath_rules,
};

/// The Landlock ABI ocflow asks for (file system and TCP rights, scopes); older kernels enforce
/// what they can, and results say `landlock-partial`.
const ABI_VERSION: ABI = ABI::V6;

/// Restricts this process to reading everywhere and writing only beneath `writable` (paths
/// that do not exist are left out), and, unless `network`, to no TCP connect or bind. Returns
/// what the kernel enforced.
pub(crate) fn restrict(writable: &[PathBuf], network: bool) -> Result<&'static str, String> {
    let existing: Vec<&Path> = writable
        .iter()
        .map(PathBuf::as_path)
        .filter(|p| p.exists())
        .collect();
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI_VERSION))
        .map_err(|err| err.to_string())?;
    if !network {
        // Handled with no port allowed: every TCP connect and bind is refused.
        ruleset = ruleset
            .handle_access(AccessNet::from_all(ABI_VERSION))
            .map_err(|e| e.to_string())?;
    }
    let status = ruleset
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .and_then(|ruleset| ruleset.create())
        .and_then(|ruleset| {
            ruleset.add_rules(path_beneath_rules(["/"], AccessFs::from_read(ABI_VERSION)))
        })
        .and_then(|ruleset| {
            ruleset.add_rules(path_beneath_rules(
                existing,
                AccessFs::from_all(ABI_VERSION),
            ))
        })
        .and_then(|ruleset| ruleset.restrict_self())
        .map_err(|err| err.to_string())?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => "landlock",
        RulesetStatus::PartiallyEnforced => "landlock-partial",
        RulesetStatus::NotEnforced => "none",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restricted_thread_writes_only_beneath_its_writable_paths() {
        let dir = tempfile::tempdir().unwrap();
        let (allowed, denied) = (dir.path().join("allowed"), dir.path().join("denied"));
        std::fs::create_dir_all(&allowed).unwrap();
        std::fs::create_dir_all(&denied).unwrap();
        // Landlock restricts the calling thread (and what it starts): a thread of its own.
        let (a, d) = (allowed.clone(), denied.clone());
        let (enforced, wrote_allowed, wrote_denied) = std::thread::spawn(move || {
            let enforced = restrict(std::slice::from_ref(&a), true).unwrap();
            let ok = std::fs::write(a.join("f"), "x").is_ok();
            let denied = std::fs::write(d.join("f"), "x");
            (enforced, ok, denied.map_err(|e| e.kind()))
        })
        .join()
        .unwrap();
        assert!(wrote_allowed);
        match enforced {
            "landlock" | "landlock-partial" => assert_eq!(
                wrote_denied,
                Err(std::io::ErrorKind::PermissionDenied),
                "{enforced}"
            ),
            // A kernel without Landlock: nothing is enforced, and the launcher says so.
            _ => assert_eq!(enforced, "none"),
        }
    }
}
