//! Schedules: recurring tasks of an agent, and the look at due schedules every node's runtime
//! takes (`workers::scheduler`). Times are the database's, so nodes whose clocks differ agree
//! on what is due.

use super::quotas::check_enqueue_period;
use super::{Core, Principal};
use crate::api::ScheduleList;
use crate::domain::agent::AgentId;
use crate::domain::schedule::{
    self, CronSpec, NewSchedule, Schedule, ScheduleId, SchedulePatch, ScheduleRecord,
};
use crate::domain::workspace::Need;
use crate::error::{Error, Result, ValidationErrors};
use tracing::Instrument as _;

/// Due schedules looked at in one pass; a full pass is followed by another at once.
pub(crate) const DUE_BATCH: i64 = 200;

impl Core {
    /// Adds a schedule to the agent; its first fire time is the first after now.
    pub async fn add_schedule(
        &self,
        who: &Principal,
        agent: &AgentId,
        new: NewSchedule,
    ) -> Result<Schedule> {
        who.require(Need::Work)?;
        self.check_cron(&new.timing.cron)?;
        let now = self.store().database_time().await?;
        let record = ScheduleRecord::create(agent, new, now);
        never_fires(&record)?;
        check_enqueue_period(&*self.quotas_of(&who.workspace).await?, &record)?;
        self.check_schedule_room(&who.workspace, agent).await?;
        self.store().insert_schedule(&who.workspace, &record).await?;
        tracing::info!(workspace = %who.workspace, agent_id = %agent, schedule = %record.id, cron = record.timing.cron.as_str(), "schedule added");
        Ok(record.public())
    }

    /// The agent's schedules, oldest first.
    pub async fn schedules(&self, who: &Principal, agent: &AgentId) -> Result<ScheduleList> {
        let records = self.store().schedules(&who.workspace, agent).await?;
        Ok(ScheduleList { schedules: records.iter().map(ScheduleRecord::public).collect() })
    }

    pub async fn schedule(
        &self,
        who: &Principal,
        agent: &AgentId,
        id: &ScheduleId,
    ) -> Result<Schedule> {
        Ok(self.store().schedule(&who.workspace, agent, id).await?.public())
    }

    /// Changes a schedule. A new expression or zone, or enabling it again, makes it next fire
    /// at its first fire time after now: runs that passed while it was off are not caught up.
    pub async fn update_schedule(
        &self,
        who: &Principal,
        agent: &AgentId,
        id: &ScheduleId,
        patch: SchedulePatch,
    ) -> Result<Schedule> {
        who.require(Need::Work)?;
        if let Some(cron) = &patch.cron {
            self.check_cron(cron)?;
        }
        let now = self.store().database_time().await?;
        let quotas = self.quotas_of(&who.workspace).await?;
        let quotas = &*quotas;
        let updated = self
            .store()
            .update_schedule(&who.workspace, agent, id, &|current| {
                let next = current.patched(&patch, now);
                never_fires(&next)?;
                check_enqueue_period(quotas, &next)?;
                Ok(next)
            })
            .await?;
        Ok(updated.public())
    }

    pub async fn delete_schedule(
        &self,
        who: &Principal,
        agent: &AgentId,
        id: &ScheduleId,
    ) -> Result<()> {
        who.require(Need::Work)?;
        self.store().delete_schedule(&who.workspace, agent, id).await
    }

    /// Takes one look at every schedule due by the database's clock: each due fire time
    /// queues its task (or is skipped or missed, as the schedule says), in one transaction
    /// per schedule that also moves its next fire time on. Returns how many tasks it queued
    /// and whether more schedules may be due than one pass took.
    pub(crate) async fn fire_due_schedules(&self) -> Result<(usize, bool)> {
        let (now, due) = self.store().due_schedules(DUE_BATCH).await?;
        let full = due.len() as i64 == DUE_BATCH;
        let missed_after = self.schedule_config().missed_after;
        let mut queued = 0;
        // Each owner's queue quota, read once a pass (a read of their plan only where plans
        // have quotas of their own).
        let mut max_queued_of = std::collections::HashMap::new();
        for (owner, record) in due {
            let max_queued = match max_queued_of.get(&owner) {
                Some(max) => *max,
                None => match self.quotas_of(&owner).await {
                    Ok(quotas) => {
                        max_queued_of.insert(owner.clone(), quotas.queued_tasks_per_agent);
                        quotas.queued_tasks_per_agent
                    }
                    Err(error) => {
                        tracing::warn!(%error, schedule = %record.id, "cannot read the owner's plan; the next look tries again");
                        continue;
                    }
                },
            };
            let decide = |current: &ScheduleRecord, state| {
                let due = current.next_fire_at.filter(|at| current.enabled && *at <= now)?;
                let plan = schedule::plan(&current.timing, due, now, missed_after);
                Some(schedule::decide(current, &plan, state, now, max_queued))
            };
            // A trace of its own, which the tasks it queues continue (see `crate::otel`).
            let span = tracing::info_span!(
                target: crate::otel::TARGET,
                "fire_schedule",
                otel.name = %format_args!("fire_schedule {}", record.id),
                agentd.schedule.id = %record.id,
                gen_ai.agent.id = %record.agent_id,
            );
            let fired = self.store().fire_schedule(&owner, &record.agent_id, &record.id, &decide);
            match fired.instrument(span).await {
                Ok(Some(count)) => {
                    if count > 0 {
                        tracing::info!(workspace = %owner, agent_id = %record.agent_id, schedule = %record.id, tasks = count, "schedule fired");
                        self.wake_agent(&owner, &record.agent_id);
                    }
                    queued += count;
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(%error, schedule = %record.id, "cannot fire a schedule; the next look tries again");
                }
            }
        }
        Ok((queued, full))
    }

    /// A sixth (seconds) field only where the operator allows it.
    fn check_cron(&self, cron: &CronSpec) -> Result<()> {
        if cron.has_seconds() && !self.schedule_config().seconds_field {
            return Err(ValidationErrors::single(
                "cron",
                "must have 5 fields (minute hour day-of-month month day-of-week); a seconds \
                 field is not enabled on this server",
            )
            .into());
        }
        Ok(())
    }
}

/// An enabled schedule whose expression names no future time is refused.
fn never_fires(record: &ScheduleRecord) -> Result<()> {
    if record.enabled && record.next_fire_at.is_none() {
        return Err(Error::from(ValidationErrors::single(
            "cron",
            format!("'{}' names no time from now on", record.timing.cron.as_str()),
        )));
    }
    Ok(())
}
