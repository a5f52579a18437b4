//! Switch experiments (Jasny et al., TODS 2025, Figs. 22 and 26; SwordBox Fig. 10): soft-RoCE clients,
//! one QP and one OS thread each, reach one memnode through the soft switch
//! (`accel-p4`) in every configuration, so each cell pays the same middlebox hop.
//!
//! * **Contended CAS** on one 64-bit word, as a CAS-increment counter (each thread
//!   reads the value it last saw and CASes it to +1; a failure returns the current
//!   value and is a retry): the word lives at the memnode (switch forwards), is
//!   switch-owned (switch-resident atomics, answered by the switch), or is a tracked
//!   lock word (atomic replacement: WRITEs on one multiplexed QP).
//! * **Optimistic latching** on a small hot set of tuples: switch-assisted (latch CAS
//!   answered by the switch, WRITE whose ACK unlatches; one stamped READ) against
//!   software CRC-64 (latch CAS at the memnode, WRITE of data+CRC and unlatch posted
//!   together; one READ checked by its CRC and latch word). Read-only and write-only.
//!
//! The memnode reads lines in random order (torn reads happen) and can model the NIC's
//! atomic lock table ([`Env::lock_hold`]), the bottleneck atomic replacement avoids.
//! Every cell reports operations per second, verbs per operation and retries per
//! operation; "round trips" count a switch answer as half.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use accel_p4::control::{ControlState, LockEntry, MuxRequest};
use accel_p4::functions::opt_latch::stamp_valid;
use accel_p4::model::{AtomicRange, LatchRegion};
use accel_p4::spec;
use accel_p4::switch::{SoftSwitch, SwitchConfig, SwitchHandle};
use memnode::{Memnode, MemnodeConfig, MemnodeHandle};
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::worker::{Qp, Worker, WorkerConfig};
use verbs::wr::{RemoteAddr, WorkRequest};

/// Where the contended word lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CasMode {
    /// At the memnode; the switch forwards.
    Memnode,
    /// Switch-owned (switch-resident atomics).
    SwitchResident,
    /// A tracked lock word (atomic replacement).
    Replace,
}

impl CasMode {
    /// Name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            CasMode::Memnode => "memnode",
            CasMode::SwitchResident => "switch-resident",
            CasMode::Replace => "atomic-replace",
        }
    }

    /// Every mode.
    pub const ALL: [CasMode; 3] = [CasMode::Memnode, CasMode::SwitchResident, CasMode::Replace];
}

/// Latching scheme for tuples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatchMode {
    /// Switch-assisted optimistic latching.
    Switch,
    /// Software CRC-64 with a memnode latch.
    Software,
}

impl LatchMode {
    /// Name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            LatchMode::Switch => "switch",
            LatchMode::Software => "software-crc",
        }
    }
}

/// What every cell's memnode models.
#[derive(Debug, Clone, Copy, Default)]
pub struct Env {
    /// The NIC atomic lock table: each atomic holds its slot this long (`None`: off).
    pub lock_hold: Option<Duration>,
}

/// One measured cell.
#[derive(Debug, Clone)]
pub struct Cell {
    /// Configuration name.
    pub mode: String,
    /// Workload (`cas`, `read`, `write`).
    pub workload: &'static str,
    /// Client threads (one QP each).
    pub threads: usize,
    /// Completed operations per second (successful increments, reads, writes).
    pub ops_per_sec: f64,
    /// Verbs posted per completed operation.
    pub verbs_per_op: f64,
    /// Round trips per operation (switch answers count half).
    pub rtt_per_op: f64,
    /// Failed attempts (CAS failures, refused latches, invalid reads) per operation.
    pub retries_per_op: f64,
}

const SWITCH_RKEY: u32 = 0x5157_0001;
const SWITCH_BASE: u64 = 0x1000;
const WORD_OFFSET: u64 = 0;
const TUPLES_OFFSET: u64 = 64 * 1024;

struct Rig {
    node: MemnodeHandle,
    sw: SwitchHandle,
    rkey: u32,
    base: u64,
}

impl Rig {
    fn start(mode: u32, env: &Env) -> Result<Rig, String> {
        let mut nc = MemnodeConfig::local(1 << 20);
        nc.lock_table_hold = env.lock_hold;
        nc.read_order = verbs::mem::ReadOrder::Random;
        let node = Memnode::start(nc).map_err(|e| e.to_string())?;
        let mut config = SwitchConfig::local();
        config.initial = ControlState {
            mode,
            ..ControlState::default()
        };
        let sw = SoftSwitch::start(config).map_err(|e| e.to_string())?;
        let info = memnode::client::node_info(&node.admin_url()).map_err(|e| e.to_string())?;
        let region = info.regions.first().ok_or("the memnode has no region")?;
        Ok(Rig {
            rkey: region.rkey,
            base: region.base_va,
            node,
            sw,
        })
    }

    fn stop(self) {
        self.sw.shutdown();
        self.node.shutdown();
    }
}

#[derive(Default, Clone, Copy)]
struct Tally {
    ops: u64,
    verbs: u64,
    halves: u64,
    retries: u64,
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, o: Tally) {
        self.ops += o.ops;
        self.verbs += o.verbs;
        self.halves += o.halves;
        self.retries += o.retries;
    }
}

/// Run `body` on `threads` client threads (each its own QP through the switch) for
/// `duration`; sum their tallies.
fn drive<F, Fut>(
    rig: &Rig,
    threads: usize,
    duration: Duration,
    body: F,
) -> Result<(Tally, f64), String>
where
    F: Fn(Qp, Worker, usize, Arc<AtomicBool>) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = Result<Tally, String>>,
{
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let go_rx = Arc::new(std::sync::Mutex::new(go_rx));
    let mut handles = Vec::new();
    for t in 0..threads {
        let (sa, na) = (rig.sw.admin_url(), rig.node.admin_url());
        let (stop, body, ready_tx, go_rx) =
            (stop.clone(), body.clone(), ready_tx.clone(), go_rx.clone());
        handles.push(std::thread::spawn(move || -> Result<Tally, String> {
            let config = RcConfig {
                max_retries: 60,
                ..RcConfig::default()
            };
            let mut tr =
                UdpTransport::bind(Ipv4Addr::LOCALHOST, config).map_err(|e| e.to_string())?;
            let conn =
                accel_p4::client::connect_udp_qp(&sa, &na, &mut tr).map_err(|e| e.to_string())?;
            let worker = Worker::new(Box::new(tr), WorkerConfig::default());
            let q = worker.qp(conn.handle);
            let _ = ready_tx.send(());
            // Wait for every thread to be connected.
            if let Ok(rx) = go_rx.lock() {
                let _ = rx.recv();
            }
            worker.block_on(body(q, worker.clone(), t, stop))
        }));
    }
    drop(ready_tx);
    for _ in 0..threads {
        ready_rx
            .recv()
            .map_err(|_| "a client thread failed to connect".to_string())?;
    }
    for _ in 0..threads {
        let _ = go_tx.send(());
    }
    let started = Instant::now();
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    let mut total = Tally::default();
    for h in handles {
        total += h
            .join()
            .map_err(|_| "a client thread panicked".to_string())??;
    }
    Ok((total, started.elapsed().as_secs_f64()))
}

fn cell(mode: &str, workload: &'static str, threads: usize, t: Tally, secs: f64) -> Cell {
    let ops = t.ops.max(1) as f64;
    Cell {
        mode: mode.to_string(),
        workload,
        threads,
        ops_per_sec: t.ops as f64 / secs.max(1e-9),
        verbs_per_op: t.verbs as f64 / ops,
        rtt_per_op: t.halves as f64 / 2.0 / ops,
        retries_per_op: t.retries as f64 / ops,
    }
}

/// Contended CAS-increment on one word for `duration` with `threads` clients.
pub fn cas_cell(
    mode: CasMode,
    threads: usize,
    duration: Duration,
    env: &Env,
) -> Result<Cell, String> {
    let bits = match mode {
        CasMode::Memnode => 0,
        CasMode::SwitchResident => spec::mode::SWITCH_ATOMICS,
        CasMode::Replace => spec::mode::ATOMIC_REPLACE,
    };
    let rig = Rig::start(bits, env)?;
    let word = match mode {
        CasMode::SwitchResident => {
            rig.sw
                .control()
                .set_atomic_range(
                    SWITCH_RKEY,
                    AtomicRange {
                        base_va: SWITCH_BASE,
                        slots: 8,
                        first_slot: 0,
                    },
                )
                .map_err(|e| e.to_string())?;
            RemoteAddr::new(SWITCH_RKEY, SWITCH_BASE)
        }
        _ => RemoteAddr::new(rig.rkey, rig.base + WORD_OFFSET),
    };
    if mode == CasMode::Replace {
        rig.sw
            .control()
            .create_mux(&MuxRequest {
                memnode: rig.node.admin_url(),
            })
            .map_err(|e| e.to_string())?;
        rig.sw
            .control()
            .track_lock(LockEntry {
                rkey: word.rkey,
                va: word.va,
                mux: 0,
                slot: None,
            })
            .map_err(|e| e.to_string())?;
    }
    // A switch answer is half a round trip; everything else a whole one.
    let halves = if mode == CasMode::SwitchResident {
        1
    } else {
        2
    };
    let (t, secs) = drive(&rig, threads, duration, move |q, _w, _t, stop| async move {
        let mut tally = Tally::default();
        let mut seen = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let before = q
                .cas(word, seen, seen.wrapping_add(1))
                .await
                .map_err(|e| format!("cas: {e}"))?;
            tally.verbs += 1;
            tally.halves += halves;
            if before == seen {
                tally.ops += 1;
                seen = seen.wrapping_add(1);
            } else {
                tally.retries += 1;
                seen = before;
            }
        }
        Ok(tally)
    })?;
    rig.stop();
    Ok(cell(mode.name(), "cas", threads, t, secs))
}

/// Optimistic latching on `tuples` hot tuples of `size` bytes: read-only (`write ==
/// false`) or write-only.
pub fn latch_cell(
    mode: LatchMode,
    write: bool,
    threads: usize,
    tuples: u32,
    size: u64,
    duration: Duration,
    env: &Env,
) -> Result<Cell, String> {
    let size = size.next_power_of_two().max(64);
    let bits = if mode == LatchMode::Switch {
        spec::mode::OPT_LATCH
    } else {
        0
    };
    let rig = Rig::start(bits, env)?;
    let base = rig.base + TUPLES_OFFSET;
    if mode == LatchMode::Switch {
        rig.sw
            .control()
            .set_latch_region(
                rig.rkey,
                LatchRegion {
                    base_va: base,
                    stride_log2: size.trailing_zeros() as u8,
                    tuples,
                    first_tuple: 0,
                },
                false,
            )
            .map_err(|e| e.to_string())?;
    } else {
        // Software tuples start consistent: latch 0, CRC of zeros.
        let mut tuple = vec![0u8; size as usize];
        let crc = crc_of(&tuple[16..]);
        tuple[8..16].copy_from_slice(&crc.to_le_bytes());
        for t in 0..u64::from(tuples) {
            rig.node
                .memory()
                .region
                .write(TUPLES_OFFSET + t * size, &tuple)
                .map_err(|e| e.to_string())?;
        }
    }
    let rkey = rig.rkey;
    let (t, secs) = drive(&rig, threads, duration, move |q, w, th, stop| async move {
        let mut tally = Tally::default();
        let mut i = th as u64;
        while !stop.load(Ordering::Relaxed) {
            let at = RemoteAddr::new(rkey, base + (i % u64::from(tuples)) * size);
            i = i.wrapping_add(7);
            let r = match (mode, write) {
                (LatchMode::Switch, false) => switch_read(&q, at, size, &mut tally).await,
                (LatchMode::Switch, true) => switch_write(&q, &w, at, size, i, &mut tally).await,
                (LatchMode::Software, false) => software_read(&q, at, size, &mut tally).await,
                (LatchMode::Software, true) => {
                    software_write(&q, &w, at, size, i, &mut tally).await
                }
            };
            r?;
            tally.ops += 1;
        }
        Ok(tally)
    })?;
    rig.stop();
    Ok(cell(
        mode.name(),
        if write { "write" } else { "read" },
        threads,
        t,
        secs,
    ))
}

fn crc_of(data: &[u8]) -> u64 {
    let mut d = crc64fast::Digest::new();
    d.write(data);
    d.sum64()
}

fn word(data: &[u8], k: usize) -> u64 {
    data.get(k * 8..k * 8 + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

async fn switch_read(q: &Qp, at: RemoteAddr, size: u64, t: &mut Tally) -> Result<(), String> {
    loop {
        let data = q
            .read(at, size as u32)
            .await
            .map_err(|e| format!("read: {e}"))?;
        t.verbs += 1;
        t.halves += 2;
        if stamp_valid(word(&data, 0)) {
            return Ok(());
        }
        t.retries += 1;
    }
}

async fn switch_write(
    q: &Qp,
    w: &Worker,
    at: RemoteAddr,
    size: u64,
    value: u64,
    t: &mut Tally,
) -> Result<(), String> {
    loop {
        let before = q.cas(at, 0, 1).await.map_err(|e| format!("latch: {e}"))?;
        t.verbs += 1;
        t.halves += 1;
        if before & 1 == 0 {
            break;
        }
        t.retries += 1;
        w.sleep(Duration::from_micros(20)).await;
    }
    let mut data = vec![0u8; 8];
    for _ in 1..size / 8 {
        data.extend_from_slice(&value.to_le_bytes());
    }
    q.write(at, data).await.map_err(|e| format!("write: {e}"))?;
    t.verbs += 1;
    t.halves += 2;
    Ok(())
}

async fn software_read(q: &Qp, at: RemoteAddr, size: u64, t: &mut Tally) -> Result<(), String> {
    loop {
        let data = q
            .read(at, size as u32)
            .await
            .map_err(|e| format!("read: {e}"))?;
        t.verbs += 1;
        t.halves += 2;
        if word(&data, 0) == 0 && word(&data, 1) == crc_of(&data[16..]) {
            return Ok(());
        }
        t.retries += 1;
    }
}

async fn software_write(
    q: &Qp,
    w: &Worker,
    at: RemoteAddr,
    size: u64,
    value: u64,
    t: &mut Tally,
) -> Result<(), String> {
    loop {
        let before = q.cas(at, 0, 1).await.map_err(|e| format!("latch: {e}"))?;
        t.verbs += 1;
        t.halves += 2;
        if before == 0 {
            break;
        }
        t.retries += 1;
        w.sleep(Duration::from_micros(20)).await;
    }
    let mut body = Vec::with_capacity(size as usize - 16);
    for _ in 2..size / 8 {
        body.extend_from_slice(&value.to_le_bytes());
    }
    let mut data = crc_of(&body).to_le_bytes().to_vec();
    data.extend_from_slice(&body);
    // Data + CRC, then the unlatch, in one batch (ordered on the QP): one round trip.
    let batch = vec![
        WorkRequest::Write {
            remote: RemoteAddr::new(at.rkey, at.va + 8),
            data,
            inline: false,
        },
        WorkRequest::Write {
            remote: at,
            data: 0u64.to_le_bytes().to_vec(),
            inline: false,
        },
    ];
    for c in q.execute(batch).await.map_err(|e| format!("write: {e}"))? {
        c.result.map_err(|e| format!("write: {e}"))?;
    }
    t.verbs += 2;
    t.halves += 2;
    Ok(())
}
