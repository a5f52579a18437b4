//! A session opened while a memory node was down (the metadata service reported it
//! unhealthy, so the session did not connect to it) reaches it once it is back,
//! when an operation needs its data — without opening a new session.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use dmkv_api::metadata::TableLayout;
use kvstore::{
    Client, ClientOptions, KvError, ReconnectOptions, SchemeSpec, TableSpec, TransportKind,
};
use testbed::{Embedded, EmbeddedOptions};

const KEYS: usize = 24;

fn wait_health(client: &Client, id: u64, healthy: bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let nodes = client.memnodes().expect("memnodes");
        if nodes.iter().any(|n| n.id == id && n.healthy == healthy) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "memnode {id} never became healthy={healthy}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("key-{i}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    format!("value-{i}").into_bytes()
}

#[test]
fn a_session_opened_while_a_memnode_was_down_uses_it_once_it_is_back() {
    let mut embedded = Embedded::start_with_heartbeat_timeout(
        &EmbeddedOptions {
            memnodes: 2,
            capacity: 16 << 20,
            transport: TransportKind::Udp,
            ..EmbeddedOptions::default()
        },
        Duration::from_millis(600),
    )
    .expect("cluster");
    let options = ClientOptions::with_transport(TransportKind::Udp).with_reconnect(
        ReconnectOptions::default()
            .with_timeout(Duration::from_millis(100))
            .with_interval(Duration::from_millis(100)),
    );
    let client = Client::in_process(
        &embedded.metadata_url(),
        options,
        HashMap::new(),
        Box::new(()),
    )
    .expect("client");
    let scheme: SchemeSpec = "pessimistic-rw-async-embedded".parse().expect("scheme");
    let tables = [
        ("clover", TableSpec::clover(64)),
        ("race", TableSpec::race(64)),
        ("inplace", TableSpec::in_place(scheme, 64, 256)),
    ];
    for (name, spec) in &tables {
        client.create_table(name, spec).expect("table");
    }
    {
        let s = client.session().expect("session");
        for (name, _) in &tables {
            let t = s.table(name).expect("handle");
            for i in 0..KEYS {
                s.block_on(t.put(&key(i), &value(i))).expect("put");
            }
            s.block_on(t.flush());
        }
        s.quiesce();
    }

    // The memory node holding the in-place table goes down.
    let down = match client.table("inplace").expect("description").layout {
        TableLayout::InPlace(ip) => ip.area.expect("an area").memnode_id,
        other => panic!("not in place: {other:?}"),
    };
    embedded.stop_heartbeats(down).expect("stop heartbeats");
    wait_health(&client, down, false);

    let session = client.session().expect("a session opens without the node");
    assert!(
        matches!(session.table("inplace"), Err(KvError::Unavailable(_))),
        "the in-place table lives on the node that is down"
    );
    let clover = session.table("clover").expect("clover");
    let race = session.table("race").expect("race");
    // Data elsewhere is read; data on the node that is down fails as unavailable
    // (never as a wrong or missing value).
    let mut unavailable = 0;
    for t in [&clover, &race] {
        for i in 0..KEYS {
            match session.block_on(t.get(&key(i))) {
                Ok(v) => assert_eq!(v, Some(value(i)), "{} key {i}", t.name()),
                Err(KvError::Unavailable(why)) => {
                    assert!(why.message().contains(&format!("memnode {down}")), "{why}");
                    unavailable += 1;
                }
                Err(e) => panic!("{} key {i}: {e}", t.name()),
            }
        }
    }
    assert!(
        unavailable > 0,
        "some Clover or RACE data lives on the node that is down"
    );
    assert_eq!(session.stats().reconnects, 0);

    // It is back: the same session reaches it.
    embedded.resume_heartbeats(down).expect("resume heartbeats");
    wait_health(&client, down, true);
    std::thread::sleep(Duration::from_millis(150));
    let inplace = session
        .table("inplace")
        .expect("the in-place table opens now");
    for t in [&clover, &race, &inplace] {
        for i in 0..KEYS {
            assert_eq!(
                session.block_on(t.get(&key(i))).expect("get"),
                Some(value(i)),
                "{} key {i}",
                t.name()
            );
        }
        session
            .block_on(t.put(b"after", b"back"))
            .expect("a write after the node is back");
        assert_eq!(
            session.block_on(t.get(b"after")).expect("get"),
            Some(b"back".to_vec())
        );
        session.block_on(t.flush());
    }
    assert_eq!(session.stats().reconnects, 1, "one queue pair was added");
    session.quiesce();
}
