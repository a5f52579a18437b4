//! Clover writes: put (upsert), insert, update and delete all append a node.
//!
//! 1. Find the tail ([`super::locate`]; one round trip with a warm hint) and check
//!    the operation's condition against it (insert needs a tombstone tail, update and
//!    delete a live one). A failed condition is decided by that read.
//! 2. Allocate a node of the value's size class on the chain's memory node, then in
//!    one round trip post, on that node's queue pair, the WRITE of the whole node
//!    (its length is the class) followed by the CAS on the tail's header (compare:
//!    no successor, the tail's generation and tombstone flag; swap: the link). The
//!    queue pair executes them in order, so the node is complete before it is
//!    linked. A successful CAS is the operation's linearization point.
//! 3. If the CAS fails, another writer linked first: chase the new nodes by their
//!    fixed prefixes to the real tail, re-check the condition, back off (SMART
//!    truncated exponential backoff with jitter) and retry, at most
//!    `max_link_attempts` times; then give the unlinked node back and fail with
//!    `Contended`.
//! 4. After linking, remember the old tail for reclamation and, when the key's
//!    shortcut lags, advance it in the background ([`super::advance`]).
//!
//! A client that crashes at any point leaves at worst an unlinked node (garbage in
//! its own lease) or a linked node with a lagging shortcut: nothing another client
//! waits for.

use std::rc::Rc;
use std::time::Instant;

use metadata::api::TableDescription;
use verbs::wr::WorkRequest;

use super::advance::{advance, sweep_if_needed};
use super::chain::{self, ChainCache};
use super::header::{Header, Successor};
use super::locate::{Found, chase, hint_of, locate};
use super::node::{NodeRepr, encode, size_class_for};
use super::shortcut::{Shortcut, VERSION_MASK};
use crate::alloc::Allocation;
use crate::error::KvError;
use crate::reclaim::Superseded;
use crate::remote::{atomic_value, write_done};
use crate::session::SessionCore;
use crate::stats::OpStats;

/// Which write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteKind {
    /// Upsert.
    Put,
    /// Create; fails with `AlreadyExists` when present.
    Insert,
    /// Overwrite; fails with `NotFound` when absent.
    Update,
    /// Remove (append a tombstone); fails with `NotFound` when absent.
    Delete,
}

impl WriteKind {
    /// Whether the write may go after a tail with this tombstone flag.
    fn allowed(self, tail_is_tombstone: bool) -> Result<(), KvError> {
        match (self, tail_is_tombstone) {
            (WriteKind::Insert, false) => Err(KvError::AlreadyExists),
            (WriteKind::Update | WriteKind::Delete, true) => Err(KvError::NotFound),
            _ => Ok(()),
        }
    }
}

/// Run one write of `value` (empty for a delete) to `key`.
pub(crate) async fn write(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    kind: WriteKind,
    value: &[u8],
) -> Result<(), KvError> {
    let mut stats = OpStats::default();
    core.renew_if_due();
    core.admit().await;
    let mut retries = 0;
    let r = write_admitted(core, table, key, kind, value, &mut stats, &mut retries).await;
    core.finish_admitted(retries);
    if matches!(r, Err(KvError::Corrupt(_))) {
        core.forget(table.id, key);
    }
    core.finish_op(stats);
    r
}

async fn write_admitted(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    kind: WriteKind,
    value: &[u8],
    stats: &mut OpStats,
    retries: &mut u32,
) -> Result<(), KvError> {
    let Some(cache) = chain::open(core, table, key, true, stats).await? else {
        return Err(KvError::Unavailable(
            "the key's root is not published".into(),
        ));
    };
    let mut found = locate(core, key, cache, stats).await?;
    core.set_hint(
        table.id,
        key,
        ChainCache {
            chain: cache.chain,
            hint: found.node.value.is_some().then(|| hint_of(&found.node)),
        },
    );
    kind.allowed(found.node.header.tombstone)?;
    let class = size_class_for(key.len(), value.len())?;
    let memnode = u64::from(cache.chain.root.memnode());
    let node = super::meta::alloc(core, table.into(), memnode, class)?;
    let node_ptr = core.links.ptr_of(memnode, node.va)?;
    let link = Successor::new(node_ptr, node.generation)?;
    let max = core.client.options.max_link_attempts.max(1);
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let version = found.node.version.wrapping_add(1);
        let bytes = encode(
            &NodeRepr {
                header: Header::tail(node.generation, kind == WriteKind::Delete),
                chain_id: cache.chain.chain_id,
                version,
                key: key.to_vec(),
                value: value.to_vec(),
            },
            class,
        )?;
        let cas =
            Header::tail(found.node.header.generation, found.node.header.tombstone).link(link);
        let (Some(w), Some(c)) = (
            core.links.resolve(node_ptr, class as u64),
            core.links.resolve(found.node.ptr, 8),
        ) else {
            core.alloc.borrow_mut().release_unlinked(node);
            return Err(KvError::Corrupt("a node lies outside its region".into()));
        };
        let write_wr = WorkRequest::write(w.addr, bytes);
        let cas_wr = WorkRequest::cas(c.addr, cas.compare, cas.swap);
        let previous = if w.memnode == c.memnode {
            // The pair shares a queue pair: one round trip, executed in order.
            let done = core
                .links
                .round_trip(vec![(w.memnode, vec![write_wr, cas_wr])], stats)
                .await?;
            let batch = done.first();
            write_done(batch.and_then(|b| b.first()))?;
            atomic_value(batch.and_then(|b| b.get(1)))?
        } else {
            // A tail on another memory node (written by a client that placed it
            // elsewhere): the WRITE must complete before the CAS is posted.
            let done = core
                .links
                .round_trip(vec![(w.memnode, vec![write_wr])], stats)
                .await?;
            write_done(done.first().and_then(|b| b.first()))?;
            let done = core
                .links
                .round_trip(vec![(c.memnode, vec![cas_wr])], stats)
                .await?;
            atomic_value(done.first().and_then(|b| b.first()))?
        };
        if previous == cas.compare {
            linked(core, table, key, &cache, &found, node, version);
            return Ok(());
        }
        stats.cas_failures += 1;
        *retries += 1;
        if attempt >= max {
            core.alloc.borrow_mut().release_unlinked(node);
            return Err(KvError::Contended { attempts: attempt });
        }
        let chased = match Header::unpack(previous) {
            Ok(h) if h.generation == found.node.header.generation => match h.successor {
                Some(next) => chase(core, cache.chain.chain_id, &found, next, stats).await?,
                None => None,
            },
            _ => None,
        };
        found = match chased {
            Some(f) => f,
            None => {
                let fresh = ChainCache {
                    chain: cache.chain,
                    hint: None,
                };
                locate(core, key, fresh, stats).await?
            }
        };
        if let Err(e) = kind.allowed(found.node.header.tombstone) {
            core.alloc.borrow_mut().release_unlinked(node);
            return Err(e);
        }
        core.backoff(attempt - 1).await;
    }
}

/// Bookkeeping after the link CAS succeeded: the new tail becomes the hint, the old
/// one waits for reclamation, and the shortcut is advanced if it lags.
fn linked(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    cache: &ChainCache,
    found: &Found,
    node: Allocation,
    version: u32,
) {
    let root = cache.chain.root;
    let Ok(node_ptr) = core.links.ptr_of(node.memnode, node.va) else {
        return;
    };
    core.set_hint(
        table.id,
        key,
        ChainCache {
            chain: cache.chain,
            hint: Some(super::chain::Hint {
                ptr: node_ptr,
                generation: node.generation,
                version,
                size_class: node.size,
            }),
        },
    );
    let old = found.node.ptr;
    if let Some(link) = core.links.get(u64::from(old.memnode())) {
        core.reclaim.borrow_mut().supersede(Superseded {
            root,
            version: found.node.version,
            node: Allocation {
                table: table.id,
                memnode: u64::from(old.memnode()),
                va: link.base_va + old.offset(),
                size: found.node.size_class,
                generation: found.node.header.generation,
            },
            since: Instant::now(),
        });
    }
    let (raw, seen) = found.shortcut;
    let lag = version.wrapping_sub(seen.version) & VERSION_MASK;
    if seen.is_before(version)
        && lag >= core.client.options.shortcut_lag.max(1)
        && let Ok(target) = Shortcut::new(node_ptr, node.size, version)
    {
        core.spawn_background(advance(core.clone(), root, raw, target));
    }
    sweep_if_needed(core);
}
