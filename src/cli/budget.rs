//! The flow's budget on the command line's side: `[budget]` and the price table (`[prices]`,
//! a profile's `price_per_mtok_in/out`) read from the config files, with what a repository's
//! untrusted config may do to them (lower a budget; never raise or remove one, nor set a price,
//! since a price of 0 would lift `--max-cost`); and the accountant made for a run or a resume,
//! carrying over what the flow spent before, installed in the LLM client.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

use crate::cli::args::BudgetArgs;
use crate::cli::profiles::{FileLlm, LlmConfig};
use ocflow_core::llm::budget::{Budget, Price};
use ocflow_core::llm::client::Llm;
use ocflow_model::budget::{BudgetLimits, BudgetUse, PauseReason, parse_duration};
use ocflow_model::error::{Error, Result};
use ocflow_model::status::{FlowState, FlowStatus};

/// `[budget]` in a config file: the limits of every flow that gives no flag.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileBudget {
    pub(crate) max_tokens: Option<u64>,
    /// US dollars.
    pub(crate) max_cost: Option<f64>,
    /// A duration: "90s", "5m", "1h30m".
    pub(crate) max_time: Option<String>,
}

impl FileBudget {
    /// The limits it sets; a wrong value is a usage error naming the key and the file.
    pub(crate) fn limits(&self, file: &str) -> Result<BudgetLimits> {
        let max_time = self
            .max_time
            .as_deref()
            .map(parse_duration)
            .transpose()
            .map_err(|why| Error::Usage(format!("{file}: [budget] max_time: {why}")))?;
        if let Some(cost) = self.max_cost
            && !(cost.is_finite() && cost > 0.0)
        {
            return Err(Error::Usage(format!(
                "{file}: [budget] max_cost = {cost}: give a positive number of US dollars"
            )));
        }
        Ok(BudgetLimits {
            max_tokens: self.max_tokens,
            max_cost_usd: self.max_cost,
            max_time_ms: max_time.map(|d| d.as_millis() as u64),
        })
    }
}

/// `[prices."MODEL"]`: what a million tokens of a model cost, in US dollars.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FilePrice {
    pub(crate) per_mtok_in: f64,
    pub(crate) per_mtok_out: f64,
}

/// The budget limits of the config files: the workspace's over the user's, except that an
/// untrusted repository's may only lower the user's.
pub(crate) fn file_limits(
    own: &FileBudget,
    own_path: &str,
    user: &FileBudget,
    user_path: &str,
    untrusted: bool,
) -> Result<BudgetLimits> {
    let (own, user) = (own.limits(own_path)?, user.limits(user_path)?);
    Ok(if untrusted {
        user.lowered_by(own)
    } else {
        own.or(user)
    })
}

/// The flags' limits over the config files'.
pub(crate) fn limits(flags: &BudgetArgs, files: BudgetLimits) -> BudgetLimits {
    BudgetLimits {
        max_tokens: flags.max_tokens,
        max_cost_usd: flags.max_cost,
        max_time_ms: flags.max_time.map(|d| d.as_millis() as u64),
    }
    .or(files)
}

/// The price of every model in use, by model name: its profile's `price_per_mtok_in/out`,
/// else `[prices."MODEL"]`. Returns the models without a price too.
pub(crate) fn prices(
    file: &FileLlm,
    table: &BTreeMap<String, FilePrice>,
    llm: &LlmConfig,
) -> (BTreeMap<String, Price>, Vec<String>) {
    let mut priced = BTreeMap::new();
    let mut unpriced = Vec::new();
    let in_use = [&llm.planner, &llm.recovery, &llm.summary, &llm.operations]
        .into_iter()
        .chain(llm.roles.values())
        .filter(|m| !m.model.is_empty());
    for settings in in_use {
        let own = file
            .profiles
            .get(&settings.profile)
            .and_then(|p| Some((p.price_per_mtok_in?, p.price_per_mtok_out?)))
            .map(|(per_mtok_in, per_mtok_out)| Price {
                per_mtok_in,
                per_mtok_out,
            });
        let listed = table.get(&settings.model).map(|p| Price {
            per_mtok_in: p.per_mtok_in,
            per_mtok_out: p.per_mtok_out,
        });
        match own.or(listed) {
            Some(price) => {
                priced.insert(settings.model.clone(), price);
            }
            None if !unpriced.contains(&settings.model) => unpriced.push(settings.model.clone()),
            None => {}
        }
    }
    unpriced.retain(|model| !priced.contains_key(model));
    (priced, unpriced)
}

/// The accountant of a run or a resume of a flow that spent `saved` before (its limits kept
/// where no flag or config gives one), installed in `llm`; `None` without any limit. Returns
/// what to say once: the models whose calls count nothing toward `--max-cost`.
pub(crate) fn install(
    limits: BudgetLimits,
    prices: &(BTreeMap<String, Price>, Vec<String>),
    saved: BudgetUse,
    llm: Option<&Llm>,
) -> (Option<Arc<Budget>>, Vec<String>) {
    let limits = limits.or(saved.limits);
    if limits.is_empty() {
        return (None, Vec::new());
    }
    let (priced, unpriced) = prices;
    let mut warnings = Vec::new();
    if limits.max_cost_usd.is_some() && !unpriced.is_empty() {
        warnings.push(format!(
            "no price is known for the model(s) {}: their calls count as $0 toward the cost \
             budget; set price_per_mtok_in and price_per_mtok_out under [llm.profiles.NAME], or \
             per_mtok_in and per_mtok_out under [prices.\"MODEL\"], in your config",
            unpriced.join(", ")
        ));
    }
    let budget = Arc::new(Budget::new(limits, priced.clone(), saved.spent));
    if let Some(llm) = llm {
        llm.set_budget(budget.clone());
    }
    (Some(budget), warnings)
}

/// A paused flow resumed without a higher limit for the budget that stopped it would only pause
/// again (its next step started and stopped for nothing): refused, naming the flag to give.
pub(crate) fn refuse_the_same_limit(status: &FlowStatus, given: BudgetLimits) -> Result<()> {
    let (FlowState::Paused, Some(PauseReason::Budget(exceeded))) = (status.state, status.paused)
    else {
        return Ok(());
    };
    let kind = exceeded.budget;
    let limit = kind.limit(&given.or(status.budget.limits));
    if limit.is_none_or(|limit| limit > exceeded.limit) {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "task {} is paused: {exceeded}; give a higher limit to continue it: `ocflow resume {0} \
         {} N`",
        status.task_id,
        kind.flag()
    )))
}
