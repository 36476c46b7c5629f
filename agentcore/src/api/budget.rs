//! Budgets and usage: `PUT /api/budget`'s body and `GET /api/usage`'s query.

use chrono::{DateTime, Months, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::agent::AgentId;
use crate::domain::budget::{Budget, Month};
use crate::domain::usage::{Grouping, UsageQuery, parse_instant};
use crate::error::ValidationErrors;

use super::nullable;

/// `PUT /api/budget`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BudgetRequest {
    /// The monthly budget of all the user's agents together, in dollars (0 to
    /// 1,000,000,000); `null` removes it.
    #[cfg_attr(feature = "openapi", schema(required = true, minimum = 0))]
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub monthly_usd: Option<Option<f64>>,
}

impl BudgetRequest {
    pub fn parse(&self) -> Result<Option<Budget>, ValidationErrors> {
        match self.monthly_usd {
            None => Err(ValidationErrors::single(
                "monthly_usd",
                "is required: a number of dollars, or null to remove the budget",
            )),
            Some(None) => Ok(None),
            Some(Some(usd)) => {
                Budget::parse(usd).map(Some).map_err(|e| ValidationErrors::single("monthly_usd", e))
            }
        }
    }
}

/// `GET /api/usage`'s query, as sent.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct UsageParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_by: Option<String>,
}

impl UsageParams {
    /// The query; the period is this calendar month (UTC) of `now` unless given.
    pub fn parse(&self, now: DateTime<Utc>) -> Result<UsageQuery, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let start = Month::start_of(now);
        let from = match &self.from {
            Some(raw) => e.check("from", parse_instant(raw)),
            None => Some(start),
        };
        let to = match &self.to {
            Some(raw) => e.check("to", parse_instant(raw)),
            None => start.checked_add_months(Months::new(1)),
        };
        let agent_id = self.agent_id.as_deref().map(|v| e.check("agent_id", AgentId::parse(v)));
        let group_by = self.group_by.as_deref().map(|v| e.check("group_by", v.parse::<Grouping>()));
        if let (Some(from), Some(to)) = (from, to)
            && from >= to
        {
            e.add("to", "must be after from");
        }
        match (from, to) {
            (Some(from), Some(to)) if e.is_empty() => Ok(UsageQuery {
                from,
                to,
                agent_id: agent_id.flatten(),
                group_by: group_by.flatten(),
            }),
            _ => Err(e),
        }
    }
}
