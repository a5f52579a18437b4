//! A key's first write made by its claim: when a put or insert finds no chain for
//! its key in the table's chain directory, the chain's first node is the value
//! itself (version 1, live) instead of a tombstone that the write then appends to.
//!
//! 1. READ the key's bucket ([`directory::probe`]): a slot naming the key means the
//!    chain exists (the ordinary write path takes over); a full bucket means the
//!    metadata service has the key's chain (likewise).
//! 2. WRITE the first node and the keyed root, and CAS the free slot from 0 to the
//!    root, in one doorbell on the memory node's queue pair when the node, the root
//!    and the bucket share one (the queue pair executes in order, so both are
//!    complete before the slot names them); otherwise the WRITEs complete first.
//!    The CAS is the write's linearization point, as a link CAS is for a later
//!    version: before it no reader can reach the chain, after it every reader finds
//!    the value.
//! 3. A lost CAS (another writer claimed a slot of the bucket first, possibly for
//!    this key) gives the unreachable node and root back and leaves the write to the
//!    ordinary path, which reads the bucket again.
//!
//! Two round trips for a new key (against five when the claim wrote a tombstone and
//! the write then found and linked past it). Only unreplicated tables outside the
//! switch accelerator take this path: a replicated chain's first node must reach
//! every copy before it is named, and the accelerator's steering follows link CASes.

use std::rc::Rc;

use dmkv_api::metadata::TableDescription;
use verbs::wr::WorkRequest;

use super::directory::{self, Directory};
use super::publish;
use super::state;
use crate::error::KvError;
use crate::index::WriteKind;
use crate::remote::{atomic_value, write_done};
use crate::replication::copies;
use crate::session::SessionCore;
use crate::stats::OpStats;

/// What a first-write attempt did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FirstWrite {
    /// The key had no chain; the write created it holding the value: done.
    Written,
    /// Not done: the key has a chain already, its bucket is full, or another
    /// writer's claim landed first. The ordinary write path takes over.
    NotTaken,
}

/// Whether a write of `kind` to `table` may be made by its key's claim.
pub(crate) fn applies(core: &SessionCore, table: &TableDescription, kind: WriteKind) -> bool {
    matches!(kind, WriteKind::Put | WriteKind::Insert)
        && !copies::is_replicated(table)
        && !core.accelerated
}

/// Try to make the write of `value` to `key` by claiming its chain with the value as
/// the first version (see the module docs).
pub(crate) async fn try_write(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    dir: Directory,
    key: &[u8],
    value: &[u8],
    stats: &mut OpStats,
) -> Result<FirstWrite, KvError> {
    let since = std::time::Instant::now();
    let p = directory::probe(core, dir, key, stats).await?;
    if let Some(chain) = p.found {
        state::shared(core).set_chain(table.id, key, chain);
        return Ok(FirstWrite::NotTaken);
    }
    let Some(free) = p.free else {
        return Ok(FirstWrite::NotTaken);
    };
    let slot = p
        .bucket
        .checked_add(free as u64 * 8)
        .and_then(|s| core.links.resolve(s, 8))
        .ok_or_else(|| KvError::corrupt("a chain directory slot lies outside its region"))?;
    let (first, writes) =
        directory::prepare_unwritten(core, table, key, Some(value), stats).await?;
    let fp = directory::place(key, dir.buckets).fingerprint;
    let cas = WorkRequest::cas(
        slot.addr,
        0,
        directory::slot_word(fp, first.prepared.cache.chain.root),
    );
    let previous = if first.target == slot.memnode {
        let mut wrs = writes;
        wrs.push(cas);
        let done = core
            .links
            .round_trip(vec![(slot.memnode, wrs)], stats)
            .await
            .and_then(|done| {
                let batch = done.first();
                write_done(batch.and_then(|b| b.first()))?;
                write_done(batch.and_then(|b| b.get(1)))?;
                Ok(done)
            });
        match done {
            // The CAS may have landed: the node and root stay (a reader may find them).
            Err(e) => return Err(e),
            Ok(done) => atomic_value(done.first().and_then(|b| b.get(2)))?,
        }
    } else {
        let written = core
            .links
            .round_trip(vec![(first.target, writes)], stats)
            .await
            .and_then(|done| {
                let batch = done.first();
                write_done(batch.and_then(|b| b.first()))?;
                write_done(batch.and_then(|b| b.get(1)))
            });
        if let Err(e) = written {
            first.prepared.release(core);
            return Err(e);
        }
        let done = core
            .links
            .round_trip(vec![(slot.memnode, vec![cas])], stats)
            .await?;
        atomic_value(done.first().and_then(|b| b.first()))?
    };
    if previous != 0 {
        stats.cas_failures += 1;
        first.prepared.release(core);
        return Ok(FirstWrite::NotTaken);
    }
    let prepared = first.prepared;
    let root = &prepared.root;
    publish::claimed(
        core,
        table,
        key,
        prepared.cache.chain.chain_id,
        (root.memnode, root.va),
        stats,
    )
    .await;
    state::remember_tail(core, table.id, key, prepared.cache);
    if let Some(tail) = prepared.cache.hint {
        // The chain's only node, a tail since the claim that was posted after `since`.
        state::of(core).verified_tail(table.id, key, tail, since);
    }
    Ok(FirstWrite::Written)
}
