//! Inserting a key that has no chain yet as one RPC to the memory node holding the
//! table's chain directory ([`dmkv_api::rpc_clover_create`]).
//!
//! The session does what a one-sided claim prepares ([`super::directory`]): a chain
//! id from its leased block ([`super::chain_ids`]), a keyed root and a first node (a
//! tombstone of version 1) on the chain's home node, and the new version's node; it
//! WRITEs all three in the doorbell of the SEND. The node claims the key's
//! directory slot for the root with the CAS one-sided claimers use and links the
//! new version after the first node. No metadata call is made (beyond leasing a
//! block of ids, once per block); the claimed mapping is queued for publication
//! as after a one-sided claim ([`super::publish`]).
//!
//! The session does it one-sided instead when the chain's home (chosen by chain id)
//! is not the node holding the key's directory bucket, and when the node hands the
//! insert back (full bucket, a candidate root elsewhere, contention).

use std::rc::Rc;

use dmkv_api::metadata::TableDescription;
use dmkv_api::rpc::Request;
use dmkv_api::rpc_clover_create::{CloverCreate, CreateOutcome};
use dmkv_api::rpc_clover_link::{CloverLink, LinkKind, LinkOutcome};
use verbs::wr::WorkRequest;

use super::directory::{self, BUCKET_BYTES, encode_keyed_root, keyed_root_size};
use super::header::Header;
use super::link_rpc::found_after;
use super::node::{NodeRepr, encode, size_class_for};
use super::shortcut::Shortcut;
use super::state::{self, ChainCache, ChainRef, Hint};
use super::{chain, chain_ids, publish};
use crate::alloc::Allocation;
use crate::error::KvError;
use crate::index::WriteKind;
use crate::ptr::RemotePtr;
use crate::session::SessionCore;
use crate::stats::OpStats;

/// What an insert by RPC came to.
pub(crate) enum CreatedByRpc {
    /// The write is finished (done, or its condition failed).
    Done(Result<(), KvError>),
    /// The key has this chain now (found, or created without the link): write to it.
    Chain(ChainCache),
    /// Create the chain one-sided.
    OneSided,
}

/// The three objects of an insert, allocated on one memory node.
struct Objects {
    first: Allocation,
    root: Allocation,
    node: Allocation,
}

impl Objects {
    fn release(self, core: &SessionCore) {
        let mut a = core.alloc.borrow_mut();
        a.release_unlinked(self.first);
        a.release_unlinked(self.root);
        a.release_unlinked(self.node);
    }
}

/// Allocate the first node (`first_class`), the keyed root and the value node
/// (`class`) on `memnode`, all or none.
fn allocate(
    core: &SessionCore,
    table: &TableDescription,
    memnode: u64,
    key: &[u8],
    first_class: usize,
    class: usize,
) -> Result<Objects, KvError> {
    let first = crate::meta::alloc(core, table.into(), memnode, first_class)?;
    let root = match crate::meta::alloc(core, table.into(), memnode, keyed_root_size(key.len())) {
        Ok(r) => r,
        Err(e) => {
            core.alloc.borrow_mut().release_unlinked(first);
            return Err(e);
        }
    };
    match crate::meta::alloc(core, table.into(), memnode, class) {
        Ok(node) => Ok(Objects { first, root, node }),
        Err(e) => {
            let mut a = core.alloc.borrow_mut();
            a.release_unlinked(first);
            a.release_unlinked(root);
            Err(e)
        }
    }
}

/// Insert (or put) `value` under `key`, which this client knows no chain for, by
/// one RPC when the table has a chain directory on the chain's home node (`rpc`
/// mode: a node that cannot be called is the `no_workers` error).
pub(crate) async fn create_by_rpc(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    kind: WriteKind,
    value: &[u8],
    stats: &mut OpStats,
) -> Result<CreatedByRpc, KvError> {
    let link_kind = match kind {
        WriteKind::Put => LinkKind::Put,
        WriteKind::Insert => LinkKind::Insert,
        WriteKind::Update | WriteKind::Delete => return Ok(CreatedByRpc::OneSided),
    };
    let Some(dir) = directory::of(core, table, stats).await? else {
        return Ok(CreatedByRpc::OneSided);
    };
    let place = directory::place(key, dir.buckets);
    let bucket = dir
        .start
        .checked_add(place.bucket * BUCKET_BYTES)
        .ok_or_else(|| KvError::corrupt("a chain directory bucket lies outside the pool"))?;
    // A node that cannot be called: the write fails before anything is prepared.
    let Some(b) = core.links.resolve(bucket, BUCKET_BYTES) else {
        return Ok(CreatedByRpc::OneSided);
    };
    if crate::rpc_port::endpoint(core, b.memnode, b.addr.rkey)?.is_none() {
        return Ok(CreatedByRpc::Done(Err(crate::rpc_port::no_workers(
            &table.name,
        ))));
    }
    let chain_id = chain_ids::next(core, table, stats).await?;
    let memnode = chain::home(core, table, chain_id)?;
    if memnode != u64::from(bucket.memnode()) {
        // The chain's home is another node than the directory's: one-sided (the id
        // is skipped; ids are never reused).
        return Ok(CreatedByRpc::OneSided);
    }
    let first_class = size_class_for(key.len(), 0)?;
    let class = size_class_for(key.len(), value.len())?;
    let objects = allocate(core, table, memnode, key, first_class, class)?;
    match send(
        core,
        key,
        link_kind,
        value,
        chain_id,
        bucket,
        place.fingerprint,
        &objects,
        (first_class, class),
        stats,
    )
    .await
    {
        Ok(Some(outcome)) => {
            settle(
                core,
                table,
                key,
                chain_id,
                outcome,
                objects,
                first_class,
                stats,
            )
            .await
        }
        Ok(None) => {
            objects.release(core);
            Ok(CreatedByRpc::OneSided)
        }
        // Without an answer the objects may be reachable: never released.
        Err(e) => Err(e),
    }
}

/// Write the three objects and send the request: the node's answer, or `None` when
/// it cannot be called (or the objects cannot be reached).
#[allow(clippy::too_many_arguments)]
async fn send(
    core: &Rc<SessionCore>,
    key: &[u8],
    kind: LinkKind,
    value: &[u8],
    chain_id: u64,
    bucket: RemotePtr,
    fingerprint: u16,
    o: &Objects,
    (first_class, class): (usize, usize),
    stats: &mut OpStats,
) -> Result<Option<CreateOutcome>, KvError> {
    let memnode = o.node.memnode;
    let first_ptr = core.links.ptr_of(memnode, o.first.va)?;
    let root_ptr = core.links.ptr_of(memnode, o.root.va)?;
    let node_ptr = core.links.ptr_of(memnode, o.node.va)?;
    let first_bytes = encode(
        &NodeRepr {
            header: Header::tail(o.first.generation, true),
            chain_id,
            version: 1,
            key: key.to_vec(),
            value: Vec::new(),
        },
        first_class,
    )?;
    let root_bytes = encode_keyed_root(chain_id, Shortcut::new(first_ptr, first_class, 1)?, key);
    let node_bytes = encode(
        &NodeRepr {
            header: Header::tail(o.node.generation, false),
            chain_id,
            version: 2,
            key: key.to_vec(),
            value: value.to_vec(),
        },
        class,
    )?;
    let (Some(f), Some(r), Some(n), Some(b)) = (
        core.links.resolve(first_ptr, first_class as u64),
        core.links.resolve(root_ptr, root_bytes.len() as u64),
        core.links.resolve(node_ptr, class as u64),
        core.links.resolve(bucket, BUCKET_BYTES),
    ) else {
        return Ok(None);
    };
    if [f.memnode, r.memnode, n.memnode]
        .iter()
        .any(|m| *m != b.memnode)
    {
        return Ok(None);
    }
    let Some((port, link, rkey)) = crate::rpc_port::endpoint(core, b.memnode, b.addr.rkey)? else {
        return Ok(None);
    };
    let request = CloverCreate {
        bucket: bucket.offset(),
        fingerprint,
        link: CloverLink {
            rkey,
            base_va: link.base_va,
            pointer_memnode: bucket.memnode(),
            chain_id,
            kind,
            root: root_ptr.offset(),
            start: first_ptr.offset(),
            start_version: 1,
            start_generation: o.first.generation,
            node: node_ptr.offset(),
            node_generation: o.node.generation,
            key,
        },
    };
    let writes = vec![
        WorkRequest::write(f.addr, first_bytes),
        WorkRequest::write(r.addr, root_bytes),
        WorkRequest::write(n.addr, node_bytes),
    ];
    let timeout = core.client.options.access.rpc_timeout;
    let reply = port
        .call(
            &core.worker,
            &link.qp,
            writes,
            Request::CloverCreate(request),
            timeout,
            stats,
        )
        .await?;
    let body = crate::rpc_port::ok_body(&reply, "Clover insert")?;
    CreateOutcome::parse(body)
        .map(Some)
        .ok_or_else(|| KvError::corrupt("the memory node's Clover insert reply does not parse"))
}

/// Act on the node's answer.
#[allow(clippy::too_many_arguments)]
async fn settle(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    chain_id: u64,
    outcome: CreateOutcome,
    o: Objects,
    first_class: usize,
    stats: &mut OpStats,
) -> Result<CreatedByRpc, KvError> {
    let memnode = o.node.memnode;
    match outcome {
        CreateOutcome::Created(linked) => {
            let root = core.links.ptr_of(memnode, o.root.va)?;
            let cache = ChainCache {
                chain: ChainRef { chain_id, root },
                hint: Some(Hint {
                    ptr: core.links.ptr_of(memnode, o.first.va)?,
                    generation: o.first.generation,
                    version: 1,
                    size_class: first_class,
                }),
            };
            publish::claimed(core, table, key, chain_id, (memnode, o.root.va), stats).await;
            state::shared(core).set_chain(table.id, key, cache.chain);
            state::of(core).set_hint(table.id, key, cache);
            let refused = |e: KvError| {
                core.alloc.borrow_mut().release_unlinked(o.node);
                Ok(CreatedByRpc::Done(Err(e)))
            };
            match linked {
                LinkOutcome::Linked(after) => {
                    let found = found_after(core, &cache, after)?;
                    let version = found.node.version.wrapping_add(1);
                    super::write::linked(core, table, key, &cache, &found, o.node, version, None);
                    Ok(CreatedByRpc::Done(Ok(())))
                }
                LinkOutcome::Exists => refused(KvError::AlreadyExists),
                LinkOutcome::NotFound => refused(KvError::NotFound),
                LinkOutcome::Deferred(_) => {
                    core.alloc.borrow_mut().release_unlinked(o.node);
                    Ok(CreatedByRpc::Chain(cache))
                }
            }
        }
        CreateOutcome::Exists { root, chain_id } => {
            let root = RemotePtr::new(core.links.ptr_of(memnode, o.root.va)?.memnode(), root)?;
            o.release(core);
            Ok(CreatedByRpc::Chain(ChainCache {
                chain: ChainRef { chain_id, root },
                hint: None,
            }))
        }
        CreateOutcome::Deferred(_) => {
            o.release(core);
            Ok(CreatedByRpc::OneSided)
        }
    }
}
