//! A write after a tail the session verified moments ago, in one round trip.
//!
//! An update, delete or put of a key whose tail this session read without a
//! successor (or linked itself) by a round trip posted less than half a reclamation
//! grace period ago (the time is taken before posting, so a late answer only makes
//! it look older) skips
//! the tail search: in one doorbell on the chain's memory node it WRITEs the new node,
//! CASes the remembered tail's header from "no successor, this generation, live" to
//! the link, and READs the key's root (for the shortcut, as the search would have).
//! The queue pair executes them in order, so the node is complete before it is linked.
//!
//! Why the CAS alone is enough: the compare value names the node by its address and
//! generation, and a node's memory is reused (with the next generation) only a grace
//! period after a successor was linked to it. The tail was verified within half of
//! that, so the word at that address is either still that node's header — the CAS
//! succeeds exactly when it is still the live tail, which is the write's condition
//! and its linearization point, as for the ordinary link — or the node has a
//! successor now, or is a tombstone, and the CAS fails without changing anything.
//! The new node's version is the verified tail's plus one, which is right exactly when
//! the CAS succeeds. A lost CAS costs that round trip and the unlinked node goes back
//! to the allocator: the write then takes the ordinary path ([`super::write`]).
//!
//! Only unreplicated tables outside the switch accelerator and the RPC mode take this
//! path (a replicated link must reach every copy; the accelerator steers link CASes),
//! and only when the tail, the new node and the root share a memory node.

use std::rc::Rc;
use std::time::{Duration, Instant};

use dmkv_api::metadata::TableDescription;
use verbs::wr::WorkRequest;

use super::header::{Header, Successor};
use super::locate::{Found, Node};
use super::shortcut::{ROOT_READ, Shortcut, decode_root};
use super::state::{self, ChainCache};
use super::steer::{LinkOutcome, link_outcome};
use super::write::{linked, version_bytes};
use crate::error::KvError;
use crate::index::WriteKind;
use crate::remote::{atomic_value, read_bytes, write_done};
use crate::replication::copies;
use crate::session::SessionCore;
use crate::stats::OpStats;

/// What a write after a known tail did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KnownTail {
    /// Linked: the write is done.
    Written,
    /// Not tried, or the tail had moved on: take the ordinary path.
    NotTaken,
}

/// Whether a write of `kind` to `table` may go after a verified tail.
fn applies(core: &SessionCore, table: &TableDescription, kind: WriteKind) -> bool {
    matches!(kind, WriteKind::Put | WriteKind::Update | WriteKind::Delete)
        && !copies::is_replicated(table)
        && !core.accelerated
}

/// How recently the tail must have been verified: half the reclamation grace period.
fn window(core: &SessionCore) -> Duration {
    core.client.options.memory.grace / 2
}

/// Try the write of `value` (empty for a delete) after the tail of `key` this
/// session verified recently (see the module docs).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn try_write(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    kind: WriteKind,
    value: &[u8],
    cache: &ChainCache,
    class: usize,
    stats: &mut OpStats,
) -> Result<KnownTail, KvError> {
    if !applies(core, table, kind) {
        return Ok(KnownTail::NotTaken);
    }
    let Some(tail) = state::of(core).recent_tail(table.id, key, window(core)) else {
        return Ok(KnownTail::NotTaken);
    };
    let memnode = u64::from(cache.chain.root.memnode());
    let (Some(t), Some(r)) = (
        core.links.resolve(tail.ptr, 8),
        core.links.resolve(cache.chain.root, ROOT_READ as u64),
    ) else {
        return Ok(KnownTail::NotTaken);
    };
    if t.memnode != memnode || r.memnode != memnode {
        return Ok(KnownTail::NotTaken);
    }
    let node = crate::meta::alloc(core, table.into(), memnode, class)?;
    let node_ptr = core.links.ptr_of(memnode, node.va)?;
    let Some(w) = core.links.resolve(node_ptr, class as u64) else {
        core.alloc.borrow_mut().release_unlinked(node);
        return Err(KvError::corrupt("a new node lies outside its region"));
    };
    let version = tail.version.wrapping_add(1);
    let bytes = match version_bytes(cache, &node, kind, version, key, value, class) {
        Ok(b) => b,
        Err(e) => {
            core.alloc.borrow_mut().release_unlinked(node);
            return Err(e);
        }
    };
    let successor = match Successor::new(node_ptr, node.generation) {
        Ok(s) => s,
        Err(e) => {
            core.alloc.borrow_mut().release_unlinked(node);
            return Err(e.into());
        }
    };
    // Update and delete need a live tail; a put goes after either, but only the live
    // one is tried here (the verified tail's flag is not remembered).
    let cas = Header::tail(tail.generation, false).link(successor);
    let since = Instant::now();
    let done = core
        .links
        .round_trip(
            vec![(
                memnode,
                vec![
                    WorkRequest::write(w.addr, bytes),
                    WorkRequest::cas(t.addr, cas.compare, cas.swap),
                    WorkRequest::read(r.addr, ROOT_READ as u32),
                ],
            )],
            stats,
        )
        .await?;
    let batch = done.first();
    write_done(batch.and_then(|b| b.first()))?;
    let previous = atomic_value(batch.and_then(|b| b.get(1)))?;
    if link_outcome(previous, cas.compare, false) != LinkOutcome::Linked {
        // Nobody can reach the node: it goes back at once.
        core.alloc.borrow_mut().release_unlinked(node);
        stats.stale_hints += 1;
        return Ok(KnownTail::NotTaken);
    }
    // Linked. The root was read after the link; its shortcut is what the search
    // would have seen (or later), for the shortcut's advance. Should the root not
    // decode as this chain's, the node is linked all the same; the shortcut is then
    // not advanced this time (it is taken as already naming the new node).
    let shortcut = read_bytes(batch.and_then(|b| b.get(2)))
        .ok()
        .and_then(|buf| decode_root(buf).ok())
        .filter(|(_, _, chain_id)| *chain_id == cache.chain.chain_id)
        .map(|(raw, shortcut, _)| (raw, shortcut))
        .or_else(|| Shortcut::new(node_ptr, class, version).ok().map(|s| (0, s)));
    let Some(shortcut) = shortcut else {
        // Not reachable for a node of a valid class; the write is done either way.
        state::forget(core, table.id, key);
        return Ok(KnownTail::Written);
    };
    let found = Found {
        node: Node {
            ptr: tail.ptr,
            header: Header::tail(tail.generation, false),
            version: tail.version,
            size_class: tail.size_class,
            value: None,
        },
        shortcut,
    };
    linked(core, table, key, cache, &found, node, version, Some(since));
    Ok(KnownTail::Written)
}
