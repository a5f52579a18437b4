//! Switch-assisted optimistic latching end to end (sync seed §5.5): writers latch a
//! tuple at the switch (half a round trip), WRITE it whole (the ACK unlatches), readers
//! READ it in one round trip and trust it only when the switch stamped it valid. The
//! memnode observes the lines of a READ in random order, so unprotected reads tear;
//! no read stamped valid may be torn. Clean and with seeded loss / duplication /
//! reordering.

#[path = "support/switch_rig.rs"]
mod switch_rig;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use accel_p4::control::{ControlState, FaultSettings};
use accel_p4::functions::opt_latch::stamp_valid;
use accel_p4::model::FaultPolicy;
use accel_p4::spec;
use accel_p4::switch::{SoftSwitch, SwitchConfig, SwitchHandle};
use memnode::{Memnode, MemnodeConfig, MemnodeHandle};
use verbs::mem::ReadOrder;
use verbs::rc::RcConfig;
use verbs::worker::Worker;
use verbs::wr::RemoteAddr;

const TUPLES_OFFSET: u64 = 64 * 1024;
const STRIDE_LOG2: u8 = 9;
const TUPLE: u64 = 1 << STRIDE_LOG2;
const TUPLES: u32 = 4;

fn client(sw: &str, node: &str) -> (Worker, verbs::transport::QpHandle, u32, u64) {
    let config = RcConfig {
        max_retries: 60,
        ..RcConfig::default()
    };
    switch_rig::client_through_switch(sw, node, config)
}

fn rig(faults: bool) -> (MemnodeHandle, SwitchHandle) {
    rig_with_lease(faults, accel_p4::latch_lease::DEFAULT_LATCH_LEASE)
}

fn rig_with_lease(faults: bool, lease: Duration) -> (MemnodeHandle, SwitchHandle) {
    let mut nc = MemnodeConfig::local(1 << 20);
    nc.read_order = ReadOrder::Random;
    let node = Memnode::start(nc).expect("memnode");
    let mut config = SwitchConfig::local();
    config.initial = ControlState {
        mode: spec::mode::OPT_LATCH | if faults { spec::mode::FAULTS } else { 0 },
        ..ControlState::default()
    };
    config.latch_lease = lease;
    let sw = SoftSwitch::start(config).expect("switch");
    switch_rig::latch_tuples(&sw, &node, TUPLES_OFFSET, STRIDE_LOG2, TUPLES);
    if faults {
        let p = FaultPolicy::from_probabilities(0.03, 0.03, 0.03, 0.0);
        sw.control()
            .set_faults(FaultSettings {
                seed: 9,
                up: p,
                down: p,
            })
            .expect("faults");
    }
    (node, sw)
}

fn run(faults: bool) {
    let (node, sw) = rig(faults);
    let stop = Arc::new(AtomicBool::new(false));
    let (valid, invalid, torn) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let writes_each = if faults { 60 } else { 150 };
    let mut writers = Vec::new();
    for w in 0..2u64 {
        let (sa, na) = (sw.admin_url(), node.admin_url());
        writers.push(std::thread::spawn(move || {
            let (worker, qp, rkey, base) = client(&sa, &na);
            let q = worker.qp(qp);
            worker.block_on(async {
                for i in 0..writes_each {
                    let t = (i + w) % u64::from(TUPLES);
                    let at = RemoteAddr::new(rkey, base + TUPLES_OFFSET + t * TUPLE);
                    loop {
                        let before = q.cas(at, 0, 1).await.expect("latch");
                        if before & 1 == 0 {
                            break;
                        }
                        worker.sleep(Duration::from_micros(30)).await;
                    }
                    let stamp = (w << 32) | i;
                    let mut data = 0u64.to_le_bytes().to_vec();
                    for _ in 1..TUPLE / 8 {
                        data.extend_from_slice(&stamp.to_le_bytes());
                    }
                    // The ACK of this WRITE releases the latch.
                    q.write(at, data).await.expect("write");
                }
            });
        }));
    }
    let mut readers = Vec::new();
    for r in 0..2u64 {
        let (sa, na) = (sw.admin_url(), node.admin_url());
        let (stop, valid, invalid, torn) =
            (stop.clone(), valid.clone(), invalid.clone(), torn.clone());
        readers.push(std::thread::spawn(move || {
            let (worker, qp, rkey, base) = client(&sa, &na);
            let q = worker.qp(qp);
            worker.block_on(async {
                let mut i = r;
                while !stop.load(Ordering::Relaxed) {
                    let t = i % u64::from(TUPLES);
                    i += 1;
                    let at = RemoteAddr::new(rkey, base + TUPLES_OFFSET + t * TUPLE);
                    let data = q.read(at, TUPLE as u32).await.expect("read");
                    let word = |k: usize| {
                        u64::from_le_bytes(data[k * 8..k * 8 + 8].try_into().unwrap_or([0; 8]))
                    };
                    if !stamp_valid(word(0)) {
                        invalid.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    valid.fetch_add(1, Ordering::Relaxed);
                    if (2..TUPLE as usize / 8).any(|k| word(k) != word(1)) {
                        torn.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }));
    }
    for w in writers {
        w.join().expect("writer");
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader");
    }
    let c = sw.control().pipeline().counters();
    eprintln!(
        "valid {} invalid {} torn {} {:?} {:?}",
        valid.load(Ordering::Relaxed),
        invalid.load(Ordering::Relaxed),
        torn.load(Ordering::Relaxed),
        c.opt_latch,
        c.faults
    );
    assert_eq!(
        torn.load(Ordering::Relaxed),
        0,
        "a read stamped valid was torn"
    );
    assert!(valid.load(Ordering::Relaxed) > 0);
    // Retransmitted latch requests are answered again (and counted again).
    assert!(c.opt_latch.latched >= 2 * writes_each, "{c:?}");
    assert_eq!(c.opt_latch.unlatched, 2 * writes_each, "{c:?}");
    assert_eq!(
        c.opt_latch.broken, 0,
        "a live holder's latch was broken: {c:?}"
    );
    // Every tuple is free again.
    let p = sw.control().pipeline();
    let versions = p.register("tuple_version").expect("tuple_version");
    for t in 0..TUPLES as usize {
        assert_eq!(versions.cp_read(t) & 1, 0, "tuple {t} still latched");
    }
    drop(p);
    sw.shutdown();
    node.shutdown();
}

/// A client that dies holding a tuple latched does not leak the latch: the others are
/// refused until the lease has passed, then the control plane releases it and they latch,
/// write and unlatch as usual; a tuple latched by a live client is untouched.
#[test]
fn latch_of_a_dead_client_is_released_after_the_lease() {
    let lease = Duration::from_millis(1000);
    let (node, sw) = rig_with_lease(false, lease);
    let tuple = |base: u64, t: u64| base + TUPLES_OFFSET + t * TUPLE;
    {
        // The dying client latches tuple 0 and vanishes (its QP is never used again).
        let (worker, qp, rkey, base) = client(&sw.admin_url(), &node.admin_url());
        let q = worker.qp(qp);
        let before = worker
            .block_on(q.cas(RemoteAddr::new(rkey, tuple(base, 0)), 0, 1))
            .expect("latch");
        assert_eq!(before & 1, 0, "latched");
    }
    let (worker, qp, rkey, base) = client(&sw.admin_url(), &node.admin_url());
    let q = worker.qp(qp);
    let at = RemoteAddr::new(rkey, tuple(base, 0));
    let started = Instant::now();
    let granted_after = worker.block_on(async {
        loop {
            let before = q.cas(at, 0, 1).await.expect("latch");
            if before & 1 == 0 {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < lease * 20,
                "the dead client's latch was never released"
            );
            worker.sleep(Duration::from_millis(5)).await;
        }
    });
    assert!(
        granted_after >= lease / 2,
        "granted after {granted_after:?}, before the lease could pass"
    );
    assert!(
        granted_after < lease * 10,
        "granted only after {granted_after:?}"
    );
    // The new holder writes and its ACK unlatches, as usual.
    worker
        .block_on(q.write(at, vec![7u8; TUPLE as usize]))
        .expect("write");
    let c = sw.control().pipeline().counters();
    assert_eq!(c.opt_latch.broken, 1, "{c:?}");
    assert!(c.opt_latch.latch_refused > 0, "{c:?}");
    let p = sw.control().pipeline();
    let versions = p.register("tuple_version").expect("tuple_version");
    assert_eq!(versions.cp_read(0) & 1, 0, "tuple 0 free after the write");
    drop(p);
    // Latch tuple 1 and hold it for a tenth of the lease: never broken.
    let at1 = RemoteAddr::new(rkey, tuple(base, 1));
    assert_eq!(worker.block_on(q.cas(at1, 0, 1)).expect("latch") & 1, 0);
    std::thread::sleep(lease / 10);
    worker
        .block_on(q.write(at1, vec![9u8; TUPLE as usize]))
        .expect("write");
    assert_eq!(sw.control().pipeline().counters().opt_latch.broken, 1);
    sw.shutdown();
    node.shutdown();
}

#[test]
fn optimistic_latching_through_the_switch() {
    run(false);
}

#[test]
fn optimistic_latching_through_the_switch_with_faults() {
    run(true);
}

/// The switch restarts twice while writers and readers run: every tuple reads as latched
/// for the grace period after a restart (writes latched before it finish), then versions
/// restart at 0. Fillers keep the client QPs in step, so no connection breaks; no read
/// stamped valid is torn; every writer finishes.
#[test]
fn optimistic_latching_across_switch_restarts() {
    let mut nc = MemnodeConfig::local(1 << 20);
    nc.read_order = ReadOrder::Random;
    let node = Memnode::start(nc).expect("memnode");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = SwitchConfig::local();
    config.state_file = Some(dir.path().join("switch.json"));
    config.initial = ControlState {
        mode: spec::mode::OPT_LATCH,
        ..ControlState::default()
    };
    let sw = SoftSwitch::start(config.clone()).expect("switch");
    config.client_side = sw.client_side();
    config.memnode_side = sw.memnode_side();
    config.admin = sw.admin_addr();
    switch_rig::latch_tuples(&sw, &node, TUPLES_OFFSET, STRIDE_LOG2, TUPLES);
    let stop = Arc::new(AtomicBool::new(false));
    let torn = Arc::new(AtomicU64::new(0));
    let valid = Arc::new(AtomicU64::new(0));
    // Writers keep writing until both restarts are behind them and each has written
    // again after the last one (however fast the machine is), then stop.
    let stop_writing = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for w in 0..2u64 {
        let (sa, na) = (sw.admin_url(), node.admin_url());
        let (stop_writing, written) = (stop_writing.clone(), written.clone());
        writers.push(std::thread::spawn(move || {
            let (worker, qp, rkey, base) = client(&sa, &na);
            let q = worker.qp(qp);
            worker.block_on(async {
                let mut i = 0u64;
                while !stop_writing.load(Ordering::Relaxed) {
                    i += 1;
                    let t = (i + w) % u64::from(TUPLES);
                    let at = RemoteAddr::new(rkey, base + TUPLES_OFFSET + t * TUPLE);
                    loop {
                        if q.cas(at, 0, 1).await.expect("latch") & 1 == 0 {
                            break;
                        }
                        worker.sleep(Duration::from_micros(200)).await;
                    }
                    let stamp = (w << 32) | i;
                    let mut data = 0u64.to_le_bytes().to_vec();
                    for _ in 1..TUPLE / 8 {
                        data.extend_from_slice(&stamp.to_le_bytes());
                    }
                    q.write(at, data).await.expect("write");
                    written.fetch_add(1, Ordering::Relaxed);
                }
            });
        }));
    }
    let mut readers = Vec::new();
    for r in 0..2u64 {
        let (sa, na) = (sw.admin_url(), node.admin_url());
        let (stop, valid, torn) = (stop.clone(), valid.clone(), torn.clone());
        readers.push(std::thread::spawn(move || {
            let (worker, qp, rkey, base) = client(&sa, &na);
            let q = worker.qp(qp);
            worker.block_on(async {
                let mut i = r;
                while !stop.load(Ordering::Relaxed) {
                    let at = RemoteAddr::new(
                        rkey,
                        base + TUPLES_OFFSET + (i % u64::from(TUPLES)) * TUPLE,
                    );
                    i += 1;
                    let data = q.read(at, TUPLE as u32).await.expect("read");
                    let word = |k: usize| {
                        u64::from_le_bytes(data[k * 8..k * 8 + 8].try_into().unwrap_or([0; 8]))
                    };
                    if stamp_valid(word(0)) {
                        valid.fetch_add(1, Ordering::Relaxed);
                        if (2..TUPLE as usize / 8).any(|k| word(k) != word(1)) {
                            torn.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    worker.sleep(Duration::from_micros(100)).await;
                }
            });
        }));
    }
    let mut sw = Some(sw);
    let mut restarts = 0;
    // Each restart comes once the writers have made progress since the last one, and
    // the writers must make progress again after the last restart.
    let progress = |since: u64| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while written.load(Ordering::Relaxed) < since + 20 {
            assert!(
                std::time::Instant::now() < deadline,
                "the writers made no progress ({} writes)",
                written.load(Ordering::Relaxed)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    for _ in 0..2 {
        progress(written.load(Ordering::Relaxed));
        std::thread::sleep(Duration::from_millis(50));
        if let Some(old) = sw.take() {
            old.shutdown();
        }
        sw = Some(SoftSwitch::start(config.clone()).expect("switch restarts"));
        restarts += 1;
    }
    progress(written.load(Ordering::Relaxed));
    stop_writing.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().expect("writer finishes through restarts");
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader");
    }
    eprintln!(
        "restarts {restarts}, valid reads {}, torn {}",
        valid.load(Ordering::Relaxed),
        torn.load(Ordering::Relaxed)
    );
    assert_eq!(
        restarts, 2,
        "both restarts happened while the writers wrote"
    );
    assert_eq!(
        torn.load(Ordering::Relaxed),
        0,
        "a read stamped valid was torn"
    );
    assert!(valid.load(Ordering::Relaxed) > 0);
    if let Some(sw) = sw {
        sw.shutdown();
    }
    node.shutdown();
}
