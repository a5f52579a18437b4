//! The transport conformance suite across processes: `udp` against the real `memnode`
//! binary on loopback, and `shm` mapping the region file of a `memnode --shm` process
//! (the in-process `local` and `shm` cases are in `verbs/tests/conformance_direct.rs`).

#[path = "common/process.rs"]
mod process;

use memnode::api::RegionDescriptor;
use memnode::client;
use process::MemnodeProcess;
use verbs::conformance::{self, Report, SCRATCH_BYTES, Scratch};
use verbs::rc::RcConfig;
use verbs::transport::QpHandle;
use verbs::transport::local::DirectTransport;
use verbs::transport::udp::UdpTransport;
use verbs::worker::{Worker, WorkerConfig};
use verbs::wr::RemoteAddr;

/// Checks of [`conformance::run`].
const CHECKS: usize = 8;

/// The suite's scratch area: the second 64 KiB of the region, so that the first stays
/// untouched and the bounds checks aim at the region's real end.
fn scratch(region: &RegionDescriptor) -> Scratch {
    assert!(
        region.len >= 2 * SCRATCH_BYTES,
        "region too small: {region:?}"
    );
    Scratch {
        base: RemoteAddr::new(region.rkey, region.base_va + SCRATCH_BYTES),
        region_end: region.base_va + region.len,
    }
}

fn run_suite(worker: &Worker, qp: QpHandle, scratch: Scratch) -> Report {
    let qp = worker.qp(qp);
    let report = worker.block_on(async { conformance::run(&qp, scratch).await });
    assert_eq!(report.checks.len(), CHECKS, "{report:?}");
    report
}

/// A soft-RoCE queue pair to the node at `admin`, in a worker of its own.
fn udp_worker(node: &MemnodeProcess, config: WorkerConfig) -> (Worker, QpHandle, RegionDescriptor) {
    let mut transport =
        UdpTransport::for_remote(node.data, RcConfig::default()).expect("bind a UDP transport");
    let (qp, regions) = client::connect_udp(&node.admin, &mut transport).expect("connect_udp");
    assert_eq!(regions.len(), 1, "{regions:?}");
    let worker = Worker::new(Box::new(transport), config);
    (worker, qp, regions[0].clone())
}

fn read_word(worker: &Worker, qp: QpHandle, at: RemoteAddr) -> u64 {
    let qp = worker.qp(qp);
    let bytes = worker
        .block_on(async { qp.read(at, 8).await })
        .expect("read a word");
    u64::from_le_bytes(bytes.try_into().expect("8 bytes"))
}

/// A sample of the node's `/metrics`.
fn metric(node: &MemnodeProcess, name: &str) -> f64 {
    let r = client::request(&node.admin, "GET", "/metrics", None).expect("GET /metrics");
    assert_eq!(r.status, 200);
    let text = String::from_utf8(r.body).expect("UTF-8 metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {name} in:\n{text}"))
        .parse()
        .expect("a number")
}

#[test]
fn udp_conforms_against_a_memnode_process() {
    let node = MemnodeProcess::start("1MiB", &[]);
    assert_ne!(node.pid(), std::process::id());
    for (name, config) in [
        ("default", WorkerConfig::default()),
        ("baseline", WorkerConfig::baseline()),
    ] {
        let (worker, qp, region) = udp_worker(&node, config);
        assert_eq!(region.len, 1 << 20);
        let report = run_suite(&worker, qp, scratch(&region));
        assert!(
            report.passed(),
            "udp with the {name} worker config:\n{}",
            report.failures()
        );
        let stats = worker.transport_stats();
        assert!(
            stats.packets_sent > 0 && stats.packets_received > 0,
            "{stats:?}"
        );
        assert_eq!(stats.completions, stats.work_requests, "{name}: {stats:?}");
        // The node counted this queue pair's work too (it is another process).
        let qps = client::list_qps(&node.admin).expect("list QPs");
        let served = qps.iter().map(|q| q.counters.messages).sum::<u64>();
        assert!(served > 400, "the node executed only {served} messages");
    }
    let (status, log) = node.stop();
    assert!(status.success(), "memnode exit {status:?}; log:\n{log}");
    assert!(log.contains("shutting down"), "{log}");
}

#[test]
fn shm_conforms_against_the_region_file_of_a_memnode_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("region");
    let node = MemnodeProcess::start_shm("1MiB", &path);
    let regions = client::regions(&node.admin).expect("regions");
    assert_eq!(regions.len(), 1, "{regions:?}");
    let region = regions[0].clone();
    assert_eq!(region.backing, "file", "{region:?}");
    let target = region
        .shm_target()
        .expect("a file-backed region names its file");
    assert_eq!(
        std::fs::canonicalize(&target.path).expect("region file exists"),
        std::fs::canonicalize(&path).unwrap()
    );

    let mut transport = DirectTransport::shm();
    let qp = transport.connect_shm(&target).expect("map the region file");
    let shm = Worker::new(Box::new(transport), WorkerConfig::default());
    let s = scratch(&region);
    let report = run_suite(&shm, qp, s);
    assert!(report.passed(), "shm:\n{}", report.failures());
    assert_eq!(shm.transport_kind().name(), "shm");

    // The shm client never went through the node's data plane.
    assert_eq!(metric(&node, "dmkv_memnode_datagrams_received_total"), 0.0);

    // The node's soft-RoCE responder serves the same memory the shm client wrote.
    let (udp, uqp, uregion) = udp_worker(&node, WorkerConfig::default());
    assert_eq!(
        (uregion.rkey, uregion.base_va),
        (region.rkey, region.base_va)
    );
    // The suite's FAA counter (8 tasks x 50 increments at scratch + 192).
    assert_eq!(read_word(&udp, uqp, s.base.offset(192)), 400);
    // A value written through the mapping, read over udp...
    let marker = RemoteAddr::new(region.rkey, region.base_va + 4096);
    let pattern: Vec<u8> = (0..256u32).map(|i| (i * 7 + 3) as u8).collect();
    {
        let q = shm.qp(qp);
        let data = pattern.clone();
        shm.block_on(async { q.write(marker, data).await })
            .expect("shm write");
    }
    let back = {
        let q = udp.qp(uqp);
        udp.block_on(async { q.read(marker, 256).await })
            .expect("udp read")
    };
    assert_eq!(back, pattern, "udp READ does not see the shm WRITE");
    // ...and an atomic over udp, seen through the mapping.
    let word = RemoteAddr::new(region.rkey, region.base_va + 8192);
    {
        let q = udp.qp(uqp);
        let old = udp
            .block_on(async { q.cas(word, 0, 0xD15A_66DA_7E00_0001).await })
            .expect("udp CAS");
        assert_eq!(old, 0);
    }
    assert_eq!(read_word(&shm, qp, word), 0xD15A_66DA_7E00_0001);

    drop(udp);
    let (status, log) = node.stop();
    assert!(status.success(), "memnode exit {status:?}; log:\n{log}");
}
