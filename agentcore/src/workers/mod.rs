//! The background work of a node, as clients of [`Core`](crate::Core): the agent runtime and
//! the outbox's delivery to Discord; the runtime also runs the look at due schedules. Each is started by its own `start` and stopped by its
//! `shutdown`; neither is known to the facade.

pub mod outbox;
pub(crate) mod retention;
pub mod runtime;
mod scheduler;
