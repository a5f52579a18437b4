//! A mirror kept in step with a table by its change feed: an in-memory map that
//! applies each record only when it is newer, for its key, than what it holds.
//!
//! The lanes of a feed are merged in no particular order, so two writes of one key by
//! different writers may reach a consumer in either order. A record carries the
//! version of the node it wrote (its position in the key's chain), so per key the
//! larger version is the later write: the mirror keeps, per key, the highest version
//! seen and its value or tombstone, and ignores older records. Versions of a key are
//! consecutive, so a record more than one version past the mirror's shows records
//! that are missing (a key's first record may be version 1 or 2 — its chain may begin
//! with a tombstone no write made — so a missing first record is not seen) — a
//! write whose writer crashed before recording it, or a record not yet arrived from a
//! slower lane; [`FeedMirror::holes`] counts keys whose versions have a hole now.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::record::{FeedOp, FeedRecord};

/// What applying a record did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The record was newer than the key's entry and replaced it.
    Newer,
    /// The record was not newer (already applied, or overtaken by a later write).
    Stale,
}

/// What the mirror holds for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    version: u32,
    /// `None`: deleted.
    value: Option<Vec<u8>>,
}

/// An in-memory mirror of a Clover table. See the [module documentation](self).
#[derive(Debug, Clone, Default)]
pub struct FeedMirror {
    entries: HashMap<Vec<u8>, Entry>,
    /// Per key, the versions seen (to find holes).
    seen: HashMap<Vec<u8>, BTreeSet<u32>>,
    applied: u64,
    stale: u64,
}

impl FeedMirror {
    /// An empty mirror.
    pub fn new() -> FeedMirror {
        FeedMirror::default()
    }

    /// Apply one record.
    pub fn apply(&mut self, record: &FeedRecord) -> Applied {
        self.seen
            .entry(record.key.clone())
            .or_default()
            .insert(record.version);
        let newer = self
            .entries
            .get(&record.key)
            .is_none_or(|e| record.version > e.version);
        if !newer {
            self.stale += 1;
            return Applied::Stale;
        }
        self.applied += 1;
        self.entries.insert(
            record.key.clone(),
            Entry {
                version: record.version,
                value: match record.op {
                    FeedOp::Put => Some(record.value.clone()),
                    FeedOp::Delete => None,
                },
            },
        );
        Applied::Newer
    }

    /// The value of `key` (`None` when absent or deleted).
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.entries.get(key).and_then(|e| e.value.as_deref())
    }

    /// The version the mirror holds for `key`, if it saw the key.
    pub fn version(&self, key: &[u8]) -> Option<u32> {
        self.entries.get(key).map(|e| e.version)
    }

    /// Every live key and its value, in key order.
    pub fn snapshot(&self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        self.entries
            .iter()
            .filter_map(|(k, e)| e.value.clone().map(|v| (k.clone(), v)))
            .collect()
    }

    /// Records that replaced an entry.
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// Records ignored as not newer.
    pub fn stale(&self) -> u64 {
        self.stale
    }

    /// Keys whose seen versions skip one between the lowest and the highest seen (a
    /// record missing or not arrived yet).
    pub fn holes(&self) -> usize {
        self.seen
            .values()
            .filter(|v| match (v.first(), v.last()) {
                (Some(&lo), Some(&hi)) => u64::from(hi - lo) + 1 != v.len() as u64,
                _ => false,
            })
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(key: &[u8], version: u32, value: Option<&[u8]>) -> FeedRecord {
        FeedRecord {
            lane: 0,
            lane_seq: 0,
            op: if value.is_some() {
                FeedOp::Put
            } else {
                FeedOp::Delete
            },
            table_id: 1,
            chain_id: 1,
            version,
            key: key.to_vec(),
            value: value.unwrap_or_default().to_vec(),
        }
    }

    #[test]
    fn only_newer_versions_win_whatever_the_arrival_order() {
        let mut m = FeedMirror::new();
        assert_eq!(m.apply(&rec(b"k", 3, Some(b"c"))), Applied::Newer);
        assert_eq!(m.apply(&rec(b"k", 2, Some(b"b"))), Applied::Stale);
        assert_eq!(m.apply(&rec(b"k", 3, Some(b"c"))), Applied::Stale);
        assert_eq!(m.get(b"k"), Some(&b"c"[..]));
        assert_eq!(m.holes(), 0);
        assert_eq!(m.apply(&rec(b"k", 5, None)), Applied::Newer);
        assert_eq!(m.get(b"k"), None);
        assert_eq!(m.holes(), 1, "version 4 missing");
        assert_eq!(m.apply(&rec(b"k", 4, Some(b"d"))), Applied::Stale);
        assert_eq!(m.holes(), 0);
        assert_eq!(m.version(b"k"), Some(5));
        assert!(m.snapshot().is_empty());
        assert_eq!((m.applied(), m.stale()), (2, 3));
    }

    #[test]
    fn the_final_state_does_not_depend_on_the_merge_order() {
        use rand::SeedableRng;
        use rand::seq::SliceRandom;
        let mut records = Vec::new();
        for k in 0..5u8 {
            for v in 1..=6u32 {
                let value = (v % 3 != 0).then(|| vec![k, v as u8]);
                records.push(rec(&[k], v, value.as_deref()));
            }
        }
        let mut want = FeedMirror::new();
        records.iter().for_each(|r| {
            want.apply(r);
        });
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..20 {
            records.shuffle(&mut rng);
            let mut m = FeedMirror::new();
            records.iter().for_each(|r| {
                m.apply(r);
            });
            assert_eq!(m.snapshot(), want.snapshot());
        }
    }
}
