//! What a suite's flows will spend, said before they run and set against what they spent.
//!
//! From past runs where there are any (the flows of this `--out` already scored: their mean),
//! else from the prompts' sizes: the planner's first request for each task (its system text,
//! the repository's files, the map at its budget, the task) at 3.5 characters a token, times
//! the three such requests a small flow makes (the plan, one code operation given about as
//! much, the summary). The report says how far off it was.

use std::collections::BTreeMap;

use crate::cli::eval::scoring::Scored;
use crate::cli::eval::suite::{Check, Repo};

/// Characters a token, for an estimate (English and code, with common tokenizers).
const CHARS_PER_TOKEN: f64 = 3.5;
/// Requests of about the planner's first one's size a small flow makes.
const REQUESTS_PER_FLOW: f64 = 3.0;

/// The estimate for the tasks still to run.
pub(crate) struct Estimate {
    /// Tokens for all of them.
    pub(crate) total: u64,
    /// How many tasks it is for.
    pub(crate) tasks: usize,
    /// Where it comes from, in words.
    pub(crate) basis: String,
}

/// The estimate for the tasks of `checks` not in `scored`.
pub(crate) fn before(
    checks: &BTreeMap<String, Check>,
    scored: &BTreeMap<String, Scored>,
) -> Estimate {
    let pending: Vec<&Check> = checks
        .iter()
        .filter(|(id, _)| !scored.contains_key(*id))
        .map(|(_, check)| check)
        .collect();
    let past: Vec<u64> = scored
        .values()
        .map(|s| s.tokens.total_tokens)
        .filter(|t| *t > 0)
        .collect();
    if !past.is_empty() {
        let mean = past.iter().sum::<u64>() / past.len() as u64;
        return Estimate {
            total: mean * pending.len() as u64,
            tasks: pending.len(),
            basis: format!(
                "the mean of the {} flow(s) of this eval already run",
                past.len()
            ),
        };
    }
    let total = pending
        .iter()
        .map(|check| match &check.repo {
            Repo::Path(repo) => {
                let chars = ocflow_core::llm::planner::first_request_chars(repo, &check.task);
                (chars as f64 / CHARS_PER_TOKEN * REQUESTS_PER_FLOW) as u64
            }
            Repo::Git { .. } => 0,
        })
        .sum();
    Estimate {
        total,
        tasks: pending.len(),
        basis: "the prompts' sizes (the planner's first request, three such requests a flow)"
            .into(),
    }
}
