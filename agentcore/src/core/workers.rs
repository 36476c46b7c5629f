//! What the background workers (`crate::workers`) may do through the facade: the parts of the
//! store their work reads and writes, as narrow views (never users, agents' settings, billing
//! or anything else an API caller owns: the whole store is the facade's own), the store's
//! notifications, and their settings.

use super::Core;
use crate::settings::{
    OutboxConfig, RetentionConfig, RuntimeConfig, ScheduleConfig, WebhookConfig,
};
use crate::store::{DeliveryStore, RetentionStore, RunStore, Wake, WebhookWorkStore};

impl Core {
    /// Claims, leases, steps, approvals of calls and budget reservations: the runtime's part.
    pub(crate) fn run_store(&self) -> &dyn RunStore {
        self.inner.store.as_ref()
    }

    /// Posts and their connections: the outbox's delivery.
    pub(crate) fn delivery_store(&self) -> &dyn DeliveryStore {
        self.inner.store.as_ref()
    }

    /// Events to fan out, and webhook deliveries: the webhooks' worker.
    pub(crate) fn webhook_store(&self) -> &dyn WebhookWorkStore {
        self.inner.store.as_ref()
    }

    pub(crate) fn webhook_config(&self) -> &WebhookConfig {
        &self.inner.webhooks
    }

    /// The client webhooks are sent with.
    pub(crate) fn webhook_client(&self) -> &reqwest::Client {
        &self.inner.webhook_client
    }

    /// Pruning by age: housekeeping.
    pub(crate) fn retention_store(&self) -> &dyn RetentionStore {
        self.inner.store.as_ref()
    }

    /// Calls `wake` with every signal other nodes publish, until `stop` (see
    /// [`crate::store::Store::listen`]); `None` on a backend without notifications.
    pub(crate) fn listen(
        &self,
        wake: Wake,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        self.inner.store.listen(wake, stop)
    }

    pub(crate) fn outbox_config(&self) -> OutboxConfig {
        self.inner.outbox
    }

    pub(crate) fn runtime_config(&self) -> RuntimeConfig {
        self.inner.runtime
    }

    pub(crate) fn schedule_config(&self) -> &ScheduleConfig {
        &self.inner.schedules
    }

    pub(crate) fn retention_config(&self) -> RetentionConfig {
        self.inner.retention
    }
}
