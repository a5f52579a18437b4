//! A memory node that stops without a goodbye (its registrar just stops
//! heartbeating, as after `kill -9`) and starts again under the same name:
//!
//! * on its region file (`--region-file`), it rejoins with its data: every key of a
//!   Clover, a RACE and an in-place table reads back through the metadata service
//!   and a fresh client, under the same memnode id and epoch;
//! * without it (new memory), every table that had data there is `lost`, naming the
//!   memnode, and reads fail with an error instead of answering "not found".

use std::path::Path;
use std::time::{Duration, Instant};

use dmkv_api::metadata::{MemnodeState, TableState};
use kvstore::{Client, ClientOptions, SchemeSpec, TableSpec, TransportKind};
use memnode::config::MemnodeConfig;
use memnode::registrar::{HttpRegistrar, Registrar};
use memnode::server::{Memnode, MemnodeHandle};
use metadata::server::{MetadataServer, ServerConfig, ServerHandle, StoreConfig};
use metadata::store::MemStore;

const NAME: &str = "restarting-node";
const KEYS: usize = 40;
const TABLES: [&str; 3] = ["clover", "race", "inplace"];

struct Node {
    registrar: HttpRegistrar,
    handle: MemnodeHandle,
}

fn start_node(url: &str, region_file: Option<&Path>) -> Node {
    let mut config = MemnodeConfig::local(16 << 20);
    config.region_file = region_file.map(Path::to_path_buf);
    config.name = Some(NAME.into());
    let handle = Memnode::start(config).expect("memnode");
    let registrar = HttpRegistrar::new(url, None, Some(NAME.into()))
        .expect("registrar")
        .with_interval(Duration::from_millis(100));
    registrar
        .register(&handle.node_info(), &handle.admin_url())
        .expect("register");
    let deadline = Instant::now() + Duration::from_secs(10);
    while registrar.memnode_id().is_none() {
        assert!(Instant::now() < deadline, "the memnode registers");
        std::thread::sleep(Duration::from_millis(5));
    }
    Node { registrar, handle }
}

/// Stops heartbeating and serving without deregistering, as a crash does.
fn crash(node: Node) {
    node.registrar.stop();
    node.handle.shutdown();
}

fn value(table: &str, i: usize) -> Vec<u8> {
    format!("{table}-value-{i}").into_bytes()
}

fn client(url: &str) -> Client {
    Client::connect(url, ClientOptions::with_transport(TransportKind::Udp)).expect("client")
}

fn metadata(server: &ServerHandle) -> dmkv_api::MetadataClient {
    dmkv_api::MetadataClient::new(&server.url()).expect("metadata client")
}

#[test]
fn a_memnode_restarted_on_its_region_file_keeps_every_table_and_without_it_they_are_lost() {
    let dir = std::env::temp_dir().join(format!(
        "dmkv-memnode-restart-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("node.region");
    let server = MetadataServer::start(ServerConfig::local(StoreConfig::Memory(MemStore::new())))
        .expect("metadata service");
    let url = server.url();
    let meta = metadata(&server);
    let node = start_node(&url, Some(&file));
    let id = node.registrar.memnode_id().expect("id");

    {
        let writer = client(&url);
        writer
            .create_table("clover", &TableSpec::clover(128))
            .expect("clover");
        writer
            .create_table("race", &TableSpec::race(128))
            .expect("race");
        writer
            .create_table(
                "inplace",
                &TableSpec::in_place(SchemeSpec::PESSIMISTIC, 64, 128),
            )
            .expect("inplace");
        let s = writer.session().expect("session");
        for name in TABLES {
            let t = s.table(name).expect("table");
            for i in 0..KEYS {
                s.block_on(t.put(format!("key-{i}").as_bytes(), &value(name, i)))
                    .expect("put");
            }
        }
        s.quiesce();
    }
    let epoch = meta.memnodes().expect("memnodes")[0].epoch;

    // Crash and restart on the region file: same id, same epoch, every key there.
    crash(node);
    let node = start_node(&url, Some(&file));
    assert_eq!(node.registrar.memnode_id(), Some(id));
    let info = meta.memnodes().expect("memnodes").remove(0);
    assert_eq!(
        (info.id, info.epoch, info.state),
        (id, epoch, MemnodeState::Up)
    );
    assert!(info.persistent);
    assert!(node.handle.memory().reopened);
    let reader = client(&url);
    let s = reader.session().expect("session");
    for name in TABLES {
        assert_eq!(
            meta.table(name).expect("table").health.state,
            TableState::Healthy
        );
        let t = s.table(name).expect("table");
        for i in 0..KEYS {
            assert_eq!(
                s.block_on(t.get(format!("key-{i}").as_bytes()))
                    .expect("get after the restart"),
                Some(value(name, i)),
                "{name} key-{i}"
            );
        }
    }
    s.quiesce();
    drop(s);
    drop(reader);

    // Crash and restart with new memory: the tables are lost, loudly.
    crash(node);
    let node = start_node(&url, None);
    assert_eq!(node.registrar.memnode_id(), Some(id));
    for name in TABLES {
        let health = meta.table(name).expect("table").health;
        assert_eq!(health.state, TableState::Lost, "{name}");
        assert_eq!(health.lost.len(), 1);
        assert_eq!(health.lost[0].memnode_name, NAME);
        assert!(
            health.lost[0].reason.contains("without its region file"),
            "{}",
            health.lost[0].reason
        );
    }
    let fresh = client(&url);
    let s = fresh.session().expect("session");
    for name in TABLES {
        let outcome = s.table(name).and_then(|t| s.block_on(t.get(b"key-1")));
        assert!(
            outcome.is_err(),
            "{name}: a key of a lost table read as {outcome:?}"
        );
    }
    let race = s.table("race").and_then(|t| s.block_on(t.get(b"key-1")));
    let e = race.expect_err("race get").to_string();
    assert!(e.contains("lost"), "{e}");
    s.quiesce();
    drop(s);
    drop(fresh);
    crash(node);
    let _ = std::fs::remove_dir_all(&dir);
}
