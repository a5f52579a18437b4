//! The grants a scoped connection holds, and the windows they make in the pipeline's
//! scope tables.
//!
//! A client that creates its queue pair through the switch presenting a grant (not the
//! switch's admin token) gets a *scoped* connection: it belongs to the grant's client
//! and memory node, holds one grant per table (a session's one queue pair to a node
//! serves all its tables; a newer grant for a table replaces that table's), and may
//! touch only the grants' extents with the grants' rights. Each grant's windows stop
//! counting when it expires, so a revoked client loses access within one grant TTL,
//! as on the memory node itself.

use std::collections::BTreeMap;

use dmkv_api::grant::{Grant, GrantAccess, GrantWindow};
use serde::{Deserialize, Serialize};

use crate::model::WindowAction;

/// The memory node region a scoped connection's windows are offsets into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionSpan {
    /// The region's memory key.
    pub rkey: u32,
    /// Its first address.
    pub base_va: u64,
    /// Its length in bytes.
    pub len: u64,
}

/// One held grant, as much of it as the switch needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldGrant {
    /// Its extents, offsets into the region.
    pub windows: Vec<GrantWindow>,
    /// Its rights.
    pub access: GrantAccess,
    /// When it expires, unix milliseconds.
    pub expires_at_ms: u64,
}

/// Why a grant cannot be given to a connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnGrantError {
    /// The grant is another client's.
    #[error("connection {conn} belongs to client {owner:?}, the grant is for {client:?}")]
    OtherClient {
        /// The connection.
        conn: u8,
        /// Its client.
        owner: String,
        /// The grant's client.
        client: String,
    },
    /// The grant is for another memory node.
    #[error(
        "connection {conn} goes to memory node {memnode}, the grant is for memory node {granted}"
    )]
    OtherMemnode {
        /// The connection.
        conn: u8,
        /// Its memory node.
        memnode: u64,
        /// The grant's.
        granted: u64,
    },
    /// A grant older than the one held for the table.
    #[error("the grant for table {table:?} expires at {offered}, before the one held ({held})")]
    Older {
        /// The table.
        table: String,
        /// The offered grant's expiry.
        offered: u64,
        /// The held one's.
        held: u64,
    },
}

/// The grants of one scoped connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnGrants {
    /// The client it belongs to.
    pub client_id: String,
    /// The memory node it goes to.
    pub memnode_id: u64,
    /// The region its windows are in.
    pub region: RegionSpan,
    /// Held grants by table.
    pub by_table: BTreeMap<String, HeldGrant>,
}

fn held(g: &Grant) -> HeldGrant {
    HeldGrant {
        windows: g.windows.clone(),
        access: g.access,
        expires_at_ms: g.expires_at_ms,
    }
}

impl ConnGrants {
    /// The grants of a connection created with `grant`, into `region`.
    pub fn new(grant: &Grant, region: RegionSpan) -> ConnGrants {
        ConnGrants {
            client_id: grant.client_id.clone(),
            memnode_id: grant.memnode_id,
            region,
            by_table: BTreeMap::from([(grant.table.clone(), held(grant))]),
        }
    }

    /// Adds `grant` (a table not held yet) or replaces the held grant of its table.
    pub fn replace(&mut self, conn: u8, grant: &Grant) -> Result<(), ConnGrantError> {
        if grant.client_id != self.client_id {
            return Err(ConnGrantError::OtherClient {
                conn,
                owner: self.client_id.clone(),
                client: grant.client_id.clone(),
            });
        }
        if grant.memnode_id != self.memnode_id {
            return Err(ConnGrantError::OtherMemnode {
                conn,
                memnode: self.memnode_id,
                granted: grant.memnode_id,
            });
        }
        if let Some(h) = self.by_table.get(&grant.table)
            && h.expires_at_ms > grant.expires_at_ms
        {
            return Err(ConnGrantError::Older {
                table: grant.table.clone(),
                offered: grant.expires_at_ms,
                held: h.expires_at_ms,
            });
        }
        self.by_table.insert(grant.table.clone(), held(grant));
        Ok(())
    }

    /// Forgets the grants expired at `now_ms`; whether any was.
    pub fn expire(&mut self, now_ms: u64) -> bool {
        let before = self.by_table.len();
        self.by_table.retain(|_, g| g.expires_at_ms > now_ms);
        self.by_table.len() != before
    }

    /// The earliest expiry of the held grants (`None`: none held).
    pub fn next_expiry(&self) -> Option<u64> {
        self.by_table.values().map(|g| g.expires_at_ms).min()
    }

    /// The windows the unexpired grants make, as `(start, end, action)` with
    /// addresses in the region: extents clipped to the region, and overlapping or
    /// adjacent extents of the same rights merged into one window (a request may
    /// span two adjacent leases of a table). Where a read-only extent overlaps a
    /// read-write one, the overlap is read-only (the narrower right wins).
    pub fn windows(&self, now_ms: u64) -> Vec<(u64, u64, WindowAction)> {
        let region_end = self.region.base_va.saturating_add(self.region.len);
        let mut spans: Vec<(u64, u64, bool)> = Vec::new();
        for g in self.by_table.values() {
            if g.expires_at_ms <= now_ms {
                continue;
            }
            let write = g.access == GrantAccess::ReadWrite;
            for w in &g.windows {
                let Some(start) = self.region.base_va.checked_add(w.offset) else {
                    continue;
                };
                let end = start.saturating_add(w.len).min(region_end);
                if start < end {
                    spans.push((start, end, write));
                }
            }
        }
        // Read-only spans cut what they overlap out of read-write ones.
        let read_only: Vec<(u64, u64)> =
            spans.iter().filter(|s| !s.2).map(|s| (s.0, s.1)).collect();
        let mut read_write: Vec<(u64, u64)> = Vec::new();
        for &(s, e, _) in spans.iter().filter(|s| s.2) {
            let mut pieces = vec![(s, e)];
            for &(rs, re) in &read_only {
                pieces = pieces
                    .into_iter()
                    .flat_map(|(ps, pe)| {
                        if re <= ps || pe <= rs {
                            vec![(ps, pe)]
                        } else {
                            [(ps, rs.max(ps)), (re.min(pe), pe)]
                                .into_iter()
                                .filter(|(a, b)| a < b)
                                .collect()
                        }
                    })
                    .collect();
            }
            read_write.extend(pieces);
        }
        let mut out = Vec::new();
        for (ranges, write) in [(read_only, false), (read_write, true)] {
            for (s, e) in merge(ranges) {
                out.push((s, e, write));
            }
        }
        out.sort_unstable();
        out.into_iter()
            .enumerate()
            .map(|(i, (s, e, write))| {
                (
                    s,
                    e,
                    WindowAction {
                        id: u16::try_from(i + 1).unwrap_or(u16::MAX),
                        read: true,
                        write,
                    },
                )
            })
            .collect()
    }
}

/// Sorted, with overlapping and adjacent ranges joined.
fn merge(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (s, e) in ranges {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const BASE: u64 = 0x1000_0000;

    fn grant(table: &str, access: GrantAccess, windows: &[(u64, u64)], expires: u64) -> Grant {
        Grant {
            client_id: "c".into(),
            memnode_id: 1,
            table: table.into(),
            windows: windows
                .iter()
                .map(|&(offset, len)| GrantWindow { offset, len })
                .collect(),
            access,
            expires_at_ms: expires,
            nonce: [0; 16],
        }
    }

    fn region() -> RegionSpan {
        RegionSpan {
            rkey: 9,
            base_va: BASE,
            len: 1 << 20,
        }
    }

    #[test]
    fn windows_are_region_addresses_merged_by_rights() {
        let mut c = ConnGrants::new(
            &grant(
                "a",
                GrantAccess::ReadWrite,
                &[(0, 64), (64, 64), (4096, 128)],
                100,
            ),
            region(),
        );
        c.replace(3, &grant("b", GrantAccess::ReadOnly, &[(8192, 64)], 100))
            .unwrap();
        let w = c.windows(50);
        let spans: Vec<_> = w
            .iter()
            .map(|(s, e, a)| (*s - BASE, *e - BASE, a.write))
            .collect();
        assert_eq!(
            spans,
            vec![(0, 128, true), (4096, 4224, true), (8192, 8256, false)]
        );
        // Distinct ids, all readable.
        assert!(w.iter().all(|(_, _, a)| a.read));
        assert_eq!(w.iter().map(|x| x.2.id).collect::<Vec<_>>(), vec![1, 2, 3]);
    }

    #[test]
    fn expired_grants_make_no_windows_and_older_ones_are_refused() {
        let mut c = ConnGrants::new(
            &grant("a", GrantAccess::ReadWrite, &[(0, 64)], 100),
            region(),
        );
        assert!(c.windows(100).is_empty());
        assert!(matches!(
            c.replace(3, &grant("a", GrantAccess::ReadWrite, &[(0, 64)], 90)),
            Err(ConnGrantError::Older { .. })
        ));
        let mut other = grant("a", GrantAccess::ReadWrite, &[(0, 64)], 200);
        other.client_id = "d".into();
        assert!(matches!(
            c.replace(3, &other),
            Err(ConnGrantError::OtherClient { .. })
        ));
        let mut elsewhere = grant("a", GrantAccess::ReadWrite, &[(0, 64)], 200);
        elsewhere.memnode_id = 2;
        assert!(matches!(
            c.replace(3, &elsewhere),
            Err(ConnGrantError::OtherMemnode { .. })
        ));
        assert!(c.expire(100));
        assert!(c.by_table.is_empty());
    }

    proptest! {
        /// Every byte of the windows is granted with at least the window's rights, every
        /// granted byte is in a window, and windows never overlap.
        #[test]
        fn windows_cover_exactly_the_granted_bytes(
            grants in proptest::collection::vec(
                (any::<bool>(), proptest::collection::vec((0u64..64, 1u64..16), 1..4)),
                1..5,
            ),
        ) {
            let mut c: Option<ConnGrants> = None;
            for (i, (rw, ws)) in grants.iter().enumerate() {
                let access = if *rw { GrantAccess::ReadWrite } else { GrantAccess::ReadOnly };
                let g = grant(&format!("t{i}"), access, ws, 1000);
                match c.as_mut() {
                    None => c = Some(ConnGrants::new(&g, region())),
                    Some(c) => c.replace(1, &g).unwrap(),
                }
            }
            let c = c.unwrap();
            let w = c.windows(0);
            for pair in w.windows(2) {
                prop_assert!(pair[0].1 <= pair[1].0);
            }
            for byte in 0u64..96 {
                let readable = grants.iter().any(|(_, ws)| ws.iter().any(|(o, l)| *o <= byte && byte < o + l));
                let ro = grants.iter().any(|(rw, ws)| !rw && ws.iter().any(|(o, l)| *o <= byte && byte < o + l));
                let hit = w.iter().find(|(s, e, _)| *s <= BASE + byte && BASE + byte < *e);
                prop_assert_eq!(hit.is_some(), readable, "byte {}", byte);
                if let Some((_, _, a)) = hit {
                    prop_assert_eq!(a.write, readable && !ro, "byte {}", byte);
                }
            }
        }
    }
}
