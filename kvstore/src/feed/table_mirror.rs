//! A second table kept in step with a feed: each record that is newer for its key
//! (by the [`FeedMirror`]'s rule) is applied to the target table as a put or a delete.
//!
//! The applier is one task applying records one at a time in the feed's order, so the
//! target's last write of a key is the highest version the feed carried. The versions
//! seen are kept in memory (with the values, in the inner [`FeedMirror`]); a restarted
//! applier starts from an empty map and must replay the feed from where the target
//! was empty.

use crate::error::KvError;
use crate::table::Table;

use super::mirror::{Applied, FeedMirror};
use super::record::{FeedOp, FeedRecord};

/// A table kept in step with a feed. See the [module documentation](self).
#[derive(Debug)]
pub struct TableMirror {
    target: Table,
    seen: FeedMirror,
}

impl TableMirror {
    /// A mirror writing into `target` (a table of any index).
    pub fn new(target: Table) -> TableMirror {
        TableMirror {
            target,
            seen: FeedMirror::new(),
        }
    }

    /// Apply one record: write it to the target when it is newer for its key.
    pub async fn apply(&mut self, record: &FeedRecord) -> Result<Applied, KvError> {
        if self.seen.apply(record) == Applied::Stale {
            return Ok(Applied::Stale);
        }
        match record.op {
            FeedOp::Put => self.target.put(&record.key, &record.value).await?,
            FeedOp::Delete => match self.target.delete(&record.key).await {
                Ok(()) | Err(KvError::NotFound) => {}
                Err(e) => return Err(e),
            },
        }
        Ok(Applied::Newer)
    }

    /// The versions and values applied so far.
    pub fn seen(&self) -> &FeedMirror {
        &self.seen
    }
}
