//! When a superseded Clover node may be handed back for reuse.
//!
//! The writer that links a node after a tail takes over that tail's memory. It may
//! not reuse it while a reader could still arrive there from the key's shortcut
//! word, because the shortcut names a node readers trust without a generation check
//! beyond the version. So the superseded node waits here until the session sees the
//! shortcut name a later version (when it reads the root, advances the shortcut
//! itself, or sweeps); then it goes to the allocator, which holds it for the grace
//! period before reuse. Readers that hold older pointers (cached hints, successor
//! links) validate generation, version, chain id and key, so they reject the
//! memory once it is reused.

use std::time::Instant;

use crate::alloc::Allocation;
use crate::clover::shortcut::{Shortcut, VERSION_MASK, version_before};
use crate::ptr::RemotePtr;

/// A node superseded by a write of this session.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Superseded {
    /// The root of its key.
    pub root: RemotePtr,
    /// Its version.
    pub version: u32,
    /// Its memory and generation.
    pub node: Allocation,
    /// When it was superseded.
    pub since: Instant,
}

/// Superseded nodes waiting for their shortcut to move on.
#[derive(Debug, Default)]
pub(crate) struct Reclaimer {
    pending: Vec<Superseded>,
}

impl Reclaimer {
    /// Remember a superseded node.
    pub(crate) fn supersede(&mut self, s: Superseded) {
        self.pending.push(s);
    }

    /// Remove and return the nodes of `root` that `shortcut` has moved past.
    pub(crate) fn passed(&mut self, root: RemotePtr, shortcut: Shortcut) -> Vec<Superseded> {
        let mut out = Vec::new();
        self.pending.retain(|s| {
            let gone = s.root == root && version_before(s.version & VERSION_MASK, shortcut.version);
            if gone {
                out.push(*s);
            }
            !gone
        });
        out
    }

    /// How many are waiting.
    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }

    /// Up to `max` distinct roots of nodes superseded before `before`, oldest first.
    pub(crate) fn roots_to_check(&self, before: Instant, max: usize) -> Vec<RemotePtr> {
        let mut roots: Vec<RemotePtr> = Vec::new();
        for s in &self.pending {
            if roots.len() >= max {
                break;
            }
            if s.since < before && !roots.contains(&s.root) {
                roots.push(s.root);
            }
        }
        roots
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(version: u32, root: u64) -> Superseded {
        Superseded {
            root: RemotePtr::new(1, root).unwrap(),
            version,
            node: Allocation {
                table: 1,
                memnode: 1,
                va: 4096 + u64::from(version) * 64,
                size: 64,
                generation: 0,
            },
            since: Instant::now(),
        }
    }

    #[test]
    fn released_only_when_passed() {
        let mut r = Reclaimer::default();
        for v in 1..=4 {
            r.supersede(node(v, 0));
        }
        r.supersede(node(1, 64));
        let root = RemotePtr::new(1, 0).unwrap();
        let s = Shortcut::new(RemotePtr::new(1, 640).unwrap(), 64, 3).unwrap();
        let out: Vec<u32> = r.passed(root, s).iter().map(|s| s.version).collect();
        assert_eq!(out, vec![1, 2]);
        assert_eq!(r.len(), 3);
        assert_eq!(
            r.roots_to_check(Instant::now() + std::time::Duration::from_secs(1), 8)
                .len(),
            2
        );
    }
}
