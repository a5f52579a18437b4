//! Segmentation offload on a device that makes the kernel cut every send into real
//! datagrams (`gso_max_segs 1`, as on NIC paths without UDP segmentation): each
//! datagram on the wire must carry the ICRC of the IPv4 header it was sent with.
//!
//! The test re-runs itself inside a fresh network namespace (`unshare --net`, then
//! `ip link set lo up gso_max_segs 1`), captures loopback with a packet socket and
//! checks every frame against its real header. Needs root, `unshare` and `ip`; a
//! missing one is a skip (a failure with `DMKV_REQUIRE_INTEROP=1`).

#[path = "support/interop.rs"]
mod interop;
#[path = "support/netns.rs"]
mod netns;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use verbs::net::{BatchSocket, PacketSocket};
use verbs::wire::{BthRepr, EthernetFrame, IcrcPath, Opcode, PacketRepr, RethRepr};

/// The namespace: loopback up, every send cut into datagrams.
const SETUP: &str = "ip link set lo up && ip link set lo gso_max_segs 1";
const DATAGRAMS: usize = 48;

/// The outcome of one capture: (frames seen, frames whose ICRC is wrong for their
/// header, distinct IP ids seen).
fn capture_offloaded_sends(carries_roce: bool) -> (usize, usize, usize) {
    let lo = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);
    let mut tx = BatchSocket::bind(lo).expect("sender");
    tx.set_carries_roce(carries_roce);
    assert!(
        tx.enable_offload(),
        "the kernel offers UDP_SEGMENT and UDP_GRO"
    );
    let rx = BatchSocket::bind(lo).expect("receiver");
    let to = rx.local_addr();
    let capture = PacketSocket::bind(Some("lo"), to.port()).expect("packet socket on lo");
    let path = IcrcPath::new(tx.local_addr(), to);
    let payload = vec![0x5Au8; 512];
    let packets: Vec<Vec<u8>> = (0..DATAGRAMS as u32)
        .map(|psn| {
            let mut repr = PacketRepr::new(BthRepr::new(Opcode::WriteOnly, 0x11, psn, true));
            repr.reth = Some(RethRepr {
                va: 0x1000 + u64::from(psn) * 512,
                rkey: 7,
                dma_len: 512,
            });
            repr.payload = &payload;
            let mut buf = vec![0u8; repr.buffer_len()];
            repr.emit(&mut buf, &path).expect("emit");
            buf
        })
        .collect();
    let batch: Vec<(&[u8], SocketAddrV4)> = packets.iter().map(|p| (p.as_slice(), to)).collect();
    tx.send_batch(&batch).expect("send");
    let (mut seen, mut bad) = (0, 0);
    let mut ids = std::collections::BTreeSet::new();
    let mut buf = vec![0u8; 65_536];
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen < DATAGRAMS && Instant::now() < deadline {
        let Some(n) = capture.recv(&mut buf).expect("capture") else {
            capture
                .wait_readable(Some(Duration::from_millis(50)))
                .expect("poll");
            continue;
        };
        let frame = EthernetFrame::parse_port(&buf[..n], to.port()).expect("a RoCE frame");
        seen += 1;
        ids.insert(frame.ip_id());
        if frame.verify_icrc().is_err() {
            bad += 1;
        }
    }
    (seen, bad, ids.len())
}

/// Runs inside the namespace (started by the test below).
#[test]
#[ignore = "runs inside a network namespace started by segmented_sends_carry_the_icrc_of_their_headers"]
fn inner_capture_in_namespace() {
    if !netns::inside() {
        return;
    }
    let (seen, bad, ids) = capture_offloaded_sends(true);
    println!("RoCE socket: {seen} frames, {bad} with a wrong ICRC, {ids} distinct IP ids");
    assert_eq!(seen, DATAGRAMS, "every datagram left as its own frame");
    assert!(
        ids > 1,
        "the kernel numbered the segments ({ids} distinct ids)"
    );
    assert_eq!(
        bad, 0,
        "every frame's ICRC matches the header it was sent with"
    );
    // The same sends from a socket that treats datagrams as opaque keep the ICRC of
    // IP id 0 on every segment: the wire shows them wrong, which is what the fix is for.
    let (seen, bad, _) = capture_offloaded_sends(false);
    println!("opaque socket: {seen} frames, {bad} with a wrong ICRC");
    assert_eq!(seen, DATAGRAMS);
    assert!(bad > 0, "segments after the first carry ids other than 0");
}

#[test]
fn segmented_sends_carry_the_icrc_of_their_headers() {
    if !interop::tool_available(
        || netns::available_for(SETUP),
        "a network namespace (root, unshare, ip)",
    ) {
        return;
    }
    let text = netns::run_inside(SETUP, "inner_capture_in_namespace", 1);
    println!("{text}");
}
