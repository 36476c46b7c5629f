//! `[mcp.servers.<name>]`: the operator's MCP servers, which every user's agents may name.
//!
//! A stdio server is `command` (+ `args`, a list, and `[...env]`, its variables); an HTTP one is
//! `url` (+ `[...headers]`); either may set `timeout_seconds` (30). Environment names are
//! `AGENTD_MCP__SERVERS__<NAME>__COMMAND`, `__ARGS` (a JSON array, or comma-separated),
//! `__ENV__<VAR>`, `__URL`, `__HEADERS__<HEADER>` (`_` in a header's name reads as `-`) and
//! `__TIMEOUT_SECONDS`. A header's value may come from a file instead (`..._FILE`), for
//! secrets; `env` values are passed as written (a variable whose name ends in `_FILE` is the
//! program's own).

use std::collections::BTreeMap;

use agentcore::domain::mcp::{McpServerName, McpUrl};
use agentcore::mcp::{McpConfig, McpServerConfig, McpTransport};
use secrecy::SecretString;

use super::ConfigError;
use super::settings::{insert, seconds};
use super::sources::Sources;

const SERVERS: &str = "AGENTD_MCP__SERVERS__";

pub(super) fn mcp(src: &Sources<'_>) -> Result<McpConfig, ConfigError> {
    let named = src.names_under(SERVERS);
    let names = named.iter().filter_map(|rest| rest.split_once("__").map(|(name, _)| name));
    let mut servers = BTreeMap::new();
    for upper in names.collect::<std::collections::BTreeSet<_>>() {
        let setting = format!("mcp.servers.{}", upper.to_lowercase());
        let name = McpServerName::parse(&upper.to_lowercase())
            .map_err(|e| ConfigError(format!("{setting}: {e}")))?;
        let prefix = format!("{SERVERS}{upper}__");
        let command = src.get(&format!("{prefix}COMMAND"));
        let url = src.get(&format!("{prefix}URL"));
        let args = src.get(&format!("{prefix}ARGS"));
        let env = plain_under(src, &format!("{prefix}ENV__"));
        let headers = secrets_under(src, &format!("{prefix}HEADERS__"), |h| {
            h.replace('_', "-").to_lowercase()
        })?;
        let transport = match (command, url) {
            (Some(command), None) => McpTransport::Stdio {
                command,
                args: args.map(|a| list(&a, &setting)).transpose()?.unwrap_or_default(),
                env,
            },
            (None, Some(url)) => {
                if args.is_some() || !env.is_empty() {
                    return Err(ConfigError(format!(
                        "{setting}: args and env are for stdio servers (command), not url"
                    )));
                }
                McpUrl::parse(&url).map_err(|e| ConfigError(format!("{setting}.url: {e}")))?;
                McpTransport::Http { url, headers }
            }
            (Some(_), Some(_)) => {
                return Err(ConfigError(format!(
                    "{setting}: give either command (a stdio server) or url (an HTTP one), not both"
                )));
            }
            (None, None) => {
                return Err(ConfigError(format!(
                    "{setting}: missing command (a stdio server) or url (an HTTP one)"
                )));
            }
        };
        let timeout = src
            .seconds(&format!("{prefix}TIMEOUT_SECONDS"), false)?
            .unwrap_or(McpServerConfig::DEFAULT_TIMEOUT);
        servers.insert(name, McpServerConfig { transport, timeout });
    }
    Ok(McpConfig { servers })
}

/// The values set under `prefix`, by the rest of their names (a stdio server's variables: a
/// name ending in `_FILE` is passed as it is, as many programs read such paths themselves).
fn plain_under(src: &Sources<'_>, prefix: &str) -> BTreeMap<String, SecretString> {
    let names = src.names_under(prefix);
    let values = names.iter().filter_map(|name| {
        let value = src.get(&format!("{prefix}{name}"))?;
        Some((name.clone(), SecretString::from(value)))
    });
    values.collect()
}

/// The values set under `prefix` (each name once, with or without `_FILE`), keyed by `key` of
/// the rest of the name.
fn secrets_under(
    src: &Sources<'_>,
    prefix: &str,
    key: impl Fn(&str) -> String,
) -> Result<BTreeMap<String, SecretString>, ConfigError> {
    let names = src.names_under(prefix);
    let bases: std::collections::BTreeSet<&str> =
        names.iter().map(|n| n.strip_suffix("_FILE").unwrap_or(n)).collect();
    let mut values = BTreeMap::new();
    for base in bases {
        if let Some(value) = src.secret(&format!("{prefix}{base}"))? {
            values.insert(key(base), value);
        }
    }
    Ok(values)
}

/// A JSON array of strings, or a comma-separated list (as a TOML array is flattened).
fn list(raw: &str, setting: &str) -> Result<Vec<String>, ConfigError> {
    if raw.trim_start().starts_with('[') {
        return serde_json::from_str(raw).map_err(|_| {
            ConfigError(format!("{setting}.args: '{raw}' is not a JSON array of strings"))
        });
    }
    Ok(raw.split(',').map(str::to_owned).collect())
}

/// `[mcp.servers.<name>]` for `agentd config`: secrets redacted.
pub(super) fn show(mcp: &McpConfig, root: &mut toml::Table) {
    use toml::Value;
    let redacted = |map: &BTreeMap<String, SecretString>| {
        Value::Table(map.keys().map(|k| (k.clone(), Value::String("<redacted>".into()))).collect())
    };
    let mut servers = toml::Table::new();
    for (name, server) in &mcp.servers {
        let mut table = toml::Table::new();
        match &server.transport {
            McpTransport::Stdio { command, args, env } => {
                table.insert("command".into(), Value::String(command.clone()));
                let args = args.iter().map(|a| Value::String(a.clone())).collect();
                table.insert("args".into(), Value::Array(args));
                table.insert("env".into(), redacted(env));
            }
            McpTransport::Http { url, headers } => {
                table.insert("url".into(), Value::String(url.clone()));
                table.insert("headers".into(), redacted(headers));
            }
        }
        table.insert("timeout_seconds".into(), seconds(server.timeout));
        servers.insert(name.to_string(), Value::Table(table));
    }
    insert(root, "mcp.servers", Value::Table(servers));
}
