//! Model Context Protocol servers as agents see them: their names, an agent's choice of them,
//! how their tools are named in the loop (`<server>__<tool>`), and the servers users add.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// An MCP server's name, the operator's or a user's: 1 to 32 lowercase letters, digits and
/// `-`, starting with a letter. No `_`, so the first `__` of a tool's name ends the server's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(transparent)]
pub struct McpServerName(String);

impl McpServerName {
    pub const MAX_CHARS: usize = 32;

    pub fn parse(value: &str) -> Result<Self, String> {
        let shaped = value.len() <= Self::MAX_CHARS
            && value.starts_with(|c: char| c.is_ascii_lowercase())
            && value.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if shaped {
            Ok(Self(value.to_owned()))
        } else {
            Err(format!(
                "'{value}' is not a server name: 1 to 32 lowercase letters, digits and '-', \
                 starting with a letter"
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for McpServerName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(&self.0)
    }
}

/// The MCP servers an agent may use: valid names, each once, in the order given. Whether each
/// exists (the operator's, or one of the owner's) is checked by the facade.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpServerSet(Vec<McpServerName>);

impl McpServerSet {
    pub const MAX: usize = 16;

    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        let mut servers: Vec<McpServerName> = Vec::new();
        for name in names {
            let name = McpServerName::parse(name.as_ref())?;
            if !servers.contains(&name) {
                servers.push(name);
            }
        }
        if servers.len() > Self::MAX {
            return Err(format!("at most {} servers", Self::MAX));
        }
        Ok(Self(servers))
    }

    pub fn servers(&self) -> &[McpServerName] {
        &self.0
    }

    /// As stored: a JSON array of names.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_else(|_| "[]".into())
    }

    /// Reads the stored form; a name that no longer parses is dropped.
    pub fn from_json(stored: &str) -> Self {
        let names: Vec<String> = serde_json::from_str(stored).unwrap_or_default();
        Self(names.iter().filter_map(|n| McpServerName::parse(n).ok()).collect())
    }
}

/// The longest tool name the model providers accept.
pub const TOOL_NAME_MAX: usize = 64;

/// `<server>__<tool>`, the name the model calls a server's tool by; `None` when the providers
/// would refuse it (longer than 64 characters, or characters other than letters, digits, `_`
/// and `-`): such a tool is not offered.
pub fn qualified_tool(server: &McpServerName, tool: &str) -> Option<String> {
    let name = format!("{}__{tool}", server.as_str());
    let valid = !tool.is_empty()
        && name.len() <= TOOL_NAME_MAX
        && tool.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    valid.then_some(name)
}

/// The server and tool of a qualified name; `None` for a built-in tool's name.
pub fn split_tool(name: &str) -> Option<(&str, &str)> {
    name.split_once("__").filter(|(server, tool)| !server.is_empty() && !tool.is_empty())
}

/// Who configured a server: the operator (any transport, every user's agents may use it) or
/// one user (HTTP only, that user's agents).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum McpOrigin {
    Operator,
    User,
}

impl McpOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            McpOrigin::Operator => "operator",
            McpOrigin::User => "user",
        }
    }
}

/// A user's MCP server as the API shows it: never its token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct McpServer {
    pub name: McpServerName,
    /// The streamable HTTP endpoint.
    pub url: String,
    /// Whether a bearer token is stored (it is never returned).
    pub has_token: bool,
    pub created_at: DateTime<Utc>,
}

/// What adding a server needs, already validated (the URL's address is checked when agentd
/// connects, after DNS resolution).
#[derive(Debug, Clone)]
pub struct NewMcpServer {
    pub name: McpServerName,
    pub url: McpUrl,
    pub token: Option<secrecy::SecretString>,
}

/// An http(s) URL of at most 2,000 characters, without user info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpUrl(String);

impl McpUrl {
    pub const MAX_CHARS: usize = 2_000;

    pub fn parse(value: &str) -> Result<Self, String> {
        let url = reqwest::Url::parse(value).map_err(|e| format!("is not a URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("must be an http or https URL".into());
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err("must name a host".into());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("must not carry user info; give a bearer token in `token`".into());
        }
        if value.len() > Self::MAX_CHARS {
            return Err(format!("must be at most {} characters", Self::MAX_CHARS));
        }
        Ok(Self(value.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One tool of an MCP server, as the model is shown it and `GET /api/tools` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct McpToolInfo {
    /// `<server>__<tool>`: the name the model calls it by.
    pub name: String,
    /// The server's own name for it.
    pub tool: String,
    pub description: String,
    /// The server's JSON Schema of the call's arguments.
    pub parameters: serde_json::Value,
}

/// A server's tools as `GET /api/tools` lists them, or why they could not be listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct McpServerTools {
    pub server: McpServerName,
    pub origin: McpOrigin,
    pub tools: Vec<McpToolInfo>,
    /// Set when the list was bounded: the tools left out and the descriptions cut, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// Set when the server could not be reached or refused to list its tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_cannot_hold_the_tool_separator() {
        for good in ["a", "github", "files-2", &"a".repeat(32)] {
            assert!(McpServerName::parse(good).is_ok(), "{good:?} was refused");
        }
        for bad in ["", "1a", "-a", "a_b", "a__b", "A", "a b", "é", &"a".repeat(33)] {
            assert!(McpServerName::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn tools_are_named_after_their_server() {
        let server = McpServerName::parse("calc").unwrap();
        assert_eq!(qualified_tool(&server, "add").as_deref(), Some("calc__add"));
        assert_eq!(split_tool("calc__add"), Some(("calc", "add")));
        assert_eq!(split_tool("calc__get__sum"), Some(("calc", "get__sum")));
        assert_eq!(split_tool("post_message"), None);
        assert_eq!(qualified_tool(&server, "a.b"), None);
        assert_eq!(qualified_tool(&server, &"x".repeat(60)), None);
    }

    #[test]
    fn server_sets_are_unique_and_round_trip() {
        let set = McpServerSet::parse(&["b", "a", "b"]).unwrap();
        assert_eq!(set.servers().len(), 2);
        assert_eq!(McpServerSet::from_json(&set.to_json()), set);
        assert!(McpServerSet::parse(&["ok", "Bad"]).unwrap_err().contains("'Bad'"));
    }

    #[test]
    fn urls_are_http_without_user_info() {
        assert!(McpUrl::parse("https://mcp.example.com/mcp").is_ok());
        assert!(McpUrl::parse("http://10.0.0.1:8080/").is_ok());
        for bad in ["ftp://x/", "https://u:p@x/", "not a url", "file:///etc/passwd"] {
            assert!(McpUrl::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
