//! Memory handed back is reusable at the granularity it was handed back: sessions
//! that each lease a chunk, write a little and hand the chunk over to their table
//! never strand the rest; a request that cannot get a whole chunk gets the largest
//! free extent that holds its minimum; and what tables adopt stays a few records
//! (one per contiguous run), however many sessions wrote. A property test checks
//! random lease / adopt / free / expire / sweep / restart / drop sequences: leases
//! never overlap and bytes are conserved.

use std::sync::Arc;

use metadata::api::{
    CreateLeaseRequest, CreateTableRequest, IndexKind, RegionSpec, RegisterMemnodeRequest,
};
use metadata::catalog::{Catalog, CatalogConfig, CatalogError};
use metadata::scrub::RecordingScrubber;
use metadata::store::MemStore;
use proptest::prelude::*;

const MIB: u64 = 1 << 20;

fn register(c: &mut Catalog, i: u16, len: u64, now: u64) -> u64 {
    c.register_memnode(
        RegisterMemnodeRequest {
            name: format!("m{i}"),
            admin_url: format!("http://127.0.0.1:{}", 9000 + i),
            data_addr: format!("127.0.0.1:{}", 4000 + i),
            capacity: len,
            regions: vec![RegionSpec {
                rkey: 100 + u32::from(i),
                base_va: 0x1000_0000 * u64::from(i + 1),
                len,
                path: None,
                instance: 0,
            }],
            zone: None,
        },
        now,
    )
    .unwrap()
    .0
    .id
}

fn catalog(store: &MemStore, cfg: CatalogConfig, now: u64) -> Catalog {
    let mut c = Catalog::open(Box::new(store.clone()), cfg, now).unwrap();
    c.set_scrubber(Arc::new(RecordingScrubber::default()));
    c
}

fn config(chunk_size: u64) -> CatalogConfig {
    CatalogConfig {
        chunk_size,
        grace_ms: 500,
        heartbeat_timeout_ms: u64::MAX / 4,
        ..CatalogConfig::default()
    }
}

fn table_req(name: &str, index: IndexKind) -> CreateTableRequest {
    CreateTableRequest {
        name: name.into(),
        index,
        value_limit: 1024,
        memnodes: None,
        replication: None,
        update_mode: None,
        inplace: None,
    }
}

fn table(c: &mut Catalog, name: &str, index: IndexKind, now: u64) {
    c.create_table(table_req(name, index), now).unwrap();
}

fn data_lease(table: &str, bytes: u64, min: Option<u64>) -> CreateLeaseRequest {
    CreateLeaseRequest {
        client: "session".into(),
        bytes,
        min_bytes: min,
        ttl_ms: Some(1000),
        table: Some(table.into()),
        ..CreateLeaseRequest::default()
    }
}

fn free_bytes(c: &Catalog, now: u64) -> u64 {
    c.memnodes(now).iter().map(|n| n.free_bytes).sum()
}

#[test]
fn two_thousand_sessions_of_two_tables_fit_a_64_mib_memnode() {
    let store = MemStore::new();
    let now = 1_000_000;
    let mut c = catalog(&store, config(4 * MIB), now);
    register(&mut c, 1, 64 * MIB, now);
    table(&mut c, "c", IndexKind::Clover, now);
    table(&mut c, "r", IndexKind::Race, now);
    let start = free_bytes(&c, now);
    for i in 0..2000u64 {
        for (t, used) in [("c", 100), ("r", 130)] {
            let l = c
                .create_lease(data_lease(t, 4 * MIB, Some(192)), now + i)
                .unwrap_or_else(|e| panic!("session {i}, table {t}: {e}"));
            assert_eq!(l.va % 64, 0);
            let kept = c
                .adopt_lease(l.lease_id, Some(used), now + i)
                .unwrap()
                .unwrap();
            assert_eq!(kept.table.as_deref(), Some(t));
        }
        c.check_invariants().unwrap();
    }
    // 100 and 130 bytes kept as 128 and 192: 320 bytes a session, nothing else.
    assert_eq!(start - free_bytes(&c, now), 2000 * 320);
    for t in ["c", "r"] {
        let m = c.table(t).unwrap().memory;
        assert_eq!(m.adopted_leases, 1, "{t}: {m:?}");
        assert_eq!(m.client_leases, 0);
    }
    assert_eq!(c.table("c").unwrap().memory.adopted_bytes, 2000 * 128);
    assert_eq!(c.table("r").unwrap().memory.adopted_bytes, 2000 * 192);
    // The merged records survive a restart, and dropping the tables frees it all.
    drop(c);
    let mut c = catalog(&store, config(4 * MIB), now + 5000);
    c.check_invariants().unwrap();
    assert_eq!(
        c.table("r").unwrap().memory.table_owned_leases,
        2,
        "directory and one run"
    );
    c.drop_table("c", now + 5000).unwrap();
    c.drop_table("r", now + 5000).unwrap();
    assert_eq!(free_bytes(&c, now + 5000), 64 * MIB);
}

#[test]
fn a_request_that_cannot_get_a_whole_chunk_gets_the_largest_extent_that_holds_its_minimum() {
    let store = MemStore::new();
    let now = 1_000_000;
    // 16 MiB: 1 MiB chunks.
    let mut c = catalog(&store, config(MIB), now);
    register(&mut c, 1, 16 * MIB, now);
    table(&mut c, "c", IndexKind::Clover, now);
    let mut ids = Vec::new();
    for _ in 0..16 {
        let l = c.create_lease(data_lease("c", MIB, None), now).unwrap();
        assert_eq!(l.len, MIB);
        ids.push(l);
    }
    // Hand over every other chunk keeping its first line, and one keeping a
    // quarter: no whole chunk is free any more, 7.75 MiB are.
    for (i, l) in ids.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
        let keep = if i == 2 { MIB - MIB / 4 } else { 64 };
        c.adopt_lease(l.lease_id, Some(keep), now).unwrap();
    }
    let err = c.create_lease(data_lease("c", MIB, None), now).unwrap_err();
    assert!(
        matches!(&err, CatalogError::OutOfMemory(m) if m.contains("largest free extent 1048512 bytes")),
        "all or nothing without a minimum: {err}"
    );
    // With a minimum: the largest hole (1 MiB - 64), at its start (for a table
    // without runs to continue).
    table(&mut c, "d", IndexKind::Clover, now);
    let l = c
        .create_lease(data_lease("d", MIB, Some(4096)), now)
        .unwrap();
    assert_eq!(l.len, MIB - 64);
    assert!(ids.iter().any(|h| h.va + 64 == l.va), "at a hole's start");
    // The quarter hole is smaller than every other: taken last.
    let mut lens = Vec::new();
    while let Ok(l) = c.create_lease(data_lease("d", MIB, Some(100)), now) {
        lens.push(l.len);
    }
    assert_eq!(lens.len(), 7);
    assert_eq!(lens[..6], [MIB - 64; 6]);
    assert_eq!(lens[6], MIB / 4);
    assert_eq!(free_bytes(&c, now), 0);
    let err = c
        .create_lease(data_lease("c", MIB, Some(64)), now)
        .unwrap_err();
    assert!(matches!(err, CatalogError::OutOfMemory(_)), "{err}");
    c.check_invariants().unwrap();
}

#[test]
fn a_new_session_continues_its_tables_run_so_hand_overs_merge() {
    let store = MemStore::new();
    let now = 1_000_000;
    let mut c = catalog(&store, config(MIB), now);
    register(&mut c, 1, 64 * MIB, now);
    table(&mut c, "a", IndexKind::Clover, now);
    table(&mut c, "b", IndexKind::Clover, now);
    let a1 = c.create_lease(data_lease("a", MIB, Some(64)), now).unwrap();
    let b1 = c.create_lease(data_lease("b", MIB, Some(64)), now).unwrap();
    c.adopt_lease(a1.lease_id, Some(1000), now).unwrap();
    // The next session of table a starts right after a's run (1024 bytes kept),
    // in the hole a1 left, not after b's chunk.
    let a2 = c.create_lease(data_lease("a", MIB, Some(64)), now).unwrap();
    assert_eq!(a2.va, a1.va + 1024);
    assert_eq!(a2.len, MIB - 1024, "what is left of the hole");
    let merged = c.adopt_lease(a2.lease_id, Some(64), now).unwrap().unwrap();
    assert_eq!(
        (merged.lease_id, merged.va, merged.len),
        (a1.lease_id, a1.va, 1088)
    );
    assert!(matches!(
        c.lease(a2.lease_id, now),
        Err(CatalogError::NotFound {
            code: "lease_not_found",
            ..
        })
    ));
    // A hole smaller than RUN_CONTINUATION_MIN after the run is not continued.
    let a3 = c.create_lease(data_lease("a", MIB, Some(64)), now).unwrap();
    assert_eq!(a3.va, a1.va + 1088);
    c.adopt_lease(a3.lease_id, Some(MIB - 1088 - 4096), now)
        .unwrap();
    let a4 = c.create_lease(data_lease("a", MIB, Some(64)), now).unwrap();
    assert_ne!(a4.va, a1.va + MIB - 4096);
    assert_eq!(a4.len, MIB, "a whole chunk elsewhere");
    // An expired lease adopted by the sweep merges too.
    c.adopt_lease(b1.lease_id, Some(64), now).unwrap();
    let b2 = c.create_lease(data_lease("b", MIB, Some(64)), now).unwrap();
    assert_eq!(b2.va, b1.va + 64);
    c.reclaim_expired(now + 2000).unwrap();
    let m = c.table("b").unwrap().memory;
    assert_eq!(
        (m.adopted_leases, m.adopted_bytes),
        (1, 64 + MIB - 64),
        "{m:?}"
    );
    c.check_invariants().unwrap();
}

#[derive(Debug, Clone)]
enum Op {
    Lease {
        table: usize,
        bytes: u64,
        min: Option<u64>,
    },
    Adopt {
        pick: usize,
        keep: u64,
    },
    Free(usize),
    Advance(u64),
    Sweep,
    Reopen,
    Drop(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0usize..3, 1u64..3 * MIB, proptest::option::of(1u64..MIB))
            .prop_map(|(table, bytes, min)| Op::Lease { table, bytes, min }),
        4 => (any::<usize>(), 0u64..MIB).prop_map(|(pick, keep)| Op::Adopt { pick, keep }),
        1 => any::<usize>().prop_map(Op::Free),
        1 => (0u64..2_000).prop_map(Op::Advance),
        1 => Just(Op::Sweep),
        1 => Just(Op::Reopen),
        1 => (0usize..3).prop_map(Op::Drop),
    ]
}

const TABLES: [&str; 3] = ["t0", "t1", "t2"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random sequences over two memnodes and three tables (one with a RACE
    /// directory): leases never overlap, leased plus free bytes always equal the
    /// registered memory, every grant holds its minimum, and once the tables are
    /// dropped and every lease has run out, all memory is free again.
    #[test]
    fn leases_never_overlap_and_bytes_are_conserved_across_adoption(
        ops in proptest::collection::vec(op(), 1..150),
    ) {
        let store = MemStore::new();
        let cfg = config(MIB);
        let mut now = 1_000_000u64;
        let mut cat = catalog(&store, cfg.clone(), now);
        let total = 8 * MIB + 3 * MIB;
        register(&mut cat, 1, 8 * MIB, now);
        register(&mut cat, 2, 3 * MIB, now);
        let mut held: Vec<u64> = Vec::new();
        for op in ops {
            match op {
                Op::Lease { table, bytes, min } => {
                    let t = TABLES[table];
                    if cat.table(t).is_err() {
                        let index = if table == 0 { IndexKind::Race } else { IndexKind::Clover };
                        let _ = cat.create_table(table_req(t, index), now);
                        continue;
                    }
                    match cat.create_lease(data_lease(t, bytes, min), now) {
                        Ok(l) => {
                            prop_assert!(l.len >= min.unwrap_or(bytes).min(bytes));
                            prop_assert_eq!(l.va % 64, 0);
                            held.push(l.lease_id);
                        }
                        Err(CatalogError::OutOfMemory(_)) => {}
                        Err(e) => return Err(TestCaseError::fail(e.to_string())),
                    }
                }
                Op::Adopt { pick, keep } if !held.is_empty() => {
                    let id = held.swap_remove(pick % held.len());
                    match cat.adopt_lease(id, Some(keep), now) {
                        Ok(_) | Err(CatalogError::NotFound { .. }) | Err(CatalogError::Conflict { .. }) => {}
                        Err(e) => return Err(TestCaseError::fail(e.to_string())),
                    }
                }
                Op::Free(i) if !held.is_empty() => {
                    let id = held.swap_remove(i % held.len());
                    match cat.free_lease(id) {
                        Ok(()) | Err(CatalogError::NotFound { .. }) | Err(CatalogError::Conflict { .. }) => {}
                        Err(e) => return Err(TestCaseError::fail(e.to_string())),
                    }
                }
                Op::Adopt { .. } | Op::Free(_) => {}
                Op::Advance(ms) => now += ms,
                Op::Sweep => { cat.reclaim_expired(now).unwrap(); }
                Op::Reopen => {
                    drop(cat);
                    cat = catalog(&store, cfg.clone(), now);
                }
                Op::Drop(t) => { let _ = cat.drop_table(TABLES[t], now); }
            }
            cat.check_invariants().map_err(TestCaseError::fail)?;
            let free = free_bytes(&cat, now);
            let leased: u64 = cat.leases(None, now).iter().map(|l| l.len).sum();
            prop_assert_eq!(free + leased, total);
            for t in TABLES {
                if let Ok(d) = cat.table(t) {
                    let owned: u64 = cat.leases(None, now).iter()
                        .filter(|l| l.owner == format!("table:{t}"))
                        .map(|l| l.len)
                        .sum();
                    prop_assert_eq!(d.memory.table_owned_bytes, owned);
                }
            }
        }
        for t in TABLES {
            let _ = cat.drop_table(t, now);
        }
        now += 10_000_000;
        cat.reclaim_expired(now).unwrap();
        prop_assert_eq!(free_bytes(&cat, now), total);
    }
}
