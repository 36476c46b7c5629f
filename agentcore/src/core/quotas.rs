//! The operator's quotas (`quotas.*`, and a billing plan's own in `billing.plan_quotas`),
//! checked before what they bound is written. A count is read, then the write made: requests
//! of one user that race may pass a quota by the number in flight at once (each is bounded by
//! the rate limits), never by more.

use std::borrow::Cow;

use super::Core;
use crate::domain::agent::AgentId;
use crate::domain::billing::{AgentLimit, FREE};
use crate::domain::quota::{Quota, Quotas};
use crate::domain::schedule::{Overlap, ScheduleRecord};
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Result};

/// Fire times looked at to find how often a schedule fires: enough to see the shortest gap of
/// any expression within a day's pattern.
const GAP_SAMPLES: usize = 64;

impl Core {
    /// The quotas of `owner`: the configured ones, with their plan's own values where billing
    /// is configured and the plan has some (one read of the plan, only then).
    pub(crate) async fn quotas_of(&self, owner: &WorkspaceId) -> Result<Cow<'_, Quotas>> {
        let by_plan = &self.inner.billing.plan_quotas;
        if !self.billing_configured() || by_plan.is_empty() {
            return Ok(Cow::Borrowed(&self.inner.quotas));
        }
        let plan = self.store().billing(owner).await?.plan;
        // A plan no longer configured counts as `free`, as for its agents.
        match by_plan.get(&plan).or_else(|| by_plan.get(FREE)) {
            Some(own) => Ok(Cow::Owned(self.inner.quotas.with_plan(own))),
            None => Ok(Cow::Borrowed(&self.inner.quotas)),
        }
    }

    pub(crate) fn quotas(&self) -> &Quotas {
        &self.inner.quotas
    }

    /// Whether billing is configured (Stripe's webhook): then the plans limit agents; else
    /// the operator's `quotas.agents_per_user` does (front ends word the limit after it).
    pub fn billing_configured(&self) -> bool {
        !self.inner.billing.webhook_secrets.is_empty()
    }

    /// What limits a user's agents: the plans with billing, else the operator's quota.
    pub(crate) fn agent_limit(&self) -> AgentLimit<'_> {
        if self.billing_configured() {
            AgentLimit::Plans(self.plans())
        } else {
            AgentLimit::Quota(self.quotas().agents_per_user)
        }
    }

    /// Room for one more queued task on `agent` (and across the owner's agents).
    pub(super) async fn check_queue_room(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
    ) -> Result<()> {
        let quotas = self.quotas_of(owner).await?;
        if quotas.queued_tasks_per_agent == 0 && quotas.queued_tasks_per_user == 0 {
            return Ok(());
        }
        let (on_agent, all) = self.store().queued_counts(owner, agent).await?;
        Quotas::room(Quota::QueuedTasksPerAgent, quotas.queued_tasks_per_agent, on_agent)
            .and_then(|()| {
                Quotas::room(Quota::QueuedTasksPerUser, quotas.queued_tasks_per_user, all)
            })
            .map_err(exceeded)
    }

    /// Room for one more schedule on `agent` (and across the owner's agents).
    pub(super) async fn check_schedule_room(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
    ) -> Result<()> {
        let quotas = self.quotas_of(owner).await?;
        let (on_agent, all) = self.store().schedule_counts(owner, agent).await?;
        Quotas::room(Quota::SchedulesPerAgent, quotas.schedules_per_agent, on_agent)
            .and_then(|()| Quotas::room(Quota::SchedulesPerUser, quotas.schedules_per_user, all))
            .map_err(exceeded)
    }

    /// Room for one more MCP server of `owner`.
    pub(super) async fn check_mcp_server_room(&self, owner: &WorkspaceId) -> Result<()> {
        let limit = self.quotas_of(owner).await?.mcp_servers_per_user;
        if limit == 0 {
            return Ok(());
        }
        let used = i64::try_from(self.store().mcp_servers(owner).await?.len()).unwrap_or(i64::MAX);
        Quotas::room(Quota::McpServersPerUser, limit, used).map_err(exceeded)
    }
}

/// An enabled `overlap: enqueue` schedule must not fire more often than the quota allows: each
/// of its fire times queues a task, whatever is still waiting.
pub(super) fn check_enqueue_period(quotas: &Quotas, record: &ScheduleRecord) -> Result<()> {
    let least = quotas.min_enqueue_period;
    if !record.enabled || record.overlap != Overlap::Enqueue || least.is_zero() {
        return Ok(());
    }
    let Some(from) = record.next_fire_at else { return Ok(()) };
    let gap = record.timing.shortest_gap(from - chrono::Duration::seconds(1), GAP_SAMPLES);
    match gap.and_then(|g| g.to_std().ok()) {
        Some(gap) if gap < least => {
            Err(Error::QuotaExceeded { quota: Quota::MinEnqueuePeriod, limit: least.as_secs() })
        }
        _ => Ok(()),
    }
}

fn exceeded((quota, limit): (Quota, u64)) -> Error {
    Error::QuotaExceeded { quota, limit }
}
