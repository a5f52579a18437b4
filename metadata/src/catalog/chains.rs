//! The Clover slow path: a key's chain id (insert or open, lookup) and where its
//! tail was last seen (tail hints, the put-if-absent root).

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::error::{CatalogError, conflict, not_found};
use super::keys::{IDS_KEY, chain_prefix, cikey, ckey, hkey};
use super::records::TableRecord;
use super::state::Catalog;
use crate::api::{
    ChainInfo, ChainKey, ChainKeysPage, ChainResponse, IndexKind, MAX_KEYS_PAGE, RootResponse,
    TailHint, TailResponse,
};
use crate::store::{Batch, decode, encode};

/// Longest Clover key.
pub const MAX_KEY_LEN: usize = 1024;

/// A chain's stored tail hint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct TailRecord {
    pub(super) hint: TailHint,
    pub(super) updated_at_ms: u64,
}

impl Catalog {
    pub(super) fn clover_table(&self, name: &str) -> Result<&TableRecord, CatalogError> {
        let t = self.table_rec(name)?;
        if t.index() != IndexKind::Clover {
            return Err(conflict(
                "wrong_index",
                format!(
                    "table {name:?} uses the {} index; chains exist only in clover tables",
                    t.index().as_str()
                ),
            ));
        }
        Ok(t)
    }

    /// Insert-or-open: the unique chain id of `key` in a Clover table.
    pub fn open_chain(&mut self, table: &str, key: &[u8]) -> Result<ChainResponse, CatalogError> {
        self.clover_table(table)?;
        check_chain_key(key)?;
        let k = ckey(table, key);
        if let Some(v) = self.store.get(&k)? {
            return Ok(ChainResponse {
                chain_id: decode(&k, &v)?,
                created: false,
            });
        }
        self.ids.chain += 1;
        let id = self.ids.chain;
        let mut batch = Batch::new();
        batch
            .put(k, &id)
            .put_raw(cikey(table, id), key.to_vec())
            .put(IDS_KEY, &self.ids);
        self.commit(&batch)?;
        Ok(ChainResponse {
            chain_id: id,
            created: true,
        })
    }

    /// The chain of `key` in a Clover table and its tail hint, without creating it:
    /// `chain_not_found` when the key has none.
    pub fn lookup_chain(&self, table: &str, key: &[u8]) -> Result<ChainInfo, CatalogError> {
        self.clover_table(table)?;
        check_chain_key(key)?;
        let k = ckey(table, key);
        let v = self.store.get(&k)?.ok_or_else(|| {
            not_found(
                "chain_not_found",
                format!("table {table:?} has no chain for this key"),
            )
        })?;
        let chain_id: u64 = decode(&k, &v)?;
        let h = hkey(table, chain_id);
        let tail = match self.store.get(&h)? {
            Some(v) => Some(decode::<TailRecord>(&h, &v)?.hint),
            None => None,
        };
        Ok(ChainInfo { chain_id, tail })
    }

    /// One page of the keys of a Clover table that have a chain (were ever
    /// written), in byte order: those starting with `prefix`, strictly after
    /// `after` when given, at most `limit` (capped at [`MAX_KEYS_PAGE`]; 0 means
    /// the cap). `next_after` is set when more keys follow.
    pub fn chain_keys(
        &self,
        table: &str,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<ChainKeysPage, CatalogError> {
        self.clover_table(table)?;
        let limit = if limit == 0 {
            MAX_KEYS_PAGE
        } else {
            limit.min(MAX_KEYS_PAGE)
        };
        let base = chain_prefix("c", table);
        let mut scan = base.clone();
        scan.extend_from_slice(prefix);
        let after = after.map(|a| [base.as_slice(), a].concat());
        let mut keys = Vec::new();
        let mut more = false;
        // One more than the page, to tell whether another follows.
        for (k, v) in self.store.scan_page(&scan, after.as_deref(), limit + 1)? {
            let Some(key) = k.get(base.len()..) else {
                continue;
            };
            if keys.len() == limit {
                more = true;
                break;
            }
            keys.push(ChainKey {
                key: base64::engine::general_purpose::STANDARD.encode(key),
                chain_id: decode(&k, &v)?,
            });
        }
        let next_after = if more {
            keys.last().map(|k| k.key.clone())
        } else {
            None
        };
        Ok(ChainKeysPage { keys, next_after })
    }

    fn chain_exists(&self, table: &str, chain_id: u64) -> Result<(), CatalogError> {
        self.clover_table(table)?;
        if self.store.get(&cikey(table, chain_id))?.is_none() {
            return Err(not_found(
                "chain_not_found",
                format!("table {table:?} has no chain {chain_id}"),
            ));
        }
        Ok(())
    }

    pub(super) fn check_hint(&self, hint: &TailHint) -> Result<(), CatalogError> {
        if !self.memnodes.contains_key(&hint.memnode_id) {
            return Err(CatalogError::Invalid(format!(
                "memnode_id: no memnode {} is registered",
                hint.memnode_id
            )));
        }
        if !hint.va.is_multiple_of(64) {
            return Err(CatalogError::Invalid(format!(
                "va {:#x} is not 64-byte aligned",
                hint.va
            )));
        }
        Ok(())
    }

    /// Stores where a chain's tail was last seen (unconditionally).
    pub fn put_tail(
        &mut self,
        table: &str,
        chain_id: u64,
        hint: TailHint,
        now_ms: u64,
    ) -> Result<TailResponse, CatalogError> {
        self.chain_exists(table, chain_id)?;
        self.check_hint(&hint)?;
        let rec = TailRecord {
            hint,
            updated_at_ms: now_ms,
        };
        self.store.put(&hkey(table, chain_id), &encode(&rec))?;
        self.store.flush()?;
        Ok(TailResponse {
            chain_id,
            tail: rec.hint,
            updated_at_ms: rec.updated_at_ms,
        })
    }

    /// Stores `hint` as the chain's tail hint unless one is stored (put-if-absent):
    /// exactly one of several clients racing to publish a chain's root wins, and
    /// every one of them learns which hint won. The answer's `created` says whether
    /// this call stored it.
    pub fn publish_root(
        &mut self,
        table: &str,
        chain_id: u64,
        hint: TailHint,
        now_ms: u64,
    ) -> Result<RootResponse, CatalogError> {
        self.chain_exists(table, chain_id)?;
        self.check_hint(&hint)?;
        let k = hkey(table, chain_id);
        if let Some(v) = self.store.get(&k)? {
            let rec: TailRecord = decode(&k, &v)?;
            return Ok(RootResponse {
                chain_id,
                tail: rec.hint,
                updated_at_ms: rec.updated_at_ms,
                created: false,
            });
        }
        let rec = TailRecord {
            hint,
            updated_at_ms: now_ms,
        };
        self.store.put(&k, &encode(&rec))?;
        self.store.flush()?;
        Ok(RootResponse {
            chain_id,
            tail: rec.hint,
            updated_at_ms: rec.updated_at_ms,
            created: true,
        })
    }

    /// The last tail hint of a chain.
    pub fn tail(&self, table: &str, chain_id: u64) -> Result<TailResponse, CatalogError> {
        self.chain_exists(table, chain_id)?;
        let k = hkey(table, chain_id);
        let v = self.store.get(&k)?.ok_or_else(|| {
            not_found(
                "tail_not_found",
                format!("no tail hint stored for chain {chain_id} of table {table:?}"),
            )
        })?;
        let rec: TailRecord = decode(&k, &v)?;
        Ok(TailResponse {
            chain_id,
            tail: rec.hint,
            updated_at_ms: rec.updated_at_ms,
        })
    }
}

pub(super) fn check_chain_key(key: &[u8]) -> Result<(), CatalogError> {
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(CatalogError::Invalid(format!(
            "key must be 1 to {MAX_KEY_LEN} bytes long (got {})",
            key.len()
        )));
    }
    Ok(())
}
