//! The flow's budget accountant: every call of the one client (`Llm::chat`) — planning, steps
//! in parallel, recovery, re-asks, the summary, every profile — takes a reservation of what it
//! may use (its prompt's estimate and its `max_tokens`, priced by its profile) before it is
//! sent, and settles it with what the endpoint reported. A call that would not fit is refused
//! and the budget is spent from then on (no later call is sent), so a budget is overrun by at
//! most one call's error of estimate, and parallel steps share it first come, first served.
//! The time budget cancels the calls in flight when it runs out. The executor pauses the flow
//! once no step runs (`engine/executor/pausing.rs`).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use ocflow_model::budget::{BudgetExceeded, BudgetKind, BudgetLimits, BudgetSpent, BudgetUse};
use ocflow_model::llm::{ChatRequest, LlmError, LlmErrorKind, Usage};

/// The thresholds a `budget` event marks, in percent.
pub const THRESHOLDS: [u8; 3] = [50, 80, 100];

/// What a million tokens of a model cost, in US dollars.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Price {
    pub per_mtok_in: f64,
    pub per_mtok_out: f64,
}

impl Price {
    fn cost(&self, prompt: u64, completion: u64) -> f64 {
        (prompt as f64 * self.per_mtok_in + completion as f64 * self.per_mtok_out) / 1e6
    }
}

/// A threshold a budget reached, for the `budget` event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Crossing {
    pub budget: BudgetKind,
    pub percent: u8,
    pub spent: f64,
    pub limit: f64,
}

impl Crossing {
    /// In words: "80 % of the token budget: 1600 tokens of 2000 tokens"; a budget that
    /// stops the flow before it is spent says why ("the token budget has no room for the next
    /// call: 0 tokens of 300 tokens spent"), not "100 %".
    pub fn describe(&self) -> String {
        let kind = self.budget;
        if self.percent >= 100 && self.spent < self.limit {
            return format!(
                "the {kind} budget has no room for the next call: {} of {} spent",
                kind.amount(self.spent),
                kind.amount(self.limit)
            );
        }
        format!(
            "{} % of the {kind} budget: {} of {}",
            self.percent,
            kind.amount(self.spent),
            kind.amount(self.limit)
        )
    }
}

/// The accountant of one flow's run, shared by the client and the executor.
#[derive(Debug)]
pub struct Budget {
    limits: BudgetLimits,
    /// Prices by model name; a model without one costs nothing.
    prices: BTreeMap<String, Price>,
    /// When this run began, and the run time of the flow's earlier runs.
    started: Instant,
    carried_ms: u64,
    ledger: Mutex<Ledger>,
    /// Set once a budget is exceeded: calls waiting on it are cancelled.
    stop: tokio::sync::watch::Sender<bool>,
    /// Woken when a call in flight gives back what it reserved, or the flow stops: a call that
    /// only other calls' reservations kept out looks again.
    given_back: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct Ledger {
    tokens: u64,
    cost: f64,
    calls: u64,
    /// Taken by calls in flight, given back when they settle.
    reserved_tokens: u64,
    reserved_cost: f64,
    reserved_calls: u64,
    /// The budget that stopped the flow, once one did.
    exceeded: Option<BudgetExceeded>,
    /// Thresholds marked already, and those still to announce.
    marked: Vec<(BudgetKind, u8)>,
    crossings: Vec<Crossing>,
}

/// What a call in flight holds of the budget; given back on drop when the call did not answer
/// (an error, a cancel).
#[must_use]
pub struct Reservation<'a> {
    budget: &'a Budget,
    tokens: u64,
    cost: f64,
    /// The call itself (1), until it is given back.
    calls: u64,
    model: String,
    /// The `max_tokens` the call may ask for, when the budget left is less than it asked.
    lowered: Option<u32>,
}

impl Budget {
    /// An accountant for `limits`, the flow having spent `carried` in its earlier runs. The
    /// thresholds those already passed are not announced again.
    pub fn new(
        limits: BudgetLimits,
        prices: BTreeMap<String, Price>,
        carried: BudgetSpent,
    ) -> Self {
        let (stop, _) = tokio::sync::watch::channel(false);
        let budget = Budget {
            limits,
            prices,
            started: Instant::now(),
            carried_ms: carried.run_ms,
            ledger: Mutex::new(Ledger {
                tokens: carried.tokens,
                cost: carried.cost_usd,
                calls: carried.calls,
                ..Ledger::default()
            }),
            stop,
            given_back: tokio::sync::Notify::new(),
        };
        {
            let mut ledger = budget.ledger();
            let spent = budget.spent_with(&ledger);
            mark_passed(&mut ledger, &limits, &spent, false);
        }
        budget
    }

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        // A panic while the ledger was held leaves numbers, not a broken invariant.
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn limits(&self) -> BudgetLimits {
        self.limits
    }

    /// Whether the model has a price (else its calls cost nothing).
    pub fn priced(&self, model: &str) -> bool {
        self.prices.contains_key(model)
    }

    fn run_ms(&self) -> u64 {
        self.carried_ms + self.started.elapsed().as_millis() as u64
    }

    fn spent_with(&self, ledger: &Ledger) -> BudgetSpent {
        BudgetSpent {
            tokens: ledger.tokens,
            cost_usd: ledger.cost,
            run_ms: self.run_ms(),
            calls: ledger.calls,
        }
    }

    /// What the flow has spent, over all its runs.
    pub fn spent(&self) -> BudgetSpent {
        self.spent_with(&self.ledger())
    }

    /// The limits and the spent, as the status saves them.
    pub fn usage(&self) -> BudgetUse {
        BudgetUse {
            limits: self.limits,
            spent: self.spent(),
        }
    }

    /// The budget that stopped the flow, if one did; checks the time budget first.
    pub fn exceeded(&self) -> Option<BudgetExceeded> {
        self.check_time();
        self.ledger().exceeded
    }

    /// Marks the time thresholds passed and stops the flow when its time is up.
    pub fn check_time(&self) {
        let Some(limit) = self.limits.max_time_ms else {
            return;
        };
        let mut ledger = self.ledger();
        let spent = self.spent_with(&ledger);
        mark_passed(&mut ledger, &self.limits, &spent, true);
        if spent.run_ms >= limit && ledger.exceeded.is_none() {
            self.trip(
                &mut ledger,
                BudgetExceeded {
                    budget: BudgetKind::Time,
                    spent: spent.run_ms as f64,
                    needed: 0.0,
                    limit: limit as f64,
                },
            );
        }
    }

    /// The thresholds reached since last asked, for the `budget` events.
    pub fn take_crossings(&self) -> Vec<Crossing> {
        std::mem::take(&mut self.ledger().crossings)
    }

    /// Resolves once a budget stops the flow: another call was refused, or the time is up.
    pub async fn stopped(&self) {
        let mut stop = self.stop.subscribe();
        let deadline = self.limits.max_time_ms.map(|limit| {
            let left = limit.saturating_sub(self.run_ms());
            tokio::time::Instant::now() + Duration::from_millis(left)
        });
        let time_up = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => {}
            () = time_up => self.check_time(),
        }
    }

    /// Takes what `request` may use, or refuses it (and every call after it) when it would
    /// exceed a budget whatever the calls in flight turn out to use. A call that fits what is
    /// left but not beside what those calls reserved (each its prompt and its whole `max_tokens`)
    /// waits for one of them to answer and looks again: parallel steps never stop a flow far
    /// below its limit on what they might have used.
    pub async fn reserve(&self, request: &ChatRequest) -> Result<Reservation<'_>, LlmError> {
        loop {
            let given_back = self.given_back.notified();
            tokio::pin!(given_back);
            given_back.as_mut().enable();
            if let Some(reservation) = self.try_reserve(request)? {
                return Ok(reservation);
            }
            given_back.await;
        }
    }

    /// `reserve` once: `None` when only the calls in flight are in the way.
    fn try_reserve(&self, request: &ChatRequest) -> Result<Option<Reservation<'_>>, LlmError> {
        if let Some(exceeded) = self.exceeded() {
            return Err(refusal(&exceeded));
        }
        let model = request.settings.model.clone();
        let prompt = estimate_prompt_tokens(request);
        let asked = u64::from(request.settings.max_tokens.unwrap_or(DEFAULT_COMPLETION));
        // A budget with room for the prompt and a short answer, not for all the call may ask:
        // the call asks for what is left (never below `MIN_COMPLETION`) instead of pausing the
        // flow before its first call.
        let left = BudgetKind::Tokens
            .limit(&self.limits)
            .map(|limit| (limit as u64).saturating_sub(self.ledger().tokens + prompt));
        let (completion, lowered) = match left {
            Some(left) if left < asked && left >= u64::from(MIN_COMPLETION) => {
                (left, u32::try_from(left).ok())
            }
            _ => (asked, None),
        };
        let tokens = prompt + completion;
        let cost = self
            .prices
            .get(&model)
            .map_or(0.0, |price| price.cost(prompt, completion));
        let mut ledger = self.ledger();
        let over = |spent: f64, needed: f64, limit: Option<f64>, kind| {
            let limit = limit?;
            (spent + needed > limit).then_some(BudgetExceeded {
                budget: kind,
                spent,
                needed,
                limit,
            })
        };
        let (token_limit, cost_limit, call_limit) = (
            BudgetKind::Tokens.limit(&self.limits),
            self.limits.max_cost_usd,
            BudgetKind::Calls.limit(&self.limits),
        );
        let refused = over(
            ledger.tokens as f64,
            tokens as f64,
            token_limit,
            BudgetKind::Tokens,
        )
        .or_else(|| over(ledger.cost, cost, cost_limit, BudgetKind::Cost))
        .or_else(|| over(ledger.calls as f64, 1.0, call_limit, BudgetKind::Calls));
        if let Some(exceeded) = refused {
            if !request.optional {
                self.trip(&mut ledger, exceeded);
            }
            return Err(refusal(&exceeded));
        }
        let crowded = |spent: f64, reserved: f64, needed: f64, limit: Option<f64>| {
            limit.is_some_and(|limit| spent + reserved + needed > limit)
        };
        if crowded(
            ledger.tokens as f64,
            ledger.reserved_tokens as f64,
            tokens as f64,
            token_limit,
        ) || crowded(ledger.cost, ledger.reserved_cost, cost, cost_limit)
            || crowded(
                ledger.calls as f64,
                ledger.reserved_calls as f64,
                1.0,
                call_limit,
            )
        {
            return Ok(None);
        }
        ledger.reserved_tokens += tokens;
        ledger.reserved_cost += cost;
        ledger.reserved_calls += 1;
        Ok(Some(Reservation {
            budget: self,
            tokens,
            cost,
            calls: 1,
            model,
            lowered,
        }))
    }

    fn release(&self, ledger: &mut Ledger, tokens: u64, cost: f64, calls: u64) {
        ledger.reserved_tokens = ledger.reserved_tokens.saturating_sub(tokens);
        ledger.reserved_cost = (ledger.reserved_cost - cost).max(0.0);
        ledger.reserved_calls = ledger.reserved_calls.saturating_sub(calls);
        self.given_back.notify_waiters();
    }

    /// Stops the flow for `exceeded`: every later call is refused, and those in flight on the
    /// time budget are cancelled.
    fn trip(&self, ledger: &mut Ledger, exceeded: BudgetExceeded) {
        ledger.exceeded = Some(exceeded);
        let kind = exceeded.budget;
        if !ledger.marked.contains(&(kind, 100)) {
            ledger.marked.push((kind, 100));
            ledger.crossings.push(Crossing {
                budget: kind,
                percent: 100,
                spent: exceeded.spent,
                limit: exceeded.limit,
            });
        }
        if kind == BudgetKind::Time {
            self.stop.send_replace(true);
        }
        // The calls waiting for room are refused now.
        self.given_back.notify_waiters();
    }
}

impl Reservation<'_> {
    /// The `max_tokens` the call must ask for instead of its own, when the budget left is less.
    pub fn lowered_max_tokens(&self) -> Option<u32> {
        self.lowered
    }

    /// The call answered: what it used replaces what it reserved.
    pub fn settle(mut self, used: &Usage) {
        let budget = self.budget;
        let mut ledger = budget.ledger();
        budget.release(&mut ledger, self.tokens, self.cost, self.calls);
        // Given back: the drop that follows gives back nothing (and frees the model's name).
        (self.tokens, self.cost, self.calls) = (0, 0.0, 0);
        ledger.tokens += used.total_tokens;
        ledger.calls += 1;
        if let Some(price) = budget.prices.get(&self.model) {
            ledger.cost += price.cost(used.prompt_tokens, used.completion_tokens);
        }
        let spent = budget.spent_with(&ledger);
        mark_passed(&mut ledger, &budget.limits, &spent, true);
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let budget = self.budget;
        let mut ledger = budget.ledger();
        budget.release(&mut ledger, self.tokens, self.cost, self.calls);
    }
}

/// Marks every threshold `spent` has reached (announcing them when `announce`); 100 % is
/// announced when the flow stops, not here, since a call may fit exactly.
fn mark_passed(ledger: &mut Ledger, limits: &BudgetLimits, spent: &BudgetSpent, announce: bool) {
    for kind in BudgetKind::ALL {
        let Some(limit) = kind.limit(limits).filter(|l| *l > 0.0) else {
            continue;
        };
        let value = kind.spent(spent);
        for percent in THRESHOLDS {
            let reached = value * 100.0 >= limit * f64::from(percent);
            if !reached || ledger.marked.contains(&(kind, percent)) {
                continue;
            }
            if percent == 100 && announce {
                continue;
            }
            ledger.marked.push((kind, percent));
            if announce {
                ledger.crossings.push(Crossing {
                    budget: kind,
                    percent,
                    spent: value,
                    limit,
                });
            }
        }
    }
}

/// The completion a call without `max_tokens` is assumed to take.
const DEFAULT_COMPLETION: u32 = 4096;
/// The fewest tokens a call is asked to answer in when the budget lowers its `max_tokens`:
/// fewer cut a plan or a file short, and a cut answer is never used.
pub const MIN_COMPLETION: u32 = 512;

/// A prompt's tokens, estimated from its characters (about four a token in English and code,
/// fewer in other scripts: an estimate, which is why a budget may be overrun by one call's
/// error) and a few tokens of framing per message.
pub fn estimate_prompt_tokens(request: &ChatRequest) -> u64 {
    let chars: usize = request
        .messages
        .iter()
        .map(|m| m.content.chars().count())
        .sum();
    let schema = request
        .schema
        .as_ref()
        .map_or(0, |s| s.to_string().chars().count());
    ((chars + schema) as u64).div_ceil(4) + 4 * request.messages.len() as u64
}

/// The error a refused or cancelled call returns: the flow pauses, the step runs again.
pub fn refusal(exceeded: &BudgetExceeded) -> LlmError {
    LlmError::new(LlmErrorKind::BudgetExhausted, exceeded.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocflow_model::llm::{Message, ModelSettings};

    fn request(model: &str, chars: usize, max_tokens: u32) -> ChatRequest {
        ChatRequest {
            purpose: "s".into(),
            settings: ModelSettings {
                profile: "default".into(),
                model: model.into(),
                temperature: None,
                max_tokens: Some(max_tokens),
            },
            messages: vec![Message::user("x".repeat(chars))],
            json: false,
            schema: None,
            optional: false,
        }
    }

    fn used(prompt: u64, completion: u64) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            calls: 1,
            ..Usage::default()
        }
    }

    fn tokens(limit: u64) -> BudgetLimits {
        BudgetLimits {
            max_tokens: Some(limit),
            ..BudgetLimits::default()
        }
    }

    #[tokio::test]
    async fn a_call_waits_for_the_calls_in_flight_and_a_refusal_stops_every_later_call() {
        let budget = Budget::new(tokens(1000), BTreeMap::new(), BudgetSpent::default());
        let wait = Duration::from_millis(50);
        // 396 characters: 99 tokens, 4 of framing, 300 of completion.
        let first = budget.reserve(&request("default", 396, 300)).await.unwrap();
        let second = budget.reserve(&request("default", 396, 300)).await.unwrap();
        // A third fits what is left, not beside what the two reserved: it waits, unrefused.
        let asked = request("default", 396, 300);
        let third = budget.reserve(&asked);
        tokio::pin!(third);
        assert!(tokio::time::timeout(wait, third.as_mut()).await.is_err());
        first.settle(&used(100, 200));
        assert!(tokio::time::timeout(wait, third.as_mut()).await.is_err());
        drop(second);
        let third = tokio::time::timeout(Duration::from_secs(5), third)
            .await
            .expect("room once the others answered")
            .unwrap();
        third.settle(&used(100, 300));
        // One the rest cannot pay, whatever answers: refused, and nothing more is sent.
        let refused = budget
            .reserve(&request("default", 396, 300))
            .await
            .err()
            .unwrap();
        assert_eq!(refused.kind, LlmErrorKind::BudgetExhausted);
        assert!(
            refused
                .message
                .contains("700 tokens of 1000 tokens, and the next call may use 403"),
            "{refused}"
        );
        assert!(budget.reserve(&request("default", 4, 1)).await.is_err());
        assert_eq!(budget.spent().tokens, 700);
        let percents: Vec<(BudgetKind, u8)> = budget
            .take_crossings()
            .iter()
            .map(|c| (c.budget, c.percent))
            .collect();
        assert_eq!(
            percents,
            vec![(BudgetKind::Tokens, 50), (BudgetKind::Tokens, 100)]
        );
    }

    #[tokio::test]
    async fn the_calls_budget_counts_answered_calls_and_refuses_one_more() {
        let limits = BudgetLimits {
            max_calls: Some(2),
            ..BudgetLimits::default()
        };
        // One call spent in an earlier run, carried over.
        let carried = BudgetSpent {
            calls: 1,
            ..BudgetSpent::default()
        };
        let budget = Budget::new(limits, BTreeMap::new(), carried);
        let wait = Duration::from_millis(50);
        let first = budget.reserve(&request("default", 40, 10)).await.unwrap();
        // The second call fits what is left, not beside the one in flight: it waits.
        let asked = request("default", 40, 10);
        let second = budget.reserve(&asked);
        tokio::pin!(second);
        assert!(tokio::time::timeout(wait, second.as_mut()).await.is_err());
        // A call that failed gives its place back (a dropped reservation counts nothing).
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(5), second)
            .await
            .expect("room once the first gave its place back")
            .unwrap();
        second.settle(&used(10, 5));
        assert_eq!(budget.spent().calls, 2);
        let refused = budget
            .reserve(&request("default", 40, 10))
            .await
            .err()
            .unwrap();
        assert_eq!(refused.kind, LlmErrorKind::BudgetExhausted);
        assert!(
            refused
                .message
                .starts_with("the call budget is spent: 2 calls of 2 calls"),
            "{refused}"
        );
        assert_eq!(budget.exceeded().map(|e| e.budget), Some(BudgetKind::Calls));
    }

    #[tokio::test]
    async fn a_waiting_call_is_refused_when_the_flow_stops() {
        let budget = Budget::new(tokens(1000), BTreeMap::new(), BudgetSpent::default());
        let first = budget.reserve(&request("default", 396, 300)).await.unwrap();
        let second = budget.reserve(&request("default", 396, 300)).await.unwrap();
        let asked = request("default", 396, 300);
        let third = budget.reserve(&asked);
        tokio::pin!(third);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), third.as_mut())
                .await
                .is_err()
        );
        // The two answer with more than they said: the third no longer fits at all.
        first.settle(&used(300, 300));
        second.settle(&used(200, 100));
        let refused = tokio::time::timeout(Duration::from_secs(5), third)
            .await
            .expect("answered once the others did");
        assert!(refused.is_err_and(|e| e.kind == LlmErrorKind::BudgetExhausted));
    }

    /// Issue 38: a budget that stops a flow before anything was spent said "100 %".
    #[test]
    fn a_budget_that_stops_before_it_is_spent_says_why_not_100_percent() {
        let stopped = Crossing {
            budget: BudgetKind::Tokens,
            percent: 100,
            spent: 0.0,
            limit: 300.0,
        };
        assert_eq!(
            stopped.describe(),
            "the token budget has no room for the next call: 0 tokens of 300 tokens spent"
        );
        let reached = Crossing {
            spent: 300.0,
            ..stopped
        };
        assert!(
            reached.describe().starts_with("100 % of the"),
            "{}",
            reached.describe()
        );
    }

    #[tokio::test]
    async fn thresholds_are_announced_once_and_not_again_after_a_resume() {
        let budget = Budget::new(tokens(1000), BTreeMap::new(), BudgetSpent::default());
        budget
            .reserve(&request("p", 4, 10))
            .await
            .unwrap()
            .settle(&used(500, 10));
        budget
            .reserve(&request("p", 4, 10))
            .await
            .unwrap()
            .settle(&used(300, 10));
        let percents: Vec<u8> = budget.take_crossings().iter().map(|c| c.percent).collect();
        assert_eq!(percents, vec![50, 80]);
        let carried = budget.spent();
        let resumed = Budget::new(tokens(1000), BTreeMap::new(), carried);
        resumed
            .reserve(&request("p", 4, 10))
            .await
            .unwrap()
            .settle(&used(10, 10));
        assert!(
            resumed.take_crossings().is_empty(),
            "50 and 80 were passed before"
        );
        assert_eq!(resumed.spent().tokens, 840);
    }

    #[tokio::test]
    async fn cost_comes_from_the_model_s_price_and_unpriced_calls_cost_nothing() {
        let prices = BTreeMap::from([(
            "big".to_string(),
            Price {
                per_mtok_in: 2.0,
                per_mtok_out: 10.0,
            },
        )]);
        let limits = BudgetLimits {
            max_cost_usd: Some(0.01),
            ..BudgetLimits::default()
        };
        let budget = Budget::new(limits, prices, BudgetSpent::default());
        assert!(budget.priced("big") && !budget.priced("small"));
        budget
            .reserve(&request("small", 4000, 100_000))
            .await
            .unwrap()
            .settle(&used(1_000_000, 1_000_000));
        assert_eq!(budget.spent().cost_usd, 0.0);
        // 1000 tokens in, 500 out: $0.002 + $0.005.
        budget
            .reserve(&request("big", 3980, 500))
            .await
            .unwrap()
            .settle(&used(1000, 500));
        assert!((budget.spent().cost_usd - 0.007).abs() < 1e-9);
        let refused = budget
            .reserve(&request("big", 3980, 500))
            .await
            .err()
            .unwrap();
        assert!(
            refused
                .message
                .starts_with("the cost budget is spent: $0.0070 of $0.0100")
        );
    }

    #[tokio::test]
    async fn the_time_budget_cancels_a_call_waiting_on_it() {
        let limits = BudgetLimits {
            max_time_ms: Some(1_200),
            ..BudgetLimits::default()
        };
        let carried = BudgetSpent {
            run_ms: 1_000,
            ..BudgetSpent::default()
        };
        let budget = Budget::new(limits, BTreeMap::new(), carried);
        assert!(budget.exceeded().is_none());
        let started = Instant::now();
        let slow = tokio::time::sleep(Duration::from_secs(30));
        tokio::select! {
            () = slow => panic!("the call was not cancelled"),
            () = budget.stopped() => {}
        }
        assert!(started.elapsed() < Duration::from_secs(10), "a hang check");
        let exceeded = budget.exceeded().unwrap();
        assert_eq!(exceeded.budget, BudgetKind::Time);
        assert!(budget.reserve(&request("p", 4, 1)).await.is_err());
    }
}
