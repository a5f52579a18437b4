//! `Table::locate`: where a key lives, for Clover and RACE tables — its memnode, chain
//! and tail node or subtable and buckets, version and value — and a clear absence for
//! keys never written or deleted, without creating a chain.

use kvstore::{Client, ClientOptions, KeyPlace, SchemeSpec, TableSpec, TransportKind};
use testbed::EmbeddedOptions;

fn cluster() -> Client {
    testbed::embedded_client(EmbeddedOptions {
        memnodes: 2,
        capacity: 32 << 20,
        transport: TransportKind::Local,
        client: ClientOptions::default(),
        prefault: false,
    })
    .expect("embedded cluster")
}

#[test]
fn clover_keys_are_located_by_chain_and_tail() {
    let client = cluster();
    client
        .create_table("users", &TableSpec::clover(256))
        .unwrap();
    let memnodes: Vec<u64> = client.memnodes().unwrap().iter().map(|m| m.id).collect();
    let s = client.session().unwrap();
    let t = s.table("users").unwrap();
    s.block_on(async {
        t.put(b"alice", b"v1").await.unwrap();
        t.put(b"alice", b"<b>v2</b>").await.unwrap();
        let loc = t.locate(b"alice").await.unwrap();
        assert!(loc.found());
        assert_eq!(loc.index, "clover");
        assert_eq!(loc.value.as_deref(), Some(&b"<b>v2</b>"[..]));
        let KeyPlace::Clover(p) = &loc.place else {
            panic!("{loc:?}")
        };
        assert!(!p.tombstone);
        assert!(memnodes.contains(&p.tail.memnode), "{loc:?}");
        assert_eq!(loc.memnodes, vec![p.tail.memnode]);
        // Two writes: the tail is a newer version than the first node.
        let first = loc.version.unwrap();
        t.put(b"alice", b"v3").await.unwrap();
        let again = t.locate(b"alice").await.unwrap();
        assert_eq!(again.version, Some(first + 1));
        let KeyPlace::Clover(q) = &again.place else {
            panic!("{again:?}")
        };
        assert_eq!(q.chain_id, p.chain_id);
        assert_ne!(q.tail, p.tail, "a new tail node");

        // Never written: absent, and the lookup created no chain.
        let none = t.locate(b"nobody").await.unwrap();
        assert!(!none.found());
        assert_eq!(none.place, KeyPlace::NoChain);
        assert!(none.memnodes.is_empty());
        assert_eq!(t.locate(b"nobody").await.unwrap().place, KeyPlace::NoChain);

        // Deleted: absent, at its tombstone.
        t.delete(b"alice").await.unwrap();
        let gone = t.locate(b"alice").await.unwrap();
        assert!(!gone.found());
        let KeyPlace::Clover(g) = &gone.place else {
            panic!("{gone:?}")
        };
        assert!(g.tombstone);
    });
    s.quiesce();
}

#[test]
fn race_keys_are_located_by_subtable_and_buckets() {
    let client = cluster();
    client
        .create_table("orders", &TableSpec::race(256))
        .unwrap();
    let s = client.session().unwrap();
    let t = s.table("orders").unwrap();
    s.block_on(async {
        t.put(b"order-1", b"pending").await.unwrap();
        let loc = t.locate(b"order-1").await.unwrap();
        assert!(loc.found());
        assert_eq!(loc.index, "race");
        assert_eq!(loc.value.as_deref(), Some(&b"pending"[..]));
        assert_eq!(loc.version, None);
        let KeyPlace::Race(p) = &loc.place else {
            panic!("{loc:?}")
        };
        assert_eq!(loc.memnodes, vec![p.subtable.memnode]);
        // The place is a function of the key: the same for a lookup of a missing key
        // with the same hash, and stable between lookups.
        assert_eq!(t.locate(b"order-1").await.unwrap().place, loc.place);
        let none = t.locate(b"order-2").await.unwrap();
        assert!(!none.found());
        assert!(matches!(none.place, KeyPlace::Race(_)));
        t.delete(b"order-1").await.unwrap();
        assert!(!t.locate(b"order-1").await.unwrap().found());
    });
    s.quiesce();
}

#[test]
fn in_place_tables_and_bad_keys_are_refused() {
    let client = cluster();
    client
        .create_table(
            "tuples",
            &TableSpec::in_place(
                "pessimistic-rw-async-embedded"
                    .parse::<SchemeSpec>()
                    .unwrap(),
                64,
                128,
            ),
        )
        .unwrap();
    client
        .create_table("users", &TableSpec::clover(64))
        .unwrap();
    let s = client.session().unwrap();
    let tuples = s.table("tuples").unwrap();
    let users = s.table("users").unwrap();
    s.block_on(async {
        let e = tuples.locate(b"k").await.unwrap_err();
        assert!(e.to_string().contains("Clover and RACE"), "{e}");
        assert!(users.locate(b"").await.is_err(), "an empty key is refused");
    });
    s.quiesce();
}
