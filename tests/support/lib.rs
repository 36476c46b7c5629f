//! The test harness: a fresh database and a real `agentd` on port 0 for every test, on SQLite
//! and on PostgreSQL.
//!
//! PostgreSQL tests need `AGENTD_TEST_POSTGRES_URL` (an admin URL such as
//! `postgres://postgres@127.0.0.1:5432/postgres`); each test creates its own database there and
//! drops it afterwards. Without the URL they pass with a notice on stderr, unless
//! `AGENTD_TEST_REQUIRE_POSTGRES=1` (set by CI) turns the missing URL into a failure.
//!
//! The test package's library: what the integration tests (`tests/api`) and the benchmarks
//! (`tests/benches`) share. `db` makes databases, `app` servers and requests, `crash` servers
//! that die, `node` another node on the same database, `wait` deadlines, `metrics` the `/metrics` parser; `fake_discord`,
//! `fake_models`, `stripe_events` and `webhook_receiver` speak the outside services' wire formats. Set `TEST_LOG`
//! (a tracing filter such as `info` or `agentd=debug`) to see the in-process servers' logs.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_debug_implementations,
    reason = "test harness: a failed set-up step stops the run with its cause"
)]

pub mod app;
pub mod browser;
pub mod closed_port;
pub mod crash;
pub mod db;
pub mod fake_discord;
mod fake_limit;
pub mod fake_models;
pub mod fake_prompt_cache;
pub mod fake_tokens;
pub mod log;
pub mod mcp_server;
pub mod metrics;
pub mod node;
pub mod otlp_receiver;
pub mod sse;
pub mod standard_webhooks;
pub mod stripe_events;
pub mod wait;
pub mod webhook_receiver;

pub use app::*;
pub use crash::*;
pub use db::*;
pub use metrics::*;
pub use wait::*;

/// Runs each listed test once per backend: `mod <name> { fn sqlite(); fn postgres(); }`, each
/// calling the plain `async fn <name>(setup)` of the same module with what `$setup` made for
/// that backend (`app`: a [`TestApp`], `db`: a [`TestDb`], `store`: a [`TestStore`]). The
/// tests themselves are ordinary functions, which rustfmt formats.
#[macro_export]
macro_rules! backend_tests {
    ($setup:ident; $( $(#[$meta:meta])* $name:ident ),* $(,)?) => {
        $(
            $(#[$meta])*
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    let setup = $crate::$setup($crate::Backend::Sqlite)
                        .await
                        .expect("SQLite is always available");
                    super::$name(setup).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    let Some(setup) =
                        $crate::$setup($crate::Backend::Postgres).await
                    else {
                        return;
                    };
                    super::$name(setup).await;
                }
            }
        )*
    };
}
