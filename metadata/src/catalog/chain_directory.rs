//! The one-sided Clover insert path's service side: chain ids leased to clients in
//! blocks, the table's chain directory (table-owned memory the clients claim keys
//! in with CAS), and the batches of key → chain mappings clients publish so that
//! key listings and chain lookups see keys created without a call per key.
//!
//! A table gets a directory only while it has no chains: a table whose keys were
//! created through `POST .../chains` keeps that path for good, and so does one the
//! service could not give a directory (replicated, or no memory then). Either
//! answer is recorded, so every client of a table takes the same path.

use base64::Engine as _;

use super::chains::{TailRecord, check_chain_key};
use super::error::{CatalogError, conflict};
use super::keys::{IDS_KEY, chain_prefix, cikey, ckey, hkey};
use super::state::Catalog;
use crate::api::{
    ChainDirectoryResponse, ChainIdBlock, MAX_CHAIN_ID_BLOCK, MAX_PUBLISH_BATCH,
    PublishChainsResponse, PublishedChain,
};
use crate::store::{Batch, decode};

/// Size of a chain directory: 512 Ki slots of 8 bytes.
pub const CHAIN_DIRECTORY_BYTES: u64 = 4 << 20;

/// Where the catalog records a table's directory lease (`None`: the table keeps
/// the metadata path).
fn dkey(table: &str) -> Vec<u8> {
    chain_prefix("cd", table)
}

fn unavailable(table: &str, why: &str) -> CatalogError {
    conflict(
        "chain_directory_unavailable",
        format!("table {table:?} has no chain directory: {why}"),
    )
}

impl Catalog {
    /// Leases `count` chain ids of a Clover table: ids no other call returns.
    pub fn lease_chain_ids(
        &mut self,
        table: &str,
        count: u64,
    ) -> Result<ChainIdBlock, CatalogError> {
        self.clover_table(table)?;
        if count == 0 || count > MAX_CHAIN_ID_BLOCK {
            return Err(CatalogError::Invalid(format!(
                "count must be 1 to {MAX_CHAIN_ID_BLOCK} (got {count})"
            )));
        }
        let first = self.ids.chain + 1;
        let mut ids = self.ids;
        ids.chain += count;
        let mut batch = Batch::new();
        batch.put(IDS_KEY, &ids);
        self.commit(&batch)?;
        self.ids = ids;
        Ok(ChainIdBlock { first, count })
    }

    /// The chain directory of a Clover table, created and zeroed by the first call
    /// when the table has no chains and is unreplicated and `create` holds (409
    /// `chain_directory_unavailable` otherwise, for good; 409 `chain_directory_lost`
    /// when its memory node lost it, until the table is reset).
    pub fn chain_directory(
        &mut self,
        table: &str,
        create: bool,
        now_ms: u64,
    ) -> Result<ChainDirectoryResponse, CatalogError> {
        let t = self.clover_table(table)?.clone();
        let k = dkey(table);
        if let Some(v) = self.store.get(&k)? {
            let lease: Option<u64> = decode(&k, &v)?;
            return match lease.and_then(|l| self.location(l)) {
                Some(directory) => Ok(ChainDirectoryResponse {
                    directory,
                    created: false,
                }),
                // Not "none": its keys are in the lost directory, not in the service.
                None if lease.is_some() => Err(conflict(
                    "chain_directory_lost",
                    format!(
                        "the chain directory of table {table:?} was lost with its memory \
                         node (reset the table)"
                    ),
                )),
                None => Err(unavailable(
                    table,
                    "its keys are created through the service",
                )),
            };
        }
        let mut batch = Batch::new();
        let has_chains = self
            .store
            .scan_page(&chain_prefix("c", table), None, 1)?
            .into_iter()
            .next()
            .is_some();
        if t.replication > 1 || has_chains || !create {
            batch.put(k, &None::<u64>);
            self.commit(&batch)?;
            let why = if has_chains {
                "it has chains created through the service"
            } else if !create {
                "a client declined it"
            } else {
                "it is replicated"
            };
            return Err(unavailable(table, why));
        }
        let homes = (t.memnodes.as_slice(), t.replica_sets.as_slice());
        let lease = match self.table_lease(table, homes, None, CHAIN_DIRECTORY_BYTES, now_ms) {
            Ok(l) => l,
            Err(e) => {
                // Recorded, so that no client ever claims keys one-sidedly in a
                // table whose other clients already went to the service.
                batch.put(k, &None::<u64>);
                self.commit(&batch)?;
                return Err(unavailable(table, &format!("no memory for it ({e})")));
            }
        };
        if let Err(e) = self.scrub(&lease) {
            self.release(&lease);
            return Err(e);
        }
        batch.put(super::keys::lkey(lease.id), &lease);
        batch.put(k, &Some(lease.id));
        if let Err(e) = self.commit(&batch) {
            self.release(&lease);
            return Err(e);
        }
        let id = lease.id;
        self.leases.insert(id, lease);
        let directory = self
            .location(id)
            .ok_or_else(|| unavailable(table, "its memory node left"))?;
        Ok(ChainDirectoryResponse {
            directory,
            created: true,
        })
    }

    /// Records key → chain mappings clients claimed in a table's chain directory;
    /// a key already recorded is left as it is. Checks every mapping before
    /// recording any: one bad mapping fails the call and records nothing.
    pub fn publish_chains(
        &mut self,
        table: &str,
        chains: &[PublishedChain],
        now_ms: u64,
    ) -> Result<PublishChainsResponse, CatalogError> {
        self.clover_table(table)?;
        if chains.len() > MAX_PUBLISH_BATCH {
            return Err(CatalogError::Invalid(format!(
                "at most {MAX_PUBLISH_BATCH} chains per call (got {})",
                chains.len()
            )));
        }
        let mut batch = Batch::new();
        let mut stored = 0;
        let mut seen = std::collections::HashSet::new();
        for (i, c) in chains.iter().enumerate() {
            let key = base64::engine::general_purpose::STANDARD
                .decode(&c.key)
                .map_err(|e| CatalogError::Invalid(format!("chains[{i}].key: not base64: {e}")))?;
            check_chain_key(&key)?;
            if c.chain_id == 0 || c.chain_id > self.ids.chain {
                return Err(CatalogError::Invalid(format!(
                    "chains[{i}].chain_id: {} was never leased",
                    c.chain_id
                )));
            }
            self.check_hint(&c.root)?;
            let k = ckey(table, &key);
            if self.store.get(&k)?.is_some() || !seen.insert(key.clone()) {
                continue;
            }
            let rec = TailRecord {
                hint: c.root.clone(),
                updated_at_ms: now_ms,
            };
            batch
                .put(k, &c.chain_id)
                .put_raw(cikey(table, c.chain_id), key)
                .put(hkey(table, c.chain_id), &rec);
            stored += 1;
        }
        if stored > 0 {
            self.commit(&batch)?;
        }
        Ok(PublishChainsResponse { stored })
    }
}
