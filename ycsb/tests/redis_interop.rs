//! The redis binding against a real `redis-server` started by the test on a free loopback port
//! (no persistence). Without `redis-server` the test skips loudly, unless
//! `DMKV_REQUIRE_INTEROP=1`.

#[path = "../../verbs/tests/support/interop.rs"]
mod interop;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use ycsb::bindings::redis::RedisBinding;
use ycsb::bindings::resp::{Conn, Value};
use ycsb::client::{Phase, RunOptions, run_phase};
use ycsb::db::{Binding, Status};
use ycsb::props::Properties;

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_redis() -> Option<Server> {
    let available = interop::tool_available(
        || {
            Command::new("redis-server")
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        },
        "redis-server",
    );
    if !available {
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn redis-server");
    let server = Server { child, port };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut c) = Conn::connect("127.0.0.1", port)
            && c.call(&[b"PING"]) == Ok(Value::Simple("PONG".into()))
        {
            return Some(server);
        }
        assert!(
            Instant::now() < deadline,
            "redis-server did not answer PING"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn props(server: &Server, file: &str, overrides: &[(&str, &str)]) -> Properties {
    let mut p = Properties::new();
    p.merge_file(format!("{}/workloads/{file}", env!("CARGO_MANIFEST_DIR")))
        .unwrap();
    p.set("redis.host", "127.0.0.1");
    p.set("redis.port", server.port.to_string());
    for (k, v) in overrides {
        p.set(*k, *v);
    }
    p
}

fn opts(phase: Phase) -> RunOptions {
    let mut o = RunOptions::new(phase);
    o.progress = false;
    o
}

fn returns(r: &ycsb::measure::RunReport, name: &str) -> BTreeMap<String, u64> {
    r.ops
        .iter()
        .find(|o| o.name == name)
        .map(|o| o.returns.iter().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn redis_binding_against_redis_server() {
    let Some(server) = start_redis() else {
        return;
    };
    let base = [
        ("recordcount", "400"),
        ("operationcount", "2000"),
        ("dataintegrity", "true"),
        ("threadcount", "2"),
        ("concurrency", "4"),
    ];

    // Workload A, pipelined: 2 threads x 4 operations in flight, every read verified.
    let binding = RedisBinding::new(&props(&server, "workloada", &base));
    let p = props(&server, "workloada", &base);
    let load = run_phase(&binding, &p, &opts(Phase::Load)).unwrap();
    assert_eq!(
        returns(&load, "INSERT"),
        BTreeMap::from([("OK".into(), 400)])
    );
    let run = run_phase(&binding, &p, &opts(Phase::Run)).unwrap();
    assert_eq!(run.operations, 2000);
    let reads = returns(&run, "READ")["OK"];
    assert_eq!(
        returns(&run, "READ"),
        BTreeMap::from([("OK".into(), reads)])
    );
    assert_eq!(
        returns(&run, "UPDATE").len(),
        1,
        "{:?}",
        returns(&run, "UPDATE")
    );
    assert_eq!(
        returns(&run, "VERIFY"),
        BTreeMap::from([("OK".into(), reads)])
    );
    assert!(
        run.protocol.is_none(),
        "redis reports no transport counters"
    );

    // The data model is YCSB's: hashes, plus the _indices sorted set.
    let mut c = Conn::connect("127.0.0.1", server.port).unwrap();
    assert_eq!(c.call(&[b"ZCARD", b"_indices"]), Ok(Value::Int(400)));
    let key = ycsb::generator::build_key_name(7, false, 1);
    match c.call(&[b"HGETALL", key.as_bytes()]) {
        Ok(Value::Array(Some(items))) => assert_eq!(items.len(), 20),
        other => panic!("HGETALL {key}: {other:?}"),
    }

    // Workload F (read-modify-write) and E (scans through the sorted set).
    let p = props(&server, "workloadf", &base);
    let run = run_phase(&binding, &p, &opts(Phase::Run)).unwrap();
    assert!(run.ops.iter().any(|o| o.name == "READ-MODIFY-WRITE"));
    assert_eq!(returns(&run, "VERIFY").keys().collect::<Vec<_>>(), ["OK"]);
    let p = props(&server, "workloade", &base);
    let run = run_phase(&binding, &p, &opts(Phase::Run)).unwrap();
    let scans = returns(&run, "SCAN");
    assert_eq!(scans.keys().collect::<Vec<_>>(), ["OK"], "{scans:?}");

    // Without the index, scans are refused with a clear error.
    let no_index = props(&server, "workloade", &[("redis.index", "false")]);
    let e = run_phase(&RedisBinding::new(&no_index), &no_index, &opts(Phase::Run))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("ordered scans"), "{e}");

    // The Db interface directly: insert, read, update, scan, delete, read again.
    let db = binding.create(&p, 0).unwrap();
    let outcome = RefCell::new(Vec::new());
    db.run(Box::pin(async {
        let rec = vec![
            ("a".to_string(), b"1".to_vec()),
            ("b".to_string(), b"2".to_vec()),
        ];
        let mut o = Vec::new();
        o.push(db.insert("t", "direct", &rec).await);
        let (s, r) = db.read("t", "direct", None).await;
        o.push(s);
        assert_eq!(r.len(), 2);
        let fields = ["b".to_string()];
        let (s, r) = db.read("t", "direct", Some(&fields)).await;
        o.push(s);
        assert_eq!(r, vec![("b".to_string(), b"2".to_vec())]);
        let upd = vec![("b".to_string(), b"3".to_vec())];
        o.push(db.update("t", "direct", &upd).await);
        let (s, rows) = db.scan("t", "direct", 1, None).await;
        o.push(s);
        assert_eq!(rows[0].0, "direct");
        assert!(rows[0].1.contains(&("b".to_string(), b"3".to_vec())));
        o.push(db.delete("t", "direct").await);
        o.push(db.read("t", "direct", None).await.0);
        o.push(db.delete("t", "direct").await);
        *outcome.borrow_mut() = o;
    }));
    assert_eq!(
        outcome.into_inner(),
        [
            Status::Ok,
            Status::Ok,
            Status::Ok,
            Status::Ok,
            Status::Ok,
            Status::Ok,
            Status::NotFound,
            Status::NotFound
        ]
    );

    // A server that went away: operations fail with ERROR, no hang, no panic.
    drop(server);
    let run = run_phase(&binding, &p, &opts(Phase::Run));
    match run {
        Err(e) => assert!(e.to_string().contains("cannot connect"), "{e}"),
        Ok(r) => panic!("ran against a stopped server: {r:?}"),
    }
}
