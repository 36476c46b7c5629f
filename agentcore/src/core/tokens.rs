//! This node's cache of what authenticating a request reads: users' token versions, members'
//! roles and API keys, so that checking a request costs no database read on the hot path. A
//! logout, a change of members or a key's revocation forgets the entry here at once and tells
//! every node through the store's notifications (PostgreSQL), each of which forgets it too. An
//! entry is trusted for [`WHILE_LISTENING`] while this node hears those notifications, and for
//! [`UNHEARD`] otherwise (SQLite, where another process may share the file; a node without its
//! listener): either way a revocation reaches every node within a second. Losing or regaining
//! the listener empties the caches.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{RwLock, RwLockWriteGuard};
use std::time::{Duration, Instant};

use crate::domain::user::UserId;
use crate::domain::workspace::{Role, WorkspaceId};

/// How long an entry is trusted while revocations are heard (a safety net only: a revocation
/// arrives as a notification within milliseconds).
pub(crate) const WHILE_LISTENING: Duration = Duration::from_secs(60);
/// How long an entry is trusted when revocations cannot be heard.
pub(crate) const UNHEARD: Duration = Duration::from_millis(900);
/// Entries kept at most; past it the cache starts again empty.
const MAX_ENTRIES: usize = 100_000;

/// What a node remembers of who may do what.
#[derive(Debug, Default)]
pub(crate) struct AccessCache {
    /// A user's token version.
    pub(crate) tokens: Revocable<UserId, i64>,
    /// A member's role in a workspace; `None`: not a member.
    pub(crate) members: Revocable<(WorkspaceId, UserId), Option<Role>>,
    /// An API key by id, as stored (its hash, workspace, role, expiry).
    pub(crate) keys: Revocable<String, super::access::KeyGrant>,
}

impl AccessCache {
    /// Revocations are heard from now on (`true`), or no longer (`false`); either way the
    /// ones sent meanwhile may be lost, so everything is forgotten.
    pub(crate) fn set_listening(&self, listening: bool) {
        self.tokens.set_listening(listening);
        self.members.set_listening(listening);
        self.keys.set_listening(listening);
    }

    /// Who belongs to `workspace`, or with which role, changed.
    pub(crate) fn forget_members(&self, workspace: &WorkspaceId) {
        self.members.forget_where(|(of, _)| of == workspace);
    }
}

/// Values read from the database, trusted for a while and forgotten when revoked.
#[derive(Debug)]
pub(crate) struct Revocable<K, V> {
    /// Read by every request, written on misses and revocations.
    entries: RwLock<HashMap<K, (V, Instant)>>,
    /// Whether this node hears revocations now.
    listening: AtomicBool,
    /// Bumped by every forget: a value read before a revocation is not kept after it.
    generation: AtomicU64,
}

impl<K, V> Default for Revocable<K, V> {
    fn default() -> Self {
        Self {
            entries: RwLock::new(HashMap::new()),
            listening: AtomicBool::new(false),
            generation: AtomicU64::new(0),
        }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> Revocable<K, V> {
    /// The value, if known and still trusted.
    pub(crate) fn get(&self, key: &K) -> Option<V> {
        let trusted =
            if self.listening.load(Ordering::Acquire) { WHILE_LISTENING } else { UNHEARD };
        let entries = crate::sync::read(&self.entries);
        let (value, at) = entries.get(key)?;
        (at.elapsed() < trusted).then(|| value.clone())
    }

    /// Where reads start: pass it to [`Self::remember`].
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Keeps a value read from the database, unless something was forgotten since the read
    /// started (the read may predate a revocation).
    pub(crate) fn remember(&self, key: &K, value: V, read_from: u64) {
        let mut entries = self.write();
        if self.generation.load(Ordering::Acquire) != read_from {
            return;
        }
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(key.clone(), (value, Instant::now()));
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<K, (V, Instant)>> {
        crate::sync::write(&self.entries)
    }

    /// The entry was revoked (here or on another node).
    pub(crate) fn forget(&self, key: &K) {
        let mut entries = self.write();
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.remove(key);
    }

    /// Every entry whose key matches was revoked.
    pub(crate) fn forget_where(&self, revoked: impl Fn(&K) -> bool) {
        let mut entries = self.write();
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.retain(|key, _| !revoked(key));
    }

    fn set_listening(&self, listening: bool) {
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
        let cache = Revocable::<UserId, i64>::default();
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
        let cache = Revocable::<UserId, i64>::default();
        cache.set_listening(true);
        cache.remember(&user(2), 3, cache.generation());
        cache.set_listening(false);
        assert_eq!(cache.get(&user(2)), None);
        cache.remember(&user(2), 3, cache.generation());
        assert_eq!(cache.get(&user(2)), Some(3));
    }

    #[test]
    fn an_old_entry_is_not_trusted_without_the_listener() {
        let cache = Revocable::<UserId, i64>::default();
        cache.write().insert(user(3), (1, Instant::now() - UNHEARD));
        assert_eq!(cache.get(&user(3)), None);
        cache.set_listening(true);
        cache.write().insert(user(3), (1, Instant::now() - UNHEARD));
        assert_eq!(cache.get(&user(3)), Some(1), "trusted longer while listening");
    }
}
