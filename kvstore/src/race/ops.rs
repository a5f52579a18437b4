//! RACE table operations over verbs: search, insert, put, update and delete.
//!
//! **Search** (2 round trips with a warm directory cache): READ the key's two
//! combined buckets in the subtable the cached entry names; if every bucket header
//! covers the key (local depth and suffix) and none is being filled by a split,
//! READ the KV blocks of the slots whose fingerprint matches, check CRC and key,
//! and return the value of the first match by address (1 round trip when no
//! fingerprint matches). A header that does not cover the key means the cache is
//! stale or the subtable is being split: re-read the entry. A split in progress is
//! searched parent first, then child, in two sequential round trips: a moved slot
//! is copied to the child before it is cleared in the parent, so a key present
//! throughout is seen in one of them. A search of a key this client found or wrote
//! before, whose slot is still one of the key's slots in the cached subtable, first
//! READs only that slot's bucket and the block it named, in one round trip
//! ([`super::hinted_read`]); whatever that does not prove falls back to the above.
//!
//! **Writes** READ the buckets and WRITE the new KV block (out of place, allocated
//! from the session's size classes) in the same round trip, READ the matching KV
//! blocks (skipped when no fingerprint matches), then CAS the slot:
//! - update / delete / put of a present key: CAS the key's slot from its word to
//!   the new block's slot word (or to empty): 3 round trips (2 when the client's
//!   hint already names the block); the replaced block is reclaimed after the grace
//!   period. An update or put of a key whose slot the client saw less than half a
//!   grace period ago WRITEs the block and CASes that slot in one doorbell: 1 round
//!   trip ([`super::known_slot`]);
//! - insert / put of an absent key: CAS an empty slot (the same one every client
//!   would pick from the same contents) to the block's word marked *tentative*
//!   ([`super::slot::TENTATIVE`]) and, in the same round trip on the same queue
//!   pair (executed after the CAS), READ the buckets again; if no other slot holds
//!   the key, CAS the slot to the unmarked word, which is the insert's
//!   linearization point: 3 round trips without fingerprint matches, as before
//!   (READ+WRITE, CAS+READ, CAS), and one more whenever a slot with the key's
//!   fingerprint appeared between the two READs (its block is read). If another
//!   slot holds the key, ours is taken back (a 4th round trip on that path): a
//!   confirmed slot means the key exists (`AlreadyExists`, or a put updates it);
//!   another client's tentative slot means two inserts race, and both start over
//!   after a backoff. Readers ignore tentative slots, so no read returns the value
//!   of an insert that then reports `AlreadyExists`; a writer that finds another
//!   client's tentative slot for its key waits for it, and clears a tentative slot
//!   it has seen unchanged for `race_split_timeout` (its inserter died), so a
//!   crashed inserter blocks nobody for longer than a split lock would. See
//!   `claim` for why at most one slot per key is ever confirmed. When the client's
//!   writes read both of the key's combined buckets before and they show no slot
//!   of its fingerprint, the first round trip already claims the slot they predict
//!   (block WRITE, CAS, READs: [`super::predicted_claim`]): 2 round trips when the
//!   slot is still empty, and a lost CAS otherwise;
//!
//! Every KV block read is discarded when it completes a grace period or more after
//! the READ of the buckets that named it was posted (the block may have been
//! reclaimed and reused since): the search starts over.
//!
//! A failed CAS is retried after SMART's truncated exponential backoff, bounded by
//! `max_link_attempts`. An insert that finds both combined buckets full splits the
//! subtable ([`super::split`]) and retries. Writers never write into a subtable a
//! split is working on (its buckets are frozen or being filled): they back off,
//! and help finish a split whose lock has not changed for `race_split_timeout`.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use verbs::transport::TransportKind;

use dmkv_api::metadata::TableDescription;
use dmkv_api::rpc_race::{RaceKind, RaceOutcome};

use super::block_hints::{BlockHints, Hint};
use super::bucket::BucketHeader;
use super::bucket_cache::BucketCache;
use super::hash::KeyHash;
use super::hinted_read::{self, HintedOutcome};
use super::known_slot::{self, KnownSlot};
use super::kv_block::{encode, value_for};
use super::net::{
    Candidate, Lookup, Status, View, cas_bulk, cas_primary_bulk, cas_words_bulk, cas_wr, exchange,
    hinted_block_wr, lookup_all, parse_view, read_view, read_view_and_block, view_wrs, write_wr,
};
use super::predicted_claim::{self, Predicted};
use super::rpc;
use super::slot::{EMPTY, Slot, TAG_PERIOD, TENTATIVE};
use super::split;
use super::state::{self, TableState, parent_primary};
use crate::AccessMode;
use crate::alloc::Allocation;
use crate::error::KvError;
use crate::index::WriteKind;
use crate::ptr::RemotePtr;
use crate::remote::read_bytes;
use crate::remote::{atomic_value, write_done};
use crate::replication::fanout::WordCas;
use crate::session::SessionCore;
use crate::size_class::class_for_len;
use crate::stats::OpStats;

/// Read `key`, reaching the index as `mode` says.
pub(crate) async fn get(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    mode: AccessMode,
) -> Result<Vec<u8>, KvError> {
    let mut stats = OpStats::default();
    core.renew_if_due();
    let r = get_inner(core, table, key, mode, &mut stats).await;
    core.finish_op(stats);
    r
}

/// Where a key is to be searched.
enum Route {
    /// One subtable, authoritative for the key.
    One(View),
    /// A split in progress: the parent (searched first) and the child.
    Pair(View, View),
    /// Read again (the cached entry was refreshed).
    Again,
    /// A split is in a state that must end first; wait on its primary entry.
    Wait(BucketHeader),
}

/// The outcome of a search RPC as the search's result; `None`: go on one-sided.
fn searched(
    table: &str,
    mode: AccessMode,
    outcome: Option<RaceOutcome>,
) -> Option<Result<Vec<u8>, KvError>> {
    match outcome {
        Some(RaceOutcome::Found(v)) => Some(Ok(v)),
        Some(RaceOutcome::Absent) => Some(Err(KvError::NotFound)),
        Some(RaceOutcome::Deferred(_)) => None,
        Some(other) => Some(Err(KvError::corrupt(format!(
            "a search RPC answered {other:?}"
        )))),
        None if mode == AccessMode::Rpc => Some(Err(rpc::no_workers(table))),
        None => None,
    }
}

/// A search of `key` as one RPC to the node's workers (`None`: the node has none).
async fn search_rpc(
    core: &Rc<SessionCore>,
    st: &TableState,
    hash: &KeyHash,
    key: &[u8],
    stats: &mut OpStats,
) -> Result<Option<RaceOutcome>, KvError> {
    rpc::call(
        core,
        st,
        &st.table(),
        hash,
        key,
        RaceKind::Search,
        EMPTY,
        Vec::new(),
        stats,
    )
    .await
}

async fn get_inner(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    mode: AccessMode,
    stats: &mut OpStats,
) -> Result<Vec<u8>, KvError> {
    let st = state::open(core, table, stats).await?;
    let hash = KeyHash::of(key);
    let fp = hash.fingerprint();
    let max = core.client.options.retry.max_restarts.max(1);
    let mut rpc_open = mode != AccessMode::OneSided;
    if mode == AccessMode::Rpc {
        rpc_open = false;
        let outcome = search_rpc(core, &st, &hash, key, stats).await?;
        if let Some(r) = searched(&table.name, mode, outcome) {
            return r;
        }
    }
    let k = u64::from(core.client.options.access.hybrid_k);
    let started = stats.round_trips;
    let hints = core.client.shared_state::<BlockHints>();
    let mut hint = (!core.accelerated)
        .then(|| hints.get(table.id, key))
        .flatten();
    for attempt in 0..max {
        let idx = st.index_of(&hash);
        let e = st.entry(idx)?;
        if let Some(h) = hint {
            let outcome = hinted_read::search_hinted(
                core,
                &st.table(),
                e.subtable,
                st.geometry,
                &hash,
                key,
                h,
                stats,
            )
            .await?;
            match outcome {
                Some(HintedOutcome::Found(value, seen)) => {
                    // Kept even when unchanged: when it was seen is new.
                    hints.set(table.id, key, seen);
                    return Ok(value);
                }
                // Tried and unproven: search without it.
                Some(HintedOutcome::Unproven) => hint = None,
                // Not usable on one line (nothing was read): the hinted block joins
                // the combined buckets' READs instead.
                None => {}
            }
        }
        let viewed_at = Instant::now();
        let (view, block) = match hint.take().map(|h| h.word) {
            Some(word) => {
                let (view, block) = read_view_and_block(
                    core,
                    &st.table(),
                    e.subtable,
                    st.geometry,
                    &hash,
                    word,
                    stats,
                )
                .await?;
                (view, block.map(|b| (word, b)))
            }
            None => (
                read_view(core, &st.table(), e.subtable, st.geometry, &hash, stats).await?,
                None,
            ),
        };
        let route = route_read(core, &st, &hash, idx, view, stats).await?;
        let found = match route {
            Route::One(v) => {
                let candidates = v.matching(fp);
                // The hinted block, read after the buckets in the same doorbell, is the
                // record a slot of the key names: one round trip.
                if let Some((word, bytes)) = &block
                    && let Some(c) = candidates.iter().find(|c| c.word == *word)
                    && viewed_at.elapsed() < core.client.options.memory.grace
                    && let Ok(Some(value)) = value_for(bytes, key)
                {
                    found_at(&hints, table.id, key, c, viewed_at);
                    return Ok(value.to_vec());
                }
                // Hybrid: one more round trip for the blocks, if any; past k, ask
                // the node instead.
                let more = u64::from(!candidates.is_empty());
                if rpc_open && stats.round_trips - started + more > k {
                    rpc_open = false;
                    let outcome = search_rpc(core, &st, &hash, key, stats).await?;
                    if let Some(r) = searched(&table.name, mode, outcome) {
                        return r;
                    }
                }
                match lookup_all(core, &st.table(), &candidates, key, viewed_at, stats).await? {
                    None => Lookup::Torn,
                    Some(found) => match found.into_iter().next() {
                        Some((c, v)) => {
                            found_at(&hints, table.id, key, &c, viewed_at);
                            Lookup::Found(v)
                        }
                        None => {
                            hints.forget(table.id, key);
                            Lookup::Absent
                        }
                    },
                }
            }
            Route::Pair(parent, child) => {
                let p = parent.matching(fp);
                let mut all = p.clone();
                all.extend(child.matching(fp));
                match lookup_all(core, &st.table(), &all, key, viewed_at, stats).await? {
                    None => Lookup::Torn,
                    Some(found) => {
                        // The parent's copy wins: a slot is cleared there only
                        // after it has been copied to the child.
                        let pick = found
                            .iter()
                            .find(|(c, _)| p.contains(c))
                            .or(found.first())
                            .cloned();
                        pick.map_or(Lookup::Absent, |(_, v)| Lookup::Found(v))
                    }
                }
            }
            Route::Again => {
                stats.restarts += 1;
                continue;
            }
            Route::Wait(h) => {
                stats.restarts += 1;
                wait_split(core, &st, h, attempt, stats).await?;
                continue;
            }
        };
        match found {
            Lookup::Found(v) => return Ok(v),
            Lookup::Absent => return Err(KvError::NotFound),
            Lookup::Torn => {
                core.backoff(attempt).await;
                continue;
            }
        }
    }
    Err(KvError::unavailable(format!(
        "search gave up after {max} restarts"
    )))
}

/// Decide how a reader searches, given the view of the cached subtable.
async fn route_read(
    core: &Rc<SessionCore>,
    st: &TableState,
    hash: &KeyHash,
    idx: usize,
    view: View,
    stats: &mut OpStats,
) -> Result<Route, KvError> {
    match view.status(hash) {
        Status::Good | Status::Frozen(_) => Ok(Route::One(view)),
        Status::Moving(h) => {
            // The child of a split in progress: the key may still be in the parent.
            let Some((p0, _)) = parent_primary(h) else {
                return Ok(Route::Wait(h));
            };
            let (_, parent) = st.refresh_entry(core, p0, stats).await?;
            if parent.subtable == view.subtable {
                return Ok(Route::Wait(h));
            }
            pair(core, st, hash, parent.subtable, view.subtable, stats).await
        }
        Status::Stale(h) => {
            let (_, e) = st.refresh_entry(core, idx, stats).await?;
            if e.subtable != view.subtable {
                return Ok(Route::Again);
            }
            // The entry still names a subtable whose header no longer covers the
            // key: it is being split and the key moves to the child, which is
            // decided (at the primary entry) before any header changes.
            let child_at = hash.subtable_index(h.local_depth());
            let (_, child) = st.refresh_entry(core, child_at, stats).await?;
            if child.subtable == view.subtable {
                return Ok(Route::Wait(h));
            }
            pair(core, st, hash, view.subtable, child.subtable, stats).await
        }
    }
}

/// Read the parent, then the child (two round trips, in this order).
async fn pair(
    core: &Rc<SessionCore>,
    st: &TableState,
    hash: &KeyHash,
    parent: RemotePtr,
    child: RemotePtr,
    stats: &mut OpStats,
) -> Result<Route, KvError> {
    let p = read_view(core, &st.table(), parent, st.geometry, hash, stats).await?;
    let c = read_view(core, &st.table(), child, st.geometry, hash, stats).await?;
    Ok(Route::Pair(p, c))
}

/// Back off while a split holds the subtable a key needs; help finish it when its
/// lock has not changed for the split timeout.
pub(crate) async fn wait_split(
    core: &Rc<SessionCore>,
    st: &TableState,
    h: BucketHeader,
    attempt: u32,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    if let Some((p0, l)) = parent_primary(h) {
        let (w, e) = st.refresh_entry(core, p0, stats).await?;
        if e.locked
            && e.depth == l
            && st.lock_expired(p0, w, core.client.options.retry.lock_timeout)
        {
            return split::finish(core, st, p0, e.subtable, l, w, stats).await;
        }
    }
    core.backoff(attempt.min(16)).await;
    Ok(())
}

/// How many split timeouts a write waits for the splits of its key's subtable
/// before failing with `Contended`.
const SPLIT_WAIT_TIMEOUTS: u32 = 5;

/// A write's waits for splits of its key's subtable: how many so far, and whether
/// they still fit in their time budget (counted from the first).
struct SplitWaits {
    since: Option<Instant>,
    count: u32,
    budget: std::time::Duration,
}

impl SplitWaits {
    fn new(split_timeout: std::time::Duration) -> SplitWaits {
        SplitWaits {
            since: None,
            count: 0,
            budget: split_timeout.saturating_mul(SPLIT_WAIT_TIMEOUTS),
        }
    }

    /// Start one more wait: its index (for the backoff), or `None` when the budget
    /// is spent.
    fn next(&mut self) -> Option<u32> {
        if self.since.get_or_insert_with(Instant::now).elapsed() >= self.budget {
            return None;
        }
        self.count += 1;
        Some(self.count - 1)
    }
}

/// A KV block written for a write.
struct Block {
    alloc: Allocation,
    ptr: RemotePtr,
    bytes: Vec<u8>,
    word: u64,
}

/// Run one write of `value` (empty for a delete) to `key`, reaching the index as
/// `mode` says.
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
    core.finish_op(stats);
    r
}

fn block_for(
    core: &SessionCore,
    table: &TableDescription,
    st: &TableState,
    hash: &KeyHash,
    key: &[u8],
    value: &[u8],
) -> Result<Block, KvError> {
    let bytes = encode(key, value)?;
    let class = class_for_len(bytes.len()).ok_or(KvError::ValueTooLarge {
        len: value.len(),
        limit: super::kv_block::max_value_len(key.len()),
    })?;
    let memnode = st.memnodes[(hash.h2 >> 8) as usize % st.memnodes.len()];
    let alloc = crate::meta::alloc(core, table.into(), memnode, class)?;
    let ptr = core.links.ptr_of(alloc.memnode, alloc.va)?;
    let word = Slot::new(
        hash.fingerprint(),
        bytes.len(),
        ptr,
        u64::from(alloc.generation),
    )?
    .pack();
    Ok(Block {
        alloc,
        ptr,
        bytes,
        word,
    })
}

/// Remember where a search found `key`: the candidate's slot and word, seen when the
/// READ that showed them was posted. A word a split has marked is not kept (the slot
/// holds the plain word again once the split is over, and only a plain word may be
/// CASed after a known slot): the hint the client had stays.
fn found_at(hints: &BlockHints, table: u64, key: &[u8], c: &Candidate, seen: Instant) {
    if c.word == c.slot.pack() {
        let hint = Hint {
            word: c.word,
            slot: c.addr,
            seen,
        };
        hints.set(table, key, hint);
    }
}

/// Keep the buckets a write just read, for the client's next inserts into them.
fn remember_buckets(core: &SessionCore, table: u64, view: &View) {
    core.client
        .shared_state::<BucketCache>()
        .remember(table, view);
}

/// After a write of `key` linearized: where its block is named now (`None`:
/// deleted), so the client's next search of the key reads the block with the
/// buckets, and an update soon after CASes the slot directly ([`BlockHints`]).
fn remember_block(core: &SessionCore, table: u64, key: &[u8], at: Option<Hint>) {
    let hints = core.client.shared_state::<BlockHints>();
    match at {
        Some(hint) => hints.set(table, key, hint),
        None => hints.forget(table, key),
    }
}

/// The allocation of the KV block a slot names.
fn allocation_of(core: &SessionCore, table: u64, slot: Slot) -> Option<Allocation> {
    let ptr = slot.ptr();
    let memnode = u64::from(ptr.memnode());
    let link = core.links.get(memnode)?;
    Some(Allocation {
        table,
        memnode,
        va: link.base_va + ptr.offset(),
        size: class_for_len(slot.read_len())?,
        // The tag is the generation modulo the tag period: the block's next use gets
        // the next tag.
        generation: u16::from(slot.tag()),
    })
}

/// Hand the block of a replaced or deleted slot to the allocator (reused after the
/// grace period, so readers that fetched the slot before finish reading it).
fn retire(core: &SessionCore, table: u64, slot: Slot) {
    if let Some(a) = allocation_of(core, table, slot) {
        let grace = block_grace(&core.client.options);
        core.alloc
            .borrow_mut()
            .reclaim_after(a, Instant::now(), grace);
    }
}

/// How long a copy of a packet may still arrive after its requester stopped sending
/// it (a datagram queued in a socket buffer or a switch): an assumption about the
/// fabric, far above what loopback and a LAN take.
pub(crate) const PACKET_LIFETIME: Duration = Duration::from_millis(500);

/// How long a replaced or deleted KV block waits before reuse: the configured grace,
/// and over a network at least a [`TAG_PERIOD`]th of the longest a CAS comparing
/// against a slot can stay in flight (the retransmission window plus the packet
/// lifetime) after the slot was seen holding its compare value (up to the
/// [`known_slot::window`] before the CAS is posted), so that its reuse tag cannot
/// come round in between (see `race/slot.rs`). The `local` and `shm` transports
/// apply a verb when it is posted: nothing of theirs is ever in flight, and a block
/// is reused only a grace period, twice that window, after its slot changed.
pub(crate) fn block_grace(options: &crate::ClientOptions) -> Duration {
    match options.connection.transport {
        TransportKind::Local | TransportKind::Shm => options.memory.grace,
        TransportKind::Udp | TransportKind::Rdma => {
            let flight = options
                .connection
                .rc
                .retransmission_window()
                .saturating_add(PACKET_LIFETIME)
                .saturating_add(known_slot::window(options.memory.grace));
            options.memory.grace.max(flight / TAG_PERIOD)
        }
    }
}

/// What became of the KV block a write posted in a CAS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// No CAS carried it: nobody has seen it; reusable at once.
    Unseen,
    /// A CAS carried it, but it is in no slot now (taken back, cleared, or the CAS
    /// failed): others may have read it, so it is reused after the grace period.
    Seen,
    /// It may be in a slot (a CAS's outcome is unknown): never reuse it.
    Unknown,
}

/// How an insert of our tentative slot ended.
#[derive(Debug)]
pub(super) enum Claim {
    /// Finalised: the insert happened.
    Done,
    /// Another slot holds the key as a value: the key exists.
    Exists,
    /// Start over (a concurrent insert of the key, a split, our slot cleared).
    Retry,
}

/// Whether a slot's KV block holds `key`, remembered within one write: a slot
/// word read twice at one address names the same immutable block (a block is
/// reused only a grace period after its slot changed, far longer than the view
/// age an insert accepts).
pub(super) type Known = HashMap<(RemotePtr, u64), bool>;

/// Which of `candidates` hold `key`, reading the blocks of those not in `known`
/// (one round trip, none when all are known); `None` when a block failed its
/// checks.
async fn holding_key(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    candidates: &[Candidate],
    key: &[u8],
    viewed_at: Instant,
    known: &mut Known,
    stats: &mut OpStats,
) -> Result<Option<Vec<Candidate>>, KvError> {
    let unknown: Vec<Candidate> = candidates
        .iter()
        .filter(|c| !known.contains_key(&(c.addr, c.word)))
        .copied()
        .collect();
    if !unknown.is_empty() {
        let Some(found) = lookup_all(core, table, &unknown, key, viewed_at, stats).await? else {
            return Ok(None);
        };
        for c in &unknown {
            let holds = found.iter().any(|(f, _)| f.addr == c.addr);
            known.insert((c.addr, c.word), holds);
        }
    }
    Ok(Some(
        candidates
            .iter()
            .filter(|c| known.get(&(c.addr, c.word)) == Some(&true))
            .copied()
            .collect(),
    ))
}

/// What a write does after an RPC.
enum AfterRpc {
    /// The write ended with this result.
    Finish(Result<(), KvError>),
    /// The node handed it back (or cannot be called): go on one-sided.
    OneSided,
}

/// Take the outcome of a write RPC: retire what it replaced, note what became of
/// our block.
fn settle(
    core: &SessionCore,
    table: &TableDescription,
    mode: AccessMode,
    outcome: Result<Option<RaceOutcome>, KvError>,
    block: &mut Option<Block>,
    fate: &mut Fate,
) -> AfterRpc {
    let seen = |fate: &mut Fate| {
        if *fate != Fate::Unknown {
            *fate = Fate::Seen;
        }
    };
    match outcome {
        Err(e) => {
            // The request may have been executed: our block may be linked.
            *fate = Fate::Unknown;
            AfterRpc::Finish(Err(e))
        }
        Ok(None) if mode == AccessMode::Rpc => AfterRpc::Finish(Err(rpc::no_workers(&table.name))),
        Ok(None) => AfterRpc::OneSided,
        Ok(Some(RaceOutcome::Done(replaced))) => {
            if let Ok(Some(old)) = Slot::unpack(replaced) {
                retire(core, table.id, old);
            }
            // Our block is linked: it is not ours to free any more.
            *block = None;
            AfterRpc::Finish(Ok(()))
        }
        Ok(Some(RaceOutcome::Exists)) => {
            seen(fate);
            AfterRpc::Finish(Err(KvError::AlreadyExists))
        }
        Ok(Some(RaceOutcome::NotFound)) => {
            seen(fate);
            AfterRpc::Finish(Err(KvError::NotFound))
        }
        Ok(Some(RaceOutcome::Deferred(_))) => {
            // The node may have held our word tentatively and taken it back.
            seen(fate);
            AfterRpc::OneSided
        }
        Ok(Some(other)) => AfterRpc::Finish(Err(KvError::corrupt(format!(
            "a write RPC answered {other:?}"
        )))),
    }
}

/// The RPC kind of a write.
fn race_kind(kind: WriteKind) -> RaceKind {
    match kind {
        WriteKind::Put => RaceKind::Put,
        WriteKind::Insert => RaceKind::Insert,
        WriteKind::Update => RaceKind::Update,
        WriteKind::Delete => RaceKind::Delete,
    }
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
    let st = state::open(core, table, stats).await?;
    let hash = KeyHash::of(key);
    let fp = hash.fingerprint();
    let mut block = match kind {
        WriteKind::Delete => None,
        _ => Some(block_for(core, table, &st, &hash, key, value)?),
    };
    let mut written = false;
    let mut fate = Fate::Unseen;
    let timeout = core.client.options.retry.lock_timeout;
    let max = core.client.options.retry.max_link_attempts.max(1);
    let mut attempt = 0u32;
    // Waits for another client's unconfirmed insert of the key (bounded by the
    // tentative timeout, not by `max`).
    let mut waits = 0u32;
    // Waits for splits of the key's subtable (ours, another task's or another
    // client's) are bounded by time, not by `max`: a split whose holder died is
    // finished by its waiters once its lock is `race_split_timeout` old, so a
    // split that still blocks the key after several timeouts means trouble.
    let mut split_waits = SplitWaits::new(timeout);
    let k = u64::from(core.client.options.access.hybrid_k);
    let started = stats.round_trips;
    let mut rpc_open = mode == AccessMode::Hybrid;
    let rpc_first = mode == AccessMode::Rpc;
    // Where this client last found the key's block: the first look at the buckets
    // READs it too, so a present key's block is known without a round trip of its own.
    let known = (!core.accelerated && kind != WriteKind::Insert)
        .then(|| core.client.shared_state::<BlockHints>().get(table.id, key))
        .flatten();
    let mut hint = known.map(|h| h.word);
    // Seen moments ago: the new block's WRITE and the slot's CAS in one round trip.
    if !rpc_first
        && known_slot::applies(core, table, kind)
        && let (Some(h), Some(b)) = (known, block.as_mut())
    {
        match known_slot::try_write(core, &st, &hash, h, b.ptr, &mut b.bytes, b.word, stats).await?
        {
            KnownSlot::Written { replaced, seen } => {
                retire(core, table.id, replaced);
                let now_at = Hint {
                    word: b.word,
                    slot: h.slot,
                    seen,
                };
                remember_block(core, table.id, key, Some(now_at));
                // Our block is linked: it is not ours to free any more.
                return Ok(());
            }
            KnownSlot::Lost => {
                // The slot moved on: its word is no hint any more.
                written = true;
                hint = None;
            }
            KnownSlot::NotTaken => {}
        }
    }
    // A first look that found the predicted slot taken: its buckets, read after
    // that CAS, for the ordinary path.
    let mut preread: Option<(View, Instant)> = None;
    // Two round trips one-sided: within a hybrid threshold of at least 2.
    let predicts = !rpc_first
        && !core.accelerated
        && hint.is_none()
        && matches!(kind, WriteKind::Insert | WriteKind::Put)
        && (mode != AccessMode::Hybrid || k >= 2);
    let result = loop {
        if rpc_first && attempt == 0 && !written {
            // One RPC carrying the whole write; the block's WRITE goes first.
            let mut before = Vec::new();
            if let Some(b) = block.as_mut() {
                before = write_wr(core, &st.table(), b.ptr, std::mem::take(&mut b.bytes))?;
            }
            written = true;
            let word = block.as_ref().map_or(EMPTY, |b| b.word);
            let outcome = rpc::call(
                core,
                &st,
                &st.table(),
                &hash,
                key,
                race_kind(kind),
                word,
                before,
                stats,
            )
            .await;
            match settle(core, table, mode, outcome, &mut block, &mut fate) {
                AfterRpc::Finish(r) => break r,
                AfterRpc::OneSided => {}
            }
        }
        if attempt >= max {
            break Err(KvError::Contended { attempts: attempt });
        }
        attempt += 1;
        let idx = st.index_of(&hash);
        let e = st.entry(idx)?;
        // An insert's first look may claim the slot the client's last reads of the
        // key's buckets predict, in the same round trip.
        if attempt == 1
            && predicts
            && let Some(b) = block.as_mut().filter(|_| !written)
        {
            // From here our word may be in a slot.
            fate = Fate::Unknown;
            match predicted_claim::try_claim(
                core,
                &st,
                e.subtable,
                &hash,
                key,
                b.ptr,
                &mut b.bytes,
                b.word,
                stats,
            )
            .await?
            {
                Predicted::NotTaken => fate = Fate::Unseen,
                Predicted::Done { slot, seen } => {
                    let hint = Hint {
                        word: b.word,
                        slot,
                        seen,
                    };
                    remember_block(core, table.id, key, Some(hint));
                    // Our block is linked: it is not ours to free any more.
                    block = None;
                    break Ok(());
                }
                Predicted::Settled(outcome, gone) => {
                    written = true;
                    if gone {
                        fate = Fate::Seen;
                    }
                    if let Some(end) =
                        claim_lost(core, kind, outcome, attempt, stats, retries).await
                    {
                        break end;
                    }
                    continue;
                }
                Predicted::Missed { view, viewed_at } => {
                    // Nothing of ours is in a slot; the buckets were read after the
                    // CAS: the ordinary path goes on from them.
                    written = true;
                    fate = Fate::Unseen;
                    preread = Some((view, viewed_at));
                }
            }
        }
        let (view, viewed_at, done, writes_end, hinted) = match preread.take() {
            Some((view, at)) => (view, at, Vec::new(), 0, None),
            None => {
                let (mut wrs, buckets) =
                    view_wrs(core, &st.table(), e.subtable, st.geometry, &hash)?;
                let n = wrs.len();
                let viewed_at = Instant::now();
                let hinted = hint
                    .take()
                    .and_then(|word| Some((word, hinted_block_wr(core, &st.table(), word, &wrs)?)));
                if let Some(b) = block.as_mut().filter(|_| !written) {
                    wrs.extend(write_wr(
                        core,
                        &st.table(),
                        b.ptr,
                        std::mem::take(&mut b.bytes),
                    )?);
                }
                let writes_end = wrs.len();
                let hinted = hinted.map(|(word, wr)| {
                    wrs.push(wr);
                    word
                });
                let done = exchange(core, wrs, stats).await?;
                if writes_end > n {
                    for c in done.get(n..writes_end).unwrap_or_default() {
                        write_done(Some(c))?;
                    }
                    written = true;
                }
                let view = parse_view(&done[..n], e.subtable, st.geometry, &buckets)?;
                remember_buckets(core, table.id, &view);
                (view, viewed_at, done, writes_end, hinted)
            }
        };
        match view.status(&hash) {
            Status::Good => {}
            Status::Stale(h) => {
                let (_, fresh) = st.refresh_entry(core, idx, stats).await?;
                if fresh.subtable == view.subtable {
                    let Some(n) = split_waits.next() else {
                        break Err(KvError::Contended { attempts: attempt });
                    };
                    attempt -= 1;
                    wait_split(core, &st, h, n, stats).await?;
                }
                stats.restarts += 1;
                continue;
            }
            Status::Frozen(h) | Status::Moving(h) => {
                let Some(n) = split_waits.next() else {
                    break Err(KvError::Contended { attempts: attempt });
                };
                attempt -= 1;
                stats.restarts += 1;
                wait_split(core, &st, h, n, stats).await?;
                continue;
            }
        }
        // Unconfirmed inserts left too long (by a client that died) are cleared.
        let slots: Vec<_> = view
            .buckets
            .iter()
            .flat_map(|c| c.slots())
            .map(|r| (r.addr, r.word))
            .collect();
        let stale = st.stale_tentative(&slots, timeout);
        if !stale.is_empty() {
            // Only the primary holds tentative words: the backups' copies are empty.
            let cas: Vec<_> = stale.iter().map(|&(a, w)| (a, w, EMPTY)).collect();
            cas_primary_bulk(core, &st.table(), &cas, stats).await?;
            stats.restarts += 1;
            continue;
        }
        let mut known = Known::new();
        let finals = view.matching(fp);
        // The hinted block, READ after the buckets on their queue pair and within the
        // grace period of that READ, is the record a slot showing the hinted word
        // named (the argument of `read_view_and_block`).
        if let Some(word) = hinted
            && viewed_at.elapsed() < core.client.options.memory.grace
            && let Some(c) = finals.iter().find(|c| c.word == word)
            && let Ok(Ok(holds)) = read_bytes(done.get(writes_end)).map(|b| value_for(b, key))
        {
            known.insert((c.addr, c.word), holds.is_some());
        }
        let pending = view.tentative(fp);
        if rpc_open {
            // Hybrid: the round trips one-sided still needs — the candidates'
            // blocks (none when every one is known, e.g. the hinted block read with
            // the buckets), then one CAS (a present key) or two (an insert's claim
            // and confirmation); past k, the node finishes the write.
            let reads = u64::from(
                finals
                    .iter()
                    .chain(&pending)
                    .any(|c| !known.contains_key(&(c.addr, c.word))),
            );
            let cas = if finals.is_empty() { 2 } else { 1 };
            if stats.round_trips - started + reads + cas > k {
                rpc_open = false;
                let word = block.as_ref().map_or(EMPTY, |b| b.word);
                let outcome = rpc::call(
                    core,
                    &st,
                    &st.table(),
                    &hash,
                    key,
                    race_kind(kind),
                    word,
                    Vec::new(),
                    stats,
                )
                .await;
                match settle(core, table, mode, outcome, &mut block, &mut fate) {
                    AfterRpc::Finish(r) => break r,
                    AfterRpc::OneSided => {}
                }
            }
        }
        let mut all = finals.clone();
        all.extend(pending.iter().copied());
        let Some(holding) =
            holding_key(core, &st.table(), &all, key, viewed_at, &mut known, stats).await?
        else {
            core.backoff(attempt).await;
            continue;
        };
        // The key's value: the first final slot holding it, by address.
        let found = holding.iter().find(|c| finals.contains(c)).copied();
        let in_flight = holding.iter().any(|c| pending.contains(c));
        match (kind, found) {
            (WriteKind::Insert, Some(_)) => break Err(KvError::AlreadyExists),
            (WriteKind::Update | WriteKind::Delete, None) => {
                // An unconfirmed insert has not happened yet.
                break Err(KvError::NotFound);
            }
            (_, Some(c)) => {
                let new = block.as_ref().map_or(EMPTY, |b| b.word);
                if block.is_some() {
                    fate = Fate::Unknown;
                }
                let cas_posted = Instant::now();
                let prev = cas_bulk(core, &st.table(), &[(c.addr, c.word, new)], stats).await?;
                if prev.first() == Some(&c.word) {
                    retire(core, table.id, c.slot);
                    remember_block(
                        core,
                        table.id,
                        key,
                        block.as_ref().map(|b| Hint {
                            word: b.word,
                            slot: c.addr,
                            seen: cas_posted,
                        }),
                    );
                    if kind == WriteKind::Delete {
                        clear_duplicates(
                            core,
                            &st.table(),
                            table.id,
                            &view,
                            c,
                            key,
                            fp,
                            viewed_at,
                            stats,
                        )
                        .await?;
                    }
                    // Our block is linked: it is not ours to free any more.
                    block = None;
                    break Ok(());
                }
                if block.is_some() {
                    fate = Fate::Seen;
                }
                stats.cas_failures += 1;
                *retries += 1;
                core.backoff(attempt - 1).await;
            }
            (_, None) => {
                // Insert or put of an absent key.
                let Some(b) = block.as_ref() else {
                    break Err(KvError::NotFound);
                };
                if in_flight {
                    // Another client's insert of the key is unconfirmed: let it
                    // finish (or time out and be cleared) rather than race it.
                    attempt -= 1;
                    core.backoff(waits.min(16)).await;
                    waits += 1;
                    continue;
                }
                if viewed_at.elapsed() > core.client.options.race.insert_view_age {
                    // What the view says about other slots (and what `known`
                    // remembers of their blocks) may be out of date: look again.
                    stats.restarts += 1;
                    continue;
                }
                let Some(slot) = view.empty_slot() else {
                    // Full: split the subtable, or wait for the split already under
                    // way (its lock is held before its buckets are frozen).
                    let Some(n) = split_waits.next() else {
                        break Err(KvError::Contended { attempts: attempt });
                    };
                    attempt -= 1;
                    let header = view.buckets.first().map(|c| c.main.header);
                    if let Some(h) = header {
                        split::split(core, &st, view.subtable, h, stats).await?;
                    }
                    core.backoff(n.min(16)).await;
                    continue;
                };
                fate = Fate::Unknown;
                let claim_started = Instant::now();
                let ours = Tentative {
                    hash: &hash,
                    key,
                    slot,
                    word: b.word,
                };
                match claim(core, &st, &view, viewed_at, ours, &mut known, stats).await? {
                    (Claim::Done, _) => {
                        let hint = Hint {
                            word: b.word,
                            slot,
                            seen: claim_started,
                        };
                        remember_block(core, table.id, key, Some(hint));
                        block = None;
                        break Ok(());
                    }
                    (outcome, gone) => {
                        if gone {
                            fate = Fate::Seen;
                        }
                        if let Some(end) =
                            claim_lost(core, kind, outcome, attempt, stats, retries).await
                        {
                            break end;
                        }
                    }
                }
            }
        }
    };
    if let Some(b) = block {
        match fate {
            Fate::Unseen => core.alloc.borrow_mut().release_unlinked(b.alloc),
            Fate::Seen => {
                if let Ok(Some(s)) = Slot::unpack(b.word) {
                    retire(core, table.id, s);
                }
            }
            // The outcome of a CAS carrying it is unknown (an error ended the
            // write): it may be linked, so it is never reused.
            Fate::Unknown => {}
        }
    }
    result
}

/// After a claim (ordinary or predicted) that did not insert: `Some` ends the write
/// (the key exists and this is an insert); otherwise it goes on, after a backoff when
/// the claim lost a race.
async fn claim_lost(
    core: &SessionCore,
    kind: WriteKind,
    outcome: Claim,
    attempt: u32,
    stats: &mut OpStats,
    retries: &mut u32,
) -> Option<Result<(), KvError>> {
    match outcome {
        Claim::Exists if kind == WriteKind::Insert => Some(Err(KvError::AlreadyExists)),
        // A put that lost to an insert updates it next time.
        Claim::Exists | Claim::Done => None,
        Claim::Retry => {
            stats.cas_failures += 1;
            *retries += 1;
            core.backoff(attempt - 1).await;
            None
        }
    }
}

/// What a claim puts in a slot: the key (and its hash), the empty slot it claims and
/// the word naming its block (held there as `word | TENTATIVE` until confirmed).
#[derive(Debug, Clone, Copy)]
pub(super) struct Tentative<'a> {
    /// The key's hash.
    pub(super) hash: &'a KeyHash,
    /// The key.
    pub(super) key: &'a [u8],
    /// The slot claimed.
    pub(super) slot: RemotePtr,
    /// The confirmed word.
    pub(super) word: u64,
}

impl Tentative<'_> {
    /// The word while the claim is unconfirmed.
    fn pending(&self) -> u64 {
        self.word | TENTATIVE
    }
}

/// Insert `word` into the empty slot `slot` of the view, tentatively, and confirm
/// it unless another slot holds the key:
///
/// 1. one round trip: CAS the slot from empty to `word | TENTATIVE`, then (same
///    queue pair, executed in order) READ the key's buckets again;
/// 2. if another slot — a value, or another client's unconfirmed insert — holds
///    the key (its block read unless `known`; usually none shares the
///    fingerprint), take ours back: the key exists, or a concurrent insert
///    races ours and both start over;
/// 3. otherwise CAS our slot from `word | TENTATIVE` to `word`: the insert's
///    linearization point. It fails only if a split or a timeout cleared the
///    slot; then start over.
///
/// At most one slot of a key is ever confirmed: of two inserts whose tentative
/// slots overlap in time, the later CAS is followed by a READ that sees the
/// earlier slot, so that insert does not confirm; and an insert confirms only a
/// slot that stayed in place since its READ found no other. Readers never see an
/// unconfirmed slot, so no read returns a value whose insert then fails.
///
/// Returns the outcome and whether our slot is known to be gone (taken back or
/// cleared) rather than in an unknown state.
async fn claim(
    core: &Rc<SessionCore>,
    st: &TableState,
    view: &View,
    first_viewed_at: Instant,
    ours: Tentative<'_>,
    known: &mut Known,
    stats: &mut OpStats,
) -> Result<(Claim, bool), KvError> {
    let (view_reads, buckets) = view_wrs(core, &st.table(), view.subtable, st.geometry, ours.hash)?;
    let mut wrs = vec![cas_wr(core, &st.table(), ours.slot, EMPTY, ours.pending())?];
    wrs.extend(view_reads);
    let viewed_at = Instant::now();
    let done = exchange(core, wrs, stats).await?;
    if atomic_value(done.first())? != EMPTY {
        return Ok((Claim::Retry, true));
    }
    let after = parse_view(&done[1..], view.subtable, st.geometry, &buckets)?;
    remember_buckets(core, st.table().id, &after);
    settle_claim(
        core,
        st,
        &after,
        viewed_at,
        first_viewed_at,
        ours,
        known,
        stats,
    )
    .await
}

/// Steps 2 and 3 of [`claim`], once our tentative word is in `slot` and `after` is the
/// view READ after that CAS (posted at `viewed_at`): decide from it, then confirm our
/// slot or take it back.
#[allow(clippy::too_many_arguments)]
pub(super) async fn settle_claim(
    core: &Rc<SessionCore>,
    st: &TableState,
    after: &View,
    viewed_at: Instant,
    first_viewed_at: Instant,
    ours: Tentative<'_>,
    known: &mut Known,
    stats: &mut OpStats,
) -> Result<(Claim, bool), KvError> {
    let Tentative {
        hash,
        key,
        slot,
        word,
    } = ours;
    let pending = ours.pending();
    if first_viewed_at.elapsed() >= core.client.options.memory.grace {
        // What `known` says of a slot word may no longer hold for its block.
        known.clear();
    }
    let fp = hash.fingerprint();
    let mut others: Vec<Candidate> = after.matching(fp);
    let finals = others.len();
    others.extend(after.tentative(fp).into_iter().filter(|c| c.addr != slot));
    let holding = if after.status(hash) == Status::Good {
        holding_key(core, &st.table(), &others, key, viewed_at, known, stats).await?
    } else {
        // A split is starting: it may clear our slot or copy it; step back.
        None
    };
    let decision = match &holding {
        Some(h) if h.is_empty() => None,
        Some(h) => Some(if h.iter().any(|c| others[..finals].contains(c)) {
            Claim::Exists
        } else {
            Claim::Retry
        }),
        None => Some(Claim::Retry),
    };
    let Some(outcome) = decision else {
        // The backups never held the tentative word: theirs go from empty to ours.
        let confirm = WordCas {
            backup_compare: EMPTY,
            ..WordCas::new(slot, pending, word)
        };
        let prev = cas_words_bulk(core, &st.table(), &[confirm], stats).await?;
        return Ok(if prev.first() == Some(&pending) {
            (Claim::Done, false)
        } else {
            (Claim::Retry, true)
        });
    };
    // Take ours back (if a split or a timeout has not already cleared it).
    cas_primary_bulk(core, &st.table(), &[(slot, pending, EMPTY)], stats).await?;
    Ok((outcome, true))
}

/// After deleting the key's slot: clear any other slot that still holds the key
/// (a duplicate whose inserter has not taken it back).
#[allow(clippy::too_many_arguments)]
async fn clear_duplicates(
    core: &Rc<SessionCore>,
    copies: &TableDescription,
    table: u64,
    view: &View,
    deleted: Candidate,
    key: &[u8],
    fp: u8,
    viewed_at: Instant,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    let others: Vec<Candidate> = view
        .matching(fp)
        .into_iter()
        .filter(|c| c.addr != deleted.addr && c.word == c.slot.pack())
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    let Some(found) = lookup_all(core, copies, &others, key, viewed_at, stats).await? else {
        return Ok(());
    };
    let cas: Vec<_> = found.iter().map(|(c, _)| (c.addr, c.word, EMPTY)).collect();
    let prev = cas_bulk(core, copies, &cas, stats).await?;
    for ((c, _), p) in found.iter().zip(prev) {
        if p == c.word {
            retire(core, table, c.slot);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::{Allocator, TableRef};
    use crate::ptr::RemotePtr;

    /// A CAS that read a slot word, then stalled in retransmission: while it is in
    /// flight, the block that word names is retired and handed out again for other
    /// keys — each time after the block grace — with the same fingerprint and
    /// length, landing in the same slot. Every word the slot can hold during the
    /// flight differs from the stale one (the reuse tag moved on), so the stale CAS
    /// cannot match; the tag only comes round after more time than any flight lasts.
    #[test]
    fn a_stale_cas_never_matches_a_reused_block_during_its_flight() {
        for options in [
            crate::ClientOptions::default(),
            crate::ClientOptions::default().with_grace(Duration::from_millis(1)),
            crate::ClientOptions::default().with_rc(verbs::rc::RcConfig {
                retransmit_timeout: Duration::from_millis(20),
                max_retries: 30,
                ..verbs::rc::RcConfig::default()
            }),
        ] {
            // A CAS after a known slot compares a word seen up to a window earlier.
            let flight = options.connection.rc.retransmission_window()
                + PACKET_LIFETIME
                + known_slot::window(options.memory.grace);
            let grace = block_grace(&options);
            assert!(grace >= options.memory.grace);
            assert!(grace * TAG_PERIOD >= flight, "{grace:?} × 16 < {flight:?}");

            let meta = dmkv_api::MetadataClient::new("http://127.0.0.1:9").unwrap();
            let mut alloc = Allocator::new(
                "t".into(),
                Duration::from_secs(60),
                1 << 20,
                options.memory.grace,
                7,
            );
            let table = TableRef { id: 1, name: "t" };
            let ptr = RemotePtr::new(0, 4096).unwrap();
            let (fp, len) = (0x5a, 100);
            // The block as the stalled CAS saw it.
            let first = Allocation {
                table: 1,
                memnode: 0,
                va: 4096,
                size: 128,
                generation: 0x3a7,
            };
            let stale = Slot::new(fp, len, ptr, u64::from(first.generation)).unwrap();
            let start = Instant::now();
            let mut now = start;
            let mut current = stale;
            let mut reuses = 0u32;
            // Retire and reuse as fast as the grace allows, for as long as the flight lasts.
            while now.duration_since(start) < flight {
                let a = Allocation {
                    generation: u16::from(current.tag()),
                    ..first
                };
                alloc.reclaim_after(a, now, grace);
                // Not before the grace period (the fresh-chunk path then fails: no
                // metadata service listens here).
                assert!(alloc.alloc(&meta, table, 0, 128, now + grace / 2).is_err());
                now += grace;
                let b = alloc
                    .alloc(&meta, table, 0, 128, now)
                    .expect("the reclaimed block after its grace");
                assert_eq!(b.va, 4096);
                current = Slot::new(fp, len, ptr, u64::from(b.generation)).unwrap();
                reuses += 1;
                if now.duration_since(start) < flight {
                    assert_ne!(
                        current.pack(),
                        stale.pack(),
                        "reuse {reuses} within the flight"
                    );
                }
            }
            assert!(reuses >= 1);
        }
    }
}
