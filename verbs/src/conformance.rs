//! A conformance suite for transports: the same checks on `local`, `shm`, `udp` and `rdma`.
//!
//! Every transport must give the same verbs the same semantics. [`run`] exercises a
//! queue pair against a scratch area of a registered region and reports each check;
//! it is used by the test suites of every transport, and can be run against real
//! hardware the same way. [`run_two_sided`] does the same for SEND/RECV: a queue pair
//! whose responder side delivers into a [`RecvQueue`] the suite posts buffers to.

use std::cell::Cell;
use std::rc::Rc;

use std::time::{Duration, Instant};

use crate::recv::{RecvCompletion, RecvError, RecvQueue};
use crate::transport::TransportKind;
use crate::worker::{Qp, VerbError};
use crate::wr::{CompletionError, CompletionValue, RemoteAddr, WorkRequest};

/// Bytes of remote memory the suite needs, starting at the scratch address.
pub const SCRATCH_BYTES: u64 = 64 * 1024;

/// Where the suite may scribble, and where it must not reach.
#[derive(Debug, Clone, Copy)]
pub struct Scratch {
    /// Start of [`SCRATCH_BYTES`] of writable, readable, atomic-capable memory (64-byte aligned).
    pub base: RemoteAddr,
    /// The first address past the end of the registered region (for bounds checks).
    pub region_end: u64,
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    /// The check's name.
    pub name: &'static str,
    /// `Ok` or a description of what went wrong.
    pub outcome: Result<(), String>,
}

/// The outcome of the whole suite.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// One entry per check, in order.
    pub checks: Vec<CheckResult>,
}

impl Report {
    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.outcome.is_ok())
    }

    /// The failures, one per line.
    pub fn failures(&self) -> String {
        self.checks
            .iter()
            .filter_map(|c| c.outcome.as_ref().err().map(|e| format!("{}: {e}", c.name)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<(), String> {
    if cond { Ok(()) } else { Err(msg()) }
}

fn verb<T>(r: Result<T, VerbError>, what: &str) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

async fn write_read_sizes(qp: &Qp, s: Scratch) -> Result<(), String> {
    for (i, len) in [1usize, 8, 64, 256, 1000, 1024, 4096, 10_000]
        .into_iter()
        .enumerate()
    {
        let at = s.base.offset(1024 + (i as u64) * 256);
        let at = if len > 4096 {
            s.base.offset(32 * 1024)
        } else {
            at
        };
        let data = pattern(len, i as u8);
        verb(qp.write(at, data.clone()).await, "write")?;
        let back = verb(qp.read(at, len as u32).await, "read")?;
        ensure(back == data, || format!("{len}-byte read-back differs"))?;
    }
    Ok(())
}

async fn zero_length(qp: &Qp, s: Scratch) -> Result<(), String> {
    let back = verb(qp.read(s.base, 0).await, "zero-length read")?;
    ensure(back.is_empty(), || "zero-length read returned bytes".into())?;
    verb(qp.write(s.base, Vec::new()).await, "zero-length write")
}

async fn one_doorbell_batch(qp: &Qp, s: Scratch) -> Result<(), String> {
    let word = s.base.offset(64);
    verb(qp.write(word, 0u64.to_le_bytes().to_vec()).await, "reset")?;
    let mut batch = Vec::new();
    for i in 0..8u64 {
        batch.push(WorkRequest::write(
            s.base.offset(2048 + i * 64),
            pattern(64, i as u8),
        ));
        batch.push(WorkRequest::faa(word, 1));
        batch.push(WorkRequest::read(s.base.offset(2048 + i * 64), 64));
    }
    let done = qp.execute(batch).await.map_err(|e| format!("post: {e}"))?;
    ensure(done.len() == 24, || {
        format!("{} completions for 24", done.len())
    })?;
    for (i, c) in done.iter().enumerate() {
        let k = (i / 3) as u64;
        let ok = match i % 3 {
            0 => c.result == Ok(CompletionValue::Write),
            1 => c.result == Ok(CompletionValue::Atomic(k)),
            _ => c.result == Ok(CompletionValue::Read(pattern(64, k as u8))),
        };
        ensure(ok, || format!("completion {i} was {:?}", c.result))?;
    }
    Ok(())
}

async fn atomics(qp: &Qp, s: Scratch) -> Result<(), String> {
    let word = s.base.offset(128);
    verb(qp.write(word, 5u64.to_le_bytes().to_vec()).await, "init")?;
    let old = verb(qp.cas(word, 4, 9).await, "failing cas")?;
    ensure(old == 5, || format!("failing CAS returned {old}"))?;
    let old = verb(qp.cas(word, 5, 9).await, "cas")?;
    ensure(old == 5, || format!("CAS returned {old}"))?;
    let old = verb(qp.faa(word, u64::MAX).await, "faa")?;
    ensure(old == 9, || format!("FAA returned {old}"))?;
    let bytes = verb(qp.read(word, 8).await, "read")?;
    ensure(bytes == 8u64.to_le_bytes(), || {
        format!("word holds {bytes:?}, wanted 8 (little-endian)")
    })?;
    Ok(())
}

async fn errors(qp: &Qp, s: Scratch) -> Result<(), String> {
    let bad_rkey = RemoteAddr::new(s.base.rkey ^ 0x5A5A_5A5A, s.base.va);
    let e = qp.read(bad_rkey, 8).await;
    ensure(
        e == Err(VerbError::Completion(CompletionError::RemoteAccess)),
        || format!("bad rkey gave {e:?}"),
    )?;
    if qp.worker().transport_kind() == TransportKind::Rdma {
        // A hardware RC queue pair moves to the error state after a remote error; the
        // software transports keep it usable, which the rest of this check verifies.
        return Ok(());
    }
    let past = RemoteAddr::new(s.base.rkey, s.region_end - 4);
    let e = qp.read(past, 8).await;
    ensure(
        e == Err(VerbError::Completion(CompletionError::RemoteAccess)),
        || format!("out-of-bounds read gave {e:?}"),
    )?;
    let e = qp.write(past, vec![0xEE; 64]).await;
    ensure(
        e == Err(VerbError::Completion(CompletionError::RemoteAccess)),
        || format!("out-of-bounds write gave {e:?}"),
    )?;
    let e = qp.faa(s.base.offset(3), 1).await;
    ensure(
        e == Err(VerbError::Completion(CompletionError::RemoteInvalidRequest)),
        || format!("misaligned FAA gave {e:?}"),
    )?;
    // The queue pair keeps working after refused requests.
    verb(qp.write(s.base, vec![7; 8]).await, "write after errors")?;
    let back = verb(qp.read(s.base, 8).await, "read after errors")?;
    ensure(back == vec![7; 8], || "QP unusable after errors".into())
}

async fn many_tasks_fetch_add(qp: &Qp, s: Scratch) -> Result<(), String> {
    let word = s.base.offset(192);
    verb(qp.write(word, 0u64.to_le_bytes().to_vec()).await, "reset")?;
    let tasks = 8u64;
    let per = 50u64;
    let finished = Rc::new(Cell::new(0u64));
    let failed = Rc::new(Cell::new(false));
    for _ in 0..tasks {
        let q = qp.clone();
        let finished = finished.clone();
        let failed = failed.clone();
        qp.worker().spawn(async move {
            for _ in 0..per {
                if q.faa(word, 1).await.is_err() {
                    failed.set(true);
                }
            }
            finished.set(finished.get() + 1);
        });
    }
    while finished.get() < tasks {
        qp.worker()
            .sleep(std::time::Duration::from_micros(50))
            .await;
    }
    ensure(!failed.get(), || "an FAA failed".into())?;
    let total = verb(qp.faa(word, 0).await, "final read")?;
    ensure(total == tasks * per, || {
        format!("sum {total}, wanted {}", tasks * per)
    })
}

async fn lock_with_backoff(qp: &Qp, s: Scratch) -> Result<(), String> {
    let lock = s.base.offset(256);
    let counter = s.base.offset(320);
    verb(qp.write(lock, 0u64.to_le_bytes().to_vec()).await, "reset")?;
    verb(
        qp.write(counter, 0u64.to_le_bytes().to_vec()).await,
        "reset",
    )?;
    let tasks = 4u64;
    let per = 20u64;
    let finished = Rc::new(Cell::new(0u64));
    let failed = Rc::new(Cell::new(None::<String>));
    for t in 0..tasks {
        let q = qp.clone();
        let finished = finished.clone();
        let failed = failed.clone();
        qp.worker().spawn(async move {
            for _ in 0..per {
                let r: Result<(), String> = async {
                    verb(q.cas_with_backoff(lock, 0, t + 1).await, "lock")?;
                    // A non-atomic increment: only mutual exclusion keeps it exact.
                    let b = verb(q.read(counter, 8).await, "read")?;
                    let mut w = [0u8; 8];
                    w.copy_from_slice(&b);
                    let v = u64::from_le_bytes(w) + 1;
                    verb(q.write(counter, v.to_le_bytes().to_vec()).await, "write")?;
                    let prev = verb(q.cas(lock, t + 1, 0).await, "unlock")?;
                    ensure(prev == t + 1, || format!("lock held by {prev} at unlock"))
                }
                .await;
                if let Err(e) = r {
                    failed.set(Some(e));
                }
            }
            finished.set(finished.get() + 1);
        });
    }
    while finished.get() < tasks {
        qp.worker()
            .sleep(std::time::Duration::from_micros(50))
            .await;
    }
    if let Some(e) = failed.take() {
        return Err(e);
    }
    let b = verb(qp.read(counter, 8).await, "read")?;
    let mut w = [0u8; 8];
    w.copy_from_slice(&b);
    let v = u64::from_le_bytes(w);
    ensure(v == tasks * per, || {
        format!("counter {v}, wanted {}", tasks * per)
    })
}

async fn cas_update_counter(qp: &Qp, s: Scratch) -> Result<(), String> {
    let word = s.base.offset(384);
    verb(qp.write(word, 0u64.to_le_bytes().to_vec()).await, "reset")?;
    let tasks = 4u64;
    let per = 25u64;
    let finished = Rc::new(Cell::new(0u64));
    let failed = Rc::new(Cell::new(None::<String>));
    for _ in 0..tasks {
        let q = qp.clone();
        let finished = finished.clone();
        let failed = failed.clone();
        qp.worker().spawn(async move {
            for _ in 0..per {
                // Start from a deliberately stale guess: the helper must learn the value.
                match q.cas_update(word, 0, |v| Some(v + 1)).await {
                    Ok(Some(_)) => {}
                    Ok(None) => failed.set(Some("cas_update gave up".into())),
                    Err(e) => failed.set(Some(format!("cas_update: {e}"))),
                }
            }
            finished.set(finished.get() + 1);
        });
    }
    while finished.get() < tasks {
        qp.worker()
            .sleep(std::time::Duration::from_micros(50))
            .await;
    }
    if let Some(e) = failed.take() {
        return Err(e);
    }
    let stop = verb(qp.cas_update(word, 0, |_| None).await, "stop")?;
    ensure(stop.is_none(), || "an update returning None wrote".into())?;
    let total = verb(qp.faa(word, 0).await, "read")?;
    ensure(total == tasks * per, || {
        format!("counter {total}, wanted {}", tasks * per)
    })
}

/// Run every check on `qp` (from inside the worker's `block_on`).
pub async fn run(qp: &Qp, scratch: Scratch) -> Report {
    let mut report = Report::default();
    macro_rules! check {
        ($name:literal, $f:ident) => {
            report.checks.push(CheckResult {
                name: $name,
                outcome: $f(qp, scratch).await,
            });
        };
    }
    check!("write_read_sizes", write_read_sizes);
    check!("zero_length", zero_length);
    check!("one_doorbell_batch", one_doorbell_batch);
    check!("atomics", atomics);
    check!("many_tasks_fetch_add", many_tasks_fetch_add);
    check!("lock_with_backoff", lock_with_backoff);
    check!("cas_update_counter", cas_update_counter);
    // Last: on real NICs a refused request leaves the queue pair in the error state.
    check!("errors", errors);
    report
}

/// Checks of [`run_two_sided`].
pub const TWO_SIDED_CHECKS: usize = 5;

/// The next receive completion, polled from the worker without blocking its tasks.
async fn next_recv(qp: &Qp, recv: &RecvQueue, what: &str) -> Result<RecvCompletion, String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(c) = recv.poll() {
            return Ok(c);
        }
        if Instant::now() > deadline {
            return Err(format!("{what}: no receive completion within 20 s"));
        }
        qp.worker().sleep(Duration::from_micros(20)).await;
    }
}

fn expect_message(
    c: &RecvCompletion,
    wr_id: u64,
    data: &[u8],
    imm: Option<u32>,
) -> Result<(), String> {
    ensure(c.result.is_ok(), || {
        format!("buffer {wr_id} failed: {:?}", c.result)
    })?;
    ensure(c.wr_id == wr_id, || {
        format!("message landed in buffer {} instead of {wr_id}", c.wr_id)
    })?;
    ensure(c.byte_len as usize == data.len(), || {
        format!(
            "byte length {} for a {}-byte message",
            c.byte_len,
            data.len()
        )
    })?;
    ensure(c.data == data, || {
        format!("{}-byte message arrived altered", data.len())
    })?;
    ensure(c.imm == imm, || {
        format!("immediate {:?}, sent {imm:?}", c.imm)
    })
}

fn post(recv: &RecvQueue, wr_id: u64, len: usize) -> Result<(), String> {
    recv.post_recv(wr_id, vec![0; len])
        .map_err(|e| format!("post_recv: {e}"))
}

async fn send_sizes(qp: &Qp, recv: &RecvQueue) -> Result<(), String> {
    let mut qpn = None;
    for (i, len) in [0usize, 1, 8, 64, 1023, 1024, 1025, 4096, 10_000]
        .into_iter()
        .enumerate()
    {
        let wr_id = 100 + i as u64;
        post(recv, wr_id, 16 * 1024)?;
        let data = pattern(len, i as u8);
        let imm = (i % 2 == 1).then_some(0xC0DE_0000 | i as u32);
        match imm {
            Some(imm) => verb(qp.send_with_imm(data.clone(), imm).await, "send_with_imm")?,
            None => verb(qp.send(data.clone()).await, "send")?,
        }
        let c = next_recv(qp, recv, "send").await?;
        expect_message(&c, wr_id, &data, imm)?;
        // Every message names the same (receiving) queue pair.
        ensure(*qpn.get_or_insert(c.qpn) == c.qpn, || {
            format!("queue pair number changed to {:#x}", c.qpn)
        })?;
    }
    Ok(())
}

async fn buffers_in_posting_order(qp: &Qp, recv: &RecvQueue) -> Result<(), String> {
    for (i, len) in [64usize, 4096, 128].into_iter().enumerate() {
        post(recv, 200 + i as u64, len)?;
    }
    for i in 0..3u8 {
        verb(qp.send(pattern(60, i)).await, "send")?;
    }
    for i in 0..3u8 {
        let c = next_recv(qp, recv, "ordered send").await?;
        expect_message(&c, 200 + u64::from(i), &pattern(60, i), None)?;
    }
    Ok(())
}

async fn sends_in_one_doorbell_batch(qp: &Qp, recv: &RecvQueue, s: Scratch) -> Result<(), String> {
    for i in 0..6u64 {
        post(recv, 300 + i, 4096)?;
    }
    let mut batch = Vec::new();
    for i in 0..6u64 {
        let data = pattern(700 * i as usize + 1, i as u8);
        batch.push(WorkRequest::send_with_imm(data, i as u32));
        batch.push(WorkRequest::write(
            s.base.offset(4096 + i * 64),
            pattern(64, i as u8),
        ));
        batch.push(WorkRequest::read(s.base.offset(4096 + i * 64), 64));
    }
    let done = qp.execute(batch).await.map_err(|e| format!("post: {e}"))?;
    ensure(done.len() == 18, || {
        format!("{} completions for 18", done.len())
    })?;
    for (i, c) in done.iter().enumerate() {
        let k = (i / 3) as u8;
        let ok = match i % 3 {
            0 => c.result == Ok(CompletionValue::Send),
            1 => c.result == Ok(CompletionValue::Write),
            _ => c.result == Ok(CompletionValue::Read(pattern(64, k))),
        };
        ensure(ok, || format!("completion {i} was {:?}", c.result))?;
    }
    for i in 0..6u64 {
        let c = next_recv(qp, recv, "batched send").await?;
        let data = pattern(700 * i as usize + 1, i as u8);
        expect_message(&c, 300 + i, &data, Some(i as u32))?;
    }
    Ok(())
}

async fn rnr_until_a_buffer_is_posted(qp: &Qp, recv: &RecvQueue) -> Result<(), String> {
    ensure(recv.posted() == 0, || {
        format!("{} buffers left over", recv.posted())
    })?;
    let not_ready = recv.stats().not_ready;
    // The owner posts a buffer only 5 ms after the SEND starts.
    let later = recv.clone();
    let w = qp.worker().clone();
    qp.worker().spawn(async move {
        w.sleep(Duration::from_millis(5)).await;
        let _ = later.post_recv(400, vec![0; 3000]);
    });
    let data = pattern(2500, 9);
    verb(
        qp.send_with_imm(data.clone(), 0xFEED).await,
        "send without a buffer",
    )?;
    let c = next_recv(qp, recv, "send after RNR").await?;
    expect_message(&c, 400, &data, Some(0xFEED))?;
    if qp.worker().transport_kind() != TransportKind::Rdma {
        // (A NIC's receive queue does not report RNR events to software.)
        ensure(recv.stats().not_ready > not_ready, || {
            "the SEND never found the receive queue empty".into()
        })?;
    }
    Ok(())
}

async fn length_error(qp: &Qp, recv: &RecvQueue) -> Result<(), String> {
    post(recv, 500, 16)?;
    let e = qp.send(pattern(3000, 1)).await;
    ensure(
        e == Err(VerbError::Completion(CompletionError::RemoteInvalidRequest)),
        || format!("a SEND longer than the buffer gave {e:?}"),
    )?;
    let c = next_recv(qp, recv, "too-long send").await?;
    ensure(
        c.wr_id == 500 && c.result == Err(RecvError::LocalLength) && c.data.len() == 16,
        || format!("the short buffer completed as {c:?}"),
    )?;
    if qp.worker().transport_kind() == TransportKind::Rdma {
        // A hardware queue pair is in the error state now.
        return Ok(());
    }
    post(recv, 501, 64)?;
    verb(qp.send(pattern(64, 2)).await, "send after a length error")?;
    let c = next_recv(qp, recv, "send after a length error").await?;
    expect_message(&c, 501, &pattern(64, 2), None)
}

/// Run the SEND/RECV checks on `qp`, whose SENDs land in `recv` (from inside the
/// worker's `block_on`; `recv` must start with no buffer posted). `scratch` is used by
/// the one-sided verbs mixed into a batch.
pub async fn run_two_sided(qp: &Qp, recv: &RecvQueue, scratch: Scratch) -> Report {
    let mut report = Report::default();
    report.checks.push(CheckResult {
        name: "send_sizes",
        outcome: send_sizes(qp, recv).await,
    });
    report.checks.push(CheckResult {
        name: "buffers_in_posting_order",
        outcome: buffers_in_posting_order(qp, recv).await,
    });
    report.checks.push(CheckResult {
        name: "sends_in_one_doorbell_batch",
        outcome: sends_in_one_doorbell_batch(qp, recv, scratch).await,
    });
    report.checks.push(CheckResult {
        name: "rnr_until_a_buffer_is_posted",
        outcome: rnr_until_a_buffer_is_posted(qp, recv).await,
    });
    // Last: on real NICs a length error leaves the queue pair in the error state.
    report.checks.push(CheckResult {
        name: "length_error",
        outcome: length_error(qp, recv).await,
    });
    report
}
