//! The background work of a node, as clients of [`Core`](crate::Core): the agent runtime, the
//! outbox's delivery to Discord and the webhooks' delivery (`webhooks/`); the runtime also
//! runs the look at due schedules and the outbox the housekeeping (`retention.rs`). Each is started by its own `start` and stopped by its
//! `shutdown`; neither is known to the facade. They reach the store through the facade's
//! narrow views (`core/workers.rs`: the runtime's part, the delivery's part, pruning), never
//! the whole of it, and read their settings from `crate::settings`.

pub mod outbox;
pub(crate) mod retention;
pub mod runtime;
mod scheduler;
pub mod webhooks;
