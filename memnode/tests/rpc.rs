//! RPC at the memory node over soft RoCE: a client SENDs requests on its queue pair
//! and the node's workers answer with SENDs on the same queue pair.

#[path = "common/rpc_client.rs"]
mod rpc_client;

use std::net::Ipv4Addr;
use std::time::Duration;

use dmkv_api::rpc::{Reply, Request, RpcStatus, parse_reply};
use memnode::{Memnode, MemnodeConfig, MemnodeHandle, client};
use rpc_client::RpcClient;
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::worker::VerbError;
use verbs::wr::CompletionError;

const CAPACITY: u64 = 1 << 20;

fn start(workers: usize) -> MemnodeHandle {
    Memnode::start(MemnodeConfig {
        rpc_workers: workers,
        ..MemnodeConfig::local(CAPACITY)
    })
    .expect("start the memnode")
}

fn connect(node: &MemnodeHandle) -> RpcClient {
    let config = RcConfig {
        retransmit_timeout: Duration::from_millis(20),
        ..RcConfig::default()
    };
    let mut transport = UdpTransport::bind(Ipv4Addr::LOCALHOST, config).expect("bind");
    let conn = client::connect_udp_qp(&node.admin_url(), &mut transport).expect("connect");
    RpcClient::new(transport, &conn)
}

#[test]
fn requests_are_executed_next_to_memory_and_answered_on_the_queue_pair() {
    let node = start(2);
    let c = connect(&node);
    assert_eq!(c.call(Request::Ping, 1), (RpcStatus::Ok, vec![]));
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    let write = Request::Write {
        rkey: c.rkey,
        va: c.base + 4096,
        data: &data,
    };
    assert_eq!(c.call(write, 2), (RpcStatus::Ok, vec![]));
    // The node's memory holds it, and a READ RPC returns it (a reply of 3 packets).
    let mut seen = vec![0u8; data.len()];
    node.memory().region.read(4096, &mut seen).expect("read");
    assert_eq!(seen, data);
    let read = Request::Read {
        rkey: c.rkey,
        va: c.base + 4096,
        len: data.len() as u32,
    };
    assert_eq!(c.call(read, 3), (RpcStatus::Ok, data.clone()));
    // Atomics run on the region's atomics, as a one-sided CAS does.
    let cas = |compare, swap| Request::CompareSwap {
        rkey: c.rkey,
        va: c.base + 64,
        compare,
        swap,
    };
    assert_eq!(
        c.call(cas(0, 5), 4),
        (RpcStatus::Ok, 0u64.to_be_bytes().to_vec())
    );
    assert_eq!(
        c.call(cas(0, 6), 5),
        (RpcStatus::Ok, 5u64.to_be_bytes().to_vec())
    );
    let faa = Request::FetchAdd {
        rkey: c.rkey,
        va: c.base + 64,
        add: 10,
    };
    assert_eq!(c.call(faa, 6), (RpcStatus::Ok, 5u64.to_be_bytes().to_vec()));
    let mut word = [0u8; 8];
    node.memory().region.read(64, &mut word).expect("read");
    assert_eq!(u64::from_le_bytes(word), 15);
    let stats = node.rpc_stats();
    assert_eq!((stats.requests, stats.replies), (6, 6));
    assert_eq!(node.rpc_workers(), 2);
    // And the scrape says so.
    let r = client::request(&node.admin_url(), "GET", "/metrics", None).expect("scrape");
    let text = String::from_utf8(r.body).expect("utf-8");
    let e = telemetry::prom::parse(&text).expect("an exposition");
    assert_eq!(e.scalar("dmkv_memnode_rpc_workers"), Some(2.0));
    assert_eq!(e.scalar("dmkv_memnode_rpc_replies_total"), Some(6.0));
    let done = e
        .get("dmkv_memnode_rpc_requests_total")
        .find(|s| s.label("outcome") == Some("done"))
        .expect("the done series");
    assert_eq!(done.value, 6.0);
}

#[test]
fn bad_requests_get_error_replies_and_change_nothing() {
    let node = start(1);
    let c = connect(&node);
    let mut before = vec![0u8; 8192];
    node.memory().region.read(0, &mut before).expect("read");
    // Not a request at all.
    let reply = c
        .call_raw(vec![0xFF; 5], Duration::from_secs(5))
        .expect("sent")
        .expect("a reply");
    let r = parse_reply(&reply).expect("parses");
    assert_eq!((r.id, r.status), (0, RpcStatus::Malformed));
    // A WRITE cut short.
    let mut cut = Request::Write {
        rkey: c.rkey,
        va: c.base,
        data: &[1; 64],
    }
    .encode(9);
    cut.truncate(40);
    let reply = c
        .call_raw(cut, Duration::from_secs(5))
        .expect("sent")
        .expect("a reply");
    assert_eq!(
        parse_reply(&reply).expect("parses"),
        Reply::error(9, RpcStatus::Malformed)
    );
    // Wrong key, out of bounds, misaligned atomic: refused as one-sided verbs are.
    let w = |rkey, va| Request::Write {
        rkey,
        va,
        data: &[2; 16],
    };
    assert_eq!(c.call(w(c.rkey ^ 1, c.base), 10).0, RpcStatus::UnknownKey);
    assert_eq!(
        c.call(w(c.rkey, c.base + CAPACITY - 8), 11).0,
        RpcStatus::OutOfBounds
    );
    let cas = Request::CompareSwap {
        rkey: c.rkey,
        va: c.base + 4,
        compare: 0,
        swap: 1,
    };
    assert_eq!(c.call(cas, 12).0, RpcStatus::Misaligned);
    let mut after = vec![0u8; 8192];
    node.memory().region.read(0, &mut after).expect("read");
    assert_eq!(after, before);
    let mut tail = [0u8; 8];
    node.memory()
        .region
        .read(CAPACITY - 8, &mut tail)
        .expect("read");
    assert_eq!(tail, [0; 8]);
    let stats = node.rpc_stats();
    assert_eq!((stats.malformed, stats.refused), (2, 3));
}

#[test]
fn a_passive_node_refuses_sends() {
    let node = start(0);
    let c = connect(&node);
    let e = c.call_raw(Request::Ping.encode(1), Duration::from_millis(10));
    assert_eq!(
        e,
        Err(VerbError::Completion(CompletionError::RemoteInvalidRequest))
    );
    assert_eq!(node.rpc_stats().requests, 0);
    let r = client::request(&node.admin_url(), "GET", "/metrics", None).expect("scrape");
    let text = String::from_utf8(r.body).expect("utf-8");
    assert!(
        !text.contains("dmkv_memnode_rpc_"),
        "a passive node has no RPC metrics"
    );
}

#[test]
fn stopped_workers_leave_requests_unanswered_and_unapplied() {
    let mut node = start(1);
    let c = connect(&node);
    assert_eq!(c.call(Request::Ping, 1).0, RpcStatus::Ok);
    node.stop_rpc_workers();
    assert_eq!(node.rpc_workers(), 0);
    let write = Request::Write {
        rkey: c.rkey,
        va: c.base,
        data: &[7; 256],
    };
    // The SEND is acknowledged (the receive queue took it) but no worker answers:
    // the client times out, and memory is untouched.
    let got = c
        .call_raw(write.encode(2), Duration::from_millis(200))
        .expect("the SEND is acknowledged");
    assert_eq!(got, None);
    let mut seen = [0u8; 256];
    node.memory().region.read(0, &mut seen).expect("read");
    assert_eq!(seen, [0; 256]);
    // One-sided verbs keep working.
    assert!(node.is_running());
}
