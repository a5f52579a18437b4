//! Exact protocol costs of uncontended Clover operations, from the session's
//! per-operation counters and the transport's doorbell counter: GET is one round
//! trip with a warm hint; a PUT, UPDATE or DELETE one when the session verified the
//! key's tail within half a grace period (by a read or its own write), two otherwise
//! (plus one background CAS advancing the key's shortcut). Bytes on the wire per
//! operation are printed (`--nocapture`).

use std::time::Duration;

use kvstore::{Client, ClientOptions, KvError, Session, Table, TableSpec, TransportKind};
use testbed::EmbeddedOptions;

/// A grace period no step of these tests outlasts, however slow the machine: every
/// write below comes well within half of it after its tail's verification.
const LONG_GRACE: Duration = Duration::from_secs(20);

fn setup(transport: TransportKind) -> (Client, Session, Table) {
    setup_with_grace(transport, LONG_GRACE)
}

fn setup_with_grace(transport: TransportKind, grace: Duration) -> (Client, Session, Table) {
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 2,
        capacity: 64 << 20,
        transport,
        client: ClientOptions::with_transport(transport).with_grace(grace),
        prefault: false,
    })
    .expect("embedded cluster");
    client
        .create_table("rt", &TableSpec::clover(1024))
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("rt").expect("table");
    (client, s, t)
}

fn costs(transport: TransportKind) {
    let (_client, s, t) = setup(transport);
    let value = vec![7u8; 100];
    // Cold: chain creation through the metadata service.
    s.block_on(t.put(b"key", &value)).expect("first put");
    let cold = s.last_op();
    println!("[{transport}] cold put: {cold:?}");
    assert!(cold.metadata_calls >= 1);
    s.quiesce();
    for round in 0..3 {
        let before = s.transport_stats();
        s.block_on(t.get(b"key")).expect("get");
        let get = s.last_op();
        let wire = s.transport_stats().since(&before);
        assert_eq!(get.round_trips, 1, "GET with a warm hint");
        assert_eq!(wire.doorbells, 1, "GET posts one doorbell");
        assert_eq!(get.metadata_calls, 0);
        let before = s.transport_stats();
        s.block_on(t.put(b"key", &value)).expect("put");
        let put = s.last_op();
        assert_eq!(put.round_trips, 1, "PUT after the GET verified the tail");
        assert_eq!(put.cas_failures, 0);
        s.quiesce();
        let wire_put = s.transport_stats().since(&before);
        assert_eq!(
            wire_put.doorbells, 2,
            "PUT: write+CAS+root read, then the background shortcut CAS"
        );
        if round == 0 {
            println!(
                "[{transport}] GET: {} RTT, {} WRs, {} B sent + {} B received = {} B (transport: {} B + {} B)",
                get.round_trips,
                get.work_requests,
                get.bytes_sent,
                get.bytes_received,
                get.bytes(),
                wire.bytes_sent,
                wire.bytes_received
            );
            println!(
                "[{transport}] PUT: {} RTT, {} WRs, {} B sent + {} B received = {} B; with the background shortcut CAS the transport saw {} B + {} B",
                put.round_trips,
                put.work_requests,
                put.bytes_sent,
                put.bytes_received,
                put.bytes(),
                wire_put.bytes_sent,
                wire_put.bytes_received
            );
        }
    }
    // Update and delete cost the same as PUT; failed conditions are decided by the
    // read; an insert after a tombstone searches for the tail first.
    s.block_on(async {
        t.update(b"key", b"u").await.expect("update");
        assert_eq!(s.last_op().round_trips, 1, "after the session's own PUT");
        assert!(t.insert(b"key", b"i").await.is_err());
        assert_eq!(s.last_op().round_trips, 1, "a failed insert is one read");
        t.delete(b"key").await.expect("delete");
        assert_eq!(s.last_op().round_trips, 1, "after the insert's read");
        assert_eq!(t.get(b"key").await, Ok(None));
        assert_eq!(
            s.last_op().round_trips,
            1,
            "a GET of a deleted key is one read"
        );
        t.insert(b"key", b"again").await.expect("insert");
        assert_eq!(s.last_op().round_trips, 2);
    });
    // A second session of the client starts from the tail the first one saw: one
    // round trip, as warm as the first session.
    s.quiesce();
    let s2 = _client.session().expect("session");
    let t2 = s2.table("rt").expect("table");
    s2.block_on(t2.get(b"key")).expect("cold get");
    assert_eq!(
        s2.last_op().round_trips,
        1,
        "a new session's GET: the tail its client last saw, with the root"
    );
    assert_eq!(s2.last_op().stale_hints, 0);
    // When the other session moves the tail on, the hint goes stale: the root's
    // shortcut gets the reader there (one more round trip), and then it is warm again.
    s.block_on(t.put(b"key", b"moved")).expect("put");
    s.block_on(t.put(b"key", b"moved again")).expect("put");
    s.quiesce();
    let s3 = _client.session().expect("session");
    let t3 = s3.table("rt").expect("table");
    assert_eq!(
        s3.block_on(t3.get(b"key")).expect("get"),
        Some(b"moved again".to_vec())
    );
    assert_eq!(s3.last_op().round_trips, 1, "the client saw the last put");
    assert_eq!(
        s2.block_on(t2.get(b"key")).expect("get"),
        Some(b"moved again".to_vec())
    );
    assert!(s2.last_op().round_trips <= 2);
    s2.block_on(t2.get(b"key")).expect("warm get");
    assert_eq!(s2.last_op().round_trips, 1);
}

#[test]
fn clover_costs_local() {
    costs(TransportKind::Local);
}

#[test]
fn clover_costs_udp() {
    costs(TransportKind::Udp);
}

/// A write long after its tail was verified (more than half a grace period) looks
/// for the tail first: two round trips.
#[test]
fn a_write_long_after_the_tails_verification_searches_first() {
    let (_client, s, t) = setup_with_grace(TransportKind::Udp, Duration::from_millis(20));
    s.block_on(t.put(b"key", b"v1")).expect("put");
    s.quiesce();
    s.block_on(t.get(b"key")).expect("get");
    std::thread::sleep(Duration::from_millis(40));
    s.block_on(t.put(b"key", b"v2")).expect("put");
    assert_eq!(s.last_op().round_trips, 2, "search, then write and link");
    assert_eq!(s.block_on(t.get(b"key")), Ok(Some(b"v2".to_vec())));
}

/// A verified tail that another session moved on since: the link CAS fails and
/// changes nothing, the write takes the ordinary path (one round trip lost) and
/// its condition is checked against the real tail.
#[test]
fn a_known_tail_that_moved_on_costs_one_lost_round_trip() {
    let (client, s, t) = setup(TransportKind::Udp);
    let other = client.session().expect("session");
    let t_other = other.table("rt").expect("table");
    s.block_on(t.put(b"key", b"mine")).expect("put");
    s.quiesce();
    s.block_on(t.get(b"key")).expect("get");
    other
        .block_on(t_other.put(b"key", b"theirs"))
        .expect("other put");
    other.quiesce();
    s.block_on(t.put(b"key", b"mine again")).expect("put");
    let op = s.last_op();
    // The search then starts from the tail the other session left in the client's
    // cache (one READ), as it would have without the known-tail attempt: that
    // attempt costs one round trip.
    assert_eq!(
        op.round_trips, 3,
        "lost link, search from the client's latest tail, link: {op:?}"
    );
    assert_eq!(op.stale_hints, 1, "{op:?}");
    assert_eq!(
        other.block_on(t_other.get(b"key")),
        Ok(Some(b"mine again".to_vec()))
    );
    // The other session deletes: an update after this session's verified live tail
    // fails its CAS and then finds the tombstone.
    s.block_on(t.get(b"key")).expect("get");
    other.block_on(t_other.delete(b"key")).expect("delete");
    other.quiesce();
    assert_eq!(s.block_on(t.update(b"key", b"u")), Err(KvError::NotFound));
    assert_eq!(s.block_on(t.get(b"key")), Ok(None));
}
