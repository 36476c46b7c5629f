//! This node's cache of users' token versions, so that checking a bearer token costs no
//! database read on the hot path. A logout forgets the user here at once and tells every node
//! through the store's notifications (PostgreSQL), each of which forgets them too. An entry is
//! trusted for [`WHILE_LISTENING`] while this node hears those notifications, and for
//! [`UNHEARD`] otherwise (SQLite, where another process may share the file; a node without its
//! listener): either way a revocation reaches every node within a second. Losing or regaining
//! the listener empties the cache.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{RwLock, RwLockWriteGuard};
use std::time::{Duration, Instant};

use crate::domain::user::UserId;

/// How long an entry is trusted while revocations are heard (a safety net only: a revocation
/// arrives as a notification within milliseconds).
pub(crate) const WHILE_LISTENING: Duration = Duration::from_secs(60);
/// How long an entry is trusted when revocations cannot be heard.
pub(crate) const UNHEARD: Duration = Duration::from_millis(900);
/// Entries kept at most; past it the cache starts again empty.
const MAX_ENTRIES: usize = 100_000;

#[derive(Debug, Default)]
pub(crate) struct TokenVersions {
    /// Read by every request, written on misses and revocations.
    entries: RwLock<HashMap<UserId, (i64, Instant)>>,
    /// Whether this node hears revocations now.
    listening: AtomicBool,
    /// Bumped by every forget: a version read before a revocation is not kept after it.
    generation: AtomicU64,
}

impl TokenVersions {
    /// The user's token version, if known and still trusted.
    pub(crate) fn get(&self, user: &UserId) -> Option<i64> {
        let trusted =
            if self.listening.load(Ordering::Acquire) { WHILE_LISTENING } else { UNHEARD };
        let entries = crate::sync::read(&self.entries);
        let (version, at) = entries.get(user)?;
        (at.elapsed() < trusted).then_some(*version)
    }

    /// Where reads start: pass it to [`Self::remember`].
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Keeps a version read from the database, unless something was forgotten since the read
    /// started (the read may predate a revocation).
    pub(crate) fn remember(&self, user: &UserId, version: i64, read_from: u64) {
        let mut entries = self.write();
        if self.generation.load(Ordering::Acquire) != read_from {
            return;
        }
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(user.clone(), (version, Instant::now()));
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<UserId, (i64, Instant)>> {
        crate::sync::write(&self.entries)
    }

    /// A user's tokens were revoked (here or on another node).
    pub(crate) fn forget(&self, user: &UserId) {
        let mut entries = self.write();
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.remove(user);
    }

    /// Revocations are heard from now on (`true`), or no longer (`false`); either way the
    /// ones sent meanwhile may be lost, so everything is forgotten.
    pub(crate) fn set_listening(&self, listening: bool) {
        let mut entries = self.write();
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.clear();
        self.listening.store(listening, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(n: u8) -> UserId {
        UserId::from_trusted(format!("0196a1b2-0000-7000-8000-00000000000{n}"))
    }

    #[test]
    fn a_version_read_before_a_revocation_is_not_kept() {
        let cache = TokenVersions::default();
        cache.set_listening(true);
        let started = cache.generation();
        cache.forget(&user(1));
        cache.remember(&user(1), 0, started);
        assert_eq!(cache.get(&user(1)), None);
        cache.remember(&user(1), 1, cache.generation());
        assert_eq!(cache.get(&user(1)), Some(1));
        cache.forget(&user(1));
        assert_eq!(cache.get(&user(1)), None);
    }

    #[test]
    fn losing_the_listener_forgets_everything_and_shortens_trust() {
        let cache = TokenVersions::default();
        cache.set_listening(true);
        cache.remember(&user(2), 3, cache.generation());
        cache.set_listening(false);
        assert_eq!(cache.get(&user(2)), None);
        cache.remember(&user(2), 3, cache.generation());
        assert_eq!(cache.get(&user(2)), Some(3));
    }

    #[test]
    fn an_old_entry_is_not_trusted_without_the_listener() {
        let cache = TokenVersions::default();
        cache.write().insert(user(3), (1, Instant::now() - UNHEARD));
        assert_eq!(cache.get(&user(3)), None);
        cache.set_listening(true);
        cache.write().insert(user(3), (1, Instant::now() - UNHEARD));
        assert_eq!(cache.get(&user(3)), Some(1), "trusted longer while listening");
    }
}
