//! The extents a grant covers: every piece of a table's memory on one memory node (the
//! memory the table owns, the data leases it adopted and the live data leases clients
//! took for it, each copy of replicated memory on the node that holds it), as offsets
//! into that node's region.

use dmkv_api::grant::GrantWindow;

use super::error::not_found;
use super::records::Owner;
use super::{Catalog, CatalogError};

impl Catalog {
    /// The windows of table `table`'s memory on memory node `memnode_id`, sorted by
    /// offset, adjacent extents merged.
    pub fn table_windows(
        &self,
        table: &str,
        memnode_id: u64,
    ) -> Result<Vec<GrantWindow>, CatalogError> {
        self.table_rec(table)?;
        let node = self
            .memnodes
            .get(&memnode_id)
            .ok_or_else(|| not_found("memnode_not_found", format!("no memnode {memnode_id}")))?;
        let mut windows: Vec<GrantWindow> = Vec::new();
        for lease in self.leases.values() {
            let owned = match &lease.owner {
                Owner::Table(t) => t == table,
                Owner::Client => lease.table.as_deref() == Some(table),
            };
            if !owned {
                continue;
            }
            for (node_id, rkey, va) in lease.extents() {
                if node_id != memnode_id {
                    continue;
                }
                let Some(region) = node.rec.regions.iter().find(|r| r.rkey == rkey) else {
                    continue;
                };
                if let Some(offset) = va.checked_sub(region.base_va) {
                    windows.push(GrantWindow {
                        offset,
                        len: lease.len,
                    });
                }
            }
        }
        windows.retain(|w| w.len > 0);
        windows.sort_by_key(|w| w.offset);
        let mut merged: Vec<GrantWindow> = Vec::with_capacity(windows.len());
        for w in windows {
            match merged.last_mut() {
                Some(last) if last.offset.saturating_add(last.len) >= w.offset => {
                    let end = last
                        .offset
                        .saturating_add(last.len)
                        .max(w.offset.saturating_add(w.len));
                    last.len = end - last.offset;
                }
                _ => merged.push(w),
            }
        }
        Ok(merged)
    }
}
