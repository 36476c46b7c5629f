//! Waiting for a condition with a deadline: no sleeps as synchronisation.

use std::time::Duration;

/// Waits until `condition` holds, failing the test after `deadline`.
pub async fn eventually<F, Fut>(deadline: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let until = tokio::time::Instant::now() + deadline;
    loop {
        if condition().await {
            return;
        }
        assert!(tokio::time::Instant::now() < until, "within {deadline:?}: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
