//! Discord's rate limits, learned from its headers.
//!
//! Limits are per bot token. Each route belongs to a bucket (`X-RateLimit-Bucket`), and each
//! bucket is counted separately per top-level resource (the channel or guild id in the path).
//! Before a request the limiter waits while its bucket is known to be empty, or while the
//! token is under a global block, and keeps the token under 50 requests per second. After a
//! response it records what the headers say; a 429 of any scope blocks until its
//! `retry_after`. A token that was refused with 401 is never used again until it is replaced.
//! Discord bans an IP address that makes 10,000 invalid requests (401, 403, 429 other than
//! `shared`) in ten minutes; the limiter stops calling Discord at half that.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;
use std::time::Duration;

use reqwest::header::HeaderMap;
use tokio::time::Instant;

/// Requests per second Discord allows one bot across all routes.
pub(super) const GLOBAL_PER_SECOND: u32 = 50;
/// Invalid requests in [`INVALID_WINDOW`] after which this process stops calling Discord.
pub(super) const INVALID_BUDGET: usize = 5_000;
pub(super) const INVALID_WINDOW: Duration = Duration::from_secs(600);

/// Identifies a token without keeping it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenKey(u64);

impl TokenKey {
    pub fn of(token: &str) -> Self {
        let mut hasher = DefaultHasher::new();
        token.hash(&mut hasher);
        Self(hasher.finish())
    }
}

/// One request's place in the limits: its token, route template and top-level resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Slot {
    pub token: TokenKey,
    pub route: &'static str,
    pub major: String,
}

#[derive(Debug)]
pub struct RateLimiter {
    state: Mutex<State>,
    invalid_budget: usize,
}

impl Default for RateLimiter {
    fn default() -> Self {
        Self::with_invalid_budget(INVALID_BUDGET)
    }
}

#[derive(Debug, Default)]
struct State {
    /// Route template to Discord's bucket id, once a response named it.
    buckets_of_routes: HashMap<(TokenKey, &'static str), String>,
    buckets: HashMap<(TokenKey, String, String), Bucket>,
    globals: HashMap<TokenKey, Global>,
    refused: HashSet<TokenKey>,
    /// When each recent invalid request was answered, oldest first.
    invalid: VecDeque<Instant>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    remaining: u32,
    reset_at: Instant,
    /// `X-RateLimit-Limit` and the longest `Reset-After` seen: enough to start the next window
    /// locally instead of letting everyone through when the last one ends.
    limit: Option<u32>,
    window: Duration,
}

#[derive(Debug, Clone, Copy)]
struct Global {
    blocked_until: Option<Instant>,
    window_start: Instant,
    sent: u32,
}

/// Why a request may not be sent at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The token was refused with 401 and has not been replaced.
    Token,
    /// Too many invalid requests lately; calls resume after `until`.
    Paused { until: Instant },
}

/// What a response said about the limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observed {
    pub status: u16,
    /// `retry_after` from a 429 body (seconds, fractional), preferred over the header.
    pub retry_after: Option<f64>,
    /// A 429 body's `global` flag.
    pub global: bool,
}

impl RateLimiter {
    pub fn new() -> Self {
        Self::default()
    }

    /// A limiter that pauses after `budget` invalid requests in ten minutes.
    pub fn with_invalid_budget(budget: usize) -> Self {
        Self { state: Mutex::new(State::default()), invalid_budget: budget }
    }

    /// Waits until `slot` may send, then reserves its place.
    pub async fn acquire(&self, slot: &Slot) -> Result<(), Refused> {
        loop {
            let wait = self.try_reserve(slot, Instant::now())?;
            match wait {
                None => return Ok(()),
                Some(until) => tokio::time::sleep_until(until).await,
            }
        }
    }

    /// Records a response's headers and status.
    pub fn observe(&self, slot: &Slot, headers: &HeaderMap, observed: Observed) {
        let now = Instant::now();
        let mut state = self.lock();
        let shared = header(headers, "x-ratelimit-scope") == Some("shared");
        if matches!(observed.status, 401 | 403) || (observed.status == 429 && !shared) {
            state.invalid.push_back(now);
        }
        if observed.status == 401 {
            state.refused.insert(slot.token);
            return;
        }
        if let Some(bucket) = header(headers, "x-ratelimit-bucket") {
            state.buckets_of_routes.insert((slot.token, slot.route), bucket.to_owned());
        }
        let key = state.bucket_key(slot);
        let remaining =
            header(headers, "x-ratelimit-remaining").and_then(|v| v.parse::<u32>().ok());
        let reset_after = header(headers, "x-ratelimit-reset-after").and_then(seconds);
        let limit = header(headers, "x-ratelimit-limit").and_then(|v| v.parse::<u32>().ok());
        if let (Some(remaining), Some(reset_after)) = (remaining, reset_after) {
            let bucket = state.buckets.entry(key.clone()).or_insert(Bucket {
                remaining,
                reset_at: now,
                limit,
                window: reset_after,
            });
            // Responses may arrive out of order; the lower count is the safer one.
            let fresh_window = bucket.reset_at <= now;
            bucket.remaining =
                if fresh_window { remaining } else { bucket.remaining.min(remaining) };
            bucket.reset_at = now + reset_after;
            bucket.limit = limit.or(bucket.limit);
            bucket.window = bucket.window.max(reset_after);
        }
        if observed.status == 429 {
            let retry_after = observed
                .retry_after
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .or_else(|| header(headers, "retry-after").and_then(seconds))
                .unwrap_or(Duration::from_secs(1));
            let global = observed.global
                || header(headers, "x-ratelimit-global")
                    .is_some_and(|v| v.eq_ignore_ascii_case("true"))
                || header(headers, "x-ratelimit-scope") == Some("global");
            let until = now + retry_after;
            if global {
                state.global(slot.token, now).blocked_until = Some(until);
            } else {
                let bucket = state.buckets.entry(key).or_insert(Bucket {
                    remaining: 0,
                    reset_at: until,
                    limit: None,
                    window: retry_after,
                });
                bucket.remaining = 0;
                bucket.reset_at = until;
            }
        }
    }

    /// Forgets that a token was refused (it was replaced or proved valid again).
    pub fn forgive(&self, token: TokenKey) {
        self.lock().refused.remove(&token);
    }

    fn try_reserve(&self, slot: &Slot, now: Instant) -> Result<Option<Instant>, Refused> {
        let mut state = self.lock();
        if state.refused.contains(&slot.token) {
            return Err(Refused::Token);
        }
        while state.invalid.front().is_some_and(|at| *at + INVALID_WINDOW <= now) {
            state.invalid.pop_front();
        }
        if state.invalid.len() >= self.invalid_budget {
            let until = state.invalid.front().map_or(now, |oldest| *oldest + INVALID_WINDOW);
            return Err(Refused::Paused { until });
        }
        let key = state.bucket_key(slot);
        let global = state.global(slot.token, now);
        if let Some(until) = global.blocked_until.filter(|until| *until > now) {
            return Ok(Some(until));
        }
        if now >= global.window_start + Duration::from_secs(1) {
            global.window_start = now;
            global.sent = 0;
        }
        if global.sent >= GLOBAL_PER_SECOND {
            return Ok(Some(global.window_start + Duration::from_secs(1)));
        }
        if let Some(bucket) = state.buckets.get_mut(&key) {
            if bucket.reset_at <= now {
                // The known window ended without news: assume a fresh one like the last.
                if let Some(limit) = bucket.limit {
                    bucket.remaining = limit;
                    bucket.reset_at = now + bucket.window;
                }
            }
            if bucket.reset_at > now {
                if bucket.remaining == 0 {
                    return Ok(Some(bucket.reset_at));
                }
                bucket.remaining -= 1;
            }
        }
        state.global(slot.token, now).sent += 1;
        Ok(None)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state stays consistent even if a holder panicked: every update is one assignment.
        crate::sync::lock(&self.state)
    }
}

impl State {
    fn bucket_key(&self, slot: &Slot) -> (TokenKey, String, String) {
        let bucket = self
            .buckets_of_routes
            .get(&(slot.token, slot.route))
            .cloned()
            .unwrap_or_else(|| slot.route.to_owned());
        (slot.token, bucket, slot.major.clone())
    }

    fn global(&mut self, token: TokenKey, now: Instant) -> &mut Global {
        self.globals.entry(token).or_insert(Global {
            blocked_until: None,
            window_start: now,
            sent: 0,
        })
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn seconds(value: &str) -> Option<Duration> {
    value.trim().parse::<f64>().ok().and_then(|s| Duration::try_from_secs_f64(s).ok())
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn slot(major: &str) -> Slot {
        Slot {
            token: TokenKey::of("t"),
            route: "POST /channels/{id}/messages",
            major: major.into(),
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn ok() -> Observed {
        Observed { status: 200, retry_after: None, global: false }
    }

    #[tokio::test(start_paused = true)]
    async fn an_empty_bucket_waits_for_its_reset_and_other_channels_do_not() {
        let limiter = RateLimiter::new();
        limiter.acquire(&slot("1")).await.unwrap();
        limiter.observe(
            &slot("1"),
            &headers(&[
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset-after", "2.5"),
                ("x-ratelimit-bucket", "abc"),
            ]),
            ok(),
        );
        let now = Instant::now();
        assert_eq!(
            limiter.try_reserve(&slot("1"), now).unwrap(),
            Some(now + Duration::from_secs_f64(2.5))
        );
        assert_eq!(limiter.try_reserve(&slot("2"), now).unwrap(), None);
        limiter.acquire(&slot("1")).await.unwrap();
        assert!(Instant::now() >= now + Duration::from_secs_f64(2.5));
    }

    #[tokio::test(start_paused = true)]
    async fn remaining_requests_are_counted_down_locally() {
        let limiter = RateLimiter::new();
        limiter.observe(
            &slot("1"),
            &headers(&[("x-ratelimit-remaining", "2"), ("x-ratelimit-reset-after", "5")]),
            ok(),
        );
        let now = Instant::now();
        assert_eq!(limiter.try_reserve(&slot("1"), now).unwrap(), None);
        assert_eq!(limiter.try_reserve(&slot("1"), now).unwrap(), None);
        assert!(limiter.try_reserve(&slot("1"), now).unwrap().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_window_ends_the_next_one_is_counted_from_the_known_limit() {
        let limiter = RateLimiter::new();
        let known = headers(&[
            ("x-ratelimit-limit", "2"),
            ("x-ratelimit-remaining", "1"),
            ("x-ratelimit-reset-after", "1"),
        ]);
        limiter.observe(&slot("1"), &known, ok());
        tokio::time::advance(Duration::from_secs(2)).await;
        let now = Instant::now();
        assert_eq!(limiter.try_reserve(&slot("1"), now).unwrap(), None);
        assert_eq!(limiter.try_reserve(&slot("1"), now).unwrap(), None);
        assert_eq!(
            limiter.try_reserve(&slot("1"), now).unwrap(),
            Some(now + Duration::from_secs(1)),
            "a third request in the new window waits"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_blocks_its_bucket_or_everything_when_global() {
        let limiter = RateLimiter::new();
        let now = Instant::now();
        limiter.observe(
            &slot("1"),
            &headers(&[("retry-after", "3")]),
            Observed { status: 429, retry_after: Some(0.75), global: false },
        );
        assert_eq!(
            limiter.try_reserve(&slot("1"), now).unwrap(),
            Some(now + Duration::from_millis(750))
        );
        assert_eq!(limiter.try_reserve(&slot("2"), now).unwrap(), None);

        limiter.observe(
            &slot("2"),
            &headers(&[("retry-after", "4"), ("x-ratelimit-global", "true")]),
            Observed { status: 429, retry_after: None, global: false },
        );
        assert_eq!(
            limiter.try_reserve(&slot("3"), now).unwrap(),
            Some(now + Duration::from_secs(4))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_more_than_fifty_requests_a_second_per_token() {
        let limiter = RateLimiter::new();
        let now = Instant::now();
        for i in 0..GLOBAL_PER_SECOND {
            assert_eq!(limiter.try_reserve(&slot(&i.to_string()), now).unwrap(), None);
        }
        assert_eq!(
            limiter.try_reserve(&slot("x"), now).unwrap(),
            Some(now + Duration::from_secs(1))
        );
        let other = Slot { token: TokenKey::of("other"), ..slot("x") };
        assert_eq!(limiter.try_reserve(&other, now).unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn too_many_invalid_requests_pause_all_calls_for_the_window() {
        let limiter = RateLimiter::with_invalid_budget(3);
        let forbidden = Observed { status: 403, retry_after: None, global: false };
        limiter.observe(&slot("1"), &HeaderMap::new(), forbidden);
        let shared = headers(&[("x-ratelimit-scope", "shared"), ("retry-after", "0")]);
        limiter.observe(
            &slot("2"),
            &shared,
            Observed { status: 429, retry_after: Some(0.0), global: false },
        );
        limiter.observe(&slot("3"), &HeaderMap::new(), forbidden);
        assert_eq!(limiter.acquire(&slot("4")).await, Ok(()), "a shared 429 is not invalid");
        let first = Instant::now();
        limiter.observe(&slot("5"), &HeaderMap::new(), forbidden);
        let other = Slot { token: TokenKey::of("another bot"), ..slot("6") };
        assert!(
            matches!(limiter.acquire(&other).await, Err(Refused::Paused { .. })),
            "the ban is per address"
        );
        tokio::time::advance(INVALID_WINDOW).await;
        assert_eq!(limiter.acquire(&other).await, Ok(()));
        let _ = first;
    }

    #[tokio::test]
    async fn a_refused_token_is_not_used_again_until_forgiven() {
        let limiter = RateLimiter::new();
        limiter.observe(
            &slot("1"),
            &HeaderMap::new(),
            Observed { status: 401, retry_after: None, global: false },
        );
        assert_eq!(limiter.acquire(&slot("2")).await, Err(Refused::Token));
        limiter.forgive(TokenKey::of("t"));
        assert_eq!(limiter.acquire(&slot("2")).await, Ok(()));
    }
}
