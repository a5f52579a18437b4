//! UDP segmentation offload between a client and a memory node on loopback
//! (`--udp-offload`, `DMKV_UDP_OFFLOAD`): by default both ends say they coalesce when
//! the queue pair is created, and runs of requests and of responses then cross the
//! kernel as one buffer each — with every datagram, PSN and ICRC as without. A node
//! with offload off tells the client so, and nothing is segmented in either
//! direction.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use memnode::{Memnode, MemnodeConfig, client};
use verbs::net::{BatchSocket, OffloadMode};
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::transport::{Transport, TransportStats};
use verbs::wr::{CompletionValue, RemoteAddr, WorkRequest};

const RUNS: usize = 4;
const PER_RUN: usize = 16;
const LEN: usize = 512;

fn pattern(i: usize) -> Vec<u8> {
    (0..LEN).map(|b| (b * 31 + i * 7) as u8).collect()
}

/// Writes `RUNS` doorbells of `PER_RUN` WRITEs, then reads every block back the same
/// way; returns what was read and the client's counters.
fn write_then_read(transport: &mut UdpTransport, admin: &str) -> (Vec<Vec<u8>>, TransportStats) {
    let conn = client::connect_udp_qp(admin, transport).expect("queue pair");
    let base = RemoteAddr::new(conn.regions[0].rkey, conn.regions[0].base_va);
    let mut read = vec![Vec::new(); RUNS * PER_RUN];
    for phase in 0..2 {
        for run in 0..RUNS {
            let batch: Vec<(u64, WorkRequest)> = (0..PER_RUN)
                .map(|k| {
                    let i = run * PER_RUN + k;
                    let remote = base.offset((i * LEN) as u64);
                    let wr = if phase == 0 {
                        WorkRequest::Write {
                            remote,
                            data: pattern(i),
                            inline: false,
                        }
                    } else {
                        WorkRequest::Read {
                            remote,
                            len: LEN as u32,
                        }
                    };
                    (i as u64, wr)
                })
                .collect();
            transport.post(conn.handle, batch).expect("post");
            let mut done = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(10);
            while done.len() < PER_RUN {
                assert!(Instant::now() < deadline, "completions missing: {done:?}");
                let mut out = Vec::new();
                transport.poll(Instant::now(), &mut out);
                for (_, c) in out {
                    done.push(c.wr_id);
                    match c.result {
                        Ok(CompletionValue::Read(bytes)) => read[c.wr_id as usize] = bytes,
                        Ok(CompletionValue::Write) if phase == 0 => {}
                        other => panic!("work request {} failed: {other:?}", c.wr_id),
                    }
                }
                transport.wait(Instant::now() + Duration::from_millis(1));
            }
        }
    }
    (read, transport.stats())
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
    let (read, stats) = write_then_read(&mut transport, &node.admin_url());
    for (i, got) in read.iter().enumerate() {
        assert_eq!(got, &pattern(i), "block {i}");
    }
    assert!(
        stats.segmented_sends > 0,
        "the client segmented no run of requests: {stats:?}"
    );
    let m = node.metrics();
    assert!(m.segmented > 0, "the node segmented no run of responses");
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
    let (read, stats) = write_then_read(&mut transport, &node.admin_url());
    for (i, got) in read.iter().enumerate() {
        assert_eq!(got, &pattern(i), "block {i}");
    }
    assert_eq!(stats.segmented_sends, 0, "{stats:?}");
    assert_eq!(node.metrics().segmented, 0);
    let qps = client::list_qps(&node.admin_url()).expect("list");
    assert_eq!(qps.len(), 1);
    node.shutdown();
}
