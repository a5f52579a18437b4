//! The latch schemes on in-process memory: every scheme reads back what it wrote
//! with the round trips its documentation promises, refused combinations are
//! refused, and a latch held by a dead client is recovered by its lease.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kvstore::latch_schemes::{Area, IoOptions, Layout, SlotIo, SyncScheme, latch};
use kvstore::{KvError, OpStats};
use kvstore::{Level, Placement, Readers, SchemeError, SchemeSpec};
use verbs::mem::{AccessFlags, MemoryTable, ReadOrder, Region};
use verbs::transport::local::DirectTransport;
use verbs::worker::{Worker, WorkerConfig};
use verbs::wr::RemoteAddr;

struct Fixture {
    worker: Worker,
    io: SlotIo,
    region: Arc<Region>,
    base: u64,
}

fn fixture(layout: &Layout, slots: u64, lease: Duration) -> Fixture {
    let bytes = layout.area_bytes(slots).max(64);
    let region = Arc::new(Region::anonymous(bytes as usize).unwrap());
    region.set_read_order(ReadOrder::Random);
    let table = MemoryTable::new();
    let base = 0x1000_0000;
    let info = table
        .register(region.clone(), base, AccessFlags::ALL)
        .unwrap();
    let mut t = DirectTransport::local();
    let h = t.connect(Arc::new(table));
    let worker = Worker::new(Box::new(t), WorkerConfig::default());
    let area = Area::with_slots(RemoteAddr::new(info.rkey, info.base_va), slots, layout);
    let io = SlotIo::new(
        worker.qp(h),
        area,
        IoOptions {
            lease,
            give_up_after: lease * 4 + Duration::from_millis(500),
            ..IoOptions::default()
        },
    );
    Fixture {
        worker,
        io,
        region,
        base,
    }
}

fn every_scheme() -> Vec<SchemeSpec> {
    let mut v = SchemeSpec::catalog(true);
    for readers in [Readers::Shared, Readers::Exclusive] {
        for level in Level::ALL {
            for placement in [Placement::Embedded, Placement::Padded, Placement::Separate] {
                for write_unlatch in [false, true] {
                    let s = SchemeSpec::Pessimistic {
                        readers,
                        level,
                        write_unlatch,
                        placement,
                    };
                    if s.validate().is_ok() {
                        v.push(s);
                    }
                }
            }
        }
    }
    for name in [
        "versioning-cas-unlatch",
        "crc-cas-unlatch",
        "farm-consistent-cas-unlatch",
    ] {
        v.push(name.parse().unwrap());
    }
    v
}

/// Round trips (read, write) of an uncontended operation.
fn expected_round_trips(s: &SchemeSpec) -> (u64, u64) {
    match s {
        SchemeSpec::Pessimistic {
            level,
            write_unlatch,
            ..
        } => match (level, write_unlatch) {
            (Level::Basic, false) => (3, 4),
            (Level::Basic, true) => (3, 3),
            (Level::SpeculativeRead, false) => (2, 3),
            (Level::SpeculativeRead, true) => (2, 2),
            (Level::WriteCombining, _) => (2, 2),
            (Level::AsyncUnlatch, _) => (1, 1),
        },
        SchemeSpec::Versioning { .. } => (3, 2),
        SchemeSpec::Crc { validate, .. } | SchemeSpec::Farm { validate, .. } => {
            (if *validate { 2 } else { 1 }, 2)
        }
        SchemeSpec::Bookend(_) => (1, 2),
        SchemeSpec::SwitchOptimistic => (1, 3),
    }
}

#[test]
fn every_scheme_reads_what_it_wrote_in_its_round_trips() {
    for spec in every_scheme() {
        for payload in [8usize, 100, 248, 1000] {
            let scheme: Rc<dyn SyncScheme> = spec.build(payload).unwrap();
            let layout = *scheme.layout();
            assert_eq!(layout.payload, payload);
            assert_eq!(layout.tuple % 64, 0, "{spec}");
            let f = fixture(&layout, 4, Duration::from_millis(200));
            let io = &f.io;
            f.worker.block_on(async {
                for slot in 0..4u64 {
                    let mut st = OpStats::default();
                    let zeros = scheme.read(io, slot, &mut st).await.unwrap();
                    assert_eq!(zeros, vec![0; payload], "{spec}: fresh slot reads zeros");
                    let data: Vec<u8> =
                        (0..payload).map(|i| (i as u64 * 31 + slot) as u8).collect();
                    let mut seen = Vec::new();
                    let mut st = OpStats::default();
                    let d = data.clone();
                    let wrote = scheme
                        .write(
                            io,
                            slot,
                            &mut |cur: &[u8]| {
                                seen = cur.to_vec();
                                Some(d.clone())
                            },
                            &mut st,
                        )
                        .await
                        .unwrap();
                    assert!(wrote);
                    assert_eq!(seen, vec![0; payload], "{spec}: writer saw the old payload");
                    let (r_rtt, w_rtt) = expected_round_trips(&spec);
                    assert_eq!(st.round_trips, w_rtt, "{spec}: write round trips");
                    let mut st = OpStats::default();
                    let back = scheme.read(io, slot, &mut st).await.unwrap();
                    assert_eq!(back, data, "{spec} slot {slot} payload {payload}");
                    assert_eq!(st.round_trips, r_rtt, "{spec}: read round trips");
                    // A writer that decides not to write leaves the tuple as it was.
                    let mut st = OpStats::default();
                    let wrote = scheme
                        .write(io, slot, &mut |_: &[u8]| None, &mut st)
                        .await
                        .unwrap();
                    assert!(!wrote);
                }
                io.flush().await;
                // Every latch is free afterwards (and 0: nothing was ever broken).
                for slot in 0..4u64 {
                    let at = io.latch_addr(&layout, slot).unwrap();
                    let w = f.region.load_word(at.va - f.base).unwrap();
                    assert_eq!(w, 0, "{spec}: latch of slot {slot} left {w:#x}");
                }
            });
            assert_eq!(f.io.async_stats().errors, 0);
        }
    }
}

#[test]
fn write_unlatch_refuses_shared_faa_readers() {
    let bad = SchemeSpec::Pessimistic {
        readers: Readers::Shared,
        level: Level::WriteCombining,
        write_unlatch: true,
        placement: Placement::Embedded,
    };
    assert_eq!(
        bad.validate(),
        Err(SchemeError::WriteUnlatchWithSharedReaders)
    );
    assert!(matches!(
        bad.build(64),
        Err(SchemeError::WriteUnlatchWithSharedReaders)
    ));
    for name in [
        "pessimistic-rw-wu",
        "pessimistic-wu-async",
        "pessimistic-rw-basic-wu-padded",
    ] {
        let e = name.parse::<SchemeSpec>().unwrap_err();
        assert_eq!(e, SchemeError::WriteUnlatchWithSharedReaders, "{name}");
        assert!(e.to_string().contains("FAA"), "{e}");
        assert!(matches!(KvError::from(e), KvError::InvalidArgument(_)));
    }
    assert!("pessimistic-x-wu".parse::<SchemeSpec>().is_ok());
}

#[test]
fn placements_move_latches_apart() {
    let at = |placement| {
        let s = SchemeSpec::Pessimistic {
            readers: Readers::Shared,
            level: Level::Basic,
            write_unlatch: false,
            placement,
        };
        let scheme = s.build(4096 - 8).unwrap();
        let f = fixture(scheme.layout(), 8, Duration::from_millis(100));
        (0..8u64)
            .map(|i| f.io.latch_addr(scheme.layout(), i).unwrap().va & 0xFFF)
            .collect::<Vec<_>>()
    };
    let embedded = at(Placement::Embedded);
    assert!(embedded.iter().all(|&v| v == embedded[0]), "{embedded:?}");
    for p in [Placement::Padded, Placement::Separate] {
        let v = at(p);
        let mut d = v.clone();
        d.sort_unstable();
        d.dedup();
        assert_eq!(d.len(), v.len(), "{p:?}: {v:?}");
    }
}

/// A client that died holding a latch: its word stays; the next writer and reader
/// break it after the lease and proceed.
#[test]
fn latches_of_dead_clients_are_recovered_after_the_lease() {
    let lease = Duration::from_millis(60);
    for spec in every_scheme() {
        let scheme = spec.build(200).unwrap();
        let layout = *scheme.layout();
        let f = fixture(&layout, 2, lease);
        let io = &f.io;
        let latch_va = io.latch_addr(&layout, 0).unwrap().va - f.base;
        // Dead exclusive holder (another owner token).
        f.region
            .store_word(latch_va, latch::exclusive(0x0dead))
            .unwrap();
        let started = Instant::now();
        f.worker.block_on(async {
            let mut st = OpStats::default();
            let data = vec![7u8; 200];
            let d = data.clone();
            scheme
                .write(io, 0, &mut |_: &[u8]| Some(d.clone()), &mut st)
                .await
                .unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert!(started.elapsed() >= lease, "{spec}: broke the latch early");
            let got = scheme.read(io, 0, &mut st).await.unwrap();
            assert_eq!(got, data, "{spec}");
            io.flush().await;
        });
        // A dead shared reader (pessimistic reader/writer latch only).
        if let SchemeSpec::Pessimistic {
            readers: Readers::Shared,
            ..
        } = spec
        {
            f.region.store_word(latch_va, latch::READER).unwrap();
            let started = Instant::now();
            f.worker.block_on(async {
                let mut st = OpStats::default();
                scheme
                    .write(io, 0, &mut |_: &[u8]| Some(vec![9u8; 200]), &mut st)
                    .await
                    .unwrap_or_else(|e| panic!("{spec}: {e}"));
                io.flush().await;
            });
            assert!(started.elapsed() >= lease);
        }
        // Free again: no holder, no readers, and not torn (a whole tuple was written
        // after the break); the break left a generation of its own.
        let w = f.region.load_word(latch_va).unwrap();
        assert!(latch::is_free(w) && !latch::is_torn(w), "{spec}: {w:#x}");
    }
}

/// A writer latches, half of its WRITE lands (lines in ascending order, as a WRITE
/// lands), and it dies. After the lease every scheme reports the tuple `Corrupt`
/// instead of serving the mix as valid; a complete write repairs it.
#[test]
fn a_dead_writers_partial_write_is_never_served_as_valid() {
    let lease = Duration::from_millis(60);
    let payload = 512usize;
    for spec in every_scheme() {
        if spec.is_unsafe() {
            continue;
        }
        let scheme = spec.build(payload).unwrap();
        let layout = *scheme.layout();
        let old = vec![0x11u8; payload];
        let new = vec![0x22u8; payload];
        // The tuple image a complete write of `new` over `old` leaves, from a scratch copy.
        let scratch = fixture(&layout, 1, lease);
        let tuple_at = |f: &Fixture| f.io.tuple_addr(&layout, 0).unwrap().va - f.base;
        let latch_at = |f: &Fixture| f.io.latch_addr(&layout, 0).unwrap().va - f.base;
        scratch.worker.block_on(async {
            let mut st = OpStats::default();
            for v in [&old, &new] {
                let v = v.clone();
                scheme
                    .write(&scratch.io, 0, &mut |_: &[u8]| Some(v.clone()), &mut st)
                    .await
                    .unwrap();
            }
            scratch.io.flush().await;
        });
        let mut image = vec![0u8; layout.tuple as usize];
        scratch.region.read(tuple_at(&scratch), &mut image).unwrap();

        let f = fixture(&layout, 1, lease);
        f.worker.block_on(async {
            let mut st = OpStats::default();
            let v = old.clone();
            scheme
                .write(&f.io, 0, &mut |_: &[u8]| Some(v.clone()), &mut st)
                .await
                .unwrap();
            f.io.flush().await;
        });
        // The dead writer: its latch, then the first half of its tuple's lines.
        let (t, l) = (tuple_at(&f), latch_at(&f));
        f.region.store_word(l, latch::exclusive(0x0dead)).unwrap();
        let half = (layout.tuple as usize / 2).div_ceil(64) * 64;
        for line in (0..half).step_by(64) {
            for at in (line..line + 64).step_by(8) {
                let in_latch = t + at as u64 == l;
                if !in_latch {
                    let w = u64::from_le_bytes(image[at..at + 8].try_into().unwrap());
                    f.region.store_word(t + at as u64, w).unwrap();
                }
            }
        }
        f.worker.block_on(async {
            let mut st = OpStats::default();
            match scheme.read(&f.io, 0, &mut st).await {
                Err(KvError::Corrupt(msg)) => {
                    assert!(msg.message().contains("slot 0"), "{spec}: {msg}")
                }
                Ok(got) => panic!(
                    "{spec}: served a value after a dead writer's partial write ({} new bytes)",
                    got.iter().filter(|&&b| b == 0x22).count()
                ),
                Err(e) => panic!("{spec}: {e}"),
            }
            // A complete write makes the tuple whole and readable again.
            let v = new.clone();
            scheme
                .write(&f.io, 0, &mut |_: &[u8]| Some(v.clone()), &mut st)
                .await
                .unwrap_or_else(|e| panic!("{spec}: repairing write: {e}"));
            f.io.flush().await;
            let got = scheme.read(&f.io, 0, &mut st).await.unwrap();
            assert_eq!(got, new, "{spec}");
            f.io.flush().await;
        });
        let w = f.region.load_word(l).unwrap();
        assert!(latch::is_free(w) && !latch::is_torn(w), "{spec}: {w:#x}");
    }
}
