//! The catalog: memnode registry, leases, tables and Clover chains, in memory, with
//! every acknowledged change written to the [`MetaStore`](crate::store::MetaStore)
//! first (one atomic batch, then a flush). Time is an argument (`now_ms`), never read
//! inside, so everything here is testable with a fake clock.
//!
//! Free-extent maps are not stored: they are the regions minus the leases, rebuilt on
//! [`Catalog::open`].
//!
//! Creating a table zeroes the memory it owns from the start (RACE directory, in-place
//! tuple area and latch array) through a [`Scrubber`](crate::scrub::Scrubber) before
//! anything is stored: the one place the catalog talks to a memnode, while it is
//! locked (a memset of the area on the memnode; 64 KiB for a directory).
//!
//! [`Catalog`] is defined in `state` with what every operation shares (loading,
//! committing a batch, zeroing table memory, memnode health); its operations are one
//! file per resource:
//!
//! * `memnodes` — registration, heartbeats, deregistration;
//! * `health` — memnode state, loss records of tables, drain, resetting a lost table;
//! * `failover` — taking a down memnode out of replicated tables' replica sets;
//! * `leases` — client leases, their expiry sweep and adoption by tables;
//! * `tables` — creating, describing and dropping tables;
//! * `chains` — the Clover slow path: chain ids and tail hints;
//! * `credentials` — scoped credentials: issuing, listing, revoking, checking;
//! * `grants` — the extents of a table's memory on a memnode, which grants cover;
//! * `memory` — where a new allocation goes, and giving it back;
//! * `replicas` — the replica sets of a replicated table;
//! * `rereplicate` — new members for replica sets that lost one: join, promote;
//! * `runs` — merging the memory a table adopts into runs, one record each;
//! * `stats` — counts for metrics and health, and the allocation invariants;
//!
//! and beside them `config` (settings and limits), `error`, `records` (what is
//! persisted) and `keys` (under which store keys).

mod chain_directory;
mod chains;
mod config;
mod credentials;
mod error;
mod failover;
mod grants;
mod health;
mod keys;
mod leases;
mod memnodes;
mod memory;
mod records;
mod replicas;
mod rereplicate;
mod runs;
mod state;
mod stats;
mod tables;

pub use chains::MAX_KEY_LEN;
pub use config::{
    CatalogConfig, DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE, MAX_REPLICATION, MAX_VALUE_LIMIT,
    MIN_CHUNK_SIZE, MIN_GRANULE, MIN_VALUE_LIMIT, granule,
};
pub use credentials::{CredentialCheck, LAST_USED_RESOLUTION_MS, SECRET_BYTES, secret_hash};
pub use error::CatalogError;
pub use failover::{Failover, SurvivorPlan};
pub use health::{Membership, table_health, table_state_name};
pub use leases::Sweep;
pub use memory::RUN_CONTINUATION_MIN;
pub use records::{
    CopyRecord, InPlaceRecord, LeaseRecord, MemnodeRecord, Owner, RaceRecord, RecordLayout,
    TableRecord,
};
pub use rereplicate::{AreaOnMember, Endpoint, SyncExtent, SyncPlan, SyncTarget};
pub use state::Catalog;
pub use stats::Stats;
pub use tables::validate_table_name;
