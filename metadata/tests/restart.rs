//! Restarting the service on the same sled directory loses nothing acknowledged.

mod common;

use common::{client, memnode, start};
use metadata::StoreConfig;
use metadata::api::{CreateTableRequest, InPlaceRequest, IndexKind, LatchPlacement, TailHint};

#[test]
fn restart_mid_workload_keeps_tables_leases_and_free_maps() {
    let dir = tempfile::tempdir().unwrap();
    let store = || StoreConfig::Sled(dir.path().join("db"));

    let server = start(store(), |_| {});
    let c = client(&server);
    let m = c
        .register_memnode(&memnode("m1", 4791, 9, 32 << 20))
        .unwrap();
    let mut leases = Vec::new();
    for i in 0..5 {
        leases.push(
            c.lease(&format!("client-{}", i % 2), 1 + i * 1_000_000)
                .unwrap(),
        );
    }
    c.free(leases.remove(1).lease_id).unwrap();
    let race = c
        .create_table(&CreateTableRequest {
            name: "kv".into(),
            index: IndexKind::Race,
            value_limit: 1024,
            memnodes: Some(vec![m.id]),
            replication: Some(1),
            update_mode: None,
            inplace: None,
        })
        .unwrap();
    let clover = c
        .create_table(&CreateTableRequest {
            name: "log".into(),
            index: IndexKind::Clover,
            value_limit: 64,
            memnodes: None,
            replication: None,
            update_mode: None,
            inplace: None,
        })
        .unwrap();
    let tuples = c
        .create_table(&CreateTableRequest {
            name: "tuples".into(),
            index: IndexKind::InPlace,
            value_limit: 64,
            memnodes: None,
            replication: None,
            update_mode: None,
            inplace: Some(InPlaceRequest {
                scheme: "pessimistic-x-basic".into(),
                capacity: 100,
                tuple_bytes: 192,
                latch_placement: Some(LatchPlacement::Separate),
                unsafe_demo: false,
            }),
        })
        .unwrap();
    // A change feed on the Clover table (checked: the table it names, ring counts,
    // the index).
    let ring = |va: u64| dmkv_api::feed_layout::FeedRing {
        memnode: m.id,
        admin_url: "http://127.0.0.1:1".into(),
        va,
        rkey: 7,
        slot_size: 256,
        slots: 16,
    };
    let feed = dmkv_api::feed_layout::FeedLayout {
        table: "log".into(),
        table_id: clover.id,
        lanes: vec![ring(0x1000), ring(0x2000)],
        consumers: vec![ring(0x3000)],
    };
    let bad = |f: &dmkv_api::feed_layout::FeedLayout, table: &str| {
        c.set_table_feed(table, Some(f))
            .expect_err("refused")
            .status()
    };
    let mut other = feed.clone();
    other.table_id += 1;
    assert_eq!(bad(&other, "log"), Some(422), "another table's id");
    let mut none = feed.clone();
    none.consumers.clear();
    assert_eq!(bad(&none, "log"), Some(422), "no consumer ring");
    let mut on_race = feed.clone();
    on_race.table = "kv".into();
    on_race.table_id = race.id;
    assert_eq!(bad(&on_race, "kv"), Some(409), "RACE tables have no feeds");
    let clover = c.set_table_feed("log", Some(&feed)).unwrap();
    assert_eq!(clover.feed.as_ref(), Some(&feed));
    let chain = c.open_chain("log", b"k1").unwrap();
    let hint = TailHint {
        memnode_id: m.id,
        va: 0x1000_0000_0080,
        generation: 1,
    };
    c.put_tail("log", chain.chain_id, &hint).unwrap();
    let before_leases = c.leases(None).unwrap();
    let before_nodes = c.memnodes().unwrap();
    server.shutdown();

    let server = start(store(), |_| {});
    let c = client(&server);
    // Everything acknowledged is there.
    assert_eq!(c.table("kv").unwrap(), race);
    assert_eq!(c.table("log").unwrap(), clover, "with its feed");
    assert_eq!(c.table("tuples").unwrap(), tuples);
    assert_eq!(c.leases(None).unwrap(), before_leases);
    let after_nodes = c.memnodes().unwrap();
    assert_eq!(after_nodes.len(), 1);
    assert_eq!(after_nodes[0].id, m.id);
    assert_eq!(after_nodes[0].free_bytes, before_nodes[0].free_bytes);
    assert_eq!(after_nodes[0].regions, before_nodes[0].regions);
    assert!(
        after_nodes[0].healthy,
        "one timeout of grace after a restart"
    );
    let again = c.open_chain("log", b"k1").unwrap();
    assert_eq!((again.chain_id, again.created), (chain.chain_id, false));
    assert_eq!(c.tail("log", chain.chain_id).unwrap().tail, hint);

    // Clients continue: renew an old lease, free another, take new ones that do not
    // overlap anything granted before the restart, and get fresh ids.
    c.renew(leases[0].lease_id, None).unwrap();
    c.free(leases[1].lease_id).unwrap();
    let old_max_id = before_leases.iter().map(|l| l.lease_id).max().unwrap();
    let mut all: Vec<(u64, u64)> = c
        .leases(None)
        .unwrap()
        .iter()
        .map(|l| (l.va, l.len))
        .collect();
    for _ in 0..4 {
        let l = c.lease("after-restart", 2 << 20).unwrap();
        assert!(l.lease_id > old_max_id, "lease ids are never reused");
        for &(va, len) in &all {
            assert!(
                l.va + l.len <= va || va + len <= l.va,
                "new lease overlaps an old one"
            );
        }
        all.push((l.va, l.len));
    }
    let fresh = c.open_chain("log", b"k2").unwrap();
    assert!(fresh.chain_id > chain.chain_id);
    // Re-registration of the memnode with the same regions keeps its leases.
    let re = c
        .register_memnode(&memnode("m1", 4791, 9, 32 << 20))
        .unwrap();
    assert_eq!((re.id, re.revoked_leases), (m.id, 0));
    server.shutdown();

    // A third start still agrees (the changes after the first restart were flushed too).
    let server = start(store(), |_| {});
    let c = client(&server);
    assert_eq!(c.leases(None).unwrap().len(), all.len());
    server.shutdown();
}

#[test]
fn a_data_dir_in_use_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let _first = start(StoreConfig::Sled(dir.path().to_path_buf()), |_| {});
    let mut cfg = metadata::ServerConfig::local(StoreConfig::Sled(dir.path().to_path_buf()));
    cfg.token = None;
    let e = metadata::MetadataServer::start(cfg).unwrap_err();
    assert!(e.to_string().contains("another metadata service"), "{e}");
}

#[test]
fn a_retrying_client_rides_out_a_restart_on_the_same_address() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let server = start(StoreConfig::Sled(path.clone()), |_| {});
    let addr = server.addr();
    let c = client(&server).with_retry(std::time::Duration::from_secs(20));
    let plain = client(&server);
    let m = c
        .register_memnode(&memnode("m1", 4791, 9, 32 << 20))
        .unwrap();
    c.create_table(&CreateTableRequest {
        name: "log".into(),
        index: IndexKind::Clover,
        value_limit: 64,
        memnodes: None,
        replication: None,
        update_mode: None,
        inplace: None,
    })
    .unwrap();
    let chain = c.open_chain("log", b"k").unwrap();
    let root = TailHint {
        memnode_id: m.id,
        va: 0x40,
        generation: 0,
    };
    assert!(
        c.publish_root("log", chain.chain_id, &root)
            .unwrap()
            .created
    );
    server.shutdown();

    // Down: a client without a retry window fails at once.
    let e = plain.lookup_chain("log", b"k").unwrap_err();
    assert!(matches!(e, metadata::client::ClientError::Io { .. }), "{e}");

    // Back on the same address after a while; the retrying client's calls, made
    // while it was down, complete.
    let restarter = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(400));
        start(StoreConfig::Sled(path), |cfg| cfg.listen = addr)
    });
    let started = std::time::Instant::now();
    let info = c.lookup_chain("log", b"k").unwrap().unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    assert_eq!(
        (info.chain_id, info.tail),
        (chain.chain_id, Some(root.clone()))
    );
    let again = c.open_chain("log", b"k").unwrap();
    assert_eq!((again.chain_id, again.created), (chain.chain_id, false));
    let other = TailHint {
        va: 0x80,
        ..root.clone()
    };
    let p = c.publish_root("log", chain.chain_id, &other).unwrap();
    assert_eq!(
        (p.created, p.tail),
        (false, root),
        "the first root survives"
    );
    let server = restarter.join().unwrap();
    server.shutdown();
    // Down for good: the window bounds the wait.
    let quick = metadata::client::MetadataClient::new(&format!("http://{addr}"))
        .unwrap()
        .with_retry(std::time::Duration::from_millis(200));
    let started = std::time::Instant::now();
    assert!(quick.health().is_err());
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}
