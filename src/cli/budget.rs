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
use ocflow_model::budget::{BudgetLimits, BudgetUse, PauseReason};
use ocflow_model::error::{Error, Result};
use ocflow_model::status::{FlowState, FlowStatus};

/// `[budget]` in a config file: the flags' own type, its keys checked as every section's are
/// (a misspelt limit is an error, never a flow without it).
pub(crate) fn strict<'de, D: serde::Deserializer<'de>>(from: D) -> Result<BudgetArgs, D::Error> {
    use serde::de::Error as _;
    let table = toml::Table::deserialize(from)?;
    if let Some(key) = table
        .keys()
        .find(|k| !BudgetArgs::KEYS.contains(&k.as_str()))
    {
        return Err(D::Error::custom(format!(
            "[budget]: unknown key `{key}`, expected one of {}",
            BudgetArgs::KEYS.join(", ")
        )));
    }
    table
        .try_into()
        .map_err(|err| D::Error::custom(format!("[budget]: {err}")))
}

/// The limits `budget` sets.
pub(crate) fn limits_of(budget: &BudgetArgs) -> BudgetLimits {
    BudgetLimits {
        max_tokens: budget.max_tokens,
        max_cost_usd: budget.max_cost,
        max_time_ms: budget.max_time.map(|d| d.as_millis() as u64),
        max_calls: budget.max_calls,
    }
}

/// `[prices."MODEL"]`: what a million tokens of a model cost, in US dollars.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FilePrice {
    pub(crate) per_mtok_in: f64,
    pub(crate) per_mtok_out: f64,
}

/// A price the workspace's file gives replaces the user's for the same model whole.
impl crate::cli::layered::Layered for FilePrice {
    fn or(self, _fallback: Self) -> Self {
        self
    }
}

/// The budget limits of the config files: the workspace's over the user's, except that an
/// untrusted repository's may only lower the user's.
pub(crate) fn file_limits(own: &BudgetArgs, user: &BudgetArgs, untrusted: bool) -> BudgetLimits {
    let (own, user) = (limits_of(own), limits_of(user));
    if untrusted {
        user.lowered_by(own)
    } else {
        own.or(user)
    }
}

/// The flags' limits over the config files'.
pub(crate) fn limits(flags: &BudgetArgs, files: BudgetLimits) -> BudgetLimits {
    limits_of(flags).or(files)
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
