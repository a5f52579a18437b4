//! In-place reads and writes next to memory ([`dmkv_api::rpc_inplace`]): one tuple of
//! an in-place table under its pessimistic latch, with the protocol the one-sided
//! clients of the scheme run (`kvstore::inplace::pessimistic`), on the region's own
//! atomics, so one-sided and RPC clients of one table stay linearizable together.
//!
//! * Shared read: FAA `+1 reader`; when the word was held exclusively, FAA `−1 reader`
//!   and try again; READ the payload; release by CAS while the word still counts the
//!   read (a count broken meanwhile: read again).
//! * Exclusive-only read, and every write: CAS the free word to the client's owner
//!   word (the first try expects 0, then the free word seen), READ the payload,
//!   (write: decide as the client's table does — insert, update, put, delete of the
//!   request's key — and WRITE the new payload), release by CAS to the free word it
//!   latched over (torn bit cleared when the whole payload was written), keeping
//!   reader counts readers left while they backed off.
//!
//! A latch held by someone else is tried [`ATTEMPTS`] times with a short backoff,
//! then the request is handed back (`deferred: contended`, nothing changed): the
//! client goes one-sided, where the lease rules break a latch of a dead holder. The
//! node itself never breaks a latch.
//!
//! Every address is checked against the queue pair's access scope before the latch
//! is taken, so a refused request changes nothing. A worker never returns with a
//! latch it took still held, except when the crash hook stops it (as a thread dying
//! there would): then the latch word carries the client's owner word and one-sided
//! clients break it after the lease like a dead client's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dmkv_api::inplace_tuple::{self, TupleView};
use dmkv_api::latch_word::{self, COUNT, HOLDER, READER};
use dmkv_api::rpc_inplace::{
    InPlaceKind, InPlaceRead, InPlaceWrite, ReadOutcome, TupleAt, WriteOutcome,
};
use dmkv_api::rpc_race::Deferral;
use verbs::mem::{AccessError, AccessFlags, RemoteMemory};

use super::race::Stop;

/// Tries of a latch held by someone else before the request is handed back.
pub const ATTEMPTS: u32 = 8;

/// Rounds a release may take when readers keep changing the word.
const RELEASE_ROUNDS: u32 = 1 << 16;

fn backoff(attempt: u32) {
    std::thread::sleep(Duration::from_micros(2u64 << attempt.min(8)));
}

/// Checks every access a request makes before any is made.
fn check(at: &TupleAt, memory: &dyn RemoteMemory, write: bool) -> Result<(), AccessError> {
    memory.check(at.rkey, at.latch_va, 8, AccessFlags::REMOTE_ATOMIC)?;
    memory.check(
        at.rkey,
        at.data_va,
        u64::from(at.payload),
        AccessFlags::REMOTE_READ,
    )?;
    if write {
        memory.check(
            at.rkey,
            at.data_va,
            u64::from(at.payload),
            AccessFlags::REMOTE_WRITE,
        )?;
    }
    Ok(())
}

/// Latch `at` exclusively with its owner word: the free word latched over, or
/// `None` after [`ATTEMPTS`] tries of a held latch.
fn acquire(at: &TupleAt, memory: &dyn RemoteMemory) -> Result<Option<u64>, AccessError> {
    let mut expected = 0u64;
    let mut tries = 0u32;
    loop {
        let old = memory.compare_swap(at.rkey, at.latch_va, expected, at.owner)?;
        if old == expected {
            return Ok(Some(expected));
        }
        tries += 1;
        if tries >= 2 * ATTEMPTS {
            return Ok(None);
        }
        if latch_word::is_free(old) {
            // Free, of another generation: latch over that word at once.
            expected = old;
            continue;
        }
        backoff(tries);
    }
}

/// Release the exclusive latch `at.owner` to `restore`, keeping reader counts.
/// False when the latch was broken while held.
fn release(at: &TupleAt, memory: &dyn RemoteMemory, restore: u64) -> Result<bool, AccessError> {
    let mut old = memory.compare_swap(at.rkey, at.latch_va, at.owner, restore)?;
    for _ in 0..RELEASE_ROUNDS {
        if old == at.owner {
            return Ok(true);
        }
        if old & HOLDER != at.owner {
            return Ok(false);
        }
        let next = (old & COUNT) | restore;
        let seen = memory.compare_swap(at.rkey, at.latch_va, old, next)?;
        if seen == old {
            return Ok(true);
        }
        old = seen;
    }
    Ok(false)
}

/// Release a shared count taken when the FAA returned `acquired`; false when the
/// count was broken meanwhile (then the word is left alone).
fn release_shared(
    at: &TupleAt,
    memory: &dyn RemoteMemory,
    acquired: u64,
) -> Result<bool, AccessError> {
    let mut expected = acquired.wrapping_add(READER);
    for _ in 0..RELEASE_ROUNDS {
        if !latch_word::still_counted(acquired, expected) {
            return Ok(false);
        }
        let next = expected.wrapping_sub(READER);
        let seen = memory.compare_swap(at.rkey, at.latch_va, expected, next)?;
        if seen == expected {
            return Ok(true);
        }
        expected = seen;
    }
    Ok(false)
}

/// Execute an in-place read against `memory`.
pub fn read(r: &InPlaceRead, memory: &dyn RemoteMemory) -> Result<ReadOutcome, AccessError> {
    let at = &r.at;
    check(at, memory, false)?;
    let mut buf = vec![0u8; at.payload as usize];
    if !r.shared {
        let Some(over) = acquire(at, memory)? else {
            return Ok(ReadOutcome::Deferred(Deferral::Contended));
        };
        let read = memory.read(at.rkey, at.data_va, &mut buf);
        release(at, memory, latch_word::released(over, false))?;
        read?;
        return Ok(if latch_word::is_torn(over) {
            ReadOutcome::Torn
        } else {
            ReadOutcome::Payload(buf)
        });
    }
    for attempt in 0..ATTEMPTS {
        let acquired = memory.fetch_add(at.rkey, at.latch_va, READER)?;
        if latch_word::is_exclusive(acquired) {
            memory.fetch_add(at.rkey, at.latch_va, READER.wrapping_neg())?;
            backoff(attempt);
            continue;
        }
        let read = memory.read(at.rkey, at.data_va, &mut buf);
        let counted = release_shared(at, memory, acquired)?;
        read?;
        if latch_word::is_torn(acquired) {
            return Ok(ReadOutcome::Torn);
        }
        if counted {
            return Ok(ReadOutcome::Payload(buf));
        }
        // Our count was broken while we read: a writer may have written; again.
    }
    Ok(ReadOutcome::Deferred(Deferral::Contended))
}

/// What the write of `w` does to the payload `cur` (the client table's decision):
/// the outcome, and the new payload to write if any.
fn decide(w: &InPlaceWrite<'_>, cur: &[u8]) -> (WriteOutcome, Option<Vec<u8>>) {
    let payload = w.at.payload as usize;
    let live = match inplace_tuple::view(cur, inplace_tuple::value_cap(payload)) {
        Err(_) => return (WriteOutcome::Corrupt, None),
        Ok(TupleView::Live(k, _) | TupleView::Dead(k)) if k != w.key => {
            return (WriteOutcome::OtherKey, None);
        }
        Ok(v) => matches!(v, TupleView::Live(..)),
    };
    let value = match (w.kind, live) {
        (InPlaceKind::Put, _) | (InPlaceKind::Insert, false) | (InPlaceKind::Update, true) => {
            Some(w.value)
        }
        (InPlaceKind::Delete, true) => None,
        (InPlaceKind::Insert, true) => return (WriteOutcome::Exists, None),
        (InPlaceKind::Update | InPlaceKind::Delete, false) => {
            return (WriteOutcome::NotFound, None);
        }
    };
    match inplace_tuple::encode(payload, w.key, value) {
        Some(p) => (WriteOutcome::Written, Some(p)),
        None => (WriteOutcome::Corrupt, None),
    }
}

/// Execute an in-place write against `memory`. `crash`, when set, is cleared and
/// stops execution right after the payload's WRITE, with the latch still held (a
/// test hook: a worker that dies between its write and its unlatch).
pub fn write(
    w: &InPlaceWrite<'_>,
    memory: &dyn RemoteMemory,
    crash: &AtomicBool,
) -> Result<WriteOutcome, Stop> {
    let at = &w.at;
    check(at, memory, true)?;
    let Some(over) = acquire(at, memory)? else {
        return Ok(WriteOutcome::Deferred(Deferral::Contended));
    };
    let mut cur = vec![0u8; at.payload as usize];
    if let Err(e) = memory.read(at.rkey, at.data_va, &mut cur) {
        release(at, memory, latch_word::released(over, false))?;
        return Err(Stop::Access(e));
    }
    let (outcome, new) = decide(w, &cur);
    let Some(new) = new else {
        release(at, memory, latch_word::released(over, false))?;
        return Ok(outcome);
    };
    if let Err(e) = memory.write(at.rkey, at.data_va, &new) {
        release(at, memory, latch_word::released(over, false))?;
        return Err(Stop::Access(e));
    }
    if crash.swap(false, Ordering::SeqCst) {
        return Err(Stop::Crashed);
    }
    // The whole payload is written: a torn tuple is whole again.
    if release(at, memory, latch_word::released(over, true))? {
        Ok(outcome)
    } else {
        Ok(WriteOutcome::LatchLost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dmkv_api::latch_word::{TORN, exclusive, generation_of};
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};
    use verbs::mem::{MemoryTable, Region};

    const BASE: u64 = 0x3000_0000;
    const LEN: usize = 4096;
    const PAYLOAD: u32 = 200;

    fn memory() -> (MemoryTable, u32) {
        let table = MemoryTable::new();
        let region = Region::anonymous(LEN).expect("region");
        let info = table
            .register(std::sync::Arc::new(region), BASE, AccessFlags::ALL)
            .expect("register");
        (table, info.rkey)
    }

    fn snapshot(mem: &MemoryTable, rkey: u32) -> Vec<u8> {
        let mut all = vec![0u8; LEN];
        mem.read(rkey, BASE, &mut all).expect("read");
        all
    }

    fn at(rkey: u32, owner: u64) -> TupleAt {
        TupleAt {
            rkey,
            latch_va: BASE + 64,
            data_va: BASE + 72,
            payload: PAYLOAD,
            owner,
        }
    }

    fn word(mem: &MemoryTable, rkey: u32) -> u64 {
        mem.fetch_add(rkey, BASE + 64, 0).expect("word")
    }

    fn put<'a>(rkey: u32, kind: InPlaceKind, key: &'a [u8], value: &'a [u8]) -> InPlaceWrite<'a> {
        InPlaceWrite {
            kind,
            at: at(rkey, exclusive(0x1_0001)),
            key,
            value,
        }
    }

    fn read_payload(mem: &MemoryTable, rkey: u32, shared: bool) -> ReadOutcome {
        let owner = if shared { 0 } else { exclusive(0x2_0002) };
        read(
            &InPlaceRead {
                shared,
                at: at(rkey, owner),
            },
            mem,
        )
        .expect("read")
    }

    fn value_of(o: &ReadOutcome) -> Option<Vec<u8>> {
        let ReadOutcome::Payload(p) = o else {
            return None;
        };
        match inplace_tuple::view(p, inplace_tuple::value_cap(PAYLOAD as usize)) {
            Ok(TupleView::Live(_, v)) => Some(v.to_vec()),
            _ => None,
        }
    }

    #[test]
    fn writes_decide_as_the_table_does_and_reads_see_them() {
        let (mem, rkey) = memory();
        let no = AtomicBool::new(false);
        let w = |kind, value: &'static [u8]| {
            write(&put(rkey, kind, b"k", value), &mem, &no).map_err(|_| ())
        };
        assert_eq!(w(InPlaceKind::Update, b"x"), Ok(WriteOutcome::NotFound));
        assert_eq!(w(InPlaceKind::Delete, b""), Ok(WriteOutcome::NotFound));
        assert_eq!(w(InPlaceKind::Insert, b"one"), Ok(WriteOutcome::Written));
        assert_eq!(w(InPlaceKind::Insert, b"two"), Ok(WriteOutcome::Exists));
        for shared in [true, false] {
            assert_eq!(
                value_of(&read_payload(&mem, rkey, shared)),
                Some(b"one".to_vec())
            );
        }
        assert_eq!(w(InPlaceKind::Update, b"three"), Ok(WriteOutcome::Written));
        assert_eq!(w(InPlaceKind::Put, b"four"), Ok(WriteOutcome::Written));
        assert_eq!(
            value_of(&read_payload(&mem, rkey, true)),
            Some(b"four".to_vec())
        );
        assert_eq!(w(InPlaceKind::Delete, b""), Ok(WriteOutcome::Written));
        assert_eq!(value_of(&read_payload(&mem, rkey, true)), None);
        assert_eq!(w(InPlaceKind::Insert, b"five"), Ok(WriteOutcome::Written));
        // Another key's tuple is left alone.
        let other = write(&put(rkey, InPlaceKind::Put, b"z", b"v"), &mem, &no);
        assert!(matches!(other, Ok(WriteOutcome::OtherKey)));
        // Every latch was released: the word is free again.
        assert_eq!(word(&mem, rkey), 0);
    }

    #[test]
    fn a_held_latch_is_handed_back_with_memory_unchanged() {
        let (mem, rkey) = memory();
        let no = AtomicBool::new(false);
        mem.compare_swap(rkey, BASE + 64, 0, exclusive(77))
            .expect("latch");
        let before = snapshot(&mem, rkey);
        let out = write(&put(rkey, InPlaceKind::Put, b"k", b"v"), &mem, &no);
        assert!(matches!(
            out,
            Ok(WriteOutcome::Deferred(Deferral::Contended))
        ));
        for shared in [true, false] {
            assert_eq!(
                read_payload(&mem, rkey, shared),
                ReadOutcome::Deferred(Deferral::Contended)
            );
        }
        assert_eq!(snapshot(&mem, rkey), before);
    }

    #[test]
    fn broken_latches_are_latched_over_and_torn_tuples_say_so() {
        let (mem, rkey) = memory();
        let no = AtomicBool::new(false);
        // A broken exclusive holder left generation g and the torn bit.
        let g = generation_of(5);
        mem.compare_swap(rkey, BASE + 64, 0, g | TORN).expect("cas");
        assert_eq!(read_payload(&mem, rkey, true), ReadOutcome::Torn);
        assert_eq!(read_payload(&mem, rkey, false), ReadOutcome::Torn);
        assert_eq!(word(&mem, rkey), g | TORN, "reads leave the word");
        // A write makes it whole: same generation, torn bit cleared.
        let out = write(&put(rkey, InPlaceKind::Put, b"k", b"v"), &mem, &no);
        assert!(matches!(out, Ok(WriteOutcome::Written)));
        assert_eq!(word(&mem, rkey), g);
        assert_eq!(
            value_of(&read_payload(&mem, rkey, true)),
            Some(b"v".to_vec())
        );
    }

    #[test]
    fn reader_counts_left_by_backing_off_readers_are_kept() {
        let (mem, rkey) = memory();
        // A write that finds the latch free, but a reader bumps the count while
        // it holds it: emulate with a release from a word carrying one reader.
        let a = at(rkey, exclusive(9));
        mem.compare_swap(rkey, BASE + 64, 0, exclusive(9) + READER)
            .expect("cas");
        assert_eq!(release(&a, &mem, 0), Ok(true));
        assert_eq!(word(&mem, rkey), READER);
        // Another holder's word is not ours to release.
        mem.compare_swap(rkey, BASE + 64, READER, exclusive(10))
            .expect("cas");
        assert_eq!(release(&a, &mem, 0), Ok(false));
        assert_eq!(word(&mem, rkey), exclusive(10));
    }

    #[test]
    fn refused_requests_change_nothing() {
        let (mem, rkey) = memory();
        let no = AtomicBool::new(false);
        let before = snapshot(&mem, rkey);
        let mut w = put(rkey, InPlaceKind::Put, b"k", b"v");
        w.at.data_va = BASE + LEN as u64 - 8;
        assert!(matches!(
            write(&w, &mem, &no),
            Err(Stop::Access(AccessError::OutOfBounds { .. }))
        ));
        w.at.data_va = BASE + 72;
        w.at.rkey ^= 1;
        assert!(write(&w, &mem, &no).is_err());
        let r = InPlaceRead {
            shared: true,
            at: TupleAt {
                data_va: BASE + LEN as u64,
                ..at(rkey, 0)
            },
        };
        assert!(read(&r, &mem).is_err());
        assert_eq!(snapshot(&mem, rkey), before);
    }

    #[test]
    fn malformed_and_out_of_scope_requests_get_error_replies() {
        use dmkv_api::rpc::{Request, RpcStatus, parse_reply};
        let (mem, rkey) = memory();
        let before = snapshot(&mem, rkey);
        let mut w = put(rkey, InPlaceKind::Put, b"k", b"v");
        w.at.owner = 0;
        let (reply, outcome) =
            super::super::execute::serve(&Request::InPlaceWrite(w).encode(3), &mem);
        assert_eq!(outcome, super::super::execute::Outcome::Malformed);
        assert_eq!(
            parse_reply(&reply).expect("reply").status,
            RpcStatus::Malformed
        );
        let mut w = put(rkey, InPlaceKind::Put, b"k", b"v");
        w.at.latch_va = BASE + 8 * LEN as u64;
        let (reply, outcome) =
            super::super::execute::serve(&Request::InPlaceWrite(w).encode(4), &mem);
        assert_eq!(outcome, super::super::execute::Outcome::Refused);
        assert_eq!(
            parse_reply(&reply).expect("reply").status,
            RpcStatus::OutOfBounds
        );
        assert_eq!(snapshot(&mem, rkey), before);
    }

    #[test]
    fn a_crash_after_the_write_leaves_the_tuple_whole_and_the_owner_word() {
        let (mem, rkey) = memory();
        let crash = AtomicBool::new(true);
        let w = put(rkey, InPlaceKind::Put, b"k", b"new");
        assert!(matches!(write(&w, &mem, &crash), Err(Stop::Crashed)));
        assert!(!crash.load(Ordering::SeqCst));
        // The latch holds the client's own owner word, which one-sided clients
        // break after the lease; the payload is the whole new tuple.
        assert_eq!(word(&mem, rkey), w.at.owner);
        let mut p = vec![0u8; PAYLOAD as usize];
        mem.read(rkey, BASE + 72, &mut p).expect("read");
        assert_eq!(
            inplace_tuple::view(&p, inplace_tuple::value_cap(PAYLOAD as usize)),
            Ok(TupleView::Live(b"k", b"new"))
        );
    }

    proptest! {
        #![proptest_config(Config {
            cases: 128,
            rng_seed: RngSeed::Fixed(0x1a7c),
            failure_persistence: None,
            ..Config::default()
        })]

        /// Over arbitrary payload bytes and latch words, a write never panics, leaves
        /// the latch word as it found it (or released from its owner word) and
        /// changes the payload only when it answers written.
        #[test]
        fn arbitrary_tuples_and_latches(
            bytes in proptest::collection::vec(any::<u8>(), PAYLOAD as usize),
            latch in any::<u64>(),
            kind in 1u8..=4,
        ) {
            let (mem, rkey) = memory();
            let no = AtomicBool::new(false);
            mem.write(rkey, BASE + 72, &bytes).expect("write");
            mem.compare_swap(rkey, BASE + 64, 0, latch).expect("cas");
            let kind = InPlaceKind::from_code(kind).expect("kind");
            let value: &[u8] = if kind == InPlaceKind::Delete { b"" } else { b"v" };
            let out = write(&put(rkey, kind, b"k", value), &mem, &no).map_err(|_| ()).expect("in scope");
            let mut p = vec![0u8; PAYLOAD as usize];
            mem.read(rkey, BASE + 72, &mut p).expect("read");
            if out == WriteOutcome::Written {
                prop_assert!(latch_word::is_free(latch));
                prop_assert_eq!(word(&mem, rkey), latch_word::released(latch, true) | (latch & COUNT));
            } else {
                prop_assert_eq!(p, bytes);
                prop_assert_eq!(word(&mem, rkey), latch);
            }
        }
    }
}
