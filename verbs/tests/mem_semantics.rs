//! Memory semantics of `verbs::mem`: access checks, atomics, per-line
//! atomicity, the torn multi-line read pitfall, shared-memory regions across
//! processes, the NIC lock table model, and a model-based property test.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use verbs::mem::{
    AccessError, AccessFlags, LineGap, MemoryTable, NicLockTable, ReadOrder, Region, RegionError,
    RemoteMemory,
};

const ORDERS: [ReadOrder; 3] = [
    ReadOrder::Ascending,
    ReadOrder::Descending,
    ReadOrder::Random,
];

fn region(len: usize) -> Arc<Region> {
    Arc::new(Region::anonymous(len).unwrap())
}

// ---------------------------------------------------------------- 1. checks

#[test]
fn every_operation_checks_rkey_rights_bounds_and_alignment() {
    let t = MemoryTable::new();
    let base = 0x1_0000;
    let all = t.register(region(256), base, AccessFlags::ALL).unwrap();
    let ro = t
        .register(region(64), 0x2_0000, AccessFlags::REMOTE_READ)
        .unwrap();
    let wo = t
        .register(region(64), 0x3_0000, AccessFlags::REMOTE_WRITE)
        .unwrap();
    let at = t
        .register(region(64), 0x4_0000, AccessFlags::REMOTE_ATOMIC)
        .unwrap();
    let bad = [all.rkey, ro.rkey, wo.rkey, at.rkey]
        .iter()
        .fold(1u32, |k, r| k.wrapping_add(*r) | 1);
    let mut buf = [0u8; 16];

    // Unknown rkey, for every operation.
    let unknown = Some(AccessError::UnknownRkey(bad));
    assert_eq!(t.read(bad, base, &mut buf).err(), unknown);
    assert_eq!(t.write(bad, base, &buf).err(), unknown);
    assert_eq!(t.compare_swap(bad, base, 0, 1).err(), unknown);
    assert_eq!(t.fetch_add(bad, base, 1).err(), unknown);
    assert_eq!(
        t.check(bad, base, 1, AccessFlags::REMOTE_READ).err(),
        unknown
    );
    assert!(
        t.read(bad, base, &mut buf)
            .unwrap_err()
            .is_remote_access_error()
    );

    // Rights.
    let denied = |needed| Some(AccessError::AccessDenied { needed });
    assert_eq!(
        t.write(ro.rkey, 0x2_0000, &buf).err(),
        denied(AccessFlags::REMOTE_WRITE)
    );
    assert_eq!(
        t.fetch_add(ro.rkey, 0x2_0000, 1).err(),
        denied(AccessFlags::REMOTE_ATOMIC)
    );
    assert_eq!(
        t.read(wo.rkey, 0x3_0000, &mut buf).err(),
        denied(AccessFlags::REMOTE_READ)
    );
    assert_eq!(
        t.compare_swap(wo.rkey, 0x3_0000, 0, 1).err(),
        denied(AccessFlags::REMOTE_ATOMIC)
    );
    assert_eq!(
        t.read(at.rkey, 0x4_0000, &mut buf).err(),
        denied(AccessFlags::REMOTE_READ)
    );
    assert_eq!(
        t.write(at.rkey, 0x4_0000, &buf).err(),
        denied(AccessFlags::REMOTE_WRITE)
    );
    assert_eq!(
        t.check(
            ro.rkey,
            0x2_0000,
            8,
            AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE
        )
        .err(),
        denied(AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE)
    );
    assert!(t.read(ro.rkey, 0x2_0000, &mut buf).is_ok());
    assert!(t.write(wo.rkey, 0x3_0000, &buf).is_ok());
    assert_eq!(t.fetch_add(at.rkey, 0x4_0000, 1), Ok(0));

    // Bounds: below the base, past the end, straddling the end, u64 overflow.
    let oob = |va, len| Some(AccessError::OutOfBounds { va, len });
    let end = base + 256;
    for (va, len) in [
        (base - 1, 1),
        (base - 8, 16),
        (end, 1),
        (end - 8, 16),
        (end + 64, 0),
        (u64::MAX, 1),
        (u64::MAX - 7, 16),
        (base, u64::MAX),
        (end - 1, u64::MAX),
    ] {
        assert_eq!(
            t.check(all.rkey, va, len, AccessFlags::REMOTE_READ).err(),
            oob(va, len)
        );
    }
    assert_eq!(t.read(all.rkey, end - 8, &mut buf).err(), oob(end - 8, 16));
    assert_eq!(t.write(all.rkey, end - 8, &buf).err(), oob(end - 8, 16));
    assert_eq!(
        t.read(all.rkey, u64::MAX, &mut buf[..1]).err(),
        oob(u64::MAX, 1)
    );
    assert_eq!(
        t.write(all.rkey, u64::MAX - 15, &buf).err(),
        oob(u64::MAX - 15, 16)
    );
    for va in [end, end - 4, u64::MAX - 7, u64::MAX, base - 8] {
        assert_eq!(t.compare_swap(all.rkey, va, 0, 1).err(), oob(va, 8));
        assert_eq!(t.fetch_add(all.rkey, va, 1).err(), oob(va, 8));
    }
    // Zero-length accesses are valid anywhere inside and at the end.
    for va in [base, base + 13, end] {
        assert_eq!(t.read(all.rkey, va, &mut []), Ok(()));
        assert_eq!(t.write(all.rkey, va, &[]), Ok(()));
        assert_eq!(t.check(all.rkey, va, 0, AccessFlags::REMOTE_WRITE), Ok(()));
    }
    assert_eq!(t.read(all.rkey, end + 1, &mut []).err(), oob(end + 1, 0));

    // Alignment of atomics: NAK invalid request, not remote access error.
    for va in [base + 1, base + 4, base + 7, end - 9] {
        let e = t.fetch_add(all.rkey, va, 1).unwrap_err();
        assert_eq!(e, AccessError::Misaligned { va });
        assert!(e.is_invalid_request());
        assert_eq!(
            t.compare_swap(all.rkey, va, 0, 1),
            Err(AccessError::Misaligned { va })
        );
        assert_eq!(
            t.check(all.rkey, va, 8, AccessFlags::REMOTE_ATOMIC),
            Err(AccessError::Misaligned { va })
        );
    }
    // Unaligned reads and writes are fine.
    assert!(t.write(all.rkey, base + 3, &buf).is_ok());
    assert!(
        t.check(all.rkey, base + 3, 8, AccessFlags::REMOTE_READ)
            .is_ok()
    );

    // Nothing above touched the region except the two successful accesses.
    let r = t.region(all.rkey).unwrap();
    let mut image = vec![0u8; 256];
    r.read(0, &mut image).unwrap();
    assert!(image.iter().all(|&b| b == 0));
}

#[test]
fn hammering_the_edges_of_one_region_never_touches_its_neighbour() {
    let t = MemoryTable::new();
    let a_base = 0x10_0000;
    let a_region = region(256);
    let a = t
        .register(a_region.clone(), a_base, AccessFlags::ALL)
        .unwrap();
    let b_region = region(256);
    let b = t
        .register(b_region.clone(), a_base + 256, AccessFlags::ALL)
        .unwrap();
    b_region.write(0, &[0x5A; 256]).unwrap();
    let mut model = vec![0u8; 256];
    let mut rng = SmallRng::seed_from_u64(0xED6E);
    for _ in 0..20_000 {
        // Addresses around both edges of A (and inside B), using A's rkey.
        let edge = if rng.random_bool(0.5) {
            a_base
        } else {
            a_base + 256
        };
        let va = edge.wrapping_add_signed(rng.random_range(-80i64..80));
        let len = rng.random_range(0..100usize);
        let inside = va >= a_base && va - a_base + len as u64 <= 256;
        let off = va.wrapping_sub(a_base) as usize;
        match rng.random_range(0..4) {
            0 => {
                let data: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                let r = t.write(a.rkey, va, &data);
                assert_eq!(r.is_ok(), inside, "write {va:#x}+{len}");
                if inside {
                    model[off..off + len].copy_from_slice(&data);
                }
            }
            1 => {
                let mut buf = vec![0u8; len];
                let r = t.read(a.rkey, va, &mut buf);
                assert_eq!(r.is_ok(), inside);
                if inside {
                    assert_eq!(buf, model[off..off + len]);
                }
            }
            2 => {
                let va = va & !7;
                let off = va.wrapping_sub(a_base) as usize;
                let ok = va >= a_base && off + 8 <= 256;
                let r = t.fetch_add(a.rkey, va, 3);
                assert_eq!(r.is_ok(), ok);
                if ok {
                    let old = u64::from_le_bytes(model[off..off + 8].try_into().unwrap());
                    assert_eq!(r.unwrap(), old);
                    model[off..off + 8].copy_from_slice(&old.wrapping_add(3).to_le_bytes());
                }
            }
            _ => {
                let va = va & !7;
                let off = va.wrapping_sub(a_base) as usize;
                let ok = va >= a_base && off + 8 <= 256;
                let r = t.compare_swap(a.rkey, va, 0, u64::MAX);
                assert_eq!(r.is_ok(), ok);
                if ok && r.unwrap() == 0 {
                    model[off..off + 8].copy_from_slice(&u64::MAX.to_le_bytes());
                }
            }
        }
    }
    let mut image = vec![0u8; 256];
    a_region.read(0, &mut image).unwrap();
    assert_eq!(image, model);
    t.read(b.rkey, a_base + 256, &mut image).unwrap();
    assert!(image.iter().all(|&x| x == 0x5A), "neighbour region changed");
}

// --------------------------------------------------------------- 2. atomics

#[test]
fn concurrent_fetch_add_sums_exactly() {
    let t = Arc::new(MemoryTable::new());
    let info = t.register(region(64), 0x1000, AccessFlags::ALL).unwrap();
    let (threads, per) = (4u64, 20_000u64);
    let start = Arc::new(std::sync::Barrier::new(threads as usize));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (t, start) = (t.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                for _ in 0..per {
                    t.fetch_add(info.rkey, 0x1000 + 8, i + 1).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let expect = per * (1..=threads).sum::<u64>();
    assert_eq!(t.fetch_add(info.rkey, 0x1008, 0).unwrap(), expect);
    // Neighbouring words untouched.
    assert_eq!(t.fetch_add(info.rkey, 0x1000, 0).unwrap(), 0);
    assert_eq!(t.fetch_add(info.rkey, 0x1010, 0).unwrap(), 0);
}

#[test]
fn concurrent_cas_increment_loops_reach_the_total() {
    let t: Arc<dyn RemoteMemory> = {
        let t = MemoryTable::new();
        let info = t.register(region(128), 0, AccessFlags::ALL).unwrap();
        assert_eq!(info.base_va, 0);
        RKEY.store(u64::from(info.rkey), Ordering::Relaxed);
        Arc::new(t)
    };
    static RKEY: AtomicU64 = AtomicU64::new(0);
    let rkey = RKEY.load(Ordering::Relaxed) as u32;
    let (threads, per) = (3, 20_000u64);
    let failed = Arc::new(AtomicU64::new(0));
    let start = Arc::new(std::sync::Barrier::new(threads as usize));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (t, failed, start) = (t.clone(), failed.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                for _ in 0..per {
                    let mut cur = t.read_word(rkey, 64);
                    loop {
                        let seen = t.compare_swap(rkey, 64, cur, cur + 1).unwrap();
                        if seen == cur {
                            break;
                        }
                        failed.fetch_add(1, Ordering::Relaxed);
                        cur = seen;
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(t.read_word(rkey, 64), threads * per);
    eprintln!("cas retries: {}", failed.load(Ordering::Relaxed));
}

trait ReadWord {
    fn read_word(&self, rkey: u32, va: u64) -> u64;
}

impl<T: RemoteMemory + ?Sized> ReadWord for T {
    fn read_word(&self, rkey: u32, va: u64) -> u64 {
        let mut b = [0u8; 8];
        self.read(rkey, va, &mut b).unwrap();
        u64::from_le_bytes(b)
    }
}

// ------------------------------------------------------ 3. line atomicity

/// Fills `lines` 64-byte lines with `version` in every word.
fn block(version: u64, lines: usize) -> Vec<u8> {
    version.to_le_bytes().repeat(lines * 8)
}

/// The version of every line of `buf` that starts at line-aligned offset
/// `offset`; panics (test failure) if a line is torn. Partial lines at
/// either end are checked for the bytes present.
fn line_versions(offset: u64, buf: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < buf.len() {
        let abs = offset + pos as u64;
        let line_end = (abs / 64 + 1) * 64;
        let n = ((line_end - abs) as usize).min(buf.len() - pos);
        let bytes = &buf[pos..pos + n];
        // Reconstruct the version from the byte at each position's lane.
        let lane = |i: usize| ((abs as usize) + i) % 8;
        let mut v = [0u8; 8];
        let mut seen = [false; 8];
        for (i, &b) in bytes.iter().enumerate() {
            if seen[lane(i)] {
                assert_eq!(v[lane(i)], b, "torn line at {abs:#x}: {bytes:?}");
            } else {
                v[lane(i)] = b;
                seen[lane(i)] = true;
            }
        }
        out.push(u64::from_le_bytes(v));
        pos += n;
    }
    out
}

#[test]
fn lines_are_never_torn_in_any_read_order() {
    const LINES: usize = 4;
    let r = region(64 * LINES);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let (r, stop) = (r.clone(), stop.clone());
            thread::spawn(move || {
                let mut v = w << 56;
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    v += 1;
                    r.write(0, &block(v, LINES)).unwrap();
                    n += 1;
                    // Leave the readers some CPU on a 2-core machine.
                    if n.is_multiple_of(16) {
                        thread::yield_now();
                    }
                }
                n
            })
        })
        .collect();
    let mut rng = SmallRng::seed_from_u64(3);
    let mut reads = 0u64;
    let deadline = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < deadline && reads < 30_000 {
        // Alternate a widened and a plain window between lines.
        r.set_line_gap(if reads.is_multiple_of(4) {
            LineGap::Yield
        } else {
            LineGap::None
        });
        for order in ORDERS {
            // Whole block, and an unaligned slice of it.
            let mut buf = [0u8; 64 * LINES];
            r.read_with_order(0, &mut buf, order).unwrap();
            line_versions(0, &buf);
            let off = rng.random_range(0..64 * LINES as u64 - 1);
            let len = rng.random_range(1..=(64 * LINES as u64 - off) as usize);
            r.read_with_order(off, &mut buf[..len], order).unwrap();
            line_versions(off, &buf[..len]);
            reads += 2;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let writes: u64 = writers.into_iter().map(|h| h.join().unwrap()).sum();
    eprintln!("{reads} reads against {writes} block writes, no torn line");
    assert!(writes > 0 && reads > 0);
}

#[test]
fn partial_word_writes_and_atomics_on_one_line_serialize() {
    // Word 0 of the line is a counter; a writer keeps rewriting bytes 6..64
    // (so the top two bytes of the counter word are read-modify-written).
    // No FAA may be lost and no line may be torn.
    let r = region(64);
    let per = 20_000u64;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (r, stop) = (r.clone(), stop.clone());
        thread::spawn(move || {
            let mut v = 0u8;
            while !stop.load(Ordering::Relaxed) {
                v = v.wrapping_add(1);
                r.write(6, &[v; 58]).unwrap();
            }
        })
    };
    let adders: Vec<_> = (0..2)
        .map(|_| {
            let r = r.clone();
            thread::spawn(move || {
                for _ in 0..per {
                    r.fetch_add(0, 1).unwrap();
                }
            })
        })
        .collect();
    let mut line = [0u8; 64];
    for _ in 0..20_000 {
        r.read(0, &mut line).unwrap();
        assert!(line[6..].iter().all(|&b| b == line[6]), "torn: {line:?}");
    }
    for h in adders {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(r.load_word(0).unwrap() & 0xFFFF_FFFF_FFFF, 2 * per);
}

// ------------------------------------------------ 4. the torn-read pitfall

/// Runs one ascending writer that writes 4-line blocks of increasing
/// versions, and reads the block with `order` until `done` (given the
/// per-line versions of each read) says so, or 2 s / 10^6 reads pass.
/// Returns the number of reads.
///
/// The line gap is tuned as the test goes, so that a write lands between
/// two line reads about half of the time whatever the speed and load of
/// the machine (debug or release build, idle or busy cores): reads that
/// saw one version widen the gap, reads that saw three or more narrow it.
fn observe(order: ReadOrder, mut done: impl FnMut(&[u64]) -> bool) -> u64 {
    const LINES: usize = 4;
    let r = region(64 * LINES);
    r.set_read_order(order);
    let mut spin = 16u32;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (r, stop) = (r.clone(), stop.clone());
        thread::spawn(move || {
            let mut v = 0;
            while !stop.load(Ordering::Relaxed) {
                v += 1;
                r.write(0, &block(v, LINES)).unwrap();
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut reads = 0u64;
    let mut buf = [0u8; 64 * LINES];
    while reads < 1_000_000 && Instant::now() < deadline {
        r.set_line_gap(LineGap::Spin(spin));
        r.read(0, &mut buf).unwrap();
        reads += 1;
        let v = line_versions(0, &buf);
        let mut distinct = v.clone();
        distinct.dedup();
        match distinct.len() {
            1 => spin = (spin + spin / 2 + 1).min(1 << 16),
            2 => {}
            _ => spin = (spin - spin / 3).max(1),
        }
        if done(&v) {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    reads
}

/// An undetected torn read for a head/tail version scheme: first and last
/// line agree, some line in between does not.
fn undetected_tear(v: &[u64]) -> bool {
    v.first() == v.last() && v.iter().any(|x| Some(x) != v.first())
}

#[test]
fn random_read_order_reproduces_torn_multiline_reads() {
    let (mut mixed, mut undetected) = (0u64, 0u64);
    let reads = observe(ReadOrder::Random, |v| {
        if v.iter().any(|x| *x != v[0]) {
            mixed += 1;
        }
        if undetected_tear(v) {
            undetected += 1;
        }
        mixed >= 200 && undetected >= 20
    });
    eprintln!("random order: {reads} reads, {mixed} mixed, {undetected} undetected by head/tail");
    assert!(mixed >= 1, "no mixed read in {reads} reads");
    assert!(undetected >= 1, "no undetected tear in {reads} reads");
}

#[test]
fn descending_reads_against_ascending_writes_are_detectable() {
    // Reading lines high-to-low while the writer writes low-to-high, the
    // versions seen are non-increasing by address, so a matching first and
    // last line prove the whole block consistent. This is the property a
    // head/tail version check relies on; random order breaks it (above).
    let mut mixed = 0u64;
    let reads = observe(ReadOrder::Descending, |v| {
        assert!(
            v.windows(2).all(|w| w[0] >= w[1]),
            "not non-increasing: {v:?}"
        );
        assert!(!undetected_tear(v), "{v:?}");
        mixed += u64::from(v[0] != v[3]);
        mixed >= 500
    });
    eprintln!("descending order: {reads} reads, {mixed} mixed (all detectable)");
    assert!(mixed >= 1, "writer never overlapped a read");
}

#[test]
fn ascending_reads_see_lines_at_most_one_write_behind() {
    // Reading low-to-high behind a low-to-high writer: a later line can be
    // newer by any amount (the writer overtook the reader) or older by at
    // most one write (the reader overtook the writer), so tears are
    // possible — e.g. [v, v+1, v+1, v] is undetected by head/tail — but a
    // later line is never two or more writes older.
    let (mut newer, mut older) = (0u64, 0u64);
    let reads = observe(ReadOrder::Ascending, |v| {
        for i in 0..v.len() {
            for j in i + 1..v.len() {
                assert!(
                    v[j] + 1 >= v[i],
                    "line {j} two writes behind line {i}: {v:?}"
                );
            }
        }
        newer += u64::from(v[3] > v[0]);
        older += u64::from(v[3] < v[0]);
        newer >= 50
    });
    eprintln!("ascending order: {reads} reads, {newer} with newer tail, {older} with older tail");
    assert!(newer >= 1, "writer never overtook the reader");
}

// ------------------------------------------------------------------ 5. shm

#[test]
fn shm_file_region_is_shared_between_mappings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("region");
    let a = Region::create_file(&path, 1000).unwrap();
    assert_eq!(a.len(), 1024);
    let b = Region::open_file(&path).unwrap();
    assert_eq!(b.len(), 1024);
    a.write(100, b"hello").unwrap();
    let mut buf = [0u8; 5];
    b.read(100, &mut buf).unwrap();
    assert_eq!(&buf, b"hello");
    assert_eq!(b.fetch_add(8, 5).unwrap(), 0);
    assert_eq!(a.compare_swap(8, 5, 9).unwrap(), 5);
    assert_eq!(b.load_word(8).unwrap(), 9);
    // The read order lives in the shared header; the line gap does not.
    a.set_read_order(ReadOrder::Random);
    assert_eq!(b.read_order(), ReadOrder::Random);
    a.set_line_gap(LineGap::Yield);
    assert_eq!(b.line_gap(), LineGap::None);
    drop(a);
    drop(b);
    let c = Region::open_file(&path).unwrap();
    assert_eq!(c.load_word(8).unwrap(), 9);
    assert_eq!(c.read_order(), ReadOrder::Random);

    // Concurrent atomics and line writes through two mappings.
    let a = Arc::new(Region::create_file(&path, 4096).unwrap());
    let b = Arc::new(Region::open_file(&path).unwrap());
    let handles: Vec<_> = [a.clone(), b.clone()]
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            thread::spawn(move || {
                for k in 0..5_000u64 {
                    r.fetch_add(0, 1).unwrap();
                    r.write(64, &block((i as u64) << 32 | k, 2)).unwrap();
                    let mut buf = [0u8; 128];
                    r.read(64, &mut buf).unwrap();
                    line_versions(64, &buf);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(a.load_word(0).unwrap(), 10_000);
}

const CHILD_ENV: &str = "DMKV_MEM_SHM_CHILD";
const CHILD_OPS: u64 = 20_000;
// Word offsets used by the two-process test.
const FAA_OFF: u64 = 0;
const CAS_OFF: u64 = 8;
const READY_OFF: u64 = 16;
const BLOCK_OFF: u64 = 64;
const BLOCK_LINES: usize = 3;

/// The work both processes do concurrently on the shared region.
fn shm_worker(r: &Region, tag: u64) {
    // Barrier: both processes announce themselves, then wait for the other.
    r.fetch_add(READY_OFF, 1).unwrap();
    let start = Instant::now();
    while r.load_word(READY_OFF).unwrap() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "peer never arrived"
        );
        thread::yield_now();
    }
    let mut buf = [0u8; 64 * BLOCK_LINES];
    for k in 0..CHILD_OPS {
        r.fetch_add(FAA_OFF, 1).unwrap();
        let mut cur = r.load_word(CAS_OFF).unwrap();
        loop {
            let seen = r.compare_swap(CAS_OFF, cur, cur + 1).unwrap();
            if seen == cur {
                break;
            }
            cur = seen;
        }
        if k % 4 == 0 {
            r.write(BLOCK_OFF, &block(tag << 32 | k, BLOCK_LINES))
                .unwrap();
        } else {
            r.read(BLOCK_OFF, &mut buf).unwrap();
            line_versions(BLOCK_OFF, &buf);
        }
    }
}

/// Child half of `shm_two_processes_share_atomics_and_lines`; does nothing
/// unless started by it.
#[test]
#[ignore = "run by shm_two_processes_share_atomics_and_lines as a child process"]
fn shm_child_worker() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let r = Region::open_file(std::path::Path::new(&path)).unwrap();
    r.set_read_order(ReadOrder::Random);
    shm_worker(&r, 2);
}

#[test]
fn shm_two_processes_share_atomics_and_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared");
    let r = Region::create_file(&path, 4096).unwrap();
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "shm_child_worker",
            "--exact",
            "--ignored",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    shm_worker(&r, 1);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("1 passed"), "child did not run: {stdout}");
    assert_eq!(r.load_word(FAA_OFF).unwrap(), 2 * CHILD_OPS);
    assert_eq!(r.load_word(CAS_OFF).unwrap(), 2 * CHILD_OPS);
    // The child switched the shared read order.
    assert_eq!(r.read_order(), ReadOrder::Random);
}

#[test]
fn shm_open_rejects_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);

    assert!(matches!(
        Region::open_file(&p("missing")),
        Err(RegionError::Io { .. })
    ));
    std::fs::write(p("empty"), b"").unwrap();
    assert!(matches!(
        Region::open_file(&p("empty")),
        Err(RegionError::Truncated { actual: 0, .. })
    ));
    std::fs::write(p("garbage"), vec![0xA5u8; 8192]).unwrap();
    let e = Region::open_file(&p("garbage")).unwrap_err();
    assert!(matches!(e, RegionError::BadMagic { .. }), "{e}");
    assert!(e.to_string().contains("not a dmkv region file"), "{e}");

    // A valid file, then damaged copies of it.
    Region::create_file(&p("good"), 4096).unwrap();
    let good = std::fs::read(p("good")).unwrap();
    let damaged = |name: &str, f: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = good.clone();
        f(&mut bytes);
        std::fs::write(p(name), bytes).unwrap();
        Region::open_file(&p(name)).unwrap_err()
    };
    let e = damaged("short", &|b| b.truncate(b.len() - 64));
    assert!(matches!(e, RegionError::Truncated { .. }), "{e}");
    let e = damaged("version", &|b| b[8] = 99);
    assert!(
        matches!(e, RegionError::UnsupportedVersion { found: 99, .. }),
        "{e}"
    );
    let e = damaged("len", &|b| b[16] = 65);
    assert!(matches!(e, RegionError::CorruptHeader { .. }), "{e}");
    let e = damaged("order", &|b| b[24] = 7);
    assert!(matches!(e, RegionError::CorruptHeader { .. }), "{e}");
    let e = damaged("header-only", &|b| b.truncate(64));
    assert!(matches!(e, RegionError::Truncated { .. }), "{e}");
    assert!(Region::open_file(&p("good")).is_ok());
    // Creating over an existing file replaces it.
    let r = Region::create_file(&p("garbage"), 64).unwrap();
    assert_eq!(r.len(), 64);
    assert!(Region::open_file(&p("garbage")).is_ok());
}

#[test]
fn hugepages_fail_cleanly_or_work() {
    match Region::anonymous_hugepages(100) {
        Ok(r) => {
            assert_eq!(r.len(), 128);
            r.write(0, &[1; 128]).unwrap();
        }
        Err(e) => {
            assert!(matches!(e, RegionError::HugePagesUnavailable { .. }), "{e}");
            assert!(e.to_string().contains("huge pages"));
        }
    }
    assert!(matches!(Region::anonymous(0), Err(RegionError::Empty)));
}

// ------------------------------------------------------------ 6. lock table

/// Thread A holds the slot of `va_a` inside an atomic until thread B has
/// tried an atomic at `va_b` (or 300 ms passed). Returns whether B finished
/// while A was still inside, and the table's stats.
fn contend(va_a: u64, va_b: u64) -> (bool, verbs::mem::NicLockStats) {
    let table = Arc::new(NicLockTable::new(Duration::ZERO));
    let inside = Arc::new(AtomicBool::new(false));
    let b_done = Arc::new(AtomicBool::new(false));
    let a = {
        let (table, inside, b_done) = (table.clone(), inside.clone(), b_done.clone());
        thread::spawn(move || {
            table.with_slot(va_a, || {
                inside.store(true, Ordering::SeqCst);
                let start = Instant::now();
                while !b_done.load(Ordering::SeqCst) && start.elapsed() < Duration::from_millis(300)
                {
                    thread::yield_now();
                }
                b_done.load(Ordering::SeqCst)
            })
        })
    };
    while !inside.load(Ordering::SeqCst) {
        thread::yield_now();
    }
    table.with_slot(va_b, || ());
    b_done.store(true, Ordering::SeqCst);
    let b_finished_first = a.join().unwrap();
    (b_finished_first, table.stats())
}

#[test]
fn lock_table_serializes_4k_aliases_only() {
    // 4096 apart: same slot, B must wait for A.
    let (overlapped, stats) = contend(0x10_0000, 0x10_1000);
    assert!(!overlapped);
    assert_eq!(stats.acquisitions, 2);
    assert_eq!(stats.collisions, 1);
    // 8 apart in one page: different slots, B completes while A holds.
    let (overlapped, stats) = contend(0x10_0000, 0x10_0008);
    assert!(overlapped);
    assert_eq!(stats.collisions, 0);
}

#[test]
fn lock_table_counts_collisions_of_aliased_latches_under_load() {
    // Two threads FAA their own private counter; the NIC holds each slot for
    // 20 us. With counters 4 KiB apart every atomic shares one slot; 8 bytes
    // apart they never do. `until_collision` keeps the threads going (up to
    // 2 s) until they have overlapped at least once, which a loaded 2-core
    // machine may otherwise delay past the first few hundred operations.
    let run = |stride: u64, until_collision: bool| {
        let t = Arc::new(
            MemoryTable::new().with_lock_table(NicLockTable::new(Duration::from_micros(20))),
        );
        let info = t
            .register(region(8192), 0x40_0000, AccessFlags::ALL)
            .unwrap();
        let per = 300u64;
        let start = Arc::new(std::sync::Barrier::new(2));
        let deadline = Instant::now() + Duration::from_secs(2);
        let handles: Vec<_> = (0..2u64)
            .map(|i| {
                let (t, start) = (t.clone(), start.clone());
                thread::spawn(move || {
                    start.wait();
                    let mut n = 0u64;
                    loop {
                        let collided = t.lock_table().unwrap().stats().collisions > 0;
                        if n >= per && (!until_collision || collided || Instant::now() > deadline) {
                            return n;
                        }
                        t.fetch_add(info.rkey, 0x40_0000 + i * stride, 1).unwrap();
                        n += 1;
                    }
                })
            })
            .collect();
        let counts: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        for (i, n) in counts.iter().enumerate() {
            let mut b = [0u8; 8];
            t.read(info.rkey, 0x40_0000 + i as u64 * stride, &mut b)
                .unwrap();
            assert_eq!(u64::from_le_bytes(b), *n);
        }
        let stats = t.lock_table().unwrap().stats();
        assert_eq!(stats.acquisitions, counts.iter().sum::<u64>());
        stats
    };
    let aliased = run(4096, true);
    let spread = run(8, false);
    eprintln!("4 KiB stride: {aliased:?}; 8 B stride: {spread:?}");
    assert!(aliased.collisions > 0, "{aliased:?}");
    assert_eq!(spread.acquisitions, 600);
    assert_eq!(spread.collisions, 0, "{spread:?}");
}

// ------------------------------------------------------------- 7. proptest

#[derive(Debug, Clone)]
enum Op {
    Write(u64, Vec<u8>),
    Read(u64, usize, u8),
    Cas(u64, u64, u64),
    Faa(u64, u64),
    Store(u64, u64),
}

fn op(len: u64) -> impl Strategy<Value = Op> {
    let off = prop_oneof![0..len + 16, Just(u64::MAX), (u64::MAX - 16)..=u64::MAX];
    let word = prop_oneof![
        (0..len / 8 + 2).prop_map(|w| w * 8),
        0..len + 16,
        Just(u64::MAX - 7)
    ];
    prop_oneof![
        (off.clone(), prop::collection::vec(any::<u8>(), 0..200))
            .prop_map(|(o, d)| Op::Write(o, d)),
        (off, 0..200usize, 0..3u8).prop_map(|(o, n, ord)| Op::Read(o, n, ord)),
        (
            word.clone(),
            prop_oneof![Just(0u64), any::<u64>()],
            any::<u64>()
        )
            .prop_map(|(o, c, s)| Op::Cas(o, c, s)),
        (word.clone(), any::<u64>()).prop_map(|(o, a)| Op::Faa(o, a)),
        (word, any::<u64>()).prop_map(|(o, v)| Op::Store(o, v)),
    ]
}

fn model_range(model: &[u8], off: u64, n: usize) -> Option<std::ops::Range<usize>> {
    let end = off.checked_add(n as u64)?;
    (end <= model.len() as u64).then_some(off as usize..end as usize)
}

fn model_word(model: &[u8], off: u64) -> Result<std::ops::Range<usize>, AccessError> {
    let r = model_range(model, off, 8).ok_or(AccessError::OutOfBounds { va: off, len: 8 })?;
    if !off.is_multiple_of(8) {
        return Err(AccessError::Misaligned { va: off });
    }
    Ok(r)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x6D656D),
        ..ProptestConfig::default()
    })]

    #[test]
    fn region_matches_byte_vector_model(
        lines in 1u64..6,
        ops in (1u64..6).prop_flat_map(|l| prop::collection::vec(op(l * 64), 1..60)),
    ) {
        let r = Region::anonymous((lines * 64) as usize).unwrap();
        let mut model = vec![0u8; (lines * 64) as usize];
        for op in ops {
            match op {
                Op::Write(o, d) => {
                    let res = r.write(o, &d);
                    match model_range(&model, o, d.len()) {
                        Some(rg) => { prop_assert_eq!(res, Ok(())); model[rg].copy_from_slice(&d); }
                        None => prop_assert_eq!(res, Err(AccessError::OutOfBounds { va: o, len: d.len() as u64 })),
                    }
                }
                Op::Read(o, n, ord) => {
                    let mut buf = vec![0xEEu8; n];
                    let res = r.read_with_order(o, &mut buf, ORDERS[ord as usize]);
                    match model_range(&model, o, n) {
                        Some(rg) => { prop_assert_eq!(res, Ok(())); prop_assert_eq!(&buf[..], &model[rg]); }
                        None => {
                            prop_assert_eq!(res, Err(AccessError::OutOfBounds { va: o, len: n as u64 }));
                            prop_assert!(buf.iter().all(|&b| b == 0xEE));
                        }
                    }
                }
                Op::Cas(o, c, s) => {
                    let res = r.compare_swap(o, c, s);
                    match model_word(&model, o) {
                        Ok(rg) => {
                            let old = u64::from_le_bytes(model[rg.clone()].try_into().unwrap());
                            prop_assert_eq!(res, Ok(old));
                            if old == c { model[rg].copy_from_slice(&s.to_le_bytes()); }
                        }
                        Err(e) => prop_assert_eq!(res, Err(e)),
                    }
                }
                Op::Faa(o, a) => {
                    let res = r.fetch_add(o, a);
                    match model_word(&model, o) {
                        Ok(rg) => {
                            let old = u64::from_le_bytes(model[rg.clone()].try_into().unwrap());
                            prop_assert_eq!(res, Ok(old));
                            model[rg].copy_from_slice(&old.wrapping_add(a).to_le_bytes());
                        }
                        Err(e) => prop_assert_eq!(res, Err(e)),
                    }
                }
                Op::Store(o, v) => {
                    let res = r.store_word(o, v);
                    match model_word(&model, o) {
                        Ok(rg) => { prop_assert_eq!(res, Ok(())); model[rg].copy_from_slice(&v.to_le_bytes()); }
                        Err(e) => prop_assert_eq!(res, Err(e)),
                    }
                }
            }
        }
        let mut image = vec![0u8; model.len()];
        r.read(0, &mut image).unwrap();
        prop_assert_eq!(image, model);
    }

    #[test]
    fn arbitrary_remote_requests_never_panic(
        reqs in prop::collection::vec(
            (any::<bool>(), any::<u32>(), prop_oneof![any::<u64>(), 0x8000u64..0x8200],
             prop_oneof![any::<u64>(), 0u64..300], 0..5u8, any::<u8>()),
            1..40,
        ),
    ) {
        let t = MemoryTable::new();
        let info = t
            .register(region(256), 0x8000, AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC)
            .unwrap();
        for (known, rkey, va, len, kind, flag_bits) in reqs {
            let rkey = if known { info.rkey } else { rkey };
            let small = (len % 300) as usize;
            let in_bounds = |n: u64| {
                va.checked_sub(0x8000).and_then(|o| o.checked_add(n)).is_some_and(|e| e <= 256)
            };
            let res = match kind {
                0 => t.read(rkey, va, &mut vec![0u8; small]).map(|_| 0),
                1 => t.write(rkey, va, &vec![1u8; small]).map(|_| 0),
                2 => t.compare_swap(rkey, va, len, 1),
                3 => t.fetch_add(rkey, va, len),
                _ => {
                    let needed = AccessFlags::from_bits(flag_bits & 0xF).unwrap();
                    t.check(rkey, va, len, needed).map(|_| 0)
                }
            };
            if rkey != info.rkey {
                prop_assert_eq!(res, Err(AccessError::UnknownRkey(rkey)));
                continue;
            }
            match kind {
                0 => prop_assert_eq!(res.is_ok(), in_bounds(small as u64)),
                1 => prop_assert_eq!(res, Err(AccessError::AccessDenied { needed: AccessFlags::REMOTE_WRITE })),
                2 | 3 => prop_assert_eq!(res.is_ok(), in_bounds(8) && va.is_multiple_of(8)),
                _ => {}
            }
        }
    }
}
