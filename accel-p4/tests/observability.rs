//! The soft switch's observability: `/metrics` is strict Prometheus text whose packet,
//! steering and per-function counters move under load, every switch decision is
//! named, and each function's decision is a trace event.

use std::net::Ipv4Addr;

use std::net::SocketAddrV4;
use std::sync::{Arc, Mutex};

use accel_p4::model::{Counters, RouteAction, RouteKey};
use accel_p4::pipeline::Pipeline;
use accel_p4::spec::PORT_CLIENT;
use accel_p4::switch::{SoftSwitch, SwitchConfig, decision};
use memnode::{Memnode, MemnodeConfig, client as mclient};
use telemetry::prom::Exposition;
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::wire::{BthRepr, FrameRepr, IcrcPath, Opcode, PacketRepr, RethRepr};
use verbs::worker::{Worker, WorkerConfig};
use verbs::wr::RemoteAddr;

fn scrape(admin: &str) -> Exposition {
    let r = mclient::request(admin, "GET", "/metrics", None).expect("GET /metrics");
    assert_eq!(r.status, 200);
    let text = String::from_utf8(r.body).expect("UTF-8");
    telemetry::prom::parse(&text)
        .unwrap_or_else(|e| panic!("/metrics is not strict Prometheus text: {e}\n{text}"))
}

#[test]
fn metrics_are_strict_and_move_under_load() {
    let node = Memnode::start(MemnodeConfig::local(1 << 20)).expect("memnode starts");
    let sw = SoftSwitch::start(SwitchConfig::local()).expect("switch starts");
    let before = scrape(&sw.admin_url());
    let mut t = UdpTransport::bind(Ipv4Addr::LOCALHOST, RcConfig::default()).expect("bind");
    let conn = accel_p4::client::connect_udp_qp(&sw.admin_url(), &node.admin_url(), &mut t)
        .expect("connect through the switch");
    let worker = Worker::new(Box::new(t), WorkerConfig::default());
    let qp = worker.qp(conn.handle);
    let region = &conn.regions[0];
    let at = RemoteAddr::new(region.rkey, region.base_va);
    worker.block_on(async {
        for i in 0..100u8 {
            qp.write(at, vec![i; 64]).await.expect("WRITE");
            assert_eq!(qp.read(at, 64).await.expect("READ"), vec![i; 64]);
        }
    });
    let after = scrape(&sw.admin_url());
    let hit = |e: &Exposition| {
        e.value("dmkv_switch_route_lookups_total", "result", "hit")
            .unwrap()
    };
    // 200 requests and their responses went through a route.
    assert!(hit(&after) >= hit(&before) + 400.0, "{}", hit(&after));
    assert_eq!(
        after.value("dmkv_switch_route_lookups_total", "result", "miss"),
        Some(0.0)
    );
    let rx = |e: &Exposition| e.scalar("dmkv_switch_datagrams_received_total").unwrap();
    assert!(rx(&after) >= rx(&before) + 400.0);
    let forwarded = after
        .get("dmkv_switch_packets_total")
        .find(|s| s.label("function") == Some("forward") && s.label("counter") == Some("forwarded"))
        .map(|s| s.value)
        .unwrap();
    assert_eq!(
        Some(forwarded),
        after.value("dmkv_switch_route_lookups_total", "result", "hit")
    );
    assert_eq!(after.types["dmkv_switch_route_lookups_total"], "counter");
    // Every packet's time in the pipeline is in the latency histogram.
    assert_eq!(
        after.types["dmkv_switch_pipeline_duration_seconds"],
        "histogram"
    );
    let timed = |e: &Exposition| {
        e.scalar("dmkv_switch_pipeline_duration_seconds_count")
            .unwrap()
    };
    assert!(timed(&after) >= timed(&before) + 400.0, "{}", timed(&after));
    assert_eq!(after.scalar("dmkv_switch_routes"), Some(1.0));
    // The memnode behind it counted the same messages.
    let m = scrape(&node.admin_url());
    assert_eq!(m.types["dmkv_memnode_batch_duration_seconds"], "histogram");
    assert!(
        m.scalar("dmkv_memnode_batch_duration_seconds_count")
            .unwrap()
            >= 1.0
    );
    assert!(
        m.value("dmkv_memnode_messages_total", "verb", "read")
            .unwrap()
            >= 100.0
    );
    sw.shutdown();
    node.shutdown();
}

#[test]
fn metrics_carry_build_info_process_metrics_and_clover_steering_and_pass_promtool() {
    let sw = SoftSwitch::start(SwitchConfig::local()).expect("switch starts");
    let r = mclient::request(&sw.admin_url(), "GET", "/metrics", None).expect("GET /metrics");
    assert_eq!(
        r.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = String::from_utf8(r.body).expect("UTF-8");
    let e = telemetry::prom::parse(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));
    let info = e.get("dmkv_switch_build_info").next().expect("build info");
    assert_eq!(info.value, 1.0);
    assert_eq!(info.label("version"), Some(env!("CARGO_PKG_VERSION")));
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
    ] {
        assert!(e.scalar(name).is_some(), "{name} missing");
    }
    for (direction, function) in [("write", "write_steer"), ("read", "read_steer")] {
        let steered = e
            .get("dmkv_switch_packets_total")
            .find(|s| {
                s.label("function") == Some(function) && s.label("counter") == Some("steered")
            })
            .map(|s| s.value);
        assert_eq!(
            e.value("dmkv_switch_clover_steered_total", "direction", direction),
            steered,
            "{direction}"
        );
    }
    assert!(e.get("dmkv_switch_function_enabled").count() >= 6);
    match telemetry::promtool::check_metrics(&text) {
        Ok(telemetry::promtool::Check::Passed) => {}
        Ok(telemetry::promtool::Check::Skipped(why)) => eprintln!("SKIPPED: {why}"),
        Err(err) => panic!("{err}\n{text}"),
    }
    sw.shutdown();
}

#[test]
fn decisions_are_named_by_the_counter_that_moved() {
    let base = Counters::default();
    let mut c = base;
    assert_eq!(decision(&base, &c), "consumed");
    c.forward.forwarded += 1;
    assert_eq!(decision(&base, &c), "forwarded");
    let mut m = base;
    m.forward.missed += 1;
    assert_eq!(decision(&base, &m), "route_miss");
    let mut a = c;
    a.switch_atomics.answered += 1;
    assert_eq!(decision(&base, &a), "atomic_answered");
    let mut f = c;
    f.faults.dropped += 1;
    assert_eq!(decision(&base, &f), "fault_dropped");
    let mut z = c;
    z.zero_copy.converted += 1;
    assert_eq!(decision(&base, &z), "copy_converted");
    z.faults.duplicated += 1;
    assert_eq!(decision(&base, &z), "fault_duplicated");
    let mut k = base;
    k.zero_copy.acked += 1;
    assert_eq!(decision(&base, &k), "copy_acked");
}

/// Log lines written by a test's subscriber.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A client's READ request to memnode QPN 0x22, as it reaches the client-side port.
fn read_request(client: SocketAddrV4, front: SocketAddrV4) -> Vec<u8> {
    let mut r = PacketRepr::new(BthRepr::new(Opcode::ReadRequest, 0x22, 7, true));
    r.reth = Some(RethRepr {
        va: 0x1000,
        rkey: 0xabcd,
        dma_len: 64,
    });
    let path = IcrcPath::new(client, front);
    let mut roce = vec![0u8; r.buffer_len()];
    r.emit(&mut roce, &path).unwrap();
    FrameRepr::build(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 0x64],
        0x02,
        &path,
        &roce,
    )
}

/// Runs `frames` through a pipeline with one route under a subscriber at `level`;
/// returns what it logged.
fn trace_pipeline(level: tracing::Level, frames: &[Vec<u8>], routed: SocketAddrV4) -> String {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let mut p = Pipeline::new();
        p.tables
            .route_up
            .insert(
                RouteKey {
                    src: routed,
                    qpn: 0x22,
                },
                RouteAction {
                    conn: 3,
                    src: SocketAddrV4::new([10, 0, 0, 100].into(), 50_001),
                    dst: SocketAddrV4::new([10, 0, 0, 2].into(), 4791),
                    client_qpn: 0x11,
                    pmtu_log2: 10,
                },
            )
            .unwrap();
        for f in frames {
            p.process(PORT_CLIENT, f);
        }
    });
    String::from_utf8(lines.0.lock().unwrap().clone()).unwrap()
}

#[test]
fn each_function_decision_is_a_trace_event() {
    let front = SocketAddrV4::new([10, 0, 0, 100].into(), 4791);
    let known = SocketAddrV4::new([10, 0, 0, 1].into(), 50_000);
    let stranger = SocketAddrV4::new([10, 0, 0, 9].into(), 50_000);
    let frames = [read_request(known, front), read_request(stranger, front)];
    let log = trace_pipeline(tracing::Level::TRACE, &frames, known);
    let decisions: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("switch function decision"))
        .collect();
    // The routed READ passes every function, from Route to FaultInject; the stranger's
    // stops at Route.
    assert!(decisions.len() >= 4, "{log}");
    let (routed, unrouted) = decisions.split_at(decisions.len() - 1);
    let first = routed[0];
    assert!(first.contains("function=\"Route\""), "{first}");
    assert!(first.contains("conn=3"), "{first}");
    assert!(first.contains("drop=false"), "{first}");
    assert!(first.contains("egress_port=1"), "{first}");
    assert!(first.contains("opcode=ReadRequest"), "{first}");
    assert!(
        routed
            .iter()
            .any(|l| l.contains("function=\"SwitchAtomics\"")),
        "{log}"
    );
    for steer in ["WriteSteer", "ReadSteer"] {
        assert!(
            routed
                .iter()
                .any(|l| l.contains(&format!("function=\"{steer}\""))),
            "{log}"
        );
    }
    let last = routed[routed.len() - 1];
    assert!(last.contains("function=\"FaultInject\""), "{last}");
    assert!(routed.iter().all(|l| l.contains("drop=false")), "{log}");
    let miss = unrouted[0];
    assert!(miss.contains("function=\"Route\""), "{miss}");
    assert!(miss.contains("drop=true"), "{miss}");
    assert!(miss.contains("conn=-1"), "{miss}");
    assert!(miss.contains("counters=forward.missed"), "{miss}");
    // Nothing at debug.
    assert_eq!(
        trace_pipeline(tracing::Level::DEBUG, &frames, known),
        "",
        "the model logs only at trace"
    );
}
