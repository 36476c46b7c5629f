//! Schedules of each agent, and the firing: one transaction per look at a due schedule, under
//! the agent's lock, in which its due fire times queue their tasks and its next fire time
//! moves on. A fire time's task is inserted with a row in `schedule_fires`, whose key on
//! (schedule, fire time) lets no fire time queue two tasks, whichever nodes look.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::agent::{AgentId, AgentStatus};
use crate::domain::runtime::AgentKey;
use crate::domain::schedule::{
    CatchUp, CronSpec, FireState, FireWrite, Overlap, ScheduleId, ScheduleRecord, SkipReason,
    Timing, Zone, from_epoch,
};
use crate::domain::task::{NewTask, Priority, TaskDescription, TaskId, TaskTitle};
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Resource, Result, ValidationErrors};
use crate::store::db::{SqlStore, Tx, query, query_as, query_scalar};
use crate::store::shared::{
    insert_activity, lock_agent, notify, nth_instant, require_agent, watched, watched_if,
};
use crate::store::tasks::write_task;

/// Schedules, each scoped to its owner and agent.
#[async_trait]
pub trait ScheduleStore: Send + Sync {
    /// Fails with `agent_not_found`, or a validation error (`cron`) when the agent has the
    /// schedule's twin already ([`ScheduleRecord::same_as`]).
    async fn insert_schedule(&self, owner: &WorkspaceId, schedule: &ScheduleRecord) -> Result<()>;
    /// The agent's schedules, oldest first; fails with `agent_not_found`.
    async fn schedules(&self, owner: &WorkspaceId, agent: &AgentId) -> Result<Vec<ScheduleRecord>>;
    /// Fails with `agent_not_found` or `schedule_not_found`.
    async fn schedule(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        id: &ScheduleId,
    ) -> Result<ScheduleRecord>;
    /// Locks the schedule, lets `decide` compute its new state, writes it unless that makes it
    /// another schedule's twin.
    async fn update_schedule(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        id: &ScheduleId,
        decide: ScheduleDecision<'_>,
    ) -> Result<ScheduleRecord>;
    /// Fails with `agent_not_found` or `schedule_not_found`.
    async fn delete_schedule(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        id: &ScheduleId,
    ) -> Result<()>;
    /// The database's time, and up to `limit` enabled schedules due by it, longest due first.
    async fn due_schedules(
        &self,
        limit: i64,
    ) -> Result<(DateTime<Utc>, Vec<(WorkspaceId, ScheduleRecord)>)>;
    /// One look at a schedule: under the agent's lock and the schedule's, `decide` gets the
    /// schedule as it is now and the agent's state, and what it returns is written with the
    /// move of the next fire time. `None` when there was nothing to do (another node looked
    /// first, or the schedule or agent is gone); otherwise how many tasks were queued.
    async fn fire_schedule(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        id: &ScheduleId,
        decide: FireDecision<'_>,
    ) -> Result<Option<usize>>;
    /// How many schedules the owner has on `agent`, and on all their agents (for quotas).
    async fn schedule_counts(&self, owner: &WorkspaceId, agent: &AgentId) -> Result<(i64, i64)>;
}

/// Decides a schedule's new state from its current one, or refuses.
pub type ScheduleDecision<'a> =
    &'a (dyn Fn(&ScheduleRecord) -> Result<ScheduleRecord> + Send + Sync);

/// Decides a look at a schedule; `None` when nothing is due.
pub type FireDecision<'a> =
    &'a (dyn Fn(&ScheduleRecord, FireState) -> Option<FireWrite> + Send + Sync);

/// A stored schedule row.
#[derive(sqlx::FromRow)]
pub(super) struct ScheduleRow {
    pub(super) owner_id: String,
    id: String,
    agent_id: String,
    cron: String,
    timezone: String,
    title: String,
    description: Option<String>,
    priority: i32,
    catch_up: String,
    overlap: String,
    enabled: bool,
    next_fire_at: Option<i64>,
    last_fired_at: Option<DateTime<Utc>>,
    last_task_id: Option<String>,
    skip_noted: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<ScheduleRow> for ScheduleRecord {
    type Error = Error;

    fn try_from(row: ScheduleRow) -> Result<Self> {
        let bad = |field: &str, problem: String| {
            Error::internal(format!("stored schedule {}: {field} {problem}", row.id))
        };
        let timing = Timing {
            cron: CronSpec::parse(&row.cron).map_err(|e| bad("cron", e))?,
            zone: Zone::parse(&row.timezone).map_err(|e| bad("timezone", e))?,
        };
        let task = NewTask {
            title: TaskTitle::parse(&row.title).map_err(|e| bad("title", e))?,
            description: row
                .description
                .as_deref()
                .map(TaskDescription::parse)
                .transpose()
                .map_err(|e| bad("description", e))?,
            priority: Priority::parse(row.priority.into()).map_err(|e| bad("priority", e))?,
        };
        Ok(ScheduleRecord {
            id: ScheduleId::parse(&row.id).map_err(|e| bad("id", e))?,
            agent_id: AgentId::parse(&row.agent_id).map_err(|e| bad("agent_id", e))?,
            timing,
            task,
            catch_up: row.catch_up.parse::<CatchUp>().map_err(|e| bad("catch_up", e))?,
            overlap: row.overlap.parse::<Overlap>().map_err(|e| bad("overlap", e))?,
            enabled: row.enabled,
            next_fire_at: row.next_fire_at.and_then(from_epoch),
            last_fired_at: row.last_fired_at,
            last_task_id: row.last_task_id.as_deref().map(TaskId::parse).transpose().ok().flatten(),
            skip_noted: row.skip_noted.as_deref().and_then(SkipReason::parse),
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

async fn write_schedule(tx: &mut Tx, schedule: &ScheduleRecord) -> Result<()> {
    query(sql::UPDATE)
        .bind(schedule.id.as_str())
        .bind(schedule.timing.cron.as_str())
        .bind(schedule.timing.zone.name())
        .bind(schedule.task.title.as_str())
        .bind(schedule.task.description.as_ref().map(|d| d.as_str()))
        .bind(schedule.task.priority.get())
        .bind(schedule.catch_up.as_str())
        .bind(schedule.overlap.as_str())
        .bind(schedule.enabled)
        .bind(schedule.next_fire_at.map(|at| at.timestamp()))
        .bind(schedule.last_fired_at)
        .bind(schedule.last_task_id.as_ref().map(|id| id.as_str()))
        .bind(schedule.skip_noted.map(|reason| reason.as_str()))
        .bind(schedule.updated_at)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// `schedule` refused (field `cron`) when another of its agent's schedules is its twin; read
/// under the agent's lock, so two twins added at once cannot both pass.
async fn refuse_twin(tx: &mut Tx, owner: &WorkspaceId, schedule: &ScheduleRecord) -> Result<()> {
    let rows: Vec<ScheduleRow> = query_as(&sql::select_all())
        .bind(owner.as_str())
        .bind(schedule.agent_id.as_str())
        .fetch_all(&mut *tx)
        .await?;
    let others = rows.into_iter().map(ScheduleRecord::try_from).collect::<Result<Vec<_>>>()?;
    schedule
        .refuse_twin(&others)
        .map_err(|problem| ValidationErrors::single("cron", problem).into())
}

async fn locked_schedule(
    tx: &mut Tx,
    owner: &WorkspaceId,
    agent: &AgentId,
    id: &ScheduleId,
) -> Result<Option<ScheduleRecord>> {
    let row: Option<ScheduleRow> = query_as(&sql::select_one(tx.dialect().lock()))
        .bind(owner.as_str())
        .bind(agent.as_str())
        .bind(id.as_str())
        .fetch_optional(&mut *tx)
        .await?;
    row.map(ScheduleRecord::try_from).transpose()
}

#[async_trait::async_trait]
impl<S: SqlStore> ScheduleStore for S {
    async fn insert_schedule(&self, owner: &WorkspaceId, schedule: &ScheduleRecord) -> Result<()> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            lock_agent(&mut tx, owner, &schedule.agent_id).await?;
            refuse_twin(&mut tx, owner, schedule).await?;
            query(sql::INSERT)
                .bind(schedule.id.as_str())
                .bind(owner.as_str())
                .bind(schedule.agent_id.as_str())
                .bind(schedule.created_at)
                .execute(&mut tx)
                .await?;
            write_schedule(&mut tx, schedule).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn schedule_counts(&self, owner: &WorkspaceId, agent: &AgentId) -> Result<(i64, i64)> {
        let counts: (i64, i64) = query_as(sql::COUNT_SCHEDULES)
            .bind(owner.as_str())
            .bind(agent.as_str())
            .fetch_one(&mut self.read().await?)
            .await?;
        Ok(counts)
    }

    async fn schedules(&self, owner: &WorkspaceId, agent: &AgentId) -> Result<Vec<ScheduleRecord>> {
        let mut conn = self.read().await?;
        require_agent(&mut conn, owner, agent, "").await?;
        let rows: Vec<ScheduleRow> = query_as(&sql::select_all())
            .bind(owner.as_str())
            .bind(agent.as_str())
            .fetch_all(&mut conn)
            .await?;
        rows.into_iter().map(ScheduleRecord::try_from).collect()
    }

    async fn schedule(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        id: &ScheduleId,
    ) -> Result<ScheduleRecord> {
        let mut conn = self.read().await?;
        require_agent(&mut conn, owner, agent, "").await?;
        let row: Option<ScheduleRow> = query_as(&sql::select_one(""))
            .bind(owner.as_str())
            .bind(agent.as_str())
            .bind(id.as_str())
            .fetch_optional(&mut conn)
            .await?;
        row.ok_or_else(|| Error::not_found(Resource::Schedule, id.as_str()))?.try_into()
    }

    async fn update_schedule(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        id: &ScheduleId,
        decide: ScheduleDecision<'_>,
    ) -> Result<ScheduleRecord> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            lock_agent(&mut tx, owner, agent).await?;
            let current = locked_schedule(&mut tx, owner, agent, id)
                .await?
                .ok_or_else(|| Error::not_found(Resource::Schedule, id.as_str()))?;
            let next = decide(&current)?;
            if !next.queues_as(&current) {
                refuse_twin(&mut tx, owner, &next).await?;
            }
            write_schedule(&mut tx, &next).await?;
            tx.commit().await?;
            Ok(next)
        })
        .await
    }

    async fn delete_schedule(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        id: &ScheduleId,
    ) -> Result<()> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            lock_agent(&mut tx, owner, agent).await?;
            let done = query(sql::DELETE)
                .bind(owner.as_str())
                .bind(agent.as_str())
                .bind(id.as_str())
                .execute(&mut tx)
                .await?;
            if done.rows_affected() == 0 {
                return Err(Error::not_found(Resource::Schedule, id.as_str()));
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn due_schedules(
        &self,
        limit: i64,
    ) -> Result<(DateTime<Utc>, Vec<(WorkspaceId, ScheduleRecord)>)> {
        let now: DateTime<Utc> = query_scalar(&format!("SELECT {}", self.dialect().clock().now))
            .fetch_one(&mut self.read().await?)
            .await?;
        let rows: Vec<ScheduleRow> = query_as(&sql::select_due())
            .bind(now.timestamp())
            .bind(limit)
            .fetch_all(&mut self.read().await?)
            .await?;
        let mut due = Vec::with_capacity(rows.len());
        for row in rows {
            let owner = WorkspaceId::parse(&row.owner_id).map_err(Error::internal)?;
            due.push((owner, ScheduleRecord::try_from(row)?));
        }
        Ok((now, due))
    }

    async fn fire_schedule(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        id: &ScheduleId,
        decide: FireDecision<'_>,
    ) -> Result<Option<usize>> {
        watched_if(
            self.storage_health(),
            async {
                let mut tx = self.begin_write().await?;
                let status: Option<String> = query_scalar(
                    &crate::store::tasks::sql::agent_status(self.dialect().lock()),
                )
                .bind(owner.as_str())
                .bind(agent.as_str())
                .fetch_optional(&mut tx)
                .await?;
                let Some(status) = status else { return Ok(None) };
                let active = status.parse::<AgentStatus>().map_err(Error::internal)?
                    == AgentStatus::Active;
                let Some(current) =
                    locked_schedule(&mut tx, owner, agent, id).await?
                else {
                    return Ok(None);
                };
                let last_task_active = match &current.last_task_id {
                    Some(task) => query_scalar::<i32>(sql::TASK_ACTIVE)
                        .bind(task.as_str())
                        .fetch_optional(&mut tx)
                        .await?
                        .is_some(),
                    None => false,
                };
                let queued: Option<i64> = query_scalar(sql::AGENT_QUEUED)
                    .bind(owner.as_str())
                    .bind(agent.as_str())
                    .fetch_optional(&mut tx)
                    .await?;
                let state = FireState {
                    agent_active: active,
                    last_task_active,
                    queued: queued.unwrap_or(0),
                };
                let Some(write) = decide(&current, state) else { return Ok(None) };
                let at = crate::domain::now();
                let mut queued = 0;
                for (fire_at, task, entries) in &write.tasks {
                    let fresh = query(sql::INSERT_FIRE)
                        .bind(current.id.as_str())
                        .bind(fire_at.timestamp())
                        .bind(task.id.as_str())
                        .bind(at)
                        .execute(&mut tx)
                        .await?;
                    if fresh.rows_affected() == 0 {
                        tracing::warn!(schedule = %current.id, %fire_at, "this fire time already queued its task");
                        continue;
                    }
                    let (first, rest) = entries.split_first().ok_or_else(|| {
                        Error::internal("a scheduled task without its entry")
                    })?;
                    write_task(&mut tx, owner, task, first).await?;
                    for (nth, entry) in rest.iter().enumerate() {
                        let when = nth_instant(task.created_at, nth + 1);
                        insert_activity(&mut tx, owner, agent, entry, when)
                            .await?;
                    }
                    queued += 1;
                }
                for (nth, entry) in write.activity.iter().enumerate() {
                    let when = nth_instant(at, nth + write.tasks.len() * 2);
                    insert_activity(&mut tx, owner, agent, entry, when).await?;
                }
                let mut next = current.clone();
                next.next_fire_at = write.next_fire_at;
                next.last_fired_at = write.last_fired_at;
                next.last_task_id = write.last_task_id.clone();
                next.skip_noted = write.skip_noted;
                write_schedule(&mut tx, &next).await?;
                if queued > 0 && active {
                    notify(&mut tx, &AgentKey::new(owner.as_str(), agent.as_str()));
                }
                tx.commit().await?;
                Ok(Some(queued))
            },
            |outcome: &Option<usize>| outcome.is_some(),
        )
        .await
    }
}

/// The statements of this area, the same on both backends.
pub(super) mod sql {
    const COLUMNS: &str = "SELECT owner_id, id, agent_id, cron, timezone, title, description, \
        priority, catch_up, overlap, enabled, next_fire_at, last_fired_at, last_task_id, \
        skip_noted, created_at, updated_at FROM schedules";
    /// A row with its identity; `UPDATE` fills the rest.
    pub(crate) const INSERT: &str = "INSERT INTO schedules (id, owner_id, agent_id, cron, \
        timezone, title, priority, catch_up, overlap, enabled, created_at, updated_at) \
        VALUES ($1, $2, $3, '', 'UTC', '', 0, 'skip', 'skip_if_active', false, $4, $4)";
    pub(crate) const UPDATE: &str = "UPDATE schedules SET cron = $2, timezone = $3, title = $4, \
        description = $5, priority = $6, catch_up = $7, overlap = $8, enabled = $9, \
        next_fire_at = $10, last_fired_at = $11, last_task_id = $12, skip_noted = $13, \
        updated_at = $14 WHERE id = $1";
    pub(crate) fn select_one(lock: &str) -> String {
        format!("{COLUMNS} WHERE owner_id = $1 AND agent_id = $2 AND id = $3{lock}")
    }
    pub(crate) fn select_all() -> String {
        format!("{COLUMNS} WHERE owner_id = $1 AND agent_id = $2 ORDER BY created_at, id")
    }
    pub(crate) fn select_due() -> String {
        format!("{COLUMNS} WHERE enabled AND next_fire_at <= $1 ORDER BY next_fire_at LIMIT $2")
    }
    pub(crate) const DELETE: &str =
        "DELETE FROM schedules WHERE owner_id = $1 AND agent_id = $2 AND id = $3";
    pub(crate) const COUNT_SCHEDULES: &str = "SELECT COUNT(*) FILTER (WHERE agent_id = $2), \
        COUNT(*) FROM schedules WHERE owner_id = $1";
    pub(crate) const AGENT_QUEUED: &str =
        "SELECT queued FROM backlog_counts WHERE owner_id = $1 AND agent_id = $2";
    pub(crate) const TASK_ACTIVE: &str =
        "SELECT 1 FROM tasks WHERE id = $1 AND status IN ('queued', 'in_progress')";
    pub(crate) const INSERT_FIRE: &str = "INSERT INTO schedule_fires (schedule_id, fire_at, \
        task_id, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (schedule_id, fire_at) DO NOTHING";
}
