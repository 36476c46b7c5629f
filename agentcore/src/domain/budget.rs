//! Money: prices per model, the cost of a call, monthly budgets and the decision whether a
//! model call may be sent. Amounts are integer micro-dollars (1 USD = 1,000,000) everywhere
//! below the edge, so sums are exact; the API shows dollars beside them.
//!
//! A call is allowed only when this month's spend, plus what calls in flight have reserved,
//! plus this call's worst case stays within every budget that applies (the agent's and its
//! owner's). The worst case counts every byte of the request as an input token (no tokenizer
//! makes fewer bytes than tokens) and the whole `max_tokens` as output, so a call that is
//! allowed cannot take the spend past the budget, whatever it answers.

use chrono::{DateTime, Datelike, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use super::task::Usage;

/// Micro-dollars in one dollar.
pub const MICROS_PER_USD: i64 = 1_000_000;
/// The highest monthly budget accepted, in dollars.
pub const MAX_BUDGET_USD: f64 = 1_000_000_000.0;
/// At this share of a budget (in percent) its one warning of the month is given.
pub const WARN_PERCENT: i64 = 80;

/// A monthly budget in micro-dollars, parsed from dollars.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Budget(i64);

impl Budget {
    /// Dollars, 0 to a billion, to the micro-dollar (finer amounts are rounded).
    pub fn parse(usd: f64) -> Result<Self, String> {
        if !usd.is_finite() || !(0.0..=MAX_BUDGET_USD).contains(&usd) {
            return Err(format!("must be a number of dollars from 0 to {MAX_BUDGET_USD:.0}"));
        }
        Ok(Self((usd * MICROS_PER_USD as f64).round() as i64))
    }

    pub fn from_micros(micros: i64) -> Self {
        Self(micros.max(0))
    }

    pub fn micros(self) -> i64 {
        self.0
    }
}

/// Dollars for display, from micro-dollars.
pub fn usd(micros: i64) -> f64 {
    micros as f64 / MICROS_PER_USD as f64
}

/// Micro-dollars, from dollars shown (exact for every amount a budget can be).
pub fn micros(usd: f64) -> i64 {
    (usd * MICROS_PER_USD as f64).round() as i64
}

/// `$0.012345`: dollars to the micro-dollar, without trailing zeros past the cents.
pub fn format_usd(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let micros = micros.unsigned_abs();
    let (whole, fraction) = (micros / 1_000_000, micros % 1_000_000);
    let digits = format!("{fraction:06}");
    let trimmed = digits.trim_end_matches('0');
    let shown = if trimmed.len() < 2 { &digits[..2] } else { trimmed };
    format!("{sign}${whole}.{shown}")
}

/// A model's price in micro-dollars per million tokens (the same number as dollars per token
/// times a million million, so prices given to the cent per million tokens are exact): one
/// rate for each class of token [`Usage`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Price {
    pub input: i64,
    pub output: i64,
    /// Prompt tokens read from the provider's prompt cache.
    pub cache_read: i64,
    /// Prompt tokens written into the provider's prompt cache.
    pub cache_write: i64,
}

/// What a provider charges for cached prompt tokens, in percent of the input rate: how a
/// price given without cache rates gets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheRates {
    pub read_percent: i64,
    pub write_percent: i64,
}

impl CacheRates {
    /// No discount and no surcharge: a provider that reports no cache.
    pub const NONE: CacheRates = CacheRates { read_percent: 100, write_percent: 100 };
}

impl Price {
    /// From dollars per million input and output tokens; cached tokens at the input rate
    /// until [`Price::with_cache_usd`] or [`Price::with_cache_rates`] says otherwise.
    pub fn per_million_usd(input: f64, output: f64) -> Result<Self, String> {
        let (input, output) = (per_million(input)?, per_million(output)?);
        Ok(Self { input, output, cache_read: input, cache_write: input })
    }

    /// The same, with dollars per million tokens read from and written into the cache.
    pub fn with_cache_usd(self, read: f64, write: f64) -> Result<Self, String> {
        Ok(Self { cache_read: per_million(read)?, cache_write: per_million(write)?, ..self })
    }

    /// The same, with the cache rates a share of the input rate (rounded up, to the
    /// micro-dollar per million tokens).
    pub fn with_cache_rates(self, rates: CacheRates) -> Self {
        let share = |percent: i64| {
            let scaled = i128::from(self.input) * i128::from(percent.max(0));
            i64::try_from((scaled + 99) / 100).unwrap_or(i64::MAX)
        };
        Self {
            cache_read: share(rates.read_percent),
            cache_write: share(rates.write_percent),
            ..self
        }
    }

    /// What `usage` cost, each class of token at its own rate, rounded up to the micro-dollar.
    pub fn cost(self, usage: Usage) -> i64 {
        to_micros(
            tokens_at(usage.input_tokens, self.input)
                + tokens_at(usage.output_tokens, self.output)
                + tokens_at(usage.cache_read_tokens, self.cache_read)
                + tokens_at(usage.cache_write_tokens, self.cache_write),
        )
    }

    /// The most a call can cost: every one of its `input_tokens` (a bound on the prompt) at
    /// the highest of the prompt's rates (a cache write costs more than plain input at
    /// Anthropic), every token of its `max_tokens` spent.
    pub fn worst_case(self, input_tokens: usize, max_tokens: u32) -> i64 {
        let prompt_rate = self.input.max(self.cache_read).max(self.cache_write);
        let input = i64::try_from(input_tokens).unwrap_or(i64::MAX);
        to_micros(tokens_at(input, prompt_rate) + tokens_at(i64::from(max_tokens), self.output))
    }
}

/// Micro-dollars per million tokens, from dollars.
fn per_million(usd: f64) -> Result<i64, String> {
    if usd.is_finite() && (0.0..=1_000_000.0).contains(&usd) {
        Ok((usd * MICROS_PER_USD as f64).round() as i64)
    } else {
        Err(format!("{usd} is not a price from 0 to 1000000 dollars per million tokens"))
    }
}

/// `tokens` at `rate` micro-dollars per million, in millionths of a micro-dollar.
fn tokens_at(tokens: i64, rate: i64) -> i128 {
    i128::from(tokens.max(0)) * i128::from(rate)
}

/// Millionths of a micro-dollar, rounded up to the micro-dollar.
fn to_micros(total: i128) -> i64 {
    i64::try_from((total + 999_999) / 1_000_000).unwrap_or(i64::MAX)
}

/// What one model call cost, as its step records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepCost {
    /// The model called, as the agent names it (`openai:gpt-4o-mini`).
    pub model: String,
    /// Micro-dollars (1 USD = 1,000,000).
    pub cost_micros: i64,
    /// The model has no price in the server's table: its cost is recorded as 0.
    pub unpriced: bool,
}

impl StepCost {
    /// The cost of a call answered with `usage`; a priced call whose provider reported no
    /// tokens is counted at its worst case, which is what was reserved for it.
    pub fn of(model: &str, price: Option<Price>, usage: Option<Usage>, worst: i64) -> Self {
        let cost_micros = match (price, usage) {
            (None, _) => 0,
            (Some(price), Some(usage)) => price.cost(usage),
            (Some(_), None) => worst,
        };
        Self { model: model.to_owned(), cost_micros, unpriced: price.is_none() }
    }
}

/// A calendar month in UTC, as `YYYY-MM`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Month(String);

impl Month {
    pub fn of(at: DateTime<Utc>) -> Self {
        Self(format!("{:04}-{:02}", at.year(), at.month()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first instant of the month of `at`.
    pub fn start_of(at: DateTime<Utc>) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(at.year(), at.month(), 1, 0, 0, 0).single().unwrap_or(at)
    }
}

/// Whose budget a call would cross.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The agent's own `budget_monthly_usd`.
    Agent(String),
    /// The owner's budget for all their agents together.
    User,
}

impl Scope {
    /// `agent 'writer'` or `your account`, for messages.
    pub fn describe(&self) -> String {
        match self {
            Scope::Agent(name) => format!("agent '{name}'"),
            Scope::User => "your account".to_owned(),
        }
    }

    /// The key its monthly warning is recorded under.
    pub fn key(&self, agent_id: &str) -> String {
        match self {
            Scope::Agent(_) => format!("agent:{agent_id}"),
            Scope::User => "user".to_owned(),
        }
    }
}

/// One budget as it stands this month.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    pub scope: Scope,
    pub budget: Budget,
    /// Settled this month.
    pub spent: i64,
    /// Held by other calls in flight.
    pub reserved: i64,
}

/// A call that could cross a budget: it is not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub standing: Standing,
    pub worst: i64,
}

impl Refusal {
    /// What the task's error and the agent's `agent_error` entry say.
    pub fn message(&self) -> String {
        let Standing { scope, budget, spent, reserved } = &self.standing;
        let held = if *reserved > 0 {
            format!(" ({} more held by calls in flight)", format_usd(*reserved))
        } else {
            String::new()
        };
        format!(
            "budget_exhausted: the monthly budget of {} is {}, {} of it is spent this month{held}, \
             and the next model call could cost up to {}",
            scope.describe(),
            format_usd(budget.micros()),
            format_usd(*spent),
            format_usd(self.worst)
        )
    }
}

/// Whether a call whose worst case is `worst` may be sent: refused by the first budget in
/// `standings` it could cross.
pub fn allow(standings: &[Standing], worst: i64) -> Result<(), Refusal> {
    for standing in standings {
        let after = standing.spent.saturating_add(standing.reserved).saturating_add(worst);
        if after > standing.budget.micros() {
            return Err(Refusal { standing: standing.clone(), worst });
        }
    }
    Ok(())
}

/// Whether settling `cost` takes `standing` (without it) to its warning share or past it.
pub fn crosses_warning(standing: &Standing, cost: i64) -> bool {
    let after = i128::from(standing.spent.saturating_add(cost));
    after * 100 >= i128::from(standing.budget.micros()) * i128::from(WARN_PERCENT)
}

/// The warning entry's and post's text.
pub fn warning(standing: &Standing, cost: i64) -> String {
    let spent = standing.spent.saturating_add(cost);
    format!(
        "{} of the monthly budget of {} ({}) is spent this month. Model calls that could cross \
         it will not be sent.",
        format_usd(spent),
        standing.scope.describe(),
        format_usd(standing.budget.micros())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_from_dollars_to_micro_dollars() {
        assert_eq!(Budget::parse(0.01).unwrap().micros(), 10_000);
        assert_eq!(Budget::parse(12.345_678_9).unwrap().micros(), 12_345_679);
        assert_eq!(Budget::parse(0.0).unwrap().micros(), 0);
        for bad in [-0.01, f64::NAN, f64::INFINITY, 2e9] {
            assert!(Budget::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(format_usd(10_000), "$0.01");
        assert_eq!(format_usd(1_234_567), "$1.234567");
        assert_eq!(format_usd(5_000_000), "$5.00");
        assert_eq!(format_usd(130), "$0.00013");
    }

    #[test]
    fn costs_round_up_and_the_worst_case_bounds_any_answer() {
        let price = Price::per_million_usd(0.15, 0.60).unwrap();
        assert_eq!(
            price,
            Price { input: 150_000, output: 600_000, cache_read: 150_000, cache_write: 150_000 }
        );
        // 11 × 0.15 + 22 × 0.60 = 14.85 micro-dollars, rounded up.
        assert_eq!(price.cost(Usage::new(11, 22)), 15);
        assert_eq!(price.cost(Usage::new(0, 0)), 0);
        assert_eq!(price.worst_case(1_000, 1_024), (150_000_000 + 614_400_000) / 1_000_000 + 1);
        let big = Price::per_million_usd(1_000_000.0, 1_000_000.0).unwrap();
        assert_eq!(big.cost(Usage::new(i64::MAX, i64::MAX)), i64::MAX);
        assert!(Price::per_million_usd(-1.0, 0.0).is_err());
        let unpriced = StepCost::of("local:llama", None, None, 0);
        assert_eq!((unpriced.cost_micros, unpriced.unpriced), (0, true));
        assert_eq!(StepCost::of("m", Some(price), None, 99).cost_micros, 99);
    }

    #[test]
    fn each_class_of_token_is_priced_at_its_own_rate() {
        // Claude Sonnet 4.5: $3 in, $15 out, $0.30 cache reads, $3.75 cache writes.
        let sonnet = Price::per_million_usd(3.0, 15.0).unwrap().with_cache_usd(0.30, 3.75).unwrap();
        let usage =
            Usage { cache_read_tokens: 1_000, cache_write_tokens: 2_000, ..Usage::new(100, 10) };
        // 100 × 3 + 10 × 15 + 1000 × 0.30 + 2000 × 3.75 = 8250 micro-dollars.
        assert_eq!(sonnet.cost(usage), 8_250);
        // The worst case prices every prompt token at the cache-write rate, the highest.
        assert_eq!(sonnet.worst_case(1_000, 100), 3_750 + 1_500);
        assert!(sonnet.worst_case(3_110, 10) >= sonnet.cost(usage));
        let anthropic = CacheRates { read_percent: 10, write_percent: 125 };
        assert_eq!(Price::per_million_usd(3.0, 15.0).unwrap().with_cache_rates(anthropic), sonnet);
        let openai = CacheRates { read_percent: 50, write_percent: 100 };
        let mini = Price::per_million_usd(0.15, 0.60).unwrap().with_cache_rates(openai);
        assert_eq!((mini.cache_read, mini.cache_write), (75_000, 150_000));
        let plain = Price::per_million_usd(0.15, 0.60).unwrap();
        assert_eq!(plain.with_cache_rates(CacheRates::NONE), plain);
        assert!(plain.with_cache_usd(-1.0, 0.0).is_err());
        assert!(plain.with_cache_usd(0.0, f64::NAN).is_err());
    }

    #[test]
    fn a_call_is_refused_by_the_first_budget_it_could_cross() {
        let standing = |scope, budget, spent, reserved| Standing {
            scope,
            budget: Budget::from_micros(budget),
            spent,
            reserved,
        };
        let agent = standing(Scope::Agent("writer".into()), 10_000, 6_000, 0);
        let user = standing(Scope::User, 50_000, 40_000, 6_000);
        assert!(allow(&[agent.clone(), user.clone()], 4_000).is_ok());
        let refused = allow(&[agent.clone(), user.clone()], 4_001).unwrap_err();
        assert_eq!(refused.standing.scope, Scope::Agent("writer".into()));
        assert!(refused.message().starts_with("budget_exhausted: the monthly budget of agent"));
        let refused = allow(std::slice::from_ref(&user), 4_001).unwrap_err();
        assert!(refused.message().contains("$0.006 more held by calls in flight"), "{refused:?}");
        let zero = standing(Scope::User, 0, 0, 0);
        assert!(allow(std::slice::from_ref(&zero), 0).is_ok());
        assert!(allow(&[zero], 1).is_err());
        assert!(!crosses_warning(&agent, 1_999));
        assert!(crosses_warning(&agent, 2_000));
    }

    #[test]
    fn months_are_calendar_months_in_utc() {
        let at = Utc.with_ymd_and_hms(2026, 11, 30, 23, 59, 59).unwrap();
        assert_eq!(Month::of(at).as_str(), "2026-11");
        assert_eq!(Month::start_of(at), Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap());
    }
}
