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
    /// to it at once, so it lives as long as the table), clear the rings' headers and
    /// return where they are. Blocks the thread; call it outside [`Session::block_on`].
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
        Ok(layout)
    }
}
