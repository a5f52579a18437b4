//! `--region-file`: the region outlives the process. Bytes written through a queue
//! pair are there again after `kill -9` and a restart on the same file, under the
//! same rkey, base VA and instance id; a restart with another capacity or name is
//! refused with a clear message and touches nothing.
//!
//! And `--qp-idle-timeout`: queue pairs that receive nothing for the timeout are
//! destroyed, so dead clients' queue pairs no longer fill `--max-qps`.

#[path = "common/process.rs"]
mod process;

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::{Duration, Instant};

use memnode::api::CreateQpRequest;
use memnode::client;
use memnode::{Memnode, MemnodeConfig};
use process::MemnodeProcess;
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::worker::{Worker, WorkerConfig};
use verbs::wr::RemoteAddr;

fn transport() -> UdpTransport {
    UdpTransport::bind(Ipv4Addr::LOCALHOST, RcConfig::default()).unwrap()
}

/// Writes `data` at `offset` of the node's region through a new queue pair.
fn write_through_qp(admin: &str, offset: u64, data: &[u8]) -> client::UdpConnection {
    let mut t = transport();
    let conn = client::connect_udp_qp(admin, &mut t).unwrap();
    let base = RemoteAddr::new(conn.regions[0].rkey, conn.regions[0].base_va);
    let worker = Worker::new(Box::new(t), WorkerConfig::default());
    let qp = worker.qp(conn.handle);
    worker.block_on(async {
        qp.write(base.offset(offset), data.to_vec()).await.unwrap();
        assert_eq!(qp.cas(base.offset(8), 0, 0xC0FFEE).await, Ok(0));
    });
    conn
}

/// Reads `len` bytes at `offset` through a new queue pair.
fn read_through_qp(admin: &str, offset: u64, len: u32) -> (Vec<u8>, u64) {
    let mut t = transport();
    let conn = client::connect_udp_qp(admin, &mut t).unwrap();
    let base = RemoteAddr::new(conn.regions[0].rkey, conn.regions[0].base_va);
    let worker = Worker::new(Box::new(t), WorkerConfig::default());
    let qp = worker.qp(conn.handle);
    worker.block_on(async {
        let bytes = qp.read(base.offset(offset), len).await.unwrap();
        let word = qp.faa(base.offset(8), 0).await.unwrap();
        (bytes, word)
    })
}

#[test]
fn bytes_written_through_a_queue_pair_survive_kill_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mem");
    let path = file.to_str().unwrap();
    let args = ["--region-file", path, "--name", "n1"];
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();

    let node = MemnodeProcess::start("1MiB", &args);
    let first = client::regions(&node.admin).unwrap().remove(0);
    assert_ne!(first.instance, 0);
    assert_eq!(
        (first.backing.as_str(), first.path.as_deref()),
        ("file", Some(path))
    );
    write_through_qp(&node.admin, 4096 + 5, &data);
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(node.pid() as libc::pid_t, libc::SIGKILL) };
    drop(node);

    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("mem.meta")).unwrap()).unwrap();
    assert_eq!(meta["instance"], first.instance);
    assert_eq!(meta["rkey"], first.rkey);

    let node = MemnodeProcess::start("1MiB", &args);
    let again = client::regions(&node.admin).unwrap().remove(0);
    assert_eq!(
        (again.rkey, again.base_va, again.len, again.instance),
        (first.rkey, first.base_va, first.len, first.instance)
    );
    let (bytes, word) = read_through_qp(&node.admin, 4096 + 5, data.len() as u32);
    assert_eq!(bytes, data);
    assert_eq!(word, 0xC0FFEE);
    let (status, log) = node.stop();
    assert!(status.success(), "{status}");
    assert!(log.contains("region file reopened with its data"), "{log}");
}

#[test]
fn a_region_file_of_another_size_or_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mem");
    let path = file.to_str().unwrap();
    let node = MemnodeProcess::start("1MiB", &["--region-file", path, "--name", "n1"]);
    write_through_qp(&node.admin, 0, b"precious");
    let (status, _) = node.stop();
    assert!(status.success());
    for (capacity, name, needle) in [
        ("2MiB", "n1", "capacity 1048576 bytes"),
        ("1MiB", "n2", "--name \"n1\""),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_memnode"))
            .args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
            .arg("--insecure-no-auth")
            .args([
                "--capacity",
                capacity,
                "--region-file",
                path,
                "--name",
                name,
            ])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{err}");
        assert!(err.contains("remove"), "{err}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_memnode"))
        .args(["--region-file", path, "--shm", "/dev/shm/x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let node = MemnodeProcess::start("1MiB", &["--region-file", path, "--name", "n1"]);
    assert_eq!(read_through_qp(&node.admin, 0, 8).0, b"precious");
}

#[test]
fn idle_queue_pairs_are_reclaimed_so_dead_clients_do_not_fill_max_qps() {
    let mut config = MemnodeConfig::local(1 << 20);
    config.max_qps = 3;
    config.qp_idle_timeout = Some(Duration::from_millis(300));
    let node = Memnode::start(config).unwrap();
    let admin = node.admin_url();

    // A busy client keeps its queue pair; two clients create theirs and vanish.
    let mut busy_transport = transport();
    let busy = client::connect_udp_qp(&admin, &mut busy_transport).unwrap();
    let base = RemoteAddr::new(busy.regions[0].rkey, busy.regions[0].base_va);
    let worker = Worker::new(Box::new(busy_transport), WorkerConfig::default());
    let qp = worker.qp(busy.handle);
    let dead_client = |port: u16| CreateQpRequest {
        qpn: u32::from(port),
        psn: 0,
        addr: format!("127.0.0.1:{port}").parse().unwrap(),
        pmtu: 1024,
        server_addr: None,
        coalesce: false,
    };
    let dead: Vec<_> = [40001, 40002]
        .map(|p| client::create_qp(&admin, &dead_client(p)).unwrap())
        .to_vec();
    assert!(dead.iter().all(|d| d.idle_timeout_ms == Some(300)));
    let full = client::create_qp(&admin, &dead_client(40003)).unwrap_err();
    assert_eq!(full.status(), Some(409), "{full}");

    let start = Instant::now();
    while node.qps().len() > 1 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "idle queue pairs were not reclaimed"
        );
        worker.block_on(async { qp.read(base, 8).await.unwrap() });
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = node.qps().list().iter().map(|q| q.qpn).collect();
    assert_eq!(left, vec![busy.remote_qpn]);
    assert!(dead.iter().all(|d| client::qp_info(&admin, d.qpn).is_err()));
    assert_eq!(node.metrics().qps_reclaimed, 2);
    let text = client::request(&admin, "GET", "/metrics", None)
        .unwrap()
        .text();
    assert!(
        text.contains("dmkv_memnode_queue_pairs_reclaimed_total 2"),
        "{text}"
    );
    // Room again, and the busy queue pair still works.
    let _fresh = client::connect_udp_qp(&admin, &mut transport()).unwrap();
    worker.block_on(async { qp.read(base, 8).await.unwrap() });

    // Without a timeout nothing is reclaimed, and creation says so.
    let never = Memnode::start(MemnodeConfig::local(1 << 20)).unwrap();
    let c = client::create_qp(&never.admin_url(), &dead_client(40004)).unwrap();
    assert_eq!(c.idle_timeout_ms, None);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(never.qps().len(), 1);
}
