//! The server's configuration, in one place. Each setting has a dotted path in the TOML file
//! and an `AGENTD_*` environment name (contract section 11); the layers, lowest first, are the
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
use agentcore::models::ModelsConfig;
use agentcore::store::DatabaseUrl;
use agentcore::{BillingConfig, CoreConfig, DiscordConfig, RuntimeConfig};

pub const DEFAULT_BIND: &str = "127.0.0.1:8080";

/// Names read before the settings (they say where the settings are) that are not unknown.
const OTHER_VARIABLES: [&str; 1] = ["AGENTD_CONFIG"];

/// Settings whose value is a map: in the file a table (or a `key=value,...` string).
const MAPS: [&str; 2] = ["AGENTD_BILLING__PLANS", "AGENTD_BILLING__PRICES"];

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
    pub billing: BillingConfig,
    pub http: HttpConfig,
    pub limits: LimitsConfig,
    pub log: LogConfig,
    /// The file that was read, if any.
    pub file: Option<PathBuf>,
    /// Every `AGENTD_*` name a setting can be given by.
    known: BTreeSet<String>,
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
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            body_limit_bytes: 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            cors_origins: Vec::new(),
            trust_forwarded_for: false,
            metrics_token: None,
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
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self { auth_per_minute: 10, requests_per_minute: 1200 }
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
    /// Reads the configuration file, then layers `env` (a variable look-up, `std::env::var` in
    /// production) and `flags` over it and the defaults.
    pub fn load(flags: &Flags, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let default_file = directories::ProjectDirs::from("", "", "agentd")
            .map(|dirs| dirs.config_dir().join("agentd.toml"));
        Self::load_with_default_file(flags, env, default_file.as_deref())
    }

    /// [`Config::load`] with the default file's place given (tests give none).
    pub fn load_with_default_file(
        flags: &Flags,
        env: &dyn Fn(&str) -> Option<String>,
        default_file: Option<&Path>,
    ) -> Result<Self, ConfigError> {
        let env = |name: &str| env(name).filter(|value| !value.is_empty());
        let chosen = flags.config.clone().or_else(|| env("AGENTD_CONFIG").map(PathBuf::from));
        let file = match (chosen, default_file) {
            (Some(path), _) => Some(path),
            (None, Some(path)) if path.exists() => Some(path.to_path_buf()),
            (None, _) => None,
        };
        let settings = match &file {
            Some(path) => read_file(path)?,
            None => BTreeMap::new(),
        };
        let sources = Sources { env: &env, file: settings, asked: RefCell::default() };
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
        let jwt_secret = src.secret("AGENTD_AUTH__JWT_SECRET")?;
        let token_ttl = src.seconds("AGENTD_AUTH__TOKEN_TTL_SECONDS", false)?;
        let secret_key = src.secret("AGENTD_SECRET_KEY")?;
        let defaults = DiscordConfig::default();
        let discord = DiscordConfig {
            api_base: src.get("AGENTD_DISCORD__API_BASE").unwrap_or(defaults.api_base),
            client_id: src.get("AGENTD_DISCORD__CLIENT_ID"),
            client_secret: src.secret("AGENTD_DISCORD__CLIENT_SECRET")?,
            redirect_uri: src.get("AGENTD_DISCORD__REDIRECT_URI"),
            bot_token: src.secret("AGENTD_DISCORD__BOT_TOKEN")?,
            timeout: defaults.timeout,
        };
        if !(discord.api_base.starts_with("https://") || discord.api_base.starts_with("http://")) {
            return Err(ConfigError(format!(
                "discord.api_base: '{}' is not an http(s) URL",
                discord.api_base
            )));
        }
        let model_defaults = ModelsConfig::default();
        let models = ModelsConfig {
            default: src.get("AGENTD_MODELS__DEFAULT").unwrap_or(model_defaults.default),
            openai_base_url: src
                .get("AGENTD_MODELS__OPENAI_BASE_URL")
                .unwrap_or(model_defaults.openai_base_url),
            openai_api_key: match src.secret("AGENTD_MODELS__OPENAI_API_KEY")? {
                Some(key) => Some(key),
                None => src.get("OPENAI_API_KEY").map(SecretString::from),
            },
            anthropic_base_url: src
                .get("AGENTD_MODELS__ANTHROPIC_BASE_URL")
                .unwrap_or(model_defaults.anthropic_base_url),
            anthropic_api_key: match src.secret("AGENTD_MODELS__ANTHROPIC_API_KEY")? {
                Some(key) => Some(key),
                None => src.get("ANTHROPIC_API_KEY").map(SecretString::from),
            },
            timeout: src
                .seconds("AGENTD_MODELS__TIMEOUT_SECONDS", false)?
                .unwrap_or(model_defaults.timeout),
            max_tokens: src
                .count("AGENTD_MODELS__MAX_TOKENS", false)?
                .unwrap_or(model_defaults.max_tokens),
        };
        let runtime_defaults = RuntimeConfig::default();
        let runtime = RuntimeConfig {
            max_concurrent_calls: src
                .count("AGENTD_RUNTIME__MAX_CONCURRENT_CALLS", false)?
                .unwrap_or(runtime_defaults.max_concurrent_calls),
            lease: src
                .seconds("AGENTD_RUNTIME__LEASE_SECONDS", false)?
                .unwrap_or(runtime_defaults.lease),
            shutdown_grace: src
                .seconds("AGENTD_RUNTIME__SHUTDOWN_GRACE_SECONDS", true)?
                .unwrap_or(runtime_defaults.shutdown_grace),
            poll: src
                .seconds("AGENTD_RUNTIME__POLL_SECONDS", false)?
                .unwrap_or(runtime_defaults.poll),
            ..runtime_defaults
        };
        let billing = billing(src)?;
        let http_defaults = HttpConfig::default();
        let http = HttpConfig {
            body_limit_bytes: src
                .count("AGENTD_HTTP__BODY_LIMIT_BYTES", false)?
                .unwrap_or(http_defaults.body_limit_bytes),
            request_timeout: src
                .seconds("AGENTD_HTTP__REQUEST_TIMEOUT_SECONDS", false)?
                .unwrap_or(http_defaults.request_timeout),
            cors_origins: src
                .get("AGENTD_HTTP__CORS_ORIGINS")
                .map(|all| list(&all))
                .unwrap_or(http_defaults.cors_origins),
            trust_forwarded_for: src
                .flag("AGENTD_HTTP__TRUST_FORWARDED_FOR")?
                .unwrap_or(http_defaults.trust_forwarded_for),
            metrics_token: src.secret("AGENTD_HTTP__METRICS_TOKEN")?,
        };
        if let Some(bad) = http.cors_origins.iter().find(|o| !is_origin(o)) {
            return Err(ConfigError(format!(
                "http.cors_origins: '{bad}' is not an origin such as https://app.example.com (or *)"
            )));
        }
        let limit_defaults = LimitsConfig::default();
        let limits = LimitsConfig {
            auth_per_minute: src
                .count("AGENTD_LIMITS__AUTH_PER_MINUTE", true)?
                .unwrap_or(limit_defaults.auth_per_minute),
            requests_per_minute: src
                .count("AGENTD_LIMITS__REQUESTS_PER_MINUTE", true)?
                .unwrap_or(limit_defaults.requests_per_minute),
        };
        let log_defaults = LogConfig::default();
        let log = LogConfig {
            filter: src
                .get_aliased("AGENTD_LOG__FILTER", "AGENTD_LOG")
                .unwrap_or(log_defaults.filter),
            json: match src.get("AGENTD_LOG__FORMAT").as_deref() {
                None | Some("text") => false,
                Some("json") => true,
                Some(other) => {
                    return Err(ConfigError(format!(
                        "log.format: '{other}' is neither text nor json"
                    )));
                }
            },
        };
        Ok(Self {
            bind,
            database_url,
            data_dir,
            jwt_secret,
            token_ttl,
            secret_key,
            discord,
            models,
            runtime,
            billing,
            http,
            limits,
            log,
            file: None,
            known: BTreeSet::new(),
        })
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
        core.billing = self.billing.clone();
        Ok(core)
    }

    /// The effective configuration as a TOML document, secrets shown as `<redacted>` and unset
    /// settings left out (`agentd config`).
    pub fn effective(&self) -> Result<String, ConfigError> {
        use toml::{Table, Value};
        fn text(value: impl ToString) -> Value {
            Value::String(value.to_string())
        }
        fn secret(table: &mut Table, key: &str, value: Option<&SecretString>) {
            if value.is_some_and(|v| !v.expose_secret().is_empty()) {
                table.insert(key.into(), text("<redacted>"));
            }
        }
        fn optional(table: &mut Table, key: &str, value: Option<&String>) {
            if let Some(value) = value {
                table.insert(key.into(), text(value));
            }
        }
        fn number(value: impl TryInto<i64>) -> Value {
            Value::Integer(value.try_into().unwrap_or(i64::MAX))
        }
        fn seconds(value: Duration) -> Value {
            let seconds = value.as_secs_f64();
            if seconds.fract() == 0.0 { number(value.as_secs()) } else { Value::Float(seconds) }
        }
        let mut root = Table::new();
        root.insert("bind".into(), text(self.bind));
        root.insert("database_url".into(), text(self.database_url()?.redacted()));
        root.insert("data_dir".into(), text(self.data_dir()?.display()));
        secret(&mut root, "secret_key", self.secret_key.as_ref());

        let mut auth = Table::new();
        secret(&mut auth, "jwt_secret", self.jwt_secret.as_ref());
        if let Some(ttl) = self.token_ttl {
            auth.insert("token_ttl_seconds".into(), seconds(ttl));
        }
        root.insert("auth".into(), Value::Table(auth));

        let mut discord = Table::new();
        discord.insert("api_base".into(), text(&self.discord.api_base));
        optional(&mut discord, "client_id", self.discord.client_id.as_ref());
        secret(&mut discord, "client_secret", self.discord.client_secret.as_ref());
        optional(&mut discord, "redirect_uri", self.discord.redirect_uri.as_ref());
        secret(&mut discord, "bot_token", self.discord.bot_token.as_ref());
        root.insert("discord".into(), Value::Table(discord));

        let mut models = Table::new();
        models.insert("default".into(), text(&self.models.default));
        models.insert("openai_base_url".into(), text(&self.models.openai_base_url));
        secret(&mut models, "openai_api_key", self.models.openai_api_key.as_ref());
        models.insert("anthropic_base_url".into(), text(&self.models.anthropic_base_url));
        secret(&mut models, "anthropic_api_key", self.models.anthropic_api_key.as_ref());
        models.insert("timeout_seconds".into(), seconds(self.models.timeout));
        models.insert("max_tokens".into(), number(self.models.max_tokens));
        root.insert("models".into(), Value::Table(models));

        let mut runtime = Table::new();
        runtime.insert("max_concurrent_calls".into(), number(self.runtime.max_concurrent_calls));
        runtime.insert("lease_seconds".into(), seconds(self.runtime.lease));
        runtime.insert("shutdown_grace_seconds".into(), seconds(self.runtime.shutdown_grace));
        runtime.insert("poll_seconds".into(), seconds(self.runtime.poll));
        root.insert("runtime".into(), Value::Table(runtime));

        let mut billing = Table::new();
        if !self.billing.webhook_secrets.is_empty() {
            let redacted = self.billing.webhook_secrets.iter().map(|_| text("<redacted>"));
            billing.insert("webhook_secrets".into(), Value::Array(redacted.collect()));
        }
        let plans = self.billing.plans.iter().map(|(name, limit)| (name.into(), number(limit)));
        billing.insert("plans".into(), Value::Table(plans.collect()));
        let prices = self.billing.prices.iter().map(|(price, plan)| (price.clone(), text(plan)));
        billing.insert("prices".into(), Value::Table(prices.collect()));
        root.insert("billing".into(), Value::Table(billing));

        let mut http = Table::new();
        http.insert("body_limit_bytes".into(), number(self.http.body_limit_bytes));
        http.insert("request_timeout_seconds".into(), seconds(self.http.request_timeout));
        let origins = self.http.cors_origins.iter().map(text).collect();
        http.insert("cors_origins".into(), Value::Array(origins));
        http.insert("trust_forwarded_for".into(), Value::Boolean(self.http.trust_forwarded_for));
        secret(&mut http, "metrics_token", self.http.metrics_token.as_ref());
        root.insert("http".into(), Value::Table(http));

        let mut limits = Table::new();
        limits.insert("auth_per_minute".into(), number(self.limits.auth_per_minute));
        limits.insert("requests_per_minute".into(), number(self.limits.requests_per_minute));
        root.insert("limits".into(), Value::Table(limits));

        let mut log = Table::new();
        log.insert("filter".into(), text(&self.log.filter));
        log.insert("format".into(), text(if self.log.json { "json" } else { "text" }));
        root.insert("log".into(), Value::Table(log));

        let source = match &self.file {
            Some(path) => format!("# with {}\n", path.display()),
            None => "# no configuration file\n".into(),
        };
        Ok(format!("# agentd's effective configuration\n{source}\n{root}"))
    }
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
    Ok(BillingConfig { plans, prices, webhook_secrets })
}

/// `*`, or a scheme and host without a path: `https://app.example.com[:port]`.
fn is_origin(origin: &str) -> bool {
    let host = origin.strip_prefix("https://").or_else(|| origin.strip_prefix("http://"));
    origin == "*" || host.is_some_and(|host| !host.is_empty() && !host.contains(['/', ' ']))
}

/// The items of a comma-separated list, trimmed, empty ones dropped.
fn list(all: &str) -> Vec<String> {
    all.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

/// Where settings come from, highest first: the environment, then the file. Settings are
/// looked up by environment name; every name asked for is remembered, which is how unknown
/// file keys and variables are found.
struct Sources<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    file: BTreeMap<String, FileValue>,
    asked: RefCell<BTreeSet<String>>,
}

/// A file setting as text, and where it was in the file (for messages).
struct FileValue {
    text: String,
    path: String,
}

impl Sources<'_> {
    fn get(&self, name: &str) -> Option<String> {
        self.asked.borrow_mut().insert(name.to_owned());
        (self.env)(name).or_else(|| self.file.get(name).map(|v| v.text.clone()))
    }

    /// `name` or its shorter `alias` from the environment, else `name` from the file.
    fn get_aliased(&self, name: &str, alias: &str) -> Option<String> {
        self.asked.borrow_mut().extend([name.to_owned(), alias.to_owned()]);
        (self.env)(name)
            .or_else(|| (self.env)(alias))
            .or_else(|| self.file.get(name).map(|v| v.text.clone()))
    }

    /// `name`, else the file named by `name_FILE` (trailing newline dropped); the environment
    /// (either form) wins over the configuration file (either form).
    fn secret(&self, name: &str) -> Result<Option<SecretString>, ConfigError> {
        let file_var = format!("{name}_FILE");
        self.asked.borrow_mut().extend([name.to_owned(), file_var.clone()]);
        let from_file = |n: &str| self.file.get(n).map(|v| v.text.clone());
        for layer in [self.env, &from_file as &dyn Fn(&str) -> Option<String>] {
            if let Some(value) = layer(name) {
                return Ok(Some(SecretString::from(value)));
            }
            if let Some(path) = layer(&file_var) {
                let value = std::fs::read_to_string(&path).map_err(|e| {
                    ConfigError(format!("{}: cannot read {path}: {e}", key(&file_var)))
                })?;
                return Ok(Some(SecretString::from(
                    value.trim_end_matches(['\r', '\n']).to_owned(),
                )));
            }
        }
        Ok(None)
    }

    /// A number of seconds (fractions allowed); zero only when `zero_ok`.
    fn seconds(&self, name: &str, zero_ok: bool) -> Result<Option<Duration>, ConfigError> {
        self.get(name)
            .map(|raw| {
                let parsed = raw.trim().parse::<f64>().ok();
                match parsed.and_then(|s| Duration::try_from_secs_f64(s).ok()) {
                    Some(value) if zero_ok || !value.is_zero() => Ok(value),
                    _ if zero_ok => Err(ConfigError(format!(
                        "{}: '{raw}' is not a number of seconds",
                        key(name)
                    ))),
                    _ => {
                        Err(ConfigError(format!("{}: '{raw}' is not a positive number", key(name))))
                    }
                }
            })
            .transpose()
    }

    /// A whole number, positive unless `zero_ok`.
    fn count<T: std::str::FromStr + Default + PartialEq>(
        &self,
        name: &str,
        zero_ok: bool,
    ) -> Result<Option<T>, ConfigError> {
        self.get(name)
            .map(|raw| match raw.trim().parse::<T>() {
                Ok(value) if zero_ok || value != T::default() => Ok(value),
                _ if zero_ok => {
                    Err(ConfigError(format!("{}: '{raw}' is not a whole number", key(name))))
                }
                _ => Err(ConfigError(format!(
                    "{}: '{raw}' is not a positive whole number",
                    key(name)
                ))),
            })
            .transpose()
    }

    fn flag(&self, name: &str) -> Result<Option<bool>, ConfigError> {
        self.get(name)
            .map(|raw| match raw.trim() {
                "true" | "1" | "yes" => Ok(true),
                "false" | "0" | "no" => Ok(false),
                _ => Err(ConfigError(format!("{}: '{raw}' is neither true nor false", key(name)))),
            })
            .transpose()
    }
}

/// `AGENTD_MODELS__TIMEOUT_SECONDS` → `models.timeout_seconds`, as messages name settings.
fn key(name: &str) -> String {
    name.trim_start_matches("AGENTD_").replace("__", ".").to_lowercase()
}

/// The file's settings under their environment names.
fn read_file(path: &Path) -> Result<BTreeMap<String, FileValue>, ConfigError> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("cannot read {shown}: {e}")))?;
    let table: toml::Table =
        text.parse().map_err(|e| ConfigError(format!("{shown} is not valid TOML: {e}")))?;
    let mut settings = BTreeMap::new();
    flatten(&table, "AGENTD", "", &mut settings)
        .map_err(|e| ConfigError(format!("{shown}: {e}")))?;
    Ok(settings)
}

fn flatten(
    table: &toml::Table,
    name: &str,
    path: &str,
    out: &mut BTreeMap<String, FileValue>,
) -> Result<(), String> {
    for (key, value) in table {
        let separator = if path.is_empty() { "_" } else { "__" };
        let name = format!("{name}{separator}{}", key.to_uppercase());
        let path = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
        let text = match value {
            toml::Value::Table(map) if MAPS.contains(&name.as_str()) => map
                .iter()
                .map(|(k, v)| scalar(v, &path).map(|v| format!("{k}={v}")))
                .collect::<Result<Vec<_>, _>>()?
                .join(","),
            toml::Value::Table(section) => {
                flatten(section, &name, &path, out)?;
                continue;
            }
            toml::Value::Array(items) => {
                items.iter().map(|v| scalar(v, &path)).collect::<Result<Vec<_>, _>>()?.join(",")
            }
            other => scalar(other, &path)?,
        };
        out.insert(name, FileValue { text, path });
    }
    Ok(())
}

fn scalar(value: &toml::Value, path: &str) -> Result<String, String> {
    match value {
        toml::Value::String(text) => Ok(text.clone()),
        toml::Value::Integer(n) => Ok(n.to_string()),
        toml::Value::Float(x) => Ok(x.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        _ => Err(format!("'{path}' holds a value of the wrong shape")),
    }
}

/// Edit distance, for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb)).min(above + 1).min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use secrecy::ExposeSecret;

    use super::*;

    fn load(flags: Flags, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: HashMap<String, String> =
            vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::load_with_default_file(&flags, &|name| vars.get(name).cloned(), None)
    }

    #[test]
    fn defaults_apply_when_nothing_is_set() {
        let config = load(Flags::default(), &[]).unwrap();
        assert_eq!(config.bind.to_string(), DEFAULT_BIND);
        assert!(
            config.database_url.is_none()
                && config.jwt_secret.is_none()
                && config.token_ttl.is_none()
        );
    }

    #[test]
    fn environment_overrides_defaults_and_flags_override_environment() {
        let vars = [("AGENTD_BIND", "0.0.0.0:9000"), ("AGENTD_DATA_DIR", "/env/dir")];
        let config = load(Flags::default(), &vars).unwrap();
        assert_eq!(config.bind.to_string(), "0.0.0.0:9000");
        assert_eq!(config.data_dir.unwrap(), PathBuf::from("/env/dir"));

        let flags = Flags {
            bind: Some("127.0.0.1:7000".into()),
            data_dir: Some("/flag/dir".into()),
            ..Flags::default()
        };
        let config = load(flags, &vars).unwrap();
        assert_eq!(config.bind.to_string(), "127.0.0.1:7000");
        assert_eq!(config.data_dir.unwrap(), PathBuf::from("/flag/dir"));
    }

    #[test]
    fn the_database_defaults_to_a_file_in_the_data_dir() {
        let config =
            load(Flags { data_dir: Some("/data".into()), ..Flags::default() }, &[]).unwrap();
        assert_eq!(
            format!("{:?}", config.database_url().unwrap()),
            "DatabaseUrl(\"sqlite:///data/agentd.db\")"
        );
    }

    #[test]
    fn secrets_come_from_a_variable_or_a_file() {
        let dir = std::env::temp_dir().join(format!("agentd-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("jwt");
        std::fs::write(&file, "from-file\n").unwrap();
        let path = file.to_string_lossy().into_owned();
        let config = load(Flags::default(), &[("AGENTD_AUTH__JWT_SECRET_FILE", &path)]).unwrap();
        assert_eq!(config.jwt_secret.unwrap().expose_secret(), "from-file");
        let config = load(Flags::default(), &[("AGENTD_AUTH__JWT_SECRET", "direct")]).unwrap();
        assert_eq!(config.jwt_secret.unwrap().expose_secret(), "direct");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn discord_settings_come_from_nested_variables() {
        let vars = [
            ("AGENTD_DISCORD__API_BASE", "http://127.0.0.1:9/api/v10"),
            ("AGENTD_DISCORD__CLIENT_ID", "42"),
            ("AGENTD_DISCORD__BOT_TOKEN", "bot"),
            ("AGENTD_SECRET_KEY", "ab"),
        ];
        let config = load(Flags::default(), &vars).unwrap();
        assert_eq!(config.discord.api_base, "http://127.0.0.1:9/api/v10");
        assert_eq!(config.discord.client_id.as_deref(), Some("42"));
        assert_eq!(config.discord.bot_token.unwrap().expose_secret(), "bot");
        assert!(config.discord.client_secret.is_none());
        assert_eq!(config.secret_key.unwrap().expose_secret(), "ab");
        assert_eq!(
            load(Flags::default(), &[]).unwrap().discord.api_base,
            "https://discord.com/api/v10"
        );
    }

    #[test]
    fn model_settings_fall_back_to_the_providers_own_variables() {
        let config = load(
            Flags::default(),
            &[("OPENAI_API_KEY", "sk-plain"), ("AGENTD_MODELS__DEFAULT", "openai:gpt-4o-mini")],
        )
        .unwrap();
        assert_eq!(config.models.default, "openai:gpt-4o-mini");
        assert_eq!(config.models.openai_api_key.unwrap().expose_secret(), "sk-plain");
        let config = load(
            Flags::default(),
            &[("OPENAI_API_KEY", "sk-plain"), ("AGENTD_MODELS__OPENAI_API_KEY", "sk-ours")],
        )
        .unwrap();
        assert_eq!(config.models.openai_api_key.unwrap().expose_secret(), "sk-ours");
        let config = load(Flags::default(), &[("AGENTD_MODELS__TIMEOUT_SECONDS", "2.5")]).unwrap();
        assert_eq!(config.models.timeout, Duration::from_millis(2500));
        assert_eq!(load(Flags::default(), &[]).unwrap().models.default, "echo");
        assert!(load(Flags::default(), &[("AGENTD_MODELS__TIMEOUT_SECONDS", "0")]).is_err());
    }

    #[test]
    fn runtime_settings_have_contract_names_and_defaults() {
        let defaults = load(Flags::default(), &[]).unwrap().runtime;
        assert_eq!(defaults.max_concurrent_calls, 64);
        assert_eq!(defaults.lease, Duration::from_secs(30));
        assert_eq!(defaults.shutdown_grace, Duration::from_secs(30));
        let config = load(
            Flags::default(),
            &[
                ("AGENTD_RUNTIME__MAX_CONCURRENT_CALLS", "8"),
                ("AGENTD_RUNTIME__LEASE_SECONDS", "2.5"),
                ("AGENTD_RUNTIME__SHUTDOWN_GRACE_SECONDS", "0"),
                ("AGENTD_MODELS__MAX_TOKENS", "256"),
            ],
        )
        .unwrap();
        assert_eq!(config.runtime.max_concurrent_calls, 8);
        assert_eq!(config.runtime.lease, Duration::from_millis(2500));
        assert_eq!(config.runtime.shutdown_grace, Duration::ZERO);
        assert_eq!(config.models.max_tokens, 256);
        for (name, value) in [
            ("AGENTD_RUNTIME__MAX_CONCURRENT_CALLS", "0"),
            ("AGENTD_RUNTIME__MAX_CONCURRENT_CALLS", "lots"),
            ("AGENTD_RUNTIME__LEASE_SECONDS", "0"),
            ("AGENTD_RUNTIME__SHUTDOWN_GRACE_SECONDS", "-1"),
        ] {
            let error = load(Flags::default(), &[(name, value)]).unwrap_err();
            let key = name.trim_start_matches("AGENTD_").replace("__", ".").to_lowercase();
            assert!(error.to_string().contains(&key), "{error}");
        }
    }

    #[test]
    fn billing_settings_parse_plans_prices_and_secrets() {
        let defaults = load(Flags::default(), &[]).unwrap().billing;
        assert_eq!(defaults.plans.limit("pro"), 25);
        assert!(defaults.webhook_secrets.is_empty());
        let config = load(
            Flags::default(),
            &[
                ("AGENTD_BILLING__PLANS", "free=1,pro=9"),
                ("AGENTD_BILLING__PRICES", "price_1Pro=pro, pro_monthly=pro"),
                ("AGENTD_BILLING__WEBHOOK_SECRETS", "whsec_old,whsec_new"),
            ],
        )
        .unwrap()
        .billing;
        assert_eq!(config.plans.limit("pro"), 9);
        assert_eq!(config.prices["pro_monthly"], "pro");
        assert_eq!(config.webhook_secrets.len(), 2);
        let error =
            load(Flags::default(), &[("AGENTD_BILLING__PRICES", "price_1=gold")]).unwrap_err();
        assert!(error.to_string().contains("billing.prices"), "{error}");
        let error = load(Flags::default(), &[("AGENTD_BILLING__PLANS", "pro=3")]).unwrap_err();
        assert!(error.to_string().contains("billing.plans"), "{error}");
    }

    /// A file in a directory of its own, removed with the guard.
    struct File(PathBuf);

    impl File {
        fn new(name: &str, text: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("agentd-config-{}-{name}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            Self(path)
        }

        fn flags(&self) -> Flags {
            Flags { config: Some(self.0.clone()), ..Flags::default() }
        }
    }

    impl Drop for File {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
        }
    }

    const FILE: &str = r#"
        bind = "127.0.0.1:7001"
        data_dir = "/file/dir"
        [runtime]
        lease_seconds = 12
        poll_seconds = 0.5
        [billing]
        plans = { free = 2, pro = 20 }
        prices = { price_1Pro = "pro" }
        webhook_secrets = ["whsec_a", "whsec_b"]
        [http]
        cors_origins = ["https://app.example.com"]
        trust_forwarded_for = true
        [limits]
        auth_per_minute = 0
    "#;

    #[test]
    fn the_file_is_overridden_by_the_environment_and_the_environment_by_flags() {
        let file = File::new("layers.toml", FILE);
        let config = load(file.flags(), &[]).unwrap();
        assert_eq!(config.bind.to_string(), "127.0.0.1:7001");
        assert_eq!(config.runtime.lease, Duration::from_secs(12));
        assert_eq!(config.runtime.poll, Duration::from_millis(500));
        assert_eq!(config.billing.plans.limit("free"), 2);
        assert_eq!(config.billing.prices["price_1Pro"], "pro");
        assert_eq!(config.billing.webhook_secrets.len(), 2);
        assert_eq!(config.http.cors_origins, ["https://app.example.com"]);
        assert!(config.http.trust_forwarded_for);
        assert_eq!(config.limits.auth_per_minute, 0);
        assert_eq!(config.limits.requests_per_minute, LimitsConfig::default().requests_per_minute);
        assert_eq!(config.file.as_deref(), Some(file.0.as_path()));

        let env = [
            ("AGENTD_BIND", "127.0.0.1:7002"),
            ("AGENTD_RUNTIME__LEASE_SECONDS", "13"),
            ("AGENTD_HTTP__CORS_ORIGINS", "https://a.example, https://b.example"),
        ];
        let config = load(file.flags(), &env).unwrap();
        assert_eq!(config.bind.to_string(), "127.0.0.1:7002");
        assert_eq!(config.runtime.lease, Duration::from_secs(13));
        assert_eq!(config.http.cors_origins, ["https://a.example", "https://b.example"]);
        assert_eq!(config.data_dir.as_deref(), Some(Path::new("/file/dir")));

        let flags = Flags { bind: Some("127.0.0.1:7003".into()), ..file.flags() };
        assert_eq!(load(flags, &env).unwrap().bind.to_string(), "127.0.0.1:7003");
        // The file can also be named by AGENTD_CONFIG.
        let path = file.0.display().to_string();
        let config = load(Flags::default(), &[("AGENTD_CONFIG", &path)]).unwrap();
        assert_eq!(config.bind.to_string(), "127.0.0.1:7001");
    }

    #[test]
    fn secrets_in_the_file_lose_to_the_environment_in_either_form() {
        let secret = File::new("jwt", "from-secret-file\n");
        let text = format!("[auth]\njwt_secret_file = '{}'\n", secret.0.display());
        let file = File::new("secrets.toml", &text);
        let config = load(file.flags(), &[]).unwrap();
        assert_eq!(config.jwt_secret.unwrap().expose_secret(), "from-secret-file");
        let config = load(file.flags(), &[("AGENTD_AUTH__JWT_SECRET", "from-env")]).unwrap();
        assert_eq!(config.jwt_secret.unwrap().expose_secret(), "from-env");
    }

    #[test]
    fn a_bad_file_is_refused_with_the_place_named() {
        let missing = Flags { config: Some("/nonexistent/agentd.toml".into()), ..Flags::default() };
        assert!(load(missing, &[]).unwrap_err().to_string().contains("/nonexistent/agentd.toml"));
        for (text, named) in [
            ("[runtime]\nlease_secs = 3\n", "runtime.lease_secs"),
            ("bind = ", "not valid TOML"),
            ("[runtime]\nlease_seconds = 0\n", "runtime.lease_seconds"),
            ("[http]\ncors_origins = [[1]]\n", "http.cors_origins"),
            ("[log]\nformat = 'xml'\n", "log.format"),
            ("[http]\ncors_origins = ['app.example.com']\n", "http.cors_origins"),
            ("[http]\ncors_origins = ['https://app.example.com/path']\n", "http.cors_origins"),
        ] {
            let file = File::new("bad.toml", text);
            let error = load(file.flags(), &[]).unwrap_err().to_string();
            assert!(error.contains(named), "{text:?}: {error}");
        }
    }

    #[test]
    fn unknown_variables_are_reported_with_the_closest_name() {
        let config = load(Flags::default(), &[]).unwrap();
        let names = [
            "AGENTD_RUNTIME__LEASE_SECOND",
            "AGENTD_BIND",
            "AGENTD_LOG",
            "AGENTD_CONFIG",
            "AGENTD_AUTH__JWT_SECRET_FILE",
            "AGENTD_COMPLETELY_UNRELATED",
            "HOME",
        ];
        let unknown = config.unknown_variables(names.map(String::from));
        assert_eq!(
            unknown,
            [
                "AGENTD_RUNTIME__LEASE_SECOND (did you mean AGENTD_RUNTIME__LEASE_SECONDS?)",
                "AGENTD_COMPLETELY_UNRELATED"
            ]
        );
    }

    #[test]
    fn the_effective_configuration_hides_secrets_and_reads_back_the_same() {
        let env = [
            ("AGENTD_AUTH__JWT_SECRET", "super-secret-jwt-value"),
            ("AGENTD_DATABASE_URL", "postgres://agentd:hunter2@db.internal/agentd"),
            ("AGENTD_MODELS__OPENAI_API_KEY", "sk-very-secret"),
        ];
        let file = File::new("effective.toml", FILE);
        let shown = load(file.flags(), &env).unwrap().effective().unwrap();
        for secret in ["super-secret-jwt-value", "hunter2", "sk-very-secret", "whsec_a"] {
            assert!(!shown.contains(secret), "{secret} shown:\n{shown}");
        }
        assert!(shown.contains("jwt_secret = \"<redacted>\""), "{shown}");
        assert!(shown.contains("lease_seconds = 12"), "{shown}");

        let plain = load(file.flags(), &[]).unwrap().effective().unwrap();
        let again = File::new("again.toml", &plain);
        let reread = load(again.flags(), &[]).unwrap().effective().unwrap();
        let body = |text: &str| {
            text.lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>().join("\n")
        };
        assert_eq!(body(&reread), body(&plain), "agentd config's output is a configuration file");
    }

    #[test]
    fn logging_is_configured_and_agentd_log_is_its_shorthand() {
        let file = File::new("log.toml", "[log]\nfilter = 'debug'\nformat = 'json'\n");
        let config = load(file.flags(), &[]).unwrap();
        assert_eq!((config.log.filter.as_str(), config.log.json), ("debug", true));
        let config = load(file.flags(), &[("AGENTD_LOG", "warn")]).unwrap();
        assert_eq!(config.log.filter, "warn", "the environment wins over the file");
        assert_eq!(load(Flags::default(), &[]).unwrap().log, LogConfig::default());
    }

    #[test]
    fn bad_values_are_named() {
        let error =
            load(Flags { bind: Some("nowhere".into()), ..Flags::default() }, &[]).unwrap_err();
        assert!(error.to_string().contains("bind"), "{error}");
        let error = load(Flags::default(), &[("AGENTD_DATABASE_URL", "mysql://x")]).unwrap_err();
        assert!(error.to_string().contains("database_url"), "{error}");
        let error =
            load(Flags::default(), &[("AGENTD_AUTH__TOKEN_TTL_SECONDS", "soon")]).unwrap_err();
        assert!(error.to_string().contains("token_ttl_seconds"), "{error}");
    }
}
