//! The audit log: who (a person, a key, Discord, the service) did what to which object of a
//! workspace, from which address, with the before and after of what changed. Entries are
//! numbered per workspace and each carries the hash of the one before it, so an edited or
//! removed entry breaks the chain where it was ([`verify`]).

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The `prev_hash` of a workspace's first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// Entries one page of `GET /api/audit` holds at most.
pub const MAX_PAGE: u32 = 500;
/// Characters a before or after value keeps at most (a role prompt is long); the cut is marked.
pub const MAX_VALUE_CHARS: usize = 20_000;

/// What is recorded, before it has its place in the chain.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAuditEntry {
    pub actor_kind: String,
    pub actor_id: String,
    pub actor_label: String,
    pub address: Option<String>,
    pub action: String,
    pub target_kind: String,
    pub target_id: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

/// One entry of the log as stored and shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditEntry {
    pub workspace_id: String,
    /// 1, 2, 3, ... per workspace, in the order the changes were recorded.
    pub seq: i64,
    pub at: DateTime<Utc>,
    /// `user`, `key`, `discord`, `stripe` or `service`.
    pub actor_kind: String,
    pub actor_id: String,
    /// How the actor read then: an email, a key's name, a Discord user id.
    pub actor_label: String,
    /// The client's address, where the change came through HTTP.
    pub address: Option<String>,
    /// What was done: `agent.updated`, `member.removed`, `key.created`, ...
    pub action: String,
    pub target_kind: String,
    pub target_id: String,
    /// The object's settings before the change (secrets masked); `null` when it is new.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub before: Option<Value>,
    /// And after it; `null` when it is gone.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub after: Option<Value>,
    /// The hash of the entry before this one ([`GENESIS`] for the first).
    pub prev_hash: String,
    /// SHA-256 over `prev_hash` and this entry's fields ([`entry_hash`]).
    pub hash: String,
}

impl NewAuditEntry {
    /// The entry at `seq`, after the entry whose hash is `prev_hash`.
    pub fn chained(
        self,
        workspace_id: &str,
        seq: i64,
        at: DateTime<Utc>,
        prev_hash: &str,
    ) -> AuditEntry {
        let mut entry = AuditEntry {
            workspace_id: workspace_id.to_owned(),
            seq,
            at,
            actor_kind: self.actor_kind,
            actor_id: self.actor_id,
            actor_label: self.actor_label,
            address: self.address,
            action: self.action,
            target_kind: self.target_kind,
            target_id: self.target_id,
            before: self.before.map(masked),
            after: self.after.map(masked),
            prev_hash: prev_hash.to_owned(),
            hash: String::new(),
        };
        entry.hash = entry_hash(&entry);
        entry
    }
}

/// The hash of an entry: SHA-256, in hex, of its previous hash and its fields as a JSON array
/// (the same on every node and in every client that checks the chain).
pub fn entry_hash(entry: &AuditEntry) -> String {
    let fields = serde_json::json!([
        entry.workspace_id,
        entry.seq,
        entry.at.to_rfc3339_opts(SecondsFormat::Micros, true),
        entry.actor_kind,
        entry.actor_id,
        entry.actor_label,
        entry.address,
        entry.action,
        entry.target_kind,
        entry.target_id,
        entry.before,
        entry.after,
    ]);
    let mut hasher = Sha256::new();
    hasher.update(entry.prev_hash.as_bytes());
    hasher.update(b"\n");
    hasher.update(fields.to_string().as_bytes());
    hex::encode(hasher.finalize())
}

/// Where a chain breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// The entry at which the chain stops holding.
    pub seq: i64,
    pub reason: String,
}

/// What checking a chain found: the entries it covers, its last hash, and where it breaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Verified {
    /// Whether every entry checked holds.
    pub intact: bool,
    pub entries: u64,
    pub first_seq: Option<i64>,
    pub last_seq: Option<i64>,
    /// Keep it: an entry removed from the end later shows as a different last hash.
    pub last_hash: Option<String>,
    /// The first entry at which the chain stops holding, and why.
    pub broken_at: Option<i64>,
    pub reason: Option<String>,
}

/// Checks a chain a batch at a time, in `seq` order: each hash is its entry's, each entry
/// follows the one before it (`seq` one higher, `prev_hash` its hash). The first may follow
/// entries removed by retention (its `prev_hash` is then taken as given) unless it is entry 1.
#[derive(Debug, Default)]
pub struct Checker {
    entries: u64,
    first: Option<i64>,
    last: Option<(i64, String)>,
    broken: Option<Broken>,
}

impl Checker {
    /// Checks the next entries; the first break found is kept (and returned).
    pub fn check(&mut self, entries: &[AuditEntry]) -> Result<(), Broken> {
        for entry in entries {
            if let Some(broken) = &self.broken {
                return Err(broken.clone());
            }
            if let Err(broken) = self.follows(entry) {
                self.broken = Some(broken.clone());
                return Err(broken);
            }
            self.entries += 1;
            self.first.get_or_insert(entry.seq);
            self.last = Some((entry.seq, entry.hash.clone()));
        }
        Ok(())
    }

    fn follows(&self, entry: &AuditEntry) -> Result<(), Broken> {
        let broken = |reason: String| Err(Broken { seq: entry.seq, reason });
        if entry_hash(entry) != entry.hash {
            return broken("its hash does not match its contents: it was edited".into());
        }
        match &self.last {
            None if entry.seq == 1 && entry.prev_hash != GENESIS => {
                broken("the first entry does not start the chain".into())
            }
            Some((seq, _)) if entry.seq != seq + 1 => {
                broken(format!("entries {} to {} are missing", seq + 1, entry.seq - 1))
            }
            Some((_, hash)) if &entry.prev_hash != hash => {
                broken("it does not follow the entry before it".into())
            }
            _ => Ok(()),
        }
    }

    /// What the entries checked so far amount to.
    pub fn verified(&self) -> Verified {
        Verified {
            intact: self.broken.is_none(),
            entries: self.entries,
            first_seq: self.first,
            last_seq: self.last.as_ref().map(|(seq, _)| *seq),
            last_hash: self.last.as_ref().map(|(_, hash)| hash.clone()),
            broken_at: self.broken.as_ref().map(|b| b.seq),
            reason: self.broken.as_ref().map(|b| b.reason.clone()),
        }
    }
}

/// Checks a whole chain at once ([`Checker`]).
pub fn verify(entries: &[AuditEntry]) -> Result<Verified, Broken> {
    let mut checker = Checker::default();
    checker.check(entries)?;
    Ok(checker.verified())
}

/// Secrets never reach the log: any field whose name says it holds one is masked, at any
/// depth; long texts are cut.
pub fn masked(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, value)| {
                    let secret = ["token", "secret", "password", "private_key"]
                        .iter()
                        .any(|word| key.to_ascii_lowercase().contains(word));
                    let value = if secret && !value.is_null() && !value.is_boolean() {
                        Value::String("***".into())
                    } else {
                        masked(value)
                    };
                    (key, value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(masked).collect()),
        Value::String(text) if text.chars().count() > MAX_VALUE_CHARS => {
            let kept: String = text.chars().take(MAX_VALUE_CHARS).collect();
            Value::String(format!("{kept}… (cut)"))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(action: &str) -> NewAuditEntry {
        NewAuditEntry {
            actor_kind: "user".into(),
            actor_id: "u1".into(),
            actor_label: "ada@example.com".into(),
            address: Some("127.0.0.1".into()),
            action: action.into(),
            target_kind: "agent".into(),
            target_id: "writer".into(),
            before: Some(serde_json::json!({"role_prompt": "old"})),
            after: Some(serde_json::json!({"role_prompt": "new", "bot_token": "abc"})),
        }
    }

    fn chain(n: i64) -> Vec<AuditEntry> {
        let mut entries: Vec<AuditEntry> = Vec::new();
        for seq in 1..=n {
            let prev = entries.last().map_or(GENESIS.to_owned(), |e| e.hash.clone());
            entries.push(entry("agent.updated").chained("w", seq, crate::domain::now(), &prev));
        }
        entries
    }

    #[test]
    fn an_intact_chain_verifies_and_names_its_head() {
        let entries = chain(3);
        let verified = verify(&entries).unwrap();
        assert_eq!((verified.entries, verified.last_seq), (3, Some(3)));
        assert_eq!(verified.last_hash.as_deref(), Some(entries[2].hash.as_str()));
        assert_eq!(entries[0].after.as_ref().unwrap()["bot_token"], "***", "secrets are masked");
    }

    #[test]
    fn an_edited_or_removed_entry_breaks_the_chain_where_it_was() {
        let mut edited = chain(3);
        edited[1].actor_label = "mallory@example.com".into();
        assert_eq!(verify(&edited).unwrap_err().seq, 2);
        let mut rehashed = chain(3);
        rehashed[1].action = "agent.deleted".into();
        rehashed[1].hash = entry_hash(&rehashed[1]);
        assert_eq!(verify(&rehashed).unwrap_err().seq, 3, "the next entry no longer follows");
        let mut removed = chain(3);
        removed.remove(1);
        assert_eq!(verify(&removed).unwrap_err().seq, 3);
        let mut first_gone = chain(3);
        first_gone.remove(0);
        assert!(verify(&first_gone).is_ok(), "retention removes from the start");
        let mut forged = chain(1);
        forged[0].prev_hash = "f".repeat(64);
        forged[0].hash = entry_hash(&forged[0]);
        assert_eq!(verify(&forged).unwrap_err().seq, 1);
    }
}
