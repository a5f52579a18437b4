//! Change feeds without a switch, on an embedded cluster: which tables and specs are
//! refused, lanes taken and given back, records that stay in a writer's lane in the
//! order written (nothing moves them without the switch's flow), and records too large
//! for a slot, and plain table writes that find every lane left taken by stopped
//! writers free one after the lease.

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

#[test]
fn a_lane_left_taken_by_a_stopped_writer_is_freed_after_the_lease() {
    let client = client();
    client
        .create_table("c", &TableSpec::clover(256))
        .expect("clover table");
    let s = client.session().expect("session");
    let feed = s
        .create_feed("c", &FeedSpec { lanes: 2, ..spec() })
        .expect("feed");
    let t = s.table("c").expect("table");
    // A plain write is recorded in a free lane at once.
    s.block_on(t.put(b"k", b"v1")).expect("put");
    let waiting = |s: &kvstore::Session| -> Vec<(u64, u64)> {
        s.block_on(kvstore::feed::status(s, &feed))
            .expect("status")
            .lanes
            .iter()
            .map(|l| (l.waiting(), l.owner))
            .collect()
    };
    assert_eq!(waiting(&s).iter().map(|w| w.0).sum::<u64>(), 1);
    // Both lanes left taken, as by two writers stopped between their doorbells.
    for lane in 0..2 {
        assert!(
            s.block_on(kvstore::feed::append::take_lane_and_stop(&s, &feed, lane))
                .expect("take")
        );
    }
    let started = std::time::Instant::now();
    s.block_on(t.put(b"k", b"v2")).expect("put after the lease");
    let took = started.elapsed();
    assert!(
        took >= kvstore::feed::append::LANE_LEASE && took < kvstore::feed::append::APPEND_WAIT,
        "{took:?}"
    );
    let lanes = waiting(&s);
    assert_eq!(lanes.iter().map(|w| w.0).sum::<u64>(), 2, "{lanes:?}");
    // Both stopped writers' lanes were freed (each unchanged for the lease), and the
    // one the write used was given back.
    assert!(lanes.iter().all(|w| w.1 == 0), "{lanes:?}");
    // Nothing reaches a consumer ring without the switch's flow.
    let records: Vec<_> = s.block_on(async {
        let mut c = FeedConsumer::open(&s, &feed, 0).await.expect("consumer");
        c.poll().await.expect("poll")
    });
    assert!(records.is_empty(), "no switch moves records to consumers");
}
