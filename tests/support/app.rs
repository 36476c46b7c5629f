//! A real `agentd` on port 0 over a test database, with the fake outside services, and the
//! requests tests make to it.

use crate::db::{Backend, TestDb};
use crate::fake_discord::{self, FakeDiscord};
use crate::fake_models::{self, FakeModels};
use crate::stripe_events;
use agentcore::models::ProviderConfig;
use agentcore::{Core, CoreConfig, OutboxConfig, RuntimeConfig, ScheduleConfig};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// A response, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Reply {
    /// The error code of an error body.
    pub fn code(&self) -> &str {
        self.body["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("not an error body: {}", self.body))
    }

    /// Asserts the status and the error code, and that the body has the API's error shape.
    #[track_caller]
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.body);
        assert_eq!(self.code(), code, "body: {}", self.body);
        let error = &self.body["error"];
        assert!(
            error["message"].as_str().is_some_and(|m| !m.is_empty()),
            "no message: {}",
            self.body
        );
        let request_id = error["request_id"].as_str().expect("request_id");
        assert_eq!(self.headers["x-request-id"].to_str().unwrap(), request_id);
    }

    #[track_caller]
    pub fn assert_status(&self, status: u16) -> &Value {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.body);
        &self.body
    }
}

/// A registered user and their token.
#[derive(Debug, Clone)]
pub struct User {
    pub id: String,
    pub token: String,
}

/// How a test server is set up.
#[derive(Clone)]
pub struct Options {
    pub jwt_secret: Option<String>,
    /// Whether the service's own Discord application (OAuth) is configured.
    pub discord_app: bool,
    pub discord: FakeDiscord,
    /// The model providers' base URLs point here, with the keys it accepts.
    pub models: FakeModels,
    /// More OpenAI-compatible providers, by name, each a fake model server of its own.
    pub more_providers: Vec<(String, FakeModels)>,
    /// Providers configured without their key (`anthropic`, say): none unless set.
    pub keyless: Vec<String>,
    pub runtime: RuntimeConfig,
    /// The outbox: retries from 20 ms, leases of 2 s.
    pub outbox: OutboxConfig,
    /// How long a call to Discord may take (500 ms).
    pub discord_timeout: Duration,
    /// Schedules: looked at every 100 ms, with the seconds field allowed so a test's
    /// schedule fires every second.
    pub schedules: ScheduleConfig,
    /// What is forgotten: agentd's defaults (finished tasks are kept).
    pub retention: agentcore::RetentionConfig,
    /// Stripe webhook signing secrets; empty turns the webhook off.
    pub webhook_secrets: Vec<String>,
    /// Holds the server key file; shared across restarts of one test.
    pub data_dir: Arc<tempfile::TempDir>,
    /// The HTTP settings and abuse limits: agentd's defaults.
    pub http: agentd::config::HttpConfig,
    pub limits: agentd::config::LimitsConfig,
    /// What `http_fetch` may reach: public addresses only, as by default.
    pub tools: agentcore::ToolsConfig,
    /// The model of agents that name none; `echo` unless set.
    pub default_model: Option<String>,
    /// The operator's MCP servers: none unless set.
    pub mcp: agentcore::mcp::McpConfig,
    /// The answer's length bound sent with every call; the server's default unless set.
    pub max_tokens: Option<u32>,
    /// `models.context_windows` beside the known ones: none unless set.
    pub context_windows: Vec<(String, u32)>,
    /// `auth.token_ttl_seconds`: tokens do not expire unless set.
    pub token_ttl: Option<Duration>,
    /// `quotas.*`: agentd's defaults, but for the enqueue period (0: tests fire every second).
    pub quotas: agentcore::domain::quota::Quotas,
    /// `billing.plan_quotas`: none unless set.
    pub plan_quotas: std::collections::BTreeMap<String, agentcore::domain::quota::PlanQuotas>,
    /// Webhooks: retries 50 ms apart, a look every 50 ms, a 2 s bound per attempt.
    pub webhooks: agentcore::WebhookConfig,
    /// `models.rate_limits`: none unless set.
    pub rate_limits: agentcore::domain::ratelimit::RateLimits,
    /// The server's fallback chains (`models.fallbacks`); none unless set.
    pub model_fallbacks: std::collections::BTreeMap<String, Vec<String>>,
    /// When a failing model cools down (`models.health`): after 3 failures, for 1 s to 2 s.
    pub model_health: agentcore::domain::fallback::HealthPolicy,
}

/// The model the tests price: no input cost, $200 per million output tokens, so each answer of
/// the fake model (22 output tokens) costs 4,400 micro-dollars.
pub const PRICED_MODEL: &str = "openai:priced";
/// Priced as [`PRICED_MODEL`], under another name (a latency of its own at the fake).
pub const PRICED_TOO: &str = "openai:priced-too";
pub const PRICED_CALL_MICROS: i64 = 4_400;

impl Options {
    pub async fn new() -> Self {
        Self {
            jwt_secret: None,
            discord_app: true,
            discord: FakeDiscord::start().await,
            models: FakeModels::start().await,
            more_providers: Vec::new(),
            keyless: Vec::new(),
            runtime: RuntimeConfig {
                lease: Duration::from_secs(2),
                poll: Duration::from_millis(200),
                retry_base: Duration::from_millis(20),
                retry_max: Duration::from_secs(2),
                shutdown_grace: Duration::from_secs(5),
                ..RuntimeConfig::default()
            },
            outbox: OutboxConfig {
                base_backoff: Duration::from_millis(20),
                max_backoff: Duration::from_millis(200),
                lease: Duration::from_secs(2),
                poll: Duration::from_millis(100),
            },
            discord_timeout: Duration::from_millis(500),
            schedules: ScheduleConfig {
                poll: Duration::from_millis(100),
                seconds_field: true,
                ..ScheduleConfig::default()
            },
            retention: agentcore::RetentionConfig::default(),
            webhook_secrets: vec![stripe_events::OLD_SECRET.into(), stripe_events::SECRET.into()],
            data_dir: Arc::new(tempfile::tempdir().expect("temporary directory")),
            http: agentd::config::HttpConfig::default(),
            limits: agentd::config::LimitsConfig::default(),
            tools: agentcore::ToolsConfig::default(),
            default_model: None,
            mcp: agentcore::mcp::McpConfig::default(),
            max_tokens: None,
            context_windows: Vec::new(),
            token_ttl: None,
            // Schedules fire every second in tests: no minimum period for enqueue ones.
            quotas: agentcore::domain::quota::Quotas {
                min_enqueue_period: Duration::ZERO,
                ..agentcore::domain::quota::Quotas::default()
            },
            plan_quotas: std::collections::BTreeMap::new(),
            webhooks: agentcore::WebhookConfig {
                attempt_timeout: Duration::from_secs(2),
                retry_schedule: vec![Duration::from_millis(50); 7],
                poll: Duration::from_millis(50),
                ..agentcore::WebhookConfig::default()
            },
            rate_limits: agentcore::domain::ratelimit::RateLimits::default(),
            model_fallbacks: std::collections::BTreeMap::new(),
            // A model that keeps failing cools down for a second, as other waits are short.
            model_health: agentcore::domain::fallback::HealthPolicy {
                cooldown: Duration::from_secs(1),
                max_cooldown: Duration::from_secs(2),
                ..agentcore::domain::fallback::HealthPolicy::default()
            },
        }
    }

    /// The library configuration for `db`: the fake Discord, fast retries, short leases.
    pub fn core_config(&self, db: &TestDb) -> CoreConfig {
        let mut config = CoreConfig::new(db.url.clone());
        config.data_dir = self.data_dir.path().to_path_buf();
        config.jwt_secret = self.jwt_secret.clone().map(secrecy::SecretString::from);
        config.token_ttl = self.token_ttl;
        config.discord.api_base = self.discord.api_base.clone();
        config.discord.timeout = self.discord_timeout;
        if self.discord_app {
            config.discord.client_id = Some(fake_discord::CLIENT_ID.into());
            config.discord.client_secret = Some(fake_discord::CLIENT_SECRET.into());
            config.discord.redirect_uri = Some(fake_discord::REDIRECT_URI.into());
            config.discord.bot_token = Some(fake_discord::SERVICE_BOT_TOKEN.into());
            config.discord.public_key =
                Some(fake_discord::public_key_hex(&fake_discord::SERVICE_APP_SEED));
        }
        let openai = config.models.provider_mut("openai");
        openai.base_url = Some(self.models.openai_base());
        openai.api_key = Some(fake_models::OPENAI_KEY.into());
        let anthropic = config.models.provider_mut("anthropic");
        anthropic.base_url = Some(self.models.base.clone());
        anthropic.api_key = Some(fake_models::ANTHROPIC_KEY.into());
        for (name, fake) in &self.more_providers {
            let provider = ProviderConfig {
                base_url: Some(fake.openai_base()),
                api_key: Some(fake_models::OPENAI_KEY.into()),
                ..ProviderConfig::of_kind("openai")
            };
            config.models.providers.insert(name.clone(), provider);
        }
        for name in &self.keyless {
            config.models.provider_mut(name).api_key = None;
        }
        config.models.timeout = Duration::from_secs(5);
        for model in [PRICED_MODEL, PRICED_TOO] {
            config.models.prices.insert(
                model.into(),
                agentcore::domain::budget::Price::per_million_usd(0.0, 200.0).expect("a price"),
            );
        }
        config.models.rate_limits = self.rate_limits.clone();
        if let Some(max_tokens) = self.max_tokens {
            config.models.max_tokens = max_tokens;
        }
        config.models.context_windows.extend(self.context_windows.iter().cloned());
        config.models.fallbacks.clone_from(&self.model_fallbacks);
        config.models.health = self.model_health;
        config.runtime = self.runtime;
        config.schedules = self.schedules.clone();
        config.retention = self.retention;
        config.tools = self.tools.clone();
        config.mcp = self.mcp.clone();
        config.quotas = self.quotas.clone();
        config.webhooks = self.webhooks.clone();
        config.billing.plan_quotas = self.plan_quotas.clone();
        if let Some(model) = &self.default_model {
            config.models.default.clone_from(model);
        }
        config.billing.webhook_secrets =
            self.webhook_secrets.iter().map(|s| secrecy::SecretString::from(s.as_str())).collect();
        config.billing.prices = stripe_events::PRICES
            .iter()
            .map(|(price, plan)| (price.to_string(), plan.to_string()))
            .collect();
        config.outbox = self.outbox;
        config
    }
}

/// A running `agentd` on a fresh database, with a fake Discord.
pub struct TestApp {
    pub address: String,
    pub client: reqwest::Client,
    pub core: Core,
    pub discord: FakeDiscord,
    pub options: Options,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
    // Dropped last: the server's pool must be gone before the database is.
    pub db: TestDb,
}

pub async fn app(backend: Backend) -> Option<TestApp> {
    Some(app_with(TestDb::create(backend).await?, |_| {}).await)
}

/// A server on `db` with the default options changed by `configure`.
pub async fn app_with(db: TestDb, configure: impl FnOnce(&mut Options)) -> TestApp {
    let mut options = Options::new().await;
    configure(&mut options);
    TestApp::start(db, options).await
}

/// A server whose fallback poll and heartbeats are a minute apart: only wake-ups start work.
pub async fn quiet_app(backend: Backend) -> Option<TestApp> {
    let db = TestDb::create(backend).await?;
    Some(
        app_with(db, |o| {
            o.runtime.poll = Duration::from_secs(60);
            o.runtime.lease = Duration::from_secs(180);
        })
        .await,
    )
}

/// Just a fresh database, for tests that run the server as a process.
pub async fn db(backend: Backend) -> Option<TestDb> {
    TestDb::create(backend).await
}

/// A server with no Stripe webhook secret.
pub async fn app_without_webhook_secret(backend: Backend) -> Option<TestApp> {
    Some(app_with(TestDb::create(backend).await?, |o| o.webhook_secrets.clear()).await)
}

/// A server without the service's own Discord application configured.
pub async fn app_without_discord_app(backend: Backend) -> Option<TestApp> {
    Some(app_with(TestDb::create(backend).await?, |o| o.discord_app = false).await)
}

impl TestApp {
    /// Starts a server on `db` as `options` say.
    pub async fn start(db: TestDb, options: Options) -> Self {
        crate::log::init();
        let core = Core::open(options.core_config(&db)).await.expect("open the core");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
        let address = format!("http://{}", listener.local_addr().unwrap());
        let (shutdown, stopped) = oneshot::channel();
        let state =
            agentd::AppState::configured(core.clone(), options.http.clone(), options.limits);
        let server = tokio::spawn(async move {
            agentd::serve(listener, state, async {
                let _ = stopped.await;
            })
            .await
            .expect("server runs");
        });
        let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
        Self {
            address,
            client,
            core,
            discord: options.discord.clone(),
            options,
            shutdown: Some(shutdown),
            server: Some(server),
            db,
        }
    }

    /// Stops the server and closes its pool, handing back the database and the options for a
    /// restart.
    pub async fn stop(mut self) -> (TestDb, Options) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.unwrap();
        }
        self.core.close().await;
        let placeholder = self.db.stand_in();
        (std::mem::replace(&mut self.db, placeholder), self.options.clone())
    }

    pub async fn request(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        let mut request = self.client.request(method, format!("{}{path}", self.address));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        read(request.send().await.expect("request sent")).await
    }

    /// [`Self::request`] in the workspace `workspace` (its id, as `X-Workspace`).
    pub async fn request_in(
        &self,
        workspace: &str,
        method: Method,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> Reply {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.address))
            .bearer_auth(token)
            .header("x-workspace", workspace);
        if let Some(body) = body {
            request = request.json(&body);
        }
        read(request.send().await.expect("request sent")).await
    }

    /// The text of a GET in `workspace` (an NDJSON export, a page).
    pub async fn text_in(&self, workspace: &str, path: &str, token: &str) -> String {
        let response = self
            .client
            .get(format!("{}{path}", self.address))
            .bearer_auth(token)
            .header("x-workspace", workspace)
            .send()
            .await
            .expect("request sent");
        assert_eq!(response.status(), 200, "GET {path}");
        response.text().await.expect("a text body")
    }

    /// Sends `body` as it is, for malformed input.
    pub async fn send_raw(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: impl Into<reqwest::Body>,
    ) -> Reply {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.address))
            .header("content-type", "application/json")
            .body(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        read(request.send().await.expect("request sent")).await
    }

    /// POSTs `body` without a token (sign-up, sign-in, public routes).
    pub async fn post_anonymous(&self, path: &str, body: Value) -> Reply {
        self.request(Method::POST, path, None, Some(body)).await
    }

    pub async fn get(&self, path: &str, user: &User) -> Reply {
        self.request(Method::GET, path, Some(&user.token), None).await
    }

    pub async fn post(&self, path: &str, user: &User, body: Value) -> Reply {
        self.request(Method::POST, path, Some(&user.token), Some(body)).await
    }

    pub async fn post_empty(&self, path: &str, user: &User) -> Reply {
        self.request(Method::POST, path, Some(&user.token), None).await
    }

    pub async fn patch(&self, path: &str, user: &User, body: Value) -> Reply {
        self.request(Method::PATCH, path, Some(&user.token), Some(body)).await
    }

    pub async fn put(&self, path: &str, user: &User, body: Value) -> Reply {
        self.request(Method::PUT, path, Some(&user.token), Some(body)).await
    }

    pub async fn delete(&self, path: &str, user: &User) -> Reply {
        self.request(Method::DELETE, path, Some(&user.token), None).await
    }

    /// Registers `email` with a valid password and name.
    pub async fn register(&self, email: &str) -> User {
        let reply = self
            .request(
                Method::POST,
                "/auth/register",
                None,
                Some(json!({"email": email, "password": "correct horse", "name": "Test User"})),
            )
            .await;
        let body = reply.assert_status(201);
        User {
            id: body["user"]["id"].as_str().unwrap().to_owned(),
            token: body["access_token"].as_str().unwrap().to_owned(),
        }
    }

    /// Creates agent `id` for `user` with valid fields.
    pub async fn create_agent(&self, user: &User, id: &str) -> Value {
        let body = json!({"id": id, "name": format!("Agent {id}"), "role_prompt": "You write weekly updates.", "channel": "general"});
        self.post("/api/agents", user, body).await.assert_status(201).clone()
    }

    /// Adds a task and returns it.
    pub async fn add_task(&self, user: &User, agent: &str, title: &str, priority: i64) -> Value {
        let body = json!({"title": title, "priority": priority});
        self.post(&format!("/api/agents/{agent}/backlog"), user, body)
            .await
            .assert_status(201)
            .clone()
    }

    /// The actions of an agent's activity, newest first.
    pub async fn actions(&self, user: &User, agent: &str) -> Vec<String> {
        let reply = self.get(&format!("/api/agents/{agent}/activity?limit=1000"), user).await;
        reply.assert_status(200)["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["action"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Moves a task into `status` directly in the database (the runtime does this in service).
    pub async fn force_task_status(&self, task_id: &str, status: &str) {
        let finished = matches!(status, "complete" | "failed");
        let now = chrono::Utc::now();
        let sql = match (self.db.backend, finished) {
            (Backend::Sqlite, true) => {
                "UPDATE tasks SET status = $1, completed_at = $3, attempts = 1 WHERE id = $2"
            }
            (Backend::Sqlite, false) => {
                "UPDATE tasks SET status = $1, started_at = $3 WHERE id = $2"
            }
            (Backend::Postgres, true) => {
                "UPDATE tasks SET status = $1, completed_at = $3::timestamptz, attempts = 1 WHERE id = $2"
            }
            (Backend::Postgres, false) => {
                "UPDATE tasks SET status = $1, started_at = $3::timestamptz WHERE id = $2"
            }
        };
        let stamp = match self.db.backend {
            Backend::Sqlite => now.to_rfc3339_opts(chrono::SecondsFormat::Micros, false),
            Backend::Postgres => now.to_rfc3339(),
        };
        self.db.execute(sql, &[status, task_id, &stamp]).await;
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

pub async fn read(response: reqwest::Response) -> Reply {
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.expect("body read");
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&bytes)))
    };
    Reply { status, headers, body }
}
