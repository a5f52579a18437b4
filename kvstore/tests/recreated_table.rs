//! A table created after another was dropped starts empty, whatever memory it lands
//! on: the metadata service zeroes the table-owned memory it hands out (the RACE
//! directory area, the in-place tuple area and latch array), so nothing of the
//! dropped table — a ready directory naming freed subtables, a layout fingerprint,
//! live tuples — is taken for the new table's.

use kvstore::{Client, ClientOptions, SchemeSpec, TableSpec, TransportKind};
use testbed::EmbeddedOptions;

fn cluster() -> Client {
    testbed::embedded_client(EmbeddedOptions {
        memnodes: 1,
        transport: TransportKind::Local,
        client: ClientOptions::default(),
        ..EmbeddedOptions::default()
    })
    .expect("cluster")
}

/// Fill table `name`, drop it, create the same table again, and check it is empty
/// and usable.
fn refill(client: &Client, name: &str, create: &dyn Fn(&Client)) {
    create(client);
    let s = client.session().expect("session");
    let t = s.table(name).expect("table");
    s.block_on(async {
        for i in 0..64u32 {
            t.put(format!("key{i}").as_bytes(), &[i as u8 + 1; 48])
                .await
                .expect("put");
        }
        assert_eq!(
            t.get(b"key5").await.expect("get").expect("a value"),
            vec![6u8; 48]
        );
    });
    s.quiesce();
    drop(t);
    drop(s);
    client.drop_table(name).expect("drop");
    create(client);
    let s = client.session().expect("session");
    let t = s.table(name).expect("table");
    s.block_on(async {
        for i in 0..64u32 {
            assert_eq!(
                t.get(format!("key{i}").as_bytes()).await,
                Ok(None),
                "{name}: key{i} of the dropped table is served by the new one"
            );
        }
        t.insert(b"fresh", b"value").await.expect("insert");
        assert_eq!(
            t.get(b"fresh").await.expect("get").expect("a value"),
            b"value"
        );
    });
}

#[test]
fn recreated_race_table_is_empty() {
    let client = cluster();
    refill(&client, "r", &|c| {
        c.create_table("r", &TableSpec::race(64)).expect("create");
    });
}

#[test]
fn recreated_clover_table_is_empty() {
    let client = cluster();
    refill(&client, "c", &|c| {
        c.create_table("c", &TableSpec::clover(64)).expect("create");
    });
}

#[test]
fn recreated_inplace_tables_are_empty() {
    let client = cluster();
    for scheme in [
        "pessimistic-rw-async-embedded",
        "pessimistic-rw-async-separate",
        "versioning",
        "farm",
    ] {
        let spec: SchemeSpec = scheme.parse().expect("scheme");
        refill(&client, scheme, &|c| {
            c.create_table(scheme, &TableSpec::in_place(spec, 64, 256))
                .expect("create");
        });
    }
}
