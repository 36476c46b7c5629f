//! Quotas: how much of each thing one user may have on a shared instance. Each has a default
//! that stops abuse without getting in an ordinary user's way; the operator changes them under
//! `quotas.*` (0 lifts one). Reaching one is `quota_exceeded`, naming it and its value.

use std::time::Duration;

/// One quota, by the name its setting (`quotas.<name>`) and its errors use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quota {
    /// Agents of a user where no billing plan limits them (without Stripe).
    AgentsPerUser,
    SchedulesPerAgent,
    SchedulesPerUser,
    /// How often an `overlap: enqueue` schedule may fire, at the most (in seconds).
    MinEnqueuePeriod,
    QueuedTasksPerAgent,
    QueuedTasksPerUser,
    McpServersPerUser,
    /// Event streams (`GET /api/events`) a user has open on one node.
    StreamsPerUser,
    /// Team workspaces one person owns (fixed: 20).
    WorkspacesPerUser,
    /// Invites of a workspace waiting for an answer (fixed: 100).
    PendingInvites,
    /// API keys of a workspace not revoked (fixed: 100).
    ApiKeys,
    /// Members of a workspace and invites waiting for an answer together (fixed: 1,000).
    Members,
    /// Outbound webhook endpoints of a workspace (fixed: 20).
    Webhooks,
    /// Deliveries of one endpoint waiting to be sent (fixed: 1,000): a test or a redelivery
    /// past it is refused.
    PendingDeliveries,
    /// Triggers of a workspace (fixed: 100).
    TriggersPerWorkspace,
    /// Calls one trigger accepts in any 60 seconds (fixed: 60).
    TriggerCallsPerMinute,
}

impl Quota {
    pub fn as_str(self) -> &'static str {
        match self {
            Quota::AgentsPerUser => "agents_per_user",
            Quota::SchedulesPerAgent => "schedules_per_agent",
            Quota::SchedulesPerUser => "schedules_per_user",
            Quota::MinEnqueuePeriod => "min_enqueue_period_seconds",
            Quota::QueuedTasksPerAgent => "queued_tasks_per_agent",
            Quota::QueuedTasksPerUser => "queued_tasks_per_user",
            Quota::McpServersPerUser => "mcp_servers_per_user",
            Quota::StreamsPerUser => "streams_per_user",
            Quota::WorkspacesPerUser => "workspaces_per_user",
            Quota::PendingInvites => "pending_invites_per_workspace",
            Quota::ApiKeys => "api_keys_per_workspace",
            Quota::Members => "members_per_workspace",
            Quota::Webhooks => "webhooks_per_workspace",
            Quota::PendingDeliveries => "pending_deliveries_per_webhook",
            Quota::TriggersPerWorkspace => "triggers_per_workspace",
            Quota::TriggerCallsPerMinute => "trigger_calls_per_minute",
        }
    }

    /// What the quota counts, for messages: "12 schedules on this agent".
    pub(crate) fn counts(self) -> &'static str {
        match self {
            Quota::AgentsPerUser => "agents",
            Quota::SchedulesPerAgent => "schedules on one agent",
            Quota::SchedulesPerUser => "schedules across all agents",
            Quota::MinEnqueuePeriod => "seconds between the runs of an enqueue schedule, at least",
            Quota::QueuedTasksPerAgent => "queued tasks on one agent",
            Quota::QueuedTasksPerUser => "queued tasks across all agents",
            Quota::McpServersPerUser => "MCP servers",
            Quota::StreamsPerUser => "open event streams on one server",
            Quota::WorkspacesPerUser => "team workspaces owned",
            Quota::PendingInvites => "invites waiting for an answer",
            Quota::ApiKeys => "API keys",
            Quota::Members => "members and invites waiting for an answer",
            Quota::Webhooks => "webhook endpoints",
            Quota::PendingDeliveries => "deliveries of one endpoint waiting to be sent",
            Quota::TriggersPerWorkspace => "triggers in a workspace",
            Quota::TriggerCallsPerMinute => "calls to one trigger a minute",
        }
    }
}

/// Every quota's value; 0 lifts a count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quotas {
    /// Only where no billing is configured: then 0 (the default) means no limit, as a
    /// self-hosted instance is not a free trial. With billing, the plans limit agents.
    pub agents_per_user: u32,
    pub schedules_per_agent: u32,
    pub schedules_per_user: u32,
    /// An `overlap: enqueue` schedule queues a task at every fire time, even while its last
    /// one waits: one that fires more often than this is refused.
    pub min_enqueue_period: Duration,
    pub queued_tasks_per_agent: u32,
    pub queued_tasks_per_user: u32,
    pub mcp_servers_per_user: u32,
    /// Event streams one user has open on one node at a time.
    pub streams_per_user: u32,
}

impl Default for Quotas {
    fn default() -> Self {
        Self {
            agents_per_user: 0,
            schedules_per_agent: 20,
            schedules_per_user: 100,
            min_enqueue_period: Duration::from_secs(300),
            queued_tasks_per_agent: 1_000,
            queued_tasks_per_user: 5_000,
            mcp_servers_per_user: 20,
            streams_per_user: 16,
        }
    }
}

/// A billing plan's own values for some quotas (`billing.plan_quotas.<plan>.<name>`); the
/// others are the configured ones. Agents are the plans' own limit (`billing.plans`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanQuotas {
    pub schedules_per_agent: Option<u32>,
    pub schedules_per_user: Option<u32>,
    pub min_enqueue_period: Option<Duration>,
    pub queued_tasks_per_agent: Option<u32>,
    pub queued_tasks_per_user: Option<u32>,
    pub mcp_servers_per_user: Option<u32>,
}

impl Quotas {
    /// These quotas with `plan`'s own values in their place.
    pub fn with_plan(&self, plan: &PlanQuotas) -> Self {
        Self {
            agents_per_user: self.agents_per_user,
            schedules_per_agent: plan.schedules_per_agent.unwrap_or(self.schedules_per_agent),
            schedules_per_user: plan.schedules_per_user.unwrap_or(self.schedules_per_user),
            min_enqueue_period: plan.min_enqueue_period.unwrap_or(self.min_enqueue_period),
            queued_tasks_per_agent: plan
                .queued_tasks_per_agent
                .unwrap_or(self.queued_tasks_per_agent),
            queued_tasks_per_user: plan.queued_tasks_per_user.unwrap_or(self.queued_tasks_per_user),
            mcp_servers_per_user: plan.mcp_servers_per_user.unwrap_or(self.mcp_servers_per_user),
            // A node's open streams are the operator's bound, not a plan's.
            streams_per_user: self.streams_per_user,
        }
    }

    /// `Err((quota, limit))` when `used` things leave no room for one more under `limit`.
    pub fn room(quota: Quota, limit: u32, used: i64) -> Result<(), (Quota, u64)> {
        if limit > 0 && used >= i64::from(limit) {
            return Err((quota, u64::from(limit)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plans_values_replace_only_the_quotas_it_names() {
        let plan = PlanQuotas { schedules_per_agent: Some(50), ..PlanQuotas::default() };
        let quotas = Quotas::default().with_plan(&plan);
        assert_eq!(quotas.schedules_per_agent, 50);
        assert_eq!(quotas.schedules_per_user, Quotas::default().schedules_per_user);
    }

    #[test]
    fn a_quota_leaves_room_below_its_limit_and_zero_lifts_it() {
        assert_eq!(Quotas::room(Quota::SchedulesPerAgent, 2, 1), Ok(()));
        assert_eq!(
            Quotas::room(Quota::SchedulesPerAgent, 2, 2),
            Err((Quota::SchedulesPerAgent, 2))
        );
        assert_eq!(Quotas::room(Quota::McpServersPerUser, 0, 1_000_000), Ok(()));
    }
}
