//! Abuse limits, kept per node: sign-ins (login and register) per client address, sign-in
//! attempts per account (so guessing one account's password from many addresses is as slow as
//! from one), and requests per signed-in user. Both are GCRA limits from `governor`: a burst of the per-minute figure,
//! then one more every `60 / n` seconds.

use std::hash::Hash;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota};

use agentcore::Principal;
use agentcore::domain::user::Email;

use crate::AppState;
use crate::config::LimitsConfig;
use crate::error::ApiError;

pub(crate) struct Limits {
    sign_ins: Option<Keyed<IpAddr>>,
    accounts: Option<Keyed<String>>,
    /// Per person, or per API key.
    users: Option<Keyed<String>>,
    trust_forwarded_for: bool,
}

impl std::fmt::Debug for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limits")
            .field("sign_ins", &self.sign_ins.is_some())
            .field("users", &self.users.is_some())
            .field("trust_forwarded_for", &self.trust_forwarded_for)
            .finish()
    }
}

impl Limits {
    pub(crate) fn new(config: LimitsConfig, trust_forwarded_for: bool) -> Self {
        Self {
            sign_ins: Keyed::per_minute(config.auth_per_minute),
            accounts: Keyed::per_minute(config.sign_ins_per_account_per_minute),
            users: Keyed::per_minute(config.requests_per_minute),
            trust_forwarded_for,
        }
    }

    /// One sign-in attempt for the account `email` (as typed): refused with the wait when the
    /// account had its budget this minute, from whatever addresses. Counted before the
    /// password is checked, so it also bounds the hashing one account can cause.
    pub(crate) fn account(&self, email: &str) -> Result<(), ApiError> {
        let Some(limit) = &self.accounts else { return Ok(()) };
        // The key an address signs in under; longer than any address, it is no one's.
        let key: String = Email::login_keys(email).swap_remove(0).chars().take(256).collect();
        limit.check(&key).inspect_err(|_| tracing::warn!("sign-in limit of one account reached"))
    }

    /// One request of the caller (a person, or an API key on its own): refused with the wait
    /// when they are over the limit.
    pub(crate) fn caller(&self, who: &Principal) -> Result<(), ApiError> {
        let Some(limit) = &self.users else { return Ok(()) };
        let (kind, id) = who.actor.kind_and_id();
        limit.check(&format!("{kind}:{id}"))
    }

    /// The address the request came from: the last `X-Forwarded-For` hop (the one the trusted
    /// proxy added) when so configured, else the peer. In-process calls have none.
    pub(crate) fn client(&self, request: &Parts) -> Option<IpAddr> {
        let forwarded = || {
            let hops = request.headers.get_all("x-forwarded-for").into_iter();
            hops.filter_map(|value| value.to_str().ok())
                .flat_map(|value| value.split(','))
                .filter_map(|hop| hop.trim().parse::<IpAddr>().ok())
                .next_back()
        };
        let peer = || request.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
        if self.trust_forwarded_for { forwarded().or_else(peer) } else { peer() }
    }
}

/// Taken first by login and register: a limit per client address, so guessing passwords or
/// mass-registering from one place is slow, and argon2 cannot be used to exhaust the CPU. It
/// runs before the body is read.
#[derive(Debug)]
pub(crate) struct SignIn;

impl FromRequestParts<AppState> for SignIn {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let limits = &state.http.limits;
        if let Some(limit) = &limits.sign_ins
            && let Some(client) = limits.client(parts)
            && let Err(refused) = limit.check(&client)
        {
            tracing::warn!(%client, "sign-in rate limit reached");
            return Err(refused);
        }
        Ok(SignIn)
    }
}

struct Keyed<K: Hash + Eq + Clone> {
    limiter: DefaultKeyedRateLimiter<K>,
    checks: AtomicU32,
}

impl<K: Hash + Eq + Clone> Keyed<K> {
    /// `None` when `per_minute` is 0: no limit.
    fn per_minute(per_minute: u32) -> Option<Self> {
        NonZeroU32::new(per_minute).map(|n| Self {
            limiter: DefaultKeyedRateLimiter::keyed(Quota::per_minute(n)),
            checks: AtomicU32::new(0),
        })
    }

    fn check(&self, key: &K) -> Result<(), ApiError> {
        // Forget keys that are back to a full burst now and then, so the map stays the size
        // of the recent callers.
        if self.checks.fetch_add(1, Ordering::Relaxed) % 4096 == 4095 {
            self.limiter.retain_recent();
        }
        self.limiter.check_key(key).map_err(|not_until| {
            ApiError::RateLimited(not_until.wait_time_from(self.limiter.clock().now()))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_burst_of_the_limit_then_refusals_per_key() {
        let limit = Keyed::per_minute(3).unwrap();
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        for _ in 0..3 {
            assert!(limit.check(&a).is_ok());
        }
        let refused = limit.check(&a);
        assert!(
            matches!(refused, Err(ApiError::RateLimited(wait))
                if wait > Duration::from_secs(15) && wait <= Duration::from_secs(20)),
            "{refused:?}"
        );
        assert!(limit.check(&b).is_ok(), "another address has its own budget");
        assert!(Keyed::<IpAddr>::per_minute(0).is_none(), "0 is no limit");
    }
}
