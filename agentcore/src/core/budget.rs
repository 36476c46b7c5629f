//! Budgets and usage: the user's monthly budget, and the report of what model calls cost.
//! The runtime's reservation before every call is in `workers::runtime::spend`.

use super::{Core, Principal};
use crate::api::UsageParams;
use crate::domain::budget::{Budget, usd};
use crate::domain::usage::{BudgetView, UsageQuery, UsageReport, UsageRow};
use crate::domain::workspace::Need;
use crate::error::Result;
use crate::store::UserBudget;

impl Core {
    /// The caller's monthly budget and this month's spend.
    pub async fn budget(&self, who: &Principal) -> Result<BudgetView> {
        Ok(view(self.store().user_budget(&who.workspace).await?))
    }

    /// Sets (or with `None` removes) the caller's monthly budget; a lower budget holds from
    /// the next model call on.
    pub async fn set_budget(&self, who: &Principal, budget: Option<Budget>) -> Result<BudgetView> {
        who.require(Need::Manage)?;
        let before = self.store().user_budget(&who.workspace).await?;
        let set = self.store().set_user_budget(&who.workspace, budget).await?;
        tracing::info!(workspace = %who.workspace, budget = ?budget.map(Budget::micros), "budget set");
        let (was, is) =
            (serde_json::to_value(view(before)).ok(), serde_json::to_value(view(set.clone())).ok());
        self.record(who, "budget.set", ("budget", who.workspace.as_str()), was, is).await;
        Ok(view(set))
    }

    /// Tokens, cost, tasks and model calls over a period (this month unless given), in total
    /// and per agent, model or day. The sums are those of the steps' recorded costs.
    pub async fn usage(&self, who: &Principal, params: &UsageParams) -> Result<UsageReport> {
        let now = self.store().database_time().await?;
        let query = params.parse(now)?;
        if let Some(agent) = &query.agent_id {
            self.store().agent(&who.workspace, agent).await?;
        }
        let rows = match query.group_by {
            Some(_) => self.store().usage(&who.workspace, &query).await?,
            None => Vec::new(),
        };
        let whole = UsageQuery { group_by: None, ..query.clone() };
        let total = self.store().usage(&who.workspace, &whole).await?.into_iter().next();
        let mut total = total.unwrap_or_else(UsageRow::empty);
        total.key = None;
        Ok(UsageReport {
            from: query.from,
            to: query.to,
            agent_id: query.agent_id,
            group_by: query.group_by,
            rows,
            total,
        })
    }
}

fn view(budget: UserBudget) -> BudgetView {
    BudgetView {
        monthly_usd: budget.budget.map(|b| usd(b.micros())),
        month: budget.month,
        spent_micros: budget.spent_micros,
        spent_usd: usd(budget.spent_micros),
    }
}
