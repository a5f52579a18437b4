//! The verbs side of RACE: batches of work requests across memory nodes, reading
//! the two combined buckets of a key, and reading and checking KV blocks.

use std::rc::Rc;
use std::time::Instant;

use verbs::wr::{Completion, WorkRequest};

use dmkv_api::metadata::TableDescription;

use super::bucket::{Bucket, BucketHeader, COMBINED_BYTES, CombinedBucket, Subtable};
use super::hash::KeyHash;
use super::kv_block::value_for;
use super::slot::{Slot, is_split_word, unpack_marked, unpack_tentative};
use crate::error::KvError;
use crate::ptr::RemotePtr;
use crate::remote::{atomic_value, read_bytes};
use crate::replication::fanout::{WordCas, cas_words, primary_target, write_targets};
use crate::session::SessionCore;
use crate::stats::OpStats;

/// Work requests per round trip in bulk work (splits, initialisation).
pub(crate) const BULK: usize = 32;

/// A work request and the memory node it goes to.
pub(crate) type Wr = (u64, WorkRequest);

fn outside(ptr: RemotePtr) -> KvError {
    KvError::corrupt(format!("{ptr:?} lies outside its memory node's region"))
}

/// A READ of `len` bytes at `ptr`, from the acting primary's copy.
pub(crate) fn read_wr(
    core: &SessionCore,
    table: &TableDescription,
    ptr: RemotePtr,
    len: u64,
) -> Result<Wr, KvError> {
    let t = primary_target(&core.links, table, ptr, len)?;
    let len = u32::try_from(len).map_err(|_| KvError::InvalidArgument("read too long".into()))?;
    Ok((t.memnode, WorkRequest::read(t.addr, len)))
}

/// A READ of the KV block of `len` bytes at `ptr`, reached through a slot read from
/// the primary: with load-balanced READs, under the replica set's read alias key, so
/// the switch may serve it from any member (a published block is complete on every
/// member and never changes until reclaimed a grace period later).
fn block_read_wr(
    core: &SessionCore,
    table: &TableDescription,
    ptr: RemotePtr,
    len: u64,
) -> Result<Wr, KvError> {
    let (memnode, mut wr) = read_wr(core, table, ptr, len)?;
    let members = crate::replication::copies::members(table, u64::from(ptr.memnode()));
    if members.first() == Some(&memnode)
        && let Some(alias) = core.links.switch_read_alias(&members, len)
        && let WorkRequest::Read { remote, .. } = &mut wr
    {
        remote.rkey = alias;
    }
    Ok((memnode, wr))
}

/// The WRITEs of `data` at `ptr`: one per copy (members, then syncing members),
/// the primary's first; they go out in the same round trip.
pub(crate) fn write_wr(
    core: &SessionCore,
    table: &TableDescription,
    ptr: RemotePtr,
    mut data: Vec<u8>,
) -> Result<Vec<Wr>, KvError> {
    let mut targets = write_targets(&core.links, table, ptr, data.len() as u64)?;
    // With switch replication the members' copies are one WRITE to the primary under
    // the set's alias key; the switch copies it to the backups.
    let members = crate::replication::copies::members(table, u64::from(ptr.memnode()));
    if let Some(rkey) = core.links.switch_alias(&members, data.len() as u64)
        && targets.first().map(|t| t.memnode) == members.first().copied()
        && targets.len() >= members.len()
    {
        targets.drain(1..members.len());
        if let Some(primary) = targets.first_mut() {
            primary.addr.rkey = rkey;
        }
    }
    let n = targets.len();
    Ok(targets
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let bytes = if i + 1 < n {
                data.clone()
            } else {
                std::mem::take(&mut data)
            };
            (t.memnode, WorkRequest::write(t.addr, bytes))
        })
        .collect())
}

/// A CAS of the acting primary's copy of the word at `ptr` alone: for marks only
/// the primary's readers need (a tentative slot); every other word changes
/// through [`cas_bulk`].
pub(crate) fn cas_wr(
    core: &SessionCore,
    table: &TableDescription,
    ptr: RemotePtr,
    compare: u64,
    swap: u64,
) -> Result<Wr, KvError> {
    let t = primary_target(&core.links, table, ptr, 8)?;
    Ok((t.memnode, WorkRequest::cas(t.addr, compare, swap)))
}

/// The FAAs of the word at `ptr`: one per copy, the primary's first (its answer
/// is the one that counts; every copy adds the same amounts, so they agree once
/// the FAAs in flight land).
pub(crate) fn faa_wr(
    core: &SessionCore,
    table: &TableDescription,
    ptr: RemotePtr,
    add: u64,
) -> Result<Vec<Wr>, KvError> {
    Ok(write_targets(&core.links, table, ptr, 8)?
        .into_iter()
        .map(|t| (t.memnode, WorkRequest::faa(t.addr, add)))
        .collect())
}

/// Post `wrs` (each batch of one memory node with one doorbell, in the given order)
/// and wait for all: one round trip. Completions come back in the order of `wrs`.
pub(crate) async fn exchange(
    core: &SessionCore,
    wrs: Vec<Wr>,
    stats: &mut OpStats,
) -> Result<Vec<Completion>, KvError> {
    if wrs.is_empty() {
        return Ok(Vec::new());
    }
    let mut batches: Vec<(u64, Vec<WorkRequest>)> = Vec::new();
    let mut place = Vec::with_capacity(wrs.len());
    for (memnode, wr) in wrs {
        let b = match batches.iter().position(|(m, _)| *m == memnode) {
            Some(b) => b,
            None => {
                batches.push((memnode, Vec::new()));
                batches.len() - 1
            }
        };
        place.push((b, batches[b].1.len()));
        batches[b].1.push(wr);
    }
    let mut done: Vec<Vec<Option<Completion>>> = core
        .links
        .round_trip(batches, stats)
        .await?
        .into_iter()
        .map(|b| b.into_iter().map(Some).collect())
        .collect();
    place
        .into_iter()
        .map(|(b, i)| {
            done.get_mut(b)
                .and_then(|v| v.get_mut(i))
                .and_then(Option::take)
                .ok_or_else(|| KvError::unavailable("missing completion"))
        })
        .collect()
}

/// Post `wrs` in round trips of at most [`BULK`] work requests.
pub(crate) async fn exchange_bulk(
    core: &SessionCore,
    wrs: Vec<Wr>,
    stats: &mut OpStats,
) -> Result<Vec<Completion>, KvError> {
    let mut out = Vec::with_capacity(wrs.len());
    let mut rest = wrs;
    while !rest.is_empty() {
        let tail = rest.split_off(rest.len().min(BULK));
        out.extend(exchange(core, rest, stats).await?);
        rest = tail;
    }
    Ok(out)
}

/// Run CASes in bulk, each decided across the table's copies
/// ([`crate::replication::fanout::cas_words`]); returns the values found (on the
/// primary: `compare` where the CAS took effect).
pub(crate) async fn cas_bulk(
    core: &SessionCore,
    table: &TableDescription,
    cas: &[(RemotePtr, u64, u64)],
    stats: &mut OpStats,
) -> Result<Vec<u64>, KvError> {
    let words: Vec<WordCas> = cas.iter().map(|&(p, c, s)| WordCas::new(p, c, s)).collect();
    cas_words_bulk(core, table, &words, stats).await
}

/// [`cas_bulk`] for words whose backups expect another value than the primary.
pub(crate) async fn cas_words_bulk(
    core: &SessionCore,
    table: &TableDescription,
    words: &[WordCas],
    stats: &mut OpStats,
) -> Result<Vec<u64>, KvError> {
    let mut out = Vec::with_capacity(words.len());
    for chunk in words.chunks(BULK) {
        out.extend(cas_words(core, table, chunk, stats).await?);
    }
    Ok(out)
}

/// Run CASes of the acting primary's copies alone (see [`cas_wr`]); returns the
/// values found.
pub(crate) async fn cas_primary_bulk(
    core: &SessionCore,
    table: &TableDescription,
    cas: &[(RemotePtr, u64, u64)],
    stats: &mut OpStats,
) -> Result<Vec<u64>, KvError> {
    let wrs = cas
        .iter()
        .map(|&(p, c, s)| cas_wr(core, table, p, c, s))
        .collect::<Result<Vec<_>, _>>()?;
    exchange_bulk(core, wrs, stats)
        .await?
        .iter()
        .map(|c| atomic_value(Some(c)))
        .collect()
}

/// Read one 8-byte word.
pub(crate) async fn read_word(
    core: &SessionCore,
    table: &TableDescription,
    ptr: RemotePtr,
    stats: &mut OpStats,
) -> Result<u64, KvError> {
    let done = exchange(core, vec![read_wr(core, table, ptr, 8)?], stats).await?;
    word_of(read_bytes(done.first())?)
}

/// The little-endian word at the start of `b`.
pub(crate) fn word_of(b: &[u8]) -> Result<u64, KvError> {
    let w: [u8; 8] = b
        .get(..8)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| KvError::unavailable("short READ"))?;
    Ok(u64::from_le_bytes(w))
}

/// The little-endian words of `b`.
pub(crate) fn words_of(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect()
}

/// The two combined buckets of a key in one subtable, as read.
#[derive(Debug, Clone)]
pub(crate) struct View {
    /// The subtable.
    pub subtable: RemotePtr,
    /// One combined bucket per distinct bucket choice.
    pub buckets: Vec<CombinedBucket>,
}

/// What the bucket headers of a view say about a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Every bucket covers the key and none is being filled or frozen by a split.
    Good,
    /// Every bucket covers the key, but a split froze this subtable (readers may
    /// use it; writers wait).
    Frozen(BucketHeader),
    /// A bucket is being filled by a split: the key may still be in the parent.
    Moving(BucketHeader),
    /// A bucket does not cover the key: the cached directory entry is stale, or
    /// the subtable is being split and the key moves out.
    Stale(BucketHeader),
}

impl View {
    /// A view of `hash`'s combined buckets in `subtable`, every bucket under
    /// `header`, whose main buckets hold `fill` (slot index, word) and are otherwise
    /// empty (for tests of what a view says).
    #[cfg(test)]
    pub(crate) fn with_main_slots(
        subtable: RemotePtr,
        geometry: Subtable,
        hash: &KeyHash,
        header: BucketHeader,
        fill: &[(usize, u64)],
    ) -> View {
        let buckets = geometry
            .candidates(hash)
            .into_iter()
            .map(|bk| {
                let mut main = Bucket::empty(header);
                for &(i, w) in fill {
                    main.slots[i] = w;
                }
                let mut bytes = main.encode().to_vec();
                bytes.extend(Bucket::empty(header).encode());
                assert_eq!(bytes.len(), COMBINED_BYTES);
                match CombinedBucket::parse(&bytes, subtable, geometry, bk) {
                    Ok(c) => c,
                    Err(e) => panic!("a test view: {e}"),
                }
            })
            .collect();
        View { subtable, buckets }
    }

    /// Every bucket line read (main and overflow of each combined bucket).
    pub(crate) fn lines(&self) -> impl Iterator<Item = &Bucket> {
        self.buckets.iter().flat_map(|c| [&c.main, &c.overflow])
    }

    /// The status for `hash`.
    pub(crate) fn status(&self, hash: &KeyHash) -> Status {
        let mut frozen = None;
        for b in self.lines() {
            let h = b.header;
            if !h.covers(hash) {
                return Status::Stale(h);
            }
            if h.moving() {
                return Status::Moving(h);
            }
            if frozen.is_none() && b.slots.iter().any(|&w| is_split_word(w)) {
                frozen = Some(h);
            }
        }
        frozen.map_or(Status::Good, Status::Frozen)
    }

    /// Tentative slots (inserts not yet confirmed) with fingerprint `fp`, by address,
    /// without duplicates; each candidate's `slot` is the value it would stand for.
    pub(crate) fn tentative(&self, fp: u8) -> Vec<Candidate> {
        let mut out: Vec<Candidate> = Vec::new();
        for c in &self.buckets {
            for r in c.slots() {
                if let Ok(Some(slot)) = unpack_tentative(r.word)
                    && slot.fingerprint() == fp
                    && !out.iter().any(|o| o.addr == r.addr)
                {
                    out.push(Candidate {
                        addr: r.addr,
                        word: r.word,
                        slot,
                    });
                }
            }
        }
        out.sort_by_key(|c| c.addr);
        out
    }

    /// Occupied slots (split marks removed) with fingerprint `fp`, by address,
    /// without duplicates. Tentative slots are not occupied: no reader sees them.
    pub(crate) fn matching(&self, fp: u8) -> Vec<Candidate> {
        let mut out: Vec<Candidate> = Vec::new();
        for c in &self.buckets {
            for r in c.slots() {
                if let Ok(Some(slot)) = unpack_marked(r.word)
                    && slot.fingerprint() == fp
                    && !out.iter().any(|o| o.addr == r.addr)
                {
                    out.push(Candidate {
                        addr: r.addr,
                        word: r.word,
                        slot,
                    });
                }
            }
        }
        out.sort_by_key(|c| c.addr);
        out
    }

    /// The empty slot an insert takes: in the combined bucket with more free slots
    /// (the first choice on a tie), its first empty slot, main bucket first. Every
    /// client picks the same slot from the same contents, so concurrent inserts of
    /// one key usually collide on one CAS instead of creating duplicates.
    pub(crate) fn empty_slot(&self) -> Option<RemotePtr> {
        let mut best: Option<&CombinedBucket> = None;
        for c in &self.buckets {
            if c.free_slots() > best.map_or(0, |b| b.free_slots()) {
                best = Some(c);
            }
        }
        best.and_then(|c| c.first_empty()).map(|r| r.addr)
    }
}

/// A slot that may hold the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// Address of the slot word.
    pub addr: RemotePtr,
    /// The word as read (possibly split-marked).
    pub word: u64,
    /// The slot it stands for.
    pub slot: Slot,
}

/// The READs of a key's combined buckets in subtable `subtable`.
pub(crate) fn view_wrs(
    core: &SessionCore,
    table: &TableDescription,
    subtable: RemotePtr,
    geometry: Subtable,
    hash: &KeyHash,
) -> Result<(Vec<Wr>, Vec<u64>), KvError> {
    let [a, b] = geometry.candidates(hash);
    let buckets = if a == b { vec![a] } else { vec![a, b] };
    let wrs = buckets
        .iter()
        .map(|&bk| {
            let at = subtable
                .checked_add(Subtable::combined_offset(bk))
                .ok_or_else(|| outside(subtable))?;
            read_wr(core, table, at, COMBINED_BYTES as u64)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((wrs, buckets))
}

/// Parse the completions of [`view_wrs`].
pub(crate) fn parse_view(
    done: &[Completion],
    subtable: RemotePtr,
    geometry: Subtable,
    buckets: &[u64],
) -> Result<View, KvError> {
    let parsed = buckets
        .iter()
        .zip(done)
        .map(|(&bk, c)| {
            Ok(CombinedBucket::parse(
                read_bytes(Some(c))?,
                subtable,
                geometry,
                bk,
            )?)
        })
        .collect::<Result<Vec<_>, KvError>>()?;
    if parsed.len() != buckets.len() {
        return Err(KvError::unavailable("missing READ completion"));
    }
    Ok(View {
        subtable,
        buckets: parsed,
    })
}

/// Read a key's combined buckets in one round trip.
pub(crate) async fn read_view(
    core: &SessionCore,
    table: &TableDescription,
    subtable: RemotePtr,
    geometry: Subtable,
    hash: &KeyHash,
    stats: &mut OpStats,
) -> Result<View, KvError> {
    let (wrs, buckets) = view_wrs(core, table, subtable, geometry, hash)?;
    let done = exchange(core, wrs, stats).await?;
    parse_view(&done, subtable, geometry, &buckets)
}

/// [`read_view`] with a READ of the KV block `hint` names in the same doorbell, when
/// the block lies on the memory node the buckets do (the queue pair executes the
/// block READ after the bucket READs); the block's bytes come back beside the view.
/// Otherwise (or when `hint` names no block) just the view.
pub(crate) async fn read_view_and_block(
    core: &SessionCore,
    table: &TableDescription,
    subtable: RemotePtr,
    geometry: Subtable,
    hash: &KeyHash,
    hint: u64,
    stats: &mut OpStats,
) -> Result<(View, Option<Vec<u8>>), KvError> {
    let (mut wrs, buckets) = view_wrs(core, table, subtable, geometry, hash)?;
    let Some(block) = hinted_block_wr(core, table, hint, &wrs) else {
        let done = exchange(core, wrs, stats).await?;
        return Ok((parse_view(&done, subtable, geometry, &buckets)?, None));
    };
    wrs.push(block);
    let done = exchange(core, wrs, stats).await?;
    let n = buckets.len();
    let view = parse_view(
        done.get(..n).unwrap_or_default(),
        subtable,
        geometry,
        &buckets,
    )?;
    let bytes = done
        .get(n)
        .and_then(|c| read_bytes(Some(c)).ok())
        .map(<[u8]>::to_vec);
    Ok((view, bytes))
}

/// The READ of the KV block the slot word `hint` names, when it can join the bucket
/// READs `view` in one doorbell with the ordering argument of [`read_view_and_block`]:
/// the block lies on the memory node every bucket READ goes to (one queue pair, so
/// it executes after them). `None` otherwise, or when `hint` names no block.
pub(crate) fn hinted_block_wr(
    core: &SessionCore,
    table: &TableDescription,
    hint: u64,
    view: &[Wr],
) -> Option<Wr> {
    let slot = unpack_marked(hint).ok().flatten()?;
    let wr = read_wr(core, table, slot.ptr(), slot.read_len() as u64).ok()?;
    view.iter().all(|(m, _)| *m == wr.0).then_some(wr)
}

/// What reading the candidates' KV blocks found.
#[derive(Debug, Clone)]
pub(crate) enum Lookup {
    /// The key's value (from the lowest address when several slots hold it).
    Found(Vec<u8>),
    /// No candidate holds the key.
    Absent,
    /// A block failed its checks (torn or reused): read the buckets again.
    Torn,
}

/// Every candidate holding `key`, by address; `None` when a block failed its
/// checks, or when the blocks were read a grace period or more after `viewed_at`
/// (when the READ of the buckets the candidates come from was posted).
///
/// A block is reused only a grace period after its slot stopped naming it, and
/// its slot named it when the buckets were read; so blocks read within the grace
/// period of the bucket READ hold what the slots named. Later, a block may hold
/// another record with a valid CRC (even another key: "absent" would be wrong),
/// so a late answer is discarded and the caller reads the buckets again.
pub(crate) async fn lookup_all(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    candidates: &[Candidate],
    key: &[u8],
    viewed_at: Instant,
    stats: &mut OpStats,
) -> Result<Option<Vec<(Candidate, Vec<u8>)>>, KvError> {
    if candidates.is_empty() {
        return Ok(Some(Vec::new()));
    }
    let wrs = candidates
        .iter()
        .map(|c| block_read_wr(core, table, c.slot.ptr(), c.slot.read_len() as u64))
        .collect::<Result<Vec<_>, _>>()?;
    let done = exchange(core, wrs, stats).await?;
    if viewed_at.elapsed() >= core.client.options.memory.grace {
        stats.restarts += 1;
        return Ok(None);
    }
    let mut found = Vec::new();
    for (c, d) in candidates.iter().zip(&done) {
        match value_for(read_bytes(Some(d))?, key) {
            Ok(Some(v)) => found.push((*c, v.to_vec())),
            Ok(None) => {}
            Err(_) => {
                stats.restarts += 1;
                return Ok(None);
            }
        }
    }
    Ok(Some(found))
}
