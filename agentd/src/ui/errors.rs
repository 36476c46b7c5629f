//! Browsers never see JSON: an error answered to a browser (a request that accepts
//! `text/html`, or one htmx sends) is shown as a page in words, with the navigation of whoever
//! is signed in, whichever layer answered it (an unknown address, a method a route does not
//! take, a body too large, a panic, a dashboard page's own error). API clients, which do not
//! ask for HTML, keep the JSON error body unchanged.

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use minijinja::context;

use crate::AppState;

use super::pages;
use super::render::{Page, ShownError};
use super::session;

/// The most of a JSON error body read back to show it: error bodies are a few hundred bytes.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Middleware around the whole application (with the dashboard on): an error for a browser,
/// as a page.
pub(crate) async fn as_pages(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let browser = wants_html(request.headers());
    let headers = request.headers().clone();
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    // An error's body depends on these request headers: caches must keep the two apart.
    let mut response = response;
    response.headers_mut().insert(header::VARY, HeaderValue::from_static("accept, hx-request"));
    let shown = response.extensions().get::<ShownError>().cloned();
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    // A dashboard page's error is always upgraded; an API answer only for a browser.
    if shown.is_none() && !(browser && json) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let shown = match shown {
        Some(shown) => shown,
        None => {
            let Ok(bytes) = to_bytes(body, MAX_ERROR_BODY).await else {
                let mut parts = parts;
                parts.headers.remove(header::CONTENT_LENGTH);
                return Response::from_parts(parts, Body::empty());
            };
            match serde_json::from_slice::<Envelope>(&bytes) {
                Ok(envelope) => envelope.error,
                Err(_) => return Response::from_parts(parts, Body::from(bytes)),
            }
        }
    };
    let mut page = page(&state, &headers, status, &shown).await;
    // What the answer said besides its body (Retry-After, cookies, the request id) stays.
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            page.headers_mut().append(name, value.clone());
        }
    }
    page.headers_mut().remove(header::WWW_AUTHENTICATE);
    session::secure_headers(page.headers_mut());
    page
}

#[derive(serde::Deserialize)]
struct Envelope {
    error: ShownError,
}

/// A browser's request: it accepts HTML (a page being opened), or htmx sent it.
fn wants_html(headers: &HeaderMap) -> bool {
    headers.contains_key("hx-request")
        || headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|accept| accept.contains("text/html"))
}

/// The error page for `status`: its title and the error's words, with the navigation when the
/// session cookie signs someone in, else the ways to sign in.
async fn page(
    state: &AppState,
    headers: &HeaderMap,
    status: StatusCode,
    shown: &ShownError,
) -> Response {
    let (title, message) = words(status, shown);
    // A refusal for load (rate limited, overloaded) costs no session lookup: the limiter's
    // point is that such a request does no more work.
    let load = matches!(status, StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE);
    let values = context! {
        title, message, code => shown.code, request_id => shown.request_id, status => status.as_u16(),
    };
    let who = if load { None } else { session::signed_in(state, headers).await };
    if let Some(who) = who {
        let csrf = session::session_form_token(state, headers).unwrap_or_default();
        let values = context! { csrf, nav => "error", ..values.clone() };
        if let Ok(mut page) = pages::signed_in(state, &who, "error.html", values).await {
            *page.status_mut() = status;
            return page;
        }
    }
    Page::new("error.html", context! { guest => true, ..values })
        .with_status(status)
        .into_response()
}

/// A heading for the status, and the error's sentence, except where the API's words are for
/// a program (an unknown route, a method a route does not take).
fn words(status: StatusCode, shown: &ShownError) -> (&'static str, String) {
    match shown.code.as_str() {
        "route_not_found" => (
            "Page not found",
            "There is no page at this address: the link may be mistyped, or what it showed \
             was removed."
                .into(),
        ),
        "method_not_allowed" => (
            "This page cannot be opened that way",
            "This address only takes a form as it is sent (a reload after sending a form \
             can land here): open the page again from the navigation."
                .into(),
        ),
        _ => {
            let title = match status {
                StatusCode::UNAUTHORIZED => "Sign in first",
                StatusCode::FORBIDDEN => "Not allowed",
                StatusCode::NOT_FOUND => "Not found",
                StatusCode::PAYLOAD_TOO_LARGE => "Too large",
                StatusCode::TOO_MANY_REQUESTS => "Too many requests",
                s if s.is_server_error() => "Something went wrong on the server",
                _ => "That did not work",
            };
            (title, shown.message.clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_being_opened_or_an_htmx_request_is_a_browsers() {
        let mut headers = HeaderMap::new();
        assert!(!wants_html(&headers), "no Accept: an API client");
        headers.insert(header::ACCEPT, "application/json".parse().unwrap());
        assert!(!wants_html(&headers));
        headers
            .insert(header::ACCEPT, "text/html,application/xhtml+xml,*/*;q=0.8".parse().unwrap());
        assert!(wants_html(&headers));
        let mut htmx = HeaderMap::new();
        htmx.insert("hx-request", "true".parse().unwrap());
        assert!(wants_html(&htmx));
    }
}
