//! `agentcore`: the agent service as a library.
//!
//! Everything the service does is a method of [`Core`]: accounts, agents, their backlog and
//! activity; [`Runtime::start`] runs the active agents and [`OutboxWorker::start`] delivers
//! their posts. `agentd` serves it over HTTP and `agentctl` drives it from a terminal; an
//! application can embed it directly:
//!
//! ```no_run
//! # async fn demo() -> agentcore::Result<()> {
//! use agentcore::{api::RegisterRequest, Core, CoreConfig, Principal};
//!
//! let core = Core::open(CoreConfig::sqlite_in(std::path::Path::new("/tmp/agents"))).await?;
//! let request = RegisterRequest {
//!     email: Some("ada@example.com".into()),
//!     password: Some("correct horse battery".into()),
//!     name: Some("Ada".into()),
//! };
//! let session = core.register(request.parse()?).await?;
//! let me = core.me(&Principal::from(&session)).await?;
//! # Ok(()) }
//! ```

pub mod api;
mod auth;
pub mod backup;
mod core;
pub mod crypto;
pub mod discord;
pub mod domain;
pub mod error;
mod event_hub;
pub mod mcp;
pub mod models;
pub mod otel;
pub mod scrub;
mod settings;
pub mod standard_webhooks;
pub mod store;
pub mod stripe;
pub mod stripes;
pub mod sync;
pub mod telemetry;
mod tls;
pub mod tools;
mod wakeups;
pub mod workers;

pub use crate::core::{
    AuditPage, BillingConfig, Connected, Core, CoreConfig, DiscordConfig, EventStream,
    InteractionEndpoint, OauthUrl, OutboxConfig, Principal, RetentionConfig, RuntimeConfig,
    ScheduleConfig, Sent, Session, ToolsConfig, WebhookConfig, default_data_dir,
};
pub use error::{Conflict, Error, Refusal, Resource, Result, StorageFault, ValidationErrors};
pub use telemetry::RuntimeStats;
pub use workers::outbox::OutboxWorker;
pub use workers::runtime::{Runtime, RuntimeStopper};
pub use workers::webhooks::WebhookWorker;

pub use tls::install_provider as install_tls_provider;
