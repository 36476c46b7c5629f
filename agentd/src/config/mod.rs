//! The server's configuration, in one place. Each setting has a dotted path in the TOML file
//! and an `AGENTD_*` environment name (docs/configuration.md); the layers, lowest first, are the
//! built-in defaults, the file (`--config`, `AGENTD_CONFIG`, else `agentd.toml` in the platform
//! config directory when it exists), the environment, then the flags. The file is flattened
//! into environment names, so one lookup and one parser serve both layers.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use agentcore::domain::billing::Plans;
use agentcore::domain::quota::PlanQuotas;
use agentcore::mcp::McpConfig;
use agentcore::models::ModelsConfig;
use agentcore::store::DatabaseUrl;
use agentcore::tools::http_fetch::AddressPolicy;
use agentcore::{
    BillingConfig, CoreConfig, DiscordConfig, RetentionConfig, RuntimeConfig, ScheduleConfig,
};

use settings::list;
pub use sources::{Environment, process_environment};
use sources::{Sources, distance, read_file};

#[cfg(test)]
mod billing_tests;
mod effective;
#[cfg(test)]
mod fallback_tests;
mod mcp;
mod models;
#[cfg(test)]
mod prices_tests;
#[cfg(test)]
mod ratelimit_tests;
mod settings;
mod sources;
#[cfg(test)]
mod tests;

pub const DEFAULT_BIND: &str = "127.0.0.1:8080";

/// Names read before the settings (they say where the settings are) that are not unknown.
const OTHER_VARIABLES: [&str; 1] = ["AGENTD_CONFIG"];

/// Settings whose value is a map: in the file a table (or a `key=value,...` string).
const MAPS: [&str; 6] = [
    "AGENTD_BILLING__PLANS",
    "AGENTD_BILLING__PRICES",
    "AGENTD_MODELS__PRICES",
    "AGENTD_MODELS__RATE_LIMITS",
    "AGENTD_MODELS__CONTEXT_WINDOWS",
    "AGENTD_MODELS__FALLBACKS",
];

/// Values given on the command line; `None` defers to the environment, the file and defaults.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Flags {
    /// The TOML configuration file [env: AGENTD_CONFIG] [default: agentd.toml in the platform config directory, if present]
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
    /// Address to listen on [env: AGENTD_BIND] [default: 127.0.0.1:8080]
    #[arg(long, value_name = "ADDR", global = true)]
    pub bind: Option<String>,
    /// sqlite://PATH or postgres://... [env: AGENTD_DATABASE_URL] [default: agentd.db in the data directory]
    #[arg(long, value_name = "URL", global = true)]
    pub database_url: Option<String>,
    /// Where the embedded database lives [env: AGENTD_DATA_DIR] [default: the platform data directory]
    #[arg(long, value_name = "DIR", global = true)]
    pub data_dir: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub bind: SocketAddr,
    pub database_url: Option<DatabaseUrl>,
    pub data_dir: Option<PathBuf>,
    pub jwt_secret: Option<SecretString>,
    pub token_ttl: Option<Duration>,
    pub secret_key: Option<SecretString>,
    pub discord: DiscordConfig,
    pub models: ModelsConfig,
    pub runtime: RuntimeConfig,
    pub schedules: ScheduleConfig,
    pub retention: RetentionConfig,
    pub billing: BillingConfig,
    pub http: HttpConfig,
    pub limits: LimitsConfig,
    /// How much of each thing one user may have (`quotas.*`).
    pub quotas: agentcore::domain::quota::Quotas,
    pub log: LogConfig,
    pub tools: ToolsSettings,
    /// The operator's MCP servers.
    pub mcp: McpConfig,
    /// How outbound webhooks are sent (`webhooks.*`).
    pub webhooks: agentcore::WebhookConfig,
    /// The file that was read, if any.
    pub file: Option<PathBuf>,
    /// Every `AGENTD_*` name a setting can be given by.
    known: BTreeSet<String>,
}

/// `tools.http.*`: which addresses `http_fetch` may reach besides public ones.
#[derive(Debug, Clone, Default)]
pub struct ToolsSettings {
    /// Any private, loopback or link-local address (a local Ollama, an intranet).
    pub allow_private: bool,
    /// These `ip:port` addresses only, even though private.
    pub allow_addresses: Vec<String>,
}

/// The HTTP server's own bounds.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Larger request bodies get 413.
    pub body_limit_bytes: usize,
    /// A request (reading it, handling it, writing the answer) that takes longer gets 408, and
    /// a client that sends its headers slower than this is disconnected.
    pub request_timeout: Duration,
    /// Origins allowed to call the API from a browser; empty turns CORS off, `*` allows any.
    pub cors_origins: Vec<String>,
    /// Take the client's address from `X-Forwarded-For` (behind a reverse proxy).
    pub trust_forwarded_for: bool,
    /// When set, `GET /metrics` needs `Authorization: Bearer <token>`.
    pub metrics_token: Option<SecretString>,
    /// Serve the web dashboard at `/` (off for API-only deployments).
    pub ui: bool,
    /// Mark the dashboard's cookies `Secure` even when the request did not say it came over
    /// https (a TLS-terminating proxy that sends no `X-Forwarded-Proto`).
    pub secure_cookies: bool,
    /// Write a line per answered request (`access_log`), off the serving threads.
    pub access_log: bool,
    /// The log's lines are JSON (`log.format`): the access log's are too.
    pub log_json: bool,
    /// Answer the polled reads (the agent list and view) from the node's cache while they
    /// may still be true (`read_cache`).
    pub read_cache: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            body_limit_bytes: 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            cors_origins: Vec::new(),
            trust_forwarded_for: false,
            metrics_token: None,
            ui: true,
            secure_cookies: false,
            access_log: false,
            log_json: false,
            read_cache: true,
        }
    }
}

/// Abuse limits, per node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitsConfig {
    /// Logins and registrations per client address per minute; 0 turns the limit off.
    pub auth_per_minute: u32,
    /// Requests per signed-in user per minute; 0 turns the limit off.
    pub requests_per_minute: u32,
    /// Sign-in attempts per account (whatever the address) per minute; 0 turns it off.
    pub sign_ins_per_account_per_minute: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self { auth_per_minute: 10, requests_per_minute: 1200, sign_ins_per_account_per_minute: 10 }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// A `tracing` filter such as `info,sqlx=warn` (`AGENTD_LOG` is a shorthand for it).
    pub filter: String,
    pub json: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self { filter: "info,sqlx=warn".into(), json: false }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("configuration: {0}")]
pub struct ConfigError(String);

impl Config {
    /// Reads the configuration file, then layers `env` (the process's variables in
    /// production) and `flags` over it and the defaults.
    pub fn load(flags: &Flags, env: &Environment) -> Result<Self, ConfigError> {
        let default_file = directories::ProjectDirs::from("", "", "agentd")
            .map(|dirs| dirs.config_dir().join("agentd.toml"));
        Self::load_with_default_file(flags, env, default_file.as_deref())
    }

    /// [`Config::load`] with the default file's place given (tests give none).
    pub fn load_with_default_file(
        flags: &Flags,
        env: &Environment,
        default_file: Option<&Path>,
    ) -> Result<Self, ConfigError> {
        let named = env.get("AGENTD_CONFIG").filter(|path| !path.is_empty()).map(PathBuf::from);
        let chosen = flags.config.clone().or(named);
        let file = match (chosen, default_file) {
            (Some(path), _) => Some(path),
            (None, Some(path)) if path.exists() => Some(path.to_path_buf()),
            (None, _) => None,
        };
        let settings = match &file {
            Some(path) => read_file(path)?,
            None => BTreeMap::new(),
        };
        let sources = Sources { env, file: settings, asked: RefCell::default() };
        let mut config = Self::from_sources(flags, &sources)?;
        let known = sources.asked.into_inner();
        if let Some((_, key)) = sources.file.iter().find(|(name, _)| !known.contains(*name)) {
            let path = file.as_deref().unwrap_or(Path::new("the file")).display();
            return Err(ConfigError(format!("{path}: '{}' is not a setting", key.path)));
        }
        config.file = file;
        config.known = known;
        Ok(config)
    }

    /// Every setting is looked up, even one a flag overrides, so that all are known.
    fn from_sources(flags: &Flags, src: &Sources<'_>) -> Result<Self, ConfigError> {
        let bind_text =
            flags.bind.clone().or(src.get("AGENTD_BIND")).unwrap_or_else(|| DEFAULT_BIND.into());
        let bind = bind_text.parse().map_err(|_| {
            ConfigError(format!("bind: '{bind_text}' is not an address such as 127.0.0.1:8080"))
        })?;
        let database_url =
            flags.database_url.clone().or(src.get("AGENTD_DATABASE_URL")).map(DatabaseUrl::new);
        if let Some(url) = &database_url {
            url.backend().map_err(|e| ConfigError(e.to_string()))?;
        }
        let data_dir = flags.data_dir.clone().or(src.get("AGENTD_DATA_DIR").map(PathBuf::from));
        let mut config = Self {
            bind,
            database_url,
            data_dir,
            jwt_secret: None,
            token_ttl: None,
            secret_key: None,
            discord: DiscordConfig::default(),
            models: models::models(src)?,
            runtime: RuntimeConfig::default(),
            schedules: ScheduleConfig::default(),
            retention: RetentionConfig::default(),
            billing: billing(src)?,
            http: HttpConfig::default(),
            limits: LimitsConfig::default(),
            quotas: agentcore::domain::quota::Quotas::default(),
            log: log(src)?,
            tools: ToolsSettings::default(),
            mcp: mcp::mcp(src)?,
            webhooks: agentcore::WebhookConfig::default(),
            file: None,
            known: BTreeSet::new(),
        };
        settings::read(&mut config, src)?;
        config.http.log_json = config.log.json;
        let api_base = &config.discord.api_base;
        if !(api_base.starts_with("https://") || api_base.starts_with("http://")) {
            return Err(ConfigError(format!(
                "discord.api_base: '{api_base}' is not an http(s) URL"
            )));
        }
        config.http_policy()?;
        if let Some(bad) = config.http.cors_origins.iter().find(|o| !is_origin(o)) {
            return Err(ConfigError(format!(
                "http.cors_origins: '{bad}' is not an origin such as https://app.example.com (or *)"
            )));
        }
        Ok(config)
    }

    /// The `AGENTD_*` names among `names` that configure nothing (a typo, or a setting of
    /// another version), each with the closest known name when one is near.
    pub fn unknown_variables(&self, names: impl IntoIterator<Item = String>) -> Vec<String> {
        names
            .into_iter()
            .filter(|name| name.starts_with("AGENTD_"))
            .filter(|name| !self.known.contains(name) && !OTHER_VARIABLES.contains(&name.as_str()))
            .map(|name| {
                let closest = self
                    .known
                    .iter()
                    .filter(|known| known.starts_with("AGENTD_"))
                    .map(|known| (distance(&name, known), known))
                    .min();
                match closest {
                    Some((d, known)) if d <= 3 => format!("{name} (did you mean {known}?)"),
                    _ => name,
                }
            })
            .collect()
    }

    /// The data directory: as configured, else the platform's.
    pub fn data_dir(&self) -> Result<PathBuf, ConfigError> {
        self.data_dir.clone().or_else(agentcore::default_data_dir).ok_or_else(|| {
            ConfigError("data_dir: no home directory; set AGENTD_DATA_DIR or --data-dir".into())
        })
    }

    /// The database: as configured, else `agentd.db` in the data directory.
    pub fn database_url(&self) -> Result<DatabaseUrl, ConfigError> {
        match &self.database_url {
            Some(url) => Ok(url.clone()),
            None => Ok(CoreConfig::sqlite_in(&self.data_dir()?).database_url),
        }
    }

    pub fn core_config(&self) -> Result<CoreConfig, ConfigError> {
        let mut core = CoreConfig::new(self.database_url()?);
        core.data_dir = self.data_dir()?;
        core.jwt_secret.clone_from(&self.jwt_secret);
        core.token_ttl = self.token_ttl;
        core.secret_key.clone_from(&self.secret_key);
        core.discord = self.discord.clone();
        core.models = self.models.clone();
        core.runtime = self.runtime;
        core.schedules = self.schedules.clone();
        core.retention = self.retention;
        core.billing = self.billing.clone();
        core.tools.http = self.http_policy()?;
        core.mcp = self.mcp.clone();
        core.quotas = self.quotas.clone();
        core.webhooks = self.webhooks.clone();
        Ok(core)
    }

    /// The addresses `http_fetch` may reach, from `tools.http.*`.
    fn http_policy(&self) -> Result<AddressPolicy, ConfigError> {
        let allowed = self
            .tools
            .allow_addresses
            .iter()
            .map(|a| {
                a.parse().map_err(|_| {
                    ConfigError(format!(
                        "tools.http.allow_addresses: '{a}' is not an address such as 10.0.0.5:11434"
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(AddressPolicy { allow_private: self.tools.allow_private, allowed })
    }
}

fn log(src: &Sources<'_>) -> Result<LogConfig, ConfigError> {
    let defaults = LogConfig::default();
    let json = match src.get("AGENTD_LOG__FORMAT").as_deref() {
        None | Some("text") => false,
        Some("json") => true,
        Some(other) => {
            return Err(ConfigError(format!("log.format: '{other}' is neither text nor json")));
        }
    };
    let filter = src.get_aliased("AGENTD_LOG__FILTER", "AGENTD_LOG").unwrap_or(defaults.filter);
    Ok(LogConfig { filter, json })
}

fn billing(src: &Sources<'_>) -> Result<BillingConfig, ConfigError> {
    let plans = match src.get("AGENTD_BILLING__PLANS") {
        Some(raw) => Plans::parse(&raw).map_err(|e| ConfigError(format!("billing.plans: {e}")))?,
        None => Plans::default(),
    };
    let mut prices = BTreeMap::new();
    for pair in list(&src.get("AGENTD_BILLING__PRICES").unwrap_or_default()) {
        let Some((price, plan)) = pair.split_once('=') else {
            return Err(ConfigError(format!("billing.prices: '{pair}' is not price=plan")));
        };
        if !plans.contains(plan.trim()) {
            return Err(ConfigError(format!(
                "billing.prices: '{price}' names plan '{plan}', which billing.plans does not define"
            )));
        }
        prices.insert(price.trim().to_owned(), plan.trim().to_owned());
    }
    let webhook_secrets = src
        .secret("AGENTD_BILLING__WEBHOOK_SECRETS")?
        .map(|all| list(all.expose_secret()).into_iter().map(SecretString::from).collect())
        .unwrap_or_default();
    let plan_quotas = plan_quotas(src, &plans)?;
    Ok(BillingConfig { plans, prices, webhook_secrets, plan_quotas })
}

/// `billing.plan_quotas.<plan>.<quota>`: a plan's own quotas (a plan not in `billing.plans`
/// is refused, as a price naming one is).
fn plan_quotas(
    src: &Sources<'_>,
    plans: &Plans,
) -> Result<BTreeMap<String, PlanQuotas>, ConfigError> {
    const PREFIX: &str = "AGENTD_BILLING__PLAN_QUOTAS__";
    for name in src.names_under(PREFIX) {
        let plan = name.split("__").next().unwrap_or_default().to_lowercase();
        if !plans.contains(&plan) {
            return Err(ConfigError(format!(
                "billing.plan_quotas: '{plan}' is not a plan of billing.plans"
            )));
        }
    }
    let mut all = BTreeMap::new();
    for (plan, _) in plans.iter() {
        let env =
            |quota: &str| format!("{PREFIX}{}__{}", plan.to_uppercase(), quota.to_uppercase());
        let own = PlanQuotas {
            schedules_per_agent: src.count(&env("schedules_per_agent"), true)?,
            schedules_per_user: src.count(&env("schedules_per_user"), true)?,
            min_enqueue_period: src.seconds(&env("min_enqueue_period_seconds"), true)?,
            queued_tasks_per_agent: src.count(&env("queued_tasks_per_agent"), true)?,
            queued_tasks_per_user: src.count(&env("queued_tasks_per_user"), true)?,
            mcp_servers_per_user: src.count(&env("mcp_servers_per_user"), true)?,
        };
        if own != PlanQuotas::default() {
            all.insert(plan.to_owned(), own);
        }
    }
    Ok(all)
}

/// `*`, or a scheme and host without a path: `https://app.example.com[:port]`.
fn is_origin(origin: &str) -> bool {
    let host = origin.strip_prefix("https://").or_else(|| origin.strip_prefix("http://"));
    origin == "*" || host.is_some_and(|host| !host.is_empty() && !host.contains(['/', ' ']))
}
