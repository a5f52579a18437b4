//! Clover writes at the memory node, over `udp` to a node with RPC workers:
//!
//! - in `rpc` mode a write to a known key is one RPC (the tail search and the link)
//!   and answers as the one-sided write does (conditions included); a one-sided
//!   reader sees its effects;
//! - an insert of a key without a chain is one RPC that creates the chain at the
//!   node, with no metadata call;
//! - a worker that dies right after a link leaves the write whole, one that dies
//!   right after claiming a new key's chain leaves the key absent (and insertable).
//!
//! - one-sided, `rpc` and `hybrid` sessions creating many fresh keys together (the
//!   node's directory claims racing one-sided ones) are linearizable.
//!
//! Linearizability of the modes mixed on a few hot keys of a Clover table, clean and
//! through the fault relay, is in `access_modes.rs`.

#[path = "support/rpc_cluster.rs"]
mod rpc_cluster;
use rpc_cluster::cluster;
use std::collections::HashMap;
use std::time::Duration;

use kvstore::{
    AccessMode, AccessOptions, Client, ClientOptions, CloverOptions, KvError, TableSpec,
    TransportKind,
};
use testbed::lincheck::{Config, Verdict, check};
use testbed::workload::{Workload, run_with_access};

fn options(mode: AccessMode) -> ClientOptions {
    ClientOptions::with_transport(TransportKind::Udp)
        .with_grace(Duration::from_millis(20))
        .with_rc(verbs::rc::RcConfig {
            retransmit_timeout: Duration::from_millis(20),
            max_retries: 30,
            ..verbs::rc::RcConfig::default()
        })
        .with_access(
            AccessOptions::default()
                .with_mode(mode)
                .with_rpc_timeout(Duration::from_millis(400)),
        )
}

#[test]
fn clover_writes_by_rpc_answer_as_one_sided_ones() {
    let (_cluster, client) = cluster(1, 2, options(AccessMode::OneSided));
    client
        .create_table("c", &TableSpec::clover(256))
        .expect("table");
    let s = client.session().expect("session");
    let r = s.table("c").expect("table");
    r.set_access(AccessMode::Rpc).expect("rpc on clover");
    let plain = client.session().expect("session");
    let o = plain.table("c").expect("table");
    s.block_on(async {
        for i in 0..8 {
            let k = format!("key{i}").into_bytes();
            r.insert(&k, b"a").await.unwrap();
            assert!(matches!(
                r.insert(&k, b"x").await,
                Err(KvError::AlreadyExists)
            ));
            r.update(&k, b"b").await.unwrap();
            r.delete(&k).await.unwrap();
            assert!(matches!(r.update(&k, b"x").await, Err(KvError::NotFound)));
            assert!(matches!(r.delete(&k).await, Err(KvError::NotFound)));
            r.insert(&k, b"c").await.unwrap();
            r.put(&k, format!("d{i}").as_bytes()).await.unwrap();
        }
    });
    let stats = s.stats().foreground;
    println!("rpc writer: {stats:?}");
    // Eight writes per key, each one RPC and nothing else: the first insert
    // creates the chain at the node, the others link after the hinted tail.
    assert_eq!(stats.rpcs, 8 * 8, "{stats:?}");
    assert_eq!(stats.round_trips, stats.rpcs, "{stats:?}");
    plain.block_on(async {
        for i in 0..8 {
            let k = format!("key{i}").into_bytes();
            assert_eq!(o.get(&k).await.unwrap(), Some(format!("d{i}").into_bytes()));
            // And one-sided writes after RPC ones, RPC reads after both.
            o.put(&k, b"e").await.unwrap();
        }
    });
    s.block_on(async {
        for i in 0..8 {
            let k = format!("key{i}").into_bytes();
            r.update(&k, b"f").await.unwrap();
            assert_eq!(r.get(&k).await.unwrap(), Some(b"f".to_vec()));
        }
    });
    assert_eq!(plain.stats().foreground.rpcs, 0);
}

#[test]
fn a_clover_insert_at_the_node_makes_no_metadata_call() {
    // Publication of claimed keys is batched as for one-sided claims; this test
    // keeps it out of the window it counts.
    let mut o = options(AccessMode::Rpc);
    o.clover = CloverOptions::default().with_publishing(10_000, Duration::from_secs(3600));
    let (_cluster, client) = cluster(1, 1, o);
    client
        .create_table("c", &TableSpec::clover(1024))
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("c").expect("table");
    // The first insert learns the table's directory and leases a block of chain ids.
    s.block_on(t.insert(b"first", b"v")).expect("insert");
    let before = s.stats().foreground;
    s.block_on(async {
        for i in 0..40 {
            t.insert(format!("new{i}").as_bytes(), b"v").await.unwrap();
        }
    });
    let after = s.stats().foreground;
    println!("before {before:?}\nafter {after:?}");
    assert_eq!(
        after.metadata_calls, before.metadata_calls,
        "no metadata call"
    );
    assert_eq!(after.rpcs - before.rpcs, 40, "one RPC per insert");
    assert_eq!(after.round_trips - before.round_trips, 40, "nothing else");
    // Another client (no cache, one-sided) finds every key through the directory.
    let other = Client::in_process(
        &client.metadata_url(),
        options(AccessMode::OneSided),
        HashMap::new(),
        Box::new(()),
    )
    .expect("client");
    let s2 = other.session().expect("session");
    let t2 = s2.table("c").expect("table");
    s2.block_on(async {
        for i in 0..40 {
            let k = format!("new{i}").into_bytes();
            assert_eq!(t2.get(&k).await.unwrap(), Some(b"v".to_vec()));
            assert!(matches!(
                t2.insert(&k, b"w").await,
                Err(KvError::AlreadyExists)
            ));
        }
    });
}

#[test]
fn a_worker_dying_mid_clover_write_leaves_it_whole_or_absent() {
    // Three workers: each crash below costs one.
    let (embedded, client) = cluster(1, 3, options(AccessMode::Rpc));
    let handle = embedded
        .memnode(embedded.memnode_ids()[0])
        .expect("memnode");
    client
        .create_table("c", &TableSpec::clover(256))
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("c").expect("table");
    s.block_on(t.insert(b"old", b"v1")).expect("insert");

    // A write whose worker dies right after its link CAS: the client gets an error;
    // the write happened entirely.
    handle.crash_next_rpc_write();
    let e = s.block_on(t.update(b"old", b"v2")).expect_err("no reply");
    assert!(matches!(e, KvError::Unavailable(_)), "{e:?}");
    assert!(!handle.rpc_crash_armed());
    assert_eq!(
        s.block_on(t.get(b"old")).expect("get"),
        Some(b"v2".to_vec())
    );
    s.block_on(t.update(b"old", b"v3"))
        .expect("the others answer");
    assert_eq!(
        s.block_on(t.get(b"old")).expect("get"),
        Some(b"v3".to_vec())
    );

    // An insert whose worker dies right after claiming the key's chain: the client
    // gets an error, the key is absent, and can be inserted.
    handle.crash_next_rpc_write();
    let e = s.block_on(t.insert(b"new", b"n1")).expect_err("no reply");
    assert!(matches!(e, KvError::Unavailable(_)), "{e:?}");
    let plain = client.session().expect("session");
    let o = plain.table("c").expect("table");
    o.set_access(AccessMode::OneSided).expect("mode");
    assert_eq!(plain.block_on(o.get(b"new")).expect("get"), None);
    s.block_on(t.insert(b"new", b"n2")).expect("insert");
    assert_eq!(
        plain.block_on(o.get(b"new")).expect("get"),
        Some(b"n2".to_vec())
    );
}

#[test]
fn mixed_sessions_creating_clover_keys_are_linearizable() {
    let o = options(AccessMode::OneSided).with_access(
        AccessOptions::default()
            .with_hybrid_k(1)
            .with_rpc_timeout(Duration::from_secs(2)),
    );
    let (_cluster, client) = cluster(1, 2, o);
    client
        .create_table("fresh", &TableSpec::clover(256))
        .expect("table");
    let modes = [AccessMode::OneSided, AccessMode::Rpc, AccessMode::Hybrid];
    let r = run_with_access(
        &client,
        "fresh",
        Workload {
            threads: 3,
            tasks: 2,
            ops_per_task: 60,
            keys: 24,
            seed: 31,
        },
        &modes,
    );
    let report = check(&r.history, &Config::default()).expect("well-formed history");
    let per_mode: Vec<_> = r
        .stats
        .iter()
        .zip(modes)
        .map(|(s, m)| (m.name(), s.foreground.rpcs, s.foreground.round_trips))
        .collect();
    println!(
        "{} operations, {} unresolved; (mode, rpcs, round trips): {per_mode:?}",
        r.history.len(),
        r.errors.len()
    );
    if let Verdict::Violation(v) = &report.verdict {
        panic!("not linearizable:\n{v}");
    }
    assert!(report.is_linearizable(), "{:?}", report.verdict);
    assert!(
        r.errors.is_empty(),
        "{:?}",
        r.errors.iter().take(3).collect::<Vec<_>>()
    );
    assert_eq!(r.stats[0].foreground.rpcs, 0);
    assert!(r.stats[1].foreground.rpcs > 0 && r.stats[2].foreground.rpcs > 0);
}
