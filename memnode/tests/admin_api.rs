//! The admin API of an in-process memory node, and queue pairs it sets up used over a real
//! soft-RoCE transport.

mod common;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use memnode::api::{ErrorBody, Health, NodeInfo};
use memnode::client::{self, ClientError};
use memnode::metrics::{AcceptOutcome, DropKind, NakKind, Verb};
use memnode::{Memnode, MemnodeConfig, MemnodeHandle};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use verbs::mem::RemoteMemory;
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::worker::{VerbError, Worker, WorkerConfig};
use verbs::wr::{CompletionError, RemoteAddr};

const CAPACITY: u64 = 1 << 20;

fn start() -> MemnodeHandle {
    Memnode::start(MemnodeConfig::local(CAPACITY)).expect("memnode starts")
}

fn admin(node: &MemnodeHandle) -> String {
    node.admin_url()
}

/// Waits until the node has received `n` datagrams in total (they travel over loopback).
fn wait_received(node: &MemnodeHandle, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while node.metrics().received < n {
        assert!(
            Instant::now() < deadline,
            "node received {} of {n} datagrams",
            node.metrics().received
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn health_metrics_node_and_regions() {
    let node = start();
    let a = admin(&node);

    let r = client::request(&a, "GET", "/healthz", None).unwrap();
    assert_eq!(r.status, 200);
    let h: Health = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(h.status, "ok");
    assert_eq!(h.qps, 0);

    let r = client::request(&a, "GET", "/metrics", None).unwrap();
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/plain"));
    let text = String::from_utf8(r.body).unwrap();
    let samples = common::parse_prometheus(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    for reason in [
        "malformed",
        "bad_icrc",
        "unknown_qpn",
        "truncated",
        "not_a_request",
    ] {
        let key = format!("dmkv_memnode_datagrams_dropped_total{{reason=\"{reason}\"}}");
        assert_eq!(samples.get(&key), Some(&0.0), "{key}");
    }
    for verb in ["read", "write", "cas", "faa"] {
        let key = format!("dmkv_memnode_messages_total{{verb=\"{verb}\"}}");
        assert_eq!(samples.get(&key), Some(&0.0), "{key}");
    }
    for reason in ["psn_sequence", "remote_access", "invalid_request"] {
        let key = format!("dmkv_memnode_naks_total{{reason=\"{reason}\"}}");
        assert!(samples.contains_key(&key), "{key}");
    }
    assert_eq!(
        samples.get("dmkv_memnode_region_capacity_bytes"),
        Some(&(CAPACITY as f64))
    );
    assert_eq!(samples.get("dmkv_memnode_queue_pairs"), Some(&0.0));
    assert_eq!(samples.get("dmkv_memnode_dataplane_up"), Some(&1.0));

    let regions = client::regions(&a).unwrap();
    assert_eq!(regions.len(), 1);
    let r0 = &regions[0];
    assert_eq!(r0.len, CAPACITY);
    assert_eq!(r0.base_va, memnode::config::DEFAULT_BASE_VA);
    assert_ne!(r0.rkey, 0);
    assert_eq!(r0.flags, "local_write,read,write,atomic");
    assert_eq!(r0.read_order, "ascending");
    assert_eq!(r0.backing, "anonymous");
    assert_eq!(r0.path, None);

    let info: NodeInfo = client::node_info(&a).unwrap();
    assert_eq!(info.listen, node.data_addr());
    assert_eq!(info.data_addr, Some(node.data_addr()));
    assert_eq!(info.capacity, CAPACITY);
    assert_eq!(info.regions, regions);
    node.shutdown();
}

#[test]
fn verbs_round_trip_over_udp() {
    let node = start();
    let a = admin(&node);
    let mut transport = UdpTransport::bind(Ipv4Addr::LOCALHOST, RcConfig::default()).unwrap();
    let conn = client::connect_udp_qp(&a, &mut transport).unwrap();
    assert_eq!(node.qps().len(), 1);
    let info = client::qp_info(&a, conn.remote_qpn).unwrap();
    assert_eq!(info.client_qpn, conn.local_qpn);
    assert_eq!(client::list_qps(&a).unwrap(), vec![info]);
    let region = conn.regions[0].clone();
    let base = RemoteAddr::new(region.rkey, region.base_va);
    let worker = Worker::new(Box::new(transport), WorkerConfig::default());
    let qp = worker.qp(conn.handle);
    let mut rng = SmallRng::seed_from_u64(7);
    let small: Vec<u8> = (0..100).map(|_| rng.random()).collect();
    let big: Vec<u8> = (0..10 * 1024).map(|_| rng.random()).collect();

    worker.block_on(async {
        // WRITE / READ, single packet.
        qp.write(base.offset(64), small.clone()).await.unwrap();
        assert_eq!(qp.read(base.offset(64), 100).await.unwrap(), small);
        // Multi-packet WRITE and READ (10 KiB over a 1 KiB path MTU), unaligned.
        qp.write(base.offset(4096 + 3), big.clone()).await.unwrap();
        assert_eq!(
            qp.read(base.offset(4096 + 3), big.len() as u32)
                .await
                .unwrap(),
            big
        );
        // CAS success and failure, FAA.
        let w = base.offset(8);
        assert_eq!(qp.cas(w, 0, 11).await.unwrap(), 0);
        assert_eq!(qp.cas(w, 0, 22).await.unwrap(), 11);
        assert_eq!(qp.faa(w, 5).await.unwrap(), 11);
        assert_eq!(qp.faa(w, 1).await.unwrap(), 16);
        assert_eq!(qp.read(w, 8).await.unwrap(), 17u64.to_le_bytes());
        // Bad accesses are NAKed, and the QP stays usable.
        let wrong_rkey = RemoteAddr::new(region.rkey ^ 0x5a5a, region.base_va);
        assert_eq!(
            qp.read(wrong_rkey, 8).await,
            Err(VerbError::Completion(CompletionError::RemoteAccess))
        );
        let end = base.offset(region.len - 4);
        assert_eq!(
            qp.write(end, vec![1; 8]).await,
            Err(VerbError::Completion(CompletionError::RemoteAccess))
        );
        assert_eq!(
            qp.faa(base.offset(12), 1).await,
            Err(VerbError::Completion(CompletionError::RemoteInvalidRequest))
        );
        assert_eq!(qp.faa(w, 0).await.unwrap(), 17);
    });

    let m = node.metrics();
    assert_eq!(m.messages(Verb::Write), 2);
    // 3 READs succeeded; the responder may also count the NAKed one as executed.
    assert!(matches!(m.messages(Verb::Read), 3 | 4), "{m:?}");
    assert_eq!(m.messages(Verb::Cas), 2);
    assert_eq!(m.messages(Verb::Faa), 3);
    assert_eq!(m.naks(NakKind::RemoteAccess), 2);
    assert_eq!(m.naks(NakKind::InvalidRequest), 1);
    assert_eq!(m.dropped_total(), 0);
    let client_sent = worker.transport_stats().packets_sent;
    wait_received(&node, client_sent);
    let m = node.metrics();
    assert_eq!(m.received, client_sent);
    assert_eq!(m.accepted_total(), client_sent);
    // The bytes landed where they should, and nowhere else.
    let region_mem = &node.memory().region;
    let mut got = vec![0u8; big.len()];
    region_mem.read(4096 + 3, &mut got).unwrap();
    assert_eq!(got, big);
    let mut tail = vec![0u8; 64];
    region_mem.read(region.len - 64, &mut tail).unwrap();
    assert_eq!(
        tail,
        vec![0u8; 64],
        "an out-of-bounds WRITE touched the region's end"
    );
    node.shutdown();
}

#[test]
fn deleted_qp_traffic_counts_as_unknown_qpn() {
    let node = start();
    let a = admin(&node);
    let config = RcConfig {
        retransmit_timeout: Duration::from_millis(5),
        max_retries: 3,
        ..RcConfig::default()
    };
    let mut transport = UdpTransport::bind(Ipv4Addr::LOCALHOST, config).unwrap();
    let conn = client::connect_udp_qp(&a, &mut transport).unwrap();
    let base = RemoteAddr::new(conn.regions[0].rkey, conn.regions[0].base_va);
    let worker = Worker::new(Box::new(transport), WorkerConfig::default());
    let qp = worker.qp(conn.handle);
    worker.block_on(async { qp.write(base, vec![7; 8]).await.unwrap() });

    client::delete_qp(&a, conn.remote_qpn).unwrap();
    assert!(node.qps().is_empty());
    let e = client::delete_qp(&a, conn.remote_qpn).unwrap_err();
    assert_eq!(e.status(), Some(404), "{e}");
    let before = worker.transport_stats().packets_sent;
    let unknown_before = node.metrics().dropped(DropKind::UnknownQpn);
    let r = worker.block_on(async { qp.read(base, 8).await });
    assert_eq!(
        r,
        Err(VerbError::Completion(CompletionError::RetryExceeded))
    );
    let sent = worker.transport_stats().packets_sent - before;
    assert!(sent >= 1);
    wait_received(&node, worker.transport_stats().packets_sent);
    let m = node.metrics();
    assert_eq!(m.dropped(DropKind::UnknownQpn) - unknown_before, sent);
    assert_eq!(m.qps, 0);
    assert_eq!(m.qps_created, 1);
    assert_eq!(m.qps_deleted, 1);
    assert_eq!(m.accepted(AcceptOutcome::InSequence), 1);
    node.shutdown();
}

fn error_of(r: &client::RawResponse) -> ErrorBody {
    serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("error body is not JSON ({e}): {:?}", r.body))
}

#[test]
fn bad_requests_get_clear_json_errors() {
    let node = start();
    let a = admin(&node);
    let post = |body: &[u8]| client::request(&a, "POST", "/v1/qps", Some(body)).unwrap();

    let r = post(b"{\"qpn\": 5,");
    assert_eq!(r.status, 400);
    let e = error_of(&r);
    assert_eq!(e.code, "invalid_json");
    assert!(e.error.contains("JSON"), "{}", e.error);

    let r = post(b"{\"qpn\": 5}");
    assert_eq!(r.status, 422);
    let e = error_of(&r);
    assert_eq!(e.code, "invalid_request");
    assert!(e.error.contains("missing field `psn`"), "{}", e.error);

    let r = post(b"{\"qpn\": 5, \"psn\": 1, \"addr\": \"not-an-address\"}");
    assert_eq!(r.status, 422);
    assert_eq!(error_of(&r).code, "invalid_request");

    let r = post(b"{\"qpn\": 5, \"psn\": 1, \"addr\": \"127.0.0.1:9\", \"pmtu\": 1500}");
    assert_eq!(r.status, 422);
    assert!(error_of(&r).error.contains("path MTU"));

    let r = post(b"{\"qpn\": 0, \"psn\": 1, \"addr\": \"127.0.0.1:9\"}");
    assert_eq!(r.status, 422);
    assert!(error_of(&r).error.contains("qpn"));

    let r = post(b"{\"qpn\": 5, \"psn\": 1, \"addr\": \"127.0.0.1:9\", \"bogus\": 1}");
    assert_eq!(r.status, 422);
    assert!(error_of(&r).error.contains("bogus"));

    let r = post(
        format!(
            "{{\"qpn\": 5, \"psn\": 1, \"addr\": \"127.0.0.1:9\", \"server_addr\": \"127.0.0.1:{}\"}}",
            node.data_addr().port().wrapping_add(1)
        )
        .as_bytes(),
    );
    assert_eq!(r.status, 422);
    assert!(error_of(&r).error.contains("server_addr"));

    let mut big = b"{\"qpn\": 5, \"psn\": 1, \"addr\": \"127.0.0.1:9\", \"pad\": \"".to_vec();
    big.extend(std::iter::repeat_n(b'x', 100 * 1024));
    big.extend_from_slice(b"\"}");
    let r = post(&big);
    assert_eq!(r.status, 413);
    assert_eq!(error_of(&r).code, "body_too_large");

    let r = client::request(&a, "DELETE", "/v1/qps/12345", None).unwrap();
    assert_eq!(r.status, 404);
    let e = error_of(&r);
    assert_eq!(e.code, "qp_not_found");
    assert!(e.error.contains("12345"));

    let r = client::request(&a, "DELETE", "/v1/qps/banana", None).unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(error_of(&r).code, "invalid_qpn");

    let r = client::request(&a, "GET", "/v1/nothing", None).unwrap();
    assert_eq!(r.status, 404);
    assert_eq!(error_of(&r).code, "not_found");

    let r = client::request(&a, "PUT", "/v1/qps", Some(b"{}")).unwrap();
    assert_eq!(r.status, 405);
    assert_eq!(error_of(&r).code, "method_not_allowed");

    // Nothing was created by any of it, and the client library reports errors clearly.
    assert!(node.qps().is_empty());
    match client::qp_info(&a, 77) {
        Err(ClientError::Http { status, code, .. }) => {
            assert_eq!((status, code.as_str()), (404, "qp_not_found"))
        }
        other => panic!("unexpected {other:?}"),
    }
    node.shutdown();
}

#[test]
fn wildcard_listen_needs_server_addr() {
    let mut config = MemnodeConfig::local(CAPACITY);
    config.listen = "0.0.0.0:0".parse().unwrap();
    let node = Memnode::start(config).unwrap();
    let a = admin(&node);
    let port = node.data_addr().port();
    let r = client::request(
        &a,
        "POST",
        "/v1/qps",
        Some(b"{\"qpn\": 5, \"psn\": 1, \"addr\": \"127.0.0.1:9\"}"),
    )
    .unwrap();
    assert_eq!(r.status, 400);
    let e = error_of(&r);
    assert_eq!(e.code, "missing_server_addr");
    assert!(e.error.contains("server_addr"), "{}", e.error);
    // The client library derives the address from the admin host and works.
    let mut transport = UdpTransport::bind(Ipv4Addr::LOCALHOST, RcConfig::default()).unwrap();
    let conn = client::connect_udp_qp(&a, &mut transport).unwrap();
    assert_eq!(
        conn.remote_addr,
        format!("127.0.0.1:{port}").parse().unwrap()
    );
    let base = RemoteAddr::new(conn.regions[0].rkey, conn.regions[0].base_va);
    let worker = Worker::new(Box::new(transport), WorkerConfig::default());
    let qp = worker.qp(conn.handle);
    worker.block_on(async {
        assert_eq!(qp.faa(base, 3).await.unwrap(), 0);
        assert_eq!(qp.faa(base, 3).await.unwrap(), 3);
    });
    node.shutdown();
}

#[test]
fn shm_region_is_described_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("region");
    let mut config = MemnodeConfig::local(64 * 1024);
    config.shm = Some(path.clone());
    config.read_order = verbs::mem::ReadOrder::Descending;
    let node = Memnode::start(config).unwrap();
    let a = admin(&node);
    let regions = client::regions(&a).unwrap();
    assert_eq!(regions[0].backing, "file");
    assert_eq!(regions[0].read_order, "descending");
    assert_eq!(regions[0].path.as_deref(), Some(path.to_str().unwrap()));

    // A WRITE over soft RoCE is visible through the shared file.
    let mut transport = UdpTransport::bind(Ipv4Addr::LOCALHOST, RcConfig::default()).unwrap();
    let conn = client::connect_udp_qp(&a, &mut transport).unwrap();
    let base = RemoteAddr::new(regions[0].rkey, regions[0].base_va);
    let worker = Worker::new(Box::new(transport), WorkerConfig::default());
    let qp = worker.qp(conn.handle);
    worker.block_on(async {
        qp.write(base.offset(128), b"shared".to_vec())
            .await
            .unwrap()
    });
    let target = regions[0].shm_target().unwrap();
    let mem = verbs::transport::shm::open_shm(&target).unwrap();
    let mut buf = [0u8; 6];
    mem.read(target.rkey, target.base_va + 128, &mut buf)
        .unwrap();
    assert_eq!(&buf, b"shared");
    node.shutdown();
}

#[test]
fn start_errors_are_clear() {
    let node = start();
    // The soft-RoCE port is taken.
    let mut config = MemnodeConfig::local(CAPACITY);
    config.listen = node.data_addr().into();
    let e = Memnode::start(config).unwrap_err().to_string();
    assert!(e.contains("soft-RoCE") && e.contains("in use"), "{e}");
    // The admin port is taken.
    let mut config = MemnodeConfig::local(CAPACITY);
    config.admin = node.admin_addr();
    let e = Memnode::start(config).unwrap_err().to_string();
    assert!(e.contains("admin") && e.contains("in use"), "{e}");
    // Bad settings.
    let e = Memnode::start(MemnodeConfig::local(0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("capacity"), "{e}");
    let mut config = MemnodeConfig::local(CAPACITY);
    config.shm = Some("/nonexistent-dir/region".into());
    let e = Memnode::start(config).unwrap_err().to_string();
    assert!(e.contains("/nonexistent-dir/region"), "{e}");
    node.shutdown();
}

#[test]
fn zero_range_zeroes_exactly_the_range_and_refuses_bad_ones() {
    let node = start();
    let a = admin(&node);
    let region = client::regions(&a).unwrap().remove(0);
    let mem = node.memory();
    mem.table
        .write(region.rkey, region.base_va, &[0xAB; 8192])
        .unwrap();
    // A range larger than one zeroing step's buffer would be, and unaligned.
    assert_eq!(
        client::zero_range(&a, region.rkey, region.base_va + 100, 5000).unwrap(),
        5000
    );
    let mut buf = vec![0u8; 8192];
    mem.table
        .read(region.rkey, region.base_va, &mut buf)
        .unwrap();
    assert!(buf[..100].iter().all(|b| *b == 0xAB));
    assert!(buf[100..5100].iter().all(|b| *b == 0));
    assert!(buf[5100..].iter().all(|b| *b == 0xAB));

    let status = |r: Result<u64, ClientError>| r.unwrap_err().status();
    // Unknown rkey: 404; outside the region (or overflowing): 422; nothing changes.
    assert_eq!(
        status(client::zero_range(
            &a,
            region.rkey ^ 0x5555,
            region.base_va,
            8
        )),
        Some(404)
    );
    assert_eq!(
        status(client::zero_range(
            &a,
            region.rkey,
            region.base_va,
            region.len + 1
        )),
        Some(422)
    );
    assert_eq!(
        status(client::zero_range(&a, region.rkey, u64::MAX - 3, 8)),
        Some(422)
    );
    mem.table
        .read(region.rkey, region.base_va, &mut buf)
        .unwrap();
    assert!(buf[5100..].iter().all(|b| *b == 0xAB));
    // Bad bodies and rkeys get clear errors.
    let path = format!("/v1/regions/{:#x}/zero", region.rkey);
    let r = client::request(&a, "POST", &path, Some(b"{\"va\": 1}")).unwrap();
    assert_eq!(r.status, 422, "{:?}", String::from_utf8_lossy(&r.body));
    let r = client::request(
        &a,
        "POST",
        "/v1/regions/zz/zero",
        Some(b"{\"va\":0,\"len\":8}"),
    )
    .unwrap();
    assert_eq!(r.status, 400);
    let e: ErrorBody = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(e.code, "invalid_rkey");
}
