//! Property test of the catalog's allocation: random lease / free / expire / sweep
//! sequences over several memnodes never hand out overlapping ranges, and leased plus
//! free bytes always equal the registered memory.

use metadata::api::{CreateLeaseRequest, RegionSpec, RegisterMemnodeRequest};
use metadata::catalog::{Catalog, CatalogConfig, CatalogError};
use metadata::placement::PlacementKind;
use metadata::store::MemStore;
use proptest::prelude::*;

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

#[derive(Debug, Clone)]
enum Op {
    Lease { bytes: u64, ttl: u64 },
    Free(usize),
    Advance(u64),
    Sweep,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u64..3_000_000, 100u64..5_000).prop_map(|(bytes, ttl)| Op::Lease { bytes, ttl }),
        2 => any::<usize>().prop_map(Op::Free),
        1 => (0u64..3_000).prop_map(Op::Advance),
        1 => Just(Op::Sweep),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn leases_never_overlap_and_bytes_are_conserved(
        ops in proptest::collection::vec(op(), 1..120),
        round_robin in any::<bool>(),
    ) {
        let store = MemStore::new();
        let cfg = CatalogConfig {
            chunk_size: 1 << 20,
            grace_ms: 500,
            heartbeat_timeout_ms: u64::MAX / 4,
            placement: if round_robin { PlacementKind::RoundRobin } else { PlacementKind::MostFree },
            ..CatalogConfig::default()
        };
        let mut now = 1_000_000u64;
        let mut cat = Catalog::open(Box::new(store.clone()), cfg.clone(), now).unwrap();
        let total: u64 = [(1u16, 8u64 << 20), (2, 3 << 20), (3, 16 << 20)]
            .iter()
            .map(|&(i, len)| { register(&mut cat, i, len, now); len })
            .sum();
        let mut held: Vec<u64> = Vec::new();
        for op in ops {
            match op {
                Op::Lease { bytes, ttl } => {
                    let r = cat.create_lease(CreateLeaseRequest {
                        client: "p".into(), bytes, memnode: None, ttl_ms: Some(ttl), min_bytes: None, table: None,
                    }, now);
                    match r {
                        Ok(l) => {
                            prop_assert!(l.len >= bytes);
                            held.push(l.lease_id);
                        }
                        Err(CatalogError::OutOfMemory(_)) => {}
                        Err(e) => return Err(TestCaseError::fail(e.to_string())),
                    }
                }
                Op::Free(i) if !held.is_empty() => {
                    let id = held.swap_remove(i % held.len());
                    match cat.free_lease(id) {
                        Ok(()) | Err(CatalogError::NotFound { .. }) => {}
                        Err(e) => return Err(TestCaseError::fail(e.to_string())),
                    }
                }
                Op::Free(_) => {}
                Op::Advance(ms) => now += ms,
                Op::Sweep => { cat.reclaim_expired(now).unwrap(); }
                Op::Reopen => {
                    drop(cat);
                    cat = Catalog::open(Box::new(store.clone()), cfg.clone(), now).unwrap();
                }
            }
            cat.check_invariants().map_err(TestCaseError::fail)?;
            let nodes = cat.memnodes(now);
            let free: u64 = nodes.iter().map(|n| n.free_bytes).sum();
            let leased: u64 = cat.leases(None, now).iter().map(|l| l.len).sum();
            prop_assert_eq!(free + leased, total);
        }
    }
}
