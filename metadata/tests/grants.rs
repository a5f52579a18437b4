//! `POST /v1/tables/{name}/grants`: the service signs grants over exactly a table's
//! memory on one memory node, for callers with its token, and only with a grant key.

mod common;

use std::time::Duration;

use dmkv_api::grant::{Grant, GrantAccess, GrantKey, GrantRequest};
use metadata::StoreConfig;
use metadata::api::{CreateLeaseRequest, CreateTableRequest, IndexKind};
use metadata::client::MetadataClient;
use metadata::grant_issuer::GrantIssuer;
use metadata::store::MemStore;

const BASE_VA: u64 = 0x1000_0000_0000;

fn key() -> GrantKey {
    GrantKey::from_secret(b"metadata-test-grant-key").unwrap()
}

fn table(name: &str) -> CreateTableRequest {
    CreateTableRequest {
        name: name.into(),
        index: IndexKind::Race,
        value_limit: 4096,
        memnodes: None,
        replication: None,
        update_mode: None,
        inplace: None,
    }
}

fn request(memnode_id: u64, access: Option<GrantAccess>) -> GrantRequest {
    GrantRequest {
        memnode_id,
        client: Some("ycsb-7".into()),
        access,
    }
}

#[test]
fn grants_cover_exactly_the_tables_memory_on_the_node() {
    let server = common::start(StoreConfig::Memory(MemStore::new()), |c| {
        c.grants = Some(GrantIssuer::new(key(), Duration::from_secs(30)));
    });
    let c = common::client(&server);
    let m1 = c
        .register_memnode(&common::memnode("m1", 4791, 11, 64 << 20))
        .unwrap()
        .id;
    c.create_table(&table("a")).unwrap();
    c.create_table(&table("b")).unwrap();
    let lease_a = c
        .create_lease(&CreateLeaseRequest {
            client: "ycsb-7".into(),
            bytes: 1 << 20,
            min_bytes: None,
            memnode: Some(m1),
            ttl_ms: None,
            table: Some("a".into()),
        })
        .unwrap();
    let before = server.shared().clock.now_ms();
    let g = c.grant("a", &request(m1, None)).unwrap();
    assert_eq!((g.memnode_id, g.table.as_str()), (m1, "a"));
    assert_eq!(g.access, GrantAccess::ReadWrite);
    assert!(g.expires_at_ms >= before + 30_000 && g.expires_at_ms <= before + 31_000);
    // The signed grant says what the answer says, under the shared key.
    let signed = Grant::verify(&g.grant, &key()).unwrap();
    assert_eq!(signed.windows, g.windows);
    assert_eq!(signed.client_id, "ycsb-7");
    assert_eq!(signed.expires_at_ms, g.expires_at_ms);
    // The data lease is in it; table b's memory is not.
    let lease_offset = lease_a.va - BASE_VA;
    assert!(
        g.windows
            .iter()
            .any(|w| w.offset <= lease_offset && lease_offset + lease_a.len <= w.offset + w.len),
        "{:?} lacks the lease at {lease_offset:#x}",
        g.windows
    );
    let b = c
        .grant("b", &request(m1, Some(GrantAccess::ReadOnly)))
        .unwrap();
    assert_eq!(b.access, GrantAccess::ReadOnly);
    for wb in &b.windows {
        for wa in &g.windows {
            assert!(
                wb.offset + wb.len <= wa.offset || wa.offset + wa.len <= wb.offset,
                "tables a and b overlap: {wa:?} {wb:?}"
            );
        }
    }
    // Distinct grants, unknown table or node, and no token.
    assert_ne!(c.grant("a", &request(m1, None)).unwrap().grant, g.grant);
    assert!(c.grant("nope", &request(m1, None)).is_err());
    assert!(c.grant("a", &request(m1 + 99, None)).is_err());
    let anonymous = MetadataClient::new(&server.url()).unwrap();
    let e = anonymous.grant("a", &request(m1, None)).unwrap_err();
    assert!(e.to_string().contains("401"), "{e}");
}

#[test]
fn without_a_grant_key_no_grants_are_issued() {
    let server = common::start(StoreConfig::Memory(MemStore::new()), |_| {});
    let c = common::client(&server);
    let m1 = c
        .register_memnode(&common::memnode("m1", 4791, 11, 64 << 20))
        .unwrap()
        .id;
    c.create_table(&table("a")).unwrap();
    let e = c.grant("a", &request(m1, None)).unwrap_err();
    assert!(e.to_string().contains("grants_disabled"), "{e}");
}
