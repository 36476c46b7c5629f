//! MCP servers: the body of `POST /api/mcp/servers` and the lists.

use serde::{Deserialize, Serialize};

use crate::domain::mcp::{McpServer, McpServerName, McpUrl, NewMcpServer};
use crate::error::ValidationErrors;

use super::required;

/// The body of `POST /api/mcp/servers`: a streamable HTTP server of the caller's.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AddMcpServerRequest {
    /// How agents name it (`mcp_servers`) and how its tools are called (`<name>__<tool>`).
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, pattern = "^[a-z][a-z0-9-]{0,31}$")
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The server's streamable HTTP endpoint (http or https, on a public address).
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false, max_length = 2000))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Sent as `Authorization: Bearer <token>`; stored encrypted, never returned.
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 4000))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// The longest bearer token accepted.
const TOKEN_MAX: usize = 4_000;

impl AddMcpServerRequest {
    pub fn parse(&self) -> Result<NewMcpServer, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let name = required(&mut e, "name", &self.name)
            .and_then(|v| e.check("name", McpServerName::parse(v)));
        let url = required(&mut e, "url", &self.url).and_then(|v| e.check("url", McpUrl::parse(v)));
        let token = self.token.as_deref().and_then(|v| e.check("token", token(v)));
        match (name, url) {
            (Some(name), Some(url)) if e.is_empty() => Ok(NewMcpServer { name, url, token }),
            _ => Err(e),
        }
    }
}

/// A bearer token: visible ASCII, 1 to 4,000 characters (it goes into a header as it is).
fn token(value: &str) -> Result<secrecy::SecretString, String> {
    let shaped = !value.is_empty()
        && value.len() <= TOKEN_MAX
        && value.bytes().all(|b| b.is_ascii_graphic());
    if shaped {
        Ok(secrecy::SecretString::from(value.to_owned()))
    } else {
        Err(format!("must be 1 to {TOKEN_MAX} visible ASCII characters, without spaces"))
    }
}

/// `GET /api/mcp/servers`: the caller's own servers, and the names of the operator's, which
/// every agent may use too.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct McpServerList {
    pub servers: Vec<McpServer>,
    pub operator_servers: Vec<McpServerName>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_field_is_named() {
        let request = AddMcpServerRequest {
            name: Some("Bad_Name".into()),
            url: Some("ftp://x".into()),
            token: Some("has space".into()),
        };
        let errors = request.parse().unwrap_err();
        let fields: Vec<&str> = errors.fields().keys().map(String::as_str).collect();
        assert_eq!(fields, ["name", "token", "url"]);
        assert!(AddMcpServerRequest::default().parse().unwrap_err().fields().contains_key("url"));
    }
}
