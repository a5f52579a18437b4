//! Finding a key's chain: the session's hint cache, the client's chain cache, and
//! the metadata service's slow path (open the chain; create or look up its root).
//!
//! The metadata service names each key's chain (`open_chain`: insert-or-open, the
//! caller that creates it is told so) and stores one hint per chain, which here is
//! the address of the chain's root ([`super::shortcut`]). The creator allocates the
//! root and a first node — a tombstone of version 1, so the key starts absent —
//! writes both, then publishes the root. Until it has, other clients see no root:
//! reads answer "absent" (no write of the key can have completed), writes wait for
//! the root (bounded by `ClientOptions::root_wait`).

use std::rc::Rc;
use std::time::Instant;

use metadata::api::{TableDescription, TailHint};
use verbs::wr::WorkRequest;

use super::header::Header;
use super::node::{NodeRepr, encode, size_class_for};
use super::shortcut::{ROOT_SIZE, Shortcut, encode_root};
use crate::client::meta_error;
use crate::error::KvError;
use crate::ptr::RemotePtr;
use crate::remote::write_done;
use crate::session::SessionCore;
use crate::stats::OpStats;

/// A key's chain: its id and where its root is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChainRef {
    /// The chain id (also at offset 8 of every node and of the root).
    pub chain_id: u64,
    /// The root object.
    pub root: RemotePtr,
}

/// Where this session last saw the tail of a chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hint {
    /// The node.
    pub ptr: RemotePtr,
    /// Its generation.
    pub generation: u16,
    /// Its version.
    pub version: u32,
    /// Its size class.
    pub size_class: usize,
}

/// What a session caches per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChainCache {
    /// The chain.
    pub chain: ChainRef,
    /// The last tail seen, if any.
    pub hint: Option<Hint>,
}

/// The chain of `key`, from the caches or the metadata service. `Ok(None)` when
/// the chain's root is not published yet and `wait` is false.
pub(crate) async fn open(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    wait: bool,
    stats: &mut OpStats,
) -> Result<Option<ChainCache>, KvError> {
    if let Some(c) = core.hint(table.id, key) {
        return Ok(Some(c));
    }
    if let Some(chain) = core.client.cached_chain(table.id, key) {
        let c = ChainCache { chain, hint: None };
        core.set_hint(table.id, key, c);
        return Ok(Some(c));
    }
    stats.metadata_calls += 1;
    let opened = core
        .client
        .meta
        .open_chain(&table.name, key)
        .map_err(meta_error)?;
    let cache = if opened.created {
        create_root(core, table, opened.chain_id, key, stats).await?
    } else {
        match find_root(core, table, opened.chain_id, wait, stats).await? {
            Some(c) => c,
            None => return Ok(None),
        }
    };
    core.client.cache_chain(table.id, key, cache.chain);
    core.set_hint(table.id, key, cache);
    Ok(Some(cache))
}

async fn find_root(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    chain_id: u64,
    wait: bool,
    stats: &mut OpStats,
) -> Result<Option<ChainCache>, KvError> {
    let deadline = Instant::now() + core.client.options.root_wait;
    loop {
        stats.metadata_calls += 1;
        match core.client.meta.tail(&table.name, chain_id) {
            Ok(t) => {
                let root = core.links.ptr_of(t.tail.memnode_id, t.tail.va)?;
                return Ok(Some(ChainCache {
                    chain: ChainRef { chain_id, root },
                    hint: None,
                }));
            }
            Err(e) if e.code() == Some("tail_not_found") => {
                if !wait {
                    return Ok(None);
                }
                if Instant::now() > deadline {
                    return Err(KvError::Unavailable(format!(
                        "the root of chain {chain_id} was not published by the client that \
                         created it within {:?}",
                        core.client.options.root_wait
                    )));
                }
                core.worker.sleep(std::time::Duration::from_millis(2)).await;
            }
            Err(e) => return Err(meta_error(e)),
        }
    }
}

/// The memory node a new chain lives on: one of the table's connected memory nodes,
/// chosen by chain id.
fn home(core: &SessionCore, table: &TableDescription, chain_id: u64) -> Result<u64, KvError> {
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
        return Err(KvError::Unavailable("no memory node is connected".into()));
    }
    let i = usize::try_from(chain_id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32).unwrap_or_default()
        % candidates.len();
    candidates
        .get(i)
        .copied()
        .ok_or_else(|| KvError::Unavailable("no memory node is connected".into()))
}

async fn create_root(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    chain_id: u64,
    key: &[u8],
    stats: &mut OpStats,
) -> Result<ChainCache, KvError> {
    let memnode = home(core, table, chain_id)?;
    let class = size_class_for(key.len(), 0)?;
    let (node, root) = {
        let mut a = core.alloc.borrow_mut();
        let now = Instant::now();
        let node = a.alloc(&core.client.meta, memnode, class, now)?;
        let root = a.alloc(&core.client.meta, memnode, ROOT_SIZE, now)?;
        (node, root)
    };
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
    let (Some(n), Some(r)) = (
        core.links.resolve(node_ptr, class as u64),
        core.links.resolve(root_ptr, ROOT_SIZE as u64),
    ) else {
        return Err(KvError::Corrupt(
            "allocated memory outside the region".into(),
        ));
    };
    let done = core
        .links
        .round_trip(
            vec![(
                memnode,
                vec![
                    WorkRequest::write(n.addr, bytes),
                    WorkRequest::write(r.addr, encode_root(chain_id, shortcut)),
                ],
            )],
            stats,
        )
        .await?;
    let batch = done.first();
    write_done(batch.and_then(|b| b.first()))?;
    write_done(batch.and_then(|b| b.get(1)))?;
    stats.metadata_calls += 1;
    core.client
        .meta
        .put_tail(
            &table.name,
            chain_id,
            &TailHint {
                memnode_id: memnode,
                va: root.va,
                generation: 0,
            },
        )
        .map_err(meta_error)?;
    Ok(ChainCache {
        chain: ChainRef {
            chain_id,
            root: root_ptr,
        },
        hint: Some(Hint {
            ptr: node_ptr,
            generation: node.generation,
            version: 1,
            size_class: class,
        }),
    })
}
