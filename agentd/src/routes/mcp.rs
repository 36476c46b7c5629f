//! `/api/mcp/servers`: the MCP servers users add (streamable HTTP only), and a connection test.

use axum::Json as Reply;
use axum::extract::State;
use axum::http::StatusCode;

use agentcore::api::{AddMcpServerRequest, Deleted, McpServerList};
use agentcore::domain::mcp::{McpServer, McpServerName, McpServerTools};
use agentcore::{Error, Resource};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, Json, Path};

#[utoipa::path(get, path = "/api/mcp/servers", operation_id = "list_mcp_servers", tag = "mcp", security(("bearer" = [])),
    responses((status = 200, description = "The caller's MCP servers (never their tokens), and the names of the operator's, which every agent may use too.", body = McpServerList)))]
pub(super) async fn list(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<McpServerList>, ApiError> {
    Ok(Reply(state.core.mcp_servers(&who).await?))
}

#[utoipa::path(post, path = "/api/mcp/servers", operation_id = "add_mcp_server", tag = "mcp", security(("bearer" = [])),
    request_body = AddMcpServerRequest,
    responses((status = 201, description = "The server as stored: its token is kept encrypted and never returned. A URL that resolves to a non-public address is `validation_failed` on `url`.", body = McpServer),
        (status = 429, description = "`quota_exceeded`: the user has `mcp_servers_per_user` servers (`error.details` names the `quota` and its `limit`).", body = crate::error::ErrorBody)))]
pub(super) async fn add(
    State(state): State<AppState>,
    Caller(who): Caller,
    Json(request): Json<AddMcpServerRequest>,
) -> Result<(StatusCode, Reply<McpServer>), ApiError> {
    let server = state.core.add_mcp_server(&who, request.parse()?).await?;
    Ok((StatusCode::CREATED, Reply(server)))
}

#[utoipa::path(delete, path = "/api/mcp/servers/{name}", operation_id = "delete_mcp_server", tag = "mcp", security(("bearer" = [])),
    params(("name" = String, Path, example = "github", description = "The server's name.")),
    responses((status = 200, description = "The server is gone; agents naming it run without its tools.", body = Deleted)))]
pub(super) async fn delete(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(name): Path<String>,
) -> Result<Reply<Deleted>, ApiError> {
    let name = server_name(&name)?;
    state.core.delete_mcp_server(&who, &name).await?;
    Ok(Reply(Deleted { deleted: name.to_string() }))
}

#[utoipa::path(post, path = "/api/mcp/servers/{name}/test", operation_id = "test_mcp_server", tag = "mcp", security(("bearer" = [])),
    params(("name" = String, Path, example = "github", description = "The server's name: the caller's or the operator's.")),
    responses((status = 200, description = "A fresh connection's tool list, or in `error` why the server could not be reached.", body = McpServerTools)))]
pub(super) async fn test(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(name): Path<String>,
) -> Result<Reply<McpServerTools>, ApiError> {
    Ok(Reply(state.core.test_mcp_server(&who, &server_name(&name)?).await?))
}

/// A name that cannot be a server's is a server that does not exist.
fn server_name(raw: &str) -> Result<McpServerName, ApiError> {
    McpServerName::parse(raw).map_err(|_| Error::not_found(Resource::McpServer, raw).into())
}
