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

use dmkv_api::metadata::{MAX_PUBLISH_BATCH, PublishChainsRequest, PublishedChain, TailHint};

use super::state;
use crate::client::meta_error;
use crate::error::KvError;
use crate::meta;
use crate::session::SessionCore;
use crate::stats::OpStats;

/// The mappings of one table waiting to be published.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// The table's name.
    pub table: String,
    /// The mappings, oldest first.
    pub chains: Vec<PublishedChain>,
    /// When the oldest was queued.
    pub since: Option<Instant>,
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
    while let Some((name, batch)) = shared.take_published(table_id, MAX_PUBLISH_BATCH) {
        let whole = batch.len() < MAX_PUBLISH_BATCH;
        let req = PublishChainsRequest { chains: batch };
        let (n, r) = (name.clone(), req.clone());
        if let Err(e) = meta::call(core, stats, move |m| m.publish_chains(&n, &r)).await {
            shared.requeue_published(table_id, &name, req.chains);
            return Err(meta_error(e));
        }
        if whole {
            // Everything queued when this batch was taken is published.
            break;
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
