//! Access modes of in-place tables: the memory node's RPC workers read and write
//! tuples under the pessimistic latch (operations 10 and 11), next to one-sided
//! clients of the same table, over `udp` to memory nodes with RPC workers.
//!
//! - `rpc` answers as one-sided does, one RPC per probed tuple; refused with a clear
//!   error for schemes the node does not execute; without workers a clear error and
//!   `hybrid` one-sided;
//! - `hybrid` is one-sided until it finds a latch held, then goes to the node (the
//!   mixed runs require that its session handed operations to the node);
//! - one-sided, RPC and hybrid sessions on one table are linearizable, on a clean
//!   network, through loss, duplication and reordering, and with write-based RPC;
//! - a worker that dies after its write: the client gets an error, the tuple is
//!   never half-read (it reads as possibly torn until written again), the latch is
//!   broken after the lease and the table goes on.

#[path = "support/rpc_cluster.rs"]
mod rpc_cluster;
use rpc_cluster::cluster;
use std::time::Duration;

use kvstore::{
    AccessMode, AccessOptions, Client, ClientOptions, KvError, RpcTransport, SchemeSpec, TableSpec,
    TransportKind,
};
use testbed::lincheck::{Config, Verdict, check};
use testbed::relay::{FaultRelay, Faults};
use testbed::workload::{Workload, run_with_access};

fn options(mode: AccessMode) -> ClientOptions {
    ClientOptions::with_transport(TransportKind::Udp)
        .with_retry(kvstore::RetryOptions::default().with_lock_timeout(Duration::from_millis(300)))
        .with_rc(verbs::rc::RcConfig {
            retransmit_timeout: Duration::from_millis(20),
            max_retries: 30,
            ..verbs::rc::RcConfig::default()
        })
        .with_access(AccessOptions::default().with_mode(mode))
}

fn scheme(name: &str) -> SchemeSpec {
    name.parse().expect("scheme")
}

#[test]
fn rpc_answers_as_one_sided_with_one_rpc_per_tuple() {
    for name in [
        "pessimistic-rw-async-embedded",
        "pessimistic-x-wc-separate",
        "pessimistic-x-basic-embedded-wu",
    ] {
        let (_cluster, client) = cluster(1, 2, options(AccessMode::Rpc));
        client
            .create_table("t", &TableSpec::in_place(scheme(name), 128, 256))
            .expect("table");
        let s = client.session().expect("session");
        let t = s.table("t").expect("table");
        assert_eq!(t.access(), AccessMode::Rpc);
        s.block_on(async {
            assert_eq!(t.get(b"k").await, Ok(None), "{name}");
            t.insert(b"k", b"v1").await.unwrap();
            assert_eq!(t.insert(b"k", b"v2").await, Err(KvError::AlreadyExists));
            assert_eq!(t.get(b"k").await.unwrap().unwrap(), b"v1");
            // One RPC, one round trip each, whatever the scheme's level.
            for op in 0..4 {
                match op {
                    0 => assert_eq!(t.get(b"k").await.unwrap().unwrap(), b"v1"),
                    1 => t.put(b"k", b"v3").await.unwrap(),
                    2 => t.update(b"k", b"v4").await.unwrap(),
                    _ => assert_eq!(t.get(b"k").await.unwrap().unwrap(), b"v4"),
                }
                let c = s.last_op();
                assert_eq!((c.rpcs, c.round_trips), (1, 1), "{name} op {op}: {c:?}");
            }
            t.delete(b"k").await.unwrap();
            assert_eq!(t.get(b"k").await, Ok(None));
            assert_eq!(t.delete(b"k").await, Err(KvError::NotFound));
            assert_eq!(t.update(b"k", b"x").await, Err(KvError::NotFound));
            t.insert(b"k", b"again").await.unwrap();
            assert!(matches!(
                t.put(b"k", &[0; 129]).await,
                Err(KvError::ValueTooLarge { limit: 128, .. })
            ));
            // Many keys: probing past other keys' tuples at the node.
            for i in 0..100u8 {
                t.put(format!("key{i}").as_bytes(), &[i; 128])
                    .await
                    .unwrap();
            }
            for i in 0..100u8 {
                let v = t.get(format!("key{i}").as_bytes()).await.unwrap();
                assert_eq!(v, Some(vec![i; 128]), "{name} key{i}");
            }
        });
        // A one-sided handle sees what the node wrote, and the node what it writes.
        t.set_access(AccessMode::OneSided).expect("mode");
        s.block_on(async {
            assert_eq!(t.get(b"k").await.unwrap().unwrap(), b"again");
            t.put(b"key7", b"one-sided").await.unwrap();
            assert_eq!(s.last_op().rpcs, 0);
        });
        t.set_access(AccessMode::Rpc).expect("mode");
        assert_eq!(
            s.block_on(t.get(b"key7")).unwrap().unwrap(),
            b"one-sided".to_vec()
        );
        let stats = s.stats();
        assert!(stats.foreground.rpcs > 200, "{stats:?}");
    }
}

#[test]
fn rpc_is_refused_for_schemes_the_node_does_not_run_and_without_workers() {
    let (_cluster, client) = cluster(1, 2, options(AccessMode::OneSided));
    client
        .create_table("v", &TableSpec::in_place(scheme("versioning"), 64, 64))
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("v").expect("table");
    let e = t.set_access(AccessMode::Rpc).expect_err("refused");
    let text = e.to_string();
    assert!(
        matches!(e, KvError::Unsupported(_)) && text.contains("versioning"),
        "{text}"
    );
    // hybrid on it is one-sided.
    t.set_access(AccessMode::Hybrid).expect("hybrid");
    s.block_on(t.put(b"k", b"v")).expect("put");
    assert_eq!(s.last_op().rpcs, 0);

    // No workers: rpc is a clear error, hybrid one-sided.
    let (_plain, client) = cluster(1, 0, options(AccessMode::OneSided));
    client
        .create_table("p", &TableSpec::in_place(scheme("pessimistic"), 64, 64))
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("p").expect("table");
    t.set_access(AccessMode::Rpc).expect("mode");
    let e = s.block_on(t.put(b"k", b"v")).expect_err("no workers");
    assert!(e.to_string().contains("--rpc-workers"), "{e}");
    t.set_access(AccessMode::Hybrid).expect("mode");
    s.block_on(t.put(b"k", b"v")).expect("hybrid put");
    assert_eq!(s.block_on(t.get(b"k")).unwrap().unwrap(), b"v".to_vec());
    assert_eq!(s.stats().foreground.rpcs, 0);
}

#[test]
fn a_worker_dying_after_its_write_leaves_no_half_value_and_no_latch_for_good() {
    let o = options(AccessMode::Rpc)
        .with_access(
            AccessOptions::default()
                .with_mode(AccessMode::Rpc)
                .with_rpc_timeout(Duration::from_millis(400)),
        )
        .with_retry(kvstore::RetryOptions::default().with_lock_timeout(Duration::from_millis(300)));
    // Three workers: the crash costs one.
    let (embedded, client) = cluster(1, 3, o);
    let node = embedded.memnode_ids()[0];
    let handle = embedded.memnode(node).expect("memnode");
    let spec = scheme("pessimistic-rw-wc-embedded");
    client
        .create_table("t", &TableSpec::in_place(spec, 64, 64))
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    s.block_on(t.put(b"k", &[1; 64])).expect("put");

    // The worker stops after writing the whole new value, still holding the latch
    // (with this client's owner word): the client gets an error.
    handle.crash_next_rpc_write();
    let e = s.block_on(t.put(b"k", &[2; 64])).expect_err("no reply");
    assert!(matches!(e, KvError::Unavailable(_)), "{e:?}");
    assert!(!handle.rpc_crash_armed());

    // A one-sided reader waits for the lease, breaks the latch, and gets an error
    // (the tuple may hold part of a write) rather than any value; the node's
    // workers hand the held latch back to the client instead of waiting.
    let reader = client.session().expect("session");
    let r = reader.table("t").expect("table");
    r.set_access(AccessMode::OneSided).expect("mode");
    let e = reader.block_on(r.get(b"k")).expect_err("torn");
    assert!(matches!(e, KvError::Corrupt(_)), "{e:?}");
    // Written again (by RPC), the tuple is whole for everyone.
    s.block_on(t.put(b"k", &[3; 64]))
        .expect("put after the break");
    assert_eq!(reader.block_on(r.get(b"k")).unwrap(), Some(vec![3; 64]));
    assert_eq!(s.block_on(t.get(b"k")).unwrap(), Some(vec![3; 64]));
}

#[test]
fn hybrid_is_one_sided_while_no_latch_is_held() {
    let (_cluster, client) = cluster(1, 2, options(AccessMode::Hybrid));
    client
        .create_table(
            "t",
            &TableSpec::in_place(scheme("pessimistic-rw-wc-embedded"), 64, 64),
        )
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    assert_eq!(t.access(), AccessMode::Hybrid);
    s.block_on(async {
        t.put(b"a", b"1").await.unwrap();
        t.put(b"a", b"2").await.unwrap();
        assert_eq!(t.get(b"a").await.unwrap().unwrap(), b"2");
        t.delete(b"a").await.unwrap();
    });
    let f = s.stats().foreground;
    assert_eq!((f.rpcs, f.handed_to_rpc), (0, 0), "{f:?}");
    // Contended, hybrid sessions hand operations to the node: see the mixed runs
    // below, which require it.
}

fn check_mixed(client: &Client, seed: u64, label: &str) {
    client
        .create_table(
            "hot",
            &TableSpec::in_place(scheme("pessimistic-rw-async-embedded"), 64, 64),
        )
        .expect("table");
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
        .map(|(s, m)| {
            (
                m.name(),
                s.foreground.rpcs,
                s.foreground.handed_to_rpc,
                s.foreground.round_trips,
            )
        })
        .collect();
    println!(
        "[{label}] {} operations, {} unresolved ({:?}); (mode, rpcs, handed to rpc, round \
         trips): {per_mode:?}; {:?}",
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
    // On three hot keys the hybrid session finds latches held and goes to the node.
    let hybrid = r.stats[2].foreground;
    assert!(
        hybrid.handed_to_rpc > 0 && hybrid.rpcs > 0,
        "the hybrid session: {hybrid:?}"
    );
}

#[test]
fn one_sided_rpc_and_hybrid_sessions_on_one_in_place_table_are_linearizable() {
    let (_cluster, client) = cluster(1, 2, options(AccessMode::OneSided));
    check_mixed(&client, 21, "inplace udp");
}

#[test]
fn mixed_in_place_sessions_are_linearizable_with_loss_duplication_reordering() {
    let relay = FaultRelay::new(Faults {
        drop: 0.03,
        duplicate: 0.03,
        reorder: 0.03,
        seed: 22,
    });
    let mut o = options(AccessMode::OneSided);
    o.connection.udp_relay = Some(relay.clone());
    let (cluster, client) = cluster(1, 2, o);
    check_mixed(&client, 23, "inplace udp+faults");
    use std::sync::atomic::Ordering::Relaxed;
    let c = &relay.counts;
    assert!(c.dropped.load(Relaxed) > 0 && c.duplicated.load(Relaxed) > 0);
    drop(client);
    drop(cluster);
    relay.stop();
}

#[test]
fn write_based_rpc_sessions_on_an_in_place_table_are_linearizable() {
    let o = options(AccessMode::OneSided).with_access(
        AccessOptions::default()
            .with_mode(AccessMode::OneSided)
            .with_transport(RpcTransport::Write),
    );
    let (_cluster, client) = cluster(1, 2, o);
    check_mixed(&client, 24, "inplace write-based rpc");
}
