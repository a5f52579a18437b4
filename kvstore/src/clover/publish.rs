//! Publishing the key → chain mappings a client claimed in a chain directory
//! ([`super::directory`]) to the metadata service, in batches: the service's view of
//! a table's keys (`GET .../keys`, `dmkv keys`) and its chain lookups see a claimed
//! key once its batch is published.
//!
//! A client publishes when [`crate::CloverOptions::publish_batch`] mappings wait or
//! the oldest has waited [`crate::CloverOptions::publish_delay`] (checked at the
//! client's next claim), before listing a table's keys, and when a session closes
//! (not when it is abandoned, as a crash would). A batch that fails to
//! publish is kept and tried again. Reads and writes never need the service's
//! view: they find keys in the directory.

use std::time::Instant;

use dmkv_api::metadata::{
    MAX_PUBLISH_BATCH, MAX_REQUEST_BODY, PublishChainsRequest, PublishedChain, TailHint,
};

use super::state;
use crate::client::meta_error;
use crate::error::KvError;
use crate::meta;
use crate::session::SessionCore;
use crate::stats::OpStats;

/// Most bytes of mappings one call carries: seven eighths of the largest request body
/// the metadata service takes (the rest is room for the request around them;
/// [`body_bytes`] overestimates too).
pub(crate) const MAX_PUBLISH_BYTES: usize = MAX_REQUEST_BODY - MAX_REQUEST_BODY / 8;

/// An upper bound on what `chain` adds to a request body: its base64 key and every
/// other field at its longest, with the JSON around them (146 bytes).
pub(crate) fn body_bytes(chain: &PublishedChain) -> usize {
    chain.key.len() + 160
}

/// The mappings of one table waiting to be published.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// The table's name.
    pub table: String,
    /// The mappings, oldest first.
    pub chains: Vec<PublishedChain>,
    /// [`body_bytes`] of `chains`.
    pub bytes: usize,
    /// When the oldest was queued.
    pub since: Option<Instant>,
}

impl Pending {
    /// Queue `chain` behind the others.
    pub fn push(&mut self, chain: PublishedChain) {
        self.bytes += body_bytes(&chain);
        self.chains.push(chain);
        self.since.get_or_insert_with(Instant::now);
    }

    /// Whether a batch is due: `batch` mappings, a body's worth of them, or the oldest
    /// waiting `delay`.
    pub fn due(&self, batch: usize, delay: std::time::Duration) -> bool {
        self.chains.len() >= batch
            || self.bytes >= MAX_PUBLISH_BYTES
            || self.since.is_some_and(|t| t.elapsed() >= delay)
    }

    /// The oldest mappings for one call: at most `max` of them and at most
    /// [`MAX_PUBLISH_BYTES`] (but at least one).
    pub fn take_batch(&mut self, max: usize) -> Vec<PublishedChain> {
        let mut n = 0;
        let mut bytes = 0;
        for c in self.chains.iter().take(max) {
            let b = body_bytes(c);
            if n > 0 && bytes + b > MAX_PUBLISH_BYTES {
                break;
            }
            n += 1;
            bytes += b;
        }
        self.bytes -= bytes;
        let taken: Vec<PublishedChain> = self.chains.drain(..n).collect();
        if self.chains.is_empty() {
            self.since = None;
        }
        taken
    }

    /// Put back `chains` that failed to publish, ahead of the others.
    pub fn requeue(&mut self, chains: Vec<PublishedChain>) {
        self.bytes += chains.iter().map(body_bytes).sum::<usize>();
        let rest = std::mem::replace(&mut self.chains, chains);
        self.chains.extend(rest);
        self.since.get_or_insert_with(Instant::now);
    }
}

/// Queue the mapping of `key` to chain `chain_id` rooted at `root_va` on memnode
/// `memnode`, and publish the table's queue when it is due. A failure to publish
/// keeps the queue (the claim itself has happened and stands).
pub(crate) async fn claimed(
    core: &SessionCore,
    table: &dmkv_api::metadata::TableDescription,
    key: &[u8],
    chain_id: u64,
    (memnode, root_va): (u64, u64),
    stats: &mut OpStats,
) {
    let opts = &core.client.options.clover;
    let due = state::shared(core).queue_published(
        table.id,
        &table.name,
        PublishedChain::new(
            key,
            chain_id,
            TailHint {
                memnode_id: memnode,
                va: root_va,
                generation: 0,
            },
        ),
        opts.publish_batch,
        opts.publish_delay,
    );
    if due {
        // Kept and retried at the next claim or listing if this fails.
        let _ = flush(core, table.id, stats).await;
    }
}

/// Publish every mapping queued for table `table_id` when the call starts, in
/// batches of at most [`MAX_PUBLISH_BATCH`]. On failure the unpublished ones stay
/// queued. Mappings that concurrent claims queue meanwhile wait for their own batch:
/// a flush that went on while there were any would, under a steady stream of
/// claims, publish every handful of them in a call of its own.
pub(crate) async fn flush(
    core: &SessionCore,
    table_id: u64,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    let shared = state::shared(core);
    // What is queued now; what claims queue meanwhile waits for a batch of its own.
    let mut left = shared.queued_published(table_id);
    while left > 0 {
        let Some((name, batch)) = shared.take_published(table_id, left.min(MAX_PUBLISH_BATCH))
        else {
            break;
        };
        left = left.saturating_sub(batch.len());
        let req = std::sync::Arc::new(PublishChainsRequest { chains: batch });
        let (n, r) = (name.clone(), req.clone());
        if let Err(e) = meta::call(core, stats, move |m| m.publish_chains(&n, &r)).await {
            shared.requeue_published(table_id, &name, req.chains.clone());
            return Err(meta_error(e));
        }
    }
    Ok(())
}

/// Publish every mapping queued for the table named `table` (before listing its keys).
pub(crate) async fn flush_named(
    core: &SessionCore,
    table: &str,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    for id in state::shared(core).published_tables(table) {
        flush(core, id, stats).await?;
    }
    Ok(())
}

/// Publish every mapping this client has queued, blocking (a session closing). A
/// batch that fails stays queued for the client's other sessions.
pub(crate) fn flush_all_blocking(core: &SessionCore) {
    let shared = state::shared(core);
    for table in shared.published_table_ids() {
        while let Some((name, batch)) = shared.take_published(table, MAX_PUBLISH_BATCH) {
            let req = PublishChainsRequest { chains: batch };
            if core.client.meta.publish_chains(&name, &req).is_err() {
                shared.requeue_published(table, &name, req.chains);
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dmkv_api::metadata::TailHint;

    fn chain(key_len: usize, fill: u64) -> PublishedChain {
        PublishedChain::new(
            &vec![0xFF; key_len],
            fill,
            TailHint {
                memnode_id: fill,
                va: fill,
                generation: u64::MAX,
            },
        )
    }

    #[test]
    fn the_bound_covers_an_entry_at_its_longest() {
        for key_len in [1, 23, 256, 1024] {
            let c = chain(key_len, u64::MAX);
            let json = serde_json::to_vec(&c).expect("json");
            // One entry and the comma that follows it in a list.
            assert!(json.len() < body_bytes(&c), "{key_len}: {}", json.len());
        }
    }

    #[test]
    fn batches_stay_within_a_request_body_and_keep_their_order() {
        let mut p = Pending::default();
        for i in 0..4096 {
            p.push(chain(256, i));
        }
        assert!(p.due(MAX_PUBLISH_BATCH + 1, std::time::Duration::from_secs(3600)));
        let mut seen = 0;
        while !p.chains.is_empty() {
            let batch = p.take_batch(MAX_PUBLISH_BATCH);
            assert!(!batch.is_empty());
            assert_eq!(batch[0].chain_id, seen);
            seen += batch.len() as u64;
            let body = serde_json::to_vec(&PublishChainsRequest { chains: batch }).expect("json");
            assert!(body.len() < MAX_REQUEST_BODY, "{} bytes", body.len());
        }
        assert_eq!(seen, 4096);
        assert_eq!(p.bytes, 0);
        assert!(p.since.is_none());
    }

    #[test]
    fn a_failed_batch_goes_back_ahead_of_the_rest() {
        let mut p = Pending::default();
        for i in 0..10 {
            p.push(chain(8, i));
        }
        let batch = p.take_batch(4);
        p.push(chain(8, 10));
        p.requeue(batch);
        let order: Vec<u64> = p.chains.iter().map(|c| c.chain_id).collect();
        assert_eq!(order, (0..11).collect::<Vec<_>>());
        assert_eq!(p.bytes, p.chains.iter().map(body_bytes).sum::<usize>());
        assert!(!p.due(100, std::time::Duration::from_secs(3600)));
        assert!(p.due(11, std::time::Duration::from_secs(3600)));
    }
}
