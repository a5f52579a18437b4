//! Finding a key's chain: the session's hint cache, the client's chain cache, the
//! table's chain directory ([`super::directory`]: one-sided, no metadata call per
//! key) when it has one, and the metadata service's slow path (look up or open the
//! chain; find or publish its root) for tables without one and for keys whose
//! directory bucket is full.
//!
//! The metadata service names each key's chain and stores one hint per chain,
//! which here is the address of the chain's root ([`super::shortcut`]). A root is
//! published once, with the service's put-if-absent (`POST .../root`): the client
//! allocates a root and a first node — a tombstone of version 1, so the key starts
//! absent — writes both, and asks the service to store the root's address unless
//! an address is stored. Exactly one root per chain wins; every publisher learns
//! which, and a loser frees its own root and node (they were never reachable).
//!
//! - **Reads** look the chain up without creating it (`GET .../chains?key=`, one
//!   call that also returns the root): no chain, or a chain without a root, means
//!   no write of the key has completed, so the key is absent.
//! - **Writes** open the chain (insert-or-open). The client told "created"
//!   publishes a root at once. Any other waits up to `ClientOptions::root_wait`
//!   for a root to appear and then publishes its own: a creator that died between
//!   creating the chain and publishing its root blocks nobody for longer than
//!   that.
//!
//! Metadata calls ride out a restart of the service ([`super::meta`]).

use std::rc::Rc;
use std::time::Instant;

use dmkv_api::metadata::{TableDescription, TailHint};
use verbs::wr::WorkRequest;

use super::directory::{self, Lookup};
use super::header::Header;
use super::node::{NodeRepr, encode, size_class_for};
use super::shortcut::{ROOT_SIZE, Shortcut, encode_root};
use super::state::{self, ChainCache, ChainRef, Hint};
use crate::alloc::Allocation;
use crate::client::meta_error;
use crate::error::KvError;
use crate::meta;
use crate::remote::write_done;
use crate::replication::copies::resolve_writes;
use crate::session::SessionCore;
use crate::stats::OpStats;

/// The chain of `key`, from the caches or the metadata service.
///
/// With `wait` (writes) the chain is opened, created if new, and a root is
/// published if none appears within `root_wait`. Without it (reads) nothing is
/// created: `Ok(None)` when the key has no chain or its chain has no root yet.
pub(crate) async fn open(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    wait: bool,
    stats: &mut OpStats,
) -> Result<Option<ChainCache>, KvError> {
    let mine = state::of(core).hint(table.id, key);
    let client = state::shared(core).cached(table.id, key);
    if let Some(c) = state::newer(mine, client) {
        if Some(c) != mine {
            state::of(core).set_hint(table.id, key, c);
        }
        return Ok(Some(c));
    }
    if let Some(dir) = directory::of(core, table, stats).await? {
        let found = if wait {
            directory::claim(core, table, dir, key, stats).await?
        } else {
            match directory::lookup(core, dir, key, stats).await? {
                Lookup::Found(chain) => Some(ChainCache { chain, hint: None }),
                Lookup::Absent => return Ok(None),
                Lookup::Elsewhere => None,
            }
        };
        // `None`: the key's bucket is full without it; the service has its chain.
        if let Some(cache) = found {
            state::shared(core).set_chain(table.id, key, cache.chain);
            state::of(core).set_hint(table.id, key, cache);
            return Ok(Some(cache));
        }
    }
    let cache = if wait {
        let (name, k) = (table.name.clone(), key.to_vec());
        let opened = meta::call(core, stats, move |m| m.open_chain(&name, &k))
            .await
            .map_err(meta_error)?;
        let found = if opened.created {
            None
        } else {
            find_root(core, table, opened.chain_id, stats).await?
        };
        match found {
            Some(c) => c,
            None => publish_root(core, table, opened.chain_id, key, stats).await?,
        }
    } else {
        let (name, k) = (table.name.clone(), key.to_vec());
        let info = meta::call(core, stats, move |m| m.lookup_chain(&name, &k))
            .await
            .map_err(meta_error)?;
        let Some((chain_id, tail)) = info.and_then(|i| i.tail.map(|t| (i.chain_id, t))) else {
            return Ok(None);
        };
        ChainCache {
            chain: ChainRef {
                chain_id,
                root: core.links.ptr_of(tail.memnode_id, tail.va)?,
            },
            hint: None,
        }
    };
    state::shared(core).set_chain(table.id, key, cache.chain);
    state::of(core).set_hint(table.id, key, cache);
    Ok(Some(cache))
}

/// Wait up to `root_wait` for the root of chain `chain_id` to be published;
/// `None` when it was not.
async fn find_root(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    chain_id: u64,
    stats: &mut OpStats,
) -> Result<Option<ChainCache>, KvError> {
    let deadline = Instant::now() + core.client.options.clover.root_wait;
    loop {
        let name = table.name.clone();
        match meta::call(core, stats, move |m| m.tail(&name, chain_id)).await {
            Ok(t) => {
                let root = core.links.ptr_of(t.tail.memnode_id, t.tail.va)?;
                return Ok(Some(ChainCache {
                    chain: ChainRef { chain_id, root },
                    hint: None,
                }));
            }
            Err(e) if e.code() == Some("tail_not_found") => {
                if Instant::now() >= deadline {
                    return Ok(None);
                }
                core.worker.sleep(std::time::Duration::from_millis(2)).await;
            }
            Err(e) => return Err(meta_error(e)),
        }
    }
}

/// The memory node a new chain lives on: one of the table's connected memory nodes,
/// chosen by chain id.
pub(crate) fn home(
    core: &SessionCore,
    table: &TableDescription,
    chain_id: u64,
) -> Result<u64, KvError> {
    let mut candidates: Vec<u64> = table
        .memnodes
        .iter()
        .copied()
        .filter(|m| core.links.get(*m).is_some())
        .collect();
    if candidates.is_empty() {
        candidates = core.links.ids().collect();
        candidates.sort_unstable();
    }
    let n = candidates.len() as u64;
    if n == 0 {
        return Err(KvError::unavailable("no memory node is connected"));
    }
    let i = usize::try_from(chain_id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32).unwrap_or_default()
        % candidates.len();
    candidates
        .get(i)
        .copied()
        .ok_or_else(|| KvError::unavailable("no memory node is connected"))
}

/// Write a root and a first node for chain `chain_id` and publish the root unless
/// another client published one first; either way, the chain's published root.
async fn publish_root(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    chain_id: u64,
    key: &[u8],
    stats: &mut OpStats,
) -> Result<ChainCache, KvError> {
    let memnode = home(core, table, chain_id)?;
    let class = size_class_for(key.len(), 0)?;
    let node = meta::alloc(core, table.into(), memnode, class)?;
    let root = match meta::alloc(core, table.into(), memnode, ROOT_SIZE) {
        Ok(r) => r,
        Err(e) => {
            core.alloc.borrow_mut().release_unlinked(node);
            return Err(e);
        }
    };
    let release = |core: &SessionCore| {
        let mut a = core.alloc.borrow_mut();
        a.release_unlinked(node);
        a.release_unlinked(root);
    };
    let written = write_root(
        core, table, chain_id, key, memnode, node, root, class, stats,
    )
    .await;
    if let Err(e) = written {
        release(core);
        return Err(e);
    }
    let mine = TailHint {
        memnode_id: memnode,
        va: root.va,
        generation: 0,
    };
    // Retried while the service is unreachable: a retry of a call that was stored
    // finds its own hint, which is why the answer's hint is compared, not `created`.
    // On failure the root may have been stored, so nothing is released.
    let (name, hint) = (table.name.clone(), mine.clone());
    let won = meta::call(core, stats, move |m| m.publish_root(&name, chain_id, &hint))
        .await
        .map_err(meta_error)?;
    if won.tail.memnode_id == mine.memnode_id && won.tail.va == mine.va {
        return Ok(ChainCache {
            chain: ChainRef {
                chain_id,
                root: core.links.ptr_of(memnode, root.va)?,
            },
            hint: Some(Hint {
                ptr: core.links.ptr_of(memnode, node.va)?,
                generation: node.generation,
                version: 1,
                size_class: class,
            }),
        });
    }
    // Another client's root won; ours was never reachable.
    release(core);
    Ok(ChainCache {
        chain: ChainRef {
            chain_id,
            root: core.links.ptr_of(won.tail.memnode_id, won.tail.va)?,
        },
        hint: None,
    })
}

/// WRITE a chain's first node (a tombstone of version 1) and its root (shortcut to
/// that node), on every member of the home's replica set: one round trip.
#[allow(clippy::too_many_arguments)]
async fn write_root(
    core: &SessionCore,
    table: &TableDescription,
    chain_id: u64,
    key: &[u8],
    memnode: u64,
    node: Allocation,
    root: Allocation,
    class: usize,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    let node_ptr = core.links.ptr_of(memnode, node.va)?;
    let root_ptr = core.links.ptr_of(memnode, root.va)?;
    let bytes = encode(
        &NodeRepr {
            header: Header::tail(node.generation, true),
            chain_id,
            version: 1,
            key: key.to_vec(),
            value: Vec::new(),
        },
        class,
    )?;
    let shortcut = Shortcut::new(node_ptr, class, 1)?;
    let nodes = resolve_writes(&core.links, table, node_ptr, class as u64)?;
    let roots = resolve_writes(&core.links, table, root_ptr, ROOT_SIZE as u64)?;
    let root_bytes = encode_root(chain_id, shortcut);
    if crate::replication::copies::is_replicated(table) {
        let involved: Vec<u64> = nodes.iter().map(|n| n.memnode).collect();
        crate::clover::replicated::ready_and_current(core, table, &involved)?;
    }
    let batches = nodes
        .iter()
        .zip(&roots)
        .map(|(n, r)| {
            (
                n.memnode,
                vec![
                    WorkRequest::write(n.addr, bytes.clone()),
                    WorkRequest::write(r.addr, root_bytes.clone()),
                ],
            )
        })
        .collect();
    let done = core.links.round_trip(batches, stats).await?;
    for batch in &done {
        write_done(batch.first())?;
        write_done(batch.get(1))?;
    }
    Ok(())
}
