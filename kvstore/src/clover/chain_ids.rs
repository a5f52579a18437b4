//! Chain ids leased in blocks: a client asks the metadata service once for a block
//! of fresh ids (`POST .../chains/ids`) and names the chains it claims in a chain
//! directory ([`super::directory`]) with them. Ids of a block a client never uses
//! (it crashed, say) are simply never seen: ids are 64-bit and never reused.

use std::rc::Rc;

use dmkv_api::metadata::TableDescription;

use super::state;
use crate::client::meta_error;
use crate::error::KvError;
use crate::meta;
use crate::session::SessionCore;
use crate::stats::OpStats;

/// Ids leased per call.
pub(crate) const BLOCK: u64 = 4096;

/// The unused part of a leased block: `next .. end`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct IdBlock {
    /// The next id to hand out.
    pub next: u64,
    /// One past the last id of the block.
    pub end: u64,
}

impl IdBlock {
    /// Take the next id, if any is left.
    pub(crate) fn take(&mut self) -> Option<u64> {
        (self.next < self.end).then(|| {
            self.next += 1;
            self.next - 1
        })
    }
}

/// A fresh chain id for `table`, from the client's block (leasing a new block when
/// it is used up: one metadata call per [`BLOCK`] ids).
pub(crate) async fn next(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    stats: &mut OpStats,
) -> Result<u64, KvError> {
    let shared = state::shared(core);
    if let Some(id) = shared.take_chain_id(table.id) {
        return Ok(id);
    }
    let name = table.name.clone();
    let block = meta::call(core, stats, move |m| m.lease_chain_ids(&name, BLOCK))
        .await
        .map_err(meta_error)?;
    let mut mine = IdBlock {
        next: block.first,
        end: block.first.saturating_add(block.count),
    };
    let id = mine
        .take()
        .ok_or_else(|| KvError::unavailable("the metadata service leased no chain id"))?;
    // Sessions that ran out together may each lease a block; the spare one is
    // kept, the other's rest is skipped.
    shared.offer_chain_ids(table.id, mine);
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_hands_out_each_id_once() {
        let mut b = IdBlock { next: 5, end: 8 };
        assert_eq!(b.take(), Some(5));
        assert_eq!(b.take(), Some(6));
        assert_eq!(b.take(), Some(7));
        assert_eq!(b.take(), None);
        assert_eq!(IdBlock::default().take(), None);
    }
}
