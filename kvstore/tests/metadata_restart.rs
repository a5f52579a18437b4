//! Restarting the metadata service mid-workload: a cluster whose metadata service
//! keeps its state in a sled directory runs a workload on a Clover and a RACE
//! table (one session per thread, a task writing new keys — which needs the
//! service for Clover's chains and for leases — and a task updating keys it
//! already wrote, which needs only the memory nodes). The service is stopped and,
//! a while later, started again on the same address and directory. Clients
//! continue: operations that need the service wait for it and then complete,
//! operations that do not keep completing while it is down, and every
//! acknowledged write is intact afterwards, for these clients and a new one.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kvstore::{Client, ClientOptions, TableSpec, TransportKind};
use memnode::config::MemnodeConfig;
use memnode::registrar::{HttpRegistrar, Registrar};
use memnode::server::{Memnode, MemnodeHandle};
use metadata::server::{MetadataServer, ServerConfig, ServerHandle, StoreConfig};

const DOWN_AFTER: Duration = Duration::from_millis(700);
const DOWN_FOR: Duration = Duration::from_millis(900);
const RUN: Duration = Duration::from_millis(2600);

fn start_metadata(dir: &Path, listen: std::net::SocketAddr) -> ServerHandle {
    let mut cfg = ServerConfig::local(StoreConfig::Sled(dir.to_path_buf()));
    cfg.listen = listen;
    MetadataServer::start(cfg).expect("metadata service")
}

struct Node {
    registrar: HttpRegistrar,
    handle: MemnodeHandle,
}

/// Latest acknowledged value per (table, key), and when operations completed.
#[derive(Default)]
struct Log {
    acked: HashMap<(String, String), Vec<u8>>,
    /// (table, completion time since start) of updates of known keys.
    data_path: Vec<(String, Duration)>,
    /// (table, completion time since start) of writes of new keys.
    new_keys: Vec<(String, Duration)>,
    errors: Vec<String>,
}

#[test]
fn clients_continue_across_a_metadata_restart() {
    let dir = std::env::temp_dir().join(format!(
        "dmkv-meta-restart-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let server = start_metadata(&dir, "127.0.0.1:0".parse().unwrap());
    let addr = server.addr();
    let url = server.url();
    let mut nodes = Vec::new();
    for i in 0..2 {
        let handle = Memnode::start(MemnodeConfig::local(16 << 20)).expect("memnode");
        let registrar = HttpRegistrar::new(&url, None, Some(format!("restart-{i}")))
            .expect("registrar")
            .with_interval(Duration::from_millis(200));
        registrar
            .register(&handle.node_info(), &handle.admin_url())
            .expect("register");
        nodes.push(Node { registrar, handle });
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while nodes.iter().any(|n| n.registrar.memnode_id().is_none()) {
        assert!(Instant::now() < deadline, "memnodes register");
        std::thread::sleep(Duration::from_millis(5));
    }
    let options = ClientOptions::with_transport(TransportKind::Udp)
        // Small chunks, so new leases are needed during the run.
        .with_memory(kvstore::MemoryOptions::default().with_chunk_bytes(64 << 10));
    let client = Client::connect(&url, options.clone()).expect("client");
    client
        .create_table("c", &TableSpec::clover(256))
        .expect("clover table");
    client
        .create_table("r", &TableSpec::race(256))
        .expect("race table");

    let log = Arc::new(Mutex::new(Log::default()));
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for (th, table) in ["c", "r", "c", "r"].into_iter().enumerate() {
        let client = client.clone();
        let log = log.clone();
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            let s = client.session().expect("session");
            let t = s.table(table).expect("table");
            // Keys this thread has written, shared by its two tasks.
            let known: Rc<RefCell<Vec<String>>> = Rc::new(RefCell::new(Vec::new()));
            let left = Rc::new(Cell::new(2));
            for task in 0..2 {
                let (t, log, stop, known, left) = (
                    t.clone(),
                    log.clone(),
                    stop.clone(),
                    known.clone(),
                    left.clone(),
                );
                let worker = s.worker().clone();
                s.spawn(async move {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        i += 1;
                        let fresh = task == 0 || known.borrow().is_empty();
                        let key = if fresh {
                            format!("t{th}-{i}")
                        } else {
                            let k = known.borrow();
                            k[(i as usize) % k.len()].clone()
                        };
                        let value = format!("{key}={th}.{task}.{i}").into_bytes();
                        let r = t.put(key.as_bytes(), &value).await;
                        let at = started.elapsed();
                        {
                            let mut g = log.lock().unwrap();
                            match r {
                                Ok(()) => {
                                    g.acked.insert((table.to_owned(), key.clone()), value);
                                    if fresh {
                                        g.new_keys.push((table.to_owned(), at));
                                        known.borrow_mut().push(key);
                                    } else {
                                        g.data_path.push((table.to_owned(), at));
                                    }
                                }
                                Err(e) => g.errors.push(format!("put {table}/{key}: {e}")),
                            }
                        }
                        // Pace the new keys (each one may wait for the service).
                        if task == 0 {
                            worker.sleep(Duration::from_millis(2)).await;
                        }
                    }
                    left.set(left.get() - 1);
                });
            }
            let worker = s.worker().clone();
            s.block_on(async move {
                while left.get() > 0 {
                    worker.sleep(Duration::from_millis(1)).await;
                }
            });
            s.quiesce();
        }));
    }

    std::thread::sleep(DOWN_AFTER);
    let down_at = started.elapsed();
    server.shutdown();
    std::thread::sleep(DOWN_FOR);
    let server = start_metadata(&dir, addr);
    let up_at = started.elapsed();
    std::thread::sleep(RUN.saturating_sub(started.elapsed()));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("worker thread");
    }
    let log = Arc::try_unwrap(log).ok().unwrap().into_inner().unwrap();
    let during = |v: &[(String, Duration)], table: &str| {
        v.iter()
            .filter(|(t, at)| t == table && *at > down_at && *at < up_at)
            .count()
    };
    let after = |v: &[(String, Duration)], table: &str| {
        v.iter().filter(|(t, at)| t == table && *at > up_at).count()
    };
    for table in ["c", "r"] {
        println!(
            "[{table}] down {down_at:?}..{up_at:?}: {} updates of known keys and {} new keys \
             completed while the service was down; {} and {} after it came back",
            during(&log.data_path, table),
            during(&log.new_keys, table),
            after(&log.data_path, table),
            after(&log.new_keys, table)
        );
        assert!(
            during(&log.data_path, table) > 0,
            "[{table}] the data path does not need the metadata service"
        );
        assert!(
            after(&log.new_keys, table) > 0 && after(&log.data_path, table) > 0,
            "[{table}] clients continue after the restart"
        );
    }
    assert!(
        log.errors.is_empty(),
        "every operation completed: {:?}",
        log.errors
    );

    // Everything acknowledged is intact, for a new client as for the old one.
    for c in [
        client.clone(),
        Client::connect(&url, options).expect("client"),
    ] {
        let s = c.session().expect("session");
        let tables: HashMap<&str, kvstore::Table> = ["c", "r"]
            .into_iter()
            .map(|n| (n, s.table(n).expect("table")))
            .collect();
        for ((table, key), value) in &log.acked {
            let got = s
                .block_on(tables[table.as_str()].get(key.as_bytes()))
                .unwrap_or_else(|e| panic!("{table}/{key}: {e}"));
            assert_eq!(got.as_ref(), Some(value), "{table}/{key}");
        }
    }
    println!("{} acknowledged keys intact", log.acked.len());
    drop(client);
    for n in nodes {
        n.registrar.stop();
        n.handle.shutdown();
    }
    server.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
