//! The check run once on the repository as it is, before any flow: a task whose check already
//! passes has nothing to solve, and a model (or a flow) would "solve" it by changing nothing
//! (Exercism's markdown is a refactoring whose stub passes its tests; SWE-bench's harness, too,
//! wants its FAIL_TO_PASS tests to fail before the patch). Such tasks are left out of the eval,
//! for ocflow and the model alone, and the report names them.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use ocflow_model::error::{Error, Result};
use ocflow_model::event::Event;
use ocflow_model::output::say;

use crate::cli::config::Config;
use crate::cli::eval::scoring::{self, Scored};
use crate::cli::eval::suite::Suite;

/// Takes out of `suite` the tasks not yet scored (`earlier`) whose check passes on their
/// repository as it is, saying each (`tell`: at a terminal, or as an event); the ids taken out.
/// Refused when none is left.
pub(crate) fn leave_out(
    config: &Config,
    tell: &dyn Fn(&str, Event),
    suite: &mut Suite,
    earlier: &BTreeMap<String, Scored>,
    out: &Path,
    timeout: Duration,
) -> Result<Vec<String>> {
    let to_check = (suite.checks.keys())
        .filter(|id| !earlier.contains_key(*id))
        .count();
    if to_check > 0 && !config.json {
        say(&format!(
            "ocflow: eval: running the check of {to_check} task(s) on the repository as it is \
             (a task it already passes has nothing to solve)"
        ));
    }
    let left_out = passing(suite, earlier, out, timeout);
    for id in &left_out {
        let message = format!(
            "{id}: its check passes before any change: left out (nothing to solve, for ocflow \
             or the model alone)"
        );
        tell(
            &format!("ocflow: eval: {message}"),
            Event::Warning { message },
        );
    }
    suite.leave_out(&left_out);
    if suite.checks.is_empty() {
        return Err(Error::Usage(format!(
            "every task's check passes before any change ({}): nothing to solve; give tasks \
             whose check fails on the repository as it is",
            left_out.join(", ")
        )));
    }
    Ok(left_out)
}

/// The summary's paragraph naming the tasks `left_out`; nothing when there are none.
pub(crate) fn said(left_out: &[String]) -> String {
    if left_out.is_empty() {
        return String::new();
    }
    format!(
        "\nLeft out, their check passing before any change (nothing to solve): {}.\n",
        left_out.join(", ")
    )
}

/// The tasks of `suite` not yet scored whose check passes on a fresh copy of their
/// repository as it is (in `out`'s checks, as `before/`), in the order of their ids, one
/// after another. A check that cannot run or fails leaves its task in: the flow's own scoring
/// says why.
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
