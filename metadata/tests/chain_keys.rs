//! `GET /v1/tables/{name}/keys`: a Clover table's keys, paginated, by prefix.

mod common;

use base64::Engine as _;
use common::{client, memnode, start_recording};
use metadata::StoreConfig;
use metadata::api::{CreateTableRequest, IndexKind};
use metadata::client::MetadataClient;
use metadata::store::MemStore;

fn table(name: &str, index: IndexKind) -> CreateTableRequest {
    CreateTableRequest {
        name: name.into(),
        index,
        value_limit: 4096,
        memnodes: None,
        replication: None,
        update_mode: None,
        inplace: None,
    }
}

fn b64(k: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(k)
}

/// Every key of `table` starting with `prefix`, fetched in pages of `limit`.
fn all_keys(c: &MetadataClient, table: &str, prefix: &[u8], limit: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = c
            .chain_keys(table, prefix, after.as_deref(), limit)
            .unwrap();
        assert!(page.keys.len() <= limit);
        for k in &page.keys {
            out.push(
                base64::engine::general_purpose::STANDARD
                    .decode(&k.key)
                    .unwrap(),
            );
        }
        match page.next_after {
            Some(a) => after = Some(base64::engine::general_purpose::STANDARD.decode(a).unwrap()),
            None => return out,
        }
    }
}

#[test]
fn keys_are_listed_in_pages_by_prefix_in_byte_order() {
    let (server, _scrubber) = start_recording(StoreConfig::Memory(MemStore::new()), |_| {});
    let c = client(&server);
    c.register_memnode(&memnode("m1", 4791, 11, 64 << 20))
        .unwrap();
    c.create_table(&table("users", IndexKind::Clover)).unwrap();
    c.create_table(&table("users2", IndexKind::Clover)).unwrap();
    c.create_table(&table("idx", IndexKind::Race)).unwrap();

    let mut keys: Vec<Vec<u8>> = (0..25)
        .map(|i| format!("user:{i:02}").into_bytes())
        .collect();
    keys.push(b"admin".to_vec());
    keys.push(vec![0xfb, 0xff, b'?', b'&']);
    let mut ids = Vec::new();
    for k in &keys {
        ids.push(c.open_chain("users", k).unwrap().chain_id);
    }
    // Another table's keys never show.
    c.open_chain("users2", b"user:99").unwrap();
    keys.sort();

    assert_eq!(all_keys(&c, "users", b"", 1000), keys);
    assert_eq!(all_keys(&c, "users", b"", 7), keys);
    assert_eq!(all_keys(&c, "users", b"", 1), keys);
    let users: Vec<Vec<u8>> = keys
        .iter()
        .filter(|k| k.starts_with(b"user:"))
        .cloned()
        .collect();
    assert_eq!(users.len(), 25);
    assert_eq!(all_keys(&c, "users", b"user:", 4), users);
    assert_eq!(all_keys(&c, "users", b"user:1", 1000).len(), 10);
    assert!(all_keys(&c, "users", b"zzz", 10).is_empty());

    // The page carries the chain ids, and the last page has no cursor.
    let page = c.chain_keys("users", b"admin", None, 10).unwrap();
    assert_eq!(page.keys.len(), 1);
    assert_eq!(page.keys[0].key, b64(b"admin"));
    assert_eq!(page.keys[0].chain_id, ids[25]);
    assert_eq!(page.next_after, None);
    let page = c.chain_keys("users", b"", None, 2).unwrap();
    assert_eq!(page.next_after.as_deref(), Some(page.keys[1].key.as_str()));

    // The cap: a limit above 1000 is served as 1000.
    let page = c.chain_keys("users", b"", None, 5000).unwrap();
    assert_eq!(page.keys.len(), keys.len());

    // Clear errors.
    assert_eq!(
        c.chain_keys("idx", b"", None, 10).unwrap_err().code(),
        Some("wrong_index")
    );
    assert_eq!(
        c.chain_keys("nope", b"", None, 10).unwrap_err().code(),
        Some("table_not_found")
    );
    for bad in [
        "/v1/tables/users/keys?limit=0",
        "/v1/tables/users/keys?prefix=%%%",
        "/v1/tables/users/keys?after=%%%",
    ] {
        let r = c.request("GET", bad, None).unwrap();
        assert_eq!(r.status, 422, "{bad}: {}", r.text());
    }
    let r = c
        .request("GET", "/v1/tables/users/keys?limit=x", None)
        .unwrap();
    assert_eq!(r.status / 100, 4, "{}", r.text());
}
