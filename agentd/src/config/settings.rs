//! Every plain setting, stated once: its dotted key, its kind, and the field it fills. Reading
//! the layers and writing the effective configuration both come from [`settings!`]; the
//! environment name is derived from the key (`runtime.lease_seconds` →
//! `AGENTD_RUNTIME__LEASE_SECONDS`). Defaults are the `Default` of each section's struct.
//! Settings with rules of their own (the flags' three, the log format, billing, models) are
//! read in `mod.rs` and `models.rs`.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use toml::Value;

use super::sources::Sources;
use super::{Config, ConfigError};

/// `runtime.lease_seconds` → `AGENTD_RUNTIME__LEASE_SECONDS`.
pub(super) fn env_name(key: &str) -> String {
    format!("AGENTD_{}", key.replace('.', "__").to_uppercase())
}

macro_rules! settings {
    ($( $key:literal : $kind:ty => $($field:ident).+ ;)*) => {
        /// Fills `config` from the layers, leaving the defaults where nothing is set.
        pub(super) fn read(config: &mut Config, src: &Sources<'_>) -> Result<(), ConfigError> {
            $(
                if let Some(value) = <$kind>::read(src, &env_name($key))? {
                    Slot::put(&mut config.$($field).+, value);
                }
            )*
            Ok(())
        }

        /// Writes every setting that has a value into `root`, by its key.
        pub(super) fn show(config: &Config, root: &mut toml::Table) {
            $(
                if let Some(value) = Slot::get(&config.$($field).+) {
                    if let Some(shown) = <$kind>::show(value) {
                        insert(root, $key, shown);
                    }
                }
            )*
        }
    };
}

settings! {
    "secret_key": Secret => secret_key;
    "auth.jwt_secret": Secret => jwt_secret;
    "auth.token_ttl_seconds": Seconds => token_ttl;
    "discord.api_base": Text => discord.api_base;
    "discord.client_id": Text => discord.client_id;
    "discord.client_secret": Secret => discord.client_secret;
    "discord.redirect_uri": Text => discord.redirect_uri;
    "discord.bot_token": Secret => discord.bot_token;
    "discord.public_key": Text => discord.public_key;
    "runtime.max_concurrent_calls": Count => runtime.max_concurrent_calls;
    "runtime.lease_seconds": Seconds => runtime.lease;
    "runtime.shutdown_grace_seconds": SecondsOrZero => runtime.shutdown_grace;
    "runtime.poll_seconds": Seconds => runtime.poll;
    "runtime.max_attempts": Count => runtime.max_attempts;
    "runtime.task_timeout_seconds": Seconds => runtime.task_timeout;
    "runtime.approval_timeout_seconds": Seconds => runtime.approval_timeout;
    "runtime.trace_content": Flag => runtime.trace_content;
    "schedules.poll_seconds": Seconds => schedules.poll;
    "schedules.missed_after_seconds": Seconds => schedules.missed_after;
    "schedules.seconds_field": Flag => schedules.seconds_field;
    "retention.finished_days": Count => retention.finished_days;
    "retention.audit_days": Count => retention.audit_days;
    "tools.http.allow_private": Flag => tools.allow_private;
    "tools.http.allow_addresses": List => tools.allow_addresses;
    "http.body_limit_bytes": Count => http.body_limit_bytes;
    "http.request_timeout_seconds": Seconds => http.request_timeout;
    "http.cors_origins": List => http.cors_origins;
    "http.trust_forwarded_for": Flag => http.trust_forwarded_for;
    "http.metrics_token": Secret => http.metrics_token;
    "http.ui": Flag => http.ui;
    "http.secure_cookies": Flag => http.secure_cookies;
    "http.access_log": Flag => http.access_log;
    "http.read_cache": Flag => http.read_cache;
    "limits.auth_per_minute": CountOrZero => limits.auth_per_minute;
    "limits.requests_per_minute": CountOrZero => limits.requests_per_minute;
    "limits.sign_ins_per_account_per_minute": CountOrZero => limits.sign_ins_per_account_per_minute;
    "quotas.agents_per_user": CountOrZero => quotas.agents_per_user;
    "quotas.schedules_per_agent": CountOrZero => quotas.schedules_per_agent;
    "quotas.schedules_per_user": CountOrZero => quotas.schedules_per_user;
    "quotas.min_enqueue_period_seconds": SecondsOrZero => quotas.min_enqueue_period;
    "quotas.queued_tasks_per_agent": CountOrZero => quotas.queued_tasks_per_agent;
    "quotas.queued_tasks_per_user": CountOrZero => quotas.queued_tasks_per_user;
    "quotas.mcp_servers_per_user": CountOrZero => quotas.mcp_servers_per_user;
    "quotas.streams_per_user": CountOrZero => quotas.streams_per_user;
    "webhooks.attempt_timeout_seconds": Seconds => webhooks.attempt_timeout;
    "webhooks.retry_schedule_seconds": SecondsList => webhooks.retry_schedule;
    "webhooks.disable_after_failures": CountOrZero => webhooks.disable_after;
    "webhooks.max_in_flight": Count => webhooks.max_in_flight;
    "webhooks.poll_seconds": Seconds => webhooks.poll;
}

/// Puts `value` under a dotted `key`, creating the tables on the way.
pub(super) fn insert(root: &mut toml::Table, key: &str, value: Value) {
    let mut table = root;
    let mut parts = key.split('.').peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            table.insert(part.to_owned(), value);
            return;
        }
        let next = table.entry(part).or_insert_with(|| Value::Table(toml::Table::new()));
        let Value::Table(next) = next else { return };
        table = next;
    }
}

/// A field a setting fills: a value with a default, or an optional one.
pub(super) trait Slot<V> {
    fn put(&mut self, value: V);
    fn get(&self) -> Option<&V>;
}

macro_rules! slots {
    ($($t:ty),*) => {$(
        impl Slot<$t> for $t {
            fn put(&mut self, value: $t) {
                *self = value;
            }
            fn get(&self) -> Option<&$t> {
                Some(self)
            }
        }
        impl Slot<$t> for Option<$t> {
            fn put(&mut self, value: $t) {
                *self = Some(value);
            }
            fn get(&self) -> Option<&$t> {
                self.as_ref()
            }
        }
    )*};
}
slots!(String, SecretString, Duration, bool, u32, usize, Vec<String>, Vec<Duration>);

/// Text as given.
pub(super) struct Text;
/// A secret: shown as `<redacted>`, also read from the file `<NAME>_FILE` names.
pub(super) struct Secret;
/// A number of seconds, fractions allowed: positive, or also zero when `ZERO_OK`.
pub(super) struct SecondsOf<const ZERO_OK: bool>;
pub(super) type Seconds = SecondsOf<false>;
pub(super) type SecondsOrZero = SecondsOf<true>;
/// A whole number: positive, or also zero when `ZERO_OK` (zero turns a limit off).
pub(super) struct CountOf<const ZERO_OK: bool>;
pub(super) type Count = CountOf<false>;
pub(super) type CountOrZero = CountOf<true>;
/// `true`/`false` (or `1`/`0`, `yes`/`no`).
pub(super) struct Flag;
/// A comma-separated list in the environment, an array in the file.
pub(super) struct List;
/// A list of 1 to 20 positive numbers of seconds (fractions allowed), as [`List`].
pub(super) struct SecondsList;

impl Text {
    fn read(src: &Sources<'_>, name: &str) -> Result<Option<String>, ConfigError> {
        Ok(src.get(name))
    }
    fn show(value: &str) -> Option<Value> {
        Some(Value::String(value.to_owned()))
    }
}

impl Secret {
    fn read(src: &Sources<'_>, name: &str) -> Result<Option<SecretString>, ConfigError> {
        src.secret(name)
    }
    fn show(value: &SecretString) -> Option<Value> {
        (!value.expose_secret().is_empty()).then(|| Value::String("<redacted>".into()))
    }
}

impl<const ZERO_OK: bool> SecondsOf<ZERO_OK> {
    fn read(src: &Sources<'_>, name: &str) -> Result<Option<Duration>, ConfigError> {
        src.seconds(name, ZERO_OK)
    }
    fn show(value: &Duration) -> Option<Value> {
        Some(seconds(*value))
    }
}

impl<const ZERO_OK: bool> CountOf<ZERO_OK> {
    fn read<T>(src: &Sources<'_>, name: &str) -> Result<Option<T>, ConfigError>
    where
        T: std::str::FromStr + Default + PartialEq,
    {
        src.count(name, ZERO_OK)
    }
    fn show<T: Copy + TryInto<i64>>(value: &T) -> Option<Value> {
        Some(number(*value))
    }
}

impl Flag {
    fn read(src: &Sources<'_>, name: &str) -> Result<Option<bool>, ConfigError> {
        src.flag(name)
    }
    fn show(value: &bool) -> Option<Value> {
        Some(Value::Boolean(*value))
    }
}

impl List {
    fn read(src: &Sources<'_>, name: &str) -> Result<Option<Vec<String>>, ConfigError> {
        Ok(src.get(name).map(|all| list(&all)))
    }
    fn show(value: &[String]) -> Option<Value> {
        Some(Value::Array(value.iter().cloned().map(Value::String).collect()))
    }
}

impl SecondsList {
    const MAX: usize = 20;

    fn read(src: &Sources<'_>, name: &str) -> Result<Option<Vec<Duration>>, ConfigError> {
        let Some(all) = src.get(name) else { return Ok(None) };
        let items = list(&all);
        let bad = || {
            ConfigError(format!(
                "{name}: '{all}' is not a list of 1 to {} positive numbers of seconds",
                Self::MAX
            ))
        };
        if items.is_empty() || items.len() > Self::MAX {
            return Err(bad());
        }
        items
            .iter()
            .map(|item| match item.parse::<f64>() {
                Ok(s) if s > 0.0 && s.is_finite() => Ok(Duration::from_secs_f64(s)),
                _ => Err(bad()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
    fn show(value: &[Duration]) -> Option<Value> {
        Some(Value::Array(value.iter().map(|d| seconds(*d)).collect()))
    }
}

/// A whole number for TOML.
pub(super) fn number(value: impl TryInto<i64>) -> Value {
    Value::Integer(value.try_into().unwrap_or(i64::MAX))
}

/// Whole seconds as an integer, else a float, as the file would say it.
pub(super) fn seconds(value: Duration) -> Value {
    let seconds = value.as_secs_f64();
    if seconds.fract() == 0.0 { number(value.as_secs()) } else { Value::Float(seconds) }
}

/// The items of a comma-separated list, trimmed, empty ones dropped.
pub(super) fn list(all: &str) -> Vec<String> {
    all.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}
