//! The fake model server's enforced rate limit: at most N requests in any window-long span
//! (a sliding log, the strictest reading of "N a minute"). Every answer carries the provider's
//! real rate-limit headers (OpenAI's `x-ratelimit-*-requests`, Anthropic's
//! `anthropic-ratelimit-requests-*`); a request over the limit is answered 429 with
//! `Retry-After` (whole seconds, as providers send it) and those headers at 0, and counted.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug)]
pub(crate) struct Limit {
    requests: usize,
    window: Duration,
    /// When each admitted request of the last window arrived, oldest first.
    admitted: VecDeque<Instant>,
    pub(crate) refused: usize,
}

/// What the limit made of one request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Verdict {
    pub(crate) admitted: bool,
    limit: usize,
    remaining: usize,
    /// Until the oldest request of the window leaves it.
    reset: Duration,
}

impl Limit {
    pub(crate) fn new(requests: usize, window: Duration) -> Self {
        Self { requests, window, admitted: VecDeque::new(), refused: 0 }
    }

    pub(crate) fn admit(&mut self, now: Instant) -> Verdict {
        while self.admitted.front().is_some_and(|at| now.duration_since(*at) >= self.window) {
            self.admitted.pop_front();
        }
        let admitted = self.admitted.len() < self.requests;
        if admitted {
            self.admitted.push_back(now);
        } else {
            self.refused += 1;
        }
        let reset = self.admitted.front().map_or(Duration::ZERO, |oldest| {
            self.window.saturating_sub(now.duration_since(*oldest))
        });
        Verdict {
            admitted,
            limit: self.requests,
            remaining: self.requests - self.admitted.len(),
            reset,
        }
    }
}

impl Verdict {
    /// The whole seconds of `Retry-After`, rounded up.
    pub(crate) fn retry_after(&self) -> u64 {
        self.reset.as_millis().div_ceil(1000) as u64
    }

    /// The rate-limit headers of `format` (`openai` or `anthropic`).
    pub(crate) fn headers(&self, format: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let mut put = |name: &'static str, value: String| {
            headers.insert(name, HeaderValue::from_str(&value).unwrap());
        };
        if format == "openai" {
            put("x-ratelimit-limit-requests", self.limit.to_string());
            put("x-ratelimit-remaining-requests", self.remaining.to_string());
            put("x-ratelimit-reset-requests", format!("{}ms", self.reset.as_millis()));
        } else {
            let reset = chrono::Utc::now() + chrono::Duration::from_std(self.reset).unwrap();
            put("anthropic-ratelimit-requests-limit", self.limit.to_string());
            put("anthropic-ratelimit-requests-remaining", self.remaining.to_string());
            put(
                "anthropic-ratelimit-requests-reset",
                reset.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            );
        }
        headers
    }
}

/// The 429 of a request over the enforced limit, in `format`, with `Retry-After`.
pub(crate) fn refusal(format: &str, verdict: Verdict) -> Response {
    let body = if format == "openai" {
        json!({"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}})
    } else {
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of requests has exceeded your rate limit"}})
    };
    let mut response = (StatusCode::TOO_MANY_REQUESTS, Json(body)).into_response();
    let retry_after = HeaderValue::from_str(&verdict.retry_after().to_string()).unwrap();
    response.headers_mut().insert("retry-after", retry_after);
    response
}

/// `response` with the enforced limit's headers, when one is set.
pub(crate) fn with_limit(
    format: &str,
    verdict: Option<Verdict>,
    mut response: Response,
) -> Response {
    if let Some(verdict) = verdict {
        response.headers_mut().extend(verdict.headers(format));
    }
    response
}
