//! In-place tables through the Table API: semantics and round trips, and
//! linearizability of every correct latch scheme under `random` read order
//! (`local`: client threads apply verbs concurrently, with a line gap that widens
//! the window between the lines of a READ) and under injected packet loss,
//! duplication and reordering (`udp` through a fault-injecting relay, memory
//! nodes reading in `random` order). The bookend scheme fails the same check.
//!
//! Over `udp` a memory node applies verbs on one data-plane thread, so a READ
//! never overlaps a WRITE there and torn reads cannot occur on that path; the
//! torn-read failure of bookend is shown on `local`.

use std::time::Duration;

use kvstore::{
    Client, ClientOptions, INPLACE_KEY_CAP as KEY_CAP, KvError, SchemeSpec, TableSpec,
    TransportKind, UnsafeDemo,
};
use testbed::EmbeddedOptions;
use testbed::lincheck::{Config, Verdict, check};
use testbed::relay::{FaultRelay, Faults};
use testbed::workload::{Workload, run_with_values};
use verbs::mem::{LineGap, ReadOrder};

fn options() -> ClientOptions {
    ClientOptions::default()
        .with_retry(kvstore::RetryOptions::default().with_lock_timeout(Duration::from_millis(500)))
        .with_rc(verbs::rc::RcConfig {
            retransmit_timeout: Duration::from_millis(20),
            max_retries: 30,
            ..verbs::rc::RcConfig::default()
        })
}

fn cluster(transport: TransportKind, relay: Option<std::sync::Arc<FaultRelay>>) -> Client {
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 1,
        transport,
        client: {
            let mut o = options();
            o.connection.udp_relay = relay.map(|r| r as _);
            o
        },
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let gap = match transport {
        TransportKind::Local => LineGap::Spin(200),
        _ => LineGap::None,
    };
    assert!(client.set_embedded_read_order(ReadOrder::Random, gap) > 0);
    client
}

#[test]
fn api_semantics_and_round_trips() {
    let client = cluster(TransportKind::Local, None);
    let spec: SchemeSpec = "pessimistic-rw-async-embedded".parse().unwrap();
    client
        .create_table("t", &TableSpec::in_place(spec, 128, 256))
        .unwrap();
    let s = client.session().unwrap();
    let t = s.table("t").unwrap();
    s.block_on(async {
        assert_eq!(t.get(b"k").await, Ok(None));
        t.insert(b"k", b"v1").await.unwrap();
        assert_eq!(t.insert(b"k", b"v2").await, Err(KvError::AlreadyExists));
        assert_eq!(t.get(b"k").await.unwrap().unwrap(), b"v1");
        // Round trips: a get of a present key is one (async unlatch), a put is a
        // consistent read (1) plus a latched write (1).
        t.get(b"k").await.unwrap().unwrap();
        assert_eq!(s.last_op().round_trips, 1);
        t.put(b"k", b"v3").await.unwrap();
        assert_eq!(s.last_op().round_trips, 2);
        t.update(b"k", b"v4").await.unwrap();
        assert_eq!(t.get(b"k").await.unwrap().unwrap(), b"v4");
        t.delete(b"k").await.unwrap();
        assert_eq!(t.get(b"k").await, Ok(None));
        assert_eq!(t.delete(b"k").await, Err(KvError::NotFound));
        assert_eq!(t.update(b"k", b"x").await, Err(KvError::NotFound));
        t.insert(b"k", b"again").await.unwrap();
        assert_eq!(t.get(b"k").await.unwrap().unwrap(), b"again");
        assert!(matches!(
            t.put(b"k", &[0; 129]).await,
            Err(KvError::ValueTooLarge { limit: 128, .. })
        ));
        assert!(matches!(
            t.put(&[7; KEY_CAP + 1], b"v").await,
            Err(KvError::KeyTooLarge { .. })
        ));
        for i in 0..100 {
            t.put(format!("key{i}").as_bytes(), &[i as u8; 128])
                .await
                .unwrap();
        }
        for i in 0..100 {
            assert_eq!(
                t.get(format!("key{i}").as_bytes()).await.unwrap().unwrap(),
                vec![i as u8; 128]
            );
        }
    });
    // The same memory through another session.
    let s2 = client.session().unwrap();
    let t2 = s2.table("t").unwrap();
    s2.block_on(async {
        assert_eq!(t2.get(b"key7").await.unwrap().unwrap(), vec![7u8; 128]);
    });
    // Refused schemes are refused at creation.
    let bad = SchemeSpec::Pessimistic {
        readers: kvstore::Readers::Shared,
        level: kvstore::Level::Basic,
        write_unlatch: true,
        placement: kvstore::Placement::Embedded,
    };
    assert!(matches!(
        client.create_table("bad", &TableSpec::in_place(bad, 64, 256)),
        Err(KvError::InvalidArgument(_))
    ));
}

/// Check one workload on table `name`; returns the verdict.
fn lincheck(client: &Client, name: &str, w: Workload, value_len: usize, label: &str) -> Verdict {
    let r = run_with_values(client, name, w, value_len);
    let report = check(&r.history, &Config::default()).expect("well-formed history");
    let mut total = kvstore::OpStats::default();
    for s in &r.stats {
        total.add(&s.foreground);
    }
    println!(
        "[{label}] {} operations, {} unresolved ({:?}), {} latch retries, {} restarts, {} round \
         trips; verdict {:?}",
        r.history.len(),
        r.errors.len(),
        r.errors.iter().take(2).collect::<Vec<_>>(),
        total.cas_failures,
        total.restarts,
        total.round_trips,
        match &report.verdict {
            Verdict::Linearizable => "linearizable",
            Verdict::Violation(_) => "violation",
            Verdict::Unknown { .. } => "unknown",
        }
    );
    if !matches!(report.verdict, Verdict::Violation(_)) {
        assert!(
            r.errors.len() * 10 <= r.history.len(),
            "[{label}] too many unresolved operations: {:?}",
            r.errors.iter().take(5).collect::<Vec<_>>()
        );
    }
    report.verdict
}

const VALUE: usize = 240;

#[test]
fn correct_schemes_are_linearizable_under_random_read_order() {
    let client = cluster(TransportKind::Local, None);
    for (i, spec) in SchemeSpec::catalog(false).into_iter().enumerate() {
        let name = format!("local{i}");
        client
            .create_table(&name, &TableSpec::in_place(spec, VALUE as u64, 256))
            .unwrap();
        let w = Workload {
            threads: 2,
            tasks: 3,
            ops_per_task: 120,
            keys: 2,
            seed: 10 + i as u64,
        };
        let v = lincheck(&client, &name, w, VALUE, &format!("local {spec}"));
        assert_eq!(v, Verdict::Linearizable, "{spec}");
    }
}

#[test]
fn bookend_fails_the_same_check() {
    let client = cluster(TransportKind::Local, None);
    let spec = SchemeSpec::Bookend(UnsafeDemo::acknowledge_torn_reads());
    // A torn read needs a writer's lines to land between the lines of a READ,
    // which the scheduler of a loaded machine may not produce in one round: keep
    // running fresh rounds until the checker catches one, up to a generous bound.
    let mut detected = false;
    for attempt in 0..40u64 {
        let name = format!("bookend{attempt}");
        client
            .create_table(&name, &TableSpec::in_place(spec, VALUE as u64, 256))
            .unwrap();
        let w = Workload {
            threads: 2,
            tasks: 3,
            ops_per_task: 200,
            keys: 1,
            seed: 77 + attempt,
        };
        let v = lincheck(&client, &name, w, VALUE, "local bookend");
        if let Verdict::Violation(why) = v {
            println!("bookend violation found on attempt {attempt}:\n{why}");
            detected = true;
            break;
        }
    }
    assert!(
        detected,
        "the checker never caught bookend versioning returning a torn value"
    );
}

/// A write of a scheme with asynchronous unlatch returns before its
/// WRITE-and-unlatch batch completed. `Session::quiesce` waits for it, so a
/// session that quiesced and ended never loses such a write nor leaves its latch
/// held — even when the batch needed retransmissions (30% of the datagrams are
/// dropped here, so without the wait some rounds lose the write: the next
/// session waits out the lease and reads the previous value).
#[test]
fn quiesce_completes_asynchronous_unlatches_before_a_session_ends() {
    let relay = FaultRelay::new(Faults {
        drop: 0.3,
        duplicate: 0.0,
        reorder: 0.0,
        seed: 5,
    });
    let client = cluster(TransportKind::Udp, Some(relay.clone()));
    let spec: SchemeSpec = "pessimistic-x-async-wu-embedded".parse().unwrap();
    client
        .create_table("q", &TableSpec::in_place(spec, 64, 64))
        .unwrap();
    for round in 0..12u32 {
        let s = client.session().unwrap();
        let t = s.table("q").unwrap();
        s.block_on(async { t.put(b"k", &round.to_le_bytes()).await.unwrap() });
        drop(t);
        s.quiesce();
        drop(s);
        let s2 = client.session().unwrap();
        let t2 = s2.table("q").unwrap();
        let got = s2.block_on(async { t2.get(b"k").await.unwrap().unwrap() });
        assert_eq!(got, round.to_le_bytes(), "round {round}");
        s2.quiesce();
    }
    println!(
        "relay: {} dropped",
        relay
            .counts
            .dropped
            .load(std::sync::atomic::Ordering::Relaxed)
    );
    drop(client);
    relay.stop();
}

#[test]
fn correct_schemes_are_linearizable_under_packet_loss() {
    let relay = FaultRelay::new(Faults {
        drop: 0.03,
        duplicate: 0.03,
        reorder: 0.03,
        seed: 9,
    });
    let client = cluster(TransportKind::Udp, Some(relay.clone()));
    for (i, spec) in SchemeSpec::catalog(false).into_iter().enumerate() {
        let name = format!("udp{i}");
        client
            .create_table(&name, &TableSpec::in_place(spec, VALUE as u64, 256))
            .unwrap();
        let w = Workload {
            threads: 2,
            tasks: 2,
            ops_per_task: 40,
            keys: 2,
            seed: 30 + i as u64,
        };
        let v = lincheck(&client, &name, w, VALUE, &format!("udp+faults {spec}"));
        assert_eq!(v, Verdict::Linearizable, "{spec}");
    }
    use std::sync::atomic::Ordering::Relaxed;
    let c = &relay.counts;
    println!(
        "relay: {} forwarded, {} dropped, {} duplicated, {} reordered",
        c.forwarded.load(Relaxed),
        c.dropped.load(Relaxed),
        c.duplicated.load(Relaxed),
        c.reordered.load(Relaxed)
    );
    assert!(c.dropped.load(Relaxed) > 0 && c.duplicated.load(Relaxed) > 0);
    drop(client);
    relay.stop();
}

#[test]
fn the_catalog_sizes_and_checks_inplace_tables() {
    use dmkv_api::metadata::{CreateTableRequest, InPlaceRequest, LatchPlacement};
    use kvstore::IndexKind;
    let client = cluster(TransportKind::Local, None);
    // Every placement of the pessimistic latch, end to end: the separate latch
    // array is its own table-owned memory on the tuples' memory node.
    for (name, scheme) in [
        ("sep", "pessimistic-rw-async-separate"),
        ("pad", "pessimistic-x-wc-wu-padded"),
        ("emb", "pessimistic-rw-basic-embedded"),
    ] {
        let spec: SchemeSpec = scheme.parse().unwrap();
        let t = client
            .create_table(name, &TableSpec::in_place(spec, 100, 300))
            .unwrap();
        assert_eq!(t.index(), IndexKind::InPlace);
        let ip = t.layout.in_place().cloned().unwrap();
        assert_eq!((ip.scheme.as_str(), ip.capacity), (scheme, 300));
        let area = ip.area.unwrap();
        assert!(area.len >= 64 + 300 * ip.tuple_bytes, "{scheme}");
        match ip.latch_placement {
            LatchPlacement::Separate => {
                let l = ip.latches.unwrap();
                assert_eq!(l.memnode_id, area.memnode_id);
                assert!(l.len >= 8 * 300);
            }
            _ => assert!(ip.latches.is_none()),
        }
        let s = client.session().unwrap();
        let tb = s.table(name).unwrap();
        s.block_on(async {
            for i in 0..200u32 {
                tb.put(format!("k{i}").as_bytes(), &i.to_le_bytes())
                    .await
                    .unwrap();
            }
            for i in 0..200u32 {
                assert_eq!(
                    tb.get(format!("k{i}").as_bytes()).await.unwrap().unwrap(),
                    i.to_le_bytes()
                );
            }
        });
    }
    // An in-place table cannot be asked for without its scheme and capacity: the
    // one `create_table` takes a spec whose in-place variant carries them.
    let spec = TableSpec::in_place(SchemeSpec::PESSIMISTIC, 128, 10);
    assert_eq!(spec.index(), IndexKind::InPlace);
    // The service refuses forbidden combinations itself (4xx with a message),
    // whatever the client library checked.
    let raw = |scheme: &str, unsafe_demo: bool| CreateTableRequest {
        name: "raw".into(),
        index: IndexKind::InPlace,
        value_limit: 128,
        memnodes: None,
        replication: None,
        update_mode: None,
        inplace: Some(InPlaceRequest {
            scheme: scheme.into(),
            capacity: 10,
            tuple_bytes: 256,
            latch_placement: None,
            unsafe_demo,
        }),
    };
    for (req, needle) in [
        (raw("pessimistic-rw-wu", false), "shared FAA readers"),
        (raw("bookend-unsafe-demo", false), "unsafe_demo"),
    ] {
        let e = client.metadata().create_table(&req).unwrap_err();
        assert_eq!(e.status(), Some(422));
        assert!(e.to_string().contains(needle), "{e}");
    }
    // Dropping the tables frees their memory.
    let free = || -> u64 {
        client
            .memnodes()
            .unwrap()
            .iter()
            .map(|m| m.free_bytes)
            .sum()
    };
    let before = free();
    for name in ["sep", "pad", "emb"] {
        client.drop_table(name).unwrap();
    }
    assert!(free() > before);
    assert!(client.tables().unwrap().is_empty());
}
