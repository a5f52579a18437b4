//! The packet receive path against requests sent with IPv4 headers of several ids and
//! flags: it accepts a request exactly when its ICRC is valid over the header it was
//! sent with, and counts the others as bad ICRCs.
//!
//! Requests are injected as whole Ethernet frames on loopback through a packet socket,
//! so the kernel changes nothing in their headers. Injected frames from 127.0.0.1 reach
//! the IP stack only with `route_localnet`, so the tests run in a network namespace of
//! their own (`unshare --net`). Needs root, `unshare` and `ip`; without them the test
//! is skipped loudly, or fails under `DMKV_REQUIRE_INTEROP=1`.

#[path = "common/interop.rs"]
mod interop;
#[path = "../../verbs/tests/support/netns.rs"]
mod netns;

use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use memnode::api::CreateQpRequest;
use memnode::metrics::DropKind;
use memnode::{Memnode, MemnodeConfig, ReceivePath, client};
use verbs::wire::{BthRepr, FrameRepr, IPV4_DF, IcrcPath, Opcode, PacketRepr, RethRepr};

const CLIENT_QPN: u32 = 0x00_1234;

/// A raw sender of whole frames on `lo`.
struct FrameSender {
    fd: OwnedFd,
    ifindex: i32,
}

impl FrameSender {
    fn open() -> std::io::Result<FrameSender> {
        // SAFETY: plain socket creation; the fd is owned right below.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: a NUL-terminated literal.
        let ifindex = unsafe { libc::if_nametoindex(c"lo".as_ptr()) } as i32;
        Ok(FrameSender { fd, ifindex })
    }

    fn send(&self, frame: &[u8]) {
        // SAFETY: all-zero is a valid sockaddr_ll; fields set below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = self.ifindex;
        sll.sll_halen = 6;
        // SAFETY: valid fd, `frame` readable, `sll` of the advertised size.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        assert_eq!(
            rc,
            frame.len() as isize,
            "{}",
            std::io::Error::last_os_error()
        );
    }
}

/// One case: the header a request is sent with, and the header its ICRC was computed for.
struct Case {
    sent_id: u16,
    sent_flags: u16,
    icrc_id: u16,
    icrc_flags: u16,
}

impl Case {
    fn valid(&self) -> bool {
        (self.sent_id, self.sent_flags) == (self.icrc_id, self.icrc_flags)
    }
}

const CASES: [Case; 8] = [
    Case {
        sent_id: 0,
        sent_flags: IPV4_DF,
        icrc_id: 0,
        icrc_flags: IPV4_DF,
    },
    Case {
        sent_id: 0x1234,
        sent_flags: IPV4_DF,
        icrc_id: 0x1234,
        icrc_flags: IPV4_DF,
    },
    Case {
        sent_id: 0x1234,
        sent_flags: IPV4_DF,
        icrc_id: 0,
        icrc_flags: IPV4_DF,
    },
    Case {
        sent_id: 1,
        sent_flags: 0,
        icrc_id: 1,
        icrc_flags: 0,
    },
    Case {
        sent_id: 1,
        sent_flags: 0,
        icrc_id: 1,
        icrc_flags: IPV4_DF,
    },
    Case {
        sent_id: 0,
        sent_flags: 0,
        icrc_id: 0,
        icrc_flags: IPV4_DF,
    },
    Case {
        sent_id: 0xFFFF,
        sent_flags: IPV4_DF,
        icrc_id: 0xFFFF,
        icrc_flags: IPV4_DF,
    },
    Case {
        sent_id: 0,
        sent_flags: IPV4_DF,
        icrc_id: 0xe65d,
        icrc_flags: IPV4_DF,
    },
];

/// Sends every case as a 64-byte READ and returns, per case, whether it was answered,
/// and the node's bad-ICRC drop count.
fn run(receive: ReceivePath) -> (Vec<bool>, u64) {
    let mut config = MemnodeConfig::local(1 << 20);
    config.receive = receive;
    let node = Memnode::start(config).expect("start the memnode");
    let data = node.data_addr();
    let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("client socket");
    sock.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let std::net::SocketAddr::V4(me) = sock.local_addr().expect("address") else {
        unreachable!("bound to IPv4")
    };
    let qp = client::create_qp(
        &node.admin_url(),
        &CreateQpRequest {
            qpn: CLIENT_QPN,
            psn: 0,
            addr: me,
            pmtu: 1024,
            server_addr: Some(data),
            coalesce: false,
        },
    )
    .expect("create the responder QP");
    let region = node.regions().into_iter().next().expect("a region");
    let sender = FrameSender::open().expect("packet socket");
    let mut psn = 0u32;
    let mut answered = Vec::new();
    for case in &CASES {
        let mut repr = PacketRepr::new(BthRepr::new(Opcode::ReadRequest, qp.qpn, psn, true));
        repr.reth = Some(RethRepr {
            va: region.base_va,
            rkey: region.rkey,
            dma_len: 64,
        });
        let base = IcrcPath::new(me, data);
        let icrc_path = base.with_ip_id(case.icrc_id).with_ip_flags(case.icrc_flags);
        let sent_path = base.with_ip_id(case.sent_id).with_ip_flags(case.sent_flags);
        let mut roce = vec![0u8; repr.buffer_len()];
        repr.emit(&mut roce, &icrc_path).expect("emit");
        let frame = FrameRepr::new([0; 6], [0; 6], 0x02, sent_path).emit(&roce);
        sender.send(&frame);
        // An answer is waited for generously (a loaded machine may deschedule the
        // data plane); silence is concluded sooner (refused requests are never
        // answered, so no late answer can reach the next case).
        let wait = if case.valid() { 3000 } else { 300 };
        sock.set_read_timeout(Some(Duration::from_millis(wait)))
            .expect("timeout");
        let mut buf = [0u8; 2048];
        let got = match sock.recv_from(&mut buf) {
            Ok((n, _)) => {
                let resp = PacketRepr::parse(&buf[..n]).expect("a RoCE response");
                assert_eq!(resp.bth.psn, psn);
                assert_eq!(resp.bth.opcode, Opcode::ReadResponseOnly);
                true
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                false
            }
            Err(e) => panic!("receive: {e}"),
        };
        if got {
            psn += 1;
        }
        answered.push(got);
    }
    let bad = node.metrics().dropped(DropKind::BadIcrc);
    node.shutdown();
    (answered, bad)
}

#[test]
fn receive_paths_in_a_namespace() {
    if !interop::tool_available(netns::available, "a network namespace (root, unshare, ip)") {
        return;
    }
    netns::run_inside(
        "ip link set lo up && echo 1 > /proc/sys/net/ipv4/conf/lo/route_localnet",
        "inside_namespace_",
        1,
    );
}

#[test]
#[ignore = "runs inside the network namespace of receive_paths_in_a_namespace"]
fn inside_namespace_the_packet_path_checks_each_icrc_against_the_header_sent() {
    if !netns::inside() {
        return;
    }
    let (answered, bad) = run(ReceivePath::Packet);
    let expected: Vec<bool> = CASES.iter().map(Case::valid).collect();
    assert_eq!(
        answered, expected,
        "answered exactly the requests with a valid ICRC"
    );
    assert_eq!(bad, expected.iter().filter(|v| !**v).count() as u64);
}
