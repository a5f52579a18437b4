//! Clover writes: put (upsert), insert, update and delete all append a node.
//!
//! 0. A put or insert of a key that has no chain yet creates the chain with the value
//!    as its first version ([`super::first_write`]), when the table has a chain
//!    directory; an update, delete or put of a key whose tail this session verified
//!    within half a grace period links after it without looking for it first, in one
//!    round trip ([`super::known_tail`]); otherwise:
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

use dmkv_api::metadata::TableDescription;
use verbs::wr::WorkRequest;

use super::advance::{advance, sweep_if_needed};
use super::chain;
use super::create_rpc::{CreatedByRpc, create_by_rpc};
use super::directory;
use super::first_write::{self, FirstWrite};
use super::header::{Header, Successor};
use super::known_tail::{self, KnownTail};
use super::link_rpc::{LinkedByRpc, link_by_rpc};
use super::locate::{Found, chase, hint_of, locate, locate_with};
use super::node::{
    CHAIN_ID_AT, CLASS_AT, NODE_PREFIX, NodeRepr, VERSION_AT, encode, size_class_for,
};
use super::replicated::{self, Appended};
use super::shortcut::{Shortcut, VERSION_MASK};
use super::state::{self, ChainCache, Hint};
use super::steer::{LinkOutcome, STEER_FAILED, link_outcome};
use crate::AccessMode;
use crate::alloc::Allocation;
use crate::clover::reclaim::Superseded;
use crate::error::KvError;
use crate::index::WriteKind;
use crate::ptr::RemotePtr;
use crate::remote::{atomic_value, write_done};
use crate::replication::copies;
use crate::session::SessionCore;
use crate::size_class::SIZE_CLASSES;
use crate::stats::OpStats;

/// Whether a write of kind `kind` may go after a tail with this tombstone flag.
fn allowed(kind: WriteKind, tail_is_tombstone: bool) -> Result<(), KvError> {
    match (kind, tail_is_tombstone) {
        (WriteKind::Insert, false) => Err(KvError::AlreadyExists),
        (WriteKind::Update | WriteKind::Delete, true) => Err(KvError::NotFound),
        _ => Ok(()),
    }
}

/// Run one write of `value` (empty for a delete) to `key`, reaching the memory node
/// as `mode` says: `rpc` sends the tail search and the link as one RPC
/// ([`super::link_rpc`]); `hybrid` links by RPC once one more one-sided round trip
/// would exceed k (a lost CAS, a long chase); replicated tables and writes through
/// the switch accelerator stay one-sided.
pub(crate) async fn write(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    kind: WriteKind,
    value: &[u8],
    mode: AccessMode,
) -> Result<(), KvError> {
    let mut stats = OpStats::default();
    core.renew_if_due();
    core.admit().await;
    let mut retries = 0;
    let mode = if copies::is_replicated(table) || core.accelerated {
        AccessMode::OneSided
    } else {
        mode
    };
    let r = write_admitted(
        core,
        table,
        key,
        kind,
        value,
        mode,
        &mut stats,
        &mut retries,
    )
    .await;
    core.finish_admitted(retries);
    if matches!(r, Err(KvError::Corrupt(_))) {
        state::forget(core, table.id, key);
    }
    core.finish_op(stats);
    r
}

/// What linking by RPC left the one-sided path to do.
enum AfterRpc {
    /// The write is finished (done or refused).
    Finish(Result<(), KvError>),
    /// Go on one-sided with this node.
    Continue(Allocation),
}

/// Link `node` by RPC starting from `start` and do the bookkeeping of a link.
#[allow(clippy::too_many_arguments)]
async fn try_rpc(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    kind: WriteKind,
    value: &[u8],
    cache: &ChainCache,
    start: Option<Hint>,
    node: Allocation,
    class: usize,
    mode: AccessMode,
    stats: &mut OpStats,
) -> Result<AfterRpc, KvError> {
    let done = link_by_rpc(
        core, table, key, kind, value, cache, start, node, class, stats,
    )
    .await?;
    Ok(match done {
        LinkedByRpc::Linked(found) => {
            let version = found.node.version.wrapping_add(1);
            linked(core, table, key, cache, &found, node, version, None);
            AfterRpc::Finish(Ok(()))
        }
        LinkedByRpc::Refused(e) => AfterRpc::Finish(Err(e)),
        LinkedByRpc::NoWorkers(node) if mode == AccessMode::Rpc => {
            core.alloc.borrow_mut().release_unlinked(node);
            AfterRpc::Finish(Err(crate::rpc_port::no_workers(&table.name)))
        }
        LinkedByRpc::NoWorkers(node) | LinkedByRpc::OneSided(node) => AfterRpc::Continue(node),
    })
}

#[allow(clippy::too_many_arguments)]
async fn write_admitted(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    kind: WriteKind,
    value: &[u8],
    mode: AccessMode,
    stats: &mut OpStats,
    retries: &mut u32,
) -> Result<(), KvError> {
    let first = stats.round_trips;
    let k = u64::from(core.client.options.access.hybrid_k);
    let mut rpc_open = mode != AccessMode::OneSided;
    let known = state::of(core).hint(table.id, key).is_some()
        || state::shared(core).chain(table.id, key).is_some();
    if mode == AccessMode::Rpc && !known {
        // A key this client knows no chain for: insert it at the node if it has none.
        match create_by_rpc(core, table, key, kind, value, stats).await? {
            CreatedByRpc::Done(r) => return r,
            CreatedByRpc::Chain(cache) => {
                state::shared(core).set_chain(table.id, key, cache.chain);
                state::of(core).set_hint(table.id, key, cache);
            }
            CreatedByRpc::OneSided => {}
        }
    } else if !known
        && first_write::applies(core, table, kind)
        && let Some(dir) = directory::of(core, table, stats).await?
        && first_write::try_write(core, table, dir, key, value, stats).await? == FirstWrite::Written
    {
        return Ok(());
    }
    let Some(cache) = chain::open(core, table, key, true, stats).await? else {
        return Err(KvError::unavailable("the key's root is not published"));
    };
    let class = size_class_for(key.len(), value.len())?;
    if mode != AccessMode::Rpc
        && known_tail::try_write(core, table, key, kind, value, &cache, class, stats).await?
            == KnownTail::Written
    {
        return Ok(());
    }
    let memnode = u64::from(cache.chain.root.memnode());
    let mut prepared = None;
    if mode == AccessMode::Rpc {
        rpc_open = false;
        let node = crate::meta::alloc(core, table.into(), memnode, class)?;
        match try_rpc(
            core, table, key, kind, value, &cache, cache.hint, node, class, mode, stats,
        )
        .await?
        {
            AfterRpc::Finish(r) => return r,
            AfterRpc::Continue(node) => prepared = Some(node),
        }
    }
    let since = Instant::now();
    let mut found = match locate_with(core, table, key, cache, mode, stats).await {
        Ok(f) => f,
        Err(e) => {
            if let Some(node) = prepared {
                core.alloc.borrow_mut().release_unlinked(node);
            }
            return Err(e);
        }
    };
    state::of(core).set_hint(
        table.id,
        key,
        ChainCache {
            chain: cache.chain,
            hint: found.node.value.is_some().then(|| hint_of(&found.node)),
        },
    );
    state::of(core).verified_tail(table.id, key, hint_of(&found.node), since);
    if let Err(e) = allowed(kind, found.node.header.tombstone) {
        if let Some(node) = prepared {
            core.alloc.borrow_mut().release_unlinked(node);
        }
        return Err(e);
    }
    let mut node = match prepared {
        Some(node) => node,
        None => crate::meta::alloc(core, table.into(), memnode, class)?,
    };
    let mut node_ptr = core.links.ptr_of(memnode, node.va)?;
    let mut link = Successor::new(node_ptr, node.generation)?;
    let max = core.client.options.retry.max_link_attempts.max(1);
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        if rpc_open && stats.round_trips - first + 1 > k {
            // Hybrid: one more one-sided round trip would pass k.
            rpc_open = false;
            let start = Some(hint_of(&found.node));
            match try_rpc(
                core, table, key, kind, value, &cache, start, node, class, mode, stats,
            )
            .await?
            {
                AfterRpc::Finish(r) => return r,
                AfterRpc::Continue(n) => {
                    node = n;
                    node_ptr = core.links.ptr_of(memnode, node.va)?;
                    link = Successor::new(node_ptr, node.generation)?;
                }
            }
        }
        let version = found.node.version.wrapping_add(1);
        let bytes = version_bytes(&cache, &node, kind, version, key, value, class)?;
        let cas =
            Header::tail(found.node.header.generation, found.node.header.tombstone).link(link);
        let (Some(w), Some(c)) = (
            core.links
                .resolve(copies::primary(table, node_ptr), class as u64),
            core.links
                .resolve(copies::primary(table, found.node.ptr), 8),
        ) else {
            core.alloc.borrow_mut().release_unlinked(node);
            return Err(KvError::corrupt("a node lies outside its region"));
        };
        let (previous, lost_replicated) = if copies::is_replicated(table) {
            match replicated::append(
                core,
                table,
                node_ptr,
                class,
                bytes,
                found.node.ptr,
                cas.compare,
                cas.swap,
                stats,
            )
            .await?
            {
                Appended::Linked => {
                    linked(core, table, key, &cache, &found, node, version, Some(since));
                    return Ok(());
                }
                Appended::Lost { previous, exposed } => {
                    if exposed {
                        // A backup pointed at this node for a while: never rewrite
                        // it; the next attempt writes a fresh one.
                        let fresh = crate::meta::alloc(core, table.into(), memnode, class)?;
                        core.alloc.borrow_mut().reclaim(node, Instant::now());
                        node = fresh;
                        node_ptr = core.links.ptr_of(memnode, node.va)?;
                        link = Successor::new(node_ptr, node.generation)?;
                    }
                    // Lost: never read as a link outcome (`previous` may equal the
                    // expected value, which would read as linked).
                    (previous, true)
                }
            }
        } else if w.memnode == c.memnode {
            let write_wr = WorkRequest::write(w.addr, bytes);
            let cas_wr = WorkRequest::cas(c.addr, cas.compare, cas.swap);
            // The pair shares a queue pair: one round trip, executed in order.
            let done = core
                .links
                .round_trip(vec![(w.memnode, vec![write_wr, cas_wr])], stats)
                .await?;
            let batch = done.first();
            write_done(batch.and_then(|b| b.first()))?;
            (atomic_value(batch.and_then(|b| b.get(1)))?, false)
        } else {
            // A tail on another memory node (written by a client that placed it
            // elsewhere): the WRITE must complete before the CAS is posted.
            let write_wr = WorkRequest::write(w.addr, bytes);
            let cas_wr = WorkRequest::cas(c.addr, cas.compare, cas.swap);
            let done = core
                .links
                .round_trip(vec![(w.memnode, vec![write_wr])], stats)
                .await?;
            write_done(done.first().and_then(|b| b.first()))?;
            let done = core
                .links
                .round_trip(vec![(c.memnode, vec![cas_wr])], stats)
                .await?;
            (atomic_value(done.first().and_then(|b| b.first()))?, false)
        };
        let outcome = if lost_replicated {
            LinkOutcome::Failed
        } else {
            link_outcome(previous, cas.compare, core.accelerated)
        };
        match outcome {
            LinkOutcome::Linked => {
                linked(core, table, key, &cache, &found, node, version, Some(since));
                return Ok(());
            }
            LinkOutcome::SteeredLinked { va, generation } => {
                stats.steered_links += 1;
                steered_linked(core, table, key, &cache, &found, node, va, generation);
                return Ok(());
            }
            LinkOutcome::Unknown => {
                // The node may be linked: never rewrite or release it.
                state::forget(core, table.id, key);
                return Err(KvError::unavailable(
                    "the link CAS went through the switch accelerator, which lost its \
                     record of it: the write may or may not have taken effect",
                ));
            }
            LinkOutcome::Failed | LinkOutcome::SteeredFailed => {}
        }
        stats.cas_failures += 1;
        *retries += 1;
        if attempt >= max {
            core.alloc.borrow_mut().release_unlinked(node);
            return Err(KvError::Contended { attempts: attempt });
        }
        let chased = match Header::unpack(previous)
            .ok()
            .filter(|_| previous != STEER_FAILED)
        {
            Some(h) if h.generation == found.node.header.generation => match h.successor {
                Some(next) => chase(core, table, cache.chain.chain_id, &found, next, stats).await?,
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
                locate(core, table, key, fresh, stats).await?
            }
        };
        if let Err(e) = allowed(kind, found.node.header.tombstone) {
            core.alloc.borrow_mut().release_unlinked(node);
            return Err(e);
        }
        core.backoff(attempt - 1).await;
    }
}

/// The bytes of the version node a write of `kind` appends to `cache`'s chain in
/// `node`: a tail (a tombstone for a delete) at position `version`.
pub(super) fn version_bytes(
    cache: &ChainCache,
    node: &Allocation,
    kind: WriteKind,
    version: u32,
    key: &[u8],
    value: &[u8],
    class: usize,
) -> Result<Vec<u8>, KvError> {
    encode(
        &NodeRepr {
            header: Header::tail(node.generation, kind == WriteKind::Delete),
            chain_id: cache.chain.chain_id,
            version,
            key: key.to_vec(),
            value: value.to_vec(),
        },
        class,
    )
}

/// Bookkeeping after the link CAS succeeded: the new tail becomes the hint (verified
/// since `verified_since`, when given: an instant before the link was posted), the
/// old one waits for reclamation, and the shortcut is advanced if it lags.
#[allow(clippy::too_many_arguments)]
pub(super) fn linked(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    cache: &ChainCache,
    found: &Found,
    node: Allocation,
    version: u32,
    verified_since: Option<Instant>,
) {
    let root = cache.chain.root;
    let Ok(node_ptr) = core.links.ptr_of(node.memnode, node.va) else {
        return;
    };
    let tail = Hint {
        ptr: node_ptr,
        generation: node.generation,
        version,
        size_class: node.size,
    };
    state::remember_tail(
        core,
        table.id,
        key,
        ChainCache {
            chain: cache.chain,
            hint: Some(tail),
        },
    );
    if let Some(since) = verified_since {
        state::of(core).verified_tail(table.id, key, tail, since);
    }
    let old = found.node.ptr;
    if let Some(link) = core.links.get(u64::from(old.memnode())) {
        state::of(core).supersede(Superseded {
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
        && lag >= core.client.options.clover.shortcut_lag.max(1)
        && let Ok(target) = Shortcut::new(node_ptr, node.size, version)
    {
        core.spawn_background(advance(
            core.clone(),
            root,
            copies::copies_of(table, root),
            raw,
            target,
        ));
    }
    sweep_if_needed(core);
}

/// Bookkeeping after the switch linked the node after its committed tail at `pred_va`
/// (own generation `pred_generation`) instead of after `found`. The switch gave the
/// node the version after that tail's, which the session learns by reading the
/// tail's prefix in the background; then the tail waits for reclamation, the node
/// becomes the hint, and the shortcut is advanced. Until then the old hint stays (a
/// stale hint costs a steered or restarted read, never a wrong one).
#[allow(clippy::too_many_arguments)]
fn steered_linked(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    cache: &ChainCache,
    found: &Found,
    node: Allocation,
    pred_va: u64,
    pred_generation: u16,
) {
    let Ok(pred) = core.links.ptr_of(node.memnode, pred_va) else {
        return;
    };
    let job = adopt_steered(
        core.clone(),
        table.id,
        key.to_vec(),
        *cache,
        found.shortcut,
        node,
        pred,
        pred_generation,
    );
    core.spawn_background(job);
}

#[allow(clippy::too_many_arguments)]
async fn adopt_steered(
    core: Rc<SessionCore>,
    table_id: u64,
    key: Vec<u8>,
    cache: ChainCache,
    shortcut: (u64, Shortcut),
    node: Allocation,
    pred: RemotePtr,
    pred_generation: u16,
) {
    let mut stats = OpStats::default();
    let Some(t) = core.links.resolve(pred, NODE_PREFIX as u64) else {
        return;
    };
    let done = core
        .links
        .round_trip(
            vec![(
                t.memnode,
                vec![WorkRequest::read(t.addr, NODE_PREFIX as u32)],
            )],
            &mut stats,
        )
        .await;
    core.add_background(&stats);
    let Ok(done) = done else { return };
    let Ok(buf) = crate::remote::read_bytes(done.first().and_then(|b| b.first())) else {
        return;
    };
    let field = |at: usize, n: usize| buf.get(at..at + n);
    let (Some(hdr), Some(chain), Some(class), Some(ver)) = (
        field(0, 8),
        field(CHAIN_ID_AT, 8),
        field(CLASS_AT, 1),
        field(VERSION_AT, 4),
    ) else {
        return;
    };
    let le8 = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
    let Ok(header) = Header::unpack(le8(hdr)) else {
        return;
    };
    let version = u32::from_le_bytes(ver.try_into().unwrap_or([0; 4]));
    let Some(&pred_class) = SIZE_CLASSES.get(usize::from(class[0])) else {
        return;
    };
    if le8(chain) != cache.chain.chain_id || header.generation != pred_generation {
        // Not the node the switch meant (reused since): leave it to the sweeps.
        return;
    }
    let Ok(node_ptr) = core.links.ptr_of(node.memnode, node.va) else {
        return;
    };
    let node_version = version.wrapping_add(1);
    state::of(&core).set_hint(
        table_id,
        &key,
        ChainCache {
            chain: cache.chain,
            hint: Some(Hint {
                ptr: node_ptr,
                generation: node.generation,
                version: node_version,
                size_class: node.size,
            }),
        },
    );
    if let Some(link) = core.links.get(u64::from(pred.memnode())) {
        state::of(&core).supersede(Superseded {
            root: cache.chain.root,
            version,
            node: Allocation {
                table: table_id,
                memnode: u64::from(pred.memnode()),
                va: link.base_va + pred.offset(),
                size: pred_class,
                generation: header.generation,
            },
            since: Instant::now(),
        });
    }
    let (raw, seen) = shortcut;
    let lag = node_version.wrapping_sub(seen.version) & VERSION_MASK;
    if seen.is_before(node_version)
        && lag >= core.client.options.clover.shortcut_lag.max(1)
        && let Ok(target) = Shortcut::new(node_ptr, node.size, node_version)
    {
        advance(
            core.clone(),
            cache.chain.root,
            vec![cache.chain.root],
            raw,
            target,
        )
        .await;
    }
    sweep_if_needed(&core);
}
