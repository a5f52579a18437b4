//! The soft switch's observability: `/metrics` is strict Prometheus text whose packet,
//! steering and per-function counters move under load, and every switch decision is
//! named.

use std::net::Ipv4Addr;

use accel_p4::model::Counters;
use accel_p4::switch::{SoftSwitch, SwitchConfig, decision};
use memnode::{Memnode, MemnodeConfig, client as mclient};
use telemetry::prom::Exposition;
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
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
    let hit = |e: &Exposition| e.value("accel_p4_steering_total", "result", "hit").unwrap();
    // 200 requests and their responses went through a route.
    assert!(hit(&after) >= hit(&before) + 400.0, "{}", hit(&after));
    assert_eq!(
        after.value("accel_p4_steering_total", "result", "miss"),
        Some(0.0)
    );
    let rx = |e: &Exposition| e.scalar("accel_p4_datagrams_received_total").unwrap();
    assert!(rx(&after) >= rx(&before) + 400.0);
    let forwarded = after
        .get("accel_p4_packets_total")
        .find(|s| s.label("function") == Some("forward") && s.label("counter") == Some("forwarded"))
        .map(|s| s.value)
        .unwrap();
    assert_eq!(
        Some(forwarded),
        after.value("accel_p4_steering_total", "result", "hit")
    );
    assert_eq!(after.types["accel_p4_steering_total"], "counter");
    assert_eq!(after.scalar("accel_p4_routes"), Some(1.0));
    // The memnode behind it counted the same messages.
    let m = scrape(&node.admin_url());
    assert!(
        m.value("dmkv_memnode_messages_total", "verb", "read")
            .unwrap()
            >= 100.0
    );
    sw.shutdown();
    node.shutdown();
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
}
