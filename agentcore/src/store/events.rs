//! Events: the numbered announcements of an owner's activity entries and stored steps, which
//! the database's triggers write in the same transaction (migration `0016_live_runs.sql`), and
//! the retries of model calls, written here. Read back joined to what they announce.
//!
//! SQLite numbers each event as it is written (its one writer commits in that order).
//! PostgreSQL's triggers only stage them, and [`EventStore::number_events`] numbers what has
//! committed (migration `0027_events_numbered_after_commit.sql`): numbering at the commit held
//! the owner's counter, and a notification, through every event-writing commit.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::Backend;
use super::db::{SqlStore, query, query_as, query_scalar};
use super::rows::{ActivityRow, StepRow};
use super::shared::housekeeping;
use crate::domain::activity::ActivityEntry;
use crate::domain::agent::AgentId;
use crate::domain::event::{Event, EventFilter, Retry};
use crate::domain::steps::Step;
use crate::domain::task::TaskId;
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Result};

/// The first and last of an owner's events still kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventBounds {
    /// The last event's id (0 before the first).
    pub latest: i64,
    /// The oldest event kept, if any.
    pub oldest: Option<i64>,
}

#[async_trait]
pub trait EventStore: Send + Sync {
    /// Up to `limit` of the owner's events after `after` that `filter` admits, in order. An
    /// event whose source is gone (its agent or task deleted) is left out.
    async fn events_after(
        &self,
        owner: &WorkspaceId,
        after: i64,
        filter: &EventFilter,
        limit: i64,
    ) -> Result<Vec<Event>>;
    async fn event_bounds(&self, owner: &WorkspaceId) -> Result<EventBounds>;
    /// The latest event id of each of `owners` that has any (at most 100 owners a call).
    async fn latest_events(&self, owners: &[WorkspaceId]) -> Result<Vec<(WorkspaceId, i64)>>;
    /// Numbers the events of `owner` (of every owner, when `None`) that have committed and
    /// have no number yet, at most 100 owners a call, and tells every node
    /// (`events:<owner>`); returns the owners whose events it numbered. On SQLite, which
    /// numbers events as they are written, there is nothing to do.
    async fn number_events(&self, owner: Option<&WorkspaceId>) -> Result<Vec<WorkspaceId>>;
    /// Records that a model call of the task failed for now and will be tried again.
    async fn record_retry(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        task: &TaskId,
        retry: &Retry,
    ) -> Result<()>;
}

#[async_trait]
impl<S: SqlStore> EventStore for S {
    async fn events_after(
        &self,
        owner: &WorkspaceId,
        after: i64,
        filter: &EventFilter,
        limit: i64,
    ) -> Result<Vec<Event>> {
        let rows = query(sql::EVENTS_AFTER)
            .bind(owner.as_str())
            .bind(after)
            .bind(filter.agent.as_ref().map(AgentId::as_str))
            .bind(filter.task.as_ref().map(TaskId::as_str))
            .bind(limit)
            .fetch_all(&mut self.read().await?)
            .await?;
        let mut events = Vec::with_capacity(rows.len());
        for index in 0..rows.len() {
            let head: EventHead = read(rows.get(index))?;
            let event = match head.event_kind.as_str() {
                "activity" if head.action.is_some() => {
                    let entry = ActivityEntry::try_from(read::<ActivityRow>(rows.get(index))?)?;
                    Event::of_activity(head.event_seq, head.agent_id, entry)
                }
                "step" if head.step_seq.is_some() => {
                    let step = Step::try_from(read::<StepRow>(rows.get(index))?)?;
                    let task = head.task_id.unwrap_or_default();
                    Event::of_step(head.event_seq, head.agent_id, task, step)
                }
                "retry" => {
                    let Some(retry) =
                        head.data.as_deref().and_then(|d| serde_json::from_str(d).ok())
                    else {
                        continue;
                    };
                    let task = head.task_id.unwrap_or_default();
                    Event::of_retry(head.event_seq, head.agent_id, task, head.created_at, retry)
                }
                _ => continue,
            };
            events.push(event);
        }
        Ok(events)
    }

    async fn event_bounds(&self, owner: &WorkspaceId) -> Result<EventBounds> {
        let mut conn = self.read().await?;
        // The latest first: every event up to it has committed, so the oldest read after it
        // cannot be newer than it.
        let latest: Option<i64> =
            query_scalar(sql::LATEST).bind(owner.as_str()).fetch_optional(&mut conn).await?;
        let oldest: Option<i64> =
            query_scalar(sql::OLDEST).bind(owner.as_str()).fetch_one(&mut conn).await?;
        Ok(EventBounds { latest: latest.unwrap_or(0), oldest })
    }

    async fn latest_events(&self, owners: &[WorkspaceId]) -> Result<Vec<(WorkspaceId, i64)>> {
        if owners.is_empty() {
            return Ok(Vec::new());
        }
        let owners = &owners[..owners.len().min(100)];
        let statement = sql::latest_of(owners.len());
        let mut select = query_as::<(String, i64)>(&statement);
        for owner in owners {
            select = select.bind(owner.as_str());
        }
        let rows = select.fetch_all(&mut self.read().await?).await?;
        Ok(rows.into_iter().map(|(owner, seq)| (WorkspaceId::from_trusted(owner), seq)).collect())
    }

    async fn number_events(&self, owner: Option<&WorkspaceId>) -> Result<Vec<WorkspaceId>> {
        if self.dialect() == Backend::Sqlite {
            return Ok(Vec::new());
        }
        let numbered = housekeeping(self.storage_health(), async {
            let owners = query_scalar::<String>(sql::NUMBER)
                .bind(owner.map(WorkspaceId::as_str))
                .bind(NUMBERED_OWNERS)
                .fetch_all(self.writer())
                .await?;
            Ok(owners)
        })
        .await?;
        Ok(numbered.into_iter().map(WorkspaceId::from_trusted).collect())
    }

    async fn record_retry(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        task: &TaskId,
        retry: &Retry,
    ) -> Result<()> {
        let data = serde_json::to_string(retry).map_err(Error::internal)?;
        let at = crate::domain::now();
        housekeeping(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            for statement in self.dialect().record_retry() {
                query(statement)
                    .bind(owner.as_str())
                    .bind(agent.as_str())
                    .bind(task.as_str())
                    .bind(data.as_str())
                    .bind(at)
                    .execute(&mut tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}

/// Owners one [`EventStore::number_events`] call numbers at most: one transaction holds each
/// one's counter until it ends. A call that numbered fewer found every owner with events
/// committed before it (some may have gone to a numbering at the same time, and with them
/// owners beyond its first hundred).
pub(crate) const NUMBERED_OWNERS: i32 = 100;

/// The columns every event row has; the source's columns are read as their own records.
#[derive(Debug, sqlx::FromRow)]
struct EventHead {
    event_seq: i64,
    event_kind: String,
    agent_id: String,
    task_id: Option<String>,
    data: Option<String>,
    created_at: DateTime<Utc>,
    action: Option<String>,
    step_seq: Option<i32>,
}

fn read<T>(row: Option<std::result::Result<T, sqlx::Error>>) -> Result<T> {
    row.ok_or_else(|| Error::internal("an event row vanished while read"))?.map_err(Error::from)
}

impl Backend {
    /// How a retry's event is written (`$1` owner, `$2` agent, `$3` task, `$4` data, `$5` time):
    /// through `record_event` on PostgreSQL (which stages it for numbering), as the triggers
    /// do on SQLite.
    pub(crate) const fn record_retry(self) -> &'static [&'static str] {
        match self {
            Backend::Sqlite => &[
                "INSERT OR IGNORE INTO event_seqs (owner_id, seq) VALUES ($1, 0)",
                "UPDATE event_seqs SET seq = seq + 1 WHERE owner_id = $1",
                "INSERT INTO events (owner_id, seq, agent_id, task_id, kind, data, created_at) \
                 SELECT $1, seq, $2, $3, 'retry', $4, $5 FROM event_seqs WHERE owner_id = $1",
            ],
            Backend::Postgres => &["SELECT record_event($1, $2, $3, 'retry', NULL, $4, $5)"],
        }
    }
}

/// The statements of this area, the same on both backends.
mod sql {
    /// An owner's events after `$2`, of agent `$3` and task `$4` when given, at most `$5`;
    /// each with its activity entry's or step's columns (as `ActivityRow` and `StepRow` read
    /// them: the entry's `task_id` and `created_at` are the event's).
    pub(super) const EVENTS_AFTER: &str = "SELECT e.seq AS event_seq, e.kind AS event_kind, \
        e.agent_id, e.task_id, e.data, e.created_at, a.action, a.details, s.seq AS step_seq, \
        s.seq, s.kind, s.tool, s.call_id, s.arguments, s.output, s.tool_calls, s.error, \
        s.duration_ms, s.input_tokens, s.output_tokens, s.cache_read_tokens, \
        s.cache_write_tokens, s.model, s.cost_micros, s.unpriced, s.compacted_through, \
        COALESCE(s.tried, '[]') AS tried \
        FROM events e \
        LEFT JOIN activity a ON e.kind = 'activity' AND a.id = e.ref \
        LEFT JOIN task_steps s ON e.kind = 'step' AND s.task_id = e.task_id AND s.seq = e.ref \
        WHERE e.owner_id = $1 AND e.seq > $2 \
        AND ($3 IS NULL OR e.agent_id = $3) AND ($4 IS NULL OR e.task_id = $4) \
        ORDER BY e.seq LIMIT $5";
    pub(super) const LATEST: &str = "SELECT seq FROM event_seqs WHERE owner_id = $1";
    /// PostgreSQL only: `$1` the owner (every owner when null), `$2` at most this many owners.
    pub(super) const NUMBER: &str = "SELECT number_events($1, $2)";
    pub(super) const OLDEST: &str = "SELECT MIN(seq) FROM events WHERE owner_id = $1";
    /// The latest event of each of `count` owners (`$1`...).
    pub(super) fn latest_of(count: usize) -> String {
        let list: Vec<String> = (1..=count).map(|n| format!("${n}")).collect();
        format!("SELECT owner_id, seq FROM event_seqs WHERE owner_id IN ({})", list.join(", "))
    }
}
