//! The domain: values parsed once at the edge, and the types the facade returns.

/// An id the service issues: a UUID v7 in its hyphenated text form. Any text of one line is a
/// possible id to look up (ids never issued match nothing).
macro_rules! generated_id {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub(crate) fn generate() -> Self {
                Self(uuid::Uuid::now_v7().to_string())
            }

            pub fn parse(value: &str) -> Result<Self, String> {
                super::text::line(value, 1, 64).map(Self)
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

pub mod access;
pub mod activity;
pub mod agent;
pub mod approval;
pub mod audit;
pub mod backoff;
pub mod billing;
pub mod budget;
pub mod change;
pub mod chat;
pub mod compaction;
pub mod event;
pub mod fallback;
pub mod interaction;
pub mod mcp;
pub mod message;
pub mod onboarding;
pub mod paging;
pub mod quota;
pub mod ratelimit;
pub mod runtime;
pub mod schedule;
pub mod status;
pub mod steps;
pub mod task;
pub(crate) mod text;
pub mod tool_result;
pub mod tools;
pub mod trace;
pub mod trigger;
pub mod usage;
pub mod user;
pub mod webhook;
pub mod workspace;

use chrono::{DateTime, SubsecRound, Utc};

/// The current time at the precision every backend stores (microseconds), so what is written
/// reads back equal.
pub fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}
