//! Extractors that turn every malformed request into the API's error body.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use serde::de::DeserializeOwned;

use agentcore::domain::agent::AgentId;
use agentcore::domain::chat::GuildId;
use agentcore::domain::schedule::ScheduleId;
use agentcore::domain::task::TaskId;
use agentcore::domain::trigger::TriggerId;
use agentcore::domain::user::UserId;
use agentcore::{Error, Principal, Resource};

use crate::AppState;
use crate::error::ApiError;

/// A JSON body. Syntax errors are `invalid_json`; values of the wrong type are
/// `validation_failed` with the field's path in `details`. The content type is not checked,
/// so `curl -d` works as typed.
#[derive(Debug)]
pub(crate) struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = body_bytes(request, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::InvalidJson("the body is empty".into()));
        }
        decode(&bytes).map(Json)
    }
}

/// A JSON body that may be absent: an empty body reads as `T::default()`.
#[derive(Debug)]
pub(crate) struct OptionalJson<T>(pub T);

impl<T: DeserializeOwned + Default, S: Send + Sync> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = body_bytes(request, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(T::default()));
        }
        decode(&bytes).map(OptionalJson)
    }
}

/// The body exactly as received, for signatures computed over its bytes.
#[derive(Debug)]
pub(crate) struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        body_bytes(request, state).await.map(RawBody)
    }
}

/// A trigger call's body (`POST /hooks/{id}`): at most
/// [`agentcore::domain::trigger::MAX_BODY_BYTES`] (or the server's body limit, when lower).
/// Refused with 413 as soon as the announced length or the bytes read pass the bound, so an
/// oversized body is never read whole; the refusal is counted in the trigger calls' metric.
#[derive(Debug)]
pub(crate) struct HookBody(pub Bytes);

impl FromRequest<AppState> for HookBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, ApiError> {
        use http_body_util::BodyExt as _;
        let limit =
            agentcore::domain::trigger::MAX_BODY_BYTES.min(state.http.config.body_limit_bytes);
        let too_large = || {
            state.core.count_hook(agentcore::telemetry::HookOutcome::TooLarge);
            ApiError::PayloadTooLarge
        };
        let announced = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok());
        if announced.is_some_and(|length| length > limit as u64) {
            return Err(too_large());
        }
        match http_body_util::Limited::new(request.into_body(), limit).collect().await {
            Ok(collected) => Ok(HookBody(collected.to_bytes())),
            Err(error) if error.is::<http_body_util::LengthLimitError>() => Err(too_large()),
            Err(_) => Err(ApiError::InvalidJson("the body could not be read".into())),
        }
    }
}

async fn body_bytes<S: Send + Sync>(request: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(request, state).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge
        } else {
            ApiError::InvalidJson("the body could not be read".into())
        }
    })
}

/// Decodes a JSON request body as the routes do: `invalid_json` for bad syntax,
/// `validation_failed` naming the field for a wrong type.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Syntax first, so a truncated body is `invalid_json` even when an earlier field also has
    // the wrong type.
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes)
        .map_err(|error| ApiError::InvalidJson(error.to_string()))?;
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        if inner.is_data() {
            let field = if path == "." { "body".to_owned() } else { path };
            let details = BTreeMap::from([(field, strip_position(&inner.to_string()))]);
            ApiError::WrongTypes(details)
        } else {
            ApiError::InvalidJson(inner.to_string())
        }
    })?;
    Ok(value)
}

/// serde_json ends messages with " at line 1 column 9": noise once the field is named.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

/// Path parameters. A segment that cannot even be decoded (bad percent-encoding, invalid
/// UTF-8) names nothing, so it is `route_not_found` in the API's error body.
#[derive(Debug)]
pub(crate) struct Path<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(value)| Path(value))
            .map_err(|_| ApiError::RouteNotFound)
    }
}

/// Query parameters; anything unreadable is `validation_failed`.
#[derive(Debug)]
pub(crate) struct Params<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(value)| Params(value))
            .map_err(|rejection| {
                ApiError::WrongTypes(BTreeMap::from([("query".into(), rejection.body_text())]))
            })
    }
}

/// The header naming the workspace a request acts in (its id); without it, the caller's
/// personal workspace (an API key's: its own).
pub(crate) const WORKSPACE_HEADER: &str = "x-workspace";

/// The caller, from `Authorization: Bearer <token>` (a session token or an API key), in the
/// workspace `X-Workspace` names.
#[derive(Debug)]
pub(crate) struct Caller(pub Principal);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|token| !token.is_empty())
            .ok_or(Error::Unauthorized)?;
        let workspace = match parts.headers.get(WORKSPACE_HEADER) {
            None => None,
            Some(value) => Some(value.to_str().map_err(|_| {
                Error::not_found(Resource::Workspace, "a workspace id is visible ASCII")
            })?),
        };
        let mut principal = state.core.authenticate(token, workspace).await?;
        if let Some(acted_in) = parts.extensions.get::<crate::read_cache::ActedIn>() {
            acted_in.set(&principal.workspace);
        }
        state.http.limits.caller(&principal)?;
        principal.address = state.http.limits.client(parts).map(|ip| ip.to_string());
        Ok(Caller(principal))
    }
}

/// An agent id from the path. An id that cannot exist is simply not found.
pub(crate) fn agent_id(raw: &str) -> Result<AgentId, ApiError> {
    AgentId::parse(raw).map_err(|_| Error::not_found(Resource::Agent, raw).into())
}

pub(crate) fn task_id(raw: &str) -> Result<TaskId, ApiError> {
    TaskId::parse(raw).map_err(|_| Error::not_found(Resource::Task, raw).into())
}

/// A guild id from the path; one that cannot exist is simply not connected.
pub(crate) fn guild_id(raw: &str) -> Result<GuildId, ApiError> {
    GuildId::parse(raw).map_err(|_| Error::not_found(Resource::Connection, raw).into())
}

pub(crate) fn schedule_id(raw: &str) -> Result<ScheduleId, ApiError> {
    ScheduleId::parse(raw).map_err(|_| Error::not_found(Resource::Schedule, raw).into())
}

pub(crate) fn trigger_id(raw: &str) -> Result<TriggerId, ApiError> {
    TriggerId::parse(raw).map_err(|_| Error::not_found(Resource::Trigger, raw).into())
}

/// An invite id (a UUID) that cannot exist is an invite that does not.
pub(crate) fn invite_id(raw: &str) -> Result<String, ApiError> {
    match uuid::Uuid::try_parse(raw) {
        Ok(id) if id.hyphenated().to_string() == raw => Ok(raw.to_owned()),
        _ => Err(Error::not_found(Resource::Invite, raw).into()),
    }
}

/// A key id (16 lowercase hex characters) that cannot exist is a key that does not.
pub(crate) fn key_id(raw: &str) -> Result<String, ApiError> {
    let shaped = raw.len() == agentcore::domain::access::KEY_ID_CHARS
        && raw.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if shaped { Ok(raw.to_owned()) } else { Err(Error::not_found(Resource::ApiKey, raw).into()) }
}

/// A user id that cannot exist is a member that does not.
pub(crate) fn member_id(raw: &str) -> Result<UserId, ApiError> {
    UserId::parse(raw).map_err(|_| Error::not_found(Resource::Member, raw).into())
}
