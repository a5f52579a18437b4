//! The two-sided conformance suite on the `udp` transport: a worker's soft-RoCE queue
//! pair sends to a responder on another thread and socket whose SENDs land in a receive
//! queue, over a clean loopback path and over one that loses, duplicates and reorders
//! datagrams in both directions.

#[path = "support/responder_host.rs"]
mod responder_host;

use std::net::Ipv4Addr;
use std::time::Duration;

use responder_host::{Faults, ResponderHost};
use verbs::conformance::{self, SCRATCH_BYTES, Scratch, TWO_SIDED_CHECKS};
use verbs::rc::RcConfig;
use verbs::recv::RecvQueue;
use verbs::transport::udp::UdpTransport;
use verbs::worker::{Worker, WorkerConfig};
use verbs::wr::RemoteAddr;

fn config() -> RcConfig {
    RcConfig {
        // Short timeouts keep the lossy runs quick; loopback answers in microseconds.
        retransmit_timeout: Duration::from_millis(2),
        max_retries: 12,
        ..RcConfig::default()
    }
}

/// Run the suite over a path with `faults`; returns (requester retransmissions,
/// responder duplicates, RNR NAKs the requester saw).
fn run(faults: Faults) -> (u64, u64, u64) {
    let mut transport = UdpTransport::bind(Ipv4Addr::LOCALHOST, config()).expect("bind");
    let local = transport.prepare();
    let recv = RecvQueue::new(64);
    let host = ResponderHost::start(
        local,
        config(),
        SCRATCH_BYTES as usize,
        recv.clone(),
        faults,
    );
    let qp = transport.connect(local, host.remote).expect("connect");
    let scratch = Scratch {
        base: RemoteAddr::new(host.region.rkey, host.region.base_va),
        region_end: host.region.base_va + host.region.len,
    };
    let worker = Worker::new(Box::new(transport), WorkerConfig::default());
    let q = worker.qp(qp);
    let report = worker.block_on(async { conformance::run_two_sided(&q, &recv, scratch).await });
    assert_eq!(report.checks.len(), TWO_SIDED_CHECKS);
    assert!(report.passed(), "{faults:?}:\n{}", report.failures());
    let stats = worker.transport_stats();
    assert_eq!(stats.completions, stats.work_requests, "{stats:?}");
    drop(worker);
    let resp = host.stop();
    assert_eq!(resp.sends, recv.stats().delivered, "{resp:?}");
    (stats.retransmissions, resp.duplicates, resp.naks_rnr)
}

#[test]
fn udp_send_recv_conforms_on_a_clean_path() {
    let (retransmissions, _, rnr) = run(Faults::NONE);
    assert!(rnr > 0, "the RNR check must draw RNR NAKs");
    // Each RNR retry sends the message again from its first packet.
    assert!(retransmissions >= rnr, "{retransmissions} < {rnr}");
}

#[test]
fn udp_send_recv_conforms_under_loss_duplication_and_reordering() {
    let mut retransmissions = 0;
    let mut duplicates = 0;
    for seed in 0..2 {
        let (r, d, _) = run(Faults {
            loss: 0.1,
            dup: 0.1,
            reorder: 0.1,
            seed: 77 + seed,
        });
        retransmissions += r;
        duplicates += d;
    }
    assert!(retransmissions > 0, "loss must cause retransmissions");
    assert!(duplicates > 0, "duplicates must reach the responder");
}

#[test]
fn udp_send_gives_up_after_the_rnr_retry_count() {
    let config = RcConfig {
        rnr_retry: 2,
        min_rnr_timer: 1,
        ..config()
    };
    let mut transport = UdpTransport::bind(Ipv4Addr::LOCALHOST, config.clone()).expect("bind");
    let local = transport.prepare();
    let recv = RecvQueue::new(4);
    let host = ResponderHost::start(local, config, 4096, recv.clone(), Faults::NONE);
    let qp = transport.connect(local, host.remote).expect("connect");
    let worker = Worker::new(Box::new(transport), WorkerConfig::default());
    let q = worker.qp(qp);
    let e = worker.block_on(async { q.send(vec![1; 100]).await });
    assert_eq!(
        e,
        Err(verbs::worker::VerbError::Completion(
            verbs::wr::CompletionError::RnrRetryExceeded
        ))
    );
    drop(worker);
    let resp = host.stop();
    // The first try and two retries, each refused for want of a buffer.
    assert_eq!(resp.naks_rnr, 3, "{resp:?}");
    assert_eq!(recv.stats().not_ready, 3);
}
