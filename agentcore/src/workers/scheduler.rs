//! The node's look at due schedules (and at approvals nobody answered in time, which it
//! denies): every `schedules.poll` it asks the facade to fire what is due by the database's
//! clock. Every node looks; the schedule's row lock and the unique key
//! on (schedule, fire time) make each fire time queue at most one task, whichever nodes are
//! alive, with no lock that could expire in between. Started and stopped with the runtime; old
//! fire records go with the node's housekeeping (`retention.rs`).

use tokio::sync::watch;

use crate::core::Core;

pub(crate) async fn run(core: Core, mut stop: watch::Receiver<bool>) {
    let poll = core.schedule_config().poll;
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
        if more {
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep(poll) => {}
            _ = stop.changed() => {}
        }
    }
}
