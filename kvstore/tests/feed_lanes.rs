//! Change feeds without a switch, on an embedded cluster: which tables and specs are
//! refused, lanes taken and given back, records that stay in a writer's lane in the
//! order written (nothing moves them without the switch's flow), and records too large
//! for a slot.

use std::time::Duration;

use kvstore::feed::{FeedConsumer, FeedSpec, FeedWriter};
use kvstore::{Client, KvError, TableSpec, TransportKind};
use testbed::EmbeddedOptions;

fn client() -> Client {
    testbed::embedded_client(EmbeddedOptions {
        memnodes: 1,
        transport: TransportKind::Local,
        ..EmbeddedOptions::default()
    })
    .expect("embedded cluster")
}

fn spec() -> FeedSpec {
    FeedSpec {
        lanes: 1,
        consumers: 1,
        slot_size: 128,
        slots: 4,
        memnode: None,
    }
}

#[test]
fn only_clover_tables_and_sound_specs_get_feeds() {
    let client = client();
    client
        .create_table("r", &TableSpec::race(256))
        .expect("race table");
    client
        .create_table("c", &TableSpec::clover(256))
        .expect("clover table");
    let s = client.session().expect("session");
    assert!(matches!(
        s.create_feed("r", &spec()),
        Err(KvError::Unsupported(m)) if m.contains("Clover")
    ));
    assert!(matches!(
        s.create_feed("c", &FeedSpec { lanes: 9, ..spec() }),
        Err(KvError::InvalidArgument(_))
    ));
    assert!(matches!(
        s.create_feed("nope", &spec()),
        Err(KvError::NoSuchTable(_))
    ));
    let feed = s.create_feed("c", &spec()).expect("feed");
    let json = serde_json::to_string(&feed).expect("json");
    assert_eq!(
        serde_json::from_str::<kvstore::feed::FeedLayout>(&json).expect("parse"),
        feed
    );
}

#[test]
fn a_lane_keeps_its_writers_records_until_a_flow_moves_them() {
    let client = client();
    client
        .create_table("c", &TableSpec::clover(256))
        .expect("table");
    let s = client.session().expect("session");
    let feed = s.create_feed("c", &spec()).expect("feed");
    let lane = feed.lanes[0].clone();
    s.block_on(async {
        let mut w = FeedWriter::open(&s, &feed).await.expect("the lane");
        assert!(FeedWriter::open(&s, &feed).await.is_err(), "one lane, held");
        w.put(b"a", b"1").await.expect("put");
        w.put(b"a", b"2").await.expect("put");
        assert_eq!(w.insert(b"a", b"3").await, Err(KvError::AlreadyExists));
        w.delete(b"a").await.expect("delete");
        let big = vec![7u8; 100];
        assert!(matches!(
            w.put(b"b", &big).await,
            Err(KvError::InvalidArgument(m)) if m.contains("slots")
        ));
        assert_eq!(
            w.table().get(b"b").await,
            Ok(None),
            "refused before writing"
        );
        w.close().await.expect("close");
        // Given back: another writer takes it and goes on after the records there.
        let mut w = FeedWriter::open(&s, &feed).await.expect("the lane again");
        // A refused update of an absent key makes no record (its chain begins with a
        // tombstone no write made, so the key's first record is version 2).
        assert_eq!(w.update(b"c", b"x").await, Err(KvError::NotFound));
        w.put(b"c", b"x").await.expect("put");
        w.close().await.expect("close");
        let mut c = FeedConsumer::open(&s, &feed, 0).await.expect("consumer");
        assert_eq!(
            c.next(Duration::from_millis(20)).await,
            Ok(None),
            "no flow, no records"
        );
    });
    // The lane itself holds the four records, in order, with the chain's versions.
    let reader = client.session().expect("session");
    let mut lane_consumer_view = feed.clone();
    lane_consumer_view.consumers = vec![lane];
    let records = reader.block_on(async {
        let mut c = FeedConsumer::open(&reader, &lane_consumer_view, 0)
            .await
            .expect("the lane read as a ring");
        c.poll().await.expect("poll")
    });
    let seen: Vec<(u64, &[u8], u32, &[u8])> = records
        .iter()
        .map(|r| (r.lane_seq, &r.key[..], r.version, &r.value[..]))
        .collect();
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert_eq!(
        seen.iter().map(|s| s.0).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    assert_eq!((seen[0].1, seen[0].3), (&b"a"[..], &b"1"[..]));
    assert_eq!(seen[0].2, 1, "a key's first write is its chain's version 1");
    assert_eq!(seen[1].2, seen[0].2 + 1, "the next version of the chain");
    assert_eq!(seen[2].2, seen[1].2 + 1);
    assert_eq!(records[2].op, kvstore::feed::FeedOp::Delete);
    assert_eq!(seen[3].1, b"c");
    assert_eq!(seen[3].2, 2, "after the chain's first tombstone");
}
