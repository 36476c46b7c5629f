//! The usage report: tokens, cost, tasks and model steps over a period, summed per agent,
//! model or day; and the user's budget as the API shows it.

use std::str::FromStr;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use super::agent::AgentId;

/// How the rows of a report are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Grouping {
    Agent,
    Model,
    /// Calendar days in UTC.
    Day,
}

impl FromStr for Grouping {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        match value {
            "agent" => Ok(Grouping::Agent),
            "model" => Ok(Grouping::Model),
            "day" => Ok(Grouping::Day),
            _ => Err("must be agent, model or day".into()),
        }
    }
}

/// A report's period (`[from, to)`), agent and grouping, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageQuery {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub agent_id: Option<AgentId>,
    pub group_by: Option<Grouping>,
}

/// An instant as a query names it: RFC 3339, or a date (its midnight in UTC).
pub fn parse_instant(value: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(at) = DateTime::parse_from_rfc3339(value) {
        return Ok(at.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(value, "%Y-%m-%d")
        .ok()
        .and_then(|day| day.and_hms_opt(0, 0, 0))
        .map(|at| at.and_utc())
        .ok_or_else(|| "must be a date (2026-11-01) or an RFC 3339 time".into())
}

/// The sums of one group of model steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsageRow {
    /// The agent id, model name or day (`YYYY-MM-DD`) of the group; absent in the total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Prompt tokens at the input rate; the cache's are counted apart.
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// Prompt tokens read from the provider's prompt cache.
    #[serde(default)]
    pub cache_read_tokens: i64,
    /// Prompt tokens written into the provider's prompt cache.
    #[serde(default)]
    pub cache_write_tokens: i64,
    /// Micro-dollars (1 USD = 1,000,000): the sum of the steps' recorded costs.
    pub cost_micros: i64,
    /// `cost_micros` in dollars.
    pub cost_usd: f64,
    /// Tasks with at least one model call in the period.
    pub tasks: i64,
    /// Model calls (a run's summary included).
    pub steps: i64,
    /// Model calls of models without a price: counted at 0.
    pub unpriced_steps: i64,
}

impl UsageRow {
    /// The sums of no step at all.
    pub fn empty() -> Self {
        Self {
            key: None,
            input_tokens: 0,
            output_tokens: 0,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            cost_micros: 0,
            cost_usd: 0.0,
            tasks: 0,
            steps: 0,
            unpriced_steps: 0,
        }
    }
}

/// `GET /api/usage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsageReport {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<AgentId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_by: Option<Grouping>,
    /// One row per group, ordered by key; empty without `group_by`.
    pub rows: Vec<UsageRow>,
    /// The sums over the whole period (a task counted once).
    pub total: UsageRow,
}

/// `GET /api/budget`: the user's monthly budget and this month's spend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BudgetView {
    /// `null`: no budget for the account (each agent's own may still apply).
    pub monthly_usd: Option<f64>,
    /// The calendar month in UTC the spend is of, `YYYY-MM`.
    pub month: String,
    /// Settled this month by all the user's agents, in micro-dollars.
    pub spent_micros: i64,
    pub spent_usd: f64,
}
