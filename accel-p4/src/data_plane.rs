//! The soft switch's data plane: one thread serving both switch ports.
//!
//! It sleeps in one `ppoll` over the two sockets (after busy-polling for a while, when
//! asked to), takes every datagram waiting on a port with `recvmmsg`, runs the batch
//! through the pipeline under one lock, and sends what the pipeline emitted with one
//! `sendmmsg` per egress port. Each datagram is wrapped in the Ethernet/IPv4/UDP frame
//! Linux put on the wire (source: the sender; destination: the receiving socket)
//! before the pipeline sees it; the frame buffer is reused from datagram to datagram.

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use verbs::net::{BATCH, BatchSocket, wait_readable_any};
use verbs::wire::{EthernetFrame, FrameRepr, IcrcPath};

use crate::control::Control;
use crate::delay_queue::DelayQueue;
use crate::io_stats::IoStats;
use crate::model::Emitted;
use crate::pipeline::Pipeline;
use crate::spec::{PORT_CLIENT, PORT_CPU, PORT_MEMNODE};
use crate::switch::{clock_us, decision};

/// MAC address the switch's frames carry for peers (the middlebox has no link layer).
const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// The switch's own MAC address in built frames.
const SWITCH_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xFE];
/// How long the thread sleeps waiting for datagrams (timers run at this grain).
const TICK: Duration = Duration::from_micros(500);
/// Held (reordered) frames are released after this much idle time.
const HOLD_MAX: Duration = Duration::from_millis(1);
/// Receive batches taken from one port before the other gets its turn.
const BATCHES_PER_TURN: usize = 4;
/// Receive buffer size: the largest UDP payload, so the kernel never truncates.
const RX_BUF: usize = 65_536;

/// The sockets, the pipeline and what the thread keeps between batches.
pub struct DataPlane {
    pipeline: Arc<Mutex<Pipeline>>,
    control: Arc<Control>,
    sockets: [BatchSocket; 2],
    addrs: [SocketAddrV4; 2],
    busy_poll: Duration,
    delayed: DelayQueue,
    last_packet: Instant,
    stats: Arc<IoStats>,
    stop: Arc<AtomicBool>,
    rx_bufs: Vec<Vec<u8>>,
    rx_meta: Vec<(usize, SocketAddrV4)>,
    frame: Vec<u8>,
    /// Frames to send now, by egress port.
    outgoing: [Vec<Emitted>; 2],
    /// Whether each datagram of a send may be segmented with its neighbours.
    marks: Vec<bool>,
}

/// What a data plane is made of.
pub struct DataPlaneParts {
    /// The pipeline it runs packets through.
    pub pipeline: Arc<Mutex<Pipeline>>,
    /// The control plane (copies it drives).
    pub control: Arc<Control>,
    /// The client-side and memnode-side sockets (ports 0 and 1).
    pub sockets: [BatchSocket; 2],
    /// How long to busy-poll before sleeping in the kernel.
    pub busy_poll: Duration,
    /// Where it counts datagrams and pipeline time.
    pub stats: Arc<IoStats>,
    /// Set to end the loop.
    pub stop: Arc<AtomicBool>,
}

impl DataPlane {
    /// A data plane over `parts`.
    pub fn new(parts: DataPlaneParts) -> DataPlane {
        let addrs = [parts.sockets[0].local_addr(), parts.sockets[1].local_addr()];
        DataPlane {
            pipeline: parts.pipeline,
            control: parts.control,
            sockets: parts.sockets,
            addrs,
            busy_poll: parts.busy_poll,
            delayed: DelayQueue::default(),
            last_packet: Instant::now(),
            stats: parts.stats,
            stop: parts.stop,
            rx_bufs: (0..BATCH).map(|_| vec![0u8; RX_BUF]).collect(),
            rx_meta: Vec::with_capacity(BATCH),
            frame: Vec::with_capacity(RX_BUF),
            outgoing: [Vec::new(), Vec::new()],
            marks: Vec::with_capacity(BATCH),
        }
    }

    /// Serve both ports until the stop flag is set.
    pub fn run(mut self) {
        while !self.stop.load(Ordering::Relaxed) {
            let [client, memnode] = &self.sockets;
            let ready = match wait_readable_any([client, memnode], Some(TICK), self.busy_poll) {
                Ok(r) => r,
                Err(error) => {
                    tracing::warn!(%error, "waiting on the switch sockets failed");
                    std::thread::sleep(TICK);
                    [false, false]
                }
            };
            for port in [PORT_CLIENT, PORT_MEMNODE] {
                if ready[usize::from(port)] {
                    self.serve_port(port);
                }
            }
            self.timers();
        }
    }

    /// Take what waits on `port`, a batch at a time, and send what it makes.
    fn serve_port(&mut self, port: u8) {
        for _ in 0..BATCHES_PER_TURN {
            let sock = &self.sockets[usize::from(port)];
            let got = match sock.recv_batch(&mut self.rx_bufs, &mut self.rx_meta) {
                Ok(n) => n,
                Err(error) => {
                    tracing::warn!(%error, port, "receiving on a switch socket failed");
                    0
                }
            };
            if got == 0 {
                return;
            }
            self.stats.received.fetch_add(got as u64, Ordering::Relaxed);
            self.last_packet = Instant::now();
            self.process_batch(port);
            if port == PORT_MEMNODE {
                // A copy's ACK opens its window: its next READs go now.
                let copies = self.control.drive_copies();
                self.queue(copies);
            }
            self.flush();
            if got < BATCH {
                return;
            }
        }
    }

    /// Run the received batch through the pipeline under one lock.
    fn process_batch(&mut self, port: u8) {
        let local = self.addrs[usize::from(port)];
        let mut pipeline = self.pipeline.lock().unwrap_or_else(|p| p.into_inner());
        pipeline.set_clock_us(clock_us());
        let traced = tracing::enabled!(tracing::Level::DEBUG);
        let now = Instant::now();
        let mut to_cpu = Vec::new();
        for (i, &(n, peer)) in self.rx_meta.iter().enumerate() {
            let Some(datagram) = self.rx_bufs.get(i).and_then(|b| b.get(..n)) else {
                continue;
            };
            let path = IcrcPath::new(peer, local);
            FrameRepr::new(PEER_MAC, SWITCH_MAC, 0x02, path).emit_into(datagram, &mut self.frame);
            let started = Instant::now();
            let outs = if traced {
                let span = tracing::debug_span!(
                    "switch.decision",
                    port,
                    %peer,
                    len = n,
                    decision = tracing::field::Empty,
                    emitted = tracing::field::Empty,
                );
                let _entered = span.enter();
                let before = pipeline.counters();
                let outs = pipeline.process(port, &self.frame);
                let decision = decision(&before, &pipeline.counters());
                span.record("decision", decision);
                span.record("emitted", outs.len());
                tracing::debug!(decision, emitted = outs.len(), "switch decision");
                outs
            } else {
                pipeline.process(port, &self.frame)
            };
            self.stats.pipeline_latency.observe(started.elapsed());
            for out in outs {
                if out.delay_us > 0 {
                    self.delayed.hold(out, now);
                } else if out.port == PORT_CPU {
                    to_cpu.push(out);
                } else if let Some(q) = self.outgoing.get_mut(usize::from(out.port)) {
                    q.push(out);
                }
            }
        }
        // The control plane takes its frames with the pipeline unlocked (it installs
        // table entries).
        drop(pipeline);
        for out in to_cpu {
            self.control.take_cpu_frame(&out.frame);
        }
    }

    /// Queue `outs` to be sent (or held, when delayed).
    fn queue(&mut self, outs: Vec<Emitted>) {
        let now = Instant::now();
        for out in outs {
            if out.delay_us > 0 {
                self.delayed.hold(out, now);
            } else {
                self.deliver(out);
            }
        }
    }

    /// A frame leaving now: to the control plane when the pipeline sent it to the CPU
    /// port (a flow's control answer or doorbell, `flow_punt`), else queued on its
    /// egress socket.
    fn deliver(&mut self, out: Emitted) {
        if out.port == PORT_CPU {
            self.control.take_cpu_frame(&out.frame);
        } else if let Some(q) = self.outgoing.get_mut(usize::from(out.port)) {
            q.push(out);
        }
    }

    /// Send every queued frame: one `sendmmsg` per egress port (per [`BATCH`] frames).
    fn flush(&mut self) {
        for (port, queue) in self.outgoing.iter_mut().enumerate() {
            if queue.is_empty() {
                continue;
            }
            let datagrams: Vec<(&[u8], SocketAddrV4)> = queue
                .iter()
                .filter_map(|out| {
                    let dport = out
                        .frame
                        .get(36..38)
                        .map(|b| u16::from_be_bytes([b[0], b[1]]))?;
                    let frame = EthernetFrame::parse_port(&out.frame, dport).ok()?;
                    Some((frame.roce, frame.dst))
                })
                .collect();
            let unsendable = (queue.len() - datagrams.len()) as u64;
            // Runs to peers that receive coalesced buffers leave as one send.
            let sock = &self.sockets[port];
            self.control
                .coalescing_peers()
                .mark(datagrams.iter().map(|&(_, to)| to), &mut self.marks);
            for (m, (_, to)) in self.marks.iter_mut().zip(&datagrams) {
                *m = *m && sock.may_segment_to(*to);
            }
            let segmented = sock.segmented_datagrams();
            let sent = match sock.send_batch_marked(&datagrams, &self.marks) {
                Ok(_) => datagrams.len() as u64,
                Err(error) => {
                    tracing::warn!(%error, port, "sending on a switch socket failed");
                    0
                }
            };
            self.stats.sent.fetch_add(sent, Ordering::Relaxed);
            self.stats
                .segmented
                .fetch_add(sock.segmented_datagrams() - segmented, Ordering::Relaxed);
            self.stats.send_errors.fetch_add(
                unsendable + (datagrams.len() as u64 - sent),
                Ordering::Relaxed,
            );
            drop(datagrams);
            queue.clear();
        }
    }

    /// Held frames that are due, the copies' next requests, and frames held back by
    /// reordering once the switch has been idle for [`HOLD_MAX`].
    fn timers(&mut self) {
        let now = Instant::now();
        if !self.delayed.is_empty() {
            let mut due = Vec::new();
            self.delayed.release_due(now, &mut due);
            for out in due {
                self.deliver(out);
            }
        }
        let copies = self.control.drive_copies();
        self.queue(copies);
        if self.last_packet.elapsed() >= HOLD_MAX {
            let held = self
                .pipeline
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .flush();
            self.queue(held);
        }
        self.flush();
    }
}
