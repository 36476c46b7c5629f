//! An app whose server can be killed and started again on the same database.

use crate::app::Options;
use crate::db::TestDb;
use agentcore::Core;
use tokio::sync::oneshot;

/// A server in a runtime of its own, which can be killed: its tasks stop at their next await,
/// nothing shuts down gracefully, and only what reached the database remains.
pub struct CrashableApp {
    pub address: String,
    runtime: Option<tokio::runtime::Runtime>,
}

impl CrashableApp {
    pub async fn start(db: &TestDb, options: &Options) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let config = options.core_config(db);
        let (address_tx, address_rx) = oneshot::channel();
        runtime.spawn(async move {
            let core = Core::open(config).await.expect("open the core");
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let _ = address_tx.send(format!("http://{}", listener.local_addr().unwrap()));
            agentd::serve(listener, agentd::AppState::new(core), std::future::pending())
                .await
                .unwrap();
        });
        let address = address_rx.await.expect("the server started");
        Self { address, runtime: Some(runtime) }
    }

    pub fn kill(mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for CrashableApp {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
