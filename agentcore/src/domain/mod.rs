//! The domain: values parsed once at the edge, and the types the facade returns.

pub mod activity;
pub mod agent;
pub mod billing;
pub mod budget;
pub mod change;
pub mod chat;
pub mod mcp;
pub mod message;
pub mod onboarding;
pub mod runtime;
pub mod schedule;
pub mod status;
pub mod steps;
pub mod task;
pub(crate) mod text;
pub mod tools;
pub mod usage;
pub mod user;

use chrono::{DateTime, SubsecRound, Utc};

/// The current time at the precision every backend stores (microseconds), so what is written
/// reads back equal.
pub fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}
