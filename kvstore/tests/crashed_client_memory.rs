//! Memory holding a table's data is never reused while the table lives: a client
//! writes Clover and RACE values and goes away without a word (as if it crashed);
//! with a short TTL and grace period its leases expire, and the service lets the
//! tables adopt them instead of reclaiming them. Other clients then allocate until
//! the memory node is full; every value of the first client still reads back.
//! Dropping the tables returns all memory (free bytes back to the starting figure).

use std::time::{Duration, Instant};

use kvstore::{Client, ClientOptions, KvError, TableSpec, TransportKind};
use memnode::config::MemnodeConfig;
use memnode::registrar::{HttpRegistrar, Registrar};
use memnode::server::Memnode;
use metadata::server::{MetadataServer, ServerConfig, StoreConfig};
use metadata::store::MemStore;

const KEYS: usize = 150;
const VALUE: usize = 600;

fn value(key: usize, tag: &str) -> Vec<u8> {
    let unit = format!("{tag}{key:05}|");
    unit.as_bytes()
        .iter()
        .copied()
        .cycle()
        .take(VALUE)
        .collect()
}

fn wait(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_gone_clients_values_survive_expiry_and_memory_pressure() {
    let mut cfg = ServerConfig::local(StoreConfig::Memory(MemStore::new()));
    cfg.catalog.grace_ms = 300;
    cfg.sweep_interval = Duration::from_millis(50);
    let server = MetadataServer::start(cfg).expect("metadata service");
    let url = server.url();
    // The memory node keeps its region in a shared-memory file that clients map
    // (`shm`): the data path does not depend on the memory node's thread being
    // scheduled on a loaded machine.
    let shm = std::env::temp_dir().join(format!(
        "dmkv-crashed-client-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let mut config = MemnodeConfig::local(4 << 20);
    config.shm = Some(shm.clone());
    let node = Memnode::start(config).expect("memnode");
    let registrar = HttpRegistrar::new(&url, None, Some("m0".into()))
        .expect("registrar")
        .with_interval(Duration::from_millis(200));
    registrar
        .register(&node.node_info(), &node.admin_url())
        .expect("register");
    wait("registration", Duration::from_secs(10), || {
        registrar.memnode_id().is_some()
    });
    let options = ClientOptions::with_transport(TransportKind::Shm)
        .with_memory(kvstore::MemoryOptions::default().with_chunk_bytes(64 << 10));
    let meta = dmkv_api::MetadataClient::new(&url).expect("metadata client");
    let free = || -> u64 { meta.memnodes().expect("memnodes")[0].free_bytes };
    let start_free = free();

    // The first client: short leases, writes, then vanishes without handing over.
    let gone = Client::connect(&url, {
        let mut o = options.clone();
        o.memory.lease_ttl = Duration::from_millis(400);
        o
    })
    .expect("client");
    gone.create_table("c", &TableSpec::clover(1024))
        .expect("clover table");
    gone.create_table("r", &TableSpec::race(1024))
        .expect("race table");
    let s = gone.session().expect("session");
    for table in ["c", "r"] {
        let t = s.table(table).expect("table");
        s.block_on(async {
            for k in 0..KEYS {
                t.put(format!("k{k}").as_bytes(), &value(k, table))
                    .await
                    .expect("put");
            }
        });
    }
    s.quiesce();
    s.abandon();
    drop(gone);

    // Its leases expire and both tables adopt them.
    wait("adoption", Duration::from_secs(20), || {
        ["c", "r"].iter().all(|t| {
            let m = meta.table(t).expect("table").memory;
            m.client_leases == 0 && m.adopted_leases > 0
        })
    });
    for t in ["c", "r"] {
        let m = meta.table(t).expect("table").memory;
        println!("table {t} after its writer vanished ({KEYS} keys of {VALUE} bytes): {m:?}");
        assert!(m.adopted_bytes > 0 && m.table_owned_bytes >= m.adopted_bytes);
    }

    // Others allocate until the memory node is full: new keys in new tables and
    // in the same tables.
    let busy = Client::connect(&url, options.clone()).expect("client");
    busy.create_table("c2", &TableSpec::clover(1024))
        .expect("clover table");
    busy.create_table("r2", &TableSpec::race(1024))
        .expect("race table");
    let s = busy.session().expect("session");
    let mut written = 0usize;
    for table in ["r2", "c2", "c", "r"] {
        let t = s.table(table).expect("table");
        let n = s.block_on(async {
            let mut n = 0usize;
            loop {
                match t.put(format!("x{n}").as_bytes(), &value(n, "busy")).await {
                    Ok(()) => n += 1,
                    Err(KvError::Unavailable(m)) if m.message().contains("out of memory") => {
                        break n;
                    }
                    Err(e) => panic!("put into {table}: {e}"),
                }
                assert!(n < 100_000, "the memory node never filled up");
            }
        });
        written += n;
    }
    assert!(written > 0);
    assert!(
        free() < 512 << 10,
        "the memory node is nearly full ({} bytes free)",
        free()
    );

    // Every value of the first client reads back intact, from a new client too.
    let reader = Client::connect(&url, options).expect("client");
    let rs = reader.session().expect("session");
    for table in ["c", "r"] {
        let t = rs.table(table).expect("table");
        rs.block_on(async {
            for k in 0..KEYS {
                let got = t
                    .get(format!("k{k}").as_bytes())
                    .await
                    .expect("get")
                    .expect("a value");
                assert!(got == value(k, table), "{table}/k{k} was overwritten");
            }
        });
    }
    drop(rs);
    drop(s);

    // Dropping the tables returns everything.
    for t in ["c", "r", "c2", "r2"] {
        busy.drop_table(t).expect("drop");
    }
    wait("memory to come back", Duration::from_secs(20), || {
        free() == start_free
    });
    registrar.stop();
    node.shutdown();
    let _ = std::fs::remove_file(shm);
}

#[test]
fn a_session_that_stops_hands_its_chunks_to_the_table_trimmed() {
    let client = testbed::embedded_client(testbed::EmbeddedOptions::default()).expect("cluster");
    client
        .create_table("c", &TableSpec::clover(256))
        .expect("clover table");
    let meta = client.metadata();
    let s = client.session().expect("session");
    let t = s.table("c").expect("table");
    s.block_on(async {
        for k in 0..20 {
            t.put(format!("k{k}").as_bytes(), b"v").await.expect("put");
        }
    });
    let held = meta.table("c").expect("table").memory;
    // The table owns its chain directory only.
    assert!(held.client_leases > 0 && held.table_owned_leases == 1);
    drop(t);
    drop(s);
    let m = meta.table("c").expect("table").memory;
    println!("while the session ran: {held:?}\nafter it stopped: {m:?}");
    assert_eq!(m.client_leases, 0);
    assert_eq!(m.adopted_leases, held.client_leases);
    // 20 small keys (roots and nodes: two size classes, carved in 4 KiB batches)
    // lie in the first few KiB of each chunk handed over.
    assert!(m.adopted_bytes <= (16 << 10) * m.adopted_leases, "{m:?}");
    assert!(m.adopted_bytes < held.client_bytes);
    let s = client.session().expect("session");
    let t = s.table("c").expect("table");
    s.block_on(async {
        for k in 0..20 {
            assert_eq!(
                t.get(format!("k{k}").as_bytes())
                    .await
                    .expect("get")
                    .expect("a value"),
                b"v"
            );
        }
    });
}
