//! A cluster whose memory nodes authenticate their admin API: sessions get grants from
//! the metadata service, reach every memory node through queue pairs scoped to their
//! tables' memory (with the queue pair's own key), and work as on an open cluster;
//! tables created later and memory leased later are granted as the session uses them.

use std::time::Duration;

use kvstore::{Client, ClientOptions, TableSpec, TransportKind};
use testbed::{Embedded, EmbeddedOptions};
use verbs::mem::ScopeViolation;

fn options() -> EmbeddedOptions {
    EmbeddedOptions {
        memnodes: 2,
        capacity: 32 << 20,
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    }
}

fn client(cluster: &Embedded) -> Client {
    let mut o = ClientOptions::default();
    o.connection.transport = TransportKind::Udp;
    Client::connect(&cluster.metadata_url(), o).unwrap()
}

#[test]
fn sessions_work_through_scoped_queue_pairs() {
    let cluster = Embedded::start_secured(&options()).unwrap();
    let client = client(&cluster);
    client.create_table("race", &TableSpec::race(256)).unwrap();
    client
        .create_table("clover", &TableSpec::clover(256))
        .unwrap();
    let s = client.session().unwrap();
    for name in ["race", "clover"] {
        let t = s.table(name).unwrap();
        for i in 0..300u32 {
            let key = format!("{name}-{i}");
            s.block_on(t.put(key.as_bytes(), &i.to_le_bytes())).unwrap();
        }
        for i in 0..300u32 {
            let key = format!("{name}-{i}");
            assert_eq!(
                s.block_on(t.get(key.as_bytes())).unwrap(),
                Some(i.to_le_bytes().to_vec()),
                "{key}"
            );
        }
    }
    // A table created after the session opened is granted when the session uses it.
    client.create_table("late", &TableSpec::race(64)).unwrap();
    let late = s.table("late").unwrap();
    s.block_on(late.put(b"k", b"v")).unwrap();
    assert_eq!(s.block_on(late.get(b"k")).unwrap(), Some(b"v".to_vec()));

    for id in cluster.memnode_ids() {
        let node = cluster.memnode(id).unwrap();
        let qps = node.qps().list();
        assert!(!qps.is_empty());
        for q in &qps {
            assert!(q.rkey.is_some(), "queue pair {} is not scoped", q.qpn);
            assert_ne!(q.rkey, Some(node.regions()[0].rkey));
            let tables: Vec<&str> = q.grants.iter().map(|g| g.table.as_str()).collect();
            for t in ["race", "clover", "late"] {
                assert!(tables.contains(&t), "{tables:?} lacks {t}");
            }
        }
        let v = node.access_violations();
        assert_eq!(
            v.total(),
            0,
            "memnode {id}: {:?}",
            ScopeViolation::ALL.map(|r| v.get(r))
        );
    }
    drop(late);
    drop(s);
    // The session deleted its queue pairs with its grants.
    std::thread::sleep(Duration::from_millis(50));
    for id in cluster.memnode_ids() {
        assert!(cluster.memnode(id).unwrap().qps().list().is_empty());
    }
}

#[test]
fn replicated_tables_and_replaced_queue_pairs_keep_working() {
    let cluster = Embedded::start_secured(&options()).unwrap();
    let client = client(&cluster);
    client
        .create_replicated_table("copies", &TableSpec::clover(256), 2)
        .unwrap();
    let s = client.session().unwrap();
    let t = s.table("copies").unwrap();
    for i in 0..50u32 {
        s.block_on(t.put(&i.to_le_bytes(), b"first")).unwrap();
    }
    // Every queue pair is gone (as after a memory node restart): the session makes
    // new ones, with fresh grants, and carries on.
    let destroyed: usize = cluster
        .memnode_ids()
        .into_iter()
        .map(|id| cluster.destroy_queue_pairs(id).unwrap())
        .sum();
    assert_eq!(destroyed, 2);
    // Reads are repeated on the new queue pairs (a write in flight on a destroyed one
    // would end with an unknown outcome, as on an open cluster).
    for i in 0..50u32 {
        assert_eq!(
            s.block_on(t.get(&i.to_le_bytes())).unwrap(),
            Some(b"first".to_vec())
        );
    }
    for i in 0..50u32 {
        s.block_on(t.put(&i.to_le_bytes(), b"second")).unwrap();
        assert_eq!(
            s.block_on(t.get(&i.to_le_bytes())).unwrap(),
            Some(b"second".to_vec())
        );
    }
    for id in cluster.memnode_ids() {
        let node = cluster.memnode(id).unwrap();
        assert!(node.qps().list().iter().all(|q| q.rkey.is_some()));
        assert_eq!(node.access_violations().total(), 0, "memnode {id}");
    }
}

#[test]
fn data_another_client_wrote_into_memory_leased_later_is_read() {
    let cluster = Embedded::start_secured(&options()).unwrap();
    let reader = client(&cluster);
    let writer = client(&cluster);
    reader.create_table("race", &TableSpec::race(256)).unwrap();
    reader
        .create_table("clover", &TableSpec::clover(256))
        .unwrap();
    // The reader's queue pairs get their grants before the writer leases anything.
    let r = reader.session().unwrap();
    let w = writer.session().unwrap();
    for name in ["race", "clover"] {
        let rt = r.table(name).unwrap();
        let wt = w.table(name).unwrap();
        for i in 0..200u32 {
            w.block_on(wt.put(&i.to_le_bytes(), b"written elsewhere"))
                .unwrap();
        }
        for i in 0..200u32 {
            assert_eq!(
                r.block_on(rt.get(&i.to_le_bytes())).unwrap(),
                Some(b"written elsewhere".to_vec()),
                "{name} {i}"
            );
        }
    }
}
