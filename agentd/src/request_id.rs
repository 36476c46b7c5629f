//! Request ids: taken from `X-Request-Id` when the client sent a sane one, generated otherwise;
//! echoed on every response, carried by the error body and by every log line of the request.

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

pub const HEADER: &str = "x-request-id";

tokio::task_local! {
    static REQUEST_ID: String;
}

/// The id of the request being handled, if any.
pub fn current() -> Option<String> {
    REQUEST_ID.try_with(Clone::clone).ok()
}

/// Middleware: assigns the id and makes it visible to everything that handles the request.
pub async fn assign(mut request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(HEADER)
        .and_then(|value| value.to_str().ok())
        .filter(|value| acceptable(value))
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
    let header = HeaderValue::from_str(&id).ok();
    if let Some(header) = &header {
        request.headers_mut().insert(HEADER, header.clone());
    }
    let mut response = REQUEST_ID.scope(id, next.run(request)).await;
    if let Some(header) = header {
        response.headers_mut().insert(HEADER, header);
    }
    response
}

/// Up to 128 visible ASCII characters: enough for any tracing system, safe in logs.
fn acceptable(value: &str) -> bool {
    !value.is_empty() && value.len() <= 128 && value.bytes().all(|b| b.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_client_ids_are_replaced() {
        assert!(acceptable("abc-123"));
        assert!(!acceptable(""));
        assert!(!acceptable("has space"));
        assert!(!acceptable(&"x".repeat(129)));
    }
}
