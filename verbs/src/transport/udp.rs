//! The `udp` transport: soft RoCE, the RC protocol core over UDP sockets.
//!
//! One socket per worker thread serves all of that thread's queue pairs; incoming
//! datagrams are demultiplexed by destination QPN. Datagrams move in batches
//! (`sendmmsg`/`recvmmsg`): everything posted between two polls — by one batch or by
//! many tasks of the worker — leaves in one system call. Every packet is a real RoCEv2 packet with an ICRC computed over the
//! IPv4/UDP header the kernel puts on it, so captures decode as RoCE.
//!
//! A queue pair is bidirectional, as RC queue pairs are: besides its requester it can
//! receive SENDs from its peer's requester once given a receive queue
//! ([`UdpTransport::set_recv_queue`]). Incoming datagrams are then split by opcode:
//! requests go to the queue pair's responder, responses to its requester. The
//! responder has no registered memory, so one-sided requests to it are refused.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use rand::Rng;

use super::qpn_map::QpnMap;
use super::{ConnectError, QpHandle, Transport, TransportKind, TransportStats};
use crate::mem::MemoryTable;
use crate::net::{BATCH, BatchSocket};
use crate::rc::{MAX_PACKET, RcConfig, Requester, Responder};
use crate::recv::RecvQueue;
use crate::wire::{BTH_LEN, IcrcPath, Opcode, QPN_MASK};
use crate::wr::{Completion, PostError, WorkRequest};

/// How long a waiting worker busy-polls its socket before sleeping in the kernel.
pub const DEFAULT_BUSY_POLL: Duration = Duration::from_micros(50);

/// What the client side of a queue pair tells the memory node when connecting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalQpParams {
    /// Our queue pair number.
    pub qpn: u32,
    /// The first PSN we will send (the responder's expected PSN).
    pub psn: u32,
    /// The UDP address our datagrams come from.
    pub addr: SocketAddrV4,
    /// Our socket receives coalesced buffers (UDP GRO on loopback): the peer may send
    /// it segmented runs ([`crate::net::BatchSocket::send_batch_marked`]).
    pub coalesce: bool,
}

/// What the memory node answers: where its responder queue pair is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteQpParams {
    /// The memory node's soft-RoCE UDP address, as we send to it.
    pub addr: SocketAddrV4,
    /// Its queue pair number.
    pub qpn: u32,
    /// Its socket receives coalesced buffers (it said so when the queue pair was
    /// created): runs of requests to it may leave as one segmented send, when
    /// [`crate::net::BatchSocket::may_segment_to`] agrees. `false` is always safe.
    pub coalesce: bool,
}

struct UdpQp {
    requester: Requester,
    /// Receives the peer's SENDs, once the queue pair has a receive queue.
    responder: Option<Responder>,
    local: SocketAddrV4,
    remote: SocketAddrV4,
    /// Runs of datagrams to `remote` may be segmented.
    segment: bool,
}

/// Soft RoCE over one UDP socket.
pub struct UdpTransport {
    socket: BatchSocket,
    config: RcConfig,
    qps: Vec<UdpQp>,
    by_qpn: QpnMap<usize>,
    next_qpn: u32,
    rx_bufs: Vec<Vec<u8>>,
    rx_meta: Vec<(usize, SocketAddrV4)>,
    tx_bufs: Vec<Vec<u8>>,
    tx_lens: Vec<(usize, SocketAddrV4)>,
    /// Whether each datagram of `tx_lens` may be segmented with its neighbours.
    tx_segment: Vec<bool>,
    busy_poll: Duration,
    /// The last receive emptied the socket (it returned less than a full batch).
    drained: bool,
    /// `recvmmsg` calls made, for tests of the polling policy.
    receive_calls: u64,
    /// What a queue pair's responder may touch: nothing (one-sided requests to a
    /// client are refused).
    no_memory: MemoryTable,
    stats: TransportStats,
}

impl UdpTransport {
    /// A transport bound to `local_ip` on an ephemeral port.
    pub fn bind(local_ip: Ipv4Addr, config: RcConfig) -> Result<UdpTransport, ConnectError> {
        let mut socket =
            BatchSocket::bind(SocketAddrV4::new(local_ip, 0)).map_err(|e| ConnectError::Io {
                context: format!("binding a UDP socket on {local_ip}"),
                source: e,
            })?;
        socket.set_carries_roce(true);
        let packet = config.pmtu.bytes() as usize + 128;
        Ok(UdpTransport {
            socket,
            qps: Vec::new(),
            by_qpn: QpnMap::default(),
            next_qpn: rand::rng().random_range(0x100..0x80_0000),
            rx_bufs: (0..BATCH)
                .map(|_| vec![0u8; MAX_PACKET.max(packet)])
                .collect(),
            rx_meta: Vec::with_capacity(BATCH),
            tx_bufs: (0..BATCH)
                .map(|_| vec![0u8; MAX_PACKET.max(packet)])
                .collect(),
            tx_lens: Vec::with_capacity(BATCH),
            tx_segment: Vec::with_capacity(BATCH),
            busy_poll: DEFAULT_BUSY_POLL,
            drained: false,
            receive_calls: 0,
            no_memory: MemoryTable::new(),
            stats: TransportStats::default(),
            config,
        })
    }

    /// A transport bound to the local address the kernel uses to reach `remote`.
    pub fn for_remote(
        remote: SocketAddrV4,
        config: RcConfig,
    ) -> Result<UdpTransport, ConnectError> {
        let ip = BatchSocket::route_source(remote).map_err(|e| ConnectError::Io {
            context: format!("finding a route to {remote}"),
            source: e,
        })?;
        UdpTransport::bind(ip, config)
    }

    /// Set how long [`Transport::wait`] busy-polls before sleeping (zero: never spin).
    pub fn set_busy_poll(&mut self, spin: Duration) {
        self.busy_poll = spin;
    }

    /// The local socket address.
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.socket.local_addr()
    }

    /// The RC settings of new queue pairs.
    pub fn config(&self) -> &RcConfig {
        &self.config
    }

    /// Reserve a queue pair number and start PSN to exchange with the memory node.
    pub fn prepare(&mut self) -> LocalQpParams {
        let qpn = loop {
            let q = self.next_qpn & QPN_MASK;
            self.next_qpn = self.next_qpn.wrapping_add(1);
            if q != 0 && !self.by_qpn.contains_key(&q) {
                break q;
            }
        };
        LocalQpParams {
            qpn,
            psn: rand::rng().random_range(0..(1 << 24)),
            addr: self.socket.local_addr(),
            coalesce: self.socket.coalesces(),
        }
    }

    /// Create the queue pair prepared as `local`, connected to the responder `remote`.
    pub fn connect(
        &mut self,
        local: LocalQpParams,
        remote: RemoteQpParams,
    ) -> Result<QpHandle, ConnectError> {
        if self.by_qpn.contains_key(&local.qpn) {
            return Err(ConnectError::Invalid(format!(
                "queue pair {:#x} already exists",
                local.qpn
            )));
        }
        let path = IcrcPath::new(local.addr, remote.addr);
        let requester = Requester::new(self.config.clone(), local.qpn, remote.qpn, local.psn, path);
        self.qps.push(UdpQp {
            requester,
            responder: None,
            local: local.addr,
            remote: remote.addr,
            segment: remote.coalesce && self.socket.may_segment_to(remote.addr),
        });
        let handle = self.qps.len() - 1;
        self.by_qpn.insert(local.qpn, handle);
        Ok(handle)
    }

    /// Let queue pair `qp` receive SENDs from its peer into `recv` (or, with `None`,
    /// stop: later SENDs are refused). Until a queue pair has been given a receive
    /// queue, requests arriving on it are dropped (counted) and the peer's requester
    /// eventually fails with its retry count exceeded. `peer_psn` is the first PSN the peer's requester
    /// sends on this queue pair (its own `LocalQpParams::psn`). Replaces any responder
    /// the queue pair had.
    pub fn set_recv_queue(
        &mut self,
        qp: QpHandle,
        recv: Option<RecvQueue>,
        peer_psn: u32,
    ) -> Result<(), ConnectError> {
        let config = self.config.clone();
        let Some(q) = self.qps.get_mut(qp) else {
            return Err(ConnectError::Invalid(format!("no queue pair {qp}")));
        };
        let Some(recv) = recv else {
            if let Some(r) = q.responder.as_mut() {
                r.set_recv_queue(None);
            }
            return Ok(());
        };
        let path = IcrcPath::new(q.remote, q.local);
        let mut responder = Responder::new(
            config,
            q.requester.local_qpn(),
            q.requester.remote_qpn(),
            peer_psn,
            path,
        );
        responder.set_recv_queue(Some(recv));
        q.responder = Some(responder);
        Ok(())
    }

    /// The responder of a queue pair that receives SENDs (for inspection).
    pub fn responder(&self, qp: QpHandle) -> Option<&Responder> {
        self.qps.get(qp).and_then(|q| q.responder.as_ref())
    }

    /// The requester of a queue pair (for inspection).
    pub fn requester(&self, qp: QpHandle) -> Option<&Requester> {
        self.qps.get(qp).map(|q| &q.requester)
    }

    /// How many times the socket has been asked for datagrams (`recvmmsg` calls).
    pub fn receive_calls(&self) -> u64 {
        self.receive_calls
    }

    fn receive(&mut self, now: Instant) {
        self.drained = false;
        for _ in 0..8 {
            self.receive_calls += 1;
            let got = match self.socket.recv_batch(&mut self.rx_bufs, &mut self.rx_meta) {
                Ok(n) => n,
                Err(_) => return,
            };
            if got < BATCH {
                self.drained = true;
            }
            if got == 0 {
                return;
            }
            for (i, &(len, _from)) in self.rx_meta.iter().enumerate() {
                let Some(bytes) = self.rx_bufs.get(i).and_then(|b| b.get(..len)) else {
                    self.stats.dropped += 1;
                    continue;
                };
                if bytes.len() < BTH_LEN {
                    self.stats.dropped += 1;
                    continue;
                }
                let qpn = u32::from_be_bytes([0, bytes[5], bytes[6], bytes[7]]);
                let Some(&h) = self.by_qpn.get(&qpn) else {
                    self.stats.dropped += 1;
                    continue;
                };
                let Some(q) = self.qps.get_mut(h) else {
                    continue;
                };
                let request = Opcode::from_u8(bytes[0]).is_some_and(Opcode::is_request);
                match (request, q.responder.as_mut()) {
                    (true, Some(r)) => {
                        if r.handle_datagram(bytes, &self.no_memory).is_err() {
                            self.stats.dropped += 1;
                        }
                    }
                    // Drops (bad ICRC, malformed, a request nobody receives) are counted
                    // by the requester.
                    _ => {
                        let _ = q.requester.handle_datagram(now, bytes);
                    }
                }
            }
            if got < BATCH {
                return;
            }
        }
    }

    fn transmit(&mut self, now: Instant) {
        loop {
            self.tx_lens.clear();
            self.tx_segment.clear();
            for q in self.qps.iter_mut() {
                // Acknowledgements of the peer's SENDs first: they unblock its sender.
                if let Some(r) = q.responder.as_mut() {
                    while self.tx_lens.len() < BATCH {
                        let Some(buf) = self.tx_bufs.get_mut(self.tx_lens.len()) else {
                            break;
                        };
                        match r.poll_transmit(buf) {
                            Some(n) => {
                                self.tx_lens.push((n, q.remote));
                                self.tx_segment.push(q.segment);
                            }
                            None => break,
                        }
                    }
                }
                while self.tx_lens.len() < BATCH {
                    let Some(buf) = self.tx_bufs.get_mut(self.tx_lens.len()) else {
                        break;
                    };
                    match q.requester.poll_transmit(now, buf) {
                        Some(n) => {
                            self.tx_lens.push((n, q.remote));
                            self.tx_segment.push(q.segment);
                        }
                        None => break,
                    }
                }
            }
            if self.tx_lens.is_empty() {
                return;
            }
            // The batch's (bytes, destination) list lives on the stack: no allocation
            // per poll.
            let unused = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
            let datagrams: [(&[u8], SocketAddrV4); BATCH] =
                std::array::from_fn(|i| match (self.tx_lens.get(i), self.tx_bufs.get(i)) {
                    (Some(&(n, to)), Some(b)) => (b.get(..n).unwrap_or_default(), to),
                    _ => (&[][..], unused),
                });
            let count = self.tx_lens.len().min(BATCH);
            let segmented = self.socket.segmented_datagrams();
            if let Ok(calls) = self
                .socket
                .send_batch_marked(&datagrams[..count], &self.tx_segment)
            {
                self.stats.batched_sends += (count - calls.min(count)) as u64;
            }
            self.stats.segmented_sends += self.socket.segmented_datagrams() - segmented;
            if self.tx_lens.len() < BATCH {
                return;
            }
        }
    }
}

impl Transport for UdpTransport {
    fn wire_cost(&self, qp: QpHandle, wr: &WorkRequest) -> super::WireCost {
        let pmtu = self
            .qps
            .get(qp)
            .map_or(self.config.pmtu, |q| q.requester.config().pmtu);
        super::wire_cost(wr, pmtu)
    }

    fn kind(&self) -> TransportKind {
        TransportKind::Udp
    }

    fn post(&mut self, qp: QpHandle, batch: Vec<(u64, WorkRequest)>) -> Result<(), PostError> {
        let Some(q) = self.qps.get_mut(qp) else {
            return Err(PostError::QpError);
        };
        let room = q.requester.send_queue_room();
        if batch.len() > room {
            return Err(PostError::QueueFull(q.requester.outstanding()));
        }
        for (_, wr) in &batch {
            wr.validate()?;
        }
        for (wr_id, wr) in batch {
            q.requester.post(wr_id, wr)?;
        }
        // The doorbell: packets leave on the next `poll`, together with those of every
        // other batch posted since, in one `sendmmsg` (doorbell batching across tasks).
        self.stats.doorbells += 1;
        Ok(())
    }

    fn post_one(&mut self, qp: QpHandle, wr_id: u64, wr: WorkRequest) -> Result<(), PostError> {
        let Some(q) = self.qps.get_mut(qp) else {
            return Err(PostError::QpError);
        };
        // The requester checks the work request and its send queue's room.
        q.requester.post(wr_id, wr)?;
        self.stats.doorbells += 1;
        Ok(())
    }

    fn send_queue_room(&self, qp: QpHandle) -> usize {
        self.qps
            .get(qp)
            .map_or(0, |q| q.requester.send_queue_room())
    }

    fn poll(&mut self, now: Instant, out: &mut Vec<(QpHandle, Completion)>) -> usize {
        // Right after a receive that emptied the socket, requests waiting to go out are
        // sent without asking the socket again: the answers they wait for cannot be
        // there yet, and a `recvmmsg` that finds nothing costs as much as a small send.
        // The next poll (or the wait, which checks the socket first) receives, so
        // datagrams are never left behind for more than one poll.
        let send_first = self.drained
            && self.qps.iter().any(|q| {
                q.requester.wants_transmit()
                    || q.responder.as_ref().is_some_and(Responder::wants_transmit)
            });
        if send_first {
            self.drained = false;
        } else {
            self.receive(now);
        }
        for q in self.qps.iter_mut() {
            q.requester.handle_timeout(now);
        }
        self.transmit(now);
        let mut n = 0;
        for (h, q) in self.qps.iter_mut().enumerate() {
            while let Some(c) = q.requester.poll_completion() {
                out.push((h, c));
                n += 1;
            }
        }
        n
    }

    fn wait(&mut self, until: Instant) {
        let deadline = self
            .qps
            .iter()
            .filter_map(|q| q.requester.poll_timeout())
            .fold(until, |a, b| a.min(b));
        let timeout = deadline.saturating_duration_since(Instant::now());
        if timeout.is_zero() {
            return;
        }
        let _ = self
            .socket
            .wait_readable_spin(Some(timeout.min(Duration::from_secs(1))), self.busy_poll);
    }

    fn stats(&self) -> TransportStats {
        let mut s = self.stats;
        for q in &self.qps {
            let r = q.requester.stats();
            s.work_requests += r.posted;
            s.completions += r.completed;
            s.errors += r.failed;
            s.packets_sent += r.packets_sent;
            s.packets_received += r.packets_received;
            s.bytes_sent += r.bytes_sent;
            s.bytes_received += r.bytes_received;
            s.retransmissions += r.retransmitted_packets;
            s.timeouts += r.timeouts;
            s.naks += r.naks_sequence + r.naks_error + r.naks_rnr;
            s.dropped += r.dropped;
            if let Some(resp) = &q.responder {
                let rs = resp.stats();
                s.packets_sent += rs.packets_sent;
                s.bytes_sent += rs.bytes_sent;
                s.packets_received += rs.packets_in_sequence + rs.duplicates;
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wr::RemoteAddr;

    /// A transport with one queue pair towards a plain UDP socket that never answers.
    fn transport_and_silent_peer() -> (UdpTransport, QpHandle, std::net::UdpSocket) {
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let std::net::SocketAddr::V4(peer_addr) = peer.local_addr().unwrap() else {
            panic!("IPv4 expected");
        };
        let mut t = UdpTransport::bind(Ipv4Addr::LOCALHOST, RcConfig::default()).unwrap();
        let local = t.prepare();
        let qp = t
            .connect(
                local,
                RemoteQpParams {
                    addr: peer_addr,
                    qpn: 0x42,
                    coalesce: false,
                },
            )
            .unwrap();
        (t, qp, peer)
    }

    fn read() -> WorkRequest {
        WorkRequest::read(RemoteAddr::new(1, 0x1000), 64)
    }

    #[test]
    fn a_poll_after_an_emptying_receive_sends_without_receiving_again() {
        let (mut t, qp, peer) = transport_and_silent_peer();
        let mut out = Vec::new();
        let now = Instant::now();
        t.post(qp, vec![(1, read())]).unwrap();
        t.poll(now, &mut out);
        assert_eq!(t.receive_calls(), 1, "the first poll receives, then sends");
        t.post(qp, vec![(2, read())]).unwrap();
        t.poll(now, &mut out);
        assert_eq!(
            t.receive_calls(),
            1,
            "the socket was just emptied: send only"
        );
        // Both requests left.
        let mut buf = [0u8; 2048];
        peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        for _ in 0..2 {
            let (n, _) = peer.recv_from(&mut buf).unwrap();
            assert!(n >= BTH_LEN);
        }
        // With nothing to send, every poll receives.
        t.poll(now, &mut out);
        t.poll(now, &mut out);
        assert_eq!(t.receive_calls(), 3);
        assert!(out.is_empty());
    }

    #[test]
    fn receives_are_never_skipped_twice_in_a_row() {
        let (mut t, qp, _peer) = transport_and_silent_peer();
        let mut out = Vec::new();
        let now = Instant::now();
        for i in 0..6 {
            t.post(qp, vec![(i, read())]).unwrap();
            t.poll(now, &mut out);
        }
        // Six polls with something to send each time: receive, skip, receive, ...
        assert_eq!(t.receive_calls(), 3);
    }
}
