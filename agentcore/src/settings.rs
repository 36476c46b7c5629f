//! The settings of a node's background work: the agent runtime, the outbox's delivery, the
//! look at due schedules and what the service forgets. `agentd` fills them from its
//! configuration; [`CoreConfig`](crate::CoreConfig) carries them to the node; the workers read
//! them (and the facade the two rules of schedules it checks). A leaf: it imports nothing of
//! the crate.

use std::time::Duration;

/// How the outbox retries.
#[derive(Debug, Clone, Copy)]
pub struct OutboxConfig {
    /// The first retry's delay; each later one doubles it, up to `max_backoff`.
    pub base_backoff: Duration,
    pub max_backoff: Duration,
    /// How long a node holds a post it is sending before another node may take it.
    pub lease: Duration,
    /// How often channels are checked for posts when no wake-up came.
    pub poll: Duration,
}

impl Default for OutboxConfig {
    fn default() -> Self {
        Self {
            base_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
            lease: Duration::from_secs(30),
            poll: Duration::from_secs(5),
        }
    }
}

/// How the runtime runs. `agentd` fills it from `runtime.*`.
#[derive(Debug, Clone, Copy)]
pub struct RuntimeConfig {
    /// Model calls in flight at once on this node, across all agents.
    pub max_concurrent_calls: usize,
    /// How long a node's claim on an agent or task lasts without renewal: a dead node's work
    /// moves to another node after at most this long.
    pub lease: Duration,
    /// How long shutdown waits for tasks in progress before giving them back to the queue.
    pub shutdown_grace: Duration,
    /// The fallback look at the database when no wake-up came.
    pub poll: Duration,
    /// The first retry's delay after a transient failure; doubled for the next.
    pub retry_base: Duration,
    /// The longest wait between attempts, whatever the provider's `Retry-After` says.
    pub retry_max: Duration,
    /// Runs of one task that may be cut off (the process killed, the lease lost) before the
    /// claim that finds this many fails it instead of running it again: a task that crashes
    /// its node every time is not requeued forever.
    pub max_attempts: usize,
    /// The longest a task's run may take, across its steps (and across resumes).
    pub task_timeout: Duration,
    /// How long a tool call waits for a person's approval before it counts as denied.
    pub approval_timeout: Duration,
    /// Prompts, completions, tool arguments and results as attributes of the run's trace
    /// spans (off: they may hold personal data).
    pub trace_content: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            max_concurrent_calls: 64,
            lease: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(30),
            poll: Duration::from_secs(5),
            retry_base: Duration::from_secs(2),
            retry_max: Duration::from_secs(120),
            max_attempts: 5,
            task_timeout: Duration::from_secs(600),
            approval_timeout: Duration::from_secs(24 * 3600),
            trace_content: false,
        }
    }
}

/// What the service forgets, and when (`retention.*`).
#[derive(Debug, Clone, Copy, Default)]
pub struct RetentionConfig {
    /// Finished tasks and activity older than this many days are deleted; `None` keeps them.
    pub finished_days: Option<u32>,
    /// Audit entries older than this many days are deleted (a workspace's latest stays);
    /// `None` keeps them.
    pub audit_days: Option<u32>,
}

/// How schedules fire.
#[derive(Debug, Clone)]
pub struct ScheduleConfig {
    /// How often each node looks for due schedules.
    pub poll: Duration,
    /// A fire time older than this when a node first sees it was missed (no node was
    /// running): `catch_up` decides what happens to it.
    pub missed_after: Duration,
    /// Whether expressions may have a sixth, leading seconds field (for tests and demos;
    /// off by default, so a schedule fires at most once a minute).
    pub seconds_field: bool,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        Self {
            poll: Duration::from_secs(1),
            missed_after: Duration::from_secs(60),
            seconds_field: false,
        }
    }
}

/// How outbound webhooks are sent (`webhooks.*`).
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// The longest one attempt may take, connecting and reading the answer included.
    pub attempt_timeout: Duration,
    /// The waits before the 2nd, 3rd... attempt; once spent, a delivery has failed.
    pub retry_schedule: Vec<Duration>,
    /// Failed attempts in a row (across an endpoint's deliveries) that disable it; 0 never.
    pub disable_after: u32,
    /// Attempts one node has in flight at once.
    pub max_in_flight: usize,
    /// How often the worker looks for new events and due attempts when nothing woke it.
    pub poll: Duration,
}

impl WebhookConfig {
    /// How long a node holds a delivery it is sending: the attempt's bound and a margin, so a
    /// lease never runs out under an attempt that is still allowed to run.
    pub fn lease(&self) -> Duration {
        self.attempt_timeout + Duration::from_secs(30)
    }
}

impl Default for WebhookConfig {
    fn default() -> Self {
        let minutes = |m: u64| Duration::from_secs(m * 60);
        Self {
            attempt_timeout: Duration::from_secs(10),
            // Svix's: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (eight attempts over 27.5 h).
            retry_schedule: vec![
                Duration::from_secs(5),
                minutes(5),
                minutes(30),
                minutes(120),
                minutes(300),
                minutes(600),
                minutes(600),
            ],
            disable_after: 20,
            max_in_flight: 16,
            poll: Duration::from_secs(1),
        }
    }
}
