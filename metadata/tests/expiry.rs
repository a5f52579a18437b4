//! Lease expiry driven by a fake clock: expired leases cannot be renewed, and their
//! memory comes back only after the grace period.

mod common;

use std::sync::Arc;

use common::{client, memnode, start};
use metadata::StoreConfig;
use metadata::api::CreateLeaseRequest;
use metadata::clock::FakeClock;
use metadata::store::MemStore;

#[test]
fn expired_leases_return_memory_after_the_grace_period() {
    let clock = FakeClock::new(1_700_000_000_000);
    let server = start(StoreConfig::Memory(MemStore::new()), |c| {
        c.clock = Arc::new(clock.clone());
        c.catalog.grace_ms = 2_000;
        c.catalog.heartbeat_timeout_ms = u64::MAX / 4;
        // The background sweep runs too; the test also sweeps by hand.
        c.sweep_interval = std::time::Duration::from_millis(10);
    });
    let c = client(&server);
    let m = c.register_memnode(&memnode("m", 4791, 1, 4 << 20)).unwrap();
    let lease = |ttl| {
        c.create_lease(&CreateLeaseRequest {
            client: "crashy".into(),
            bytes: 1,
            memnode: None,
            ttl_ms: Some(ttl),
            min_bytes: None,
            table: None,
        })
    };
    // 4 MiB region -> 256 KiB chunks -> 16 leases fill it.
    let short = lease(1_000).unwrap();
    let long = lease(10_000).unwrap();
    let mut rest = Vec::new();
    while let Ok(l) = lease(60_000) {
        rest.push(l);
    }
    assert_eq!(rest.len(), 14);
    let free = || c.memnodes().unwrap()[0].free_bytes;
    assert_eq!(free(), 0);

    // Before expiry: active, renewable.
    clock.advance(999);
    assert_eq!(server.sweep().unwrap(), 0);
    assert_eq!(c.get_lease(short.lease_id).unwrap().state, "active");

    // Expired: not renewable, memory still held during the grace period.
    clock.advance(1);
    let e = c.renew(short.lease_id, None).unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(410), Some("lease_expired")));
    assert_eq!(c.get_lease(short.lease_id).unwrap().state, "expired");
    clock.advance(1_999);
    assert_eq!(server.sweep().unwrap(), 0);
    assert_eq!(free(), 0);
    assert_eq!(
        c.lease("x", 1).unwrap_err().code(),
        Some("out_of_memory"),
        "memory in its grace period is not handed out"
    );

    // Grace over: reclaimed, and the memory is leased again.
    clock.advance(1);
    assert_eq!(server.sweep().unwrap(), 1);
    assert_eq!(free(), 256 << 10);
    assert_eq!(c.get_lease(short.lease_id).unwrap_err().status(), Some(404));
    let reused = lease(60_000).unwrap();
    assert_eq!((reused.va, reused.memnode_id), (short.va, m.id));

    // Renewing keeps a lease alive past its original expiry.
    c.renew(long.lease_id, Some(20_000)).unwrap();
    clock.advance(15_000);
    assert_eq!(server.sweep().unwrap(), 0);
    assert_eq!(c.get_lease(long.lease_id).unwrap().state, "active");
    clock.advance(60_000);
    assert_eq!(server.sweep().unwrap(), 2 + rest.len());
    assert_eq!(free(), 4 << 20);
    let metrics = c.request("GET", "/metrics", None).unwrap().text();
    assert!(
        metrics.contains(&format!(
            "dmkv_metadata_leases_reclaimed_total {}",
            3 + rest.len()
        )),
        "{metrics}"
    );
}

#[test]
fn memnodes_turn_unhealthy_without_heartbeats_on_a_fake_clock() {
    let clock = FakeClock::new(10_000);
    let server = start(StoreConfig::Memory(MemStore::new()), |c| {
        c.clock = Arc::new(clock.clone());
    });
    let c = client(&server);
    let m = c.register_memnode(&memnode("m", 4791, 1, 4 << 20)).unwrap();
    clock.advance(3_000);
    assert!(c.memnodes().unwrap()[0].healthy);
    clock.advance(1);
    let n = &c.memnodes().unwrap()[0];
    assert!(!n.healthy);
    assert_eq!(n.last_heartbeat_age_ms, 3_001);
    assert_eq!(c.lease("a", 1).unwrap_err().code(), Some("no_memnodes"));
    let e = c
        .create_lease(&CreateLeaseRequest {
            client: "a".into(),
            bytes: 1,
            memnode: Some(m.id),
            ttl_ms: None,
            min_bytes: None,
            table: None,
        })
        .unwrap_err();
    assert_eq!(e.code(), Some("memnode_unhealthy"));
    c.heartbeat(m.id).unwrap();
    assert!(c.memnodes().unwrap()[0].healthy);
    assert!(c.lease("a", 1).is_ok());
    assert_eq!(c.heartbeat(999).unwrap_err().status(), Some(404));
}
