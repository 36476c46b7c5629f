//! Another node on a test's database: its own `Core` (its own pool, caches and event hub) and
//! the API served on port 0, running no agents. On SQLite it stands for another process on the
//! same file (`agentctl --local`, a second `agentd`).

use std::net::SocketAddr;

use agentcore::Core;

use crate::app::TestApp;

pub struct Node {
    /// `http://127.0.0.1:<port>`.
    pub address: String,
    pub core: Core,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl TestApp {
    /// Starts another node on this server's database, with its options.
    pub async fn another_node(&self) -> Node {
        let core = Core::open(self.options.core_config(&self.db)).await.expect("open the core");
        let state = agentd::AppState::configured(
            core.clone(),
            self.options.http.clone(),
            self.options.limits,
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
        let address = format!("http://{}", listener.local_addr().unwrap());
        let service = agentd::router(state).into_make_service_with_connect_info::<SocketAddr>();
        let server = tokio::spawn(async move { axum::serve(listener, service).await });
        Node { address, core, server }
    }
}

impl Node {
    /// Stops serving and closes the node's pool.
    pub async fn close(self) {
        self.server.abort();
        self.core.close().await;
    }
}
