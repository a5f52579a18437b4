//! Data leases (leases that name a table): when their holder stops renewing them,
//! the table adopts their memory instead of the free map getting it back; a client
//! that stops cleanly hands them over trimmed to what it used; dropping the table
//! frees all of it. Driven by a fake clock.

mod common;

use std::sync::Arc;

use common::{client, memnode, start};
use metadata::StoreConfig;
use metadata::api::{CreateLeaseRequest, CreateTableRequest, IndexKind};
use metadata::clock::FakeClock;
use metadata::store::MemStore;

fn table(name: &str) -> CreateTableRequest {
    CreateTableRequest {
        name: name.into(),
        index: IndexKind::Clover,
        value_limit: 256,
        memnodes: None,
        replication: None,
        update_mode: None,
        inplace: None,
    }
}

#[test]
fn expired_data_leases_are_adopted_by_their_table_until_it_is_dropped() {
    let clock = FakeClock::new(1_700_000_000_000);
    let server = start(StoreConfig::Memory(MemStore::new()), |c| {
        c.clock = Arc::new(clock.clone());
        c.catalog.grace_ms = 2_000;
        c.catalog.heartbeat_timeout_ms = u64::MAX / 4;
        c.sweep_interval = std::time::Duration::from_millis(10);
    });
    let c = client(&server);
    c.register_memnode(&memnode("m", 4791, 1, 4 << 20)).unwrap();
    let free = || c.memnodes().unwrap()[0].free_bytes;
    let start_free = free();
    c.create_table(&table("t")).unwrap();
    let lease = |client: &str, table: Option<&str>| {
        c.create_lease(&CreateLeaseRequest {
            client: client.into(),
            bytes: 1,
            memnode: None,
            ttl_ms: Some(1_000),
            min_bytes: None,
            table: table.map(str::to_owned),
        })
    };
    // A data lease of the crashed client, a plain lease, a data lease for a table
    // that does not exist.
    let data = lease("crashy", Some("t")).unwrap();
    assert_eq!(data.table.as_deref(), Some("t"));
    assert_eq!(data.owner, "client");
    let plain = lease("crashy", None).unwrap();
    let e = lease("crashy", Some("nope")).unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(404), Some("table_not_found")));
    let mem = c.table("t").unwrap().memory;
    assert_eq!((mem.client_leases, mem.client_bytes), (1, data.len));
    assert_eq!(mem.table_owned_bytes, 0);

    // Expiry plus grace: the plain lease is reclaimed, the data lease adopted.
    clock.advance(3_000);
    server.sweep().unwrap();
    assert_eq!(
        c.get_lease(plain.lease_id).unwrap_err().code(),
        Some("lease_not_found")
    );
    let adopted = c.get_lease(data.lease_id).unwrap();
    assert_eq!(adopted.owner, "table:t");
    assert_eq!(adopted.state, "table");
    assert_eq!(adopted.expires_at_ms, None);
    assert!(adopted.adopted_at_ms.is_some());
    assert_eq!((adopted.va, adopted.len), (data.va, data.len));
    let e = c.renew(data.lease_id, None).unwrap_err();
    assert_eq!(e.code(), Some("lease_owned_by_table"));
    let mem = c.table("t").unwrap().memory;
    assert_eq!(mem.client_leases, 0);
    assert_eq!((mem.adopted_leases, mem.adopted_bytes), (1, data.len));
    assert_eq!(mem.table_owned_bytes, data.len);
    assert_eq!(free(), start_free - data.len);
    let metrics = c.request("GET", "/metrics", None).unwrap().text();
    assert!(
        metrics.contains("dmkv_metadata_leases_adopted_total 1\n"),
        "{metrics}"
    );
    // Later sweeps leave it alone.
    clock.advance(1_000_000);
    server.sweep().unwrap();
    assert_eq!(c.get_lease(data.lease_id).unwrap().owner, "table:t");

    // A clean handover keeps only the used prefix (rounded up to 64 bytes).
    let clean = lease("tidy", Some("t")).unwrap();
    assert!(clean.len > 8192);
    let kept = c.adopt(clean.lease_id, Some(5000)).unwrap().unwrap();
    assert_eq!(
        (kept.va, kept.len, kept.owner.as_str()),
        (clean.va, 5056, "table:t")
    );
    assert_eq!(free(), start_free - data.len - 5056);
    // Nothing used: the lease is freed.
    let unused = lease("tidy", Some("t")).unwrap();
    assert!(c.adopt(unused.lease_id, Some(0)).unwrap().is_none());
    assert_eq!(free(), start_free - data.len - 5056);
    // Plain leases and table-owned ones cannot be handed over.
    let plain = lease("tidy", None).unwrap();
    assert_eq!(
        c.adopt(plain.lease_id, None).unwrap_err().code(),
        Some("not_a_data_lease")
    );
    assert_eq!(
        c.adopt(data.lease_id, None).unwrap_err().code(),
        Some("lease_owned_by_table")
    );
    c.free(plain.lease_id).unwrap();

    // Drop the table while a client still holds a data lease for it: table-owned
    // memory comes back at once, the client's lease after its grace period.
    let held = lease("alive", Some("t")).unwrap();
    c.drop_table("t").unwrap();
    assert_eq!(free(), start_free - held.len);
    let detached = c.get_lease(held.lease_id).unwrap();
    assert_eq!((detached.table, detached.state.as_str()), (None, "expired"));
    assert_eq!(
        c.renew(held.lease_id, None).unwrap_err().code(),
        Some("lease_expired")
    );
    clock.advance(2_000);
    server.sweep().unwrap();
    assert_eq!(free(), start_free);
    assert!(c.leases(None).unwrap().is_empty());
}
