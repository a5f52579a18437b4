//! A session keeps working after the memory nodes destroy its queue pairs (what a
//! memory node that restarts with its memory, or reclaims queue pairs, looks like):
//! reads are repeated transparently on a new queue pair; a write either succeeds or
//! reports `OutcomeUnknown` (never anything else, never a torn or lost value); every
//! acknowledged write is read back afterwards.

use std::collections::HashMap;
use std::time::Duration;

use kvstore::{
    Client, ClientOptions, KvError, ReconnectOptions, RetryOptions, SchemeSpec, TableSpec,
    TransportKind,
};
use testbed::{Embedded, EmbeddedOptions};

const KEYS: usize = 16;

fn options() -> ClientOptions {
    ClientOptions::with_transport(TransportKind::Udp)
        // A lost responder is noticed after 5 × (1 + 2 + 4 + 8 + 16) ms.
        .with_rc(verbs::rc::RcConfig {
            retransmit_timeout: Duration::from_millis(5),
            max_retries: 4,
            ..verbs::rc::RcConfig::default()
        })
        .with_reconnect(
            ReconnectOptions::default()
                .with_timeout(Duration::from_secs(5))
                .with_interval(Duration::from_millis(100)),
        )
        // A latch whose holder's queue pair failed is taken over quickly.
        .with_retry(RetryOptions::default().with_lock_timeout(Duration::from_millis(300)))
}

fn cluster() -> (Embedded, Client) {
    let embedded = Embedded::start(&EmbeddedOptions {
        memnodes: 2,
        capacity: 16 << 20,
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let client = Client::in_process(
        &embedded.metadata_url(),
        options(),
        HashMap::new(),
        Box::new(()),
    )
    .expect("client");
    (embedded, client)
}

fn destroy_all(embedded: &Embedded) -> usize {
    embedded
        .memnode_ids()
        .into_iter()
        .map(|id| embedded.destroy_queue_pairs(id).expect("destroy"))
        .sum()
}

/// What a key may hold: the values of writes that may have taken effect since the
/// last acknowledged one (which comes first).
type Allowed = Vec<Vec<u8>>;

fn survives_destroyed_queue_pairs(spec: TableSpec) {
    let (embedded, client) = cluster();
    client.create_table("t", &spec).expect("table");
    let session = client.session().expect("session");
    let table = session.table("t").expect("handle");
    let key = |i: usize| format!("key-{i}").into_bytes();
    let mut allowed: Vec<Allowed> = Vec::new();
    for i in 0..KEYS {
        let v = format!("v0-{i}").into_bytes();
        session.block_on(table.put(&key(i), &v)).expect("first put");
        allowed.push(vec![v]);
    }
    session.block_on(table.flush());
    session.quiesce();

    let mut unknown = 0;
    for round in 1..=3 {
        assert!(destroy_all(&embedded) > 0, "the session had queue pairs");
        for (i, may) in allowed.iter_mut().enumerate() {
            let got = session
                .block_on(table.get(&key(i)))
                .unwrap_or_else(|e| panic!("round {round}: get of key {i} after the loss: {e}"))
                .expect("a value");
            assert!(may.contains(&got), "round {round}: key {i} holds {got:?}");
            // What was read is now the value: earlier candidates are gone.
            *may = vec![got];
        }
        assert!(destroy_all(&embedded) > 0);
        for (i, may) in allowed.iter_mut().enumerate() {
            let v = format!("v{round}-{i}").into_bytes();
            match session.block_on(table.put(&key(i), &v)) {
                Ok(()) => *may = vec![v],
                Err(KvError::OutcomeUnknown(why)) => {
                    assert!(
                        why.message().contains("may or may not have taken effect"),
                        "{why}"
                    );
                    unknown += 1;
                    may.push(v);
                }
                Err(e) => panic!("round {round}: put of key {i}: {e}"),
            }
        }
        session.block_on(table.flush());
        session.quiesce();
    }

    // Every acknowledged write is there, from this session and from a new one.
    let fresh = client.session().expect("another session");
    let fresh_table = fresh.table("t").expect("handle");
    for (i, may) in allowed.iter().enumerate() {
        for (s, t) in [(&session, &table), (&fresh, &fresh_table)] {
            let got = s.block_on(t.get(&key(i))).expect("get").expect("a value");
            assert!(
                may.contains(&got),
                "key {i} holds {got:?}, expected one of {may:?}"
            );
        }
    }
    let stats = session.stats();
    assert!(
        stats.reconnects >= 6,
        "two memory nodes lost the session's queue pairs six times: {stats:?}"
    );
    assert!(
        unknown < KEYS * 3,
        "some writes went through on a new queue pair without doubt"
    );
    fresh.quiesce();
    session.quiesce();
}

#[test]
fn clover_survives_destroyed_queue_pairs() {
    survives_destroyed_queue_pairs(TableSpec::clover(64));
}

#[test]
fn race_survives_destroyed_queue_pairs() {
    survives_destroyed_queue_pairs(TableSpec::race(64));
}

#[test]
fn in_place_survives_destroyed_queue_pairs() {
    let scheme: SchemeSpec = "pessimistic-rw-async-embedded".parse().expect("scheme");
    survives_destroyed_queue_pairs(TableSpec::in_place(scheme, 64, 256));
}
