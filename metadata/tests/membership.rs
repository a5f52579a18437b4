//! Memnode membership over the HTTP API: a memnode that holds table data cannot be
//! deleted by accident (409 naming the drain route and the tables), draining stops
//! new placements and reports what still lives there, a forced delete marks the
//! tables lost, a restart with new memory does too (persisted across a restart of
//! the service), a rejoin with the same region instance keeps everything, and the
//! state shows in `GET /v1/memnodes`, `GET /v1/tables/{name}` and `/metrics`.

mod common;

use std::time::Duration;

use common::{client, memnode, start};
use metadata::StoreConfig;
use metadata::api::{
    CreateLeaseRequest, CreateTableRequest, IndexKind, MemnodeState, RegisterMemnodeRequest,
    TableState,
};
use metadata::client::MetadataClient;
use metadata::store::MemStore;

fn table(name: &str, index: IndexKind, on: u64) -> CreateTableRequest {
    CreateTableRequest {
        name: name.into(),
        index,
        value_limit: 256,
        memnodes: Some(vec![on]),
        replication: None,
        update_mode: None,
        inplace: None,
    }
}

fn data_lease(c: &MetadataClient, table: &str, on: u64) -> u64 {
    c.create_lease(&CreateLeaseRequest {
        client: "app".into(),
        bytes: 1,
        memnode: Some(on),
        ttl_ms: None,
        table: Some(table.into()),
        min_bytes: None,
    })
    .unwrap()
    .lease_id
}

/// A registration whose region carries `instance` (a memnode with a region file).
fn persistent(name: &str, port: u16, rkey: u32, instance: u64) -> RegisterMemnodeRequest {
    let mut r = memnode(name, port, rkey, 16 << 20);
    r.regions[0].instance = instance;
    r
}

fn metric(c: &MetadataClient, sample: &str) -> bool {
    c.request("GET", "/metrics", None)
        .unwrap()
        .text()
        .lines()
        .any(|l| l == sample)
}

#[test]
fn deletion_is_refused_while_data_lives_there_and_drain_reports_it() {
    let server = start(StoreConfig::Memory(MemStore::new()), |_| {});
    let c = client(&server);
    let a = c
        .register_memnode(&memnode("a", 4791, 1, 16 << 20))
        .unwrap();
    let b = c
        .register_memnode(&memnode("b", 4792, 2, 16 << 20))
        .unwrap();
    c.create_table(&table("users", IndexKind::Clover, a.id))
        .unwrap();
    c.create_table(&table("index", IndexKind::Race, a.id))
        .unwrap();
    let lease = data_lease(&c, "users", a.id);

    let e = c.deregister_memnode(a.id).unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(409), Some("memnode_in_use")));
    let msg = e.to_string();
    for needle in [
        format!("POST /v1/memnodes/{}/drain", a.id),
        "index, users".to_owned(),
        "force=true".to_owned(),
    ] {
        assert!(msg.contains(&needle), "{needle}: {msg}");
    }
    let r = c
        .request(
            "DELETE",
            &format!("/v1/memnodes/{}?force=maybe", a.id),
            None,
        )
        .unwrap();
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(c.memnodes().unwrap().len(), 2, "nothing was deleted");

    // Drain: 202 with what lives there; no new memory goes there.
    let d = c.drain_memnode(a.id).unwrap();
    assert_eq!(d.state, MemnodeState::Draining);
    assert_eq!(d.tables, vec!["index".to_owned(), "users".to_owned()]);
    assert_eq!(d.leases, 2);
    assert!(!d.deletable);
    let listed = c.memnodes().unwrap();
    let info = listed.iter().find(|m| m.id == a.id).unwrap();
    assert!(info.draining);
    assert_eq!(info.state, MemnodeState::Draining);
    assert!(metric(&c, "dmkv_metadata_memnodes{state=\"draining\"} 1"));
    for _ in 0..4 {
        assert_eq!(c.lease("other", 1).unwrap().memnode_id, b.id);
    }
    let e = c
        .create_lease(&CreateLeaseRequest {
            client: "app".into(),
            bytes: 1,
            memnode: Some(a.id),
            ttl_ms: None,
            table: None,
            min_bytes: None,
        })
        .unwrap_err();
    assert_eq!(e.code(), Some("memnode_draining"));
    // Re-registration (a restart on the region file) keeps it draining.
    c.register_memnode(&memnode("a", 4791, 1, 16 << 20))
        .unwrap();
    assert!(
        c.memnodes()
            .unwrap()
            .iter()
            .any(|m| m.id == a.id && m.draining)
    );

    // Once nothing lives there it can be deleted.
    c.free(lease).unwrap();
    c.drop_table("users").unwrap();
    c.drop_table("index").unwrap();
    assert!(c.drain_memnode(a.id).unwrap().deletable);
    c.deregister_memnode(a.id).unwrap();
    assert_eq!(c.memnodes().unwrap().len(), 1);
}

#[test]
fn forced_deletion_and_new_memory_mark_tables_lost_and_the_loss_persists() {
    let dir = tempfile::tempdir().unwrap();
    let store = || StoreConfig::Sled(dir.path().join("db"));
    let server = start(store(), |_| {});
    let c = client(&server);
    let a = c.register_memnode(&persistent("a", 4791, 1, 11)).unwrap();
    let b = c.register_memnode(&persistent("b", 4792, 2, 22)).unwrap();
    c.create_table(&table("on-a", IndexKind::Race, a.id))
        .unwrap();
    c.create_table(&table("on-b", IndexKind::Clover, b.id))
        .unwrap();
    let kept = data_lease(&c, "on-b", b.id);
    c.create_table(&table("elsewhere", IndexKind::Clover, b.id))
        .unwrap();
    assert!(c.memnodes().unwrap().iter().all(|m| m.persistent));

    // a rejoins with the same instance: nothing changes.
    let again = c.register_memnode(&persistent("a", 4791, 1, 11)).unwrap();
    assert_eq!((again.id, again.epoch, again.revoked_leases), (a.id, 1, 0));
    assert_eq!(c.table("on-a").unwrap().health.state, TableState::Healthy);

    // a comes back with the same rkey but another instance: its memory is new.
    let new = c.register_memnode(&persistent("a", 4791, 1, 12)).unwrap();
    assert_eq!((new.id, new.epoch, new.revoked_leases), (a.id, 2, 1));
    let lost = c.table("on-a").unwrap();
    assert_eq!(lost.health.state, TableState::Lost);
    assert!(lost.layout.race().unwrap().directory.is_none());
    assert_eq!(lost.health.lost[0].memnode_name, "a");
    assert!(
        lost.health.lost[0].reason.contains("new region file"),
        "{}",
        lost.health.lost[0].reason
    );

    // b is deleted with force: its tables are lost, the others untouched.
    c.force_deregister_memnode(b.id).unwrap();
    let gone = c.table("on-b").unwrap();
    assert_eq!(gone.health.state, TableState::Lost);
    assert!(gone.health.lost[0].reason.contains("force"));
    assert!(gone.memnodes.is_empty());
    assert_eq!(c.get_lease(kept).unwrap_err().status(), Some(404));
    assert_eq!(
        c.table("elsewhere").unwrap().health.state,
        TableState::Healthy,
        "a table without data on the memnode lost nothing"
    );
    assert!(metric(&c, "dmkv_metadata_tables{state=\"lost\"} 2"));
    assert!(metric(&c, "dmkv_metadata_tables{state=\"healthy\"} 1"));
    server.shutdown();

    // The loss records survive a restart of the service.
    let server = start(store(), |_| {});
    let c = client(&server);
    let t = c.table("on-a").unwrap();
    assert_eq!(t.health.state, TableState::Lost);
    assert_eq!(t.health.lost.len(), 1);
    assert_eq!(c.tables().unwrap().len(), 3);
    // A reset acknowledges the loss: a new directory on the new memory.
    let reset = c.reset_table("on-a").unwrap();
    assert_eq!(reset.health.state, TableState::Healthy);
    assert!(reset.health.lost.is_empty());
    assert_eq!(
        reset
            .layout
            .race()
            .unwrap()
            .directory
            .as_ref()
            .unwrap()
            .memnode_id,
        a.id
    );
    // A reset needs the token, like every change.
    let anonymous = MetadataClient::new(&server.url()).unwrap();
    assert_eq!(
        anonymous.reset_table("on-b").unwrap_err().status(),
        Some(401)
    );
    assert_eq!(
        c.reset_table("missing").unwrap_err().code(),
        Some("table_not_found")
    );
}

#[test]
fn a_memnode_without_heartbeats_is_down() {
    let server = start(StoreConfig::Memory(MemStore::new()), |c| {
        // Long enough that a loaded machine lists the node between its heartbeat and
        // the timeout.
        c.catalog.heartbeat_timeout_ms = 1000;
        c.catalog.heartbeat_interval_ms = 250;
    });
    let c = client(&server);
    let a = c
        .register_memnode(&memnode("a", 4791, 1, 16 << 20))
        .unwrap();
    assert_eq!(c.memnodes().unwrap()[0].state, MemnodeState::Up);
    std::thread::sleep(Duration::from_millis(1500));
    let info = c.memnodes().unwrap().remove(0);
    assert_eq!(
        (info.id, info.state, info.healthy),
        (a.id, MemnodeState::Down, false)
    );
    assert!(metric(&c, "dmkv_metadata_memnodes{state=\"down\"} 1"));
    c.heartbeat(a.id).unwrap();
    assert_eq!(c.memnodes().unwrap()[0].state, MemnodeState::Up);
}
