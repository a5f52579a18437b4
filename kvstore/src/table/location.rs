//! Where a key lives ([`Table::locate`]), for operators: the memnodes holding its
//! value and where in them — a Clover key's chain and tail node, a RACE key's subtable
//! and candidate buckets — with its version and value. A lookup reads like a GET and
//! changes nothing: a Clover key without a chain is absent (no chain is created).

use super::{Index, Table};
use crate::clover;
use crate::error::{KvError, check_table_key};
use crate::ptr::RemotePtr;
use crate::race;
use crate::race::hash::KeyHash;
use crate::stats::OpStats;

/// A place in a memnode's registered memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemotePlace {
    /// The memnode id.
    pub memnode: u64,
    /// The byte offset from its region base.
    pub offset: u64,
}

impl From<RemotePtr> for RemotePlace {
    fn from(p: RemotePtr) -> RemotePlace {
        RemotePlace {
            memnode: u64::from(p.memnode()),
            offset: p.offset(),
        }
    }
}

/// Where a key of a Clover table lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloverPlace {
    /// Its chain.
    pub chain_id: u64,
    /// The chain's root object.
    pub root: RemotePlace,
    /// The tail node (the newest version).
    pub tail: RemotePlace,
    /// Whether the tail is a tombstone (the key was deleted).
    pub tombstone: bool,
}

/// Where a key of a RACE table lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RacePlace {
    /// The directory entry naming its subtable.
    pub directory_entry: usize,
    /// The subtable.
    pub subtable: RemotePlace,
    /// The two main buckets of the subtable whose slots may name the key (they may
    /// coincide; a split in progress may keep it in the parent's for a while).
    pub buckets: [u64; 2],
    /// The key's 8-bit fingerprint, which its slot carries.
    pub fingerprint: u8,
}

/// Where a key lives, by index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPlace {
    /// A Clover key with a chain.
    Clover(CloverPlace),
    /// A Clover key that never had a chain.
    NoChain,
    /// A RACE key.
    Race(RacePlace),
}

/// Where a key lives and what it holds ([`Table::locate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLocation {
    /// The table's index (`clover`, `race`).
    pub index: &'static str,
    /// Where the key is (or would be).
    pub place: KeyPlace,
    /// The memnodes holding the key's value (its copies, primary first); empty when
    /// absent.
    pub memnodes: Vec<u64>,
    /// The version of the value (Clover: the tail node's); RACE keeps none.
    pub version: Option<u64>,
    /// The value; `None` when the key is absent (never written, or deleted).
    pub value: Option<Vec<u8>>,
}

impl KeyLocation {
    /// Whether the key has a value.
    pub fn found(&self) -> bool {
        self.value.is_some()
    }
}

impl Table {
    /// Where `key` lives and its value, for operators (Clover and RACE tables;
    /// `Unsupported` for in-place ones). Reads only: it creates no chain and takes no
    /// lock.
    pub async fn locate(&self, key: &[u8]) -> Result<KeyLocation, KvError> {
        check_table_key(key)?;
        let info = self.info();
        let mut stats = OpStats::default();
        self.core.renew_if_due();
        let r = match &self.index() {
            Index::Clover => self.locate_clover(key, &mut stats).await,
            Index::Race => self.locate_race(key, &mut stats).await,
            Index::InPlace(_) => Err(KvError::Unsupported(format!(
                "table {}: key lookup supports Clover and RACE tables, not in-place ones",
                info.name
            ))),
        };
        self.core.finish_op(stats);
        r
    }

    /// The copies of data on `memnode`: its replica set (primary first) in a replicated
    /// table, else just it.
    fn copies_on(&self, memnode: u64) -> Vec<u64> {
        let info = self.info();
        info.replica_sets
            .iter()
            .find(|set| set.contains(&memnode))
            .cloned()
            .unwrap_or_else(|| vec![memnode])
    }

    async fn locate_clover(&self, key: &[u8], stats: &mut OpStats) -> Result<KeyLocation, KvError> {
        let info = self.info();
        let absent = |place| KeyLocation {
            index: "clover",
            place,
            memnodes: Vec::new(),
            version: None,
            value: None,
        };
        let Some(cache) = clover::chain::open(&self.core, &info, key, false, stats).await? else {
            return Ok(absent(KeyPlace::NoChain));
        };
        let found = clover::locate::locate(&self.core, &info, key, cache, stats).await?;
        let node = found.node;
        let tail = RemotePlace::from(node.ptr);
        let place = KeyPlace::Clover(CloverPlace {
            chain_id: cache.chain.chain_id,
            root: cache.chain.root.into(),
            tail,
            tombstone: node.header.tombstone,
        });
        let value = node.value.filter(|_| !node.header.tombstone);
        Ok(KeyLocation {
            index: "clover",
            memnodes: if value.is_some() {
                self.copies_on(tail.memnode)
            } else {
                Vec::new()
            },
            version: Some(u64::from(node.version)),
            value,
            place,
        })
    }

    async fn locate_race(&self, key: &[u8], stats: &mut OpStats) -> Result<KeyLocation, KvError> {
        let info = self.info();
        let st = race::state::open(&self.core, &info, stats).await?;
        let hash = KeyHash::of(key);
        let directory_entry = st.index_of(&hash);
        let entry = st.entry(directory_entry)?;
        let subtable = RemotePlace::from(entry.subtable);
        let place = KeyPlace::Race(RacePlace {
            directory_entry,
            subtable,
            buckets: st.geometry.candidates(&hash),
            fingerprint: hash.fingerprint(),
        });
        let value = match race::ops::get(&self.core, &info, key, crate::AccessMode::OneSided).await
        {
            Ok(v) => Some(v),
            Err(KvError::NotFound) => None,
            Err(e) => return Err(e),
        };
        Ok(KeyLocation {
            index: "race",
            memnodes: if value.is_some() {
                self.copies_on(subtable.memnode)
            } else {
                Vec::new()
            },
            version: None,
            value,
            place,
        })
    }
}
