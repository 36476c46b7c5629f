//! The dashboard's sign-in state and its CSRF defence.
//!
//! A signed-in browser carries the same bearer token an API client would, in an `HttpOnly`
//! cookie, so it is checked, limited and revoked (sign-out, which is the API's logout) exactly
//! like one. Every state-changing request carries a CSRF token, which each page writes into its
//! forms (field `csrf`) and into htmx's request headers (`X-CSRF-Token`); [`guard`] refuses a
//! request without the right one before any handler runs. Signed in, the token is bound to the
//! session: an HMAC of its token under a key only the server holds, so a value planted in the
//! browser (a cookie set by a sibling subdomain, say) matches nothing. Before sign-in (the
//! sign-in and registration forms) it is a double submit: a random value in its own
//! `SameSite=Strict` cookie, repeated in the form.
//!
//! Over https the cookies are named with the `__Host-` prefix, which browsers accept only from
//! this very host, secure and for the whole path: no other site or subdomain can set them. A
//! cookie without the prefix is then ignored.

use axum::body::{Body, to_bytes};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use cookie::{Cookie, SameSite};

use agentcore::Principal;

use crate::AppState;
use crate::error::ApiError;

const SESSION_COOKIE: &str = "agentd_session";
const CSRF_COOKIE: &str = "agentd_csrf";
/// The workspace the dashboard shows (its id); none: the personal one.
pub(super) const WORKSPACE_COOKIE: &str = "agentd_workspace";
/// The prefix of both cookies' names over https.
const HOST_PREFIX: &str = "__Host-";
pub(super) const CSRF_FIELD: &str = "csrf";
const CSRF_HEADER: &str = "x-csrf-token";

/// The signed-in user of a page.
#[derive(Debug, Clone)]
pub(super) struct Viewer(pub Principal);

/// Not signed in (no cookie, or a token that expired or was revoked): to the sign-in page.
#[derive(Debug)]
pub(super) enum SignInFirst {
    Redirect,
    Limited(ApiError),
}

impl IntoResponse for SignInFirst {
    fn into_response(self) -> Response {
        match self {
            // htmx follows HX-Redirect with a full navigation; a plain browser follows 303.
            SignInFirst::Redirect => {
                let mut response = Redirect::to("/login").into_response();
                response.headers_mut().insert("hx-redirect", HeaderValue::from_static("/login"));
                response
            }
            SignInFirst::Limited(error) => super::render::error_page(&error),
        }
    }
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = SignInFirst;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, SignInFirst> {
        let principal = signed_in(state, &parts.headers).await.ok_or(SignInFirst::Redirect)?;
        state.http.limits.caller(&principal).map_err(SignInFirst::Limited)?;
        let mut principal = principal;
        principal.address = state.http.limits.client(parts).map(|ip| ip.to_string());
        Ok(Viewer(principal))
    }
}

/// Who the session cookie of `headers` signs in, in the workspace the browser chose; `None`
/// without a cookie, or with a token that expired or was revoked.
pub(super) async fn signed_in(state: &AppState, headers: &HeaderMap) -> Option<Principal> {
    let token = session_cookie(state, headers)?;
    let chosen = cookie(headers, &name(WORKSPACE_COOKIE, is_secure(state, headers)));
    // A workspace the viewer has left (or was removed from) falls back to their own.
    match state.core.authenticate(&token, chosen.as_deref()).await {
        Ok(principal) => Some(principal),
        Err(_) if chosen.is_some() => state.core.authenticate(&token, None).await.ok(),
        Err(_) => None,
    }
}

/// The form token a signed-in page of `headers`'s session carries (see [`guard`]).
pub(super) fn session_form_token(state: &AppState, headers: &HeaderMap) -> Option<String> {
    session_cookie(state, headers).map(|session| state.core.form_token(&session))
}

/// The CSRF token of this browser, for the page's forms.
#[derive(Debug, Clone)]
pub(super) struct Csrf(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Csrf {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(parts.extensions.get::<Csrf>().cloned().unwrap_or(Csrf(String::new())))
    }
}

/// Middleware on every dashboard route: gives a browser without one its CSRF cookie, and
/// refuses a POST whose form field (or htmx header) does not match that cookie.
pub(super) async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let secure = is_secure(&state, &parts.headers);
    let bound = session_cookie(&state, &parts.headers).map(|s| state.core.form_token(&s));
    let existing = cookie(&parts.headers, &name(CSRF_COOKIE, secure)).filter(|t| t.len() == 64);
    let had_cookie = existing.is_some();
    // Signed in, the session's own token; before, the double-submit cookie's.
    let expected = bound.clone().or_else(|| existing.clone());
    let token = expected.clone().unwrap_or_else(new_token);
    let request = if parts.method == Method::POST {
        let Some(expected) = expected else {
            return refused();
        };
        let limit = state.http.config.body_limit_bytes;
        let Ok(bytes) = to_bytes(body, limit).await else {
            return ApiError::PayloadTooLarge.into_response();
        };
        let sent = header_value(&parts.headers, CSRF_HEADER).or_else(|| form_field(&bytes));
        if !sent.is_some_and(|sent| same(sent.as_bytes(), expected.as_bytes())) {
            tracing::warn!(path = %parts.uri.path(), "dashboard form refused: CSRF token");
            return refused();
        }
        parts.extensions.insert(Csrf(token.clone()));
        Request::from_parts(parts, Body::from(bytes))
    } else {
        parts.extensions.insert(Csrf(token.clone()));
        Request::from_parts(parts, body)
    };
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    if bound.is_none() && !had_cookie && !existing_cookie_in(headers, secure) {
        let value = set_cookie(name(CSRF_COOKIE, secure), token.clone(), SameSite::Strict, secure);
        if let Ok(value) = HeaderValue::from_str(&value.to_string()) {
            headers.append(header::SET_COOKIE, value);
        }
    }
    secure_headers(headers);
    response
}

/// A response that sets the CSRF cookie itself (sign-in rotates it) keeps that one.
fn existing_cookie_in(headers: &HeaderMap, secure: bool) -> bool {
    let set = format!("{}=", name(CSRF_COOKIE, secure));
    headers
        .get_all(header::SET_COOKIE)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.starts_with(&set)))
}

fn refused() -> Response {
    let error = ApiError::Core(agentcore::Error::Forbidden(
        "This form was not sent from this dashboard, or its page is too old: reload the page \
         and try again."
            .into(),
    ));
    let mut response = super::render::error_page(&error);
    *response.status_mut() = StatusCode::FORBIDDEN;
    response
}

/// The browser-facing security headers: a strict Content-Security-Policy (scripts and styles
/// only from this origin, no inline script), no framing, no sniffing, and no caching of pages.
pub(super) fn secure_headers(headers: &mut HeaderMap) {
    let fixed: [(&str, &str); 4] = [
        (
            "content-security-policy",
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
             frame-ancestors 'none'",
        ),
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "same-origin"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
}

/// `Set-Cookie` values for a new session: the token, and a fresh CSRF token (so a value
/// planted before sign-in is not kept).
pub(super) fn sign_in_cookies(state: &AppState, headers: &HeaderMap, token: &str) -> [String; 2] {
    let https = is_secure(state, headers);
    let session = set_cookie(name(SESSION_COOKIE, https), token.to_owned(), SameSite::Lax, https);
    let csrf = set_cookie(name(CSRF_COOKIE, https), new_token(), SameSite::Strict, https);
    [session.to_string(), csrf.to_string()]
}

/// The `Set-Cookie` values that remove the session and the chosen workspace (the next person to
/// sign in on this browser starts in their own).
pub(super) fn sign_out_cookies(state: &AppState, headers: &HeaderMap) -> [String; 2] {
    let https = is_secure(state, headers);
    let mut gone = set_cookie(name(SESSION_COOKIE, https), String::new(), SameSite::Lax, https);
    gone.set_max_age(cookie::time::Duration::ZERO);
    [gone.to_string(), workspace_cookie(state, headers, None)]
}

/// The `Set-Cookie` value that makes the dashboard act in `workspace`, or, with `None`, in the
/// viewer's personal workspace (the cookie removed). Sent like the session's: `HttpOnly`,
/// `SameSite=Lax`, and `__Host-` and `Secure` over https.
pub(super) fn workspace_cookie(
    state: &AppState,
    headers: &HeaderMap,
    workspace: Option<&str>,
) -> String {
    let https = is_secure(state, headers);
    let value = workspace.unwrap_or_default().to_owned();
    let mut chosen = set_cookie(name(WORKSPACE_COOKIE, https), value, SameSite::Lax, https);
    if workspace.is_none() {
        chosen.set_max_age(cookie::time::Duration::ZERO);
    }
    chosen.to_string()
}

/// `response` with each of `cookies` (`Set-Cookie` values) added.
pub(super) fn with_cookies(
    mut response: Response,
    cookies: impl IntoIterator<Item = String>,
) -> Response {
    for cookie in cookies {
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

/// This dashboard's address as the browser reached it (the scheme and `Host`), to write a whole
/// link for someone else to open; empty without a `Host`.
pub(super) fn origin(state: &AppState, headers: &HeaderMap) -> String {
    let scheme = if is_secure(state, headers) { "https" } else { "http" };
    header_value(headers, header::HOST.as_str())
        .map_or_else(String::new, |host| format!("{scheme}://{host}"))
}

/// A cookie for the whole site that scripts cannot read, `Secure` over https.
pub(super) fn set_cookie(
    name: String,
    value: String,
    same_site: SameSite,
    secure: bool,
) -> Cookie<'static> {
    Cookie::build((name, value))
        .path("/")
        .http_only(true)
        .same_site(same_site)
        .secure(secure)
        .build()
}

/// The session's bearer token, from the cookie of this scheme's name.
fn session_cookie(state: &AppState, headers: &HeaderMap) -> Option<String> {
    cookie(headers, &name(SESSION_COOKIE, is_secure(state, headers)))
}

/// A cookie's name: `__Host-` prefixed over https.
pub(super) fn name(base: &str, secure: bool) -> String {
    if secure { format!("{HOST_PREFIX}{base}") } else { base.to_owned() }
}

/// Came over https: configured so, or said so by the proxy in front.
pub(super) fn is_secure(state: &AppState, headers: &HeaderMap) -> bool {
    state.http.config.secure_cookies
        || header_value(headers, "x-forwarded-proto")
            .is_some_and(|p| p.eq_ignore_ascii_case("https"))
        || header_value(headers, "forwarded")
            .is_some_and(|f| f.to_ascii_lowercase().contains("proto=https"))
}

/// The value of the request's cookie `name`, unless empty.
pub(super) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|cookie| cookie.name() == name)
        .map(|cookie| cookie.value().to_owned())
        .filter(|value| !value.is_empty())
}

fn header_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

fn form_field(body: &[u8]) -> Option<String> {
    serde_urlencoded::from_bytes::<Vec<(String, String)>>(body)
        .ok()?
        .into_iter()
        .find(|(key, _)| key == CSRF_FIELD)
        .map(|(_, value)| value)
}

/// 244 random bits from the operating system, as 64 hex digits.
fn new_token() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// Constant-time comparison.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, HeaderValue::from_static("a=1; agentd_csrf=xyz; b=2"));
        assert_eq!(cookie(&headers, CSRF_COOKIE).as_deref(), Some("xyz"));
        assert_eq!(cookie(&headers, SESSION_COOKIE), None);
    }

    #[test]
    fn the_form_field_is_read_from_an_urlencoded_body() {
        assert_eq!(form_field(b"title=a%26b&csrf=abc").as_deref(), Some("abc"));
        assert_eq!(form_field(b"title=x"), None);
    }

    #[test]
    fn comparison_needs_equal_values() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
    }
}
