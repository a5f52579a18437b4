//! `Table::keys`: every index lists its live keys (deleted keys are not listed),
//! by prefix, in byte order, with a limit — RACE across subtable splits.

use std::collections::BTreeSet;

use kvstore::{Client, ClientOptions, SchemeSpec, Table, TableSpec, TransportKind};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use testbed::EmbeddedOptions;

fn cluster() -> Client {
    testbed::embedded_client(EmbeddedOptions {
        memnodes: 2,
        capacity: 64 << 20,
        transport: TransportKind::Local,
        // Four-group subtables (84 slots): a few hundred keys split them many times.
        client: ClientOptions::default()
            .with_race(kvstore::RaceOptions::default().with_subtable_groups(4)),
        prefault: false,
    })
    .expect("embedded cluster")
}

/// Write `n` keys under two prefixes, delete a seeded random third, and check
/// the listing against what is live.
fn lists_live_keys(client: &Client, name: &str, n: usize) {
    let s = client.session().expect("session");
    let t: Table = s.table(name).expect("table");
    s.block_on(async {
        assert_eq!(t.keys(b"", None).await.unwrap(), Vec::<Vec<u8>>::new());
        let mut live = BTreeSet::new();
        for i in 0..n {
            let k = if i % 3 == 0 {
                format!("admin:{i:04}")
            } else {
                format!("user:{i:04}")
            };
            t.put(k.as_bytes(), format!("v{i}").as_bytes())
                .await
                .unwrap();
            live.insert(k.into_bytes());
        }
        let mut rng = SmallRng::seed_from_u64(7);
        let all: Vec<Vec<u8>> = live.iter().cloned().collect();
        for k in all {
            if rng.random_bool(0.33) {
                t.delete(&k).await.unwrap();
                live.remove(&k);
            }
        }
        let want: Vec<Vec<u8>> = live.iter().cloned().collect();
        assert_eq!(t.keys(b"", None).await.unwrap(), want, "{name}");
        let users: Vec<Vec<u8>> = want
            .iter()
            .filter(|k| k.starts_with(b"user:"))
            .cloned()
            .collect();
        assert!(!users.is_empty());
        assert_eq!(t.keys(b"user:", None).await.unwrap(), users, "{name}");
        assert_eq!(
            t.keys(b"user:", Some(5)).await.unwrap(),
            users[..5].to_vec(),
            "{name}"
        );
        assert!(t.keys(b"nobody", None).await.unwrap().is_empty());
        // A deleted key written again is listed again.
        let gone = (0..n)
            .map(|i| format!("user:{i:04}").into_bytes())
            .find(|k| !live.contains(k) && k.starts_with(b"user:"))
            .expect("a deleted user key");
        t.put(&gone, b"back").await.unwrap();
        assert!(t.keys(b"user:", None).await.unwrap().contains(&gone));
    });
}

#[test]
fn clover_lists_keys_with_a_value() {
    let client = cluster();
    client
        .create_table("c", &TableSpec::clover(256))
        .expect("table");
    lists_live_keys(&client, "c", 150);
}

#[test]
fn race_lists_keys_across_many_subtables() {
    let client = cluster();
    client
        .create_table("r", &TableSpec::race(256))
        .expect("table");
    // 600 keys in 84-slot subtables: the table splits into many subtables.
    lists_live_keys(&client, "r", 600);
}

#[test]
fn inplace_lists_live_tuples() {
    let client = cluster();
    let spec: SchemeSpec = "pessimistic-x-wc-wu".parse().expect("scheme");
    client
        .create_table("i", &TableSpec::in_place(spec, 64, 512))
        .expect("table");
    lists_live_keys(&client, "i", 150);
}

#[test]
fn race_listing_sees_every_key_present_throughout_while_the_table_splits() {
    let client = cluster();
    client
        .create_table("g", &TableSpec::race(64))
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("g").expect("table");
    let stable: Vec<Vec<u8>> = (0..100)
        .map(|i| format!("stable:{i:03}").into_bytes())
        .collect();
    s.block_on(async {
        for k in &stable {
            t.insert(k, b"s").await.unwrap();
        }
    });
    let writer = {
        let client = client.clone();
        std::thread::spawn(move || {
            let s = client.session().expect("session");
            let t = s.table("g").expect("table");
            let mut rng = SmallRng::seed_from_u64(11);
            s.block_on(async {
                for i in 0..800u32 {
                    let k = format!("moving:{i:04}");
                    t.put(k.as_bytes(), b"m").await.unwrap();
                    if rng.random_bool(0.2) {
                        t.delete(k.as_bytes()).await.unwrap();
                    }
                }
            });
        })
    };
    let mut listings = 0;
    while !writer.is_finished() || listings == 0 {
        let keys = s.block_on(t.keys(b"stable:", None)).unwrap();
        assert_eq!(keys, stable, "listing {listings}");
        listings += 1;
    }
    writer.join().expect("writer");
    let all = s.block_on(t.keys(b"", None)).unwrap();
    assert!(all.len() > 100 + 500, "{} keys", all.len());
    assert!(
        listings > 1,
        "the listing ran while the writer split the table"
    );
}
