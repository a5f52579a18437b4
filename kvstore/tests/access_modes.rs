//! Access modes of RACE tables: one-sided, RPC (the memory node's workers run the
//! index operation next to memory) and hybrid (one-sided first, RPC past k round
//! trips), over `udp` to memory nodes with RPC workers.
//!
//! - the RPC operations give the answers one-sided ones give, and count as RPCs;
//! - `rpc` without workers is a clear error, `hybrid` then stays one-sided; `rpc` is
//!   refused on replicated tables;
//! - Clover reads in `rpc` mode walk to the tail by RPC, Clover writes search the
//!   tail and link in one RPC;
//! - hybrid takes no RPC in a run without fingerprint collisions or contention, and
//!   does when its threshold is low;
//! - one-sided, RPC and hybrid sessions mixed on one table are linearizable, once on
//!   a clean network and once through the fault-injecting relay;
//! - a worker that dies in the middle of a write leaves the write applied entirely
//!   or not at all, and its client gets an error;
//! - write-based RPC (requests WRITTEN into the queue pair's ring on the node) gives
//!   the answers SEND-based RPC gives, executes every request exactly once through
//!   loss, duplication and reordering, and mixes linearizably with one-sided and
//!   SEND-based sessions.

#[path = "support/rpc_cluster.rs"]
mod rpc_cluster;
use rpc_cluster::cluster;
use std::collections::HashMap;
use std::time::Duration;

use kvstore::{
    AccessMode, AccessOptions, Client, ClientOptions, KvError, RpcTransport, TableSpec,
    TransportKind,
};
use testbed::lincheck::{Config, Verdict, check};
use testbed::relay::{FaultRelay, Faults};
use testbed::workload::{Workload, run_with_access, run_with_clients};
use testbed::{Embedded, EmbeddedOptions, Security};

fn options(mode: AccessMode) -> ClientOptions {
    ClientOptions::with_transport(TransportKind::Udp)
        .with_grace(Duration::from_millis(20))
        .with_race(kvstore::RaceOptions::default().with_subtable_groups(16))
        .with_rc(verbs::rc::RcConfig {
            retransmit_timeout: Duration::from_millis(20),
            max_retries: 30,
            ..verbs::rc::RcConfig::default()
        })
        .with_access(AccessOptions::default().with_mode(mode))
}

/// [`options`] with a grace period and an insert view age that no pause of this
/// machine outlasts, for tests that count round trips or RPCs: every operation takes
/// the round trips its path costs, never one more because time passed (a look grown
/// older than the 5 ms view age is taken again, and under hybrid access that can push
/// a write past its threshold to an RPC).
fn patient(mode: AccessMode) -> ClientOptions {
    options(mode).with_grace(Duration::from_secs(20)).with_race(
        kvstore::RaceOptions::default()
            .with_subtable_groups(16)
            .with_insert_view_age(Duration::from_secs(10)),
    )
}

#[test]
fn rpc_operations_answer_as_one_sided_ones_and_count_as_rpcs() {
    let (_cluster, client) = cluster(1, 2, options(AccessMode::Rpc));
    client
        .create_table("t", &TableSpec::race(256))
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    assert_eq!(t.access(), AccessMode::Rpc);
    s.block_on(async {
        assert_eq!(t.get(b"k").await.unwrap(), None);
        t.insert(b"k", b"v1").await.unwrap();
        assert!(matches!(
            t.insert(b"k", b"x").await,
            Err(KvError::AlreadyExists)
        ));
        assert_eq!(t.get(b"k").await.unwrap(), Some(b"v1".to_vec()));
        t.update(b"k", b"v2").await.unwrap();
        t.put(b"k", b"v3").await.unwrap();
        t.put(b"j", b"w").await.unwrap();
        assert_eq!(t.get(b"k").await.unwrap(), Some(b"v3".to_vec()));
        t.delete(b"k").await.unwrap();
        assert!(matches!(t.delete(b"k").await, Err(KvError::NotFound)));
        assert!(matches!(t.update(b"k", b"z").await, Err(KvError::NotFound)));
    });
    let stats = s.stats().foreground;
    println!("rpc session: {stats:?}");
    assert_eq!(stats.rpcs, 11, "one RPC per operation");
    // A one-sided session sees what the RPCs did.
    let s2 = client.session().expect("session");
    let t2 = s2.table("t").expect("table");
    t2.set_access(AccessMode::OneSided).expect("mode");
    s2.block_on(async {
        assert_eq!(t2.get(b"k").await.unwrap(), None);
        assert_eq!(t2.get(b"j").await.unwrap(), Some(b"w".to_vec()));
        t2.update(b"j", b"w2").await.unwrap();
    });
    assert_eq!(s2.stats().foreground.rpcs, 0);
    s.block_on(async {
        assert_eq!(t.get(b"j").await.unwrap(), Some(b"w2".to_vec()));
    });
}

#[test]
fn rpc_without_workers_is_a_clear_error_and_hybrid_stays_one_sided() {
    let (_cluster, client) = cluster(1, 0, options(AccessMode::Rpc));
    client
        .create_table("t", &TableSpec::race(256))
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    let e = s.block_on(t.put(b"k", b"v")).expect_err("no workers");
    assert!(
        matches!(&e, KvError::Unsupported(m) if m.contains("--rpc-workers")),
        "{e:?}"
    );
    let e = s.block_on(t.get(b"k")).expect_err("no workers");
    assert!(matches!(e, KvError::Unsupported(_)), "{e:?}");
    t.set_access(AccessMode::Hybrid).expect("hybrid");
    s.block_on(async {
        t.put(b"k", b"v").await.unwrap();
        assert_eq!(t.get(b"k").await.unwrap(), Some(b"v".to_vec()));
    });
    assert_eq!(s.stats().foreground.rpcs, 0);
    // Clover: writes (of a new key and of a known one) and reads alike.
    client
        .create_table("c", &TableSpec::clover(256))
        .expect("table");
    let c = s.table("c").expect("table");
    c.set_access(AccessMode::Hybrid).expect("hybrid");
    s.block_on(c.put(b"known", b"v")).expect("hybrid put");
    c.set_access(AccessMode::Rpc).expect("rpc");
    for key in [&b"new"[..], b"known"] {
        let e = s.block_on(c.put(key, b"w")).expect_err("no workers");
        assert!(
            matches!(&e, KvError::Unsupported(m) if m.contains("--rpc-workers")),
            "{e:?}"
        );
    }
    assert_eq!(s.stats().foreground.rpcs, 0);
}

#[test]
fn rpc_is_refused_on_replicated_tables() {
    let (_cluster, client) = cluster(2, 1, options(AccessMode::OneSided));
    client
        .create_replicated_table("r", &TableSpec::race(256), 2)
        .expect("replicated table");
    let s = client.session().expect("session");
    let r = s.table("r").expect("table");
    let e = r.set_access(AccessMode::Rpc).expect_err("replicated");
    assert!(
        matches!(&e, KvError::Unsupported(m) if m.contains("replicated")),
        "{e:?}"
    );
    // Hybrid on the replicated table runs one-sided.
    r.set_access(AccessMode::Hybrid).expect("hybrid");
    s.block_on(async {
        r.put(b"k", b"v").await.unwrap();
        assert_eq!(r.get(b"k").await.unwrap(), Some(b"v".to_vec()));
    });
    assert_eq!(s.stats().foreground.rpcs, 0);
}

/// Clover reads in `rpc` mode: the walk from the first node read to the tail is one
/// RPC; the values are the ones one-sided readers see.
#[test]
fn clover_reads_walk_to_the_tail_by_rpc() {
    // A lagging shortcut, so readers have successors to follow.
    let mut o = options(AccessMode::OneSided);
    o.clover.shortcut_lag = 64;
    let (_cluster, client) = cluster(1, 1, o.clone());
    client
        .create_table("c", &TableSpec::clover(256))
        .expect("table");
    let writer = client.session().expect("session");
    let w = writer.table("c").expect("table");
    // Each reader is a session of a client of its own: a session starts from the
    // latest tail another session of its client left in the client's cache.
    let own_client = || {
        Client::in_process(
            &client.metadata_url(),
            o.clone(),
            HashMap::new(),
            Box::new(()),
        )
        .expect("client")
    };
    let (rpc_client, one_sided_client) = (own_client(), own_client());
    let reader = rpc_client.session().expect("session");
    let r = reader.table("c").expect("table");
    r.set_access(AccessMode::Rpc).expect("rpc on clover");
    let one_sided = one_sided_client.session().expect("session");
    let o = one_sided.table("c").expect("table");
    for round in 0..4 {
        writer.block_on(async {
            for i in 0..6 {
                w.put(b"k", format!("v{round}-{i}").as_bytes())
                    .await
                    .unwrap();
            }
        });
        let want = Some(format!("v{round}-5").into_bytes());
        assert_eq!(reader.block_on(r.get(b"k")).unwrap(), want, "rpc reader");
        assert_eq!(
            one_sided.block_on(o.get(b"k")).unwrap(),
            want,
            "one-sided reader"
        );
    }
    let rpc = reader.stats().foreground;
    let plain = one_sided.stats().foreground;
    println!("clover rpc reader: {rpc:?}\nclover one-sided reader: {plain:?}");
    assert!(rpc.rpcs >= 3, "{rpc:?}");
    assert!(rpc.round_trips < plain.round_trips, "{rpc:?} vs {plain:?}");
    assert_eq!(plain.rpcs, 0);
    // A Clover write in `rpc` mode: the tail search and the link are one RPC.
    let before = reader.stats().foreground.rpcs;
    reader.block_on(r.put(b"k", b"by rpc")).unwrap();
    assert_eq!(reader.stats().foreground.rpcs, before + 1);
    assert_eq!(
        one_sided.block_on(o.get(b"k")).unwrap(),
        Some(b"by rpc".to_vec())
    );
}

#[test]
fn hybrid_takes_rpcs_only_past_its_threshold() {
    let (_cluster, client) = cluster(1, 1, patient(AccessMode::Hybrid));
    client
        .create_table("t", &TableSpec::race(256))
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    let keys: Vec<Vec<u8>> = (0..12).map(|i| format!("key{i}").into_bytes()).collect();
    // One task, no contention; these keys share no fingerprint in their buckets.
    s.block_on(async {
        for k in &keys {
            t.insert(k, b"a").await.unwrap();
        }
        for k in &keys {
            assert_eq!(t.get(k).await.unwrap(), Some(b"a".to_vec()));
            t.update(k, b"b").await.unwrap();
        }
        for k in &keys[..6] {
            t.delete(k).await.unwrap();
        }
    });
    let stats = s.stats().foreground;
    println!("hybrid k=3: {stats:?}");
    assert_eq!(stats.rpcs, 0, "collision-free, uncontended: one-sided");

    // With k = 1 every write and every search that finds a slot is finished by RPC.
    let low = patient(AccessMode::Hybrid).with_access(
        AccessOptions::default()
            .with_mode(AccessMode::Hybrid)
            .with_hybrid_k(1),
    );
    let client = Client::in_process(&client.metadata_url(), low, HashMap::new(), Box::new(()))
        .expect("client");
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    s.block_on(async {
        for k in &keys[6..] {
            assert_eq!(t.get(k).await.unwrap(), Some(b"b".to_vec()));
            t.update(k, b"c").await.unwrap();
            assert_eq!(t.get(k).await.unwrap(), Some(b"c".to_vec()));
        }
        for k in &keys[..6] {
            assert_eq!(t.get(k).await.unwrap(), None);
            t.insert(k, b"d").await.unwrap();
        }
    });
    let stats = s.stats().foreground;
    println!("hybrid k=1: {stats:?}");
    assert_eq!(
        stats.rpcs,
        6 * 3 + 6,
        "gets that find a slot, updates, inserts"
    );

    // With k = 2, an update of a key whose slot the client saw just before (it just
    // read the key) WRITEs the block and CASes the slot in one round trip, one-sided;
    // after half a grace period it would read the block with the buckets instead: two
    // round trips, still no RPC.
    let two = patient(AccessMode::Hybrid).with_access(
        AccessOptions::default()
            .with_mode(AccessMode::Hybrid)
            .with_hybrid_k(2),
    );
    let client = Client::in_process(&client.metadata_url(), two, HashMap::new(), Box::new(()))
        .expect("client");
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    s.block_on(async {
        for k in &keys {
            assert!(t.get(k).await.unwrap().is_some());
            t.update(k, b"e").await.unwrap();
            let op = s.last_op();
            assert_eq!((op.rpcs, op.round_trips), (0, 1), "{op:?}");
        }
    });
}

fn check_mixed(client: &Client, spec: &TableSpec, seed: u64, label: &str) {
    client.create_table("hot", spec).expect("table");
    let modes = [AccessMode::OneSided, AccessMode::Rpc, AccessMode::Hybrid];
    let r = run_with_access(
        client,
        "hot",
        Workload {
            threads: 3,
            tasks: 3,
            ops_per_task: 80,
            keys: 3,
            seed,
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
        "[{label}] {} operations, {} unresolved ({:?}); (mode, rpcs, round trips): {per_mode:?}; {:?}",
        r.history.len(),
        r.errors.len(),
        r.errors.iter().take(3).collect::<Vec<_>>(),
        report.steps
    );
    if let Verdict::Violation(v) = &report.verdict {
        panic!("[{label}] not linearizable:\n{v}");
    }
    assert!(report.is_linearizable(), "[{label}] {:?}", report.verdict);
    assert!(
        r.errors.len() * 20 <= r.history.len(),
        "[{label}] too many unresolved operations: {:?}",
        r.errors.iter().take(5).collect::<Vec<_>>()
    );
    assert_eq!(r.stats[0].foreground.rpcs, 0, "the one-sided session");
    assert!(r.stats[1].foreground.rpcs > 0, "the rpc session");
}

#[test]
fn one_sided_rpc_and_hybrid_sessions_on_one_table_are_linearizable() {
    let o = options(AccessMode::OneSided).with_access(AccessOptions::default().with_hybrid_k(2));
    let (_cluster, client) = cluster(1, 2, o);
    check_mixed(&client, &TableSpec::race(256), 11, "udp");
}

#[test]
fn mixed_sessions_on_a_clover_table_are_linearizable() {
    let mut o =
        options(AccessMode::OneSided).with_access(AccessOptions::default().with_hybrid_k(1));
    o.clover.shortcut_lag = 16;
    let (_cluster, client) = cluster(1, 2, o);
    check_mixed(&client, &TableSpec::clover(256), 14, "clover udp");
}

#[test]
fn mixed_sessions_are_linearizable_with_loss_duplication_reordering() {
    let relay = FaultRelay::new(Faults {
        drop: 0.03,
        duplicate: 0.03,
        reorder: 0.03,
        seed: 12,
    });
    let mut o =
        options(AccessMode::OneSided).with_access(AccessOptions::default().with_hybrid_k(2));
    o.connection.udp_relay = Some(relay.clone());
    let (cluster, client) = cluster(1, 2, o);
    check_mixed(&client, &TableSpec::race(256), 13, "udp+faults");
    use std::sync::atomic::Ordering::Relaxed;
    let c = &relay.counts;
    assert!(c.dropped.load(Relaxed) > 0 && c.duplicated.load(Relaxed) > 0);
    drop(client);
    drop(cluster);
    relay.stop();
}

#[test]
fn a_worker_dying_mid_write_leaves_it_whole_or_absent() {
    let o = options(AccessMode::Rpc).with_access(
        AccessOptions::default()
            .with_mode(AccessMode::Rpc)
            .with_rpc_timeout(Duration::from_millis(400)),
    );
    // Three workers: each crash below costs one.
    let (embedded, client) = cluster(1, 3, o);
    let node = embedded.memnode_ids()[0];
    let handle = embedded.memnode(node).expect("memnode");
    client
        .create_table("t", &TableSpec::race(256))
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    s.block_on(t.insert(b"old", b"v1")).expect("insert");

    // An update whose worker dies right after its CAS: the client gets an error; the
    // update happened entirely (the CAS is the whole update).
    handle.crash_next_rpc_write();
    let e = s.block_on(t.update(b"old", b"v2")).expect_err("no reply");
    assert!(matches!(e, KvError::Unavailable(_)), "{e:?}");
    assert!(!handle.rpc_crash_armed());
    let got = s.block_on(t.get(b"old")).expect("the other worker answers");
    assert_eq!(got, Some(b"v2".to_vec()));

    // An insert whose worker dies between its tentative CAS and the confirmation:
    // the client gets an error and nobody sees the key.
    handle.crash_next_rpc_write();
    let e = s.block_on(t.insert(b"new", b"n1")).expect_err("no reply");
    assert!(matches!(e, KvError::Unavailable(_)), "{e:?}");
    assert_eq!(s.block_on(t.get(b"new")).expect("get"), None);
    t.set_access(AccessMode::OneSided).expect("mode");
    assert_eq!(s.block_on(t.get(b"new")).expect("get"), None);
    // The abandoned tentative slot is cleared after the lock timeout: the key can
    // be inserted again.
    s.block_on(t.insert(b"new", b"n2"))
        .expect("insert after the timeout");
    assert_eq!(
        s.block_on(t.get(b"new")).expect("get"),
        Some(b"n2".to_vec())
    );
    t.set_access(AccessMode::Rpc).expect("mode");
    assert_eq!(
        s.block_on(t.get(b"new")).expect("get"),
        Some(b"n2".to_vec())
    );
}

#[test]
fn mixed_sessions_on_a_clover_table_are_linearizable_with_faults() {
    let relay = FaultRelay::new(Faults {
        drop: 0.03,
        duplicate: 0.03,
        reorder: 0.03,
        seed: 15,
    });
    let mut o =
        options(AccessMode::OneSided).with_access(AccessOptions::default().with_hybrid_k(1));
    o.clover.shortcut_lag = 16;
    o.connection.udp_relay = Some(relay.clone());
    let (cluster, client) = cluster(1, 2, o);
    check_mixed(&client, &TableSpec::clover(256), 16, "clover udp+faults");
    use std::sync::atomic::Ordering::Relaxed;
    assert!(relay.counts.dropped.load(Relaxed) > 0);
    drop(client);
    drop(cluster);
    relay.stop();
}

/// Many keys in one-group subtables (21 slots each, so 120 keys split them several
/// times): splits, stale directory caches and full buckets, which the node hands
/// back to the one-sided path, happen during the run.
#[test]
fn mixed_sessions_are_linearizable_across_splits() {
    let mut o =
        options(AccessMode::OneSided).with_access(AccessOptions::default().with_hybrid_k(2));
    o.race.subtable_groups = 1;
    let (_cluster, client) = cluster(1, 2, o);
    client
        .create_table("many", &TableSpec::race(256))
        .expect("table");
    let modes = [AccessMode::Rpc, AccessMode::OneSided, AccessMode::Hybrid];
    let r = run_with_access(
        &client,
        "many",
        Workload {
            threads: 3,
            tasks: 3,
            ops_per_task: 150,
            keys: 120,
            seed: 17,
        },
        &modes,
    );
    let report = check(&r.history, &Config::default()).expect("well-formed history");
    let rpcs: Vec<u64> = r.stats.iter().map(|s| s.foreground.rpcs).collect();
    let restarts: Vec<u64> = r.stats.iter().map(|s| s.foreground.restarts).collect();
    println!(
        "[splits] {} operations, {} unresolved ({:?}); rpcs per session {rpcs:?}, restarts {restarts:?}",
        r.history.len(),
        r.errors.len(),
        r.errors.iter().take(3).collect::<Vec<_>>()
    );
    if let Verdict::Violation(v) = &report.verdict {
        panic!("[splits] not linearizable:\n{v}");
    }
    assert!(report.is_linearizable(), "{:?}", report.verdict);
    assert!(r.errors.len() * 20 <= r.history.len(), "{:?}", r.errors);
    assert!(rpcs[0] > 0);
}

/// On queue pairs scoped to grants (their own key, the grant's windows), RPCs carry
/// the queue pair's key and are admitted by the same scope as one-sided verbs.
#[test]
fn rpcs_work_through_scoped_queue_pairs() {
    let o = options(AccessMode::Rpc);
    let embedded = Embedded::start_with_rpc_workers(
        &EmbeddedOptions {
            transport: TransportKind::Udp,
            client: o.clone(),
            ..EmbeddedOptions::default()
        },
        Security::Grants,
        1,
    )
    .expect("cluster");
    let client = Client::in_process(&embedded.metadata_url(), o, HashMap::new(), Box::new(()))
        .expect("client");
    client
        .create_table("r", &TableSpec::race(256))
        .expect("table");
    client
        .create_table("c", &TableSpec::clover(256))
        .expect("table");
    let s = client.session().expect("session");
    let r = s.table("r").expect("table");
    let c = s.table("c").expect("table");
    s.block_on(async {
        for i in 0..50u32 {
            let k = format!("k{i}");
            r.insert(k.as_bytes(), &i.to_le_bytes()).await.unwrap();
            c.put(b"chain", &i.to_le_bytes()).await.unwrap();
        }
        for i in 0..50u32 {
            let k = format!("k{i}");
            assert_eq!(
                r.get(k.as_bytes()).await.unwrap(),
                Some(i.to_le_bytes().to_vec())
            );
        }
        assert_eq!(
            c.get(b"chain").await.unwrap(),
            Some(49u32.to_le_bytes().to_vec())
        );
    });
    let stats = s.stats().foreground;
    assert!(stats.rpcs >= 100, "{stats:?}");
    let node = embedded
        .memnode(embedded.memnode_ids()[0])
        .expect("memnode");
    let rpc = node.rpc_stats();
    println!("{rpc:?}");
    assert_eq!((rpc.refused, rpc.malformed), (0, 0), "{rpc:?}");
    assert!(
        node.qps().list().iter().all(|q| q.rkey.is_some()),
        "scoped queue pairs"
    );
}

/// The RPC counters of the cluster's one memory node.
fn node_rpc_stats(cluster: &Embedded) -> memnode::rpc::RpcStatsSnapshot {
    let id = cluster.memnode_ids()[0];
    cluster.memnode(id).expect("the memory node").rpc_stats()
}

fn write_transport(o: ClientOptions) -> ClientOptions {
    let access = o.access.with_transport(RpcTransport::Write);
    o.with_access(access)
}

/// One script of RACE operations; every answer, in order.
fn race_script(t: &kvstore::Table, s: &kvstore::Session) -> Vec<String> {
    s.block_on(async {
        let mut answers = Vec::new();
        let mut note = |r: Result<Option<Vec<u8>>, KvError>| {
            answers.push(match r {
                Ok(v) => format!("ok {v:?}"),
                Err(e) => format!("err {}", e.kind()),
            })
        };
        note(t.get(b"k").await);
        note(t.insert(b"k", b"v1").await.map(|_| None));
        note(t.insert(b"k", b"x").await.map(|_| None));
        note(t.get(b"k").await);
        note(t.update(b"k", b"v2").await.map(|_| None));
        note(t.put(b"k", b"v3").await.map(|_| None));
        note(t.put(b"j", b"w").await.map(|_| None));
        note(t.get(b"k").await);
        note(t.delete(b"k").await.map(|_| None));
        note(t.delete(b"k").await.map(|_| None));
        note(t.update(b"k", b"z").await.map(|_| None));
        note(t.get(b"j").await);
        answers
    })
}

#[test]
fn write_based_rpcs_answer_as_send_rpcs() {
    let (cluster, send_client) = cluster(1, 2, options(AccessMode::Rpc));
    let write_client = Client::in_process(
        &cluster.metadata_url(),
        write_transport(options(AccessMode::Rpc)),
        HashMap::new(),
        Box::new(()),
    )
    .expect("client");
    send_client
        .create_table("by-send", &TableSpec::race(256))
        .expect("table");
    send_client
        .create_table("by-write", &TableSpec::race(256))
        .expect("table");
    let s = send_client.session().expect("session");
    let by_send = race_script(&s.table("by-send").expect("table"), &s);
    let rpcs_by_send = s.stats().foreground.rpcs;
    assert_eq!(node_rpc_stats(&cluster).ring_requests, 0, "SENDs only");
    let w = write_client.session().expect("session");
    let by_write = race_script(&w.table("by-write").expect("table"), &w);
    println!("answers: {by_write:?}");
    assert_eq!(by_write, by_send);
    let rpcs_by_write = w.stats().foreground.rpcs;
    assert_eq!(
        rpcs_by_write, rpcs_by_send,
        "one RPC per operation either way"
    );
    let node = node_rpc_stats(&cluster);
    assert_eq!(
        node.ring_requests, rpcs_by_write,
        "every write-transport RPC came through the ring"
    );
    // A one-sided session sees what the write-based RPCs did.
    let s2 = send_client.session().expect("session");
    let t2 = s2.table("by-write").expect("table");
    t2.set_access(AccessMode::OneSided).expect("mode");
    s2.block_on(async {
        assert_eq!(t2.get(b"k").await.unwrap(), None);
        assert_eq!(t2.get(b"j").await.unwrap(), Some(b"w".to_vec()));
    });
}

#[test]
fn write_based_rpcs_run_exactly_once_through_loss_duplication_reordering() {
    let relay = FaultRelay::new(Faults {
        drop: 0.05,
        duplicate: 0.05,
        reorder: 0.05,
        seed: 21,
    });
    let mut o = write_transport(options(AccessMode::Rpc));
    o.connection.udp_relay = Some(relay.clone());
    let (cluster, client) = cluster(1, 1, o);
    client
        .create_table("t", &TableSpec::race(512))
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    let keys = 60u32;
    s.block_on(async {
        for i in 0..keys {
            let k = format!("key{i}");
            t.insert(k.as_bytes(), b"first").await.unwrap();
        }
        for i in 0..keys {
            let k = format!("key{i}");
            // Every first insert answered Ok: none ran twice (the second run of an
            // insert answers that the key exists); the node's counters below say so
            // for every request.
            assert!(matches!(
                t.insert(k.as_bytes(), b"again").await,
                Err(KvError::AlreadyExists)
            ));
            t.update(k.as_bytes(), format!("v{i}").as_bytes())
                .await
                .unwrap();
        }
        for i in 0..keys {
            let k = format!("key{i}");
            assert_eq!(
                t.get(k.as_bytes()).await.unwrap(),
                Some(format!("v{i}").into_bytes())
            );
            t.delete(k.as_bytes()).await.unwrap();
        }
    });
    let stats = s.stats().foreground;
    let node = node_rpc_stats(&cluster);
    use std::sync::atomic::Ordering::Relaxed;
    let c = &relay.counts;
    println!(
        "client rpcs {}, node ring requests {}, requests {}; relay dropped {}, duplicated {}, reordered {}",
        stats.rpcs,
        node.ring_requests,
        node.requests,
        c.dropped.load(Relaxed),
        c.duplicated.load(Relaxed),
        c.reordered.load(Relaxed)
    );
    assert!(c.dropped.load(Relaxed) > 0 && c.duplicated.load(Relaxed) > 0);
    assert_eq!(stats.rpcs, u64::from(keys) * 5, "one RPC per operation");
    // Exactly once: every request the client wrote was executed once, none by SEND.
    assert_eq!(node.ring_requests, stats.rpcs);
    assert_eq!(node.requests, stats.rpcs);
    drop(s);
    drop(client);
    drop(cluster);
    relay.stop();
}

#[test]
fn one_sided_send_rpc_and_write_rpc_sessions_are_linearizable() {
    let (cluster, send_client) = cluster(1, 2, options(AccessMode::OneSided));
    let write_client = Client::in_process(
        &cluster.metadata_url(),
        write_transport(options(AccessMode::OneSided)),
        HashMap::new(),
        Box::new(()),
    )
    .expect("client");
    send_client
        .create_table("hot", &TableSpec::race(256))
        .expect("table");
    let sessions = [
        (send_client.clone(), AccessMode::OneSided),
        (send_client.clone(), AccessMode::Rpc),
        (write_client.clone(), AccessMode::Rpc),
    ];
    let r = run_with_clients(
        &sessions,
        "hot",
        Workload {
            threads: 3,
            tasks: 3,
            ops_per_task: 60,
            keys: 3,
            seed: 31,
        },
    );
    let report = check(&r.history, &Config::default()).expect("well-formed history");
    let rpcs: Vec<u64> = r.stats.iter().map(|s| s.foreground.rpcs).collect();
    let node = node_rpc_stats(&cluster);
    println!(
        "{} operations, {} unresolved; rpcs per session {rpcs:?}; node requests {}, by ring {}; {:?}",
        r.history.len(),
        r.errors.len(),
        node.requests,
        node.ring_requests,
        report.steps
    );
    if let Verdict::Violation(v) = &report.verdict {
        panic!("not linearizable:\n{v}");
    }
    assert!(report.is_linearizable(), "{:?}", report.verdict);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(rpcs[0], 0, "the one-sided session");
    assert!(rpcs[1] > 0 && rpcs[2] > 0);
    assert_eq!(
        node.ring_requests, rpcs[2],
        "the write session's RPCs by ring"
    );
    assert_eq!(node.requests, rpcs[1] + rpcs[2]);
}

/// An insert that could claim a predicted slot (its buckets read before) takes two
/// round trips one-sided: with a hybrid threshold of one it goes by RPC instead, as
/// every other write past the threshold does.
#[test]
fn predicted_insert_claims_stay_within_the_hybrid_threshold() {
    let one = options(AccessMode::OneSided).with_access(AccessOptions::default().with_hybrid_k(1));
    let (_cluster, client) = cluster(1, 2, one);
    client
        .create_table("k", &TableSpec::race(256))
        .expect("table");
    let s = client.session().expect("session");
    let one_sided = s.table("k").expect("table");
    let hybrid = s.table("k").expect("table");
    hybrid.set_access(AccessMode::Hybrid).expect("hybrid");
    // One-sided inserts fill the client's view of the buckets.
    s.block_on(async {
        for i in 0..200u32 {
            one_sided
                .insert(format!("a{i}").as_bytes(), b"v")
                .await
                .unwrap();
        }
    });
    let predicted = s.block_on(async {
        let mut two = 0;
        for i in 0..50u32 {
            one_sided
                .insert(format!("b{i}").as_bytes(), b"v")
                .await
                .unwrap();
            two += u32::from(s.last_op().round_trips == 2);
        }
        two
    });
    assert!(
        predicted > 25,
        "one-sided: predicted claims ({predicted} of 50)"
    );
    s.block_on(async {
        for i in 0..50u32 {
            hybrid
                .insert(format!("c{i}").as_bytes(), b"v")
                .await
                .unwrap();
            let op = s.last_op();
            assert_eq!(op.rpcs, 1, "hybrid k = 1: {op:?}");
            assert!(op.round_trips - op.rpcs <= 1, "{op:?}");
        }
        for i in 0..50u32 {
            let key = format!("c{i}");
            assert_eq!(
                one_sided.get(key.as_bytes()).await.unwrap(),
                Some(b"v".to_vec())
            );
        }
    });
}
