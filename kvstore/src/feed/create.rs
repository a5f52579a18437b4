//! Creating a feed: one lease of table-owned memory holding every ring, headers
//! cleared.

use dmkv_api::metadata::{CreateLeaseRequest, IndexKind};

use crate::client::meta_error;
use crate::error::KvError;
use crate::session::Session;

use super::layout::{FeedLayout, FeedRing, FeedSpec};
use super::ring_io;

impl Session {
    /// Create a change feed of Clover table `table`: lease memory for `spec.lanes`
    /// producer lanes and `spec.consumers` consumer rings under the table (handed over
    /// to it at once, so it lives as long as the table), clear the rings' headers,
    /// record the feed in the table's catalog entry (from then on every writer of the
    /// table records each committed write there) and return where the rings are.
    /// Blocks the thread; call it outside [`Session::block_on`].
    ///
    /// Only Clover tables have feeds (their nodes carry the version that orders a
    /// key's records); other tables are refused with `Unsupported`.
    pub fn create_feed(&self, table: &str, spec: &FeedSpec) -> Result<FeedLayout, KvError> {
        spec.checked().map_err(KvError::InvalidArgument)?;
        let description = self.table(table)?.description();
        let index = description.layout.index();
        if index != IndexKind::Clover {
            return Err(KvError::Unsupported(format!(
                "table {table} is a {index:?} table: change feeds record Clover tables only"
            )));
        }
        let ring_bytes = 128 + u64::from(spec.slot_size) * u64::from(spec.slots);
        let rings = (spec.lanes + spec.consumers) as u64;
        let meta = &self.core.client.meta;
        let lease = meta
            .create_lease(&CreateLeaseRequest {
                client: format!("feed:{table}"),
                bytes: ring_bytes * rings,
                min_bytes: None,
                memnode: spec.memnode,
                ttl_ms: None,
                table: Some(table.to_owned()),
            })
            .map_err(meta_error)?;
        meta.adopt(lease.lease_id, Some(ring_bytes * rings))
            .map_err(meta_error)?;
        let ring = |i: u64| FeedRing {
            memnode: lease.memnode_id,
            admin_url: lease.admin_url.clone(),
            va: lease.va + i * ring_bytes,
            rkey: lease.rkey,
            slot_size: spec.slot_size,
            slots: spec.slots,
        };
        let layout = FeedLayout {
            table: table.to_owned(),
            table_id: description.id,
            lanes: (0..spec.lanes as u64).map(ring).collect(),
            consumers: (spec.lanes as u64..rings).map(ring).collect(),
        };
        self.block_on(async {
            for r in layout.lanes.iter().chain(&layout.consumers) {
                ring_io::clear_header(&self.core, r).await?;
            }
            Ok::<_, KvError>(())
        })?;
        // The catalog keeps it: from now on every writer of the table records its
        // writes (each learns of it within `FEED_MAX_AGE`).
        let described = meta
            .set_table_feed(table, Some(&layout))
            .map_err(meta_error)?;
        self.core.client.remember(&described);
        Ok(layout)
    }

    /// The change feed of table `name`, as the catalog says now (`None`: it has none).
    /// Blocks the thread; call it outside [`Session::block_on`].
    pub fn feed(&self, name: &str) -> Result<Option<FeedLayout>, KvError> {
        Ok(self.core.client.fresh_table(name)?.feed)
    }
}
