//! End-to-end semantics of Clover tables on an embedded cluster: every operation,
//! its errors, and input checks, on the `local` and `udp` transports.

use kvstore::{Client, KvError, MAX_KEY_LEN, TableSpec, TransportKind};
use testbed::EmbeddedOptions;

fn cluster(transport: TransportKind, memnodes: usize) -> Client {
    testbed::embedded_client(EmbeddedOptions {
        memnodes,
        capacity: 64 << 20,
        transport,
        ..EmbeddedOptions::default()
    })
    .expect("embedded cluster")
}

fn semantics(transport: TransportKind) {
    let client = cluster(transport, 2);
    client
        .create_table("t", &TableSpec::clover(4096))
        .expect("create table");
    assert!(matches!(
        client.create_table("t", &TableSpec::clover(4096)),
        Err(KvError::AlreadyExists)
    ));
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    s.block_on(async {
        assert_eq!(t.get(b"a").await, Ok(None));
        assert_eq!(t.update(b"a", b"x").await, Err(KvError::NotFound));
        assert_eq!(t.delete(b"a").await, Err(KvError::NotFound));
        assert_eq!(t.insert(b"a", b"1").await, Ok(()));
        assert_eq!(t.insert(b"a", b"2").await, Err(KvError::AlreadyExists));
        assert_eq!(t.get(b"a").await, Ok(Some(b"1".to_vec())));
        assert_eq!(t.update(b"a", b"3").await, Ok(()));
        assert_eq!(t.get(b"a").await, Ok(Some(b"3".to_vec())));
        assert_eq!(t.put(b"a", b"4").await, Ok(()));
        assert_eq!(t.get(b"a").await, Ok(Some(b"4".to_vec())));
        assert_eq!(t.delete(b"a").await, Ok(()));
        assert_eq!(t.get(b"a").await, Ok(None));
        assert_eq!(t.delete(b"a").await, Err(KvError::NotFound));
        assert_eq!(t.put(b"a", b"5").await, Ok(()));
        assert_eq!(t.get(b"a").await, Ok(Some(b"5".to_vec())));
        // Values of every size up to the limit, growing and shrinking.
        for len in [0usize, 1, 27, 28, 100, 1000, 4096, 10, 4000] {
            let v = vec![len as u8; len];
            assert_eq!(t.put(b"sized", &v).await, Ok(()), "{len}");
            assert!(t.get(b"sized").await == Ok(Some(v)), "{len}");
        }
        // Input checks.
        assert!(matches!(
            t.put(b"big", &[0; 4097]).await,
            Err(KvError::ValueTooLarge {
                len: 4097,
                limit: 4096
            })
        ));
        assert!(matches!(t.get(b"").await, Err(KvError::InvalidArgument(_))));
        assert!(matches!(
            t.put(&[1; MAX_KEY_LEN + 1], b"v").await,
            Err(KvError::KeyTooLarge { .. })
        ));
        let long_key = [7u8; MAX_KEY_LEN];
        assert_eq!(t.put(&long_key, b"long").await, Ok(()));
        assert_eq!(t.get(&long_key).await, Ok(Some(b"long".to_vec())));
    });
    // A second session (cold caches) sees the same data.
    let s2 = client.session().expect("session 2");
    let t2 = s2.table("t").expect("table");
    s2.block_on(async {
        assert_eq!(t2.get(b"a").await, Ok(Some(b"5".to_vec())));
        assert!(t2.get(b"sized").await == Ok(Some(vec![4000usize as u8; 4000])));
        assert_eq!(t2.get(b"never").await, Ok(None));
    });
    assert!(matches!(s.table("nope"), Err(KvError::NoSuchTable(_))));
}

#[test]
fn semantics_local() {
    semantics(TransportKind::Local);
}

#[test]
fn semantics_udp() {
    semantics(TransportKind::Udp);
}

#[test]
fn semantics_shm() {
    semantics(TransportKind::Shm);
}

#[test]
fn connect_needs_a_real_transport() {
    let e = Client::connect(
        "127.0.0.1:1",
        kvstore::ClientOptions::with_transport(TransportKind::Local),
    );
    assert!(matches!(e, Err(KvError::InvalidArgument(_))));
    let e = Client::connect(
        "127.0.0.1:1",
        kvstore::ClientOptions::with_transport(TransportKind::Udp),
    );
    assert!(matches!(e, Err(KvError::Unavailable(_))), "{e:?}");
}

/// A session that read a key before starts from the tail another session of its
/// client wrote since, not from its own older one: one round trip, no walk.
#[test]
fn sessions_of_one_client_share_the_latest_tail() {
    let client = cluster(TransportKind::Udp, 1);
    client
        .create_table("shared", &TableSpec::clover(256))
        .expect("table");
    let a = client.session().expect("session");
    let ta = a.table("shared").expect("table");
    let b = client.session().expect("session");
    let tb = b.table("shared").expect("table");
    a.block_on(ta.put(b"k", b"v0")).expect("put");
    assert_eq!(b.block_on(tb.get(b"k")), Ok(Some(b"v0".to_vec())));
    for i in 1..6u8 {
        // B read the key last; A writes past B's tail.
        a.block_on(ta.put(b"k", &[b'v', b'0' + i])).expect("put");
        assert_eq!(b.block_on(tb.get(b"k")), Ok(Some(vec![b'v', b'0' + i])));
        let op = b.last_op();
        assert_eq!(op.round_trips, 1, "the writer's tail, read at once: {op:?}");
    }
    // Another client knows nothing of A's writes: its session walks from its own tail.
    let other = Client::in_process(
        &client.metadata_url(),
        kvstore::ClientOptions::default(),
        std::collections::HashMap::new(),
        Box::new(()),
    )
    .expect("client");
    let c = other.session().expect("session");
    let tc = c.table("shared").expect("table");
    assert_eq!(c.block_on(tc.get(b"k")), Ok(Some(b"v5".to_vec())));
    a.block_on(ta.put(b"k", b"w")).expect("put");
    assert_eq!(c.block_on(tc.get(b"k")), Ok(Some(b"w".to_vec())));
    assert!(c.last_op().round_trips >= 2, "{:?}", c.last_op());
}
