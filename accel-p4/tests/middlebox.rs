//! The soft switch as a UDP middlebox between real soft-RoCE clients and a memnode:
//! the verbs conformance suite through it (clean and with seeded faults), a restart in
//! the middle of a run, switch-resident atomics end to end, and the admin API.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use accel_p4::control::{ControlState, FaultSettings};
use accel_p4::model::{AtomicRange, FaultPolicy};
use accel_p4::spec;
use accel_p4::switch::{SoftSwitch, SwitchConfig, SwitchHandle};
use memnode::api::RegionDescriptor;
use memnode::{Memnode, MemnodeConfig, MemnodeHandle, client as mclient};
use verbs::conformance::{self, SCRATCH_BYTES, Scratch};
use verbs::rc::RcConfig;
use verbs::transport::QpHandle;
use verbs::transport::udp::UdpTransport;
use verbs::worker::{Worker, WorkerConfig};
use verbs::wr::RemoteAddr;

fn memnode() -> MemnodeHandle {
    Memnode::start(MemnodeConfig::local(1 << 20)).expect("memnode starts")
}

fn switch(mode: u32) -> SwitchHandle {
    let mut config = SwitchConfig::local();
    config.initial = ControlState {
        mode,
        ..ControlState::default()
    };
    SoftSwitch::start(config).expect("switch starts")
}

fn connect(sw: &SwitchHandle, node: &MemnodeHandle) -> (Worker, QpHandle, RegionDescriptor) {
    connect_urls(&sw.admin_url(), &node.admin_url())
}

fn connect_urls(switch_admin: &str, node_admin: &str) -> (Worker, QpHandle, RegionDescriptor) {
    // Generous retries: the fault and restart tests lose packets on purpose, and CI
    // machines are loaded.
    let config = RcConfig {
        max_retries: 40,
        ..RcConfig::default()
    };
    let mut t = UdpTransport::bind(Ipv4Addr::LOCALHOST, config).expect("bind");
    let conn = accel_p4::client::connect_udp_qp(switch_admin, node_admin, &mut t)
        .expect("connect through the switch");
    let worker = Worker::new(Box::new(t), WorkerConfig::default());
    (worker, conn.handle, conn.regions[0].clone())
}

fn scratch(region: &RegionDescriptor) -> Scratch {
    Scratch {
        base: RemoteAddr::new(region.rkey, region.base_va + SCRATCH_BYTES),
        region_end: region.base_va + region.len,
    }
}

fn faults(p: f64, seed: u64) -> FaultSettings {
    let policy = FaultPolicy::from_probabilities(p, p, p, 0.0);
    FaultSettings {
        seed,
        up: policy,
        down: policy,
    }
}

#[test]
fn conformance_through_the_switch() {
    let node = memnode();
    let sw = switch(0);
    let (worker, qp, region) = connect(&sw, &node);
    // The memnode's responder was created with the switch's memnode-side address.
    let qps = mclient::list_qps(&node.admin_url()).expect("list QPs");
    assert_eq!(qps.len(), 1);
    assert_eq!(qps[0].client_addr, sw.memnode_side());
    let q = worker.qp(qp);
    let report = worker.block_on(async { conformance::run(&q, scratch(&region)).await });
    assert!(report.passed(), "{}", report.failures());
    let c = sw.control().pipeline().counters();
    assert!(c.forward.forwarded > 400, "{c:?}");
    assert_eq!(c.forward.bad_icrc, 0, "{c:?}");
    assert_eq!(c.forward.missed, 0, "{c:?}");
    assert_eq!(
        node.metrics().dropped_total(),
        0,
        "the memnode dropped packets"
    );
    sw.shutdown();
    node.shutdown();
}

#[test]
fn conformance_through_the_switch_with_ten_percent_faults() {
    let node = memnode();
    let sw = switch(spec::mode::FAULTS);
    sw.control().set_faults(faults(0.10, 7)).expect("faults");
    let (worker, qp, region) = connect(&sw, &node);
    let q = worker.qp(qp);
    let report = worker.block_on(async { conformance::run(&q, scratch(&region)).await });
    // Every check, including `errors`: a refused WRITE must stay refused even when its
    // NAK is dropped and copies of it are duplicated.
    assert!(report.passed(), "{}", report.failures());
    let c = sw.control().pipeline().counters();
    assert!(
        c.faults.dropped > 10 && c.faults.duplicated > 10 && c.faults.reordered > 10,
        "{c:?}"
    );
    let retransmits = worker.transport_stats();
    assert!(retransmits.packets_sent > 0);
    sw.shutdown();
    node.shutdown();
}

#[test]
fn restart_mid_run_keeps_correctness() {
    let node = memnode();
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("switch.json");
    let mut config = SwitchConfig::local();
    config.state_file = Some(state.clone());
    let sw = SoftSwitch::start(config.clone()).expect("switch starts");
    // Restart on the same addresses: the memnode's QPs name the memnode-side one.
    config.client_side = sw.client_side();
    config.memnode_side = sw.memnode_side();
    const N: u64 = 2000;
    let done = Arc::new(AtomicBool::new(false));
    let done2 = done.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (sw_admin, node_admin) = (sw.admin_url(), node.admin_url());
    let client = std::thread::spawn(move || {
        let (worker, qp, region) = connect_urls(&sw_admin, &node_admin);
        let word = RemoteAddr::new(region.rkey, region.base_va + 64);
        let cell = RemoteAddr::new(region.rkey, region.base_va + 4096);
        let _ = ready_tx.send(());
        let q = worker.qp(qp);
        let r = worker.block_on(async {
            for i in 0..N {
                let before = q.faa(word, 1).await.map_err(|e| format!("faa {i}: {e}"))?;
                if before != i {
                    return Err(format!("faa {i} returned {before}"));
                }
                let data = i.to_le_bytes().repeat(8);
                q.write(cell, data.clone())
                    .await
                    .map_err(|e| format!("write {i}: {e}"))?;
                let got = q
                    .read(cell, 64)
                    .await
                    .map_err(|e| format!("read {i}: {e}"))?;
                if got != data {
                    return Err(format!("read {i}: stale data"));
                }
            }
            Ok::<_, String>(())
        });
        done2.store(true, Ordering::Relaxed);
        r
    });
    ready_rx.recv().expect("client connected");
    let mut sw = Some(sw);
    let mut restarts = 0;
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(15));
        if done.load(Ordering::Relaxed) {
            break;
        }
        if let Some(old) = sw.take() {
            old.shutdown();
        }
        sw = Some(SoftSwitch::start(config.clone()).expect("switch restarts"));
        restarts += 1;
    }
    client
        .join()
        .expect("client thread")
        .expect("correct through restarts");
    assert!(
        restarts >= 1,
        "the client finished before the first restart"
    );
    eprintln!("switch restarted {restarts} times during the run");
    let sw = sw.expect("a switch");
    assert_eq!(sw.control().state().routes.len(), 1, "routes reloaded");
    let mut buf = [0u8; 8];
    node.memory()
        .region
        .read(64, &mut buf)
        .expect("read the word");
    assert_eq!(u64::from_le_bytes(buf), N);
    sw.shutdown();
    node.shutdown();
}

#[test]
fn switch_resident_atomics_end_to_end_with_faults() {
    let node = memnode();
    let sw = switch(spec::mode::SWITCH_ATOMICS | spec::mode::FAULTS);
    let sw_rkey = 0x5157_0001;
    sw.control()
        .set_atomic_range(
            sw_rkey,
            AtomicRange {
                base_va: 0x1000,
                slots: 8,
                first_slot: 0,
            },
        )
        .expect("range");
    sw.control().set_faults(faults(0.10, 11)).expect("faults");
    let (worker, qp, region) = connect(&sw, &node);
    let latch = RemoteAddr::new(sw_rkey, 0x1000);
    let counter = RemoteAddr::new(sw_rkey, 0x1008);
    let mem = RemoteAddr::new(region.rkey, region.base_va + 128);
    let q = worker.qp(qp);
    const N: u64 = 200;
    worker.block_on(async {
        for i in 0..N {
            // Latch, count, write memnode memory, unlatch: switch and memnode mixed on
            // one queue pair, so PSN offsets are exercised on every iteration.
            assert_eq!(q.cas(latch, 0, 1).await.expect("latch"), 0, "latch {i}");
            assert_eq!(q.faa(counter, 1).await.expect("faa"), i, "count {i}");
            q.write(mem, i.to_le_bytes().to_vec()).await.expect("write");
            assert_eq!(q.read(mem, 8).await.expect("read"), i.to_le_bytes());
            assert_eq!(q.cas(latch, 1, 0).await.expect("unlatch"), 1, "unlatch {i}");
        }
    });
    let c = sw.control().pipeline().counters();
    assert!(c.switch_atomics.answered >= 3 * N, "{c:?}");
    assert!(
        c.switch_atomics.replayed > 0,
        "no answer was ever lost? {c:?}"
    );
    assert!(c.switch_atomics.translated > 0, "{c:?}");
    let word = sw
        .control()
        .pipeline()
        .register("atomic_word")
        .expect("atomic_word")
        .cp_read(1);
    assert_eq!(word, N, "each FAA applied exactly once");
    // Only WRITEs and READs reached the memnode.
    let m = node.metrics();
    assert_eq!(m.messages(memnode::metrics::Verb::Cas), 0);
    assert_eq!(m.messages(memnode::metrics::Verb::Faa), 0);
    sw.shutdown();
    node.shutdown();
}

#[test]
fn admin_api_and_metrics() {
    let node = memnode();
    let sw = switch(0);
    let a = sw.admin_url();
    let (_worker, _qp, _region) = connect(&sw, &node);
    let get = |path: &str| {
        let r = mclient::request(&a, "GET", path, None).expect("GET");
        (r.status, String::from_utf8(r.body).expect("UTF-8"))
    };
    let put = |path: &str, body: &str| {
        let r = mclient::request(&a, "PUT", path, Some(body.as_bytes())).expect("PUT");
        (r.status, String::from_utf8(r.body).expect("UTF-8"))
    };
    assert_eq!(get("/healthz").0, 200);
    let (s, body) = put("/v1/mode", r#"{"functions":["switch_atomics","faults"]}"#);
    assert_eq!(s, 200, "{body}");
    assert!(get("/v1/mode").1.contains("\"mode\":40"));
    let (s, body) = put("/v1/mode", r#"{"functions":["write_steer","read_steer"]}"#);
    assert_eq!(s, 200, "{body}");
    let (s, body) = put(
        "/v1/steer",
        r#"{"keys":[7,8],"classes":[64,128],"quiet_ms":100}"#,
    );
    assert_eq!(s, 200, "{body}");
    let (s, body) = get("/v1/steer");
    assert_eq!(s, 200, "{body}");
    assert!(
        body.contains("\"keys\":[7,8]") && body.contains("\"steered\":0"),
        "{body}"
    );
    let (s, body) = put("/v1/steer", r#"{"keys":[7,7]}"#);
    assert_eq!(s, 422, "{body}");
    let (s, body) = put("/v1/steer", r#"{"classes":[8]}"#);
    assert_eq!(s, 422, "{body}");
    assert!(get("/v1/counters").1.contains("write_steer"));
    assert!(get("/metrics").1.contains("function=\"read_steer\""));
    let (s, body) = get("/v1/registers/steer_tail_va");
    assert_eq!(s, 200, "{body}");
    let (s, body) = put("/v1/mode", r#"{"functions":["switch_atomics","faults"]}"#);
    assert_eq!(s, 200, "{body}");
    let (s, body) = put("/v1/mode", r#"{"functions":["nonsense"]}"#);
    assert_eq!(s, 422, "{body}");
    let (s, body) = get("/v1/registers/conn_epsn");
    assert_eq!(s, 200, "{body}");
    assert!(body.contains("\"values\":[[0,"), "{body}");
    assert_eq!(get("/v1/registers/nope").0, 404);
    let (s, body) = put("/v1/registers/atomic_word/3", r#"{"value":12345}"#);
    assert_eq!(s, 200, "{body}");
    assert!(get("/v1/registers/atomic_word").1.contains("[3,12345]"));
    let (s, body) = get("/v1/tables");
    assert_eq!(s, 200);
    assert!(body.contains("route_up") && body.contains(&sw.memnode_side().to_string()));
    let (s, body) = get("/v1/routes");
    assert_eq!(s, 200);
    assert!(body.contains("\"conn\":0"), "{body}");
    let (s, body) = put(
        "/v1/atomics/range",
        r#"{"rkey":7,"base_va":4096,"slots":4,"first_slot":0}"#,
    );
    assert_eq!(s, 200, "{body}");
    let (s, _) = put(
        "/v1/atomics/range",
        r#"{"rkey":7,"base_va":4097,"slots":4}"#,
    );
    assert_eq!(s, 422);
    let (s, body) = get("/metrics");
    assert_eq!(s, 200);
    for needle in [
        "dmkv_switch_packets_total{function=\"forward\",counter=\"forwarded\"}",
        "dmkv_switch_packets_total{function=\"switch_atomics\",counter=\"answered\"}",
        "dmkv_switch_function_enabled{function=\"switch_atomics\"} 1",
        "dmkv_switch_routes 1",
        "dmkv_switch_register_access_violations_total 0",
    ] {
        assert!(body.contains(needle), "{needle} missing:\n{body}");
    }
    let r = mclient::request(&a, "DELETE", "/v1/routes/0", None).expect("DELETE");
    assert_eq!(r.status, 204);
    assert_eq!(
        mclient::request(&a, "DELETE", "/v1/routes/0", None)
            .expect("DELETE")
            .status,
        404
    );
    sw.shutdown();
    node.shutdown();
}
