//! UDP segmentation offload between a client and a memory node on loopback
//! (`--udp-offload`, `DMKV_UDP_OFFLOAD`): by default both ends say they coalesce when
//! the queue pair is created, and runs of requests and of responses then cross the
//! kernel as one buffer each — with every datagram, PSN and ICRC as without. A node
//! with offload off tells the client so, and nothing is segmented in either
//! direction.

use std::net::{Ipv4Addr, SocketAddrV4};

use memnode::{Memnode, MemnodeConfig, client};
use verbs::net::{BatchSocket, OffloadMode};
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::transport::{Transport, TransportStats};
use verbs::wr::RemoteAddr;

#[path = "../../verbs/tests/support/doorbell_runs.rs"]
mod doorbell_runs;

const RUNS: usize = 4;
const PER_RUN: usize = 16;
const LEN: usize = 512;

/// Writes and reads back `RUNS` doorbells of `PER_RUN` blocks; returns the client's
/// counters.
fn write_then_read(transport: &mut UdpTransport, admin: &str) -> TransportStats {
    let conn = client::connect_udp_qp(admin, transport).expect("queue pair");
    let base = RemoteAddr::new(conn.regions[0].rkey, conn.regions[0].base_va);
    doorbell_runs::write_then_read(transport, conn.handle, base, RUNS, PER_RUN, LEN);
    transport.stats()
}

fn node(mode: OffloadMode) -> memnode::MemnodeHandle {
    let mut config = MemnodeConfig::local(1 << 20);
    config.udp_offload = mode;
    Memnode::start(config).expect("memnode starts")
}

fn kernel_coalesces() -> bool {
    BatchSocket::bind_with(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0), OffloadMode::Auto)
        .is_ok_and(|s| s.coalesces())
}

#[test]
fn loopback_ends_agree_to_coalesce_and_every_byte_is_as_without() {
    if !kernel_coalesces() {
        eprintln!("this kernel has no UDP_SEGMENT / UDP_GRO: nothing to check");
        return;
    }
    let node = node(OffloadMode::Auto);
    let mut transport = UdpTransport::bind(Ipv4Addr::LOCALHOST, RcConfig::default()).unwrap();
    let stats = write_then_read(&mut transport, &node.admin_url());
    assert!(
        stats.segmented_sends > 0,
        "the client segmented no run of requests: {stats:?}"
    );
    let m = node.metrics();
    assert!(m.segmented > 0, "the node segmented no run of responses");
    // Each run of 16 requests crossed loopback as one buffer, so the node took it in one
    // receive batch; it sent what the first half answered before it worked on the second,
    // so that the client could get on with those responses meanwhile.
    assert!(
        m.sends > m.batches,
        "{} sends for {} receive batches: no batch was answered in parts",
        m.sends,
        m.batches
    );
    assert_eq!(stats.retransmissions, 0, "{stats:?}");
    assert_eq!(
        m.dropped.iter().sum::<u64>(),
        0,
        "the node dropped datagrams"
    );
    // Every datagram arrived one by one in the node's accounting.
    assert_eq!(m.received, stats.packets_sent);
    node.shutdown();
}

#[test]
fn a_node_with_offload_off_gets_and_sends_no_segmented_run() {
    let node = node(OffloadMode::Off);
    let mut transport = UdpTransport::bind(Ipv4Addr::LOCALHOST, RcConfig::default()).unwrap();
    let stats = write_then_read(&mut transport, &node.admin_url());
    assert_eq!(stats.segmented_sends, 0, "{stats:?}");
    assert_eq!(node.metrics().segmented, 0);
    let qps = client::list_qps(&node.admin_url()).expect("list");
    assert_eq!(qps.len(), 1);
    node.shutdown();
}
