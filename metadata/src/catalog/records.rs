//! What the catalog persists about memnodes, leases and tables (one record per
//! stored key; the key layout is in [`super::keys`]).

use serde::{Deserialize, Serialize};

use crate::api::{IndexKind, LatchPlacement, LostCopy, RegionSpec, UpdateMode};

/// Who owns a lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Owner {
    /// A client; expires unless renewed.
    Client,
    /// A table (its RACE directory or in-place tuple area, or a data lease it
    /// adopted); lives as long as the table.
    Table(String),
}

/// A persisted lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    /// Id.
    pub id: u64,
    /// Holder's name.
    pub client: String,
    /// Owner.
    pub owner: Owner,
    /// Memnode.
    pub memnode_id: u64,
    /// Region's rkey.
    pub rkey: u32,
    /// First byte.
    pub va: u64,
    /// Length.
    pub len: u64,
    /// TTL used by renewals without one.
    pub ttl_ms: u64,
    /// Creation time.
    pub created_at_ms: u64,
    /// Expiry (`None` for table-owned memory).
    pub expires_at_ms: Option<u64>,
    /// For a data lease: the table whose data it holds. Its memory is adopted by the
    /// table instead of reclaimed when the lease expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// When the table adopted the lease (it was a client's data lease until then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopted_at_ms: Option<u64>,
    /// For memory of a replicated table: every copy of the extent, one per member
    /// of the replica set, in the set's order (the first is the lease's own
    /// `memnode_id`, `rkey`, `va`); each lies at the same offset from its region's
    /// base. Empty for unreplicated memory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<CopyRecord>,
}

/// One copy of a mirrored lease's extent ([`LeaseRecord::replicas`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyRecord {
    /// Memnode holding the copy.
    pub memnode_id: u64,
    /// Its region's rkey.
    pub rkey: u32,
    /// First byte of the copy.
    pub va: u64,
}

impl LeaseRecord {
    /// The extents this lease holds: (memnode, rkey, va) of every copy, or of the
    /// lease itself when it has no copies; each `len` bytes long.
    pub fn extents(&self) -> Vec<(u64, u32, u64)> {
        if self.replicas.is_empty() {
            vec![(self.memnode_id, self.rkey, self.va)]
        } else {
            self.replicas
                .iter()
                .map(|c| (c.memnode_id, c.rkey, c.va))
                .collect()
        }
    }

    /// The part of this lease from `offset` on, `len` bytes long, on every copy.
    pub fn slice(&self, offset: u64, len: u64) -> LeaseRecord {
        let mut s = self.clone();
        s.va = self.va.saturating_add(offset);
        s.len = len;
        for c in &mut s.replicas {
            c.va = c.va.saturating_add(offset);
        }
        s
    }
}

/// A persisted memnode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemnodeRecord {
    /// Id.
    pub id: u64,
    /// Name.
    pub name: String,
    /// Admin URL.
    pub admin_url: String,
    /// Data address.
    pub data_addr: String,
    /// Capacity.
    pub capacity: u64,
    /// Regions.
    pub regions: Vec<RegionSpec>,
    /// Region generation.
    pub epoch: u64,
    /// First registration.
    pub registered_at_ms: u64,
    /// Failure domain it declared (rack, zone), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Draining: no new leases or table memory go there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub draining: bool,
    /// Deleted while it still named the memory of a replicated table's replica
    /// set (its home): it holds no copies any more, but its regions stay listed
    /// because clients address that set's memory in its coordinates.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retired: bool,
}

/// A persisted table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableRecord {
    /// Id.
    pub id: u64,
    /// Name.
    pub name: String,
    /// Value limit.
    pub value_limit: u64,
    /// Memnodes.
    pub memnodes: Vec<u64>,
    /// Replication factor.
    pub replication: u32,
    /// For replication above 1: per home memnode (in `memnodes` order) its replica
    /// set, the home first. Empty for unreplicated tables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replica_sets: Vec<Vec<u64>>,
    /// Creation time.
    pub created_at_ms: u64,
    /// The index and its memory (stored as the fields `index`, `update_mode`, `race`
    /// and `inplace`, as records always were).
    #[serde(flatten)]
    pub layout: RecordLayout,
    /// Copies of the table's memory lost with a memnode (one per memnode), until an
    /// admin resets or drops the table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<LostCopy>,
    /// Per replica set (parallel to `replica_sets`): members joining it whose copy
    /// is being synchronised (see `docs/replication.md`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub syncing: Vec<Vec<u64>>,
    /// Configuration epoch: bumped when a member joins, is promoted or leaves.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub config_epoch: u64,
    /// Writes are paused for the last copy pass of a syncing member (see
    /// `crate::rereplication`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub writes_paused: bool,
    /// Members asked to move off their replica set (rebalancing): each is replaced
    /// by a new member, copied like any re-replication, and leaves when it is
    /// promoted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<SetMove>,
    /// The table's change feed (Clover tables), set by `PUT /v1/tables/{name}/feed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feed: Option<dmkv_api::feed_layout::FeedLayout>,
}

/// A member of a replica set asked to hand its copy over to another memnode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetMove {
    /// The replica set (position in `replica_sets`).
    pub set: usize,
    /// The member that leaves.
    pub from: u64,
    /// The memnode that takes its copy (`None`: the copier picks one as for a
    /// failover).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<u64>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl TableRecord {
    /// The table's index.
    pub fn index(&self) -> IndexKind {
        self.layout.index()
    }

    /// The move asked of replica set `k` whose member is still in the set, if any.
    pub fn move_of(&self, k: usize) -> Option<SetMove> {
        let set = self.replica_sets.get(k)?;
        self.moves
            .iter()
            .find(|m| m.set == k && set.contains(&m.from))
            .copied()
    }

    /// The syncing members of replica set `k` (none when not listed).
    pub fn syncing_of(&self, k: usize) -> &[u64] {
        self.syncing.get(k).map_or(&[], Vec::as_slice)
    }

    /// Every memnode that memory of the table is mirrored on, per replica set:
    /// its members, then its syncing members (new memory reserved for the table
    /// goes to both, so a syncing member misses nothing granted meanwhile).
    pub fn mirror_sets(&self) -> Vec<Vec<u64>> {
        self.replica_sets
            .iter()
            .enumerate()
            .map(|(k, set)| {
                let mut all = set.clone();
                all.extend_from_slice(self.syncing_of(k));
                all
            })
            .collect()
    }
}

/// A table's index and what the catalog keeps for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RecordLayoutFields", into = "RecordLayoutFields")]
pub enum RecordLayout {
    /// Clover chains.
    Clover,
    /// RACE hashing: its directory.
    Race(RaceRecord),
    /// Tuples updated in place: scheme, geometry and memory.
    InPlace(InPlaceRecord),
}

impl RecordLayout {
    /// The index.
    pub fn index(&self) -> IndexKind {
        match self {
            RecordLayout::Clover => IndexKind::Clover,
            RecordLayout::Race(_) => IndexKind::Race,
            RecordLayout::InPlace(_) => IndexKind::InPlace,
        }
    }

    /// How values are updated.
    pub fn update_mode(&self) -> UpdateMode {
        match self {
            RecordLayout::Clover | RecordLayout::Race(_) => UpdateMode::OutOfPlace,
            RecordLayout::InPlace(p) => UpdateMode::InPlace {
                scheme: p.scheme.clone(),
            },
        }
    }

    /// The RACE part, for a RACE table.
    pub fn race(&self) -> Option<&RaceRecord> {
        match self {
            RecordLayout::Race(r) => Some(r),
            _ => None,
        }
    }

    /// The RACE part, for a RACE table, to change.
    pub fn race_mut(&mut self) -> Option<&mut RaceRecord> {
        match self {
            RecordLayout::Race(r) => Some(r),
            _ => None,
        }
    }
}

/// How a [`RecordLayout`] is stored: the fields table records had before the layout
/// was typed (`race` always present, `null` for other indexes).
#[derive(Serialize, Deserialize)]
struct RecordLayoutFields {
    index: IndexKind,
    update_mode: UpdateMode,
    race: Option<RaceRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    inplace: Option<InPlaceRecord>,
}

impl TryFrom<RecordLayoutFields> for RecordLayout {
    type Error = String;

    fn try_from(f: RecordLayoutFields) -> Result<RecordLayout, String> {
        let layout = match (f.index, f.race, f.inplace) {
            (IndexKind::Clover, None, None) => RecordLayout::Clover,
            (IndexKind::Race, Some(r), None) => RecordLayout::Race(r),
            (IndexKind::InPlace, None, Some(p)) => RecordLayout::InPlace(p),
            (index, race, inplace) => {
                return Err(format!(
                    "a table record of index {} with{} a race part and with{} an inplace part",
                    index.as_str(),
                    if race.is_some() { "" } else { "out" },
                    if inplace.is_some() { "" } else { "out" },
                ));
            }
        };
        if f.update_mode != layout.update_mode() {
            return Err(format!(
                "a table record of index {} with update mode {:?}",
                layout.index().as_str(),
                f.update_mode
            ));
        }
        Ok(layout)
    }
}

impl From<RecordLayout> for RecordLayoutFields {
    fn from(l: RecordLayout) -> RecordLayoutFields {
        let (index, update_mode) = (l.index(), l.update_mode());
        let (race, inplace) = match l {
            RecordLayout::Clover => (None, None),
            RecordLayout::Race(r) => (Some(r), None),
            RecordLayout::InPlace(p) => (None, Some(p)),
        };
        RecordLayoutFields {
            index,
            update_mode,
            race,
            inplace,
        }
    }
}

/// The in-place part of a [`TableRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InPlaceRecord {
    /// Scheme name (placement spelled out).
    pub scheme: String,
    /// Tuples.
    pub capacity: u64,
    /// Tuple stride.
    pub tuple_bytes: u64,
    /// Latch placement.
    pub latch_placement: LatchPlacement,
    /// Bookend demonstration.
    pub unsafe_demo: bool,
    /// The tuple area's table-owned lease.
    pub area_lease: Option<u64>,
    /// The separate latch array's table-owned lease.
    pub latch_lease: Option<u64>,
}

/// The RACE part of a [`TableRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaceRecord {
    /// The directory's table-owned lease.
    pub directory_lease: Option<u64>,
    /// Bumped when the directory moves.
    pub generation: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Table records as the catalog stored them before the layout was typed.
    const OLD: [&str; 3] = [
        r#"{"id":1,"name":"c","index":"clover","value_limit":256,"memnodes":[1],
            "replication":1,"update_mode":"out_of_place","created_at_ms":5,"race":null}"#,
        r#"{"id":2,"name":"r","index":"race","value_limit":256,"memnodes":[1],
            "replication":1,"update_mode":"out_of_place","created_at_ms":5,
            "race":{"directory_lease":3,"generation":2}}"#,
        r#"{"id":3,"name":"i","index":"inplace","value_limit":128,"memnodes":[1],
            "replication":1,"update_mode":{"in_place":{"scheme":"farm"}},"created_at_ms":5,
            "race":null,"inplace":{"scheme":"farm","capacity":10,"tuple_bytes":256,
            "latch_placement":"embedded","unsafe_demo":false,"area_lease":4,"latch_lease":null}}"#,
    ];

    #[test]
    fn records_stored_before_the_typed_layout_load_and_are_stored_alike() {
        let [c, r, i] = OLD.map(|old| serde_json::from_str::<TableRecord>(old).unwrap());
        assert_eq!(c.layout, RecordLayout::Clover);
        assert_eq!(
            r.layout.race(),
            Some(&RaceRecord {
                directory_lease: Some(3),
                generation: 2
            })
        );
        let RecordLayout::InPlace(p) = &i.layout else {
            panic!("in-place record read as {:?}", i.layout)
        };
        assert_eq!((p.scheme.as_str(), p.area_lease), ("farm", Some(4)));
        for (rec, old) in [c, r, i].iter().zip(OLD) {
            let stored = serde_json::to_value(rec).unwrap();
            let before: serde_json::Value = serde_json::from_str(old).unwrap();
            assert_eq!(stored, before, "{}", rec.name);
        }
    }

    #[test]
    fn contradictory_records_are_corrupt() {
        for bad in [
            OLD[0].replace(r#""index":"clover""#, r#""index":"race""#),
            OLD[1].replace(r#""index":"race""#, r#""index":"inplace""#),
            OLD[2].replace(r#"{"in_place":{"scheme":"farm"}}"#, r#""out_of_place""#),
        ] {
            assert!(serde_json::from_str::<TableRecord>(&bad).is_err(), "{bad}");
        }
    }
}
