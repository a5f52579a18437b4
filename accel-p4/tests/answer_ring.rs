//! Switch answers with several requests in flight on one queue pair, under loss: the
//! switch keeps the answers of a connection in a ring indexed by PSN
//! (`spec::ANSWER_RING`), so a lost answer whose request is retransmitted behind later
//! answers is answered again — from the ring for switch-owned atomics (the value the
//! first answer carried, never re-applied), from the tuple's state for latch requests.
//! Before, only the connection's last answer was remembered and such a queue pair ran
//! out of retries.
//!
//! `ANSWER_RING_DEPTH`, `ANSWER_RING_LOSS` (percent) and `ANSWER_RING_SEED` run one
//! extra configuration in `configured_pipelined_run`.

#[path = "support/switch_rig.rs"]
mod switch_rig;

use std::collections::BTreeSet;

use accel_p4::control::{ControlState, FaultSettings};
use accel_p4::model::{AtomicRange, FaultPolicy};
use accel_p4::spec;
use accel_p4::switch::{SoftSwitch, SwitchConfig, SwitchHandle};
use memnode::{Memnode, MemnodeConfig, MemnodeHandle};
use verbs::rc::RcConfig;
use verbs::transport::QpHandle;
use verbs::worker::Worker;
use verbs::wr::CompletionValue;
use verbs::wr::{RemoteAddr, WorkRequest};

const SW_RKEY: u32 = 0x5157_0002;
const SW_BASE: u64 = 0x1000;
const TUPLES_OFFSET: u64 = 64 * 1024;
const TUPLE: u64 = 256;

fn switch(mode: u32, drop: f64, seed: u64) -> SwitchHandle {
    let mut config = SwitchConfig::local();
    config.initial = ControlState {
        mode: mode | spec::mode::FAULTS,
        ..ControlState::default()
    };
    let sw = SoftSwitch::start(config).expect("switch starts");
    // Answers (and responses) are lost on the way back; requests arrive.
    sw.control()
        .set_faults(FaultSettings {
            seed,
            up: FaultPolicy::default(),
            down: FaultPolicy::from_probabilities(drop, drop / 2.0, drop / 2.0, 0.0),
        })
        .expect("faults");
    sw
}

fn connect(sw: &SwitchHandle, node: &MemnodeHandle) -> (Worker, QpHandle, u32, u64) {
    let config = RcConfig {
        max_retries: 12,
        ..RcConfig::default()
    };
    switch_rig::client_through_switch(&sw.admin_url(), &node.admin_url(), config)
}

fn values(done: &[verbs::wr::Completion]) -> Vec<u64> {
    done.iter()
        .map(|c| match &c.result {
            Ok(CompletionValue::Atomic(v)) => *v,
            other => panic!("a pipelined request failed: {other:?}"),
        })
        .collect()
}

/// `rounds` batches of `depth` FAAs (+1) on switch-owned words, one doorbell each, with
/// `drop` of the answers lost: every FAA completes, each is applied exactly once (the
/// values returned for a word are 0, 1, 2, … without gaps or repeats).
fn pipelined_switch_atomics(depth: usize, drop: f64, seed: u64, rounds: usize) {
    let node = Memnode::start(MemnodeConfig::local(1 << 20)).expect("memnode");
    let sw = switch(spec::mode::SWITCH_ATOMICS, drop, seed);
    sw.control()
        .set_atomic_range(
            SW_RKEY,
            AtomicRange {
                base_va: SW_BASE,
                slots: 4,
                first_slot: 0,
            },
        )
        .expect("range");
    let (worker, qp, _, _) = connect(&sw, &node);
    let q = worker.qp(qp);
    let words = 4u64;
    let mut seen: Vec<BTreeSet<u64>> = vec![BTreeSet::new(); words as usize];
    worker.block_on(async {
        for round in 0..rounds {
            let batch: Vec<WorkRequest> = (0..depth as u64)
                .map(|k| WorkRequest::faa(RemoteAddr::new(SW_RKEY, SW_BASE + 8 * (k % words)), 1))
                .collect();
            let done = q.execute(batch).await.expect("post");
            for (k, v) in values(&done).into_iter().enumerate() {
                assert!(
                    seen[k % words as usize].insert(v),
                    "round {round}: FAA {k} returned {v} twice"
                );
            }
        }
    });
    let c = sw.control().pipeline().counters();
    eprintln!(
        "depth {depth}, drop {drop}: {:?} {:?}",
        c.switch_atomics, c.faults
    );
    let p = sw.control().pipeline();
    let reg = p.register("atomic_word").expect("atomic_word");
    for (w, s) in seen.iter().enumerate() {
        let n = s.len() as u64;
        assert_eq!(reg.cp_read(w), n, "word {w}: each FAA applied once");
        assert_eq!(
            s.iter().copied().collect::<Vec<_>>(),
            (0..n).collect::<Vec<_>>()
        );
    }
    std::mem::drop(p);
    assert!(c.faults.dropped > 0, "no answer was lost: {c:?}");
    assert!(c.switch_atomics.replayed > 0, "{c:?}");
    sw.shutdown();
    node.shutdown();
}

/// `rounds` batches that latch `depth` tuples with one doorbell (latch requests and
/// version READs answered by the switch, pipelined), then WRITE them (the ACKs
/// unlatch), with `drop` of the answers lost: every latch is granted (one client), every
/// tuple is free at the end.
fn pipelined_latches(depth: usize, drop: f64, seed: u64, rounds: usize) {
    let node = Memnode::start(MemnodeConfig::local(1 << 20)).expect("memnode");
    let sw = switch(spec::mode::OPT_LATCH, drop, seed);
    switch_rig::latch_tuples(
        &sw,
        &node,
        TUPLES_OFFSET,
        TUPLE.trailing_zeros() as u8,
        depth as u32,
    );
    let (worker, qp, rkey, base) = connect(&sw, &node);
    let q = worker.qp(qp);
    let at = |t: usize| RemoteAddr::new(rkey, base + TUPLES_OFFSET + t as u64 * TUPLE);
    worker.block_on(async {
        for round in 0..rounds as u64 {
            let mut batch: Vec<WorkRequest> =
                (0..depth).map(|t| WorkRequest::cas(at(t), 0, 1)).collect();
            batch.push(WorkRequest::read(at(0), 8));
            let done = q.execute(batch).await.expect("post");
            for (t, c) in done.iter().enumerate().take(depth) {
                match &c.result {
                    Ok(CompletionValue::Atomic(v)) => {
                        assert_eq!(v & 1, 0, "round {round}: latch {t} refused ({v})");
                        assert_eq!(*v, 2 * round, "round {round}: tuple {t} version");
                    }
                    other => panic!("round {round}: latch {t} failed: {other:?}"),
                }
            }
            match &done[depth].result {
                Ok(CompletionValue::Read(v)) => {
                    let version = u64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8]));
                    assert_eq!(version, 2 * round + 1, "round {round}: version READ");
                }
                other => panic!("round {round}: version READ failed: {other:?}"),
            }
            let writes: Vec<WorkRequest> = (0..depth)
                .map(|t| WorkRequest::write(at(t), vec![round as u8; TUPLE as usize]))
                .collect();
            for c in q.execute(writes).await.expect("post") {
                assert!(c.result.is_ok(), "round {round}: WRITE failed: {c:?}");
            }
        }
    });
    let c = sw.control().pipeline().counters();
    eprintln!(
        "depth {depth}, drop {drop}: {:?} {:?}",
        c.opt_latch, c.faults
    );
    let p = sw.control().pipeline();
    let versions = p.register("tuple_version").expect("tuple_version");
    for t in 0..depth {
        assert_eq!(versions.cp_read(t), 2 * rounds as u64, "tuple {t}");
    }
    std::mem::drop(p);
    assert!(c.faults.dropped > 0, "no answer was lost: {c:?}");
    sw.shutdown();
    node.shutdown();
}

#[test]
fn pipelined_switch_atomics_survive_lost_answers() {
    pipelined_switch_atomics(8, 0.10, 5, 60);
    pipelined_switch_atomics(32, 0.05, 6, 20);
}

#[test]
fn pipelined_latch_requests_survive_lost_answers() {
    pipelined_latches(4, 0.10, 7, 30);
    pipelined_latches(16, 0.05, 8, 8);
    // 129 PSNs in flight per round (64 latch requests, a version READ, then 64 WRITEs
    // whose ACKs must each find their entry to unlatch).
    pipelined_latches(64, 0.05, 9, 4);
}

/// One configuration from the environment (see the module docs); a no-op without it.
#[test]
fn configured_pipelined_run() {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<f64>().ok());
    let Some(depth) = var("ANSWER_RING_DEPTH") else {
        return;
    };
    let drop = var("ANSWER_RING_LOSS").unwrap_or(5.0) / 100.0;
    let seed = var("ANSWER_RING_SEED").unwrap_or(3.0) as u64;
    pipelined_switch_atomics(depth as usize, drop, seed, 20);
    pipelined_latches(depth as usize, drop, seed, 8);
}
