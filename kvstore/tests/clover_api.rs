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
