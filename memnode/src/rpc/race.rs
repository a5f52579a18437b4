//! RACE index operations executed next to memory: search, insert, update, put and
//! delete of one key ([`dmkv_api::rpc_race`]).
//!
//! The worker runs the slot protocol one-sided clients run (`kvstore::race::ops`),
//! with local reads and the region's own 8-byte atomics instead of verbs, so RPC
//! and one-sided operations on one table stay linearizable together:
//!
//! - **search**: read the key's combined buckets; every header must cover the key
//!   and none be filled by a split; read the KV blocks of the confirmed slots with
//!   the key's fingerprint, check CRC and key, answer the first by address;
//! - **update / delete / put of a present key**: CAS the key's slot from the word
//!   read to the new word (or to empty); the linearization point is the CAS;
//! - **insert / put of an absent key**: CAS the empty slot every client would pick
//!   to the new word marked tentative, read the buckets again, and confirm (CAS to
//!   the unmarked word) only if no other slot holds the key; otherwise take it
//!   back. Readers ignore tentative slots, so an insert is visible only once
//!   confirmed.
//!
//! Cases that need the directory, a split or memory of another node are handed
//! back to the client ([`RaceOutcome::Deferred`]) with nothing changed: a header
//! that does not cover the key (stale directory cache), a split in progress, full
//! buckets, another client's unconfirmed insert of the key, a block on another
//! node, several slots holding the key on delete, a value too large for a reply, a
//! slot that changed on every attempt. Every access goes through `memory`, the
//! node's memory as the queue pair sees it, so the scope checks of one-sided verbs
//! apply; a refused access before any change refuses the request, and a failure
//! after the tentative CAS takes the slot back before answering.

use std::sync::atomic::{AtomicBool, Ordering};

use dmkv_api::race_layout::{
    BUCKET_BYTES, COMBINED_BYTES, EMPTY, MARK, SLOTS_PER_BUCKET, TENTATIVE, header_covers,
    header_fields, is_split_word, is_tentative, parse_block, slot_block, slot_fingerprint,
};
use dmkv_api::rpc::RPC_MAX_DATA;
use dmkv_api::rpc_race::{Deferral, RaceKind, RaceOutcome, RaceRequest};
use verbs::mem::{AccessError, RemoteMemory};

/// Attempts of one request before it is handed back as contended.
pub const ATTEMPTS: usize = 8;

/// Why execution stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// A memory access was refused (nothing was changed).
    Access(AccessError),
    /// The test hook stopped the worker in the middle of the request.
    Crashed,
}

impl From<AccessError> for Stop {
    fn from(e: AccessError) -> Stop {
        Stop::Access(e)
    }
}

/// A slot as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SlotAt {
    va: u64,
    word: u64,
    /// Which combined bucket (index into the request's buckets).
    combined: usize,
}

/// The key's combined buckets as read.
struct View {
    headers: Vec<u64>,
    /// Per combined bucket: main slots, then overflow slots.
    slots: Vec<SlotAt>,
}

/// What the headers say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Good,
    Frozen,
    Moving,
    Stale,
}

fn le64(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[..8]);
    u64::from_le_bytes(w)
}

impl View {
    fn read(req: &RaceRequest<'_>, memory: &dyn RemoteMemory) -> Result<View, AccessError> {
        let mut view = View {
            headers: Vec::with_capacity(4),
            slots: Vec::with_capacity(4 * SLOTS_PER_BUCKET),
        };
        let mut buf = [0u8; COMBINED_BYTES];
        for (i, b) in req.buckets.iter().flatten().enumerate() {
            memory.read(req.rkey, b.va, &mut buf)?;
            let order = if b.main_first { [0, 1] } else { [1, 0] };
            for half in order {
                let off = half * BUCKET_BYTES;
                view.headers.push(le64(&buf[off..]));
                for s in 0..SLOTS_PER_BUCKET {
                    let at = off + 8 + 8 * s;
                    view.slots.push(SlotAt {
                        // In range: the READ of these 128 bytes at `b.va` succeeded.
                        va: b.va.wrapping_add(at as u64),
                        word: le64(&buf[at..]),
                        combined: i,
                    });
                }
            }
        }
        Ok(view)
    }

    fn status(&self, suffix: u32) -> Status {
        for &h in &self.headers {
            if !header_covers(h, suffix) {
                return Status::Stale;
            }
            if header_fields(h).is_some_and(|(_, _, moving)| moving) {
                return Status::Moving;
            }
        }
        if self.slots.iter().any(|s| is_split_word(s.word)) {
            Status::Frozen
        } else {
            Status::Good
        }
    }

    /// Slots passing `keep` with fingerprint `fp`, by address, without duplicates.
    fn select(&self, fp: u8, keep: impl Fn(u64) -> bool) -> Vec<SlotAt> {
        let mut out: Vec<SlotAt> = Vec::new();
        for s in &self.slots {
            if keep(s.word)
                && slot_block(s.word).is_some()
                && slot_fingerprint(s.word) == fp
                && !out.iter().any(|o| o.va == s.va)
            {
                out.push(*s);
            }
        }
        out.sort_by_key(|s| s.va);
        out
    }

    /// Confirmed slots (split marks ignored) with fingerprint `fp`.
    fn matching(&self, fp: u8) -> Vec<SlotAt> {
        self.select(fp, |w| w != EMPTY && !is_tentative(w))
    }

    /// Unconfirmed inserts with fingerprint `fp`.
    fn tentative(&self, fp: u8) -> Vec<SlotAt> {
        self.select(fp, |w| is_tentative(w) && w & MARK == 0)
    }

    /// The empty slot an insert takes: in the combined bucket with more free slots
    /// (the first on a tie), its first empty slot, main bucket first — the slot
    /// one-sided clients pick from the same contents.
    fn empty_slot(&self) -> Option<u64> {
        let combined = self.slots.last().map_or(0, |s| s.combined + 1);
        let free = |c: usize| {
            self.slots
                .iter()
                .filter(|s| s.combined == c && s.word == EMPTY)
                .count()
        };
        let mut best: Option<(usize, usize)> = None;
        for c in 0..combined {
            let f = free(c);
            if f > best.map_or(0, |(_, n)| n) {
                best = Some((c, f));
            }
        }
        let (c, _) = best?;
        self.slots
            .iter()
            .find(|s| s.combined == c && s.word == EMPTY)
            .map(|s| s.va)
    }
}

/// What a slot's KV block says about the key.
enum Holds {
    /// The block holds the key, with this value.
    Yes(Vec<u8>),
    /// The block holds another key.
    No,
}

/// Read the block a slot word names (on this node) and compare its key.
fn read_block(
    req: &RaceRequest<'_>,
    memory: &dyn RemoteMemory,
    word: u64,
) -> Result<Result<Holds, Deferral>, AccessError> {
    let Some((memnode, offset, len)) = slot_block(word & !(MARK | TENTATIVE)) else {
        return Ok(Err(Deferral::Torn));
    };
    let Some(va) = req.base_va.checked_add(offset) else {
        return Ok(Err(Deferral::Elsewhere));
    };
    if memnode != req.pointer_memnode {
        return Ok(Err(Deferral::Elsewhere));
    }
    let mut buf = vec![0u8; len];
    memory.read(req.rkey, va, &mut buf)?;
    Ok(match parse_block(&buf) {
        None => Err(Deferral::Torn),
        Some((k, v)) if k == req.key => Ok(Holds::Yes(v.to_vec())),
        Some(_) => Ok(Holds::No),
    })
}

/// The slots holding the key, with the values of their blocks.
type Holding = Vec<(SlotAt, Vec<u8>)>;

/// Which of `slots` hold the key; `Err` when a block cannot be judged here.
fn holding(
    req: &RaceRequest<'_>,
    memory: &dyn RemoteMemory,
    slots: &[SlotAt],
) -> Result<Result<Holding, Deferral>, AccessError> {
    let mut out = Vec::new();
    for s in slots {
        match read_block(req, memory, s.word)? {
            Ok(Holds::Yes(v)) => out.push((*s, v)),
            Ok(Holds::No) => {}
            Err(d) => return Ok(Err(d)),
        }
    }
    Ok(Ok(out))
}

/// Execute a RACE request against `memory`. `crash`, when set, is cleared and stops
/// execution right after the request's first successful CAS (a test hook: a worker
/// that dies in the middle of a write).
pub fn execute(
    req: &RaceRequest<'_>,
    memory: &dyn RemoteMemory,
    crash: &AtomicBool,
) -> Result<RaceOutcome, Stop> {
    if req.kind == RaceKind::Search {
        return Ok(search(req, memory)?);
    }
    let mut torn = false;
    for _ in 0..ATTEMPTS {
        match write_once(req, memory, crash)? {
            Step::Finished(o) => return Ok(o),
            Step::Again { torn: t } => torn |= t,
        }
    }
    Ok(RaceOutcome::Deferred(if torn {
        Deferral::Torn
    } else {
        Deferral::Contended
    }))
}

fn search(req: &RaceRequest<'_>, memory: &dyn RemoteMemory) -> Result<RaceOutcome, AccessError> {
    for _ in 0..ATTEMPTS {
        let view = View::read(req, memory)?;
        match view.status(req.suffix) {
            Status::Stale => return Ok(RaceOutcome::Deferred(Deferral::Stale)),
            Status::Moving => return Ok(RaceOutcome::Deferred(Deferral::Split)),
            Status::Good | Status::Frozen => {}
        }
        let candidates = view.matching(req.fingerprint);
        match holding(req, memory, &candidates)? {
            Err(Deferral::Torn) => continue,
            Err(d) => return Ok(RaceOutcome::Deferred(d)),
            Ok(found) => {
                return Ok(match found.into_iter().next() {
                    None => RaceOutcome::Absent,
                    Some((_, v)) if v.len() >= RPC_MAX_DATA => {
                        RaceOutcome::Deferred(Deferral::TooLarge)
                    }
                    Some((_, v)) => RaceOutcome::Found(v),
                });
            }
        }
    }
    Ok(RaceOutcome::Deferred(Deferral::Torn))
}

/// One attempt of a write.
enum Step {
    Finished(RaceOutcome),
    Again { torn: bool },
}

fn deferred(d: Deferral) -> Step {
    Step::Finished(RaceOutcome::Deferred(d))
}

fn write_once(
    req: &RaceRequest<'_>,
    memory: &dyn RemoteMemory,
    crash: &AtomicBool,
) -> Result<Step, Stop> {
    let view = View::read(req, memory)?;
    match view.status(req.suffix) {
        Status::Good => {}
        Status::Stale => return Ok(deferred(Deferral::Stale)),
        Status::Frozen | Status::Moving => return Ok(deferred(Deferral::Split)),
    }
    let fp = req.fingerprint;
    let finals = view.matching(fp);
    let pending = view.tentative(fp);
    let found = match holding(req, memory, &finals)? {
        Ok(f) => f,
        Err(Deferral::Torn) => return Ok(Step::Again { torn: true }),
        Err(d) => return Ok(deferred(d)),
    };
    let in_flight = match holding(req, memory, &pending)? {
        Ok(f) => !f.is_empty(),
        Err(Deferral::Torn) => return Ok(Step::Again { torn: true }),
        Err(d) => return Ok(deferred(d)),
    };
    match (req.kind, found.first()) {
        (RaceKind::Insert, Some(_)) => Ok(Step::Finished(RaceOutcome::Exists)),
        (RaceKind::Update | RaceKind::Delete, None) => Ok(Step::Finished(RaceOutcome::NotFound)),
        (kind, Some((slot, _))) => {
            if kind == RaceKind::Delete && found.len() > 1 {
                return Ok(deferred(Deferral::Duplicate));
            }
            let new = if kind == RaceKind::Delete {
                EMPTY
            } else {
                req.word
            };
            let prev = memory.compare_swap(req.rkey, slot.va, slot.word, new)?;
            if prev == slot.word {
                if crash.swap(false, Ordering::SeqCst) {
                    return Err(Stop::Crashed);
                }
                Ok(Step::Finished(RaceOutcome::Done(slot.word)))
            } else {
                Ok(Step::Again { torn: false })
            }
        }
        (_, None) => {
            if in_flight {
                return Ok(deferred(Deferral::Busy));
            }
            let Some(at) = view.empty_slot() else {
                return Ok(deferred(Deferral::Full));
            };
            let pending_word = req.word | TENTATIVE;
            if memory.compare_swap(req.rkey, at, EMPTY, pending_word)? != EMPTY {
                return Ok(Step::Again { torn: false });
            }
            if crash.swap(false, Ordering::SeqCst) {
                return Err(Stop::Crashed);
            }
            let decision = claim(req, memory, at, pending_word);
            match decision {
                Ok(Claim::Confirm) => {
                    let prev = memory.compare_swap(req.rkey, at, pending_word, req.word)?;
                    Ok(if prev == pending_word {
                        Step::Finished(RaceOutcome::Done(EMPTY))
                    } else {
                        // A split or a timeout cleared our slot: start over.
                        Step::Again { torn: false }
                    })
                }
                other => {
                    // Take ours back (unless a split or a timeout already did).
                    memory.compare_swap(req.rkey, at, pending_word, EMPTY)?;
                    match other? {
                        Claim::Confirm => Ok(Step::Again { torn: false }),
                        Claim::Exists if req.kind == RaceKind::Insert => {
                            Ok(Step::Finished(RaceOutcome::Exists))
                        }
                        // A put that met a confirmed slot of the key updates it next time.
                        Claim::Exists => Ok(Step::Again { torn: false }),
                        Claim::Again { torn } => Ok(Step::Again { torn }),
                        Claim::Defer(d) => Ok(deferred(d)),
                    }
                }
            }
        }
    }
}

/// What the re-read after a tentative CAS decided.
enum Claim {
    Confirm,
    Exists,
    Again { torn: bool },
    Defer(Deferral),
}

fn claim(
    req: &RaceRequest<'_>,
    memory: &dyn RemoteMemory,
    at: u64,
    pending_word: u64,
) -> Result<Claim, AccessError> {
    let after = View::read(req, memory)?;
    if after.status(req.suffix) != Status::Good {
        return Ok(Claim::Defer(Deferral::Split));
    }
    let fp = req.fingerprint;
    let finals = after.matching(fp);
    let others: Vec<SlotAt> = after
        .tentative(fp)
        .into_iter()
        .filter(|s| s.va != at || s.word != pending_word)
        .collect();
    match holding(req, memory, &finals)? {
        Ok(f) if !f.is_empty() => return Ok(Claim::Exists),
        Ok(_) => {}
        Err(Deferral::Torn) => return Ok(Claim::Again { torn: true }),
        Err(d) => return Ok(Claim::Defer(d)),
    }
    Ok(match holding(req, memory, &others)? {
        Ok(f) if f.is_empty() => Claim::Confirm,
        // Two inserts of the key race: both step back.
        Ok(_) => Claim::Defer(Deferral::Busy),
        Err(Deferral::Torn) => Claim::Again { torn: true },
        Err(d) => Claim::Defer(d),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dmkv_api::race_layout::{HEADER_SUFFIX_SHIFT, LINE};
    use dmkv_api::rpc_race::CombinedAt;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};
    use verbs::mem::{AccessFlags, MemoryTable, Region};

    const BASE: u64 = 0x4000_0000;
    const LEN: usize = 8192;
    /// Where the two combined buckets and the blocks live.
    const B0: u64 = BASE;
    const B1: u64 = BASE + 192;
    const BLOCKS: u64 = BASE + 4096;

    fn memory() -> (MemoryTable, u32) {
        let table = MemoryTable::new();
        let region = Region::anonymous(LEN).expect("region");
        let info = table
            .register(std::sync::Arc::new(region), BASE, AccessFlags::ALL)
            .expect("register");
        // Headers of depth 1, suffix 1 in the four buckets.
        for va in [B0, B0 + 64, B1, B1 + 64] {
            let h: u64 = 1 | (1 << HEADER_SUFFIX_SHIFT);
            table
                .write(info.rkey, va, &h.to_le_bytes())
                .expect("header");
        }
        (table, info.rkey)
    }

    fn block(key: &[u8], value: &[u8]) -> Vec<u8> {
        dmkv_api::race_layout::encode_block(key, value).expect("fits")
    }

    /// Write a block for (key, value) at block index `i` and return its slot word.
    fn put_block(mem: &MemoryTable, rkey: u32, i: u64, fp: u8, key: &[u8], value: &[u8]) -> u64 {
        let b = block(key, value);
        let offset = BLOCKS - BASE + i * 256;
        mem.write(rkey, BASE + offset, &b).expect("block");
        (u64::from(fp) << 56) | (((b.len() / LINE) as u64) << 48) | (1 << 40) | offset
    }

    fn request(kind: RaceKind, rkey: u32, key: &[u8], word: u64) -> RaceRequest<'_> {
        RaceRequest {
            kind,
            fingerprint: 0x77,
            pointer_memnode: 1,
            rkey,
            base_va: BASE,
            suffix: 0xffff_ff01,
            word,
            buckets: [
                Some(CombinedAt {
                    va: B0,
                    main_first: true,
                }),
                Some(CombinedAt {
                    va: B1 + 64,
                    main_first: false,
                }),
            ],
            key,
        }
    }

    fn run(req: &RaceRequest<'_>, mem: &MemoryTable) -> RaceOutcome {
        execute(req, mem, &AtomicBool::new(false)).expect("executes")
    }

    fn slot_word(mem: &MemoryTable, rkey: u32, va: u64) -> u64 {
        let mut b = [0u8; 8];
        mem.read(rkey, va, &mut b).expect("read");
        u64::from_le_bytes(b)
    }

    #[test]
    fn insert_search_update_delete() {
        let (mem, rkey) = memory();
        let k = b"alpha";
        assert_eq!(
            run(&request(RaceKind::Search, rkey, k, 0), &mem),
            RaceOutcome::Absent
        );
        let w1 = put_block(&mem, rkey, 0, 0x77, k, b"one");
        assert_eq!(
            run(&request(RaceKind::Insert, rkey, k, w1), &mem),
            RaceOutcome::Done(0)
        );
        // The first empty slot of the first combined bucket, main first.
        assert_eq!(slot_word(&mem, rkey, B0 + 8), w1);
        assert_eq!(
            run(&request(RaceKind::Search, rkey, k, 0), &mem),
            RaceOutcome::Found(b"one".to_vec())
        );
        assert_eq!(
            run(&request(RaceKind::Insert, rkey, k, w1 + 256), &mem),
            RaceOutcome::Exists
        );
        let w2 = put_block(&mem, rkey, 1, 0x77, k, b"two");
        assert_eq!(
            run(&request(RaceKind::Update, rkey, k, w2), &mem),
            RaceOutcome::Done(w1)
        );
        assert_eq!(
            run(&request(RaceKind::Search, rkey, k, 0), &mem),
            RaceOutcome::Found(b"two".to_vec())
        );
        assert_eq!(
            run(&request(RaceKind::Delete, rkey, k, 0), &mem),
            RaceOutcome::Done(w2)
        );
        assert_eq!(
            run(&request(RaceKind::Update, rkey, k, w2), &mem),
            RaceOutcome::NotFound
        );
        assert_eq!(
            run(&request(RaceKind::Delete, rkey, k, 0), &mem),
            RaceOutcome::NotFound
        );
        let w3 = put_block(&mem, rkey, 2, 0x77, k, b"three");
        assert_eq!(
            run(&request(RaceKind::Put, rkey, k, w3), &mem),
            RaceOutcome::Done(0)
        );
        let w4 = put_block(&mem, rkey, 3, 0x77, k, b"four");
        assert_eq!(
            run(&request(RaceKind::Put, rkey, k, w4), &mem),
            RaceOutcome::Done(w3)
        );
    }

    #[test]
    fn a_fingerprint_collision_is_told_apart_by_the_key() {
        let (mem, rkey) = memory();
        let other = put_block(&mem, rkey, 0, 0x77, b"other", b"x");
        mem.compare_swap(rkey, B0 + 8, 0, other).expect("cas");
        assert_eq!(
            run(&request(RaceKind::Search, rkey, b"alpha", 0), &mem),
            RaceOutcome::Absent
        );
        let w = put_block(&mem, rkey, 1, 0x77, b"alpha", b"a");
        assert_eq!(
            run(&request(RaceKind::Insert, rkey, b"alpha", w), &mem),
            RaceOutcome::Done(0)
        );
        // The second combined bucket has more free slots: its main bucket's first.
        assert_eq!(slot_word(&mem, rkey, B1 + 136), w);
        assert_eq!(
            run(&request(RaceKind::Search, rkey, b"alpha", 0), &mem),
            RaceOutcome::Found(b"a".to_vec())
        );
    }

    #[test]
    fn what_the_node_does_not_handle_is_handed_back_unchanged() {
        let (mem, rkey) = memory();
        let w = put_block(&mem, rkey, 0, 0x77, b"alpha", b"a");
        // Stale directory cache: the key's suffix is not the buckets'.
        let mut stale = request(RaceKind::Insert, rkey, b"alpha", w);
        stale.suffix = 0x10;
        assert_eq!(run(&stale, &mem), RaceOutcome::Deferred(Deferral::Stale));
        // Another client's unconfirmed insert of the key.
        mem.compare_swap(rkey, B1 + 72, 0, w | TENTATIVE)
            .expect("cas");
        let w2 = put_block(&mem, rkey, 1, 0x77, b"alpha", b"b");
        assert_eq!(
            run(&request(RaceKind::Insert, rkey, b"alpha", w2), &mem),
            RaceOutcome::Deferred(Deferral::Busy)
        );
        // ... which readers ignore.
        assert_eq!(
            run(&request(RaceKind::Search, rkey, b"alpha", 0), &mem),
            RaceOutcome::Absent
        );
        // A block on another node.
        let elsewhere = (w & !(0xff << 40)) | (2 << 40);
        mem.compare_swap(rkey, B1 + 72, w | TENTATIVE, elsewhere)
            .expect("cas");
        assert_eq!(
            run(&request(RaceKind::Search, rkey, b"alpha", 0), &mem),
            RaceOutcome::Deferred(Deferral::Elsewhere)
        );
        // Nothing of ours was written.
        assert_eq!(slot_word(&mem, rkey, B0 + 8), 0);
    }

    #[test]
    fn a_crash_after_the_tentative_cas_leaves_an_invisible_slot() {
        let (mem, rkey) = memory();
        let w = put_block(&mem, rkey, 0, 0x77, b"alpha", b"a");
        let crash = AtomicBool::new(true);
        let r = execute(&request(RaceKind::Insert, rkey, b"alpha", w), &mem, &crash);
        assert_eq!(r, Err(Stop::Crashed));
        assert_eq!(slot_word(&mem, rkey, B0 + 8), w | TENTATIVE);
        assert_eq!(
            run(&request(RaceKind::Search, rkey, b"alpha", 0), &mem),
            RaceOutcome::Absent,
            "the unconfirmed insert is not visible"
        );
    }

    #[test]
    fn refused_memory_refuses_the_request() {
        let (mem, rkey) = memory();
        let mut r = request(RaceKind::Search, rkey, b"alpha", 0);
        r.buckets[0] = Some(CombinedAt {
            va: BASE + LEN as u64 - 64,
            main_first: true,
        });
        assert!(matches!(
            execute(&r, &mem, &AtomicBool::new(false)),
            Err(Stop::Access(_))
        ));
        let r = request(RaceKind::Search, rkey ^ 1, b"alpha", 0);
        assert!(matches!(
            execute(&r, &mem, &AtomicBool::new(false)),
            Err(Stop::Access(AccessError::UnknownRkey(_)))
        ));
    }

    proptest! {
        #![proptest_config(Config {
            cases: 256,
            rng_seed: RngSeed::Fixed(0x5ace),
            failure_persistence: None,
            ..Config::default()
        })]

        /// Arbitrary requests over arbitrary bucket contents never panic and never
        /// change memory outside the slot words of the buckets they name.
        #[test]
        fn arbitrary_requests_touch_only_their_slots(
            words in proptest::collection::vec(any::<u64>(), 32),
            kind in 0u8..5,
            fp: u8,
            memnode in 0u8..3,
            suffix: u32,
            word: u64,
            va0 in 0u64..(LEN as u64 + 512),
            va1 in 0u64..(LEN as u64 + 512),
            main_first: bool,
            key in proptest::collection::vec(any::<u8>(), 1..8),
        ) {
            let (mem, rkey) = memory();
            for (i, w) in words.iter().enumerate() {
                // Keep half the words small so that some name blocks in the region.
                let w = if i % 2 == 0 { *w } else { w & 0xff07_0300_0000_1fc3 };
                mem.write(rkey, BASE + 8 * i as u64, &w.to_le_bytes()).expect("fill");
            }
            let mut before = vec![0u8; LEN];
            mem.read(rkey, BASE, &mut before).expect("snapshot");
            let kind = RaceKind::from_code(kind).expect("kind");
            let req = RaceRequest {
                kind,
                fingerprint: fp,
                pointer_memnode: memnode,
                rkey,
                base_va: BASE,
                suffix,
                word: if kind.installs() { word | 1 << 48 } else { 0 },
                buckets: [
                    Some(CombinedAt { va: BASE + (va0 & !7), main_first }),
                    Some(CombinedAt { va: BASE + (va1 & !7), main_first: !main_first }),
                ],
                key: &key,
            };
            let _ = execute(&req, &mem, &AtomicBool::new(false));
            let mut after = vec![0u8; LEN];
            mem.read(rkey, BASE, &mut after).expect("snapshot");
            let slot_bytes = |va: u64, off: usize| {
                [va, va + 64].iter().any(|&b| {
                    let rel = (b - BASE) as usize;
                    off >= rel + 8 && off < rel + 64
                })
            };
            for (off, (a, b)) in before.iter().zip(&after).enumerate() {
                if a != b {
                    let named = req.buckets.iter().flatten().any(|c| slot_bytes(c.va, off));
                    prop_assert!(named, "byte {off:#x} changed outside the named slots");
                }
            }
        }
    }
}
