//! Budgets and spend: the reservation taken before every model call and its settlement after
//! it, both under the owner's row lock, so calls of several agents (on several nodes) cannot
//! cross one budget together; the user's own budget; the usage report over stored steps.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::activity::{Action, NewActivity};
use crate::domain::agent::AgentId;
use crate::domain::budget::{
    Budget, Refusal, Scope, Standing, StepCost, allow, crosses_warning, warning,
};
use crate::domain::usage::{Grouping, UsageQuery, UsageRow};
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Resource, Result};
use crate::store::RunRef;
use crate::store::db::{SqlStore, Tx, query, query_as, query_scalar};
use crate::store::shared::{insert_activity, queue_post, watched};

/// The owner's budget and this month's spend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserBudget {
    pub budget: Option<Budget>,
    pub month: String,
    pub spent_micros: i64,
}

#[async_trait]
pub trait BudgetStore: Send + Sync {
    /// Reserves `worst` micro-dollars for the run's next model call if no budget of its agent
    /// or owner could be crossed by it, replacing the task's earlier hold (left by a run that
    /// was cut off); `Err` refusal otherwise, and nothing is written. Nothing is reserved
    /// when no budget applies; `Ok(true)` when a hold was written.
    async fn reserve(
        &self,
        run: RunRef<'_>,
        worst: i64,
    ) -> Result<std::result::Result<bool, Refusal>>;
    /// Drops the run's hold and adds the call's cost to this month's spend; the first call of
    /// the month to take a budget to its warning share writes `budget_warning` (entry and
    /// post) on its agent.
    async fn settle(&self, run: RunRef<'_>, cost: &StepCost) -> Result<()>;
    /// Fails with `user_not_found`.
    async fn user_budget(&self, owner: &WorkspaceId) -> Result<UserBudget>;
    /// Sets (or with `None` removes) the owner's monthly budget.
    async fn set_user_budget(
        &self,
        owner: &WorkspaceId,
        budget: Option<Budget>,
    ) -> Result<UserBudget>;
    /// The owner's model steps in `[from, to)`, summed by the query's grouping.
    async fn usage(&self, owner: &WorkspaceId, query: &UsageQuery) -> Result<Vec<UsageRow>>;
}

/// The sums of one group of steps, as read.
#[derive(sqlx::FromRow)]
pub(super) struct UsageSums {
    key: String,
    input_tokens: i64,
    output_tokens: i64,
    cache_read_tokens: i64,
    cache_write_tokens: i64,
    cost_micros: i64,
    steps: i64,
    tasks: i64,
    unpriced_steps: i64,
}

impl From<UsageSums> for UsageRow {
    fn from(sums: UsageSums) -> Self {
        UsageRow {
            key: Some(sums.key),
            input_tokens: sums.input_tokens,
            output_tokens: sums.output_tokens,
            cache_read_tokens: sums.cache_read_tokens,
            cache_write_tokens: sums.cache_write_tokens,
            cost_micros: sums.cost_micros,
            cost_usd: crate::domain::budget::usd(sums.cost_micros),
            tasks: sums.tasks,
            steps: sums.steps,
            unpriced_steps: sums.unpriced_steps,
        }
    }
}

/// This month, as the database's clock says.
pub(super) fn month_of(now: DateTime<Utc>) -> String {
    crate::domain::budget::Month::of(now).as_str().to_owned()
}

/// Locks the owner's row; their budget, or `user_not_found`.
async fn lock_budget(tx: &mut Tx, owner: &str) -> Result<Option<Budget>> {
    let row: Option<Option<i64>> = query_scalar(&sql::user_budget(tx.dialect().lock()))
        .bind(owner)
        .fetch_optional(&mut *tx)
        .await?;
    let budget = row.ok_or(Error::Unauthorized)?;
    Ok(budget.map(Budget::from_micros))
}

/// The budgets that apply to the run's agent, with this month's spend and
/// the holds of other calls in flight; and the month.
async fn standings(tx: &mut Tx, run: RunRef<'_>) -> Result<(Vec<Standing>, String)> {
    let owner = run.agent.owner_id.as_str();
    let agent = run.agent.agent_id.as_str();
    let user = lock_budget(tx, owner).await?;
    let (name, own): (String, Option<i64>) = query_as(sql::AGENT_BUDGET)
        .bind(owner)
        .bind(agent)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| Error::not_found(Resource::Agent, agent))?;
    let now: DateTime<Utc> =
        query_scalar(&format!("SELECT {}", tx.dialect().clock().now)).fetch_one(&mut *tx).await?;
    let month = month_of(now);
    if user.is_none() && own.is_none() {
        return Ok((Vec::new(), month));
    }
    let (user_spent, agent_spent): (i64, i64) =
        query_as(sql::SPENT).bind(owner).bind(&month).bind(agent).fetch_one(&mut *tx).await?;
    let (user_held, agent_held): (i64, i64) = query_as(sql::HELD)
        .bind(owner)
        .bind(agent)
        .bind(run.task.as_str())
        .fetch_one(&mut *tx)
        .await?;
    let mut standings = Vec::new();
    if let Some(budget) = own {
        standings.push(Standing {
            scope: Scope::Agent(name),
            budget: Budget::from_micros(budget),
            spent: agent_spent,
            reserved: agent_held,
        });
    }
    if let Some(budget) = user {
        standings.push(Standing {
            scope: Scope::User,
            budget,
            spent: user_spent,
            reserved: user_held,
        });
    }
    Ok((standings, month))
}

#[async_trait::async_trait]
impl<S: SqlStore> BudgetStore for S {
    async fn reserve(
        &self,
        run: RunRef<'_>,
        worst: i64,
    ) -> Result<std::result::Result<bool, Refusal>> {
        // Most calls fall under no budget: a plain read says so, and no write
        // lock is taken for them. A budget set after this read holds from the
        // next call on.
        let budgeted: Option<i32> = query_scalar(sql::ANY_BUDGET)
            .bind(run.agent.owner_id.as_str())
            .bind(run.agent.agent_id.as_str())
            .fetch_optional(&mut self.read().await?)
            .await?;
        if budgeted == Some(0) {
            return Ok(Ok(false));
        }
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            let (standings, _) = standings(&mut tx, run).await?;
            if standings.is_empty() {
                return Ok(Ok(false));
            }
            if let Err(refusal) = allow(&standings, worst) {
                return Ok(Err(refusal));
            }
            query(sql::DROP_HOLD).bind(run.task.as_str()).execute(&mut tx).await?;
            query(sql::INSERT_HOLD)
                .bind(run.task.as_str())
                .bind(run.agent.owner_id.as_str())
                .bind(run.agent.agent_id.as_str())
                .bind(worst)
                .bind(crate::domain::now())
                .execute(&mut tx)
                .await?;
            tx.commit().await?;
            Ok(Ok(true))
        })
        .await
    }

    async fn settle(&self, run: RunRef<'_>, cost: &StepCost) -> Result<()> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            let (standings, month) = standings(&mut tx, run).await?;
            query(sql::DROP_HOLD).bind(run.task.as_str()).execute(&mut tx).await?;
            let owner = WorkspaceId::from_trusted(run.agent.owner_id.clone());
            let agent = AgentId::parse(&run.agent.agent_id).map_err(Error::internal)?;
            if cost.cost_micros > 0 {
                query(sql::ADD_SPEND)
                    .bind(owner.as_str())
                    .bind(&month)
                    .bind(agent.as_str())
                    .bind(cost.cost_micros)
                    .execute(&mut tx)
                    .await?;
            }
            let at = crate::domain::now();
            for standing in &standings {
                if !crosses_warning(standing, cost.cost_micros) {
                    continue;
                }
                let noted = query(sql::INSERT_WARNING)
                    .bind(owner.as_str())
                    .bind(standing.scope.key(agent.as_str()))
                    .bind(&month)
                    .bind(at)
                    .execute(&mut tx)
                    .await?;
                if noted.rows_affected() == 0 {
                    continue;
                }
                let text = warning(standing, cost.cost_micros);
                let entry = NewActivity::new(Action::BudgetWarning, text.clone());
                insert_activity(&mut tx, &owner, &agent, &entry, at).await?;
                let post = crate::domain::runtime::budget_post(&text);
                queue_post(&mut tx, owner.as_str(), agent.as_str(), &post, at).await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn user_budget(&self, owner: &WorkspaceId) -> Result<UserBudget> {
        let mut conn = self.read().await?;
        let budget: Option<Option<i64>> = query_scalar(&sql::user_budget(""))
            .bind(owner.as_str())
            .fetch_optional(&mut conn)
            .await?;
        let budget = budget.ok_or(Error::Unauthorized)?.map(Budget::from_micros);
        let now: DateTime<Utc> = query_scalar(&format!("SELECT {}", self.dialect().clock().now))
            .fetch_one(&mut conn)
            .await?;
        let month = month_of(now);
        let (spent, _): (i64, i64) = query_as(sql::SPENT)
            .bind(owner.as_str())
            .bind(&month)
            .bind("")
            .fetch_one(&mut conn)
            .await?;
        Ok(UserBudget { budget, month, spent_micros: spent })
    }

    async fn set_user_budget(
        &self,
        owner: &WorkspaceId,
        budget: Option<Budget>,
    ) -> Result<UserBudget> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            lock_budget(&mut tx, owner.as_str()).await?;
            query(sql::SET_USER_BUDGET)
                .bind(owner.as_str())
                .bind(budget.map(Budget::micros))
                .execute(&mut tx)
                .await?;
            tx.commit().await?;
            Ok(())
        })
        .await?;
        self.user_budget(owner).await
    }

    async fn usage(&self, owner: &WorkspaceId, query: &UsageQuery) -> Result<Vec<UsageRow>> {
        let key = query.group_by.map(|grouping| match grouping {
            Grouping::Agent => "t.agent_id",
            Grouping::Model => "COALESCE(s.model, '')",
            Grouping::Day => self.dialect().day_of_step(),
        });
        let rows: Vec<UsageSums> = query_as(&sql::usage(key))
            .bind(owner.as_str())
            .bind(query.from)
            .bind(query.to)
            .bind(query.agent_id.as_ref().map(|a| a.as_str()))
            .fetch_all(&mut self.read().await?)
            .await?;
        Ok(rows.into_iter().map(UsageRow::from).collect())
    }
}

/// The statements of this area, the same on both backends.
pub(super) mod sql {
    pub(crate) fn user_budget(lock: &str) -> String {
        format!("SELECT budget_micros FROM workspaces WHERE id = $1{lock}")
    }
    pub(crate) const SET_USER_BUDGET: &str =
        "UPDATE workspaces SET budget_micros = $2 WHERE id = $1";
    /// 1 when the agent or its owner has a budget, else 0.
    pub(crate) const ANY_BUDGET: &str = "SELECT CASE WHEN u.budget_micros IS NULL \
        AND a.budget_micros IS NULL THEN 0 ELSE 1 END FROM workspaces u \
        JOIN agents a ON a.owner_id = u.id WHERE u.id = $1 AND a.id = $2";
    pub(crate) const AGENT_BUDGET: &str =
        "SELECT name, budget_micros FROM agents WHERE owner_id = $1 AND id = $2";
    /// The owner's and the agent's settled spend of the month.
    pub(crate) const SPENT: &str = "SELECT CAST(COALESCE(SUM(spent_micros), 0) AS BIGINT), \
        CAST(COALESCE(SUM(CASE WHEN agent_id = $3 THEN spent_micros ELSE 0 END), 0) AS BIGINT) \
        FROM budget_spend WHERE owner_id = $1 AND month = $2";
    /// What the owner's and the agent's other calls in flight hold: only holds of tasks still
    /// in progress count (one left by a run that was cut off is replaced when the task runs
    /// again, or dropped with it).
    pub(crate) const HELD: &str = "SELECT CAST(COALESCE(SUM(h.micros), 0) AS BIGINT), \
        CAST(COALESCE(SUM(CASE WHEN h.agent_id = $2 THEN h.micros ELSE 0 END), 0) AS BIGINT) \
        FROM budget_holds h JOIN tasks t ON t.id = h.task_id \
        WHERE h.owner_id = $1 AND h.task_id <> $3 AND t.status = 'in_progress'";
    pub(crate) const DROP_HOLD: &str = "DELETE FROM budget_holds WHERE task_id = $1";
    pub(crate) const INSERT_HOLD: &str = "INSERT INTO budget_holds \
        (task_id, owner_id, agent_id, micros, created_at) VALUES ($1, $2, $3, $4, $5)";
    pub(crate) const ADD_SPEND: &str = "INSERT INTO budget_spend \
        (owner_id, month, agent_id, spent_micros) VALUES ($1, $2, $3, $4) \
        ON CONFLICT (owner_id, month, agent_id) \
        DO UPDATE SET spent_micros = budget_spend.spent_micros + excluded.spent_micros";
    pub(crate) const INSERT_WARNING: &str = "INSERT INTO budget_warnings \
        (owner_id, scope, month, created_at) VALUES ($1, $2, $3, $4) \
        ON CONFLICT (owner_id, scope, month) DO NOTHING";
    /// The owner's model steps in `[$2, $3)`, of agent `$4` when it is not NULL, summed by
    /// `key` (one row of the whole, keyed '', without).
    pub(crate) fn usage(key: Option<&str>) -> String {
        let (select, group) = match key {
            Some(key) => (key.to_owned(), format!("GROUP BY {key} ORDER BY {key}")),
            None => ("''".to_owned(), String::new()),
        };
        format!(
            "SELECT {select} AS key, \
             CAST(COALESCE(SUM(s.input_tokens), 0) AS BIGINT) AS input_tokens, \
             CAST(COALESCE(SUM(s.output_tokens), 0) AS BIGINT) AS output_tokens, \
             CAST(COALESCE(SUM(s.cache_read_tokens), 0) AS BIGINT) AS cache_read_tokens, \
             CAST(COALESCE(SUM(s.cache_write_tokens), 0) AS BIGINT) AS cache_write_tokens, \
             CAST(COALESCE(SUM(s.cost_micros), 0) AS BIGINT) AS cost_micros, \
             CAST(COUNT(*) AS BIGINT) AS steps, \
             CAST(COUNT(DISTINCT s.task_id) AS BIGINT) AS tasks, \
             CAST(COALESCE(SUM(CASE WHEN s.unpriced THEN 1 ELSE 0 END), 0) AS BIGINT) \
                AS unpriced_steps \
             FROM task_steps s JOIN tasks t ON t.id = s.task_id \
             WHERE t.owner_id = $1 AND s.kind <> 'tool' \
             AND s.created_at >= $2 AND s.created_at < $3 \
             AND (CAST($4 AS TEXT) IS NULL OR t.agent_id = $4) \
             {group}"
        )
    }
}
