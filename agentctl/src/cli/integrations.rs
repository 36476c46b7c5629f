//! The commands of outbound webhooks (the workspace's endpoints and their deliveries) and of
//! inbound triggers (URLs that queue a task on an agent).

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub(crate) enum WebhooksCommand {
    /// The workspace's endpoints (never their secrets)
    List,
    /// Register an endpoint, e.g. `add https://hooks.example.com/in --events task.completed,task.failed`;
    /// its signing secret is printed once
    Add {
        url: String,
        /// Comma-separated event types (task.completed, approval.requested, budget.warning, ...)
        #[arg(long)]
        events: String,
        #[arg(long)]
        description: Option<String>,
    },
    /// One endpoint
    Show { id: String },
    /// Change an endpoint
    Update {
        id: String,
        #[arg(long)]
        url: Option<String>,
        /// Comma-separated event types: replaces the list
        #[arg(long)]
        events: Option<String>,
        /// An empty value clears it
        #[arg(long)]
        description: Option<String>,
        /// Resume deliveries (clears the failure run)
        #[arg(long, conflicts_with = "disable")]
        enable: bool,
        /// Hold deliveries until enabled
        #[arg(long)]
        disable: bool,
    },
    /// Delete an endpoint and its deliveries
    Remove { id: String },
    /// A new signing secret, printed once; the previous one signs too for 24 hours
    Rotate { id: String },
    /// Queue a `webhook.test` event to the endpoint
    Test { id: String },
    /// The endpoint's last deliveries, newest first, with their attempts' answers
    Deliveries {
        id: String,
        /// 1 to 100 [default: 20]
        #[arg(long)]
        limit: Option<u32>,
        /// Deliveries older than this one (the `next_before` of the page before)
        #[arg(long)]
        before: Option<String>,
    },
    /// Send one delivery's message again (the same `webhook-id` and body)
    Redeliver { id: String, delivery: String },
}

#[derive(Debug, Subcommand)]
pub(crate) enum TriggersCommand {
    /// The workspace's triggers (never their secrets)
    List {
        /// Only this agent's
        #[arg(long)]
        agent: Option<String>,
    },
    /// A URL that queues a task on `agent` when called with a valid signature, e.g.
    /// `add triage "Alert: {{alert.name}}" --name grafana`; its secret is printed once
    Add {
        agent: String,
        /// The task's title, with `{{field.path}}` placeholders filled from the call's body
        title: String,
        #[arg(long)]
        name: Option<String>,
        /// The task's description, with placeholders
        #[arg(long)]
        description: Option<String>,
        #[arg(long, allow_negative_numbers = true)]
        priority: Option<i64>,
        /// Add it switched off (calls are refused until enabled)
        #[arg(long)]
        disabled: bool,
    },
    /// One trigger
    Show { id: String },
    /// Change a trigger
    Update {
        id: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        title: Option<String>,
        /// An empty value clears it
        #[arg(long)]
        description: Option<String>,
        #[arg(long, allow_negative_numbers = true)]
        priority: Option<i64>,
        #[arg(long, conflicts_with = "disable")]
        enable: bool,
        /// Refuse its calls until enabled
        #[arg(long)]
        disable: bool,
    },
    /// Delete a trigger (its URL answers 404; tasks it queued stay)
    Remove { id: String },
    /// A new secret, printed once; the previous one stays valid for 24 hours
    Rotate { id: String },
}
