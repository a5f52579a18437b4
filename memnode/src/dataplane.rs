//! The data plane: one OS thread serving soft RoCE on the node's UDP socket.
//!
//! The loop waits (briefly, so a shutdown is noticed) for the socket to become readable,
//! receives a batch of datagrams, hands each to the responder of its destination QPN,
//! then sends every response the batch produced with batched system calls. Every
//! datagram is counted exactly once: dropped by reason, or accepted by a responder.
//! On the [packet receive path](crate::receive_path::ReceivePath::Packet) requests are
//! read as whole frames from a packet socket instead, and each ICRC is checked against
//! the IPv4 header the request really carried.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use verbs::mem::MemoryTable;
use verbs::net::{BATCH, BatchSocket, PacketSocket};
use verbs::rc::{MAX_PACKET, ResponderStats};
use verbs::wire::{BTH_LEN, EthernetFrame, IPV4_DF, Opcode};

use crate::metrics::{AcceptOutcome, DropKind, Metrics, NakKind, Verb};
use crate::qps::{QpEntry, QpTable};
use crate::rpc::{ReadyQps, RpcStats};

/// How long the loop blocks waiting for datagrams before checking for shutdown.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// How long the loop busy-polls for the next datagram before sleeping in the kernel:
/// a client usually answers a batch of responses with its next requests within a few
/// microseconds, and catching them without a sleep/wake-up pair halves the round trip.
pub const BUSY_POLL: Duration = Duration::from_micros(50);

/// How often the reply requesters' retransmission timers are looked at.
const RPC_TIMER_PERIOD: Duration = Duration::from_millis(1);

/// Receive batches handled before the loop checks for shutdown again.
const BATCHES_PER_WAKEUP: usize = 16;
/// A receive batch of at least this many requests is answered in two sends: what its
/// first half answered leaves before the second half is worked on, so that clients work
/// on those responses meanwhile (verbs-bench, 64-byte READs, 16 in flight: 1.1-1.3x with
/// one and with two client threads, in paired runs; sending after every 8 requests gained
/// more with one thread but lost with two). Smaller batches are answered in one send.
const SPLIT_ANSWER_MIN: usize = 16;

/// Receive buffer size: the largest UDP payload, so the kernel never truncates.
const RX_BUF: usize = 65_536;

/// One receive batch in this many gets an info-level `memnode.batch` span (exported
/// over OTLP at the default level); every other batch's span is debug-level, so the
/// default cost per batch is one level check.
pub const BATCH_SPAN_SAMPLE: u64 = 1024;

/// What the data plane thread shares with the rest of the node.
#[derive(Debug, Clone)]
pub struct DataPlaneShared {
    /// The queue pairs.
    pub qps: Arc<QpTable>,
    /// The registered memory.
    pub memory: Arc<MemoryTable>,
    /// The counters.
    pub metrics: Arc<Metrics>,
    /// Where queue pairs with RPC requests waiting are reported, when the node runs
    /// RPC workers.
    pub rpc: Option<RpcLink>,
}

/// The data plane's side of the RPC workers: it reports queue pairs whose receive
/// queues hold requests, hands acknowledgements of replies to their requesters and
/// runs the reply retransmission timers.
#[derive(Debug, Clone)]
pub struct RpcLink {
    /// Queue pairs with requests waiting.
    pub ready: Arc<ReadyQps>,
    /// The RPC counters.
    pub stats: Arc<RpcStats>,
}

/// The running data plane thread.
#[derive(Debug)]
pub struct DataPlane {
    stop: Arc<AtomicBool>,
    running: Arc<AtomicBool>,
    panics: Arc<AtomicU64>,
    local: SocketAddrV4,
    thread: Option<JoinHandle<()>>,
}

/// Sets `running` to false when the thread ends, however it ends.
struct RunningGuard(Arc<AtomicBool>);

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl DataPlane {
    /// Starts serving `socket` on a new thread, reading requests from `socket` itself
    /// or, when given, from `packets` (whole frames; `socket` then only sends).
    pub fn spawn(
        socket: Arc<BatchSocket>,
        packets: Option<PacketSocket>,
        shared: DataPlaneShared,
    ) -> std::io::Result<DataPlane> {
        let stop = Arc::new(AtomicBool::new(false));
        let running = Arc::new(AtomicBool::new(true));
        let panics = Arc::new(AtomicU64::new(0));
        let local = socket.local_addr();
        let thread = {
            let stop = stop.clone();
            let guard = RunningGuard(running.clone());
            let panics = panics.clone();
            std::thread::Builder::new()
                .name("memnode-dataplane".into())
                .spawn(move || {
                    let _guard = guard;
                    Loop::new(socket, packets, shared, panics).run(&stop);
                })?
        };
        Ok(DataPlane {
            stop,
            running,
            panics,
            local,
            thread: Some(thread),
        })
    }

    /// The bound UDP address.
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.local
    }

    /// Whether the thread is still serving.
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::SeqCst)
    }

    /// A handle reporting whether the thread is still serving.
    pub fn running_flag(&self) -> Arc<AtomicBool> {
        self.running.clone()
    }

    /// Datagrams whose handling panicked (a bug in the responder; the datagram was
    /// counted as malformed and the node kept serving).
    pub fn panic_count(&self) -> Arc<AtomicU64> {
        self.panics.clone()
    }

    /// Stops the thread and waits for it.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("the data plane thread panicked");
        }
    }
}

impl Drop for DataPlane {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// One received request: where its RoCE bytes sit in its receive buffer, who sent it,
/// and the IPv4 identification and flags its ICRC covers.
#[derive(Debug, Clone, Copy)]
struct Received {
    start: usize,
    len: usize,
    from: SocketAddrV4,
    ip_id: u16,
    ip_flags: u16,
}

struct Loop {
    socket: Arc<BatchSocket>,
    packets: Option<PacketSocket>,
    shared: DataPlaneShared,
    panics: Arc<AtomicU64>,
    rx_bufs: Vec<Vec<u8>>,
    udp_meta: Vec<(usize, SocketAddrV4)>,
    rx_meta: Vec<Received>,
    outbox: Outbox,
    touched: Vec<u32>,
    batches: u64,
    /// When the reply timers last ran.
    rpc_timers_at: Instant,
}

impl Loop {
    fn new(
        socket: Arc<BatchSocket>,
        packets: Option<PacketSocket>,
        shared: DataPlaneShared,
        panics: Arc<AtomicU64>,
    ) -> Loop {
        Loop {
            socket,
            packets,
            shared,
            panics,
            rx_bufs: (0..BATCH).map(|_| vec![0u8; RX_BUF]).collect(),
            udp_meta: Vec::with_capacity(BATCH),
            rx_meta: Vec::with_capacity(BATCH),
            outbox: Outbox {
                bufs: (0..BATCH).map(|_| vec![0u8; MAX_PACKET]).collect(),
                lens: Vec::with_capacity(BATCH),
                marks: Vec::with_capacity(BATCH),
            },
            touched: Vec::new(),
            batches: 0,
            rpc_timers_at: Instant::now(),
        }
    }

    fn run(&mut self, stop: &AtomicBool) {
        tracing::debug!(addr = %self.socket.local_addr(), "data plane running");
        while !stop.load(Ordering::Relaxed) {
            self.run_rpc_timers();
            let readable = match &self.packets {
                Some(packets) => packets.wait_readable(Some(POLL_INTERVAL)),
                None => self
                    .socket
                    .wait_readable_spin(Some(POLL_INTERVAL), BUSY_POLL),
            };
            match readable {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "waiting on the soft-RoCE socket failed");
                    std::thread::sleep(POLL_INTERVAL);
                    continue;
                }
            }
            for _ in 0..BATCHES_PER_WAKEUP {
                let got = match self.receive_batch() {
                    Ok(n) => n,
                    Err(e) => {
                        tracing::warn!(error = %e, "receiving on the soft-RoCE socket failed");
                        0
                    }
                };
                if got == 0 {
                    break;
                }
                self.process_batch();
                if got < BATCH {
                    break;
                }
            }
        }
        tracing::debug!("data plane stopped");
    }

    /// Runs the RPC reply requesters' retransmission timers (at most once a
    /// millisecond) and sends what they, or workers that ran out of batch room, left
    /// to transmit.
    fn run_rpc_timers(&mut self) {
        let Some(link) = self.shared.rpc.as_ref() else {
            return;
        };
        let now = Instant::now();
        if now.saturating_duration_since(self.rpc_timers_at) < RPC_TIMER_PERIOD {
            return;
        }
        self.rpc_timers_at = now;
        let metrics = &*self.shared.metrics;
        let mut qps = self.shared.qps.lock();
        for entry in qps.values_mut() {
            let Some(rpc) = entry.rpc.as_mut() else {
                continue;
            };
            rpc.handle_timeout(now, &link.stats);
            if rpc.wants_transmit() {
                self.outbox.drain_rpc(&self.socket, entry, now, metrics);
            }
        }
        drop(qps);
        self.outbox.flush(&self.socket, metrics);
    }

    /// Receive up to a batch of requests into `rx_bufs`/`rx_meta`; returns how many
    /// the socket gave (frames that are not RoCE for this node included).
    fn receive_batch(&mut self) -> std::io::Result<usize> {
        self.rx_meta.clear();
        let Some(packets) = &self.packets else {
            let got = self
                .socket
                .recv_batch(&mut self.rx_bufs, &mut self.udp_meta)?;
            self.rx_meta
                .extend(self.udp_meta.iter().map(|&(len, from)| Received {
                    start: 0,
                    len,
                    from,
                    ip_id: 0,
                    ip_flags: IPV4_DF,
                }));
            return Ok(got);
        };
        let local = self.socket.local_addr();
        let metrics = &self.shared.metrics;
        let mut got = 0;
        while got < BATCH {
            let Some(buf) = self.rx_bufs.get_mut(self.rx_meta.len()) else {
                break;
            };
            let Some(n) = packets.recv(buf)? else {
                break;
            };
            got += 1;
            if n > buf.len() {
                metrics.on_received(n);
                metrics.on_dropped(DropKind::Truncated);
                continue;
            }
            let frame = match EthernetFrame::parse_port(&buf[..n], local.port()) {
                Ok(f) => f,
                Err(_) => {
                    metrics.on_received(n);
                    metrics.on_dropped(DropKind::Malformed);
                    continue;
                }
            };
            // A NIC takes only frames for its own address (the port matched in the kernel).
            if frame.dst.port() != local.port() || !for_us(*local.ip(), *frame.dst.ip()) {
                continue;
            }
            let start = frame.roce.as_ptr() as usize - buf.as_ptr() as usize;
            self.rx_meta.push(Received {
                start,
                len: frame.roce.len(),
                from: frame.src,
                ip_id: frame.ip_id(),
                ip_flags: u16::from_be_bytes([frame.ipv4_header[6], frame.ipv4_header[7]]),
            });
        }
        Ok(got)
    }

    fn process_batch(&mut self) {
        self.batches += 1;
        let datagrams = self.rx_meta.len();
        let span = if self.batches.is_multiple_of(BATCH_SPAN_SAMPLE) {
            tracing::info_span!(
                "memnode.batch",
                datagrams,
                sampled = BATCH_SPAN_SAMPLE,
                accepted = tracing::field::Empty,
                dropped = tracing::field::Empty,
                responses = tracing::field::Empty,
            )
        } else {
            tracing::debug_span!(
                "memnode.batch",
                datagrams,
                accepted = tracing::field::Empty,
                dropped = tracing::field::Empty,
                responses = tracing::field::Empty,
            )
        };
        let started = std::time::Instant::now();
        if span.is_disabled() {
            self.process_batch_inner();
            self.shared.metrics.on_batch(started.elapsed());
            return;
        }
        let before = self.shared.metrics.snapshot();
        span.in_scope(|| self.process_batch_inner());
        self.shared.metrics.on_batch(started.elapsed());
        let after = self.shared.metrics.snapshot();
        span.record("accepted", after.accepted_total() - before.accepted_total());
        span.record("dropped", after.dropped_total() - before.dropped_total());
        span.record("responses", after.sent - before.sent);
    }

    fn process_batch_inner(&mut self) {
        // Borrowed field by field (no `Arc` clones per batch): the table stays locked
        // while responses move to the outbox.
        let shared = &self.shared;
        let metrics = &*shared.metrics;
        let memory = &*shared.memory;
        let mut qps = shared.qps.lock();
        let batch_time = Instant::now();
        self.touched.clear();
        let per_packet = tracing::enabled!(tracing::Level::DEBUG);
        let split_at = if self.rx_meta.len() >= SPLIT_ANSWER_MIN {
            self.rx_meta.len() / 2
        } else {
            usize::MAX
        };
        for (i, r) in self.rx_meta.iter().enumerate() {
            if i == split_at {
                // What the first half answered leaves now (see `SPLIT_ANSWER_MIN`).
                for qpn in &self.touched {
                    if let Some(entry) = qps.get_mut(qpn) {
                        self.outbox.drain(&self.socket, entry, metrics);
                    }
                }
                self.outbox.flush(&self.socket, metrics);
            }
            let (len, from) = (r.len, r.from);
            metrics.on_received(len);
            let Some(bytes) = self
                .rx_bufs
                .get(i)
                .and_then(|b| b.get(r.start..r.start.saturating_add(len)))
            else {
                metrics.on_dropped(DropKind::Truncated);
                continue;
            };
            if bytes.len() < BTH_LEN {
                metrics.on_dropped(DropKind::Truncated);
                continue;
            }
            let qpn = u32::from_be_bytes([0, bytes[5], bytes[6], bytes[7]]);
            let Some(entry) = qps.get_mut(&qpn) else {
                metrics.on_dropped(DropKind::UnknownQpn);
                if per_packet {
                    tracing::debug!(%from, qpn, len, "dropped: unknown QPN");
                }
                continue;
            };
            // A queue pair serves the address it was created for, as a NIC's RC QP
            // serves its one remote: anyone else who learns the QPN gets nothing.
            if from != entry.client_addr {
                entry.dropped += 1;
                metrics.on_dropped(DropKind::WrongSource);
                if per_packet {
                    tracing::debug!(%from, qpn, len, client = %entry.client_addr, "dropped: wrong source");
                }
                continue;
            }
            entry.last_request = batch_time;
            // Acknowledgements of RPC replies go to the reply requester.
            if let (Some(rpc), Some(link)) = (entry.rpc.as_mut(), shared.rpc.as_ref())
                && Opcode::from_u8(bytes[0]).is_some_and(|op| !op.is_request())
            {
                match rpc.handle_response(batch_time, bytes, &link.stats) {
                    Ok(()) => {
                        entry.accepted += 1;
                        metrics.on_accepted(AcceptOutcome::InSequence);
                    }
                    Err(_) => {
                        entry.dropped += 1;
                        metrics.on_dropped(DropKind::Malformed);
                    }
                }
                if rpc.wants_transmit() && !self.touched.contains(&qpn) {
                    self.touched.push(qpn);
                }
                continue;
            }
            entry.responder.set_now(Some(batch_time));
            let before = *entry.responder.stats();
            // A queue pair with a request ring reaches it (and only it) through the gate.
            let gate = match (shared.qps.rings(), entry.ring) {
                (Some(rings), Some(own)) => Some(rings.gate(Some(own), memory)),
                _ => None,
            };
            let target: &dyn verbs::mem::RemoteMemory = match &gate {
                Some(g) => g,
                None => memory,
            };
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                entry
                    .responder
                    .handle_datagram_sent_with(bytes, r.ip_id, r.ip_flags, target)
            }));
            match result {
                Ok(Ok(())) => {
                    entry.accepted += 1;
                    let after = *entry.responder.stats();
                    account(metrics, &before, &after, bytes[0]);
                    if per_packet {
                        tracing::debug!(
                            %from,
                            qpn,
                            opcode = bytes[0],
                            psn = u32::from_be_bytes([0, bytes[9], bytes[10], bytes[11]]),
                            len,
                            "accepted"
                        );
                    }
                }
                Ok(Err(reason)) => {
                    entry.dropped += 1;
                    metrics.on_dropped(DropKind::from_label(reason.label()));
                    if per_packet {
                        tracing::debug!(%from, qpn, len, reason = reason.label(), "dropped");
                    }
                }
                Err(_) => {
                    self.panics.fetch_add(1, Ordering::Relaxed);
                    entry.dropped += 1;
                    metrics.on_dropped(DropKind::Malformed);
                    tracing::error!(qpn, "handling a datagram panicked; it was dropped");
                }
            }
            if entry.responder.wants_transmit() && !self.touched.contains(&qpn) {
                self.touched.push(qpn);
            }
        }
        let touched = std::mem::take(&mut self.touched);
        for qpn in &touched {
            if let Some(entry) = qps.get_mut(qpn) {
                self.outbox.drain(&self.socket, entry, metrics);
                self.outbox
                    .drain_rpc(&self.socket, entry, batch_time, metrics);
                if let (Some(rpc), Some(link)) = (entry.rpc.as_ref(), shared.rpc.as_ref())
                    && rpc.recv().ready() > 0
                {
                    link.ready.push(*qpn);
                }
            }
        }
        self.touched = touched;
        self.outbox.flush(&self.socket, metrics);
    }
}

/// Responses waiting to be sent in one batch: their buffers and (length, destination).
struct Outbox {
    bufs: Vec<Vec<u8>>,
    lens: Vec<(usize, SocketAddrV4)>,
    /// Whether each response may be segmented with its neighbours (its queue pair's
    /// [`QpEntry::segment`]).
    marks: Vec<bool>,
}

impl Outbox {
    /// Moves every pending response of `entry` into the send batch (flushing when full).
    fn drain(&mut self, socket: &BatchSocket, entry: &mut QpEntry, metrics: &Metrics) {
        let to = entry.response_addr;
        loop {
            if self.lens.len() >= self.bufs.len() {
                self.flush(socket, metrics);
            }
            let Some(buf) = self.bufs.get_mut(self.lens.len()) else {
                return;
            };
            match entry.responder.poll_transmit(buf) {
                Some(n) => {
                    self.lens.push((n, to));
                    self.marks.push(entry.segment);
                }
                None => return,
            }
        }
    }

    /// Moves every pending RPC reply packet of `entry` into the send batch.
    fn drain_rpc(
        &mut self,
        socket: &BatchSocket,
        entry: &mut QpEntry,
        now: Instant,
        metrics: &Metrics,
    ) {
        let to = entry.response_addr;
        let Some(rpc) = entry.rpc.as_mut() else {
            return;
        };
        loop {
            if self.lens.len() >= self.bufs.len() {
                self.flush(socket, metrics);
            }
            let Some(buf) = self.bufs.get_mut(self.lens.len()) else {
                return;
            };
            match rpc.poll_transmit(now, buf) {
                Some(n) => {
                    self.lens.push((n, to));
                    self.marks.push(entry.segment);
                }
                None => return,
            }
        }
    }

    /// Sends the batch.
    fn flush(&mut self, socket: &BatchSocket, metrics: &Metrics) {
        if self.lens.is_empty() {
            return;
        }
        // The batch's (bytes, destination) list lives on the stack: no allocation per
        // flush.
        let unused = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
        let datagrams: [(&[u8], SocketAddrV4); BATCH] =
            std::array::from_fn(|i| match (self.lens.get(i), self.bufs.get(i)) {
                (Some(&(n, to)), Some(b)) => (b.get(..n).unwrap_or_default(), to),
                _ => (&[][..], unused),
            });
        let datagrams = &datagrams[..self.lens.len().min(BATCH)];
        let count = datagrams.len() as u64;
        let bytes: u64 = datagrams.iter().map(|(b, _)| b.len() as u64).sum();
        let segmented = socket.segmented_datagrams();
        match socket.send_batch_marked(datagrams, &self.marks) {
            Ok(_) => {
                metrics.on_sent(count, bytes);
                metrics.on_segmented(socket.segmented_datagrams() - segmented);
            }
            Err(e) => {
                metrics.on_send_error(count);
                tracing::warn!(error = %e, "sending responses failed");
            }
        }
        self.lens.clear();
        self.marks.clear();
    }
}

/// Whether a frame to `dst` is for a node listening on `listen` (any address when
/// it listens on all of them).
fn for_us(listen: Ipv4Addr, dst: Ipv4Addr) -> bool {
    listen.is_unspecified() || listen == dst
}

/// Adds what one accepted datagram did (the responder's counter deltas) to `metrics`.
fn account(metrics: &Metrics, before: &ResponderStats, after: &ResponderStats, opcode: u8) {
    let d = |f: fn(&ResponderStats) -> u64| f(after).saturating_sub(f(before));
    let outcome = if d(|s| s.packets_in_sequence) > 0 {
        AcceptOutcome::InSequence
    } else if d(|s| s.duplicates) > 0 {
        AcceptOutcome::Duplicate
    } else if d(|s| s.out_of_sequence_dropped) > 0 {
        AcceptOutcome::OutOfSequenceDropped
    } else if d(|s| s.naks_sequence) > 0 {
        AcceptOutcome::OutOfSequenceNak
    } else {
        AcceptOutcome::InSequence
    };
    metrics.on_accepted(outcome);
    metrics.on_message(Verb::Read, d(|s| s.reads));
    metrics.on_message(Verb::Write, d(|s| s.writes));
    let atomics = d(|s| s.atomics);
    if opcode == Opcode::CompareSwap.as_u8() {
        metrics.on_message(Verb::Cas, atomics);
    } else {
        metrics.on_message(Verb::Faa, atomics);
    }
    metrics.on_nak(NakKind::PsnSequence, d(|s| s.naks_sequence));
    metrics.on_nak(NakKind::RemoteAccess, d(|s| s.naks_access));
    metrics.on_nak(NakKind::InvalidRequest, d(|s| s.naks_invalid));
    metrics.on_duplicates(
        d(|s| s.duplicate_reads),
        d(|s| s.replayed_atomics),
        d(|s| s.duplicate_atomics_dropped),
    );
}
