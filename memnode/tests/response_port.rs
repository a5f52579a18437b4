//! `--response-port roce`: responses go to the client host's UDP port 4791, as RoCEv2
//! NICs send both directions of a queue pair, with an ICRC for that path; the default
//! sends them back to the port requests come from.
//!
//! Runs in a network namespace of its own so that port 4791 is free (needs root,
//! `unshare` and `ip`; skipped loudly otherwise, failed under `DMKV_REQUIRE_INTEROP=1`).

#[path = "common/interop.rs"]
mod interop;
#[path = "../../verbs/tests/support/netns.rs"]
mod netns;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::time::Duration;

use memnode::api::CreateQpRequest;
use memnode::{Memnode, MemnodeConfig, ResponsePort, client};
use verbs::wire::{BthRepr, IcrcPath, Opcode, PacketRepr, ROCE_UDP_PORT, RethRepr};

fn v4(s: &UdpSocket) -> SocketAddrV4 {
    match s.local_addr().expect("address") {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(a) => panic!("{a} is not IPv4"),
    }
}

/// Sends one READ from `from` and returns the datagram that arrives on `listen`
/// (with its sender), if any.
fn read_once(
    responses: ResponsePort,
    from: &UdpSocket,
    listen: &UdpSocket,
) -> Option<(Vec<u8>, SocketAddrV4)> {
    let mut config = MemnodeConfig::local(1 << 20);
    config.response_port = responses;
    let node = Memnode::start(config).expect("start the memnode");
    let data = node.data_addr();
    let me = v4(from);
    let qp = client::create_qp(
        &node.admin_url(),
        &CreateQpRequest {
            qpn: 0x77,
            psn: 0,
            addr: me,
            pmtu: 1024,
            server_addr: Some(data),
            coalesce: false,
        },
    )
    .expect("create the responder QP");
    let region = node.regions().into_iter().next().expect("a region");
    let mut repr = PacketRepr::new(BthRepr::new(Opcode::ReadRequest, qp.qpn, 0, true));
    repr.reth = Some(RethRepr {
        va: region.base_va,
        rkey: region.rkey,
        dma_len: 64,
    });
    let mut roce = vec![0u8; repr.buffer_len()];
    repr.emit(&mut roce, &IcrcPath::new(me, data))
        .expect("emit");
    from.send_to(&roce, data).expect("send");
    listen
        .set_read_timeout(Some(Duration::from_secs(3)))
        .expect("timeout");
    let mut buf = [0u8; 2048];
    let got = match listen.recv_from(&mut buf) {
        Ok((n, SocketAddr::V4(src))) => Some((buf[..n].to_vec(), src)),
        Ok((_, SocketAddr::V6(a))) => panic!("{a}"),
        Err(_) => None,
    };
    node.shutdown();
    got
}

#[test]
fn response_ports_in_a_namespace() {
    if !interop::tool_available(netns::available, "a network namespace (root, unshare, ip)") {
        return;
    }
    netns::run_inside("ip link set lo up", "inside_namespace_", 2);
}

#[test]
#[ignore = "runs inside the network namespace of response_ports_in_a_namespace"]
fn inside_namespace_roce_mode_answers_on_4791() {
    if !netns::inside() {
        return;
    }
    let host = Ipv4Addr::new(127, 0, 0, 3);
    let requests = UdpSocket::bind((host, 0)).expect("request socket");
    let nic_port = UdpSocket::bind((host, ROCE_UDP_PORT)).expect("port 4791");
    let (bytes, src) =
        read_once(ResponsePort::Roce, &requests, &nic_port).expect("a response on port 4791");
    let resp = PacketRepr::parse(&bytes).expect("RoCE");
    assert_eq!(resp.bth.opcode, Opcode::ReadResponseOnly);
    IcrcPath::new(src, SocketAddrV4::new(host, ROCE_UDP_PORT))
        .verify(&bytes)
        .expect("the ICRC is the one of the path it travelled");
    requests
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    assert!(
        requests.recv_from(&mut [0u8; 64]).is_err(),
        "nothing to the source port"
    );
}

#[test]
#[ignore = "runs inside the network namespace of response_ports_in_a_namespace"]
fn inside_namespace_client_mode_answers_the_source_port() {
    if !netns::inside() {
        return;
    }
    let host = Ipv4Addr::new(127, 0, 0, 3);
    let requests = UdpSocket::bind((host, 0)).expect("request socket");
    let (bytes, src) = read_once(ResponsePort::Client, &requests, &requests).expect("a response");
    IcrcPath::new(src, v4(&requests))
        .verify(&bytes)
        .expect("the ICRC is the one of the path it travelled");
}
