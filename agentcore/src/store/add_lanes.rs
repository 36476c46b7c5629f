//! PostgreSQL's adds to one agent, committed together.
//!
//! An add takes its agent's row lock and holds it through its commit's WAL flush, so that
//! creation order is commit order and a client paging a backlog by creation time never skips
//! a task added meanwhile (`add_task`, migration 0025). Adds to one agent therefore commit one
//! at a time, each after the last one's flush: 64 clients adding to one agent waited in a
//! queue of row locks.
//!
//! Here each agent has a lane on the node (`lanes.rs`): the adds to an agent that arrive while
//! a transaction of its adds is in flight go together as the next one, one call of `add_tasks`
//! (migration 0029), at most [`MOST_IN_A_TRANSACTION`]. Each add is still exactly what
//! `add_task` writes, in the order the node received them, under the lock, so every rule the
//! lock kept still holds. An add whose caller stopped waiting before its transaction began is
//! not written; one refused alone fails alone (`lanes.rs`). An active agent's nodes are woken
//! once its transaction has committed (`wake_after_commit.rs`).

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Pool, Postgres};

use super::Notice;
use super::lanes::{Batch, Lanes, column};
use super::wake_after_commit::WakeAfterCommit;
use crate::domain::runtime::AgentKey;

/// The most adds in one transaction: a bound on how long one holds the agent's lock.
pub(crate) const MOST_IN_A_TRANSACTION: usize = 100;

/// `add_tasks` (migration 0029): `$1` owner, `$2` agent, then one array per column of the
/// adds, in `add_task`'s order of parameters.
const ADD_TASKS: &str = "SELECT agent_status, stored_at FROM add_tasks($1, $2, $3, \
    $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)";

/// One add's values, owned so it can wait in its lane: the task and its `task_added` entry.
#[derive(Debug, Clone)]
pub(crate) struct Add {
    pub id: String,
    pub title: String,
    pub description: Option<String>,
    pub priority: i32,
    /// The node's time; `add_task` moves it past the agent's latest task.
    pub at: DateTime<Utc>,
    pub depth: i32,
    pub creator_agent: Option<String>,
    pub creator_task: Option<String>,
    pub trace_id: Option<String>,
    pub parent_span_id: Option<String>,
    pub action: String,
    pub details: String,
    pub entry_task: Option<String>,
}

/// What an add wrote: the agent's status and the creation time stored; `None` when the owner
/// has no such agent.
pub(crate) type Added = Option<(String, DateTime<Utc>)>;

/// The store's lanes of adds, one per agent with an add in flight on this node.
pub(crate) type AddLanes = Lanes<Adds>;

/// How a lane of adds writes.
pub(crate) struct Adds {
    pool: Pool<Postgres>,
    wakes: Arc<WakeAfterCommit>,
}

impl Adds {
    pub(crate) fn lanes(pool: Pool<Postgres>, wakes: Arc<WakeAfterCommit>) -> AddLanes {
        Lanes::new(Adds { pool, wakes })
    }
}

#[async_trait]
impl Batch for Adds {
    type Key = AgentKey;
    type Item = Add;
    type Answer = Added;
    type Error = sqlx::Error;
    const MOST: usize = MOST_IN_A_TRANSACTION;

    async fn write(
        &self,
        agent: &AgentKey,
        adds: &[&Add],
    ) -> std::result::Result<Vec<Added>, sqlx::Error> {
        add_tasks(&self.pool, agent, adds).await
    }

    fn its_own(error: &sqlx::Error) -> bool {
        super::lanes::values_refused(error)
    }

    /// An active agent's nodes are woken before its adds are answered.
    fn committed(&self, agent: &AgentKey, answers: &[Added]) {
        if answers.iter().flatten().any(|(status, _)| status == "active") {
            self.wakes.send([Notice::Agent(agent.clone())]);
        }
    }
}

/// One call of `add_tasks`: each add's answer, in order (all `None` when there is no such
/// agent).
async fn add_tasks(
    pool: &Pool<Postgres>,
    agent: &AgentKey,
    adds: &[&Add],
) -> std::result::Result<Vec<Added>, sqlx::Error> {
    let rows: Vec<(String, DateTime<Utc>)> = sqlx::query_as(ADD_TASKS)
        .bind(&agent.owner_id)
        .bind(&agent.agent_id)
        .bind(column(adds, |a| a.id.clone()))
        .bind(column(adds, |a| a.title.clone()))
        .bind(column(adds, |a| a.description.clone()))
        .bind(column(adds, |a| a.priority))
        .bind(column(adds, |a| a.at))
        .bind(column(adds, |a| a.depth))
        .bind(column(adds, |a| a.creator_agent.clone()))
        .bind(column(adds, |a| a.creator_task.clone()))
        .bind(column(adds, |a| a.trace_id.clone()))
        .bind(column(adds, |a| a.parent_span_id.clone()))
        .bind(column(adds, |a| a.action.clone()))
        .bind(column(adds, |a| a.details.clone()))
        .bind(column(adds, |a| a.entry_task.clone()))
        .fetch_all(pool)
        .await?;
    match rows.len() {
        0 => Ok(vec![None; adds.len()]),
        n if n == adds.len() => Ok(rows.into_iter().map(Some).collect()),
        n => Err(sqlx::Error::Protocol(format!(
            "add_tasks answered {n} rows for {} adds",
            adds.len()
        ))),
    }
}
