//! The node's look at due schedules (and at approvals nobody answered in time, which it
//! denies): every `schedules.poll` it asks the facade to fire what is due by the database's
//! clock. Every node looks; the schedule's row lock and the unique key
//! on (schedule, fire time) make each fire time queue at most one task, whichever nodes are
//! alive, with no lock that could expire in between. Started and stopped with the runtime.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::core::Core;

/// How long the record of a fire time is kept (it guards against a second task for it).
const KEEP_FIRES: Duration = Duration::from_secs(30 * 24 * 3600);
/// How often old records are pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

pub(crate) async fn run(core: Core, mut stop: watch::Receiver<bool>) {
    let poll = core.schedule_config().poll;
    let mut next_prune = Instant::now() + PRUNE_EVERY;
    while !*stop.borrow() {
        let more = match core.fire_due_schedules().await {
            Ok((_, more)) => more,
            Err(error) => {
                tracing::warn!(%error, "cannot look for due schedules; trying again");
                false
            }
        };
        match core.expire_approvals().await {
            Ok(0) => {}
            Ok(count) => tracing::info!(count, "approvals nobody answered in time denied"),
            Err(error) => tracing::warn!(%error, "cannot look for expired approvals"),
        }
        if Instant::now() >= next_prune {
            prune(&core).await;
            next_prune = Instant::now() + PRUNE_EVERY;
        }
        if more {
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep(poll) => {}
            _ = stop.changed() => {}
        }
    }
}

async fn prune(core: &Core) {
    let before = chrono::Utc::now().timestamp() - KEEP_FIRES.as_secs() as i64;
    match core.store().prune_schedule_fires(before).await {
        Ok(0) => {}
        Ok(count) => tracing::debug!(count, "old schedule fire records pruned"),
        Err(error) => tracing::warn!(%error, "cannot prune old schedule fire records"),
    }
}
