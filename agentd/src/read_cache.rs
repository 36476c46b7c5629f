//! The per-node cache of the polled reads (`GET /api/agents` and `GET /api/agents/{id}`,
//! `http.read_cache`): an answer is kept as the bytes the read made, with its `ETag`, and
//! served again to the same caller for the same path and query while it may still be true.
//!
//! The rules (docs/api.md, "Conventions"):
//! - **A client reads its own writes on the node it wrote through.** Every request that may
//!   write (any method but `GET`, `HEAD` and `OPTIONS`) moves the generation of the workspace
//!   it acted in once its answer is made, before the client can have it (every workspace's
//!   when it had no caller, a webhook or a dashboard form, or may act beyond its caller's
//!   workspace, see [`note_writes`]); so does every event this node writes or hears of
//!   ([`Core::event_changes`]: the runtime's work, streams' notifications). An entry is
//!   stamped with its workspace's generation read *before* its read began, so an entry whose
//!   read may have missed a write is never served after that write's answer.
//!   Generations are counted per workspace ([`Stripes`]): one tenant's busy agents do not
//!   end another's kept answers.
//! - **Anything else is seen within [`MAX_AGE`]** (another node, `agentctl --local` on the same
//!   file, a write that announces no event): an entry is served for at most that long after its
//!   read began.
//!
//! Bounds: at most [`ENTRIES`] entries and [`BYTES`] bytes of bodies and keys on a node; a body
//! over [`ENTRY_BYTES`], or a path and query over [`URI_BYTES`], is not kept. When full, entries that can no longer be served are dropped; if
//! that frees no room the new answer is simply not kept. A caller that fills the cache with
//! distinct queries costs the others their hits, never a wrong or a late answer.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use agentcore::domain::workspace::{Actor, Role, WorkspaceId};
use agentcore::stripes::Stripes;
use agentcore::sync::lock;
use agentcore::{Core, Principal};

use crate::AppState;
use crate::error::ApiError;

/// How long after its read began an entry may be served.
pub(crate) const MAX_AGE: Duration = Duration::from_millis(250);
/// Entries kept at most, all callers together.
const ENTRIES: usize = 10_000;
/// Bytes of bodies kept at most.
const BYTES: usize = 64 * 1024 * 1024;
/// The largest body kept.
const ENTRY_BYTES: usize = 1024 * 1024;
/// The longest path and query kept (the agent list's filters and a page's cursor fit).
const URI_BYTES: usize = 1024;

/// The cache (see the module's documentation).
#[derive(Debug)]
pub(crate) struct ReadCache {
    enabled: bool,
    /// Requests that may have written, answered on this node, by the workspace they acted in.
    writes: Stripes,
    entries: Mutex<Entries>,
    /// Answers served from the cache, and answers read (the database asked) while it is on.
    hits: AtomicU64,
    misses: AtomicU64,
}

#[derive(Debug, Default)]
struct Entries {
    map: HashMap<Key, Entry>,
    /// The bodies' and the paths' bytes, all entries together.
    bytes: usize,
    /// When entries that can no longer be served were last dropped.
    swept_at: Option<Instant>,
}

impl Entries {
    fn room_for(&self, size: usize) -> bool {
        self.map.len() < ENTRIES && self.bytes + size <= BYTES
    }
}

/// Whose answer to what: the caller as authenticated (workspace, role, who acts) and the path
/// with its query, byte for byte.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Key {
    workspace: WorkspaceId,
    role: Role,
    actor: Actor,
    uri: String,
}

#[derive(Debug)]
struct Entry {
    generation: Generation,
    read_at: Instant,
    body: Bytes,
    etag: HeaderValue,
}

/// What this node had written in a workspace when a read of it began: requests that may have
/// written, events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Generation {
    writes: u64,
    events: u64,
}

impl ReadCache {
    pub(crate) fn new(enabled: bool) -> Self {
        Self {
            enabled,
            writes: Stripes::default(),
            entries: Mutex::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn generation(&self, core: &Core, workspace: &WorkspaceId) -> Generation {
        Generation { writes: self.writes.count(workspace), events: core.event_changes(workspace) }
    }

    /// Answers served from the cache, and answers read while it is on (`/metrics`).
    pub(crate) fn counts(&self) -> (u64, u64) {
        (self.hits.load(Ordering::Relaxed), self.misses.load(Ordering::Relaxed))
    }

    fn get(&self, key: &Key, generation: Generation, now: Instant) -> Option<(Bytes, HeaderValue)> {
        let entries = lock(&self.entries);
        let entry = entries.map.get(key)?;
        entry.servable(generation, now).then(|| (entry.body.clone(), entry.etag.clone()))
    }

    /// Keeps `entry` under `key`; `generation` tells a workspace's current one (a full cache
    /// drops what no longer matches its own workspace's).
    fn put(
        &self,
        key: Key,
        entry: Entry,
        generation: impl Fn(&WorkspaceId) -> Generation,
        now: Instant,
    ) {
        let size = entry.size(&key);
        if entry.body.len() > ENTRY_BYTES || key.uri.len() > URI_BYTES {
            return;
        }
        let mut entries = lock(&self.entries);
        if let Some(replaced) = entries.map.remove(&key) {
            entries.bytes -= replaced.size(&key);
        }
        if !entries.room_for(size) {
            // At most one sweep per MAX_AGE: by then everything kept before it has aged out,
            // and a full cache of fresh entries is not walked again for every answer.
            if entries.swept_at.is_some_and(|at| now.saturating_duration_since(at) < MAX_AGE) {
                return;
            }
            entries.swept_at = Some(now);
            let Entries { map, bytes, .. } = &mut *entries;
            map.retain(|key, kept| {
                let keep = kept.servable(generation(&key.workspace), now);
                if !keep {
                    *bytes -= kept.size(key);
                }
                keep
            });
            if !entries.room_for(size) {
                return;
            }
        }
        entries.bytes += size;
        entries.map.insert(key, entry);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.entries).map.len()
    }
}

impl Entry {
    /// Nothing was written on this node since its read began, and it is young enough.
    fn servable(&self, generation: Generation, now: Instant) -> bool {
        self.generation == generation && now.saturating_duration_since(self.read_at) < MAX_AGE
    }

    /// What it counts against [`BYTES`], kept under `key`.
    fn size(&self, key: &Key) -> usize {
        self.body.len() + key.uri.len()
    }
}

/// Answers `read` as JSON, from the cache when the rules allow, otherwise by running it (and
/// keeping its answer). `uri` is the request's, as the client sent it.
pub(crate) async fn answer<T: Serialize>(
    state: &AppState,
    who: &Principal,
    uri: &Uri,
    read: impl Future<Output = Result<T, ApiError>>,
) -> Result<Response, ApiError> {
    let cache = &state.http.read_cache;
    if !cache.enabled {
        return Ok(axum::Json(read.await?).into_response());
    }
    let key = Key {
        workspace: who.workspace.clone(),
        role: who.role,
        actor: who.actor.clone(),
        uri: uri.path_and_query().map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned()),
    };
    let read_at = Instant::now();
    let generation = cache.generation(&state.core, &key.workspace);
    if let Some((body, etag)) = cache.get(&key, generation, read_at) {
        cache.hits.fetch_add(1, Ordering::Relaxed);
        return Ok(json(body, Some(etag)));
    }
    cache.misses.fetch_add(1, Ordering::Relaxed);
    let value = read.await?;
    let body = Bytes::from(
        serde_json::to_vec(&value).map_err(|e| agentcore::Error::internal(e.to_string()))?,
    );
    if body.len() > ENTRY_BYTES {
        // Not kept: answered as any read is (`etag` decides on its tag).
        return Ok(json(body, None));
    }
    let etag = crate::etag::tag(&body);
    let entry = Entry { generation, read_at, body: body.clone(), etag: etag.clone() };
    let now = |workspace: &WorkspaceId| cache.generation(&state.core, workspace);
    cache.put(key, entry, now, Instant::now());
    Ok(json(body, Some(etag)))
}

fn json(body: Bytes, etag: Option<HeaderValue>) -> Response {
    let mut response = Response::new(Body::from(body));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(etag) = etag {
        headers.insert(header::ETAG, etag);
    }
    response
}

/// Where a request that may write acted: the workspace its caller was authenticated in,
/// set by [`crate::extract::Caller`] when the request carries this (see [`note_writes`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct ActedIn(Arc<OnceLock<WorkspaceId>>);

impl ActedIn {
    pub(crate) fn set(&self, workspace: &WorkspaceId) {
        // One caller per request; a second extraction names the same workspace.
        let _ = self.0.set(workspace.clone());
    }
}

/// Middleware: a request that may write moves its workspace's generation once its answer is
/// made, or when its handler panics or is dropped (a deadline, a client gone) after it may
/// have written; every workspace's when it had no caller, or when it may act on a workspace
/// other than its caller's (`POST /api/workspaces` makes one, `/api/invites/{token}/accept`
/// joins one: neither changes what an agent list shows today, so this is a margin for what
/// such routes may come to do).
pub(crate) async fn note_writes(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(request).await;
    }
    let acted_in = ActedIn::default();
    let path = request.uri().path();
    let beyond = path.starts_with("/api/workspaces") || path.starts_with("/api/invites");
    if !beyond {
        request.extensions_mut().insert(acted_in.clone());
    }
    let _wrote = Wrote { http: Arc::clone(&state.http), acted_in };
    next.run(request).await
}

/// Moves the generation when dropped: after the answer, an unwinding panic or a cancellation.
struct Wrote {
    http: Arc<crate::Http>,
    acted_in: ActedIn,
}

impl Drop for Wrote {
    fn drop(&mut self) {
        let writes = &self.http.read_cache.writes;
        match self.acted_in.0.get() {
            Some(workspace) => writes.bump(workspace),
            None => writes.bump_all(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: usize) -> Key {
        Key {
            workspace: WorkspaceId::parse("0192f3a4-5b6c-7d8e-9f00-112233445566").unwrap(),
            role: Role::Owner,
            actor: Actor::Service,
            uri: format!("/api/agents?n={n:06}"),
        }
    }

    fn entry(generation: Generation, size: usize, read_at: Instant) -> Entry {
        Entry {
            generation,
            read_at,
            body: Bytes::from(vec![b'x'; size]),
            etag: HeaderValue::from_static("W/\"0\""),
        }
    }

    const NOW: Generation = Generation { writes: 3, events: 7 };

    #[test]
    fn an_entry_is_served_only_in_the_generation_its_read_began_in_and_while_young() {
        let cache = ReadCache::new(true);
        let read_at = Instant::now();
        cache.put(key(1), entry(NOW, 10, read_at), |_| NOW, read_at);
        assert!(cache.get(&key(1), NOW, read_at).is_some());
        assert!(cache.get(&key(2), NOW, read_at).is_none());
        let written = Generation { writes: 4, ..NOW };
        assert!(cache.get(&key(1), written, read_at).is_none(), "a write");
        let evented = Generation { events: 8, ..NOW };
        assert!(cache.get(&key(1), evented, read_at).is_none(), "an event");
        assert!(cache.get(&key(1), NOW, read_at + MAX_AGE / 2).is_some());
        assert!(cache.get(&key(1), NOW, read_at + MAX_AGE).is_none(), "MAX_AGE after its read");
    }

    #[test]
    fn a_full_cache_drops_what_it_cannot_serve_and_otherwise_keeps_no_more() {
        let cache = ReadCache::new(true);
        let at = Instant::now();
        let stale = Generation { writes: 2, ..NOW };
        for n in 0..ENTRIES / 2 {
            cache.put(key(n), entry(stale, 1, at), |_| NOW, at);
        }
        for n in ENTRIES / 2..ENTRIES {
            cache.put(key(n), entry(NOW, 1, at), |_| NOW, at);
        }
        assert_eq!(cache.len(), ENTRIES);
        cache.put(key(ENTRIES), entry(NOW, 1, at), |_| NOW, at);
        assert_eq!(cache.len(), ENTRIES / 2 + 1, "the stale half made room");
        for n in ENTRIES + 1..ENTRIES * 2 {
            cache.put(key(n), entry(NOW, 1, at), |_| NOW, at);
        }
        assert_eq!(cache.len(), ENTRIES, "no more than the bound");
        let last = key(ENTRIES * 2 - 1);
        assert!(cache.get(&last, NOW, at).is_none(), "the last one did not fit");
        // A quarter second on, everything has aged out: the next answer sweeps and fits.
        cache.put(key(0), entry(NOW, 1, at), |_| NOW, at + MAX_AGE);
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn a_full_cache_keeps_what_other_workspaces_can_still_serve() {
        let cache = ReadCache::new(true);
        let at = Instant::now();
        for n in 0..ENTRIES {
            cache.put(key(n), entry(NOW, 1, at), |_| NOW, at);
        }
        let elsewhere = WorkspaceId::parse("0192f3a4-5b6c-7d8e-9f00-665544332211").unwrap();
        let other = || Key { workspace: elsewhere.clone(), ..key(ENTRIES) };
        let others = Generation { writes: 9, ..NOW };
        let current = |workspace: &WorkspaceId| if *workspace == elsewhere { others } else { NOW };
        cache.put(other(), entry(others, 1, at), current, at);
        assert_eq!(cache.len(), ENTRIES, "nothing could be dropped: every entry is servable");
        assert!(cache.get(&other(), others, at).is_none(), "no room for the other workspace's");
        assert!(cache.get(&key(0), NOW, at).is_some(), "the first workspace's are kept");
    }

    #[test]
    fn bodies_and_paths_are_bounded_by_their_bytes_too() {
        let cache = ReadCache::new(true);
        let at = Instant::now();
        let body = ENTRY_BYTES - key(0).uri.len();
        for n in 0..BYTES / ENTRY_BYTES {
            cache.put(key(n), entry(NOW, body, at), |_| NOW, at);
        }
        assert_eq!(lock(&cache.entries).bytes, BYTES);
        cache.put(key(BYTES), entry(NOW, 1, at), |_| NOW, at);
        assert!(cache.get(&key(BYTES), NOW, at).is_none(), "no room");
        cache.put(key(0), entry(NOW, 1, at), |_| NOW, at);
        let replaced = BYTES - body + 1;
        assert_eq!(lock(&cache.entries).bytes, replaced, "a replaced body");
        let large = key(BYTES + 1);
        cache.put(large, entry(NOW, ENTRY_BYTES + 1, at), |_| NOW, at);
        assert!(cache.get(&key(BYTES + 1), NOW, at).is_none(), "a body too large to keep");
        let mut long = key(BYTES + 2);
        long.uri = format!("/api/agents?workspace={}", "w".repeat(URI_BYTES));
        cache.put(long, entry(NOW, 1, at), |_| NOW, at);
        assert_eq!(cache.len(), BYTES / ENTRY_BYTES, "a path too long to keep");
    }
}
