//! Atomic replacement end to end: soft-RoCE clients on their own QPs contend for one
//! lock word through the soft switch; every CAS goes up as a WRITE on the multiplexed
//! QP. The lock protects a counter updated by READ + WRITE (not atomic): the final
//! count is exact only if the lock excluded. Clean, with seeded loss / duplication /
//! reordering, and across switch restarts.
//!
//! The lock is owner-tagged: acquire is CAS(0 → id), release CAS(id → 0). A request
//! executed before a switch restart whose answer was lost is executed again after it
//! (the new switch cannot know); an owner-tagged CAS tolerates that: an acquire that
//! finds its own id holds the lock, a release that does not find it had already
//! released.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use accel_p4::control::{ControlState, FaultSettings, LockEntry, MuxRequest};
use accel_p4::model::FaultPolicy;
use accel_p4::spec;
use accel_p4::switch::{SoftSwitch, SwitchConfig, SwitchHandle};
use memnode::{Memnode, MemnodeConfig, MemnodeHandle};
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::worker::{Worker, WorkerConfig};
use verbs::wr::RemoteAddr;

const LOCK_OFFSET: u64 = 0;
const COUNTER_OFFSET: u64 = 4096;

fn client(switch_admin: &str, node_admin: &str) -> (Worker, verbs::transport::QpHandle, u32, u64) {
    let config = RcConfig {
        max_retries: 60,
        ..RcConfig::default()
    };
    let mut t = UdpTransport::bind(Ipv4Addr::LOCALHOST, config).expect("bind");
    let conn = accel_p4::client::connect_udp_qp(switch_admin, node_admin, &mut t)
        .expect("connect through the switch");
    let region = conn.regions[0].clone();
    let worker = Worker::new(Box::new(t), WorkerConfig::default());
    (worker, conn.handle, region.rkey, region.base_va)
}

fn setup(sw: &SwitchHandle, node: &MemnodeHandle) {
    sw.control()
        .create_mux(&MuxRequest {
            memnode: node.admin_url(),
        })
        .expect("multiplexed QP");
    let info = memnode::client::node_info(&node.admin_url()).expect("node info");
    let region = &info.regions[0];
    sw.control()
        .track_lock(LockEntry {
            rkey: region.rkey,
            va: region.base_va + LOCK_OFFSET,
            mux: 0,
            slot: None,
        })
        .expect("track the lock word");
}

/// `threads` clients each take the lock `iters` times and bump the counter.
fn hammer(
    switch_admin: String,
    node_admin: String,
    threads: u64,
    iters: u64,
) -> Vec<std::thread::JoinHandle<Result<u64, String>>> {
    hammer_counting(switch_admin, node_admin, threads, iters, Arc::default())
}

/// [`hammer`], counting in `connected` the clients whose queue pair is set up.
fn hammer_counting(
    switch_admin: String,
    node_admin: String,
    threads: u64,
    iters: u64,
    connected: Arc<AtomicUsize>,
) -> Vec<std::thread::JoinHandle<Result<u64, String>>> {
    (0..threads)
        .map(|t| {
            let (sa, na) = (switch_admin.clone(), node_admin.clone());
            let connected = connected.clone();
            std::thread::spawn(move || {
                let (worker, qp, rkey, base) = client(&sa, &na);
                connected.fetch_add(1, Ordering::SeqCst);
                let q = worker.qp(qp);
                let lock = RemoteAddr::new(rkey, base + LOCK_OFFSET);
                let counter = RemoteAddr::new(rkey, base + COUNTER_OFFSET);
                let id = t + 1;
                worker.block_on(async {
                    let mut failed_cas = 0u64;
                    for i in 0..iters {
                        loop {
                            let before = q
                                .cas(lock, 0, id)
                                .await
                                .map_err(|e| format!("client {id} acquire {i}: {e}"))?;
                            if before == 0 || before == id {
                                break;
                            }
                            failed_cas += 1;
                            worker.sleep(Duration::from_micros(50)).await;
                        }
                        let v = q
                            .read(counter, 8)
                            .await
                            .map_err(|e| format!("client {id} read {i}: {e}"))?;
                        let n = u64::from_le_bytes(v.try_into().unwrap_or([0; 8]));
                        q.write(counter, (n + 1).to_le_bytes().to_vec())
                            .await
                            .map_err(|e| format!("client {id} write {i}: {e}"))?;
                        q.cas(lock, id, 0)
                            .await
                            .map_err(|e| format!("client {id} release {i}: {e}"))?;
                    }
                    Ok(failed_cas)
                })
            })
        })
        .collect()
}

fn counter(node: &MemnodeHandle) -> u64 {
    let mut buf = [0u8; 8];
    node.memory()
        .region
        .read(COUNTER_OFFSET, &mut buf)
        .expect("read the counter");
    u64::from_le_bytes(buf)
}

fn start(mode: u32) -> SwitchHandle {
    let mut config = SwitchConfig::local();
    config.initial = ControlState {
        mode,
        ..ControlState::default()
    };
    SoftSwitch::start(config).expect("switch starts")
}

#[test]
fn contended_lock_through_atomic_replacement() {
    let node = Memnode::start(MemnodeConfig::local(1 << 20)).expect("memnode");
    let sw = start(spec::mode::ATOMIC_REPLACE);
    setup(&sw, &node);
    let (threads, iters) = (4, 100);
    let failed: u64 = hammer(sw.admin_url(), node.admin_url(), threads, iters)
        .into_iter()
        .map(|h| h.join().expect("client thread").expect("client"))
        .sum();
    assert_eq!(counter(&node), threads * iters, "the lock excluded");
    let c = sw.control().pipeline().counters().atomic_replace;
    eprintln!("{c:?}, failed CAS {failed}");
    assert!(c.converted >= 2 * threads * iters, "{c:?}");
    assert_eq!(c.answered, c.converted + c.filled, "{c:?}");
    // The memnode saw WRITEs for the lock, never a CAS beyond the cache fill.
    let m = node.metrics();
    assert!(m.messages(memnode::metrics::Verb::Cas) <= c.filled, "{c:?}");
    sw.shutdown();
    node.shutdown();
}

#[test]
fn contended_lock_through_atomic_replacement_with_faults() {
    let node = Memnode::start(MemnodeConfig::local(1 << 20)).expect("memnode");
    let sw = start(spec::mode::ATOMIC_REPLACE | spec::mode::FAULTS);
    setup(&sw, &node);
    let policy = FaultPolicy::from_probabilities(0.05, 0.05, 0.05, 0.0);
    sw.control()
        .set_faults(FaultSettings {
            seed: 5,
            up: policy,
            down: policy,
        })
        .expect("faults");
    let (threads, iters) = (3, 60);
    for h in hammer(sw.admin_url(), node.admin_url(), threads, iters) {
        h.join().expect("client thread").expect("client");
    }
    assert_eq!(counter(&node), threads * iters, "the lock excluded");
    let c = sw.control().pipeline().counters();
    eprintln!("{:?} {:?}", c.atomic_replace, c.faults);
    assert!(c.faults.dropped > 0 && c.faults.duplicated > 0, "{c:?}");
    assert!(c.atomic_replace.converted > 0, "{c:?}");
    sw.shutdown();
    node.shutdown();
}

#[test]
fn contended_lock_across_switch_restarts() {
    let node = Memnode::start(MemnodeConfig::local(1 << 20)).expect("memnode");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = SwitchConfig::local();
    config.state_file = Some(dir.path().join("switch.json"));
    config.initial = ControlState {
        mode: spec::mode::ATOMIC_REPLACE,
        ..ControlState::default()
    };
    let sw = SoftSwitch::start(config.clone()).expect("switch starts");
    config.client_side = sw.client_side();
    config.memnode_side = sw.memnode_side();
    config.admin = sw.admin_addr();
    setup(&sw, &node);
    let (threads, iters) = (3, 150);
    let connected = Arc::new(AtomicUsize::new(0));
    let handles = hammer_counting(
        sw.admin_url(),
        node.admin_url(),
        threads,
        iters,
        connected.clone(),
    );
    // The restarts are meant for the lock traffic, not for queue-pair setup through the
    // admin API (a request cut off by a restart fails the client's connect).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while connected.load(Ordering::SeqCst) < threads as usize {
        assert!(
            std::time::Instant::now() < deadline,
            "clients did not connect"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let done = Arc::new(AtomicBool::new(false));
    let mut sw = Some(sw);
    let mut restarts = 0;
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(60));
        if handles.iter().all(|h| h.is_finished()) {
            break;
        }
        if let Some(old) = sw.take() {
            old.shutdown();
        }
        sw = Some(SoftSwitch::start(config.clone()).expect("switch restarts"));
        restarts += 1;
    }
    for h in handles {
        if let Err(e) = h.join().expect("client thread") {
            let counters = sw.as_ref().map(|s| s.control().pipeline().counters());
            panic!("correct through restarts: {e}; last switch's counters: {counters:?}");
        }
    }
    done.store(true, Ordering::Relaxed);
    assert!(
        restarts >= 1,
        "the clients finished before the first restart"
    );
    eprintln!("switch restarted {restarts} times");
    assert_eq!(counter(&node), threads * iters, "the lock excluded");
    let sw = sw.expect("a switch");
    assert_eq!(sw.control().state().muxes.len(), 1, "mux recreated");
    sw.shutdown();
    node.shutdown();
}

/// The lock word as a key for the linearizability checker: an acquire CAS(0 → id) is
/// `Insert(id)` (`Ok` when it found 0, `AlreadyExists` otherwise), a release CAS(id → 0)
/// is `Delete`, and a READ of the word on the client's own queue pair is `Get`
/// (0 = absent). The CASes go up as WRITEs on the multiplexed QP, the READs on the
/// clients' own QPs: the check says the word the memnode holds follows the order the
/// switch applied them in.
#[test]
fn lock_word_history_is_linearizable_under_faults() {
    use testbed::history::{History, Op, Outcome};
    use testbed::lincheck::{Config, check};

    let node = Memnode::start(MemnodeConfig::local(1 << 20)).expect("memnode");
    let sw = start(spec::mode::ATOMIC_REPLACE | spec::mode::FAULTS);
    setup(&sw, &node);
    let policy = FaultPolicy::from_probabilities(0.03, 0.03, 0.03, 0.0);
    sw.control()
        .set_faults(FaultSettings {
            seed: 17,
            up: policy,
            down: policy,
        })
        .expect("faults");
    let history = Arc::new(std::sync::Mutex::new(History::new()));
    let base = std::time::Instant::now();
    let (threads, iters) = (3u64, 40u64);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (sa, na) = (sw.admin_url(), node.admin_url());
            let history = history.clone();
            std::thread::spawn(move || {
                let (worker, qp, rkey, va) = client(&sa, &na);
                let q = worker.qp(qp);
                let lock = RemoteAddr::new(rkey, va + LOCK_OFFSET);
                let id = t + 1;
                let now = || base.elapsed().as_nanos() as u64;
                let key = b"lock".to_vec();
                worker.block_on(async {
                    let mut done = 0;
                    while done < iters {
                        let op = history.lock().unwrap().invoke(
                            id,
                            key.clone(),
                            Op::Insert(id.to_le_bytes().to_vec()),
                            now(),
                        );
                        let before = q.cas(lock, 0, id).await.expect("acquire");
                        let outcome = if before == 0 {
                            Outcome::Ok
                        } else {
                            Outcome::AlreadyExists
                        };
                        history.lock().unwrap().respond(op, now(), outcome).unwrap();
                        if before != 0 {
                            // Look at the word while someone else holds it.
                            let op =
                                history
                                    .lock()
                                    .unwrap()
                                    .invoke(id, key.clone(), Op::Get, now());
                            let v = q.read(lock, 8).await.expect("read");
                            let v = u64::from_le_bytes(v.try_into().unwrap_or([0; 8]));
                            let o = if v == 0 {
                                Outcome::NotFound
                            } else {
                                Outcome::Value(v.to_le_bytes().to_vec())
                            };
                            history.lock().unwrap().respond(op, now(), o).unwrap();
                            worker.sleep(Duration::from_micros(50)).await;
                            continue;
                        }
                        let op = history
                            .lock()
                            .unwrap()
                            .invoke(id, key.clone(), Op::Get, now());
                        let v = q.read(lock, 8).await.expect("read");
                        let v = u64::from_le_bytes(v.try_into().unwrap_or([0; 8]));
                        let o = if v == 0 {
                            Outcome::NotFound
                        } else {
                            Outcome::Value(v.to_le_bytes().to_vec())
                        };
                        history.lock().unwrap().respond(op, now(), o).unwrap();
                        let op = history
                            .lock()
                            .unwrap()
                            .invoke(id, key.clone(), Op::Delete, now());
                        let before = q.cas(lock, id, 0).await.expect("release");
                        let o = if before == id {
                            Outcome::Ok
                        } else {
                            Outcome::NotFound
                        };
                        history.lock().unwrap().respond(op, now(), o).unwrap();
                        done += 1;
                    }
                });
            })
        })
        .collect();
    for h in handles {
        h.join().expect("client thread");
    }
    let history = history.lock().unwrap().clone();
    let report = check(&history, &Config::default()).expect("well-formed history");
    let c = sw.control().pipeline().counters();
    eprintln!(
        "{} operations: {:?}; {:?} {:?}",
        history.len(),
        report.verdict,
        c.atomic_replace,
        c.faults
    );
    assert!(report.is_linearizable(), "{:?}", report.verdict);
    assert!(
        c.faults.dropped > 0 && c.atomic_replace.converted > 0,
        "{c:?}"
    );
    sw.shutdown();
    node.shutdown();
}
