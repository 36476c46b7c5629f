//! The facade: every operation of the service as one async method of [`Core`].
//!
//! Callers (the HTTP server, the CLI, embedders) parse input into domain types first (see
//! [`crate::api`]) and authenticate to get a [`Principal`]; every method that touches a user's
//! resources takes one, and sees nothing that belongs to anyone else.

mod access;
mod accounts;
mod agents;
mod approvals;
mod audit;
mod backlog;
mod billing;
mod budget;
mod chat;
pub(crate) mod clock;
mod events;
mod interactions;
mod mcp;
mod metrics;
mod models;
mod numbering;
mod onboarding;
mod quotas;
mod schedules;
mod signing;
mod tokens;
mod tools;
mod triggers;
mod webhooks;
mod workers;
mod workspaces;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use crate::auth::Auth;
use crate::crypto::SecretBox;
use crate::discord::DiscordClient;
use crate::domain::agent::AgentId;
use crate::domain::billing::Plans;
use crate::domain::quota::Quotas;
use crate::domain::runtime::AgentKey;
use crate::domain::user::UserId;
use crate::domain::workspace::{Actor, Need, Role, WorkspaceId};
use crate::error::{Error, Result};
use crate::mcp::{McpClients, McpConfig};
use crate::models::{Models, ModelsConfig};
use crate::store::{self, DatabaseUrl, Store};
use crate::telemetry::Counters;
use crate::tools::http_fetch::{AddressPolicy, HttpFetch};
use crate::wakeups::Wakeups;

pub use accounts::Session;
pub use audit::AuditPage;
pub use chat::{Connected, OauthUrl, Sent};
pub use events::EventStream;
pub use interactions::InteractionEndpoint;

pub use crate::settings::{
    OutboxConfig, RetentionConfig, RuntimeConfig, ScheduleConfig, WebhookConfig,
};

/// What the library needs to run. `agentd` and `agentctl` fill it from their configuration.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    pub database_url: DatabaseUrl,
    /// Where the server key file lives when `secret_key` is not given.
    pub data_dir: PathBuf,
    /// Signs tokens. When absent, one is generated on first start and kept in the database, so
    /// every process sharing the database (and every restart) accepts the same tokens.
    pub jwt_secret: Option<SecretString>,
    /// Lifetime of new tokens; `None` means they do not expire.
    pub token_ttl: Option<Duration>,
    /// Encrypts bot tokens at rest: 64 hex characters. When absent, one is generated once and
    /// kept in `<data_dir>/secret.key` (mode 0600). Nodes sharing a database must share it.
    pub secret_key: Option<SecretString>,
    pub discord: DiscordConfig,
    pub outbox: OutboxConfig,
    pub models: ModelsConfig,
    pub runtime: RuntimeConfig,
    pub schedules: ScheduleConfig,
    pub retention: RetentionConfig,
    pub billing: BillingConfig,
    pub tools: ToolsConfig,
    /// The operator's MCP servers, which every user's agents may name.
    pub mcp: McpConfig,
    /// How much of each thing one user may have.
    pub quotas: Quotas,
    /// How outbound webhooks are sent.
    pub webhooks: WebhookConfig,
}

/// How the built-in tools behave.
#[derive(Debug, Clone, Default)]
pub struct ToolsConfig {
    /// Which addresses `http_fetch` may reach: public ones only, unless allowed here.
    pub http: AddressPolicy,
}

impl CoreConfig {
    /// The database at `database_url`, with the platform data directory for the key file.
    pub fn new(database_url: DatabaseUrl) -> Self {
        let data_dir = default_data_dir().unwrap_or_else(|| PathBuf::from("."));
        Self {
            database_url,
            data_dir,
            jwt_secret: None,
            token_ttl: None,
            secret_key: None,
            discord: DiscordConfig::default(),
            outbox: OutboxConfig::default(),
            models: ModelsConfig::default(),
            runtime: RuntimeConfig::default(),
            schedules: ScheduleConfig::default(),
            retention: RetentionConfig::default(),
            billing: BillingConfig::default(),
            tools: ToolsConfig::default(),
            mcp: McpConfig::default(),
            quotas: Quotas::default(),
            webhooks: WebhookConfig::default(),
        }
    }

    /// The embedded default: `agentd.db` and the key file in `data_dir`.
    pub fn sqlite_in(data_dir: &std::path::Path) -> Self {
        let mut config = Self::new(DatabaseUrl::sqlite_file(&store::default_sqlite_path(data_dir)));
        config.data_dir = data_dir.to_path_buf();
        config
    }
}

/// Discord's address and the service's own application, for OAuth installs.
#[derive(Debug, Clone)]
pub struct DiscordConfig {
    pub api_base: String,
    pub client_id: Option<String>,
    pub client_secret: Option<SecretString>,
    pub redirect_uri: Option<String>,
    /// The service's bot, which acts for connections made through OAuth.
    pub bot_token: Option<SecretString>,
    /// The service's application public key (hex), which interactions arriving at the shared
    /// endpoint are verified with.
    pub public_key: Option<String>,
    /// Bounds each request to Discord.
    pub timeout: Duration,
}

impl Default for DiscordConfig {
    fn default() -> Self {
        Self {
            api_base: "https://discord.com/api/v10".into(),
            client_id: None,
            client_secret: None,
            redirect_uri: None,
            bot_token: None,
            public_key: None,
            timeout: Duration::from_secs(15),
        }
    }
}

/// Plans, and how Stripe's prices and webhooks map onto them.
#[derive(Debug, Clone, Default)]
pub struct BillingConfig {
    pub plans: Plans,
    /// Stripe price id or lookup key → plan name.
    pub prices: std::collections::BTreeMap<String, String>,
    /// Webhook signing secrets (`whsec_...`); several during a rotation.
    pub webhook_secrets: Vec<SecretString>,
    /// Plans' own quotas, by plan name, over `CoreConfig::quotas` (with billing only).
    pub plan_quotas: std::collections::BTreeMap<String, crate::domain::quota::PlanQuotas>,
}

/// The platform's data directory for the service (`~/.local/share/agentd` on Linux).
pub fn default_data_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "agentd").map(|dirs| dirs.data_dir().to_path_buf())
}

/// An authenticated caller, in the workspace the request acts in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Whose rows the request reads and writes.
    pub workspace: WorkspaceId,
    /// The caller's role in that workspace.
    pub role: Role,
    /// Who acts: a person, or an API key.
    pub actor: Actor,
    /// The client's address, for the audit log (set by the HTTP server).
    pub address: Option<String>,
}

impl Principal {
    /// A user in their personal workspace, where they are the owner.
    pub fn personal(user: &UserId) -> Self {
        Principal {
            workspace: WorkspaceId::personal(user),
            role: Role::Owner,
            actor: Actor::User { id: user.clone() },
            address: None,
        }
    }

    /// The service itself acting in a workspace (a decision's follow-up, a schedule firing).
    pub(crate) fn service(workspace: WorkspaceId) -> Self {
        Principal { workspace, role: Role::Owner, actor: Actor::Service, address: None }
    }

    /// Fails with `forbidden` unless the caller's role allows what `need` asks.
    pub fn require(&self, need: Need) -> Result<()> {
        if self.role.allows(need) { Ok(()) } else { Err(Error::Forbidden(need.refusal())) }
    }

    /// The person making the request; `unauthorized` for an API key, which is no person.
    pub fn user(&self) -> Result<&UserId> {
        self.actor.user().ok_or_else(|| {
            Error::Forbidden("an API key cannot do this: sign in as a person".into())
        })
    }
}

/// The service. Cheap to clone; clones share the database pool.
#[derive(Debug, Clone)]
pub struct Core {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn Store>,
    auth: Auth,
    secrets: SecretBox,
    discord: DiscordClient,
    discord_config: DiscordConfig,
    outbox: OutboxConfig,
    models: Models,
    runtime: RuntimeConfig,
    schedules: ScheduleConfig,
    retention: RetentionConfig,
    billing: BillingConfig,
    quotas: Quotas,
    http_fetch: HttpFetch,
    webhooks: WebhookConfig,
    /// Sends webhooks: no redirects, resolved addresses checked by the operator's policy.
    webhook_client: reqwest::Client,
    /// This node's MCP connections.
    mcp: McpClients,
    /// Routes "this agent has work" to its worker, or to the runtime's dispatcher.
    wakeups: Wakeups,
    /// The event streams open on this node, by owner.
    events: Arc<crate::event_hub::EventHub>,
    /// Set once the poll for other processes' events runs.
    event_poll: std::sync::OnceLock<()>,
    /// Stops that poll and its listener.
    events_stop: tokio::sync::watch::Sender<bool>,
    /// Numbers events after they commit (PostgreSQL).
    numbering: numbering::Numbering,
    counters: Counters,
    /// Users' token versions as this node last read them.
    access: tokens::AccessCache,
    /// This process, for leases; fresh on every start.
    node_id: String,
}

/// HS256 keys shorter than the hash give away security for nothing.
const MIN_JWT_SECRET_BYTES: usize = 32;

impl Core {
    /// Connects to the database, brings its schema up to date and loads the signing secret.
    pub async fn open(config: CoreConfig) -> Result<Self> {
        // One TLS crypto provider for every client: sqlx and reqwest both use rustls.
        crate::tls::install_provider();
        let secrets = SecretBox::load(config.secret_key.as_ref(), &config.data_dir)?;
        let discord = DiscordClient::new(&config.discord.api_base, config.discord.timeout)
            .map_err(|e| Error::internal(e.to_string()))?;
        let models = Models::new(&config.models)?;
        let http_fetch = HttpFetch::new(config.tools.http.clone())?;
        let webhook_client = http_fetch
            .policy()
            .guarded_client(config.webhooks.attempt_timeout)
            .map_err(|e| Error::internal(format!("cannot build the webhooks' client: {e}")))?;
        // Users' MCP servers follow `allow_private` alone: the operator's exact addresses
        // (`allow_addresses`) are for `http_fetch`, which the operator's agents' models drive.
        let user_mcp_policy =
            AddressPolicy { allow_private: config.tools.http.allow_private, allowed: Vec::new() };
        let mcp = McpClients::new(&config.mcp, user_mcp_policy)?;
        let store = store::connect(&config.database_url).await?;
        let secret = match config.jwt_secret {
            Some(secret) if secret.expose_secret().len() < MIN_JWT_SECRET_BYTES => {
                return Err(Error::NotConfigured(format!(
                    "auth.jwt_secret must be at least {MIN_JWT_SECRET_BYTES} bytes; a short key makes tokens guessable"
                )));
            }
            Some(secret) => secret,
            None => signing::stored_key(store.as_ref(), &secrets).await?,
        };
        let auth = Auth::new(&secret, config.token_ttl);
        let counters = Counters::new(models.provider_names(), models.priced());
        let numbering = numbering::Numbering::new(store.commits());
        let inner = Inner {
            store,
            auth,
            secrets,
            discord,
            discord_config: config.discord,
            outbox: config.outbox,
            models,
            runtime: config.runtime,
            schedules: config.schedules,
            retention: config.retention,
            billing: config.billing,
            quotas: config.quotas,
            http_fetch,
            webhooks: config.webhooks,
            webhook_client,
            mcp,
            wakeups: Wakeups::default(),
            events: Arc::default(),
            event_poll: std::sync::OnceLock::new(),
            events_stop: tokio::sync::watch::channel(false).0,
            numbering,
            counters,
            access: tokens::AccessCache::default(),
            node_id: uuid::Uuid::new_v4().to_string(),
        };
        let core = Self { inner: Arc::new(inner) };
        core.start_numbering();
        Ok(core)
    }

    /// Succeeds when the database answers.
    /// Succeeds when the database answers and the last write to it worked; otherwise the
    /// error says why (a storage fault's cause names what failed, for the operator).
    pub async fn ready(&self) -> Result<()> {
        self.inner.store.ping().await?;
        match self.inner.store.health().fault() {
            Some((fault, cause)) => Err(Error::Storage { fault, cause }),
            None => Ok(()),
        }
    }

    pub fn backend(&self) -> store::Backend {
        self.inner.store.backend()
    }

    /// Closes the MCP connections (stdio servers are stopped, each within a bound) and the
    /// database pool. Later calls fail.
    pub async fn close(&self) {
        self.close_event_streams();
        self.stop_numbering().await;
        self.inner.mcp.close().await;
        self.inner.store.close().await;
    }

    pub(crate) fn discord_rate_limited(&self) -> u64 {
        self.inner.discord.rate_limited()
    }

    pub(crate) fn discord(&self) -> &DiscordClient {
        &self.inner.discord
    }

    pub(crate) fn http_fetch(&self) -> &HttpFetch {
        &self.inner.http_fetch
    }

    /// This node's MCP clients: one connection per server (per user for users' servers).
    pub fn mcp(&self) -> &McpClients {
        &self.inner.mcp
    }

    pub(crate) fn secrets(&self) -> &SecretBox {
        &self.inner.secrets
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.inner.counters
    }

    pub(crate) fn access(&self) -> &tokens::AccessCache {
        &self.inner.access
    }

    pub(crate) fn wakeups(&self) -> &Wakeups {
        &self.inner.wakeups
    }

    /// The agent has work (a task, a start, a retry): its worker looks at once.
    /// Its owner's event streams on this node look too (the change wrote events).
    pub(crate) fn wake_agent(&self, owner: &WorkspaceId, agent: &AgentId) {
        self.inner.wakeups.agent(&AgentKey::new(owner.as_str(), agent.as_str()));
        self.ring_events(owner);
    }

    /// After a change to an agent: its posts go out, and its worker (if this node runs it)
    /// looks again: an active agent for work, any other to let go of it.
    pub(crate) fn after_agent_change(&self, owner: &WorkspaceId, agent: &AgentId) {
        self.wake_outbox();
        self.wake_agent(owner, agent);
    }

    /// The whole store: the facade's own (workers get narrow views: `workers.rs`).
    pub(in crate::core) fn store(&self) -> &dyn Store {
        self.inner.store.as_ref()
    }

    fn auth(&self) -> &Auth {
        &self.inner.auth
    }

    /// The configured model providers.
    pub fn models(&self) -> &Models {
        &self.inner.models
    }

    /// This process's id in leases.
    pub fn node_id(&self) -> &str {
        &self.inner.node_id
    }
}

impl From<&Session> for Principal {
    /// The session's user in their personal workspace.
    fn from(session: &Session) -> Self {
        Principal::personal(&session.user.id)
    }
}

/// Fails unless `principal` still names a user; used where a missing user must read as 401.
fn unauthorized_unless<T>(value: Option<T>) -> Result<T> {
    value.ok_or(Error::Unauthorized)
}
