//! `agentctl audit`: the workspace's audit log a page at a time, exported whole, and its chain
//! of hashes checked here (from the server's export or a file), so the check trusts no server.

use std::io::Write;

use agentcore::domain::audit::{AuditEntry, Checker, Verified};

use super::Context;
use crate::api::query;
use crate::cli::AuditCommand;
use crate::client::Client;
use crate::failure::{Failure, Kind};

const EXPORT: &str = "/api/audit/export";

pub(crate) async fn run(
    cx: &Context,
    client: &Client,
    command: AuditCommand,
) -> Result<(), Failure> {
    match command {
        AuditCommand::List { action, actor, target_kind, target_id, limit, before } => {
            let pairs = [
                ("action", action),
                ("actor", actor),
                ("target_kind", target_kind),
                ("target_id", target_id),
                ("limit", Some(limit.to_string())),
                ("before", before.map(|b| b.to_string())),
            ];
            cx.emit(&client.audit(&query(&pairs)).await?)
        }
        AuditCommand::Export => {
            let mut incoming = client.stream(EXPORT, None).await?;
            let mut stdout = std::io::stdout().lock();
            while let Some(chunk) = incoming.chunk().await? {
                if stdout.write_all(&chunk).is_err() {
                    break;
                }
            }
            Ok(())
        }
        AuditCommand::Verify { file, head } => {
            let mut lines = Lines { head: head.clone(), ..Lines::default() };
            match file {
                Some(path) => {
                    let text = std::fs::read_to_string(&path).map_err(|error| {
                        Failure::usage(format!("cannot read {}: {error}", path.display()))
                    })?;
                    lines.feed(text.as_bytes())?;
                }
                None => {
                    let mut incoming = client.stream(EXPORT, None).await?;
                    while let Some(chunk) = incoming.chunk().await? {
                        lines.feed(&chunk)?;
                    }
                }
            }
            let (verified, head_found) = lines.finish()?;
            let raw = serde_json::to_string(&verified).map_err(Failure::internal)?;
            cx.show(&raw, &verified)?;
            judge(&verified, head.is_some() && !head_found)
        }
    }
}

/// Exit 5 when the chain is broken, or no longer holds the head kept earlier.
fn judge(verified: &Verified, head_lost: bool) -> Result<(), Failure> {
    if let (Some(at), Some(reason)) = (verified.broken_at, &verified.reason) {
        return Err(Failure::watched(
            Kind::Conflict,
            format!("The audit log is broken at entry {at}: {reason}."),
        ));
    }
    if head_lost {
        return Err(Failure::watched(
            Kind::Conflict,
            "The audit log no longer contains the head given: entries were removed from its end.",
        ));
    }
    Ok(())
}

/// NDJSON read as it arrives, each entry checked in order.
#[derive(Default)]
struct Lines {
    pending: Vec<u8>,
    checker: Checker,
    /// A hash the log must still hold, and whether it did.
    head: Option<String>,
    head_found: bool,
}

impl Lines {
    fn feed(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        self.pending.extend_from_slice(bytes);
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            self.entry(&line)?;
        }
        Ok(())
    }

    fn entry(&mut self, line: &[u8]) -> Result<(), Failure> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let entry: AuditEntry = serde_json::from_slice(line)
            .map_err(|error| Failure::usage(format!("an entry is not one of the log: {error}")))?;
        self.head_found |= self.head.as_deref() == Some(entry.hash.as_str());
        // A break is kept in the checker and reported at the end.
        let _ = self.checker.check(std::slice::from_ref(&entry));
        Ok(())
    }

    fn finish(mut self) -> Result<(Verified, bool), Failure> {
        let rest = std::mem::take(&mut self.pending);
        self.entry(&rest)?;
        Ok((self.checker.verified(), self.head_found))
    }
}
