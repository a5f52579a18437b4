//! Finding the tail of a chain: the read path of every Clover operation.
//!
//! One round trip reads the hinted tail (when the session has a hint) together with
//! the key's root (its shortcut word and chain id). A hinted node is accepted only if
//! its chain id, key, CRC, generation and version are the ones the hint recorded; if
//! it has no successor it is the tail (a GET with a warm hint is one round trip).
//! Otherwise the walk starts from the hinted node, or from the node the shortcut
//! names when that one is newer or the hint failed validation, and follows
//! successors: each successor must carry its predecessor's chain id, key, version
//! plus one and the generation tag of the link. A node that fails validation
//! restarts the traversal (bounded).
//!
//! Why a stale pointer cannot validate: a node's memory is reclaimed only after the
//! key's shortcut has moved past it (and then a grace period), so by then the
//! chain's tail has a larger version; whatever is written into that memory later
//! carries another chain id or a version larger than any the pointer expects (a
//! writer numbers its node after a tail it has just read). Nodes that were written
//! but never linked are reachable through no pointer. The one check that is not
//! exact is the shortcut's (it keeps 21 version bits), so a traversal that read the
//! shortcut more than [`SHORTCUT_TRUST`] ago reads it again.

use std::rc::Rc;
use std::time::{Duration, Instant};

use verbs::wr::WorkRequest;

use super::header::{Header, Successor};
use super::node::{NODE_PREFIX, NodeView, VERSION_AT, read_chain_id, read_header};
use super::shortcut::{ROOT_READ, Shortcut, VERSION_MASK, decode_root, version_before};
use super::state;
use super::state::{ChainCache, Hint};
use crate::error::{KvError, LayoutError};
use crate::ptr::RemotePtr;
use crate::remote::read_bytes;
use crate::replication::copies::primary;
use crate::session::SessionCore;
use crate::size_class::{SIZE_CLASSES, class_for_len};
use crate::stats::OpStats;
use dmkv_api::metadata::TableDescription;
use dmkv_api::rpc::{Request, RpcStatus, parse_reply};
use dmkv_api::rpc_clover::{CloverWalk, WalkOutcome};

use crate::AccessMode;

/// How long a shortcut value read by a traversal may be used to find a node: far
/// shorter than the time 2^21 versions of one key take to be written.
pub(crate) const SHORTCUT_TRUST: Duration = Duration::from_secs(1);

/// A node read and validated.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub ptr: RemotePtr,
    pub header: Header,
    pub version: u32,
    pub size_class: usize,
    /// The value, when the whole node was read (a prefix-only read leaves `None`).
    pub value: Option<Vec<u8>>,
}

/// The tail of a chain as a traversal found it.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    /// The tail node (no successor when read).
    pub node: Node,
    /// The shortcut word as read (raw and decoded).
    pub shortcut: (u64, Shortcut),
}

/// What a node must match to be accepted.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Expect {
    /// A cached hint: exact generation and version.
    Hint { generation: u16, version: u32 },
    /// The node a shortcut names: the low version bits.
    Shortcut(Shortcut),
    /// A linked successor: its tag and the predecessor's version plus one.
    Successor { link: Successor, version: u32 },
}

impl Expect {
    /// Whether a node of the chain with version `version` comes after the expected one
    /// (a read the switch steered to a later tail).
    fn is_later(self, version: u32) -> bool {
        let after = |v: u32| (version.wrapping_sub(v) as i32) > 0;
        match self {
            Expect::Hint { version: v, .. } => after(v),
            Expect::Shortcut(s) => s.is_before(version),
            Expect::Successor { version: v, .. } => after(v.wrapping_sub(1)),
        }
    }

    fn accepts(self, generation: u16, version: u32) -> bool {
        match self {
            Expect::Hint {
                generation: g,
                version: v,
            } => g == generation && v == version,
            Expect::Shortcut(s) => s.names_version(version),
            Expect::Successor { link, version: v } => link.matches(generation) && v == version,
        }
    }
}

/// Parse and validate a whole node read from `ptr`.
///
/// `Ok(Err(need))` asks for a longer read; `Ok(Ok(None))` is a node that fails
/// validation.
///
/// `steered`: the switch redirected the READ to this node (its response carried the
/// marker); then a later node of the chain is accepted too, at that address. Through
/// the switch (`accelerated`), a later node of the chain that already has a successor
/// is accepted without the marker as well: only nodes that were linked get successors,
/// and the traversal goes on from its successor link, never using its own address.
fn check_node(
    buf: &[u8],
    ptr: RemotePtr,
    chain_id: u64,
    key: &[u8],
    expect: Expect,
    steered: Option<RemotePtr>,
    accelerated: bool,
) -> Result<Option<Node>, usize> {
    match NodeView::new_checked(buf) {
        Ok(v) => {
            if !v.belongs_to(chain_id, key) {
                return Ok(None);
            }
            let exact = expect.accepts(v.header().generation, v.version());
            let linked = accelerated && v.header().successor.is_some();
            let later = (steered.is_some() || linked) && expect.is_later(v.version());
            if !exact && !later {
                return Ok(None);
            }
            Ok(Some(Node {
                ptr: steered.unwrap_or(ptr),
                header: v.header(),
                version: v.version(),
                size_class: v.size_class(),
                value: Some(v.value().to_vec()),
            }))
        }
        Err(LayoutError::Truncated { need, have }) if need > have => Err(need),
        Err(_) => Ok(None),
    }
}

/// Read the node at `ptr` (guessing its class), re-reading once if it is larger.
#[allow(clippy::too_many_arguments)]
async fn read_node(
    core: &SessionCore,
    table: &TableDescription,
    ptr: RemotePtr,
    guess: usize,
    chain_id: u64,
    key: &[u8],
    expect: Expect,
    stats: &mut OpStats,
) -> Result<Option<Node>, KvError> {
    let mut len = guess.max(NODE_PREFIX + key.len());
    for _ in 0..2 {
        let Some(t) = core.links.resolve(primary(table, ptr), len as u64) else {
            return Ok(None);
        };
        let Ok(read_len) = u32::try_from(len) else {
            return Ok(None);
        };
        let done = core
            .links
            .round_trip(
                vec![(t.memnode, vec![WorkRequest::read(t.addr, read_len)])],
                stats,
            )
            .await?;
        let buf = read_bytes(done.first().and_then(|b| b.first()))?;
        let (buf, steered) = super::steer::unmark(core, ptr, buf);
        match check_node(&buf, ptr, chain_id, key, expect, steered, core.accelerated) {
            Ok(n) => return Ok(n),
            Err(need) => match class_for_len(need) {
                Some(c) if c > len => len = c,
                _ => return Ok(None),
            },
        }
    }
    Ok(None)
}

/// Find the tail of `key`'s chain, starting from `cache`, one-sided.
pub(crate) async fn locate(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    cache: ChainCache,
    stats: &mut OpStats,
) -> Result<Found, KvError> {
    locate_with(core, table, key, cache, AccessMode::OneSided, stats).await
}

/// Find the tail of `key`'s chain, starting from `cache`; past the first node, the
/// walk along successors goes to the memory node as an RPC when `mode` says so
/// (`rpc`: always; `hybrid`: when one more one-sided round trip would exceed k).
pub(crate) async fn locate_with(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    cache: ChainCache,
    mode: AccessMode,
    stats: &mut OpStats,
) -> Result<Found, KvError> {
    let k = u64::from(core.client.options.access.hybrid_k);
    let first = stats.round_trips;
    let mut rpc_open = mode != AccessMode::OneSided;
    let chain = cache.chain;
    let max = core.client.options.retry.max_restarts;
    let mut hint = cache.hint;
    let root = core
        .links
        .resolve(primary(table, chain.root), ROOT_READ as u64)
        .ok_or_else(|| KvError::corrupt(format!("root {:?} is outside its region", chain.root)))?;
    'restart: for attempt in 0..=max {
        if attempt > 0 {
            stats.restarts += 1;
            hint = None;
        }
        let started = Instant::now();
        let hinted = hint.and_then(|h| {
            core.links
                .resolve(primary(table, h.ptr), h.size_class as u64)
                .zip(u32::try_from(h.size_class).ok())
                .map(|(t, len)| (h, t, len))
        });
        let root_read = WorkRequest::read(root.addr, ROOT_READ as u32);
        let (batches, hint_at, root_at) = match &hinted {
            Some((_, t, len)) if t.memnode == root.memnode => (
                vec![(t.memnode, vec![WorkRequest::read(t.addr, *len), root_read])],
                Some((0, 0)),
                (0, 1),
            ),
            Some((_, t, len)) => (
                vec![
                    (t.memnode, vec![WorkRequest::read(t.addr, *len)]),
                    (root.memnode, vec![root_read]),
                ],
                Some((0, 0)),
                (1, 0),
            ),
            None => (vec![(root.memnode, vec![root_read])], None, (0, 0)),
        };
        let done = core.links.round_trip(batches, stats).await?;
        let root_buf = read_bytes(done.get(root_at.0).and_then(|b| b.get(root_at.1)))?;
        let (raw, shortcut, root_chain) = decode_root(root_buf)?;
        if root_chain != chain.chain_id {
            return Err(KvError::corrupt(format!(
                "the root at {:?} belongs to chain {root_chain}, not {}",
                chain.root, chain.chain_id
            )));
        }
        state::of(core).shortcut_seen(core, chain.root, shortcut);
        let mut cur: Option<Node> = None;
        if let (Some((h, _, _)), Some((b, i))) = (hinted, hint_at) {
            let buf = read_bytes(done.get(b).and_then(|x| x.get(i)))?;
            let (buf, steered) = super::steer::unmark(core, h.ptr, buf);
            cur = check_node(
                &buf,
                h.ptr,
                chain.chain_id,
                key,
                Expect::Hint {
                    generation: h.generation,
                    version: h.version,
                },
                steered,
                core.accelerated,
            )
            .ok()
            .flatten();
            if cur.is_none() {
                stats.stale_hints += 1;
            }
        }
        let jump = match &cur {
            None => true,
            Some(n) => {
                n.header.successor.is_some()
                    && version_before(n.version & VERSION_MASK, shortcut.version)
            }
        };
        if jump && started.elapsed() < SHORTCUT_TRUST {
            match read_node(
                core,
                table,
                shortcut.ptr,
                shortcut.size_class,
                chain.chain_id,
                key,
                Expect::Shortcut(shortcut),
                stats,
            )
            .await?
            {
                Some(n) => cur = Some(n),
                None => continue 'restart,
            }
        }
        let Some(mut cur) = cur else {
            continue 'restart;
        };
        while let Some(link) = cur.header.successor {
            if rpc_open && (mode == AccessMode::Rpc || stats.round_trips - first + 1 > k) {
                rpc_open = false;
                match walk_rpc(core, table, key, chain.chain_id, &cur, stats).await? {
                    Walked::Tail(n) => {
                        cur = n;
                        continue;
                    }
                    Walked::OneSided => {}
                    Walked::NoWorkers if mode == AccessMode::Rpc => {
                        return Err(crate::rpc_port::no_workers(&table.name));
                    }
                    Walked::NoWorkers => {}
                }
            }
            let expect = Expect::Successor {
                link,
                version: cur.version.wrapping_add(1),
            };
            match read_node(
                core,
                table,
                link.ptr(),
                cur.size_class,
                chain.chain_id,
                key,
                expect,
                stats,
            )
            .await?
            {
                Some(n) => cur = n,
                None => continue 'restart,
            }
        }
        return Ok(Found {
            node: cur,
            shortcut: (raw, shortcut),
        });
    }
    Err(KvError::unavailable(format!(
        "gave up finding the tail after {max} restarts"
    )))
}

/// What an RPC walk gave.
enum Walked {
    /// The tail.
    Tail(Node),
    /// The node handed the walk back: go on one-sided.
    OneSided,
    /// The node cannot be called.
    NoWorkers,
}

/// Ask the memory node holding `from` to follow its successors to the tail
/// ([`dmkv_api::rpc_clover`]).
async fn walk_rpc(
    core: &SessionCore,
    table: &TableDescription,
    key: &[u8],
    chain_id: u64,
    from: &Node,
    stats: &mut OpStats,
) -> Result<Walked, KvError> {
    let Some(t) = core
        .links
        .resolve(primary(table, from.ptr), NODE_PREFIX as u64)
    else {
        return Ok(Walked::OneSided);
    };
    let Some((port, link, rkey)) = crate::rpc_port::endpoint(core, t.memnode, t.addr.rkey)? else {
        return Ok(Walked::NoWorkers);
    };
    let request = CloverWalk {
        rkey,
        base_va: link.base_va,
        pointer_memnode: from.ptr.memnode(),
        chain_id,
        start: from.ptr.offset(),
        version: from.version,
        generation: from.header.generation,
        key,
    };
    let timeout = core.client.options.access.rpc_timeout;
    let reply = port
        .call(
            &core.worker,
            &link.qp,
            Vec::new(),
            Request::CloverWalk(request),
            timeout,
            stats,
        )
        .await?;
    let reply = parse_reply(&reply)
        .map_err(|e| KvError::corrupt(format!("the memory node's RPC reply: {e}")))?;
    if reply.status != RpcStatus::Ok {
        return Err(KvError::unavailable(format!(
            "the memory node refused the Clover walk: {:?}",
            reply.status
        )));
    }
    match WalkOutcome::parse(reply.body) {
        Some(WalkOutcome::Tail(tail)) => {
            let header = Header::unpack(tail.header)?;
            let size_class = SIZE_CLASSES
                .get(usize::from(tail.class_index))
                .copied()
                .ok_or_else(|| KvError::corrupt("a Clover walk named no size class"))?;
            let ptr = RemotePtr::new(from.ptr.memnode(), tail.offset)?;
            if header.successor.is_some() {
                return Ok(Walked::OneSided);
            }
            Ok(Walked::Tail(Node {
                ptr,
                header,
                version: tail.version,
                size_class,
                value: Some(tail.value),
            }))
        }
        Some(WalkOutcome::Deferred(_)) => Ok(Walked::OneSided),
        None => Err(KvError::corrupt(
            "the memory node's Clover walk reply does not parse",
        )),
    }
}

/// Follow successors from a tail that gained one, reading only each node's fixed
/// prefix (header, chain id, lengths, version): the chase of a writer whose link CAS
/// failed. `first` is the successor the failed CAS returned. Each prefix must carry
/// the chain id, the expected version and the link's generation tag (the prefix
/// lies in one 64-byte line, read atomically). `Ok(None)` means a node failed
/// validation: locate from the root again.
pub(crate) async fn chase(
    core: &SessionCore,
    table: &TableDescription,
    chain_id: u64,
    from: &Found,
    first: Successor,
    stats: &mut OpStats,
) -> Result<Option<Found>, KvError> {
    let mut link = first;
    let mut version = from.node.version.wrapping_add(1);
    loop {
        let ptr = link.ptr();
        let Some(t) = core.links.resolve(primary(table, ptr), NODE_PREFIX as u64) else {
            return Ok(None);
        };
        let done = core
            .links
            .round_trip(
                vec![(
                    t.memnode,
                    vec![WorkRequest::read(t.addr, NODE_PREFIX as u32)],
                )],
                stats,
            )
            .await?;
        let buf = read_bytes(done.first().and_then(|b| b.first()))?;
        let (Ok(header), Ok(cid)) = (read_header(buf), read_chain_id(buf)) else {
            return Ok(None);
        };
        let node_version = buf
            .get(VERSION_AT..VERSION_AT + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_le_bytes);
        let class = buf
            .get(super::node::CLASS_AT)
            .and_then(|c| SIZE_CLASSES.get(usize::from(*c)))
            .copied();
        let (Some(node_version), Some(size_class)) = (node_version, class) else {
            return Ok(None);
        };
        if cid != chain_id || node_version != version || !link.matches(header.generation) {
            return Ok(None);
        }
        match header.successor {
            Some(next) => {
                link = next;
                version = version.wrapping_add(1);
            }
            None => {
                return Ok(Some(Found {
                    node: Node {
                        ptr,
                        header,
                        version,
                        size_class,
                        value: None,
                    },
                    shortcut: from.shortcut,
                }));
            }
        }
    }
}

/// The hint a found tail leaves in the cache.
pub(crate) fn hint_of(n: &Node) -> Hint {
    Hint {
        ptr: n.ptr,
        generation: n.header.generation,
        version: n.version,
        size_class: n.size_class,
    }
}
