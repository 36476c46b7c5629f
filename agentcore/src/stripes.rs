//! Counts kept per workspace in a fixed space: each workspace's count is one of [`STRIPES`]
//! counters, chosen by a hash of its id, so workspaces sharing a counter move each other's
//! count at times. Made for "has anything of this workspace's changed since?" (a cached read
//! asks), where a move too many costs a hit and a move missed would cost a wrong answer:
//! every bump is seen, and memory stays the same however many workspaces there are.

use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::domain::workspace::WorkspaceId;

/// How many counters the workspaces share.
pub const STRIPES: usize = 256;

/// The counters, with one more for changes to every workspace at once.
#[derive(Debug)]
pub struct Stripes {
    one: [AtomicU64; STRIPES],
    all: AtomicU64,
}

impl Default for Stripes {
    fn default() -> Self {
        Self { one: std::array::from_fn(|_| AtomicU64::new(0)), all: AtomicU64::new(0) }
    }
}

impl Stripes {
    /// Something of `workspace`'s changed.
    pub fn bump(&self, workspace: &WorkspaceId) {
        self.one[stripe(workspace)].fetch_add(1, Ordering::SeqCst);
    }

    /// Anything may have changed, in every workspace.
    pub fn bump_all(&self) {
        self.all.fetch_add(1, Ordering::SeqCst);
    }

    /// A count that moves with every [`Stripes::bump`] of `workspace`, every
    /// [`Stripes::bump_all`], and the bumps of the workspaces sharing its counter.
    pub fn count(&self, workspace: &WorkspaceId) -> u64 {
        // Both only grow, so their sum moves whenever either does.
        self.all.load(Ordering::SeqCst) + self.one[stripe(workspace)].load(Ordering::SeqCst)
    }
}

/// Which counter `workspace` has: the same on every run (SipHash with fixed keys), and ids are the
/// server's to choose, so a tenant cannot aim at another's.
pub fn stripe(workspace: &WorkspaceId) -> usize {
    let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(workspace);
    (hash % STRIPES as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(n: usize) -> WorkspaceId {
        WorkspaceId::from_trusted(format!("w_{n}"))
    }

    #[test]
    fn a_workspaces_count_moves_with_its_bumps_and_every_workspaces_not_another_stripes() {
        let stripes = Stripes::default();
        let one = workspace(1);
        let other = (2..).map(workspace).find(|w| stripe(w) != stripe(&one)).unwrap();
        let sharing = (2..).map(workspace).find(|w| stripe(w) == stripe(&one)).unwrap();
        let (before, others) = (stripes.count(&one), stripes.count(&other));
        stripes.bump(&one);
        assert_eq!(stripes.count(&one), before + 1);
        assert_eq!(stripes.count(&other), others, "another stripe's");
        assert_eq!(stripes.count(&sharing), before + 1, "a workspace sharing the stripe");
        stripes.bump_all();
        assert_eq!(stripes.count(&one), before + 2);
        assert_eq!(stripes.count(&other), others + 1);
    }

    #[test]
    fn workspaces_spread_over_the_stripes() {
        let used: std::collections::HashSet<usize> =
            (0..STRIPES * 8).map(|n| stripe(&workspace(n))).collect();
        assert!(used.len() > STRIPES * 9 / 10, "{} of {STRIPES}", used.len());
    }
}
