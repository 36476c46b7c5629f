//! Shared rate limits: the operator's requests and tokens per window for a provider (or one of
//! its models), and the rules that decide, from what the database holds, whether a caller may
//! send its call now or must wait, and until when.
//!
//! Fairness: callers that wait are queued per scope (a ticket each: one per agent, as an agent
//! runs one task at a time), and a free slot goes to the waiting agent served least recently
//! (one not served within a window first), the oldest ticket first among equals: a round
//! robin over the agents that wait. See docs/decisions.md.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// The most requests per window a limit may allow.
pub const MAX_REQUESTS: u32 = 1_000_000;
/// The most tokens per window a limit may allow.
pub const MAX_TOKENS: i64 = 10_000_000_000;
/// The longest window; the default is a minute, so the limits read "per minute".
pub const MAX_WINDOW: Duration = Duration::from_secs(3_600);
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);
/// How long a waiting caller's ticket outlives the moment it said it would look again: a
/// caller that went away (its task timed out, its node died) stops holding others back then.
pub const TICKET_GRACE: Duration = Duration::from_secs(2);

/// One limit: requests and tokens (input and output) per window; `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateLimit {
    pub requests: Option<u32>,
    pub tokens: Option<i64>,
}

impl RateLimit {
    /// `<requests>/<tokens>`, either `-` for unlimited (`500/200000`, `60/-`, `-/-`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let shape = || {
            format!(
                "'{text}' is not <requests>/<tokens> per window, each a whole number or '-' \
                 (e.g. 500/200000, or 60/- for requests only)"
            )
        };
        let (requests, tokens) = text.split_once('/').ok_or_else(shape)?;
        let requests = match requests.trim() {
            "-" => None,
            n => Some(n.parse::<u32>().map_err(|_| shape())?),
        };
        let tokens = match tokens.trim() {
            "-" => None,
            n => Some(n.parse::<i64>().map_err(|_| shape())?),
        };
        if requests.is_some_and(|n| n == 0 || n > MAX_REQUESTS) {
            return Err(format!("requests per window must be from 1 to {MAX_REQUESTS}"));
        }
        if tokens.is_some_and(|n| n <= 0 || n > MAX_TOKENS) {
            return Err(format!("tokens per window must be from 1 to {MAX_TOKENS}"));
        }
        Ok(Self { requests, tokens })
    }

    /// As [`RateLimit::parse`] reads it.
    pub fn text(&self) -> String {
        let or_dash = |n: Option<String>| n.unwrap_or_else(|| "-".into());
        format!(
            "{}/{}",
            or_dash(self.requests.map(|n| n.to_string())),
            or_dash(self.tokens.map(|n| n.to_string()))
        )
    }
}

/// The operator's limits (`models.rate_limits`), by scope: a provider's name (`openai`) or a
/// model's full name (`openai:gpt-4o`); and the window they count over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimits {
    pub window: Duration,
    pub limits: BTreeMap<String, RateLimit>,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self { window: DEFAULT_WINDOW, limits: BTreeMap::new() }
    }
}

impl RateLimits {
    /// The scopes a call of `provider`'s `model` (the provider's own name for it) counts
    /// against, with their limits: the provider's, then the model's; none when neither is
    /// limited (the call then touches no shared state at all).
    pub fn for_call(&self, provider: &str, model: &str) -> Vec<(String, RateLimit)> {
        let full = format!("{provider}:{model}");
        [provider, full.as_str()]
            .into_iter()
            .filter_map(|scope| self.limits.get(scope).map(|limit| (scope.to_owned(), *limit)))
            .collect()
    }
}

/// A waiting agent in one scope's queue: who, since when, and when it was last served in the
/// scope (`None`: not within a window).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub owner: String,
    pub agent: String,
    pub since: DateTime<Utc>,
    pub served: Option<DateTime<Utc>>,
}

impl Waiting {
    fn order(&self) -> (Option<DateTime<Utc>>, DateTime<Utc>, &str, &str) {
        (self.served, self.since, &self.owner, &self.agent)
    }
}

/// How many waiting agents come before `me` in the queue: those served less recently (one not
/// served within a window before any that was), then those with older tickets (then by name,
/// so every node agrees).
pub fn rank(queue: &[Waiting], me: &Waiting) -> usize {
    queue.iter().filter(|other| other.order() < me.order()).count()
}

/// One scope as the database holds it at the caller's look, within the current window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    pub now: DateTime<Utc>,
    /// The provider's own signal: no call before this.
    pub blocked_until: Option<DateTime<Utc>>,
    /// Slots granted in the window (which ends `window` after each).
    pub requests: i64,
    pub tokens: i64,
    /// The queue position of the caller ([`rank`]).
    pub rank: usize,
}

/// What the caller does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Take the slot now.
    Grant,
    /// Look again then: the `n`th oldest grant's end frees a slot for this caller (`n` from
    /// 0), or the provider's block ends.
    Wait(Why),
}

/// Why a caller waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// The provider said to wait (`Retry-After`, or its remaining count at 0), until then.
    Provider(DateTime<Utc>),
    /// The requests of the window are taken; the grant at this index (oldest first) frees
    /// this caller's slot when its window ends.
    Requests { grant: usize },
    /// The tokens of the window are taken; the oldest grant's end frees some.
    Tokens,
}

/// Whether a call that needs `tokens` may go now under `limit`.
///
/// Requests: the caller gets one of the window's free slots only when fewer waiters come before
/// it than there are free slots. Tokens: the window's tokens plus the call's must fit, except
/// for the window's first call (a call larger than the whole limit still goes, alone).
pub fn decide(limit: &RateLimit, standing: &Standing, tokens: i64) -> Decision {
    if let Some(until) = standing.blocked_until.filter(|until| *until > standing.now) {
        return Decision::Wait(Why::Provider(until));
    }
    if let Some(max) = limit.requests {
        let free = usize::try_from(i64::from(max) - standing.requests).unwrap_or(0);
        if standing.rank >= free {
            let taken = usize::try_from(standing.requests).unwrap_or(0);
            let grant = (standing.rank - free).min(taken.saturating_sub(1));
            return Decision::Wait(Why::Requests { grant });
        }
    }
    if let Some(max) = limit.tokens
        && standing.tokens > 0
        && standing.tokens.saturating_add(tokens) > max
    {
        return Decision::Wait(Why::Tokens);
    }
    Decision::Grant
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + seconds, 0).unwrap()
    }

    fn standing(requests: i64, tokens: i64, rank: usize) -> Standing {
        Standing { now: at(0), blocked_until: None, requests, tokens, rank }
    }

    #[test]
    fn limits_read_as_requests_and_tokens_with_bounds() {
        assert_eq!(
            RateLimit::parse("500/200000"),
            Ok(RateLimit { requests: Some(500), tokens: Some(200_000) })
        );
        assert_eq!(
            RateLimit::parse(" 60 / - "),
            Ok(RateLimit { requests: Some(60), tokens: None })
        );
        assert_eq!(RateLimit::parse("-/-"), Ok(RateLimit::default()));
        assert!(RateLimit::parse("0/-").unwrap_err().contains("from 1 to 1000000"));
        assert!(RateLimit::parse("-/0").unwrap_err().contains("tokens"));
        assert!(RateLimit::parse("2000000/-").is_err());
        assert!(RateLimit::parse("500").unwrap_err().contains("<requests>/<tokens>"));
        assert!(RateLimit::parse("x/1").is_err());
        assert_eq!(RateLimit::parse("60/-").unwrap().text(), "60/-");
    }

    #[test]
    fn a_call_counts_against_its_provider_and_its_model() {
        let limits = RateLimits {
            window: DEFAULT_WINDOW,
            limits: [
                ("openai".to_owned(), RateLimit::parse("100/-").unwrap()),
                ("openai:gpt-4o".to_owned(), RateLimit::parse("10/-").unwrap()),
            ]
            .into(),
        };
        let scopes: Vec<String> =
            limits.for_call("openai", "gpt-4o").into_iter().map(|(s, _)| s).collect();
        assert_eq!(scopes, ["openai", "openai:gpt-4o"]);
        assert_eq!(limits.for_call("openai", "gpt-4o-mini").len(), 1);
        assert!(limits.for_call("anthropic", "claude").is_empty());
    }

    #[test]
    fn the_queue_puts_the_agent_served_least_recently_first_then_the_oldest() {
        let waiting = |agent: &str, since: i64, served: Option<i64>| Waiting {
            owner: "w".into(),
            agent: agent.into(),
            since: at(since),
            served: served.map(at),
        };
        let queue = [
            waiting("just-served", 0, Some(-1)),
            waiting("served-before", 3, Some(-5)),
            waiting("old", 1, None),
            waiting("new", 2, None),
        ];
        assert_eq!(rank(&queue, &queue[2]), 0);
        assert_eq!(rank(&queue, &queue[3]), 1);
        assert_eq!(rank(&queue, &queue[1]), 2);
        assert_eq!(rank(&queue, &queue[0]), 3, "served last, it waits although it came first");
    }

    #[test]
    fn free_slots_go_to_the_first_in_the_queue() {
        let limit = RateLimit { requests: Some(3), tokens: None };
        assert_eq!(decide(&limit, &standing(1, 0, 1), 10), Decision::Grant);
        assert_eq!(
            decide(&limit, &standing(1, 0, 2), 10),
            Decision::Wait(Why::Requests { grant: 0 }),
            "two before it take the two free slots: the oldest grant's end frees its own"
        );
        assert_eq!(
            decide(&limit, &standing(3, 0, 0), 10),
            Decision::Wait(Why::Requests { grant: 0 })
        );
        assert_eq!(
            decide(&limit, &standing(3, 0, 2), 10),
            Decision::Wait(Why::Requests { grant: 2 })
        );
        assert_eq!(
            decide(&limit, &standing(3, 0, 9), 10),
            Decision::Wait(Why::Requests { grant: 2 }),
            "beyond the window's grants, the newest one's end"
        );
    }

    #[test]
    fn tokens_must_fit_except_for_the_window_s_first_call() {
        let limit = RateLimit { requests: None, tokens: Some(1_000) };
        assert_eq!(decide(&limit, &standing(1, 600, 0), 400), Decision::Grant);
        assert_eq!(decide(&limit, &standing(1, 600, 0), 401), Decision::Wait(Why::Tokens));
        assert_eq!(decide(&limit, &standing(0, 0, 0), 5_000), Decision::Grant);
    }

    #[test]
    fn the_provider_s_block_holds_everyone_until_it_ends() {
        let limit = RateLimit::default();
        let blocked = Standing { blocked_until: Some(at(5)), ..standing(0, 0, 0) };
        assert_eq!(decide(&limit, &blocked, 1), Decision::Wait(Why::Provider(at(5))));
        let over = Standing { blocked_until: Some(at(-1)), ..standing(0, 0, 0) };
        assert_eq!(decide(&limit, &over, 1), Decision::Grant);
    }
}
