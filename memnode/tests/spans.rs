//! The `memnode` binary's spans in its JSON logs: queue-pair creation and deletion, and
//! data-plane batches with their per-packet debug events.

use std::io::Read;
use std::net::{SocketAddrV4, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use memnode::api::CreateQpRequest;
use memnode::client;

const BIN: &str = env!("CARGO_BIN_EXE_memnode");

fn free_tcp() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn free_udp() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn json_logs_carry_qp_and_batch_spans() {
    let (data, admin_port) = (free_udp(), free_tcp());
    let mut cmd = Command::new(BIN);
    for (k, _) in std::env::vars() {
        if k.starts_with("DMKV_") || k.starts_with("OTEL_") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    cmd.env("DMKV_MEMNODE_INSECURE_NO_AUTH", "true");
    let mut child = cmd
        .args([
            "--listen",
            &format!("127.0.0.1:{data}"),
            "--admin",
            &format!("127.0.0.1:{admin_port}"),
            "--capacity",
            "1MiB",
            "--log-format",
            "json",
        ])
        .env("RUST_LOG", "info,memnode::dataplane=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = pipe.read_to_string(&mut s);
        s
    });
    let admin = format!("http://127.0.0.1:{admin_port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while client::request(&admin, "GET", "/healthz", None).is_err() {
        assert!(Instant::now() < deadline, "memnode did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let std::net::SocketAddr::V4(local) = sock.local_addr().unwrap() else {
        unreachable!()
    };
    let qp = client::create_qp(
        &admin,
        &CreateQpRequest {
            qpn: 0x11,
            psn: 0,
            addr: local,
            pmtu: 1024,
            server_addr: Some(SocketAddrV4::new([127, 0, 0, 1].into(), data)),
            coalesce: false,
        },
    )
    .unwrap();
    // A datagram to a QPN nobody has: dropped, with a debug event in the batch's span.
    let mut bth = [0u8; 12];
    bth[0] = 0x0a;
    bth[5..8].copy_from_slice(&[0xab, 0xcd, 0xef]);
    sock.send_to(&bth, ("127.0.0.1", data)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = client::request(&admin, "GET", "/metrics", None).unwrap();
        let text = String::from_utf8(r.body).unwrap();
        if text.contains("dmkv_memnode_datagrams_dropped_total{reason=\"unknown_qpn\"} 1") {
            break;
        }
        assert!(Instant::now() < deadline, "the datagram was never counted");
        std::thread::sleep(Duration::from_millis(20));
    }
    client::delete_qp(&admin, qp.qpn).unwrap();
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    assert!(child.wait().unwrap().success());
    let err = stderr.join().unwrap();
    let lines: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let event = |message: &str| {
        lines
            .iter()
            .find(|l| l["fields"]["message"] == message)
            .unwrap_or_else(|| panic!("no {message:?} event in:\n{err}"))
    };
    let created = event("queue pair created");
    assert_eq!(created["span"]["name"], "memnode.qp.create", "{created}");
    assert_eq!(created["span"]["client_qpn"], 0x11);
    let deleted = event("queue pair deleted");
    assert_eq!(deleted["span"]["name"], "memnode.qp.delete", "{deleted}");
    let dropped = event("dropped: unknown QPN");
    assert_eq!(dropped["span"]["name"], "memnode.batch", "{dropped}");
    assert_eq!(dropped["span"]["datagrams"], 1);
    assert_eq!(dropped["fields"]["qpn"], 0xabcdef);
}
