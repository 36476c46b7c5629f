//! The message after an accepted form ("Agent Writer deleted."): set by the handler on its
//! redirect, carried by a short-lived cookie to the next page, shown there once in the page's
//! `role=status` region and then cleared.
//!
//! A handler answers with [`done`]: a 303 that carries the message as a response extension;
//! [`carry`], the middleware around every dashboard route, turns it into the cookie (named with
//! `__Host-` over https, like the session's). On the next request it reads the cookie and makes
//! the text visible to the page being rendered ([`take`], which `render` calls); once a page
//! has shown it, the cookie is removed in the same response. A redirect or an event stream in
//! between leaves it for the page that follows.
//!
//! Bounds: at most [`MAX_CHARS`] characters (longer is cut), gone after [`MAX_AGE_SECONDS`]
//! even if no page reads it; plain text, escaped like any value, and never a secret (the
//! messages name what was done, not keys or links). A form answered by htmx that goes to a
//! section of a page (`#settings`) gets `HX-Location`, so htmx loads it and scrolls there.

use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::header::{self, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use cookie::SameSite;

use crate::AppState;

use super::session;

const FLASH_COOKIE: &str = "agentd_flash";
/// The longest message a cookie carries, in characters.
pub(super) const MAX_CHARS: usize = 200;
/// How long a message waits for its page.
pub(super) const MAX_AGE_SECONDS: i64 = 60;

/// A message for the next page, on a handler's response.
#[derive(Debug, Clone)]
struct Message(String);

tokio::task_local! {
    /// The message waiting for the page being made; `None` once a page has taken it.
    static WAITING: Arc<Mutex<Option<String>>>;
}

/// A 303 to `to` that leaves `message` for the page there.
pub(super) fn done(to: &str, message: impl Into<String>) -> Response {
    let mut response = Redirect::to(to).into_response();
    response.extensions_mut().insert(Message(message.into()));
    response
}

/// The message waiting for this page, taken: the page shows it, and it is then cleared.
pub(super) fn take() -> Option<String> {
    WAITING.try_with(|waiting| waiting.lock().ok()?.take()).ok().flatten()
}

/// Middleware on the dashboard's routes: the cookie in, the message out.
pub(super) async fn carry(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let headers = request.headers().clone();
    let secure = session::is_secure(&state, &headers);
    let name = session::name(FLASH_COOKIE, secure);
    let read = (request.method() == Method::GET)
        .then(|| session::cookie(&headers, &name).and_then(|raw| decode(&raw)))
        .flatten();
    let had = read.is_some();
    let waiting = Arc::new(Mutex::new(read));
    let mut response = WAITING.scope(waiting.clone(), next.run(request)).await;
    let taken = had && waiting.lock().is_ok_and(|w| w.is_none());
    let set = match response.extensions_mut().remove::<Message>() {
        Some(Message(text)) => Some(cookie(&name, &encode(&text), MAX_AGE_SECONDS, secure)),
        None if taken => Some(cookie(&name, "", 0, secure)),
        None => None,
    };
    if let Some(value) = set.and_then(|v| HeaderValue::from_str(&v).ok()) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    to_section(&headers, response)
}

/// An htmx request answered by a redirect to a section of a page (`…#settings`): htmx would
/// follow it without the fragment and show the page's top, so it is told to load that address
/// itself (`HX-Location`), which it does in place and then scrolls to the section. (A full
/// navigation would not do: from the same page, only the fragment changes, and the browser
/// just scrolls without loading the page or its message.)
fn to_section(request: &axum::http::HeaderMap, mut response: Response) -> Response {
    let htmx = request.contains_key("hx-request");
    let to = response.headers().get(header::LOCATION).cloned();
    match to {
        Some(to) if htmx && response.status().is_redirection() && to.as_bytes().contains(&b'#') => {
            *response.status_mut() = StatusCode::OK;
            response.headers_mut().remove(header::LOCATION);
            response.headers_mut().insert("hx-location", to);
            response
        }
        _ => response,
    }
}

fn cookie(name: &str, value: &str, max_age: i64, secure: bool) -> String {
    let mut cookie = session::set_cookie(name.to_owned(), value.to_owned(), SameSite::Lax, secure);
    cookie.set_max_age(cookie::time::Duration::seconds(max_age));
    cookie.to_string()
}

/// The text, cut to [`MAX_CHARS`], URL-encoded (every character a cookie may carry).
fn encode(text: &str) -> String {
    let cut: String = text.chars().take(MAX_CHARS).collect();
    serde_urlencoded::to_string([("m", cut.as_str())].as_slice()).unwrap_or_default().split_off(2)
}

fn decode(raw: &str) -> Option<String> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(&format!("m={raw}")).ok()?;
    let text = pairs.into_iter().next()?.1;
    let text: String = text.chars().take(MAX_CHARS).collect();
    (!text.trim().is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_survives_the_cookie_and_is_bounded() {
        let text = "Agent \"Writer\" deleted; 3 tasks gone, 100% sure.";
        let raw = encode(text);
        assert!(raw.bytes().all(|b| b.is_ascii_graphic() && !b"\";,\\ ".contains(&b)), "{raw}");
        assert_eq!(decode(&raw).as_deref(), Some(text));
        let long = "é".repeat(MAX_CHARS * 2);
        assert_eq!(decode(&encode(&long)).unwrap().chars().count(), MAX_CHARS);
        assert_eq!(decode(""), None);
    }
}
