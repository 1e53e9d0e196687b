//! The check run once on the repository as it is, before any flow: a task whose check already
//! passes has nothing to solve, and a model (or a flow) would "solve" it by changing nothing
//! (Exercism's markdown is a refactoring whose stub passes its tests; SWE-bench's harness, too,
//! wants its FAIL_TO_PASS tests to fail before the patch). Such tasks are left out of the eval,
//! for ocflow and the model alone, and the report names them.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::cli::eval::scoring::{self, Scored};
use crate::cli::eval::suite::Suite;

/// The tasks of `suite` not yet scored whose check passes on a fresh copy of their repository
/// as it is (in `out`'s checks, as `before/`), in the order of their ids. A check that cannot run or
/// fails leaves its task in: the flow's own scoring says why.
pub(crate) fn passing(
    suite: &Suite,
    scored: &BTreeMap<String, Scored>,
    out: &Path,
    timeout: Duration,
) -> Vec<String> {
    let mut passing = Vec::new();
    for (id, check) in &suite.checks {
        if scored.contains_key(id) {
            continue;
        }
        let dir = scoring::check_dir(out, id).join("before");
        let repo = dir.join("repo");
        let passed = scoring::fresh_copy(&check.repo, &repo)
            .and_then(|()| scoring::run_check(&check.command, &repo, &dir, timeout))
            .is_ok_and(|run| run.code == Some(0));
        // Only the log stays.
        let _ = std::fs::remove_dir_all(&repo);
        let _ = std::fs::remove_dir_all(dir.join("tmp"));
        if passed {
            passing.push(id.clone());
        }
    }
    passing
}
