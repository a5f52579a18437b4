//! Segmentation offload through the soft switch on loopback: the client, the switch's
//! two sockets and the memory node all say they receive coalesced buffers when the
//! connection is made, and runs of requests and of responses then cross each of the
//! two hops as one buffer — with every byte as without, through the pipeline that
//! re-addresses each packet and recomputes its ICRC.

use std::net::{Ipv4Addr, SocketAddrV4};

use accel_p4::switch::{SoftSwitch, SwitchConfig};
use memnode::{Memnode, MemnodeConfig};
use verbs::net::{BatchSocket, OffloadMode};
use verbs::rc::RcConfig;
use verbs::transport::Transport;
use verbs::transport::udp::UdpTransport;
use verbs::wr::RemoteAddr;

#[path = "../../verbs/tests/support/doorbell_runs.rs"]
mod doorbell_runs;

const RUNS: usize = 4;
const PER_RUN: usize = 16;
const LEN: usize = 400;

#[test]
fn runs_cross_both_hops_coalesced_and_every_byte_is_as_sent() {
    let lo = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);
    if !BatchSocket::bind_with(lo, OffloadMode::Auto).is_ok_and(|s| s.coalesces()) {
        eprintln!("this kernel has no UDP_SEGMENT / UDP_GRO: nothing to check");
        return;
    }
    let node = Memnode::start(MemnodeConfig::local(1 << 20)).expect("memnode starts");
    let sw = SoftSwitch::start(SwitchConfig::local()).expect("switch starts");
    let mut t = UdpTransport::bind(Ipv4Addr::LOCALHOST, RcConfig::default()).expect("bind");
    let conn = accel_p4::client::connect_udp_qp(&sw.admin_url(), &node.admin_url(), &mut t)
        .expect("connect through the switch");
    let routes = sw.control().state().routes;
    assert_eq!(routes.len(), 1);
    assert!(
        routes[0].coalesce_client && routes[0].coalesce_memnode,
        "both peers said they coalesce: {routes:?}"
    );
    let base = RemoteAddr::new(conn.regions[0].rkey, conn.regions[0].base_va);
    doorbell_runs::write_then_read(&mut t, conn.handle, base, RUNS, PER_RUN, LEN);
    let stats = t.stats();
    assert!(
        stats.segmented_sends > 0,
        "the client segmented nothing: {stats:?}"
    );
    assert_eq!(stats.retransmissions, 0, "{stats:?}");
    let m = node.metrics();
    assert!(m.segmented > 0, "the node segmented no run of responses");
    assert_eq!(
        m.dropped.iter().sum::<u64>(),
        0,
        "the node dropped datagrams"
    );
    assert_eq!(m.received, stats.packets_sent, "every request arrived once");
    let switch_segmented = sw
        .io_stats()
        .segmented
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        switch_segmented > 0,
        "the switch forwarded no run as one send"
    );
    node.shutdown();
}
