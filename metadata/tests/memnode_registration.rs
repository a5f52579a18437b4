//! A real in-process memnode registers itself through `memnode::registrar::HttpRegistrar`,
//! heartbeats, turns unhealthy when it stops, and deregisters on shutdown once nothing
//! lives on it.

mod common;

use std::time::Duration;

use common::{TOKEN, client, start, wait_until};
use memnode::registrar::{HttpRegistrar, Registrar};
use memnode::{Memnode, MemnodeConfig};
use metadata::StoreConfig;
use metadata::store::MemStore;

#[test]
fn memnode_registers_heartbeats_goes_unhealthy_and_deregisters() {
    let server = start(StoreConfig::Memory(MemStore::new()), |c| {
        c.catalog.heartbeat_timeout_ms = 1500;
        c.catalog.heartbeat_interval_ms = 100;
    });
    let c = client(&server);
    let node = Memnode::start(MemnodeConfig::local(1 << 20)).unwrap();
    let registrar = HttpRegistrar::new(&server.url(), Some(TOKEN.into()), None)
        .unwrap()
        .with_interval(Duration::from_millis(100));
    registrar
        .register(&node.node_info(), &node.admin_url())
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || c
            .memnodes()
            .unwrap()
            .iter()
            .any(|m| m.healthy)),
        "the memnode never appeared healthy"
    );
    let info = c.memnodes().unwrap().remove(0);
    let regions = node.regions();
    assert_eq!(info.name, node.data_addr().to_string());
    assert_eq!(info.data_addr, node.data_addr().to_string());
    assert_eq!(info.admin_url, node.admin_url());
    assert_eq!(info.capacity, node.node_info().capacity);
    assert_eq!(
        (
            info.regions[0].rkey,
            info.regions[0].base_va,
            info.regions[0].len
        ),
        (regions[0].rkey, regions[0].base_va, regions[0].len)
    );
    // The catalog shows the memnode as soon as the registration is stored; the registrar
    // learns its id when the response reaches its thread, a moment later.
    assert!(
        wait_until(Duration::from_secs(5), || registrar.memnode_id().is_some()),
        "the registrar never learnt its id"
    );
    assert_eq!(registrar.memnode_id(), Some(info.id));
    // It stays healthy across several heartbeat timeouts.
    std::thread::sleep(Duration::from_millis(900));
    assert!(c.memnodes().unwrap()[0].healthy);
    assert!(
        registrar.counts().1 >= 3,
        "heartbeats: {:?}",
        registrar.counts()
    );
    // Its memory can be leased and lies in its region.
    let l = c.lease("app", 1).unwrap();
    assert_eq!(l.rkey, regions[0].rkey);
    assert!(regions[0].contains(l.va, l.len));

    // Stop heartbeating (as a crash would): unhealthy, and no new leases.
    registrar.stop();
    assert!(
        wait_until(Duration::from_secs(5), || !c.memnodes().unwrap()[0].healthy),
        "the memnode stayed healthy without heartbeats"
    );
    assert_eq!(c.lease("app", 1).unwrap_err().code(), Some("no_memnodes"));

    // A new registrar (same name, same regions) revives it with the same id and leases.
    let again = HttpRegistrar::new(&server.url(), Some(TOKEN.into()), None)
        .unwrap()
        .with_interval(Duration::from_millis(100));
    again
        .register(&node.node_info(), &node.admin_url())
        .unwrap();
    assert!(wait_until(Duration::from_secs(5), || c.memnodes().unwrap()
        [0]
    .healthy));
    assert!(wait_until(Duration::from_secs(5), || again
        .memnode_id()
        .is_some()));
    assert_eq!(again.memnode_id(), Some(info.id));
    assert!(c.get_lease(l.lease_id).is_ok());

    // Shutdown while a lease lives there keeps the registration (same id on restart).
    again
        .deregister(&node.node_info(), &node.admin_url())
        .unwrap();
    assert_eq!(c.memnodes().unwrap()[0].id, info.id);
    // With nothing left on it, shutdown deregisters.
    c.free(l.lease_id).unwrap();
    let last = HttpRegistrar::new(&server.url(), Some(TOKEN.into()), None)
        .unwrap()
        .with_interval(Duration::from_millis(100));
    last.register(&node.node_info(), &node.admin_url()).unwrap();
    assert!(wait_until(Duration::from_secs(5), || last
        .memnode_id()
        .is_some()));
    last.deregister(&node.node_info(), &node.admin_url())
        .unwrap();
    assert!(c.memnodes().unwrap().is_empty());
    node.shutdown();
}

#[test]
fn a_forgotten_memnode_registers_again_and_a_wrong_token_is_retried_not_fatal() {
    let server = start(StoreConfig::Memory(MemStore::new()), |_| {});
    let c = client(&server);
    let node = Memnode::start(MemnodeConfig::local(1 << 20)).unwrap();

    // Wrong token: registration keeps failing (and retrying) without panicking.
    let bad = HttpRegistrar::new(&server.url(), Some("wrong".into()), Some("n1".into()))
        .unwrap()
        .with_interval(Duration::from_millis(50));
    bad.register(&node.node_info(), &node.admin_url()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(bad.memnode_id(), None);
    assert!(c.memnodes().unwrap().is_empty());
    drop(bad);

    let good = HttpRegistrar::new(&server.url(), Some(TOKEN.into()), Some("n1".into()))
        .unwrap()
        .with_interval(Duration::from_millis(50));
    good.register(&node.node_info(), &node.admin_url()).unwrap();
    assert!(wait_until(Duration::from_secs(5), || good
        .memnode_id()
        .is_some()));
    let first = good.memnode_id().unwrap();
    // An operator deletes it; the next heartbeat gets 404 and the node registers anew.
    c.deregister_memnode(first).unwrap();
    assert!(wait_until(Duration::from_secs(5), || good
        .memnode_id()
        .is_some_and(|id| id != first)));
    assert_eq!(c.memnodes().unwrap()[0].name, "n1");
    drop(good);
    node.shutdown();
}
