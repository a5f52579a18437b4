//! A memory node that is down (registered, but nobody answers at its admin address)
//! does not affect the tables that hold nothing on it: new sessions open, and their
//! reads and writes work; only data on that node would fail, naming it.

use dmkv_api::MetadataClient;
use dmkv_api::metadata::{RegionSpec, RegisterMemnodeRequest};
use kvstore::{TableSpec, TransportKind};
use testbed::EmbeddedOptions;

#[test]
fn a_dead_memnode_without_a_tables_data_does_not_affect_it() {
    let client = testbed::embedded_client(EmbeddedOptions {
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    client
        .create_table("clover", &TableSpec::clover(256))
        .expect("clover table");
    client
        .create_table("race", &TableSpec::race(256))
        .expect("race table");
    {
        let s = client.session().expect("session");
        for name in ["clover", "race"] {
            let t = s.table(name).expect("table");
            s.block_on(t.put(b"before", b"1")).expect("put");
        }
        s.quiesce();
    }

    // A second memory node registers and dies at once: its admin address answers
    // nothing (port 1 on loopback refuses connections).
    let meta = MetadataClient::new(&client.metadata_url()).expect("metadata client");
    let dead = meta
        .register_memnode(&RegisterMemnodeRequest {
            name: "dead-node".into(),
            admin_url: "http://127.0.0.1:1".into(),
            data_addr: "127.0.0.1:9".into(),
            capacity: 1 << 20,
            regions: vec![RegionSpec {
                rkey: 7,
                base_va: 0x1000_0000,
                len: 1 << 20,
                path: None,
                instance: 0,
            }],
            zone: None,
        })
        .expect("register the dead memnode");
    assert!(
        meta.memnodes()
            .expect("memnodes")
            .iter()
            .any(|n| n.id == dead.id && n.healthy),
        "it counts as healthy until its heartbeats are missed"
    );

    // New sessions open, and the tables work.
    for round in 0..2 {
        let s = client
            .session()
            .expect("a session opens without the dead memnode");
        for name in ["clover", "race"] {
            let t = s.table(name).expect("table");
            assert_eq!(
                s.block_on(t.get(b"before")).expect("get"),
                Some(b"1".to_vec()),
                "{name}"
            );
            let key = format!("after-{round}");
            s.block_on(t.put(key.as_bytes(), b"2")).expect("put");
            assert_eq!(
                s.block_on(t.get(key.as_bytes())).expect("get"),
                Some(b"2".to_vec())
            );
        }
        s.quiesce();
    }
}
