//! Replicated tables: replica sets on distinct memnodes (and zones where enough
//! are declared), 409 when too few memnodes are registered, and memory mirrored at
//! the same offset on every member of a set — table-owned memory and data leases
//! alike — freed, trimmed, adopted and dropped on every copy. Over HTTP:
//! `POST /v1/tables` with replication 2 and 3, zones reported by `GET /v1/memnodes`,
//! and a real memnode declaring its zone through its registrar.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::{TOKEN, client, memnode, start, wait_until};
use memnode::registrar::{HttpRegistrar, Registrar};
use memnode::{Memnode, MemnodeConfig};
use metadata::StoreConfig;
use metadata::api::{
    CreateLeaseRequest, CreateTableRequest, IndexKind, Lease, RegionSpec, RegisterMemnodeRequest,
    TableState,
};
use metadata::catalog::{Catalog, CatalogConfig, CatalogError};
use metadata::scrub::RecordingScrubber;
use metadata::store::MemStore;

const MIB: u64 = 1 << 20;

fn registration(i: u16, zone: Option<&str>, len: u64) -> RegisterMemnodeRequest {
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
        zone: zone.map(str::to_owned),
    }
}

fn catalog(store: &MemStore, now: u64) -> (Catalog, Arc<RecordingScrubber>) {
    let cfg = CatalogConfig {
        chunk_size: MIB,
        grace_ms: 500,
        heartbeat_timeout_ms: 10_000,
        ..CatalogConfig::default()
    };
    let mut c = Catalog::open(Box::new(store.clone()), cfg, now).unwrap();
    let scrubber = Arc::new(RecordingScrubber::default());
    c.set_scrubber(scrubber.clone());
    (c, scrubber)
}

fn table_req(name: &str, index: IndexKind, replication: Option<u32>) -> CreateTableRequest {
    CreateTableRequest {
        name: name.into(),
        index,
        value_limit: 1024,
        memnodes: None,
        replication,
        update_mode: None,
        inplace: None,
    }
}

fn data_lease(table: &str, memnode: Option<u64>) -> CreateLeaseRequest {
    CreateLeaseRequest {
        client: "s".into(),
        bytes: MIB,
        memnode,
        ttl_ms: Some(1000),
        table: Some(table.into()),
        ..CreateLeaseRequest::default()
    }
}

fn free_by_node(c: &Catalog, now: u64) -> Vec<u64> {
    c.memnodes(now).iter().map(|n| n.free_bytes).collect()
}

/// Every copy of `l` is at the same offset from its memnode's region base.
fn mirrored(c: &Catalog, l: &Lease, now: u64) -> u64 {
    let nodes = c.memnodes(now);
    let offset = |m: u64, va: u64| {
        let n = nodes.iter().find(|n| n.id == m).unwrap();
        va - n.regions[0].base_va
    };
    assert_eq!(
        (l.replicas[0].memnode_id, l.replicas[0].va),
        (l.memnode_id, l.va)
    );
    let offs: BTreeSet<u64> = l
        .replicas
        .iter()
        .map(|r| offset(r.memnode_id, r.va))
        .collect();
    assert_eq!(offs.len(), 1, "copies at different offsets: {l:?}");
    offs.into_iter().next().unwrap()
}

#[test]
fn replica_sets_are_distinct_memnodes_in_distinct_zones() {
    let now = 1_000_000;
    let (mut c, _) = catalog(&MemStore::new(), now);
    for (i, z) in [(1, "a"), (2, "a"), (3, "b"), (4, "c")] {
        c.register_memnode(registration(i, Some(z), 16 * MIB), now)
            .unwrap();
    }
    assert_eq!(c.memnode(1, now).unwrap().zone.as_deref(), Some("a"));
    let zone = |id: u64| match id {
        1 | 2 => "a",
        3 => "b",
        _ => "c",
    };
    let t = c
        .create_table(table_req("t3", IndexKind::Clover, Some(3)), now)
        .unwrap();
    assert_eq!((t.replication, t.memnodes.clone()), (3, vec![1, 2, 3, 4]));
    assert_eq!(t.replica_sets.len(), 4);
    for (set, home) in t.replica_sets.iter().zip(&t.memnodes) {
        assert_eq!(set[0], *home, "home first");
        assert_eq!(set.iter().collect::<BTreeSet<_>>().len(), 3, "{set:?}");
        let zones: BTreeSet<_> = set.iter().map(|&m| zone(m)).collect();
        assert_eq!(zones.len(), 3, "{set:?} spans three zones");
    }
    let t = c
        .create_table(table_req("t1", IndexKind::Clover, None), now)
        .unwrap();
    assert!(t.replica_sets.is_empty(), "unreplicated tables have none");
    let e = c
        .create_table(table_req("t4", IndexKind::Clover, Some(4)), now)
        .unwrap_err();
    assert!(matches!(e, CatalogError::Invalid(_)), "{e}");
    let e = c
        .create_table(table_req("t0", IndexKind::Clover, Some(0)), now)
        .unwrap_err();
    assert!(matches!(e, CatalogError::Invalid(_)), "{e}");
}

#[test]
fn too_few_memnodes_for_the_replication_is_a_conflict() {
    let now = 1_000_000;
    let (mut c, _) = catalog(&MemStore::new(), now);
    c.register_memnode(registration(1, None, 16 * MIB), now)
        .unwrap();
    c.register_memnode(registration(2, None, 16 * MIB), now)
        .unwrap();
    let e = c
        .create_table(table_req("t", IndexKind::Race, Some(3)), now)
        .unwrap_err();
    match e {
        CatalogError::Conflict { code, message } => {
            assert_eq!(code, "too_few_memnodes");
            assert_eq!(message, "replication 3 needs 3 memnodes, 2 registered");
        }
        other => panic!("{other}"),
    }
    assert_eq!(
        free_by_node(&c, now),
        vec![16 * MIB, 16 * MIB],
        "nothing allocated"
    );
    assert!(c.table("t").is_err());
}

#[test]
fn memory_of_a_replicated_table_is_mirrored_and_freed_on_every_copy() {
    let store = MemStore::new();
    let now = 1_000_000;
    let (mut c, scrubber) = catalog(&store, now);
    c.register_memnode(registration(1, None, 16 * MIB), now)
        .unwrap();
    c.register_memnode(registration(2, None, 8 * MIB), now)
        .unwrap();
    c.register_memnode(registration(3, None, 16 * MIB), now)
        .unwrap();
    let start = free_by_node(&c, now);
    // Memory on memnode 2 that a plain lease holds: mirrored copies avoid it.
    let plain = c
        .create_lease(
            CreateLeaseRequest {
                client: "p".into(),
                bytes: 3 * MIB,
                memnode: Some(2),
                ..CreateLeaseRequest::default()
            },
            now,
        )
        .unwrap();
    let t = c
        .create_table(
            CreateTableRequest {
                memnodes: Some(vec![1]),
                ..table_req("r", IndexKind::Race, Some(2))
            },
            now,
        )
        .unwrap();
    let set = t.replica_sets[0].clone();
    assert_eq!(set, vec![1, 2]);
    // The directory is mirrored, and zeroed on both copies.
    let dir = t.layout.race().unwrap().directory.clone().unwrap();
    let dir_lease = c.lease(dir.lease_id, now).unwrap();
    assert_eq!(dir_lease.replicas.len(), 2);
    let dir_off = mirrored(&c, &dir_lease, now);
    assert!(
        dir_off >= 3 * MIB,
        "not where the plain lease is on memnode 2"
    );
    let zeroed: BTreeSet<u64> = scrubber
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|z| z.memnode_id)
        .collect();
    assert_eq!(zeroed, BTreeSet::from([1, 2]));
    // Data leases: on the home, mirrored on its set; never overlapping anything.
    let mut leases = Vec::new();
    for _ in 0..3 {
        let l = c.create_lease(data_lease("r", Some(1)), now).unwrap();
        mirrored(&c, &l, now);
        assert_eq!(
            l.replicas.iter().map(|r| r.memnode_id).collect::<Vec<_>>(),
            set
        );
        assert!(!l.replicas[1].admin_url.is_empty());
        leases.push(l);
    }
    c.check_invariants().unwrap();
    let e = c.create_lease(data_lease("r", Some(2)), now).unwrap_err();
    assert!(matches!(e, CatalogError::Invalid(_)), "not a home: {e}");
    let used = |c: &Catalog| -> Vec<u64> {
        free_by_node(c, now)
            .iter()
            .zip(&start)
            .map(|(f, s)| s - f)
            .collect()
    };
    let dir_len = dir_lease.len;
    assert_eq!(
        used(&c),
        vec![dir_len + 3 * MIB, 3 * MIB + dir_len + 3 * MIB, 0]
    );
    // Freeing, trimming and adopting act on both copies; so does the restart.
    c.free_lease(leases[0].lease_id).unwrap();
    let kept = c
        .adopt_lease(leases[1].lease_id, Some(100), now)
        .unwrap()
        .unwrap();
    assert_eq!(kept.len, 128);
    assert_eq!(kept.replicas.len(), 2);
    assert_eq!(
        used(&c),
        vec![dir_len + 128 + MIB, 3 * MIB + dir_len + 128 + MIB, 0]
    );
    c.reclaim_expired(now + 5000).unwrap();
    assert_eq!(
        c.lease(leases[2].lease_id, now + 5000).unwrap().state,
        "table"
    );
    c.check_invariants().unwrap();
    drop(c);
    let (mut c, _) = catalog(&store, now + 5000);
    c.check_invariants().unwrap();
    assert_eq!(
        used(&c),
        vec![dir_len + 128 + MIB, 3 * MIB + dir_len + 128 + MIB, 0]
    );
    c.drop_table("r", now + 5000).unwrap();
    c.free_lease(plain.lease_id).unwrap();
    assert_eq!(free_by_node(&c, now + 5000), start);
}

#[test]
fn an_unhealthy_member_refuses_mirrored_memory() {
    let now = 1_000_000;
    let (mut c, _) = catalog(&MemStore::new(), now);
    c.register_memnode(registration(1, None, 16 * MIB), now)
        .unwrap();
    c.register_memnode(registration(2, None, 16 * MIB), now)
        .unwrap();
    c.create_table(
        CreateTableRequest {
            memnodes: Some(vec![1]),
            ..table_req("c", IndexKind::Clover, Some(2))
        },
        now,
    )
    .unwrap();
    c.heartbeat(1, now + 20_000).unwrap();
    let e = c
        .create_lease(data_lease("c", None), now + 20_000)
        .unwrap_err();
    assert!(
        matches!(&e, CatalogError::Conflict { code: "memnode_unhealthy", message } if message.contains("[2]")),
        "{e}"
    );
}

#[test]
fn http_tables_with_replication_2_and_3_and_zones() {
    let server = start(StoreConfig::Memory(MemStore::new()), |_| {});
    let c = client(&server);
    for (i, zone) in [(1u16, "rack-a"), (2, "rack-b"), (3, "rack-c")] {
        let mut reg = memnode(&format!("m{i}"), 4790 + i, u32::from(i), 16 * MIB);
        reg.zone = Some(zone.into());
        c.register_memnode(&reg).unwrap();
    }
    let zones: Vec<Option<String>> = c.memnodes().unwrap().into_iter().map(|m| m.zone).collect();
    assert_eq!(
        zones,
        ["rack-a", "rack-b", "rack-c"].map(|z| Some(z.to_owned()))
    );
    for r in [2, 3] {
        let name = format!("t{r}");
        let t = c
            .create_table(&table_req(&name, IndexKind::Race, Some(r)))
            .unwrap();
        assert_eq!(t.replication, r);
        assert_eq!(t.replica_sets.len(), 3);
        assert!(t.replica_sets.iter().all(|s| s.len() == r as usize));
        let again = c.table(&name).unwrap();
        assert_eq!(again.replica_sets, t.replica_sets);
        let dir = t.layout.race().unwrap().directory.clone().unwrap();
        assert_eq!(
            c.get_lease(dir.lease_id).unwrap().replicas.len(),
            r as usize
        );
        let l = c
            .create_lease(&data_lease(&name, Some(t.memnodes[0])))
            .unwrap();
        assert_eq!(l.replicas.len(), r as usize);
    }
    let e = c
        .create_table(&table_req("t5", IndexKind::Clover, Some(5)))
        .unwrap_err();
    assert_eq!(e.status(), Some(422));
    // Memnode 3 holds copies of the replicated tables: a plain delete is refused,
    // a forced one takes it out of their replica sets.
    let e = c.deregister_memnode(3).unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(409), Some("memnode_in_use")));
    c.force_deregister_memnode(3).unwrap();
    let t3 = c.table("t3").unwrap();
    assert!(
        t3.replica_sets
            .iter()
            .all(|s| !s.contains(&3) && s.len() == 2)
    );
    assert_eq!(t3.health.lost.len(), 1);
    let e = c
        .create_table(&table_req("t9", IndexKind::Clover, Some(3)))
        .unwrap_err();
    assert_eq!(
        (e.status(), e.code()),
        (Some(409), Some("too_few_memnodes"))
    );
    assert!(
        e.to_string()
            .contains("replication 3 needs 3 memnodes, 2 registered"),
        "{e}"
    );
}

#[test]
fn a_memnode_declares_its_zone_when_it_registers() {
    let server = start(StoreConfig::Memory(MemStore::new()), |c| {
        c.catalog.heartbeat_interval_ms = 100;
    });
    let c = client(&server);
    let node = Memnode::start(MemnodeConfig::local(1 << 20)).unwrap();
    let registrar = HttpRegistrar::new(&server.url(), Some(TOKEN.into()), None)
        .unwrap()
        .with_zone(Some("zone-7".into()))
        .with_interval(Duration::from_millis(100));
    registrar
        .register(&node.node_info(), &node.admin_url())
        .unwrap();
    assert!(wait_until(Duration::from_secs(10), || c
        .memnodes()
        .unwrap()
        .iter()
        .any(|m| m.zone.as_deref() == Some("zone-7"))));
    registrar.stop();
    node.shutdown();
}

#[test]
fn a_silent_memnode_fails_over_keeping_homes_and_freeing_its_copies() {
    let now = 1_000_000;
    let (mut c, _) = catalog(&MemStore::new(), now);
    for i in 1..=3 {
        c.register_memnode(registration(i, None, 16 * MIB), now)
            .unwrap();
    }
    let t = c
        .create_table(table_req("t", IndexKind::Clover, Some(2)), now)
        .unwrap();
    let home_of_1 = t.replica_sets[0].clone();
    assert_eq!(home_of_1[0], 1);
    let backup = home_of_1[1];
    let l = c.create_lease(data_lease("t", Some(1)), now).unwrap();
    assert_eq!(l.replicas.len(), 2);
    let free_before = free_by_node(&c, now);

    // Nothing is due while every memnode heartbeats.
    assert!(c.failover_due(now + 5_000, 10_000).is_empty());
    // Memnode 1 goes silent; the others keep heartbeating.
    let later = now + 20_000;
    for id in [2, 3] {
        c.heartbeat(id, later).unwrap();
    }
    assert_eq!(c.failover_due(later, 10_000), vec![1]);
    let done = c.fail_over_down(later).unwrap();
    assert_eq!(done.len(), 1);
    let (id, reason, f) = &done[0];
    assert_eq!(*id, 1);
    assert!(reason.contains("sent no heartbeat"), "{reason}");
    assert_eq!(f.leases, 1);

    let t2 = c.table("t").unwrap();
    // The set keeps its position (home 1) and promotes the backup.
    assert_eq!(t2.memnodes, t.memnodes);
    assert_eq!(t2.replica_sets[0], vec![backup]);
    assert!(
        t2.replica_sets
            .iter()
            .all(|s| !s.contains(&1) && !s.is_empty())
    );
    assert_eq!(t2.health.state, TableState::Degraded);
    assert_eq!(t2.health.lost.len(), 1);
    assert_eq!(t2.health.lost[0].memnode_id, 1);
    // The lease still names its home; only the surviving copy is listed, and the
    // dead copy's extent went back to memnode 1's free map.
    let l2 = c.lease(l.lease_id, later).unwrap();
    assert_eq!((l2.memnode_id, l2.va), (l.memnode_id, l.va));
    assert_eq!(
        l2.replicas.iter().map(|r| r.memnode_id).collect::<Vec<_>>(),
        vec![backup]
    );
    let free_after = free_by_node(&c, later);
    assert_eq!(free_after[0], free_before[0] + l.len);
    assert_eq!(free_after[1..], free_before[1..]);
    // New memory for home 1 goes to its surviving member, named in home coordinates.
    let n = c.create_lease(data_lease("t", Some(1)), later).unwrap();
    assert_eq!(n.memnode_id, 1);
    assert_eq!(
        n.replicas.iter().map(|r| r.memnode_id).collect::<Vec<_>>(),
        vec![backup]
    );
    // Failing over again changes nothing.
    let again = c.fail_over(1, "again", later).unwrap();
    assert!(again.tables.is_empty() && again.leases == 0);
}
