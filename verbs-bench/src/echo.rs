//! The baseline: a raw UDP request/response echo with the same datagram sizes, threads,
//! outstanding depth, batching (`sendmmsg`/`recvmmsg`) and waiting policy (busy-poll,
//! then sleep) and segmentation offload (runs coalesced between the two loopback
//! sockets, as between a client and a memory node) as the soft-RoCE run, and no RDMA
//! protocol at all.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use verbs::net::{BATCH, BatchSocket};
use verbs::transport::udp::DEFAULT_BUSY_POLL;

use crate::send_count::SendCount;

/// The echo server waits for datagrams exactly as the memory node's data plane does.
const SERVER_BUSY_POLL: Duration = memnode::dataplane::BUSY_POLL;

/// An echo server thread: answers each datagram with a reply of the requested length.
///
/// Requests carry the reply length in bytes 8..12, so one server serves every cell.
pub struct EchoServer {
    addr: SocketAddrV4,
    stop: Arc<AtomicBool>,
    sends: Arc<ServerSends>,
    thread: Option<JoinHandle<()>>,
}

impl EchoServer {
    /// Start on 127.0.0.1 with an ephemeral port.
    pub fn start() -> std::io::Result<EchoServer> {
        let socket = BatchSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))?;
        let addr = socket.local_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let sends = Arc::new(ServerSends::default());
        let counts = sends.clone();
        let thread = std::thread::Builder::new()
            .name("echo-server".into())
            .spawn(move || serve(socket, &flag, &counts))?;
        Ok(EchoServer {
            addr,
            stop,
            sends,
            thread: Some(thread),
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddrV4 {
        self.addr
    }

    /// The replies it has sent so far and the calls that sent them.
    pub fn sends(&self) -> SendCount {
        SendCount {
            datagrams: self.sends.datagrams.load(Ordering::Relaxed),
            calls: self.sends.calls.load(Ordering::Relaxed),
        }
    }
}

/// The server thread's send counters.
#[derive(Default)]
struct ServerSends {
    datagrams: AtomicU64,
    calls: AtomicU64,
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(socket: BatchSocket, stop: &AtomicBool, sends: &ServerSends) {
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; 9000]).collect();
    let mut meta = Vec::with_capacity(BATCH);
    let mut replies: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; 9000]).collect();
    while !stop.load(Ordering::Relaxed) {
        if !matches!(
            socket.wait_readable_spin(Some(Duration::from_millis(20)), SERVER_BUSY_POLL),
            Ok(true)
        ) {
            continue;
        }
        while let Ok(n) = socket.recv_batch(&mut bufs, &mut meta) {
            if n == 0 {
                break;
            }
            let mut out = Vec::with_capacity(n);
            for (i, &(len, from)) in meta.iter().enumerate() {
                if len < 12 {
                    continue;
                }
                let want =
                    u32::from_le_bytes([bufs[i][8], bufs[i][9], bufs[i][10], bufs[i][11]]) as usize;
                let want = want.clamp(8, 9000);
                replies[i][..8].copy_from_slice(&bufs[i][..8]);
                out.push((i, want, from));
            }
            let datagrams: Vec<(&[u8], SocketAddrV4)> = out
                .iter()
                .map(|&(i, want, from)| (&replies[i][..want], from))
                .collect();
            // Echo clients coalesce as dmkv's do: the same offload as the memory node.
            let marks: Vec<bool> = datagrams
                .iter()
                .map(|&(_, to)| socket.may_segment_to(to))
                .collect();
            if let Ok(calls) = socket.send_batch_marked(&datagrams, &marks) {
                sends
                    .datagrams
                    .fetch_add(datagrams.len() as u64, Ordering::Relaxed);
                sends.calls.fetch_add(calls as u64, Ordering::Relaxed);
            }
            if n < BATCH {
                break;
            }
        }
    }
}

/// What one echo client thread measured.
pub struct EchoResult {
    /// Round trips completed.
    pub ops: u64,
    /// Latencies in nanoseconds.
    pub latencies: hdrhistogram::Histogram<u64>,
    /// Requests that never got an answer (lost datagrams).
    pub lost: u64,
    /// Wall time from the first request to the last answer.
    pub elapsed: Duration,
    /// Its requests and the calls that sent them.
    pub sends: SendCount,
}

/// Run one echo client thread: `depth` requests of `request_len` bytes outstanding,
/// each answered with `reply_len` bytes, until `duration` has passed.
pub fn client(
    server: SocketAddrV4,
    request_len: usize,
    reply_len: usize,
    depth: usize,
    duration: Duration,
) -> std::io::Result<EchoResult> {
    let socket = BatchSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))?;
    let mut latencies = crate::measure::histogram().map_err(std::io::Error::other)?;
    let request_len = request_len.max(12);
    let mut sent_at = vec![Instant::now(); depth];
    let mut outstanding = vec![false; depth];
    let mut template = vec![0u8; request_len];
    template[8..12].copy_from_slice(&(reply_len as u32).to_le_bytes());
    let mut reqs: Vec<Vec<u8>> = (0..depth).map(|_| template.clone()).collect();
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; 9000]).collect();
    let mut meta = Vec::with_capacity(BATCH);
    let mut ops = 0u64;
    let start = Instant::now();
    let end = start + duration;
    let mut to_send: Vec<usize> = (0..depth).collect();
    let mut last_answer = start;
    let mut sends = SendCount::default();
    loop {
        let now = Instant::now();
        if !to_send.is_empty() && now < end {
            for &slot in &to_send {
                reqs[slot][..8].copy_from_slice(&(slot as u64).to_le_bytes());
                sent_at[slot] = now;
                outstanding[slot] = true;
            }
            let datagrams: Vec<(&[u8], SocketAddrV4)> = to_send
                .iter()
                .map(|&slot| (reqs[slot].as_slice(), server))
                .collect();
            // The server coalesces as a memory node does: the same offload as dmkv's
            // requests get.
            let marks = vec![socket.may_segment_to(server); datagrams.len()];
            let calls = socket.send_batch_marked(&datagrams, &marks)?;
            sends = sends.plus(SendCount {
                datagrams: datagrams.len() as u64,
                calls: calls as u64,
            });
            to_send.clear();
        }
        if !outstanding.iter().any(|o| *o) {
            break;
        }
        if now > end + Duration::from_millis(200) {
            break;
        }
        let n = socket.recv_batch(&mut bufs, &mut meta)?;
        if n == 0 {
            socket.wait_readable_spin(Some(Duration::from_millis(5)), DEFAULT_BUSY_POLL)?;
            continue;
        }
        let now = Instant::now();
        last_answer = now;
        for (i, &(len, _)) in meta.iter().enumerate() {
            if len < 8 {
                continue;
            }
            let mut id = [0u8; 8];
            id.copy_from_slice(&bufs[i][..8]);
            let slot = u64::from_le_bytes(id) as usize;
            if slot < depth && outstanding[slot] {
                outstanding[slot] = false;
                let ns = now.duration_since(sent_at[slot]).as_nanos() as u64;
                let _ = latencies.record(ns.max(1));
                ops += 1;
                to_send.push(slot);
            }
        }
    }
    let lost = outstanding.iter().filter(|o| **o).count() as u64;
    Ok(EchoResult {
        ops,
        latencies,
        lost,
        elapsed: last_answer.duration_since(start),
        sends,
    })
}
