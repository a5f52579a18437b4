//! The grants a queue pair holds, and the access scope (own key, windows, rights,
//! expiry) its responder enforces because of them.
//!
//! A queue pair created with a grant belongs to the grant's client; it holds one grant
//! per table (a session's one queue pair to a node serves all its tables), and a newer
//! grant for a table replaces that table's windows. Each window stops serving when its
//! grant expires, so revoking a client's access takes effect within one grant TTL.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dmkv_api::grant::{Grant, GrantAccess};
use verbs::mem::{AccessFlags, AccessScope, MemoryWindow, ScopeViolations};

use crate::api::{QpGrantInfo, RegionDescriptor};

/// The rights a grant's access gives inside its windows.
pub fn rights(access: GrantAccess) -> AccessFlags {
    match access {
        GrantAccess::ReadOnly => AccessFlags::REMOTE_READ,
        GrantAccess::ReadWrite => {
            AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC
        }
    }
}

/// Why a grant cannot be given to a queue pair.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantMismatch {
    /// The grant is for another client than the one the queue pair belongs to.
    #[error("queue pair {qpn} belongs to client {owner:?}, the grant is for {client:?}")]
    OtherClient {
        /// The queue pair.
        qpn: u32,
        /// Its client.
        owner: String,
        /// The grant's client.
        client: String,
    },
    /// The queue pair was created with the admin token and has whole-region access.
    #[error("queue pair {0} was created with the admin token and takes no grants")]
    NotScoped(u32),
    /// No such queue pair.
    #[error("no queue pair {0} ({0:#x}) on this node")]
    NotFound(u32),
    /// The grant is older than the one the queue pair holds for that table.
    #[error("the grant for table {table:?} expires at {offered}, before the one held ({held})")]
    Older {
        /// The table.
        table: String,
        /// The offered grant's expiry.
        offered: u64,
        /// The held grant's expiry.
        held: u64,
    },
}

/// The grants of one queue pair.
#[derive(Debug, Clone)]
pub struct QpGrants {
    client_id: String,
    by_table: BTreeMap<String, Grant>,
    rkey: u32,
}

impl QpGrants {
    /// The grants of a queue pair created with `grant`, whose requests carry `rkey`.
    pub fn new(grant: Grant, rkey: u32) -> QpGrants {
        let mut by_table = BTreeMap::new();
        let client_id = grant.client_id.clone();
        by_table.insert(grant.table.clone(), grant);
        QpGrants {
            client_id,
            by_table,
            rkey,
        }
    }

    /// The client the queue pair belongs to.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The key its requests carry.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    /// Adds `grant` (a table not held yet) or replaces the held grant of its table.
    pub fn replace(&mut self, qpn: u32, grant: Grant) -> Result<(), GrantMismatch> {
        if grant.client_id != self.client_id {
            return Err(GrantMismatch::OtherClient {
                qpn,
                owner: self.client_id.clone(),
                client: grant.client_id,
            });
        }
        if let Some(held) = self.by_table.get(&grant.table)
            && held.expires_at_ms > grant.expires_at_ms
        {
            return Err(GrantMismatch::Older {
                table: grant.table,
                offered: grant.expires_at_ms,
                held: held.expires_at_ms,
            });
        }
        self.by_table.insert(grant.table.clone(), grant);
        Ok(())
    }

    /// The scope these grants make over `region`, as of `now_ms` (unix ms) = `now`.
    pub fn scope(
        &self,
        region: &RegionDescriptor,
        violations: &Arc<ScopeViolations>,
        now_ms: u64,
        now: Instant,
    ) -> AccessScope {
        let region_end = region.base_va.saturating_add(region.len);
        let mut windows = Vec::new();
        for g in self.by_table.values() {
            let expires = now + Duration::from_millis(g.expires_at_ms.saturating_sub(now_ms));
            for w in &g.windows {
                // Extents outside the region name no memory here: dropped.
                let Some(start) = region.base_va.checked_add(w.offset) else {
                    continue;
                };
                let end = start.saturating_add(w.len).min(region_end);
                if start >= end {
                    continue;
                }
                windows.push(MemoryWindow {
                    start,
                    end,
                    rights: rights(g.access),
                    expires: Some(expires),
                });
            }
        }
        AccessScope::new(self.rkey, region.rkey, windows, violations.clone())
    }

    /// What the admin API shows of them.
    pub fn info(&self) -> Vec<QpGrantInfo> {
        self.by_table
            .values()
            .map(|g| QpGrantInfo {
                table: g.table.clone(),
                access: g.access,
                windows: g.windows.len(),
                expires_at_ms: g.expires_at_ms,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dmkv_api::grant::GrantWindow;

    fn grant(client: &str, table: &str, expires_at_ms: u64, access: GrantAccess) -> Grant {
        Grant {
            client_id: client.into(),
            memnode_id: 1,
            table: table.into(),
            windows: vec![
                GrantWindow {
                    offset: 4096,
                    len: 4096,
                },
                // Past the region's end: clipped.
                GrantWindow {
                    offset: 60 * 1024,
                    len: 1 << 20,
                },
            ],
            access,
            expires_at_ms,
            nonce: [0; 16],
        }
    }

    fn region() -> RegionDescriptor {
        RegionDescriptor {
            rkey: 5,
            base_va: 0x1000_0000,
            len: 65536,
            flags: "read,write,atomic".into(),
            read_order: "ascending".into(),
            backing: "anonymous".into(),
            path: None,
            instance: 0,
        }
    }

    #[test]
    fn windows_follow_the_grants_and_are_clipped_to_the_region() {
        let mut g = QpGrants::new(grant("c", "a", 10_000, GrantAccess::ReadOnly), 77);
        let now = Instant::now();
        let v = Arc::new(ScopeViolations::default());
        let s = g.scope(&region(), &v, 1_000, now);
        assert_eq!((s.rkey(), s.region_rkey()), (77, 5));
        assert_eq!(s.windows().len(), 2);
        assert_eq!(s.windows()[0].start, 0x1000_0000 + 4096);
        assert_eq!(s.windows()[1].end, 0x1000_0000 + 65536);
        assert_eq!(s.windows()[0].rights, AccessFlags::REMOTE_READ);
        assert_eq!(s.windows()[0].expires, Some(now + Duration::from_secs(9)));
        // Another table adds windows; a newer grant of a table replaces its own.
        g.replace(1, grant("c", "b", 20_000, GrantAccess::ReadWrite))
            .unwrap();
        g.replace(1, grant("c", "a", 30_000, GrantAccess::ReadWrite))
            .unwrap();
        assert_eq!(g.info().len(), 2);
        assert!(
            g.scope(&region(), &v, 1_000, now)
                .windows()
                .iter()
                .all(|w| w.rights.contains(AccessFlags::REMOTE_WRITE))
        );
        assert!(matches!(
            g.replace(1, grant("c", "a", 5, GrantAccess::ReadWrite)),
            Err(GrantMismatch::Older { .. })
        ));
        assert!(matches!(
            g.replace(1, grant("other", "a", 40_000, GrantAccess::ReadWrite)),
            Err(GrantMismatch::OtherClient { .. })
        ));
    }
}
