//! The in-process servers' logs: off unless `TEST_LOG` names a tracing filter (`info`,
//! `agentd=debug,agentcore=debug`), then written to each test's captured output, shown for the
//! tests that fail (or for all with `--nocapture`). Servers started as processes log to their
//! own captured stderr instead.

use std::sync::Once;

/// Installs the subscriber once per test binary when `TEST_LOG` is set.
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if let Ok(filter) = std::env::var("TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        }
    });
}
