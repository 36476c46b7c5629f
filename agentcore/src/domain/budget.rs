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
/// times a million million, so prices given to the cent per million tokens are exact).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Price {
    pub input: i64,
    pub output: i64,
}

impl Price {
    /// From dollars per million input and output tokens.
    pub fn per_million_usd(input: f64, output: f64) -> Result<Self, String> {
        let micros = |usd: f64| {
            if usd.is_finite() && (0.0..=1_000_000.0).contains(&usd) {
                Ok((usd * MICROS_PER_USD as f64).round() as i64)
            } else {
                Err(format!("{usd} is not a price from 0 to 1000000 dollars per million tokens"))
            }
        };
        Ok(Self { input: micros(input)?, output: micros(output)? })
    }

    /// What `usage` cost, rounded up to the micro-dollar.
    pub fn cost(self, usage: Usage) -> i64 {
        self.of(usage.input_tokens, usage.output_tokens)
    }

    /// The most a call can cost: every byte of its request an input token, every token of
    /// its `max_tokens` spent.
    pub fn worst_case(self, request_bytes: usize, max_tokens: u32) -> i64 {
        self.of(i64::try_from(request_bytes).unwrap_or(i64::MAX), i64::from(max_tokens))
    }

    fn of(self, input_tokens: i64, output_tokens: i64) -> i64 {
        let total = i128::from(input_tokens.max(0)) * i128::from(self.input)
            + i128::from(output_tokens.max(0)) * i128::from(self.output);
        let micros = (total + 999_999) / 1_000_000;
        i64::try_from(micros).unwrap_or(i64::MAX)
    }
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
        assert_eq!(price, Price { input: 150_000, output: 600_000 });
        // 11 × 0.15 + 22 × 0.60 = 14.85 micro-dollars, rounded up.
        assert_eq!(price.cost(Usage { input_tokens: 11, output_tokens: 22 }), 15);
        assert_eq!(price.cost(Usage { input_tokens: 0, output_tokens: 0 }), 0);
        assert_eq!(price.worst_case(1_000, 1_024), (150_000_000 + 614_400_000) / 1_000_000 + 1);
        let big = Price::per_million_usd(1_000_000.0, 1_000_000.0).unwrap();
        assert_eq!(big.cost(Usage { input_tokens: i64::MAX, output_tokens: i64::MAX }), i64::MAX);
        assert!(Price::per_million_usd(-1.0, 0.0).is_err());
        let unpriced = StepCost::of("local:llama", None, None, 0);
        assert_eq!((unpriced.cost_micros, unpriced.unpriced), (0, true));
        assert_eq!(StepCost::of("m", Some(price), None, 99).cost_micros, 99);
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
