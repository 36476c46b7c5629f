//! The server's configuration, in one place: built-in defaults, then `AGENTD_*` environment
//! variables, then command-line flags. Names follow contract section 11.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use agentcore::domain::billing::Plans;
use agentcore::models::ModelsConfig;
use agentcore::store::DatabaseUrl;
use agentcore::{BillingConfig, CoreConfig, DiscordConfig, RuntimeConfig};

pub const DEFAULT_BIND: &str = "127.0.0.1:8080";

/// Values given on the command line; `None` defers to the environment and defaults.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Flags {
    /// Address to listen on [env: AGENTD_BIND] [default: 127.0.0.1:8080]
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// sqlite://PATH or postgres://... [env: AGENTD_DATABASE_URL] [default: agentd.db in the data directory]
    #[arg(long, value_name = "URL")]
    pub database_url: Option<String>,
    /// Where the embedded database lives [env: AGENTD_DATA_DIR] [default: the platform data directory]
    #[arg(long, value_name = "DIR")]
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
}

#[derive(Debug, thiserror::Error)]
#[error("configuration: {0}")]
pub struct ConfigError(String);

impl Config {
    /// Layers `env` (a variable look-up, `std::env::var` in production) and `flags` over the
    /// defaults.
    pub fn load(flags: &Flags, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let env = |name: &str| env(name).filter(|value| !value.is_empty());
        let bind_text = flags
            .bind
            .clone()
            .or_else(|| env("AGENTD_BIND"))
            .unwrap_or_else(|| DEFAULT_BIND.into());
        let bind = bind_text.parse().map_err(|_| {
            ConfigError(format!("bind: '{bind_text}' is not an address such as 127.0.0.1:8080"))
        })?;
        let database_url =
            flags.database_url.clone().or_else(|| env("AGENTD_DATABASE_URL")).map(DatabaseUrl::new);
        if let Some(url) = &database_url {
            url.backend().map_err(|e| ConfigError(e.to_string()))?;
        }
        let data_dir = flags.data_dir.clone().or_else(|| env("AGENTD_DATA_DIR").map(PathBuf::from));
        let jwt_secret = secret(&env, "AGENTD_AUTH__JWT_SECRET")?;
        let token_ttl = env("AGENTD_AUTH__TOKEN_TTL_SECONDS")
            .map(|raw| match raw.parse::<u64>() {
                Ok(seconds) if seconds > 0 => Ok(Duration::from_secs(seconds)),
                _ => Err(ConfigError(format!(
                    "auth.token_ttl_seconds: '{raw}' is not a positive whole number"
                ))),
            })
            .transpose()?;
        let secret_key = secret(&env, "AGENTD_SECRET_KEY")?;
        let defaults = DiscordConfig::default();
        let discord = DiscordConfig {
            api_base: env("AGENTD_DISCORD__API_BASE").unwrap_or(defaults.api_base),
            client_id: env("AGENTD_DISCORD__CLIENT_ID"),
            client_secret: secret(&env, "AGENTD_DISCORD__CLIENT_SECRET")?,
            redirect_uri: env("AGENTD_DISCORD__REDIRECT_URI"),
            bot_token: secret(&env, "AGENTD_DISCORD__BOT_TOKEN")?,
            timeout: defaults.timeout,
        };
        if !(discord.api_base.starts_with("https://") || discord.api_base.starts_with("http://")) {
            return Err(ConfigError(format!(
                "discord.api_base: '{}' is not an http(s) URL",
                discord.api_base
            )));
        }
        let model_defaults = ModelsConfig::default();
        let timeout =
            seconds(&env, "AGENTD_MODELS__TIMEOUT_SECONDS", "models.timeout_seconds", false)?;
        let max_tokens = count(&env, "AGENTD_MODELS__MAX_TOKENS", "models.max_tokens")?;
        let models = ModelsConfig {
            default: env("AGENTD_MODELS__DEFAULT").unwrap_or(model_defaults.default),
            openai_base_url: env("AGENTD_MODELS__OPENAI_BASE_URL")
                .unwrap_or(model_defaults.openai_base_url),
            openai_api_key: match secret(&env, "AGENTD_MODELS__OPENAI_API_KEY")? {
                Some(key) => Some(key),
                None => env("OPENAI_API_KEY").map(SecretString::from),
            },
            anthropic_base_url: env("AGENTD_MODELS__ANTHROPIC_BASE_URL")
                .unwrap_or(model_defaults.anthropic_base_url),
            anthropic_api_key: match secret(&env, "AGENTD_MODELS__ANTHROPIC_API_KEY")? {
                Some(key) => Some(key),
                None => env("ANTHROPIC_API_KEY").map(SecretString::from),
            },
            timeout: timeout.unwrap_or(model_defaults.timeout),
            max_tokens: max_tokens.unwrap_or(model_defaults.max_tokens),
        };
        let runtime_defaults = RuntimeConfig::default();
        let lease = seconds(&env, "AGENTD_RUNTIME__LEASE_SECONDS", "runtime.lease_seconds", false)?
            .unwrap_or(runtime_defaults.lease);
        let runtime = RuntimeConfig {
            max_concurrent_calls: count(
                &env,
                "AGENTD_RUNTIME__MAX_CONCURRENT_CALLS",
                "runtime.max_concurrent_calls",
            )?
            .unwrap_or(runtime_defaults.max_concurrent_calls),
            lease,
            shutdown_grace: seconds(
                &env,
                "AGENTD_RUNTIME__SHUTDOWN_GRACE_SECONDS",
                "runtime.shutdown_grace_seconds",
                true,
            )?
            .unwrap_or(runtime_defaults.shutdown_grace),
            poll: seconds(&env, "AGENTD_RUNTIME__POLL_SECONDS", "runtime.poll_seconds", false)?
                .unwrap_or(runtime_defaults.poll),
            ..runtime_defaults
        };
        let plans = match env("AGENTD_BILLING__PLANS") {
            Some(raw) => {
                Plans::parse(&raw).map_err(|e| ConfigError(format!("billing.plans: {e}")))?
            }
            None => Plans::default(),
        };
        let mut prices = std::collections::BTreeMap::new();
        for pair in env("AGENTD_BILLING__PRICES").unwrap_or_default().split(',') {
            let pair = pair.trim();
            if pair.is_empty() {
                continue;
            }
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
        let webhook_secrets = secret(&env, "AGENTD_BILLING__WEBHOOK_SECRETS")?
            .map(|all| {
                all.expose_secret()
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| SecretString::from(s.to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        let billing = BillingConfig { plans, prices, webhook_secrets };
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
        })
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
}

/// A number of seconds from `name` (fractions allowed); zero only when `zero_ok`.
fn seconds(
    env: &dyn Fn(&str) -> Option<String>,
    name: &str,
    key: &str,
    zero_ok: bool,
) -> Result<Option<Duration>, ConfigError> {
    env(name)
        .map(|raw| {
            match raw.trim().parse::<f64>().ok().and_then(|s| Duration::try_from_secs_f64(s).ok()) {
                Some(value) if zero_ok || !value.is_zero() => Ok(value),
                _ if zero_ok => {
                    Err(ConfigError(format!("{key}: '{raw}' is not a number of seconds")))
                }
                _ => Err(ConfigError(format!("{key}: '{raw}' is not a positive number"))),
            }
        })
        .transpose()
}

/// A positive whole number from `name`.
fn count<T: std::str::FromStr + Default + PartialEq>(
    env: &dyn Fn(&str) -> Option<String>,
    name: &str,
    key: &str,
) -> Result<Option<T>, ConfigError> {
    env(name)
        .map(|raw| match raw.trim().parse::<T>() {
            Ok(value) if value != T::default() => Ok(value),
            _ => Err(ConfigError(format!("{key}: '{raw}' is not a positive whole number"))),
        })
        .transpose()
}

/// A secret from `NAME`, or from the file named by `NAME_FILE` (trailing newline dropped).
fn secret(
    env: &dyn Fn(&str) -> Option<String>,
    name: &str,
) -> Result<Option<SecretString>, ConfigError> {
    if let Some(value) = env(name) {
        return Ok(Some(SecretString::from(value)));
    }
    let file_var = format!("{name}_FILE");
    let Some(path) = env(&file_var) else { return Ok(None) };
    let value = std::fs::read_to_string(&path)
        .map_err(|e| ConfigError(format!("{file_var}: cannot read {path}: {e}")))?;
    Ok(Some(SecretString::from(value.trim_end_matches(['\r', '\n']).to_owned())))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use secrecy::ExposeSecret;

    use super::*;

    fn load(flags: Flags, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: HashMap<String, String> =
            vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::load(&flags, &|name| vars.get(name).cloned())
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
