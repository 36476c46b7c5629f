//! Where settings come from: the environment and the file, flattened into environment names,
//! with every name asked for remembered (which is how unknown names are found).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use secrecy::SecretString;

use super::{ConfigError, MAPS};

/// Where settings come from, highest first: the environment, then the file. Settings are
/// looked up by environment name; every name asked for is remembered, which is how unknown
/// file keys and variables are found.
pub(super) struct Sources<'a> {
    /// The environment's variables; empty values count as unset.
    pub(super) env: &'a Environment,
    pub(super) file: BTreeMap<String, FileValue>,
    pub(super) asked: RefCell<BTreeSet<String>>,
}

/// A file setting as text, and where it was in the file (for messages).
pub(super) struct FileValue {
    text: String,
    pub(super) path: String,
}

/// The process's environment, or the one a test makes up.
pub type Environment = BTreeMap<String, String>;

/// This process's variables; one that is not UTF-8 configures nothing here.
pub fn process_environment() -> Environment {
    std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .collect()
}

impl Sources<'_> {
    fn env(&self, name: &str) -> Option<String> {
        self.env.get(name).filter(|value| !value.is_empty()).cloned()
    }

    pub(super) fn get(&self, name: &str) -> Option<String> {
        self.asked.borrow_mut().insert(name.to_owned());
        self.env(name).or_else(|| self.file.get(name).map(|v| v.text.clone()))
    }

    /// What follows `prefix` in the names set in either layer, for settings whose keys are
    /// names the operator chooses (`AGENTD_MODELS__PROVIDERS__<NAME>__...`).
    pub(super) fn names_under(&self, prefix: &str) -> BTreeSet<String> {
        let env = self.env.iter().filter(|(_, value)| !value.is_empty()).map(|(name, _)| name);
        env.chain(self.file.keys())
            .filter_map(|name| name.strip_prefix(prefix).map(str::to_owned))
            .collect()
    }

    /// `name` or its shorter `alias` from the environment, else `name` from the file.
    pub(super) fn get_aliased(&self, name: &str, alias: &str) -> Option<String> {
        self.asked.borrow_mut().extend([name.to_owned(), alias.to_owned()]);
        self.env(name)
            .or_else(|| self.env(alias))
            .or_else(|| self.file.get(name).map(|v| v.text.clone()))
    }

    /// `name`, else the file named by `name_FILE` (trailing newline dropped); the environment
    /// (either form) wins over the configuration file (either form).
    pub(super) fn secret(&self, name: &str) -> Result<Option<SecretString>, ConfigError> {
        let file_var = format!("{name}_FILE");
        self.asked.borrow_mut().extend([name.to_owned(), file_var.clone()]);
        let from_env = |n: &str| self.env(n);
        let from_file = |n: &str| self.file.get(n).map(|v| v.text.clone());
        for layer in [&from_env as &dyn Fn(&str) -> Option<String>, &from_file] {
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
    pub(super) fn seconds(
        &self,
        name: &str,
        zero_ok: bool,
    ) -> Result<Option<Duration>, ConfigError> {
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
    pub(super) fn count<T: std::str::FromStr + Default + PartialEq>(
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

    pub(super) fn flag(&self, name: &str) -> Result<Option<bool>, ConfigError> {
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
pub(super) fn key(name: &str) -> String {
    name.trim_start_matches("AGENTD_").replace("__", ".").to_lowercase()
}

/// The file's settings under their environment names.
pub(super) fn read_file(path: &Path) -> Result<BTreeMap<String, FileValue>, ConfigError> {
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
                .map(|(k, v)| map_value(v, &path).map(|v| format!("{k}={v}")))
                .collect::<Result<Vec<_>, _>>()?
                .join(","),
            toml::Value::Table(section) => {
                flatten(section, &name, &path, out)?;
                continue;
            }
            // A stdio server's arguments may hold commas: they keep their bounds as JSON.
            toml::Value::Array(items) if is_argument_list(&name) => {
                let items =
                    items.iter().map(|v| scalar(v, &path)).collect::<Result<Vec<_>, _>>()?;
                serde_json::to_string(&items).map_err(|e| e.to_string())?
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

/// A map's value: a scalar, or a list (a fallback chain) with its items joined by `|`.
fn map_value(value: &toml::Value, path: &str) -> Result<String, String> {
    match value {
        toml::Value::Array(items) => {
            Ok(items.iter().map(|v| scalar(v, path)).collect::<Result<Vec<_>, _>>()?.join("|"))
        }
        other => scalar(other, path),
    }
}

/// `AGENTD_MCP__SERVERS__<NAME>__ARGS`.
fn is_argument_list(name: &str) -> bool {
    name.starts_with("AGENTD_MCP__SERVERS__") && name.ends_with("__ARGS")
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
pub(super) fn distance(a: &str, b: &str) -> usize {
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
