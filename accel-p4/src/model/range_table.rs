//! Range-match tables: per connection, disjoint address ranges, each with an action;
//! fixed capacity, written only by the control plane.
//!
//! On a switch this is a ternary/range table keyed by `(conn: exact, address: range)`;
//! the model keeps the entries sorted by `(conn, start)` and finds the one covering an
//! address with one ordered lookup. Ranges of one connection never overlap: an insert
//! that would overlap is refused, so a lookup has at most one hit (no priorities).

use std::collections::BTreeMap;

use crate::spec::TableSpec;

use super::tables::TableError;

/// One entry: `[start, end)` of connection `conn`, and its action data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeEntry<A> {
    /// The connection.
    pub conn: u8,
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// The action's data.
    pub action: A,
}

/// Why a range could not be added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    /// The table has no free entry.
    #[error(transparent)]
    Table(#[from] TableError),
    /// The range is empty or wraps around.
    #[error("the range [{start:#x}, {end:#x}) is empty")]
    Empty {
        /// First address.
        start: u64,
        /// One past the last.
        end: u64,
    },
    /// The range overlaps one the connection already has.
    #[error("connection {conn}: [{start:#x}, {end:#x}) overlaps an existing range")]
    Overlap {
        /// The connection.
        conn: u8,
        /// First address.
        start: u64,
        /// One past the last.
        end: u64,
    },
}

/// A `(conn, address range)` table of at most `spec.size` entries.
#[derive(Debug, Clone)]
pub struct RangeTable<A> {
    spec: &'static TableSpec,
    /// `(conn, start)` → `(end, action)`.
    entries: BTreeMap<(u8, u64), (u64, A)>,
}

impl<A: Clone> RangeTable<A> {
    /// An empty table.
    pub fn new(spec: &'static TableSpec) -> RangeTable<A> {
        RangeTable {
            spec,
            entries: BTreeMap::new(),
        }
    }

    /// The table's spec.
    pub fn spec(&self) -> &'static TableSpec {
        self.spec
    }

    /// The entry of `conn` whose range covers `addr` (the data-plane match).
    pub fn lookup(&self, conn: u8, addr: u64) -> Option<RangeEntry<A>> {
        let (&(c, start), (end, action)) = self.entries.range(..=(conn, addr)).next_back()?;
        (c == conn && addr < *end).then(|| RangeEntry {
            conn,
            start,
            end: *end,
            action: action.clone(),
        })
    }

    /// Adds `[start, end)` for `conn`.
    pub fn insert(&mut self, conn: u8, start: u64, end: u64, action: A) -> Result<(), RangeError> {
        if start >= end {
            return Err(RangeError::Empty { start, end });
        }
        let overlaps = self
            .entries
            .range((conn, 0)..(conn, end))
            .any(|(&(_, s), (e, _))| s < end && start < *e);
        if overlaps {
            return Err(RangeError::Overlap { conn, start, end });
        }
        if self.entries.len() >= self.spec.size {
            return Err(TableError::Full(self.spec.name).into());
        }
        self.entries.insert((conn, start), (end, action));
        Ok(())
    }

    /// Removes every range of `conn`.
    pub fn remove_conn(&mut self, conn: u8) {
        self.entries.retain(|&(c, _), _| c != conn);
    }

    /// Every entry, in `(conn, start)` order.
    pub fn entries(&self) -> impl Iterator<Item = RangeEntry<A>> + '_ {
        self.entries
            .iter()
            .map(|(&(conn, start), (end, action))| RangeEntry {
                conn,
                start,
                end: *end,
                action: action.clone(),
            })
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::TABLE_CONN_WINDOW;
    use proptest::prelude::*;

    #[test]
    fn lookups_find_the_covering_range_of_the_connection_only() {
        let mut t = RangeTable::new(&TABLE_CONN_WINDOW);
        t.insert(1, 100, 200, 'a').unwrap();
        t.insert(1, 300, 400, 'b').unwrap();
        t.insert(2, 150, 250, 'c').unwrap();
        assert_eq!(t.lookup(1, 100).map(|e| e.action), Some('a'));
        assert_eq!(t.lookup(1, 199).map(|e| e.action), Some('a'));
        assert_eq!(t.lookup(1, 200), None);
        assert_eq!(t.lookup(1, 299), None);
        assert_eq!(t.lookup(1, 399).map(|e| e.action), Some('b'));
        assert_eq!(t.lookup(2, 160).map(|e| e.action), Some('c'));
        assert_eq!(t.lookup(3, 160), None);
        assert_eq!(t.lookup(0, 160), None);
        assert!(matches!(
            t.insert(1, 199, 201, 'x'),
            Err(RangeError::Overlap { .. })
        ));
        assert!(matches!(
            t.insert(1, 5, 5, 'x'),
            Err(RangeError::Empty { .. })
        ));
        t.insert(1, 200, 300, 'd').unwrap();
        t.remove_conn(1);
        assert_eq!(t.len(), 1);
        assert_eq!(t.lookup(1, 150), None);
    }

    proptest! {
        /// A lookup hits exactly when some inserted range of that connection covers the
        /// address, and then returns that range.
        #[test]
        fn lookup_agrees_with_a_linear_scan(
            ranges in proptest::collection::vec((0u8..3, 0u64..1000, 1u64..100), 0..40),
            probes in proptest::collection::vec((0u8..3, 0u64..1100), 50),
        ) {
            let mut t = RangeTable::new(&TABLE_CONN_WINDOW);
            let mut kept = Vec::new();
            for (i, (conn, start, len)) in ranges.into_iter().enumerate() {
                if t.insert(conn, start, start + len, i).is_ok() {
                    kept.push((conn, start, start + len, i));
                }
            }
            for (conn, addr) in probes {
                let want = kept
                    .iter()
                    .find(|(c, s, e, _)| *c == conn && *s <= addr && addr < *e)
                    .map(|k| k.3);
                prop_assert_eq!(t.lookup(conn, addr).map(|e| e.action), want);
            }
        }
    }
}
