//! A flow's budgets as data: the limits (`--max-tokens`, `--max-cost`, `--max-time`,
//! `--max-calls`, `[budget]`),
//! what the flow has spent against them (saved in `flow_status.json`, carried over a resume),
//! which one stopped it, and the duration words the flags take ("90s", "5m", "1h30m"). The
//! accountant that checks each call is `llm::budget` in ocflow-core.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The limits of one flow; `None`: no limit of that kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct BudgetLimits {
    /// Tokens of every call (prompt and completion), every profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// US dollars, from the price table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// The flow's own run time in milliseconds, across resumes (time paused does not count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_time_ms: Option<u64>,
    /// Calls to the model, every profile (planning, steps, recovery, the summary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_calls: Option<u64>,
}

impl BudgetLimits {
    pub fn is_empty(&self) -> bool {
        self.max_tokens.is_none()
            && self.max_cost_usd.is_none()
            && self.max_time_ms.is_none()
            && self.max_calls.is_none()
    }

    /// Each limit of `self`, else `saved`'s: a resume keeps the limits the flow ran under,
    /// except those given again.
    pub fn or(self, saved: BudgetLimits) -> BudgetLimits {
        BudgetLimits {
            max_tokens: self.max_tokens.or(saved.max_tokens),
            max_cost_usd: self.max_cost_usd.or(saved.max_cost_usd),
            max_time_ms: self.max_time_ms.or(saved.max_time_ms),
            max_calls: self.max_calls.or(saved.max_calls),
        }
    }

    /// The lower of each limit: what a repository's untrusted config may do to the user's
    /// (lower a budget, never raise or remove one).
    pub fn lowered_by(self, other: BudgetLimits) -> BudgetLimits {
        fn lower<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(if b < a { b } else { a }),
                (a, b) => a.or(b),
            }
        }
        BudgetLimits {
            max_tokens: lower(self.max_tokens, other.max_tokens),
            max_cost_usd: lower(self.max_cost_usd, other.max_cost_usd),
            max_time_ms: lower(self.max_time_ms, other.max_time_ms),
            max_calls: lower(self.max_calls, other.max_calls),
        }
    }
}

/// What a flow has spent, over all its runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct BudgetSpent {
    /// Tokens of every answered call (reported by the endpoint).
    pub tokens: u64,
    /// US dollars by the price table; calls of a model without a price count zero.
    pub cost_usd: f64,
    /// Milliseconds the flow ran (planning included), across resumes.
    pub run_ms: u64,
    /// Calls the model answered.
    #[serde(default)]
    pub calls: u64,
}

/// The limits and what was spent, as `flow_status.json` and `flow_finished` carry them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct BudgetUse {
    pub limits: BudgetLimits,
    pub spent: BudgetSpent,
}

impl BudgetUse {
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty()
    }

    /// Spent against each limit, in words: "1200 of 2000 tokens, $0.0120 of $0.0500".
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for kind in BudgetKind::ALL {
            if let Some(limit) = kind.limit(&self.limits) {
                parts.push(format!(
                    "{} of {}",
                    kind.amount(kind.spent(&self.spent)),
                    kind.amount(limit)
                ));
            }
        }
        parts.join(", ")
    }
}

/// Which budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum BudgetKind {
    Tokens,
    Cost,
    Time,
    Calls,
}

impl BudgetKind {
    /// Every kind, in the order they are said.
    pub const ALL: [BudgetKind; 4] = [
        BudgetKind::Tokens,
        BudgetKind::Cost,
        BudgetKind::Time,
        BudgetKind::Calls,
    ];

    /// This kind's limit, as a number in its unit (tokens, dollars, milliseconds).
    pub fn limit(self, limits: &BudgetLimits) -> Option<f64> {
        match self {
            BudgetKind::Tokens => limits.max_tokens.map(|n| n as f64),
            BudgetKind::Cost => limits.max_cost_usd,
            BudgetKind::Time => limits.max_time_ms.map(|n| n as f64),
            BudgetKind::Calls => limits.max_calls.map(|n| n as f64),
        }
    }

    /// What was spent of this kind, in its unit.
    pub fn spent(self, spent: &BudgetSpent) -> f64 {
        match self {
            BudgetKind::Tokens => spent.tokens as f64,
            BudgetKind::Cost => spent.cost_usd,
            BudgetKind::Time => spent.run_ms as f64,
            BudgetKind::Calls => spent.calls as f64,
        }
    }

    /// An amount of this kind in words: "1200 tokens", "$0.0120", "95s".
    pub fn amount(self, value: f64) -> String {
        match self {
            BudgetKind::Tokens => format!("{} tokens", value.round() as u64),
            BudgetKind::Cost => format!("${value:.4}"),
            BudgetKind::Time => format_duration(Duration::from_millis(value.max(0.0) as u64)),
            BudgetKind::Calls => format!("{} calls", value.round() as u64),
        }
    }

    /// The flag that sets this budget.
    pub fn flag(self) -> &'static str {
        match self {
            BudgetKind::Tokens => "--max-tokens",
            BudgetKind::Cost => "--max-cost",
            BudgetKind::Time => "--max-time",
            BudgetKind::Calls => "--max-calls",
        }
    }
}

impl fmt::Display for BudgetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BudgetKind::Tokens => "token",
            BudgetKind::Cost => "cost",
            BudgetKind::Time => "time",
            BudgetKind::Calls => "call",
        })
    }
}

/// A budget that would be exceeded: which, what was spent (with what the refused call might
/// have used, for tokens and cost) and the limit, in its unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct BudgetExceeded {
    pub budget: BudgetKind,
    /// Spent when the flow stopped.
    pub spent: f64,
    /// What the refused call might have used on top (0 for time).
    #[serde(default)]
    pub needed: f64,
    pub limit: f64,
}

impl fmt::Display for BudgetExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = self.budget;
        write!(
            f,
            "the {kind} budget is spent: {} of {}",
            kind.amount(self.spent),
            kind.amount(self.limit)
        )?;
        if self.needed > 0.0 {
            write!(
                f,
                ", and the next call may use {}",
                kind.amount(self.needed)
            )?;
        }
        Ok(())
    }
}

/// Why a flow is paused (`FlowState::Paused`): `ocflow resume` continues it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PauseReason {
    /// A budget would have been exceeded by the next call.
    Budget(BudgetExceeded),
}

impl PauseReason {
    /// What to do about it, for `task_id`: the resume command with a higher limit.
    pub fn advice(&self, task_id: &str) -> String {
        match self {
            PauseReason::Budget(exceeded) => format!(
                "raise it to continue where the flow stopped: `ocflow resume {task_id} {} …`",
                exceeded.budget.flag()
            ),
        }
    }
}

impl fmt::Display for PauseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PauseReason::Budget(exceeded) => exceeded.fmt(f),
        }
    }
}

/// Reads a duration as the flags take it: a number and a unit, repeated ("90s", "5m", "1h",
/// "1h30m", "500ms"); a bare number is seconds. The error says what was wrong and the form.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let wrong = |why: &str| {
        format!("{text:?} is not a duration ({why}): write it like 90s, 5m, 1h or 1h30m")
    };
    let text = text.trim();
    if text.is_empty() {
        return Err(wrong("it is empty"));
    }
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return Err(wrong("a unit without a number"));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| wrong("a number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.len()
            - rest
                .trim_start_matches(|c: char| c.is_ascii_alphabetic())
                .len();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let millis: u64 = match unit {
            "ms" => 1,
            "s" | "sec" | "secs" => 1_000,
            "m" | "min" | "mins" => 60_000,
            "h" | "hr" | "hrs" => 3_600_000,
            "d" | "day" | "days" => 86_400_000,
            "" => return Err(wrong("a number without a unit")),
            _ => return Err(wrong(&format!("unknown unit {unit:?}"))),
        };
        let part = number
            .checked_mul(millis)
            .ok_or_else(|| wrong("a number too large"))?;
        total = total
            .checked_add(Duration::from_millis(part))
            .ok_or_else(|| wrong("a number too large"))?;
    }
    if total.is_zero() {
        return Err(wrong("it is zero"));
    }
    Ok(total)
}

/// A duration in the flags' words, to the second: "95s" → "1m35s".
pub fn format_duration(duration: Duration) -> String {
    let seconds = duration.as_secs();
    if seconds == 0 {
        return format!("{}ms", duration.as_millis());
    }
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    let mut text = String::new();
    if h > 0 {
        text.push_str(&format!("{h}h"));
    }
    if m > 0 {
        text.push_str(&format!("{m}m"));
    }
    if s > 0 || text.is_empty() {
        text.push_str(&format!("{s}s"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_the_flags_take_them() {
        let secs = |s| Ok(Duration::from_secs(s));
        assert_eq!(parse_duration("90s"), secs(90));
        assert_eq!(parse_duration("5m"), secs(300));
        assert_eq!(parse_duration("1h30m"), secs(5400));
        assert_eq!(parse_duration("45"), secs(45));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        for bad in ["", "m", "5 parsecs", "5x", "0s", "99999999999999999999h"] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.contains("write it like 90s"), "{bad}: {err}");
        }
        assert_eq!(format_duration(Duration::from_secs(95)), "1m35s");
        assert_eq!(format_duration(Duration::from_secs(3600)), "1h");
    }

    #[test]
    fn an_untrusted_limit_lowers_and_never_raises() {
        let user = BudgetLimits {
            max_tokens: Some(1000),
            max_cost_usd: Some(1.0),
            max_time_ms: None,
            max_calls: Some(50),
        };
        let repo = BudgetLimits {
            max_tokens: Some(5000),
            max_cost_usd: Some(0.5),
            max_time_ms: Some(60_000),
            max_calls: Some(80),
        };
        let lowered = user.lowered_by(repo);
        assert_eq!(lowered.max_tokens, Some(1000), "not raised");
        assert_eq!(lowered.max_calls, Some(50), "not raised");
        assert_eq!(lowered.max_cost_usd, Some(0.5), "lowered");
        assert_eq!(lowered.max_time_ms, Some(60_000), "added");
        assert_eq!(
            user.lowered_by(BudgetLimits::default()),
            user,
            "not removed"
        );
    }

    #[test]
    fn spent_against_each_limit_in_words() {
        let used = BudgetUse {
            limits: BudgetLimits {
                max_tokens: Some(2000),
                max_cost_usd: None,
                max_time_ms: Some(300_000),
                max_calls: Some(40),
            },
            spent: BudgetSpent {
                tokens: 1200,
                cost_usd: 0.5,
                run_ms: 95_000,
                calls: 7,
            },
        };
        assert_eq!(
            used.describe(),
            "1200 tokens of 2000 tokens, 1m35s of 5m, 7 calls of 40 calls"
        );
        let exceeded = BudgetExceeded {
            budget: BudgetKind::Tokens,
            spent: 1200.0,
            needed: 900.0,
            limit: 2000.0,
        };
        assert_eq!(
            exceeded.to_string(),
            "the token budget is spent: 1200 tokens of 2000 tokens, and the next call may use \
             900 tokens"
        );
    }
}
