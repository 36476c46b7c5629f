//! Conditional reads: every successful `GET` answered with a whole body (the API's JSON, the
//! dashboard's pages; not event streams) carries a weak `ETag`, the hash of what it says, and a
//! request whose `If-None-Match` names it is answered `304 Not Modified` without the body. A
//! client or page polling a list that has not changed gets a few headers back instead of the
//! list. The answer is still made, or comes from the read cache (`read_cache`) with its tag
//! (the tag spares the transfer and the parsing, not the read); the
//! hash (SHA-256, its first 128 bits) does not depend on the node or the build, so a client
//! behind a balancer revalidates on any node, across an upgrade too. A `HEAD` gets the tag but
//! never a 304 (its `Content-Length` would have to be the whole answer's).
//!
//! A page's `data-now` (the server's time when it was made, for the page's clock) changes with
//! every request and says nothing about the page's content: it is left out of the hash.

use axum::body::{Body, HttpBody as _, to_bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest as _, Sha256};

/// The largest body hashed: a larger answer goes without an `ETag`.
const MOST_HASHED: usize = 4 * 1024 * 1024;

/// Middleware: the `ETag` and the `304` (see the module's documentation).
pub(crate) async fn conditional(request: Request, next: Next) -> Response {
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        return next.run(request).await;
    }
    let wanted = match *request.method() {
        Method::GET => request.headers().get(header::IF_NONE_MATCH).cloned(),
        _ => None,
    };
    let response = next.run(request).await;
    if response.status() != StatusCode::OK || !hashed_type(response.headers()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // An answer from the read cache (`read_cache`) comes with the tag of its body.
    let (tag, body) = match parts.headers.get(header::ETAG) {
        Some(tag) => (tag.clone(), body),
        None => {
            if body.size_hint().exact().is_none_or(|n| n > MOST_HASHED as u64) {
                return Response::from_parts(parts, body);
            }
            let Ok(bytes) = to_bytes(body, MOST_HASHED).await else {
                return StatusCode::INTERNAL_SERVER_ERROR.into_response();
            };
            let made = tag(&bytes);
            parts.headers.insert(header::ETAG, made.clone());
            (made, Body::from(bytes))
        }
    };
    parts
        .headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("private, no-cache"));
    if wanted.as_ref().is_some_and(|wanted| matches(wanted, &tag)) {
        parts.status = StatusCode::NOT_MODIFIED;
        parts.headers.remove(header::CONTENT_LENGTH);
        parts.headers.remove(header::CONTENT_TYPE);
        return Response::from_parts(parts, Body::empty());
    }
    Response::from_parts(parts, body)
}

/// JSON and HTML answers are hashed; anything else (a file, a text) is left alone.
fn hashed_type(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).is_some_and(|value| {
        value.starts_with("application/json") || value.starts_with("text/html")
    })
}

/// `W/"<32 hex digits>"`: the first 128 bits of SHA-256 over the body, without a page's
/// `data-now` value (a member of a workspace cannot make two answers share a tag). Weak: two
/// answers that say the same are equal, byte for byte or not.
pub(crate) fn tag(body: &[u8]) -> HeaderValue {
    let mut hasher = Sha256::new();
    match without_time(body) {
        Some((before, after)) => {
            hasher.update(before);
            hasher.update(after);
        }
        None => hasher.update(body),
    }
    let digest = hasher.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    HeaderValue::from_str(&format!("W/\"{hex}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("W/\"0\""))
}

/// The body before and after the value of its first `data-now="…"`, if it has one.
fn without_time(body: &[u8]) -> Option<(&[u8], &[u8])> {
    const ATTRIBUTE: &[u8] = b" data-now=\"";
    let start = body.windows(ATTRIBUTE.len()).position(|w| w == ATTRIBUTE)? + ATTRIBUTE.len();
    let end = start + body[start..].iter().position(|b| *b == b'"')?;
    Some((&body[..start], &body[end..]))
}

/// Whether `If-None-Match` (`*`, or a list of tags, weak or strong) names `tag` (a weak
/// comparison, as RFC 9110 asks for `If-None-Match`).
fn matches(wanted: &HeaderValue, tag: &HeaderValue) -> bool {
    let Ok(wanted) = wanted.to_str() else { return false };
    let Ok(tag) = tag.to_str() else { return false };
    let opaque = |t: &str| t.trim().trim_start_matches("W/").to_owned();
    let tag = opaque(tag);
    wanted.trim() == "*" || wanted.split(',').any(|candidate| opaque(candidate) == tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_content_has_the_same_tag_whatever_the_page_s_time() {
        let page = |now: &str, body: &str| {
            format!("<main data-now=\"{now}\" data-events=\"x\">{body}</main>").into_bytes()
        };
        let a = tag(&page("2026-11-28T06:00:00.000Z", "three agents"));
        let b = tag(&page("2026-11-28T06:00:01.500Z", "three agents"));
        let c = tag(&page("2026-11-28T06:00:01.500Z", "four agents"));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(tag(b"[1]"), tag(b"[2]"));
        assert!(tag(b"{}").to_str().unwrap().starts_with("W/\""));
    }

    #[test]
    fn if_none_match_takes_a_list_weak_or_strong_tags_and_a_star() {
        let tag = HeaderValue::from_static("W/\"00000000000000ab\"");
        let wanted = |text: &'static str| HeaderValue::from_static(text);
        assert!(matches(&wanted("W/\"00000000000000ab\""), &tag));
        assert!(matches(&wanted("\"00000000000000ab\""), &tag));
        assert!(matches(&wanted("\"x\", W/\"00000000000000ab\""), &tag));
        assert!(matches(&wanted("*"), &tag));
        assert!(!matches(&wanted("W/\"00000000000000ac\""), &tag));
    }
}
