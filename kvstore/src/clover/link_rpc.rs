//! A Clover write's tail search and link as one RPC to the memory node holding the
//! key's chain ([`dmkv_api::rpc_clover_link`]).
//!
//! The session has allocated the new node on the root's memory node; it WRITEs the
//! whole node in the doorbell of the SEND (RC executes the WRITE first), naming the
//! root, its hint of the tail (when it has one) and the node. The node walks from the
//! hint — or from the root's shortcut when the hint went stale — to the tail, checks
//! the write's condition, numbers the new node and links it with the CAS one-sided
//! writers use, retrying a lost CAS a bounded number of times next to memory. The
//! reply names the tail it linked after and the root's shortcut word, which is what
//! the session's bookkeeping after a one-sided link needs (the hint, reclamation,
//! moving the shortcut).

use std::rc::Rc;

use dmkv_api::metadata::TableDescription;
use dmkv_api::rpc::{Request, RpcStatus, parse_reply};
use dmkv_api::rpc_clover_link::{CloverLink, LinkKind, LinkOutcome, LinkedAfter, NO_START};
use verbs::wr::WorkRequest;

use super::header::Header;
use super::locate::{Found, Node};
use super::node::{NodeRepr, encode};
use super::shortcut::decode_root;
use super::state::{self, ChainCache, Hint};
use crate::alloc::Allocation;
use crate::error::KvError;
use crate::index::WriteKind;
use crate::ptr::RemotePtr;
use crate::session::SessionCore;
use crate::size_class::SIZE_CLASSES;
use crate::stats::OpStats;

/// What a write by RPC came to.
pub(crate) enum LinkedByRpc {
    /// Linked after the tail in `Found`; the new node has its version plus one.
    Linked(Found),
    /// The write's condition failed at the tail (`AlreadyExists` or `NotFound`);
    /// the node is given back.
    Refused(KvError),
    /// The node handed the write back with nothing linked: write one-sided with
    /// the node (unlinked).
    OneSided(Allocation),
    /// The node cannot be called (no workers, no reply queue): the node back.
    NoWorkers(Allocation),
}

/// The tail a node linked after, as the one-sided path would have found it (the
/// root's shortcut word as the node read it); reclaims what that shortcut passed.
pub(crate) fn found_after(
    core: &SessionCore,
    cache: &ChainCache,
    after: LinkedAfter,
) -> Result<Found, KvError> {
    let root = cache.chain.root;
    let mut root_bytes = after.shortcut.to_le_bytes().to_vec();
    root_bytes.extend_from_slice(&cache.chain.chain_id.to_le_bytes());
    let (raw, shortcut, _) = decode_root(&root_bytes)?;
    state::of(core).shortcut_seen(core, root, shortcut);
    let size_class = SIZE_CLASSES
        .get(usize::from(after.class_index))
        .copied()
        .ok_or_else(|| KvError::corrupt("a Clover write named no size class"))?;
    Ok(Found {
        node: Node {
            ptr: RemotePtr::new(root.memnode(), after.offset)?,
            header: Header::unpack(after.header)?,
            version: after.version,
            size_class,
            value: None,
        },
        shortcut: (raw, shortcut),
    })
}

/// The wire kind of a write.
fn link_kind(kind: WriteKind) -> LinkKind {
    match kind {
        WriteKind::Put => LinkKind::Put,
        WriteKind::Insert => LinkKind::Insert,
        WriteKind::Update => LinkKind::Update,
        WriteKind::Delete => LinkKind::Delete,
    }
}

/// Write `value` (empty for a delete) to `key` by one RPC, with `node` (allocated
/// on the root's memory node, of the value's class `class`) as the new version
/// and `start` as the hint of the tail.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn link_by_rpc(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    kind: WriteKind,
    value: &[u8],
    cache: &ChainCache,
    start: Option<Hint>,
    node: Allocation,
    class: usize,
    stats: &mut OpStats,
) -> Result<LinkedByRpc, KvError> {
    let root = cache.chain.root;
    let node_ptr = core.links.ptr_of(node.memnode, node.va)?;
    let (Some(w), Some(r)) = (
        core.links.resolve(node_ptr, class as u64),
        core.links.resolve(root, 16),
    ) else {
        return Ok(LinkedByRpc::OneSided(node));
    };
    if w.memnode != r.memnode || node_ptr.memnode() != root.memnode() {
        return Ok(LinkedByRpc::OneSided(node));
    }
    let Some((port, link, rkey)) = crate::rpc_port::endpoint(core, w.memnode, w.addr.rkey)? else {
        return Ok(LinkedByRpc::NoWorkers(node));
    };
    let start = start.filter(|h| h.ptr.memnode() == root.memnode());
    let bytes = encode(
        &NodeRepr {
            header: Header::tail(node.generation, kind == WriteKind::Delete),
            chain_id: cache.chain.chain_id,
            // A guess: the memory node numbers the node after the tail it finds.
            version: start.map_or(0, |h| h.version.wrapping_add(1)),
            key: key.to_vec(),
            value: value.to_vec(),
        },
        class,
    )?;
    let request = CloverLink {
        rkey,
        base_va: link.base_va,
        pointer_memnode: root.memnode(),
        chain_id: cache.chain.chain_id,
        kind: link_kind(kind),
        root: root.offset(),
        start: start.map_or(NO_START, |h| h.ptr.offset()),
        start_version: start.map_or(0, |h| h.version),
        start_generation: start.map_or(0, |h| h.generation),
        node: node_ptr.offset(),
        node_generation: node.generation,
        key,
    };
    let timeout = core.client.options.access.rpc_timeout;
    // Without a reply the node may be linked: it is never released or rewritten.
    let reply = port
        .call(
            &core.worker,
            &link.qp,
            vec![WorkRequest::write(w.addr, bytes)],
            Request::CloverLink(request),
            timeout,
            stats,
        )
        .await
        .inspect_err(|_| state::of(core).forget(table.id, key))?;
    let reply = parse_reply(&reply)
        .map_err(|e| KvError::corrupt(format!("the memory node's RPC reply: {e}")))?;
    match reply.status {
        RpcStatus::Ok => {}
        RpcStatus::Failed => {
            state::of(core).forget(table.id, key);
            return Err(KvError::unavailable(
                "the memory node's worker failed executing the Clover write; it may or may \
                 not have taken effect",
            ));
        }
        other => {
            return Err(KvError::unavailable(format!(
                "the memory node refused the Clover write: {other:?}"
            )));
        }
    }
    let outcome = LinkOutcome::parse(reply.body)
        .ok_or_else(|| KvError::corrupt("the memory node's Clover write reply does not parse"))?;
    let release = |e: KvError| {
        core.alloc.borrow_mut().release_unlinked(node);
        Ok(LinkedByRpc::Refused(e))
    };
    match outcome {
        LinkOutcome::Linked(after) => Ok(LinkedByRpc::Linked(found_after(core, cache, after)?)),
        LinkOutcome::Exists => release(KvError::AlreadyExists),
        LinkOutcome::NotFound => release(KvError::NotFound),
        LinkOutcome::Deferred(_) => Ok(LinkedByRpc::OneSided(node)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::shortcut::Shortcut;
    use super::*;
    use crate::size_class::class_index;

    #[test]
    fn the_node_and_the_session_read_shortcut_words_alike() {
        let ptr = RemotePtr::new(3, 64 * 12345).expect("ptr");
        for (class, version) in [(64, 1), (128, 77), (4096, (1 << 21) + 5)] {
            let s = Shortcut::new(ptr, class, version).expect("shortcut");
            let (memnode, offset, idx, low) = dmkv_api::clover_layout::shortcut_target(s.pack());
            assert_eq!((memnode, offset), (3, 64 * 12345));
            assert_eq!(Some(usize::from(idx)), class_index(class));
            assert_eq!(low, version & ((1 << 21) - 1));
            assert_eq!(Shortcut::unpack(s.pack()).ok(), Some(s));
        }
    }
}
